"""labkit.bo: acquisition formulas, the 1-D loop, the Optuna helpers, the figures and the stepper glue."""
import math

import numpy as np
import pytest

from labkit import bo


def _phi(z):   # standard normal pdf, by hand
    return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def _Phi(z):   # standard normal cdf, by hand
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


# -- test functions ----------------------------------------------------------------------------
def test_forrester_and_branin_known_minima():
    assert bo.forrester(bo.FORRESTER_X_MIN) == pytest.approx(-6.0207, abs=1e-4)
    assert bo.FORRESTER_X_MIN == pytest.approx(0.7572, abs=1e-4)
    assert bo.forrester(np.linspace(0, 1, 2001)).min() >= bo.FORRESTER_F_MIN - 1e-9
    for x1, x2 in bo.BRANIN_MINIMA:
        assert bo.branin(x1, x2) == pytest.approx(0.397887, abs=1e-6)
    grid = np.meshgrid(np.linspace(-5, 10, 301), np.linspace(0, 15, 301))
    assert bo.branin(*grid).min() >= bo.BRANIN_F_MIN - 1e-9


# -- acquisitions ------------------------------------------------------------------------------
def test_expected_improvement_matches_hand_computed_values():
    # mu = best, sigma = 1, xi = 0: I = 0, z = 0 -> EI = phi(0) = 0.398942
    assert bo.expected_improvement(0.0, 1.0, best=0.0, xi=0.0) == pytest.approx(0.3989423, abs=1e-6)
    # mu = 1, sigma = 2, best = 0, xi = 0.5: I = -1.5, z = -0.75
    #   EI = -1.5 * Phi(-0.75) + 2 * phi(-0.75) = -1.5 * 0.2266274 + 2 * 0.3011374 = 0.2623337
    assert bo.expected_improvement(1.0, 2.0, best=0.0, xi=0.5) == pytest.approx(0.2623337, abs=1e-6)
    hand = -1.5 * _Phi(-0.75) + 2 * _phi(-0.75)
    assert bo.expected_improvement(1.0, 2.0, best=0.0, xi=0.5) == pytest.approx(hand, rel=1e-12)
    # mu well below best: EI ~ the improvement itself, I = 3 - 0.01
    assert bo.expected_improvement(-3.0, 0.1, best=0.0, xi=0.01) == pytest.approx(2.99, abs=1e-6)


def test_expected_improvement_is_zero_where_certain_and_worse():
    mu = np.array([1.0, 2.0, -1.0, 0.5])
    sigma = np.array([0.0, 0.0, 0.0, 0.3])
    ei = bo.expected_improvement(mu, sigma, best=0.0, xi=0.0)
    assert ei[0] == 0.0 and ei[1] == 0.0              # sigma = 0 and mu > best
    assert ei[2] == pytest.approx(1.0)                # sigma = 0, mu < best: the sure improvement
    assert ei[3] > 0 and np.all(ei >= 0)
    # larger xi never increases EI
    assert np.all(bo.expected_improvement(mu, sigma, 0.0, xi=0.5) <= ei + 1e-12)


def test_lower_confidence_bound_matches_hand_computed_values():
    assert bo.lower_confidence_bound(1.0, 0.5, kappa=2.0) == pytest.approx(0.0)
    assert bo.lower_confidence_bound(-2.0, 3.0, kappa=0.0) == pytest.approx(-2.0)
    np.testing.assert_allclose(bo.lower_confidence_bound([0.0, 1.0], [1.0, 0.1], kappa=3.0), [-3.0, 0.7])


def test_fit_gp_interpolates_observations_and_ard_has_one_length_scale_per_variable():
    x = np.array([0.1, 0.4, 0.6, 0.9])
    gp = bo.fit_gp(x, bo.forrester(x))
    mu, sigma = gp.predict(x[:, None], return_std=True)
    np.testing.assert_allclose(mu, bo.forrester(x), atol=1e-2)
    assert np.all(sigma < 0.05)
    Z = np.random.default_rng(0).integers(0, 2, (20, 5)).astype(float)
    ard = bo.fit_gp(Z, Z @ np.array([5.0, 0.0, 0.0, 0.0, 1.0]), ard=True)
    assert np.atleast_1d(ard.kernel_.k2.length_scale).shape == (5,)


# -- the 1-D loop ------------------------------------------------------------------------------
def test_run_bo_1d_history_shapes_and_bookkeeping():
    h = bo.run_bo_1d("EI", n_iter=4, seed=0, n_init=3, grid_size=101)
    assert h.mean.shape == h.std.shape == h.acquisition_values.shape == (4, 101)
    assert len(h.x_observed) == len(h.y_observed) == 7 and h.n_iter == 4
    np.testing.assert_allclose(h.x_observed[3:], h.next_x)      # the chosen point is evaluated next
    np.testing.assert_allclose(h.y_observed, bo.forrester(h.x_observed))
    assert np.all(np.diff(h.best_so_far) <= 0) and h.gap >= -1e-9
    assert h.next_x[0] == h.grid[np.argmax(h.acquisition_values[0])]
    assert "mean" not in repr(h)                               # arrays stay out of the repr
    with pytest.raises(ValueError):
        bo.run_bo_1d("PI", n_iter=1)


def test_bo_on_forrester_gets_within_005_of_the_minimum():
    gaps = []
    for seed in (0, 1, 2):
        gaps.append(bo.run_bo_1d("EI", n_iter=15, seed=seed).gap)
        if gaps[-1] < 0.05:
            break
    assert min(gaps) < 0.05, gaps


