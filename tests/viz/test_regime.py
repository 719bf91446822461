"""labkit.viz.regime: every figure draws the rows it was given (the roofline's roofs from the ceilings, one trace per
regime and block, the diagonal and its band, c_v per model, the limit against α and γ, prediction beside
measurement)."""
from types import SimpleNamespace

import pytest

from labkit.measure.costs.roofline import Ceiling
from labkit.viz import regime as vr

CEILING = Ceiling(device="cpu", dtype="float32", threads=1, bandwidth_gbs=20.0, cache_gbs=100.0, gflops=80.0,
                  copy_mb=256.0, cache_copy_mb=4.0, cache_bytes=32 * 2 ** 20, matmul_n=1024)


def test_roofline_figure_draws_roofs_and_points():
    points = [{"regime": r, "block": b, "tokens": t, "intensity": 0.5 * t, "gflop_per_s": 5.0 * t, "ms": 1.0,
               "gb_per_s": 10.0, "bytes": 2 ** 20} for r in ("a", "b") for b in ("attention", "mlp") for t in (1, 8)]
    fig = vr.roofline_figure(points, {"fp32": CEILING, "bf16": CEILING})
    names = [t.name for t in fig.data]
    assert names[:3] == ["roofline fp32: 20 GB/s, 80 GFLOP/s", "roofline bf16: 20 GB/s, 80 GFLOP/s",
                         "cache roof fp32: 100 GB/s (a working set that fits the 32 MB cache)"]
    assert max(fig.data[0].y) == pytest.approx(80.0) and min(fig.data[0].y) < 80
    assert max(fig.data[2].y) == pytest.approx(80.0)
    assert len(fig.data) == 3 + 4 and list(fig.data[3].x) == [0.5, 4.0]
    assert fig.data[4].mode == "markers+text" and fig.data[3].mode == "markers"    # MLP blocks labelled
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    shown = [t.name for t in fig.data[3:] if t.showlegend is not False]
    assert shown == ["a", "b"] and fig.data[4].textposition != fig.data[6].textposition   # one entry per regime


def test_cost_figures():
    draft = {"m": [{"label": f"kept {k:.2f}", "kept": k, "c": k + 0.1, "c_min": k, "c_max": k + 0.2}
                   for k in (1.0, 0.5)] + [{"label": "draft set", "kept": 0.6, "c": 0.6, "c_min": 0.6, "c_max": 0.6}]}
    fig = vr.draft_cost_figure(draft)
    assert [t.name for t in fig.data] == ["c = kept ± 0.1", "c = kept (time ∝ blocks kept)", "m"]
    assert list(fig.data[2].x) == [0.5, 1.0] and list(fig.data[2].y) == [0.6, 1.1]        # the draft set left out
    verify = {"m": [{"tokens": t, "c_v": 1 + t / 10, "c_v_min": 1.0, "c_v_max": 2 + t} for t in (1, 2, 8)]}
    fig = vr.verify_cost_figure(verify)
    assert list(fig.data[0].x) == [1, 2, 8] and fig.data[1].name.startswith("c_v = 1")


def test_limit_figures():
    draft = [{"label": f"kept {k:.2f}", "kept": k, "c": k} for k in (1.0, 0.75, 0.5, 0.25)]
    verify = [{"tokens": 1, "c_v": 1.0}, {"tokens": 9, "c_v": 1.0}]
    fig = vr.limit_by_alpha_figure({"m": (draft, verify)}, 0.5, [0.5, 0.9])
    assert len(fig.data) == 2 and list(fig.data[0].y) == pytest.approx(list(fig.data[1].y))   # m is the ideal
    traces = vr.limit_gamma_data(draft, verify, 0.8, (0.75, 0.5), (1, 2, 3))
    assert [t["name"] for t in traces] == ["kept 0.75 (c = 0.75)", "kept 0.50 (c = 0.50)",
                                           "ideal, kept 0.75 (c = 0.75)", "ideal, kept 0.50 (c = 0.50)"]
    fig = vr.limit_gamma_figure(traces)
    assert [t.line.dash for t in fig.data] == ["solid", "solid", "dash", "dash"]


def test_calibration_figure():
    cal = SimpleNamespace(predicted_speedup=1.2, measured_speedup=1.1,
                          measured={"speedup_min": 1.0, "speedup_max": 1.3})
    fig = vr.calibration_figure({"a": cal, "b": cal})
    assert list(fig.data[0].y) == [1.2, 1.2] and list(fig.data[1].y) == [1.1, 1.1]
    assert list(fig.data[1].error_y.array) == pytest.approx([0.2, 0.2])


def test_anatomy_figure_stacks_every_part_per_configuration():
    from labkit.measure.costs.step_anatomy import PARTS

    parts = dict.fromkeys(PARTS, 0.5)
    fig = vr.anatomy_figure({"full": {"parts": parts}, "draft": {"parts": {**parts, "norms": 0.1}}})
    assert [t.name for t in fig.data] == list(PARTS) and fig.layout.barmode == "stack"
    assert list(fig.data[PARTS.index("norms")].x) == [0.5, 0.1] and list(fig.data[0].y) == ["full", "draft"]
    assert "this machine" in fig.layout.title.text
