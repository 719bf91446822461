"""labkit.bo: acquisition formulas, the 1-D loop, the Optuna helpers, the figures and the stepper glue."""

import numpy as np
import pytest

from labkit.lessons import bayesian_optimization as bol


@pytest.fixture(scope="module")
def stepper():
    return bol.BOStepper(n_iter=5, n_init=3, seed=1, acquisition="EI", xi=0.0)


def test_stepper_slider_moves_the_figure(stepper):
    fig, h = stepper.figure, stepper.history
    stepper.step_slider.value = 4                                         # the slider shows the title's step
    np.testing.assert_allclose(fig.data[3].y, h.mean[3])                 # GP mean of step 4 (index 3)
    np.testing.assert_allclose(fig.data[6].y, h.acquisition_values[3])
    assert len(fig.data[4].x) == 3 + 3                                    # points seen at step 3
    assert fig.data[5].x[0] == pytest.approx(h.next_x[3])
    assert "step 4 of 5" in fig.layout.title.text
    stepper.prev_button.click()
    assert stepper.step_slider.value == 3 and "step 3 of 5" in fig.layout.title.text
    np.testing.assert_allclose(fig.data[3].y, h.mean[2])
    for _ in range(10):
        stepper.next_button.click()
    assert stepper.step_slider.value == 5                                 # clamped at the last step


def test_stepper_knobs_rerun_bo_and_change_the_choices(stepper):
    stepper.step_slider.value = 5
    before = stepper.history.next_x.copy()
    stepper.xi_slider.value = 1.0                                         # much more exploration
    assert stepper.history.xi == 1.0
    assert not np.allclose(stepper.history.next_x, before)
    np.testing.assert_allclose(stepper.figure.data[3].y, stepper.history.mean[4])
    assert stepper.kappa_slider.disabled and not stepper.xi_slider.disabled
    stepper.acquisition_dropdown.value = "LCB"
    assert stepper.history.acquisition == "LCB" and stepper.xi_slider.disabled
    assert stepper.figure.layout.yaxis2.title.text.startswith("LCB")
    np.testing.assert_allclose(stepper.figure.data[6].y, stepper.history.acquisition_values[4])


def test_stepper_update_time_is_measured(stepper):
    ms = stepper.measure_update_ms()
    assert 0 < ms < 1000          # a generous bound; the notebook records the actual number
    assert "ms" in stepper.status.value
