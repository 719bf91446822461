"""Notebook 07's figures: the data they draw is the data they were given."""
import pandas as pd
import pytest

from labkit.measure.comparisons.adaptive import PLAIN
from labkit.viz.strategies import (
    acceptance_figure,
    agreement_figure,
    overhead_figure,
    set_timeline_figure,
    speedup_figure,
)
from labkit.viz.style import FIGURE_WIDTH

FRAME = pd.DataFrame({
    "source": ["stdlib"] * 3 + ["packages"] * 3,
    "method": [PLAIN, "static", "knapsack"] * 2,
    "speedup": [1.0, 1.3, 1.1, 1.0, 1.0, 1.2], "acceptance": [None, 0.9, 0.8, None, 0.7, 0.85],
    "limit": [None, 1.4, 1.2, None, 1.1, 1.3], "select_share": [None, 0.0, 0.05, None, 0.0, 0.07],
})


def test_bars_draw_every_method_per_source():
    for make in (acceptance_figure, speedup_figure, overhead_figure):
        fig = make(FRAME)
        bars = [t for t in fig.data if t.type == "bar"]
        assert [t.name for t in bars] == ["stdlib prompts", "packages prompts"]
        assert list(bars[0].x) == ["static", "knapsack"] and fig.layout.width <= FIGURE_WIDTH
    assert list(speedup_figure(FRAME).data[1].y) == [1.0, 1.2]
    assert list(overhead_figure(FRAME).data[1].y) == pytest.approx([0.0, 7.0])          # percent of decode time
    limits = [t for t in speedup_figure(FRAME).data if t.type == "scatter"]
    assert list(limits[0].y) == [1.4, 1.2]
    assert speedup_figure(FRAME).layout.xaxis.title.text == "how the draft's skip set is chosen"
    assert speedup_figure(FRAME, xaxis_title="draft weights").layout.xaxis.title.text == "draft weights"


def test_agreement_figure():
    agreement = pd.DataFrame({"source": ["stdlib", "packages"], "set": ["searched"] * 2, "agreement": [0.9, 0.7]})
    fig = agreement_figure(agreement)
    assert [list(t.y) for t in fig.data] == [[0.9], [0.7]]


def test_set_timeline_figure_rows_are_blocks():
    matrix = [[1, 0, -1], [0, 0, -1], [1, 1, -1], [0, 1, -1]]      # L = 2: attention 0, 1, MLP 0, 1
    fig = set_timeline_figure([0, 1, 2], matrix, 2)
    heat = fig.data[0]
    assert list(heat.y) == ["attention 0", "attention 1", "MLP 0", "MLP 1"]
    assert [list(r) for r in heat.z] == matrix and heat.customdata[0][2] == "no self-draft"
    assert fig.layout.width <= FIGURE_WIDTH and not fig.layout.shapes
    joined = set_timeline_figure([0, 1, 2], matrix, 2, boundaries=[2])       # two prompts end to end
    assert [shape.x0 for shape in joined.layout.shapes] == [1.5]


def test_value_labels_stay_off_the_reference_lines():
    bars = [t for t in overhead_figure(FRAME.assign(select_share=[None, 0.095, 0.02, None, 0.0, 0.07])).data
            if t.type == "bar"]
    assert list(bars[0].textposition) == ["inside", "outside"]          # 9.5 % would print on the 10 % line
    assert list(bars[1].textposition) == ["outside", "outside"]
    spread = FRAME.assign(speedup_min=FRAME["speedup"] - 0.1, speedup_max=FRAME["speedup"] + 0.1)
    assert {t.insidetextanchor for t in speedup_figure(spread).data if t.type == "bar"} == {"start"}   # the base
