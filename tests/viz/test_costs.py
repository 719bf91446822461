"""labkit.viz.costs: the cost figures of notebook 02 (block costs, verify cost, predicted cost along paths), on tiny
random models (shared pieces in tests/tiny_probes.py)."""
import pytest

from labkit.measure.costs import analytic as ana
from labkit.measure.costs.analytic import predict
from labkit.measure.costs.costmodel import measure_cost_model
from labkit.viz import costs as costv

from tiny_probes import paths, tiny, toy_cost_model  # noqa: F401 (fixtures)


def test_cost_breakdown_figure_stacks_every_block():
    cm = toy_cost_model()                               # every layer at the same cost: one layer and all of them
    fig = costv.cost_breakdown_figure(cm)
    assert fig.layout.barmode == "stack" and len(fig.data) == 4
    fixed, att, mlp, over = fig.data
    assert list(att.x) == ["fixed", "one layer", "all 4 layers"]
    assert fixed.y[0] == 1.0 and list(att.y[1:]) == [0.5, 2.0] and list(mlp.y[1:]) == [0.75, 3.0]
    assert list(over.y[1:]) == [0.25, 1.0]
    assert "7.00 ms" in fig.layout.title.text and "pooled" in fig.layout.title.text
    assert "attention block (2.00 ms in all, 29%)" == att.name
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
    assert "10 skip sets" in fig.layout.title.text and "scatter" not in fig.layout.title.text   # equal bars
    cm.attention_ms = [0.0, 0.5, 0.5, 1.0]
    fig = costv.cost_breakdown_figure(cm)                # layers that differ: one bar each and their mean
    assert "single layers scatter" in fig.layout.title.text
    assert list(fig.data[1].x) == ["fixed", "0", "1", "2", "3", "mean layer"]
    assert list(fig.data[1].y[1:]) == [0.0, 0.5, 0.5, 1.0, 0.5]


def test_cost_figures_accept_a_measured_cost_model(tiny):
    cm = measure_cost_model(tiny, context=16, repeats=1, warmup=1, max_draft=4, n_sets=6)
    assert len(costv.cost_breakdown_figure(cm).data) == 4
    fig = costv.verify_cost_figure(cm)
    assert len(fig.data) == 3

def test_verify_cost_figure():
    cm = toy_cost_model()
    fig = costv.verify_cost_figure(cm, highlight=5)
    names = [t.name for t in fig.data]
    assert any("separate" in n for n in names) and any("measured" in n for n in names)
    line = fig.data[-1]
    assert list(line.x) == [1, 2, 3, 4, 5] and line.y[0] == 1.0
    assert "verifying 5 tokens costs 1.3 one-token steps" in fig.layout.annotations[0].text
    cm.fit.pop("verify_raw_ms")
    assert len(costv.verify_cost_figure(cm).data) == 2                      # no raw medians: the line only

def test_path_optima_and_predicted_cost_figure(paths):
    cm = toy_cost_model()
    best = ana.path_optima(cm, paths)
    assert list(best.index) == ["a", "b"]
    for name in paths:
        frame = costv.predicted_cost_frame(cm, paths[name])
        assert best.loc[name, "ms_per_token"] == pytest.approx(frame["ms_per_token"].min())
        assert best.loc[name, "speedup"] == pytest.approx(cm.full_step_ms / best.loc[name, "ms_per_token"])
    fig = costv.predicted_cost_figure(cm, paths, alphas=(0.6, 0.8, 0.9))
    assert len(fig.data) == 3 + 2 * 2 + 1                   # fixed-alpha lines, a line and a star per model, plain
    assert list(fig.data[-1].y) == [cm.full_step_ms] * 2 and "plain decoding" in fig.data[-1].name
    assert "ms per generated token" in fig.layout.yaxis.title.text
    with pytest.raises(ValueError):
        costv.predicted_cost_figure(cm, {})

def test_verify_cost_in_steps():
    cm = toy_cost_model()
    assert costv.verify_cost_in_steps(cm, 1) == 1.0
    assert costv.verify_cost_in_steps(cm, 5) == pytest.approx(9.0 / 7.0)
    for bad, error in ((0, ValueError), (6, ValueError), (True, TypeError), (2.0, TypeError)):
        with pytest.raises(error, match="n_tokens must be an integer in"):
            costv.verify_cost_in_steps(cm, bad)

def test_predicted_cost_frame_matches_predict(paths):
    cm = toy_cost_model()
    df = costv.predicted_cost_frame(cm, paths["a"], alphas=(0.5, 0.9), label="a")
    assert len(df) == 9 * 3
    measured = df[df.alpha_source == "measured"].reset_index(drop=True)
    assert measured.loc[0, "alpha"] == 1.0 and measured.loc[0, "n_skipped"] == 0
    skip, alpha = paths["a"][2]
    p = predict(cm, skip, alpha)
    row = measured[measured.n_skipped == 3].iloc[0]
    assert row["ms_per_token"] == pytest.approx(p.ms_per_token) and row["gamma"] == p.gamma
    fixed = df[(df.alpha_source == "fixed") & (df.alpha == 0.9)]
    assert list(fixed["ms_per_token"]) == sorted(fixed["ms_per_token"], reverse=True)   # fixed alpha: skipping pays
