"""Lookahead figures: the pool line and accepted bars follow the history, the mask heatmap is the engine's combined
mask, the sweep draws one line per N."""
from labkit.core.lookahead import combined_mask
from labkit.viz.lookahead import combined_mask_figure, pool_figure, window_sweep_figure


def test_figures_follow_their_data():
    history = [{"accepted": [], "pool": 2}, {"accepted": [4, 5], "pool": 4}]
    fig = pool_figure(history)
    assert list(fig.data[0].y) == [0, 2] and list(fig.data[1].y) == [2, 4] and fig.layout.title.text
    parents = [-1, 0, -1]
    fig = combined_mask_figure(parents, 2, 3)
    visible, _ = combined_mask(parents, 2, 3)
    assert fig.data[0].z == tuple(map(tuple, visible.int().tolist())) or list(map(list, fig.data[0].z)) == \
        visible.int().tolist()
    assert len(fig.data[0].x) == 1 + len(parents) + 6 and fig.layout.title.text
    rows = [{"W": w, "N": n, "tokens_per_forward": 1 + w / 10} for n in (3, 4) for w in (1, 2)]
    fig = window_sweep_figure(rows)
    assert [t.name for t in fig.data] == ["N = 3", "N = 4"] and list(fig.data[0].x) == [1, 2]


def test_draftless_figure_leaves_the_reference_out():
    import pandas as pd

    from labkit.viz.lookahead import draftless_figure

    frame = pd.DataFrame({"tokens_per_step": [float("nan"), 1.5], "c_v": [float("nan"), 1.1],
                          "limit": [float("nan"), 1.36], "speedup": [1.0, 1.2]}, index=["plain loop", "lookup"])
    fig = draftless_figure(frame)
    assert [list(t.x) for t in fig.data] == [["lookup"]] * 4 and [t.y[0] for t in fig.data] == [1.5, 1.1, 1.36, 1.2]
