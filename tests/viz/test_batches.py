"""Notebook 13's figures draw what they are given: one line per method in both panels with its error bars, the
prediction beside the measurement with the break-even line, and the γ explorer's three traces."""
import pytest

from labkit.viz import batches as figures


def rows():
    out = []
    for b, s in ((1, 1.4), (4, 1.0), (16, 0.7)):
        for method, speedup in (("plain loop", 1.0), ("always on", s), ("load policy", max(s, 1.0))):
            tps = 250.0 * b ** 0.7 * speedup
            out.append({"batch": b, "method": method, "tokens_per_s": tps, "low": 0.9 * tps, "high": 1.1 * tps,
                        "latency_ms": 1e3 * b / tps, "speedup": speedup, "speedup_low": speedup - 0.05,
                        "speedup_high": speedup + 0.05})
    return out


def test_the_throughput_figure_draws_every_method_in_both_panels():
    fig = figures.throughput_figure(rows())
    assert len(fig.data) == 6 and [t.name for t in fig.data[::2]] == ["plain loop", "always on", "load policy"]
    assert list(fig.data[2].x) == [1, 4, 16] and fig.data[2].y[0] == pytest.approx(350.0)
    assert fig.data[2].error_y.array[0] == pytest.approx(35.0)
    assert fig.layout.xaxis.type == "log" and fig.data[3].y[0] == pytest.approx(1e3 / 350.0)
    with pytest.raises(ValueError, match="rows"):
        figures.throughput_figure([])


def test_the_prediction_figure_sets_the_calibration_beside_the_measurement():
    predicted = [{"batch": b, "speedup": s, "best_gamma": g} for b, s, g in ((1, 1.5, 4), (4, 1.3, 3), (16, 1.05, 2))]
    fig = figures.prediction_figure(rows(), predicted)
    assert [t.name for t in fig.data] == ["always on, measured", "load policy, measured",
                                          "calibration's prediction, best γ"]
    assert list(fig.data[2].y) == [1.5, 1.3, 1.05] and fig.layout.shapes[0].y0 == 1.0


def test_the_gamma_explorer_traces_follow_gamma():
    predicted = {1: [1.2, 1.1, 0.9], 4: [1.5, 1.0, 0.6]}
    traces = figures.gamma_data(predicted, [1, 4, 16], 4, rows())
    assert traces[0]["y"] == [1.5, 1.0, 0.6] and traces[1]["y"] == [1.5, 1.1, 0.9]
    assert traces[2]["y"] == [1.4, 1.0, 0.7]
    fig = figures.gamma_figure(traces)
    assert len(fig.data) == 3 and fig.layout.title.text == "predicted S(B, γ = 4)"
    with pytest.raises(ValueError, match="gamma"):
        figures.gamma_data(predicted, [1, 4, 16], 2, rows())
