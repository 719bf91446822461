"""labkit.viz.costs and labkit.viz.agreement: the figures of notebook 02, on tiny random models (shared pieces in
tests/tiny_probes.py)."""

import pytest

from labkit import SkipSet
from labkit.measure import agreement as agr
from labkit.measure.agreement import AgreementProbe
from labkit.measure.costs import analytic as ana
from labkit.measure.costs.analytic import predict
from labkit.measure.costs.costmodel import measure_cost_model
from labkit.viz import agreement as agrv
from labkit.viz import costs as costv
from labkit.viz.style import PALETTE

from tiny_models import ToyTokenizer
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


def test_single_block_figure(tiny):
    probe = AgreementProbe.from_prompts(tiny, ToyTokenizer(), ["def f(x):"], n_tokens=6)
    single = probe.single_block_agreement()
    fig = agrv.single_block_figure(single)
    assert list(fig.data[0].y) == ["attention", "MLP"] and len(fig.data[0].z[0]) == 4
    assert list(fig.data[0].z[1]) == list(single["mlp"])
    two = agrv.single_block_figure({"m1": single, "m2": single})
    assert list(two.data[0].y) == ["m1 · attention", "m1 · MLP", "m2 · attention", "m2 · MLP"]
    with pytest.raises(ValueError):
        agrv.single_block_figure({"m1": single, "m2": {"attention": [1.0], "mlp": [1.0]}})
    with pytest.raises(ValueError):
        agrv.single_block_figure({})


def test_redundancy_figure(paths):
    fig = agrv.redundancy_figure(paths, 4, band=(0.25, 0.65), band_label="trained")
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert [t.name for t in lines] == ["a", "b"] and list(lines[0].x) == list(range(9))
    assert fig.layout.shapes[0].x0 == 2.0 and fig.layout.shapes[0].x1 == pytest.approx(5.2)
    assert any("4 of 8 skipped" in a.text for a in fig.layout.annotations)
    assert [t.name for t in fig.data if t.mode == "markers"] == ["shaded: trained"]     # the band in the legend
    assert not any("trained" in (a.text or "") for a in fig.layout.annotations)
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
    assert len(agrv.redundancy_figure(paths, 4, mark_ratio=None).layout.shapes) == 0
    trained = SkipSet(attention=[1, 3], mlp=[2])
    fig = agrv.redundancy_figure(paths, 4, sets={"trained draft path": (trained, 0.75)})
    star = [t for t in fig.data if t.name == "trained draft path (75%)"]
    assert len(star) == 1 and list(star[0].x) == [3] and list(star[0].y) == [0.75]
    with pytest.raises(ValueError, match="layer index 4"):
        agrv.redundancy_figure(paths, 4, sets={"bad": (SkipSet(mlp=[4]), 0.5)})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        agrv.redundancy_figure(paths, 4, sets={"bad": (trained, 1.5)})


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


def test_token_comparison_html(tiny):
    c = agr.token_comparison(tiny, ToyTokenizer(), "def f(x):", SkipSet(attention=[1, 2, 3], mlp=[1, 2]), n_tokens=10)
    page = agrv.token_comparison_html(c, ToyTokenizer(), per_row=4, labels=("target", "drafter"))
    assert page.count("<table") == 3                         # 10 positions, 4 per table
    assert page.count(f"background:{PALETTE['accepted']};color:white\" title=") == sum(c.agree)
    assert page.count(f"background:{PALETTE['rejected']};color:white\" title=") == 10 - sum(c.agree)
    assert "target (greedy)" in page and "drafter, same prefix" in page and "drafter on its own" in page
    assert f"{sum(c.agree)} of 10 tokens agree" in page
    lt = ord("<") - 32                                         # a token that decodes to "<" is escaped
    assert "<td" in page and ">&lt;</td>" in agrv.token_comparison_html(
        agrv.TokenComparison([1], [lt], [lt], [lt], SkipSet()), ToyTokenizer())
    with pytest.raises(ValueError):
        agrv.token_comparison_html(c, ToyTokenizer(), per_row=0)


def test_verify_cost_in_steps():
    cm = toy_cost_model()
    assert costv.verify_cost_in_steps(cm, 1) == 1.0
    assert costv.verify_cost_in_steps(cm, 5) == pytest.approx(9.0 / 7.0)
    for bad, error in ((0, ValueError), (6, ValueError), (True, TypeError), (2.0, TypeError)):
        with pytest.raises(error, match="n_tokens must be an integer in"):
            costv.verify_cost_in_steps(cm, bad)


def test_elimination_frame_and_agreement_at_ratio(paths):
    df = agrv.elimination_frame(paths, 4)
    assert len(df) == 2 * 9
    a = df[df.model == "a"].reset_index(drop=True)
    assert a.loc[0, "agreement"] == 1.0 and a.loc[0, "n_skipped"] == 0 and a.loc[0, "added"] == ""
    assert list(a["n_skipped"]) == list(range(9)) and a.loc[8, "ratio"] == 1.0
    assert all(name.startswith(("attention ", "MLP ")) for name in a["added"][1:])
    assert len(set(a["added"][1:])) == 8                                  # each block removed once
    path = paths["a"]
    assert agrv.agreement_at_ratio(path, 4, 0.5) == path[3][1]
    assert agrv.agreement_at_ratio(path, 4, 0.0) == 1.0
    assert agrv.agreement_at_ratio(path, 4, 1.0) == path[-1][1]
    with pytest.raises(ValueError):
        agrv.agreement_at_ratio(path, 4, 1.5)
    with pytest.raises(ValueError):
        agrv.agreement_at_ratio(path[:2], 4, 0.5)                          # the path stops before 4 skipped
    with pytest.raises(ValueError):
        agrv.elimination_frame({"x": []}, 4)
    with pytest.raises(TypeError):
        agrv.elimination_frame({"x": [("attention 1", 0.5)]}, 4)
    with pytest.raises(ValueError):
        agrv.elimination_frame({"x": [(SkipSet(mlp=[7]), 0.5)]}, 4)        # layer 7 of a 4-layer model


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
