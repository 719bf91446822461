"""labkit.viz.bench: the benchmark's bars, from the committed results."""
from labkit.measure.bench.run import load_results
from labkit.viz.bench import bench_figure, teaching_rows


def test_bench_figure_keeps_the_teaching_rows_against_the_plain_loop():
    rows = load_results()["greedy"]
    shown = teaching_rows(rows)
    assert 3 <= len(shown) <= 10 and shown[0]["method"].endswith("plain loop") and shown[0]["speedup"] == 1.0
    assert all(r["speedup_lo"] <= r["speedup"] <= r["speedup_hi"] for r in shown)
    fig = bench_figure(rows)
    assert sum(len(t.y) for t in fig.data) == len(shown)
    assert "plain loop" in fig.layout.xaxis.title.text
