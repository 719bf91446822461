"""labkit.viz.playground: the playground's panels, on a synthetic grid (tests/grid_fixtures.py; the widget around
them: tests/lessons/test_playground.py)."""
from labkit.viz.playground import axis_ranges, panel_xy, playground_figure, trace_index

from grid_fixtures import HUMP, S, make_grid


def test_playground_axes_show_the_effect_and_hold_one():
    """Each y range is fitted to what its panel draws; a speedup axis holds 1.0 (the plain loop)."""
    grid = make_grid(HUMP)
    ranges = axis_ranges(grid, S)
    fig = playground_figure(grid, S)
    for row in range(2):
        tps = [v for v in panel_xy(grid, S)[trace_index(row, 1, 0)][1]]
        lo, hi = ranges[f"yaxis{row * 3 + 2}.range"]
        assert lo <= min(tps) and hi >= max(tps) and hi - lo < 3 * (max(tps) - min(tps)) + 1
        s_lo, s_hi = ranges[f"yaxis{row * 3 + 3}.range"]
        assert s_lo > 0 and s_lo <= 1.0 <= s_hi
        assert list(fig.layout[f"yaxis{row * 3 + 3}"].range) == [s_lo, s_hi]
