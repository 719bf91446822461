"""labkit.viz.search: the search's figures (optimisation history, block importances, skip masks, sampler comparison,
modelled vs measured, speedup dots), on hand-made studies and results: each draws what it is given."""
import math

import optuna
import pytest

from labkit import SkipSet
from labkit.search import param_names, params_from_skip
from labkit.viz.search import (
    best_so_far_figure,
    optimization_history,
    param_importances,
    rank_scatter,
    skip_mask_heatmap,
    speedup_dots_figure,
)

SETS = [SkipSet(), SkipSet(attention=[1, 3]), SkipSet(attention=[1], mlp=[3]), SkipSet(mlp=[0, 1, 2]),
        SkipSet(attention=[0, 2], mlp=[2]), SkipSet(attention=[3])]


def study(feasible=lambda skip: True) -> optuna.Study:
    """An in-memory study of 4-layer skip sets: ms per token = 1 + 0.1 per block skipped + 0.3 per attention block."""
    out = optuna.create_study(study_name="hand-made", direction="minimize")
    space = {name: optuna.distributions.IntDistribution(0, 1) for name in param_names(4)}
    for skip in SETS:
        value = 1 + 0.1 * skip.n_skipped + 0.3 * len(skip.attention)
        out.add_trial(optuna.trial.create_trial(params=params_from_skip(skip, 4), distributions=space, value=value,
                                                user_attrs={"eval": {"feasible": feasible(skip)}}))
    return out


def test_search_figures_have_titles_labelled_axes_and_legends():
    curves = {"gp": [[3.0, 2.0, 2.0], [2.5, 2.5, 1.5]], "random": [[3.0, 3.0, 2.8]]}
    rank = {"spearman_rho": 0.5, "rows": [{"modelled_ms": 1.0 + i, "measured_ms": 2.0 - i, "ratio": i / 8,
                                            "skip": SETS[i].to_dict(), "alpha": 0.9} for i in range(3)]}
    figures = [optimization_history(study(), baseline_ms=1.0), param_importances(study()),
               skip_mask_heatmap(SkipSet(attention=[1]), 4),
               skip_mask_heatmap({"a": SkipSet(), "b": SkipSet.all(4)}, 4),
               best_so_far_figure(curves, baseline_ms=1.0), rank_scatter(rank)]
    for fig in figures:
        assert fig.layout.title.text and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
        if len(fig.data) > 1:
            assert fig.layout.showlegend is not False
    assert "rho 0.50" in figures[-1].layout.title.text and list(figures[-1].data[0].x) == [1.0, 2.0, 3.0]


def test_skip_mask_rows_are_attention_then_mlp_per_set():
    fig = skip_mask_heatmap({"a": SkipSet(attention=[1]), "b": SkipSet(mlp=[0, 3])}, 4)
    assert list(fig.data[0].y) == ["a | attention", "a | MLP", "b | attention", "b | MLP"]
    assert [list(row) for row in fig.data[0].z] == [[0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 1]]
    assert "1 of 8 blocks skipped" in skip_mask_heatmap(SkipSet(attention=[1]), 4).layout.title.text
    with pytest.raises(ValueError, match="no skip set to draw"):
        skip_mask_heatmap({}, 4)


def test_best_so_far_draws_the_median_and_the_band_over_seeds():
    fig = best_so_far_figure({"gp": [[3.0, 2.0, 1.0], [5.0, 4.0, 3.0], [4.0, 3.0, 2.0]]}, band="minmax")
    band, median = fig.data
    assert list(median.y) == [4.0, 3.0, 2.0] and "median over 3 seeds" in median.name
    assert list(band.y) == [5.0, 4.0, 3.0, 1.0, 2.0, 3.0]                       # max forwards, then min backwards
    iqr = best_so_far_figure({"gp": [[3.0], [5.0], [4.0]]}, band="iqr").data[0]
    assert list(iqr.y) == [4.5, 3.5]
    with pytest.raises(ValueError, match="band must be"):
        best_so_far_figure({"gp": [[1.0]]}, band="sd")


def test_the_history_leaves_out_penalised_trials_from_the_best_line():
    fig = optimization_history(study(feasible=lambda skip: skip.n_skipped >= 2), title="t")
    best = next(t for t in fig.data if t.name == "Best Value (in the ratio bucket)")
    feasible = [1 + 0.1 * s.n_skipped + 0.3 * len(s.attention) for s in SETS if s.n_skipped >= 2]
    assert list(best.x) == [1, 2, 3, 4, 5] and best.y[-1] == pytest.approx(min(feasible))
    assert not any(math.isnan(y) for y in best.y)


def test_speedup_dots_figure_draws_the_summary():
    summary = {"a": {"speedup": 1.5, "low": 1.4, "high": 1.6}, "b": {"speedup": 0.9, "low": 0.8, "high": 1.0}}
    fig = speedup_dots_figure(summary, title="t")
    dots = fig.data[0]
    assert dots.type == "scatter" and dots.mode == "markers"     # dots: a bar from a non-zero baseline misleads
    assert list(dots.y) == ["a", "b"] and list(dots.x) == pytest.approx([1.5, 0.9])
    assert list(fig.layout.yaxis.ticktext) == ["a: 1.50x", "b: 0.90x"]
    assert (list(dots.error_x.array) == pytest.approx([0.1, 0.1])
            and list(dots.error_x.arrayminus) == pytest.approx([0.1, 0.1]))
    assert fig.layout.xaxis.range[0] == pytest.approx(0.7)                 # starts near the lowest range, not at 0
