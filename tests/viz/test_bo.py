"""labkit.bo: acquisition formulas, the 1-D loop, the Optuna helpers, the figures and the stepper glue."""
import numpy as np
import pytest

from labkit.search import toy
from labkit.viz import bo as bov


def _assert_labelled(fig):
    assert fig.layout.title.text
    axes = [fig.layout[k] for k in fig.layout if k.startswith(("xaxis", "yaxis"))]
    titled = [a for a in axes if a.title.text]
    assert titled and all("(" in a.title.text for a in titled)      # units or "(unitless)"
    if len(fig.data) > 1:
        assert any(t.showlegend is not False for t in fig.data) and fig.layout.showlegend is not False


def test_figures_have_titles_labelled_axes_and_legends():
    h = toy.run_bo_1d("EI", n_iter=3, seed=0, grid_size=101)
    _assert_labelled(bov.bo_step_figure(h, 2))
    curves = {"EI": np.array([h.best_so_far, h.best_so_far]), "random": np.array([h.best_so_far] * 2)}
    _assert_labelled(bov.acquisition_comparison_figure(curves, toy.FORRESTER_F_MIN))
    runs = {"gp": np.array([[5.0, 1.0, 0.5]] * 2), "random": np.array([[5.0, 4.0, 2.0]] * 2)}
    _assert_labelled(bov.sampler_comparison_figure(runs, toy.BRANIN_F_MIN))
    fig = bov.sampler_comparison_figure(runs, toy.BRANIN_F_MIN)       # the legend under the plot, one entry a curve
    assert fig.layout.legend.orientation == "h" and sum(bool(t.showlegend is not False) for t in fig.data) == 2
    problem = toy.make_toy_skip_problem(n_layers=4, seed=0)
    rel = {"length_scale": np.linspace(0.1, 10, 8), "damage": problem.damage}
    _assert_labelled(bov.ard_relevance_figure(rel, problem.block_names))
    with pytest.raises(IndexError):
        bov.bo_step_figure(h, 3)
