"""labkit.viz.width: notebook 12's figures draw the rows they are given (one trace per series, the values as given),
and the explorer's data refuse a kept fraction that was not measured."""
import plotly.graph_objects as go
import pytest

from labkit.viz import width as fig

GRID = [{"draft": "depth", "kept": 1.0, "alpha": 0.9, "params": 0.57, "c": 0.55, "c_min": 0.5, "c_max": 0.6}] + [
    {"draft": d, "kept": k, "alpha": 0.8 + k / 10, "params": 0.4 + k / 2, "c": 0.5 + k, "c_min": 0.4 + k,
     "c_max": 0.7 + k} for k in (0.25, 0.5) for d in ("dynamic", "pruned", "depth + dynamic", "depth + pruned")]


def test_sparsity_and_recall_figures_draw_each_series():
    rows = [{"layer": i, "share": s, "median": 0.2 + s / 4, "p10": 0.1, "p90": 0.6, "tokens": 10}
            for i in range(3) for s in (0.5, 0.9)]
    f = fig.sparsity_figure(rows)
    assert isinstance(f, go.Figure) and len(f.data) == 2 and list(f.data[1].y) == [0.2 + 0.9 / 4] * 3
    recall = [{"layer": i, "kept": k, "k": 5, "predictor": 0.9, "static": 0.3} for i in range(3) for k in (0.1, 0.5)]
    f = fig.recall_figure(recall)
    assert len(f.data) == 4 and list(f.data[1].y) == [0.3] * 3 and f.data[1].line.dash == "dot"


def test_draft_data_keeps_the_depth_row_at_every_kept_fraction():
    traces = fig.draft_data(GRID, 0.5)
    assert [t["name"] for t in traces] == [name for _, name, _ in fig.DRAFT_BARS]
    assert traces[0]["x"] == ["depth", "dynamic", "pruned", "depth + dynamic", "depth + pruned"]
    assert traces[1]["y"][1] == 1.0 and traces[1]["error"][0][1] == pytest.approx(0.2)
    assert traces[0]["error"] is None
    with pytest.raises(ValueError, match="kept must be one of"):
        fig.draft_data(GRID, 0.75)
    f = fig.draft_figure(GRID, 0.25)
    assert len(f.data) == 3 and list(f.data[2].y) == [0.57, 0.525, 0.525, 0.525, 0.525]
    assert f.data[1].error_y.array is not None and fig.draft_figure(GRID, 0.25, errors=False).data[1].error_y.array \
        is None


def test_mlp_cost_and_speed_figures():
    rows = [{"kernel": k, "kept": f, "ratio": 0.5, "ratio_min": 0.4, "ratio_max": 0.7, "bytes": f}
            for f in (0.1, 0.25) for k in ("pruned", "gathered (with predictor)")]
    f = fig.mlp_cost_figure(rows)
    assert len(f.data) == 4 and list(f.data[1].y) == [0.1, 0.25] and list(f.data[0].x) == ["kept 0.1", "kept 0.25"]
    speed = [{"method": m, "source": s, "speedup": 1.1, "low": 1.0, "high": 1.2} for s in ("stdlib", "packages")
             for m in ("depth draft", "width pruned 0.5")]
    f = fig.speed_figure(speed)
    assert [t.name for t in f.data] == ["stdlib", "packages"] and list(f.data[0].error_y.array) == pytest.approx(
        [0.1, 0.1])
