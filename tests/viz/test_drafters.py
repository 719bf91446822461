"""labkit.viz.drafters: notebook 08's family map, drafter comparison, exit-layer, gate and early-exit figures, sized
to the column, every trace fed lists."""
import numpy as np
import pandas as pd
import plotly.graph_objects as go

from labkit.lessons.drafters import FAMILY_METHODS, LAB_CHAPTERS
from labkit.viz import drafters as vd
from labkit.viz.style import FIGURE_WIDTH


def check(fig):
    assert isinstance(fig, go.Figure) and fig.layout.title.text and len(fig.data) >= 1
    assert fig.layout.width is None or fig.layout.width <= FIGURE_WIDTH
    fig.to_json()                                                   # serialisable (what the browser receives)

def comparison_table():
    rows = [("plain", "plain", 1.0, np.nan, 1.0, 0, np.nan, np.nan),
            ("layer skip (searched)", "layer skip", 1.3, 0.7, 2.0, 0, np.nan, np.nan),
            ("early exit E=1", "early exit", 0.9, 0.3, 1.3, 0, np.nan, 1),
            ("early exit E=2", "early exit", 1.1, 0.6, 1.8, 0, np.nan, 2),
            ("separate model", "separate model", 1.2, 0.5, 1.7, 5000, np.nan, np.nan),
            ("layer skip (searched) + gate 0.4", "layer skip", 1.25, 0.8, 1.4, 0, 0.4, np.nan)]
    t = pd.DataFrame(rows, columns=["drafter", "family", "speedup", "acceptance", "tokens_per_step",
                                    "extra_parameters", "gate", "exit_layer"]).set_index("drafter")
    return t.assign(ms_per_token=5.0, ms_min=4.5, ms_max=5.5)

def test_drafter_figures():
    check(vd.family_map_figure(FAMILY_METHODS, LAB_CHAPTERS))
    table = comparison_table()
    fig = vd.drafter_comparison_figure(table)
    check(fig)
    drafters = [t for t in fig.data if not t.name.startswith("plain decoding")]     # the 1x line is labelled apart
    assert sum(len(t.x) for t in drafters) == len(table) - 1               # every drafter but plain, once
    assert any(t.name == "plain decoding (1x)" for t in fig.data)
    fig = vd.exit_layer_figure(table, {1: 0.2, 2: 0.5, 3: 1.0}, selected=2)
    check(fig)
    assert list(fig.data[0].marker.line.width) == [0, 3]
    lower = [t for t in fig.data if t.yaxis == "y2"]        # speedups share the lower panel, acceptance the upper
    assert any(t.name.startswith("plain decoding") for t in lower) and fig.data[0].yaxis in (None, "y")
    assert fig.data[-1].name == "selected E" and fig.data[-1].yaxis == "y2" and fig.data[0].width == 0.6
    ctl = pd.DataFrame({"prompts": ["s"] * 3, "arm": ["no gate", "gate", "random control"],
                        "threshold": [np.nan, 0.4, 0.4], "speedup": [1.0, 1.1, 0.9], "speedup_min": [0.9, 1.0, 0.8],
                        "speedup_max": [1.1, 1.2, 1.0], "gated_fraction": [0.0, 0.7, 0.68]})
    fig = vd.gate_control_figure(ctl)
    check(fig)
    assert [t.name for t in fig.data if t.showlegend is not False][:3] == ["no gate", "gate 0.4", "random control 0.4"]
    sweep = pd.DataFrame({"prompts": ["s"] * 3, "policy": ["p"] * 3, "threshold": [np.nan, 0.2, 0.6],
                          "speedup": [1.0, 1.1, 0.9], "acceptance": [0.5, 0.6, 0.7]})
    fig = vd.gate_sweep_figure(sweep)
    check(fig)
    assert list(fig.data[0].x) == [0.0, 0.2, 0.6] and list(fig.data[0].y) == [1.0, 1.1, 0.9]
    signal = pd.DataFrame({"prev_confidence": [0.1, 0.5, 0.9], "first_accepted": [False, True, True]})
    fig = vd.gate_signal_figure(signal, 0.3)
    check(fig)
    assert [list(t.x) for t in fig.data] == [[0.5, 0.9], [], [], [0.1]]
    prof = dict(ms_per_token=5.0, full_ms_per_token=1.0, early_ms_per_token=2.0, late_ms_per_token=1.0,
                outside_ms_per_token=1.0, first_layer_tokens=10, last_layer_tokens=10)
    check(vd.early_exit_profile_figure({"ours": prof, "theirs": {**prof, "first_layer_tokens": 20}}))