def test_lcb_chooses_argmin_and_random_baseline_shares_the_initial_design():
    h = bo.run_bo_1d("LCB", n_iter=2, kappa=2.0, seed=3, grid_size=101)
    assert h.next_x[0] == h.grid[np.argmin(h.acquisition_values[0])]
    np.testing.assert_allclose(h.acquisition_values[0], h.mean[0] - 2.0 * h.std[0])
    random = bo.best_so_far_1d("random", n_iter=2, seed=3)
    assert random[2] == pytest.approx(h.best_so_far[2])        # same 3 initial points


# -- Optuna ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", ["RandomSampler", "TPESampler", "GPSampler"])
def test_optuna_best_so_far_is_monotone_with_the_right_length(sampler):
    n_trials = 12 if sampler == "GPSampler" else 15
    curve = bo.optuna_best_so_far(sampler, n_trials=n_trials, seed=0)
    assert curve.shape == (n_trials,)
    assert np.all(np.diff(curve) <= 0) and curve[-1] >= bo.BRANIN_F_MIN - 1e-9
    with pytest.raises(ValueError):
        bo.optuna_best_so_far("CmaEsSamplr", 1, 0)


def test_suggest_skip_mask_uses_integers_in_skipset_order():
    import optuna

    trial = optuna.trial.FixedTrial({"attn_0": 1, "attn_1": 0, "mlp_0": 0, "mlp_1": 1})
    assert bo.suggest_skip_mask(trial, 2) == [True, False, False, True]
    from labkit.skip import SkipSet
    assert SkipSet.from_mask(bo.suggest_skip_mask(trial, 2)) == SkipSet(attention=[0], mlp=[1])


def test_toy_skip_problem_ends_are_plain_decoding_and_the_middle_is_faster():
    problem = bo.make_toy_skip_problem(n_layers=4, seed=0)
    full_ms = problem.block_ms.sum()
    assert problem.ms_per_token(np.zeros(8)) == pytest.approx(full_ms)     # alpha = 1
    assert problem.ms_per_token(np.ones(8)) == pytest.approx(full_ms, rel=1e-3)   # alpha ~ 0
    best, mask = problem.brute_force_minimum()
    assert best < full_ms and mask.shape == (8,)
    assert problem.block_names[0] == "attn 0" and problem.block_names[4] == "mlp 0"
    with pytest.raises(ValueError):
        bo.make_toy_skip_problem(n_layers=3)


def test_ard_hit_rate_counts_important_blocks_among_the_shortest_length_scales():
    damage = np.array([2.0, 0.0, 1.5, 0.01])
    assert bo.ard_hit_rate({"length_scale": np.array([0.1, 50.0, 0.2, 9.0]), "damage": damage}) == 1.0
    assert bo.ard_hit_rate({"length_scale": np.array([0.1, 0.05, 9.0, 50.0]), "damage": damage}) == 0.5


# -- figures -----------------------------------------------------------------------------------
def _assert_labelled(fig):
    assert fig.layout.title.text
    axes = [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))]
    titled = [a for a in axes if a.title.text]
    assert titled and all("(" in a.title.text for a in titled)      # units or "(unitless)"
    if len(fig.data) > 1:
        assert any(t.showlegend is not False for t in fig.data) and fig.layout.showlegend is not False


def test_figures_have_titles_labelled_axes_and_legends():
    h = bo.run_bo_1d("EI", n_iter=3, seed=0, grid_size=101)
    _assert_labelled(bo.bo_step_figure(h, 2))
    curves = {"EI": np.array([h.best_so_far, h.best_so_far]), "random": np.array([h.best_so_far] * 2)}
    _assert_labelled(bo.acquisition_comparison_figure(curves))
    runs = {"GPSampler": np.array([[5.0, 1.0, 0.5]] * 2), "RandomSampler": np.array([[5.0, 4.0, 2.0]] * 2)}
    _assert_labelled(bo.sampler_comparison_figure(runs))
    problem = bo.make_toy_skip_problem(n_layers=4, seed=0)
    rel = {"length_scale": np.linspace(0.1, 10, 8), "damage": problem.damage}
    _assert_labelled(bo.ard_relevance_figure(rel, problem.block_names))
    with pytest.raises(IndexError):
        bo.bo_step_figure(h, 3)


# -- the stepper glue --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stepper():
    return bo.BOStepper(n_iter=5, n_init=3, seed=1, acquisition="EI", xi=0.0)


def test_stepper_slider_moves_the_figure(stepper):
    fig, h = stepper.figure, stepper.history
    stepper.step_slider.value = 3
    np.testing.assert_allclose(fig.data[3].y, h.mean[3])                 # GP mean of step 3
    np.testing.assert_allclose(fig.data[6].y, h.acquisition_values[3])
    assert len(fig.data[4].x) == 3 + 3                                    # points seen at step 3
    assert fig.data[5].x[0] == pytest.approx(h.next_x[3])
    assert "step 4 of 5" in fig.layout.title.text
    stepper.prev_button.click()
    assert stepper.step_slider.value == 2
    np.testing.assert_allclose(fig.data[3].y, h.mean[2])
    for _ in range(10):
        stepper.next_button.click()
    assert stepper.step_slider.value == 4                                 # clamped at the last step


def test_stepper_knobs_rerun_bo_and_change_the_choices(stepper):
    stepper.step_slider.value = 4
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
