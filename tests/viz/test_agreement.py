"""labkit.viz.agreement: agreement per block and along paths, and the token comparison (notebook 02), on tiny
random models (shared pieces in tests/tiny_probes.py)."""
import pytest

from labkit import SkipSet
from labkit.measure import agreement as agr
from labkit.measure.agreement import AgreementProbe
from labkit.viz import agreement as agrv
from labkit.viz.style import PALETTE

from tiny_models import ToyTokenizer
from tiny_probes import paths, tiny, toy_cost_model  # noqa: F401 (fixtures)


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
