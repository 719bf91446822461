"""labkit.lessons.playground and labkit.viz.playground: the figures and the widget glue, on a grid measured on a
tiny random model (tests/tiny_grid.py)."""
import copy

import numpy as np
import pytest

from labkit.lessons import playground as pgl
from labkit.measure import grid as pgm
from labkit.viz import playground as pgv
from tiny_grid import CONFIG, N_LAYERS, PROMPTS, SETS, grid, grid_data, tiny  # noqa: F401 (fixtures)


def plain_like(grid):
    """A second grid named 'plain' (the model toggle's other side): no highest skip ratio, lower acceptance
    and speedup."""
    data = copy.deepcopy(grid.data)
    data["model"] = "plain"
    top = max(r["ratio"] for r in data["ratios"])
    data["ratios"] = [r for r in data["ratios"] if r["ratio"] != top]
    data["cells"] = [c for c in data["cells"] if c["ratio"] != top]
    for c in data["cells"]:
        c["acceptance_rate"] *= 0.3
        for key in ("speedup", "speedup_min", "speedup_max"):
            c[key] *= 0.5
    return pgm.PlaygroundGrid(data, name="plain")


def test_figures_have_titles_axes_and_the_current_point(grid):
    s = grid.nearest()
    fig = pgv.playground_figure(grid, s)
    assert len(fig.data) == 2 * 3 * 4 and fig.layout.title.text.startswith(grid.name)
    assert all(fig.layout[f"xaxis{i if i > 1 else ''}"].title.text for i in range(1, 7))
    assert all(fig.layout[f"yaxis{i if i > 1 else ''}"].title.text for i in range(1, 7))
    star = fig.data[pgv.trace_index(0, 2, 2)]
    assert star.x[0] == s.ratio and star.y[0] == pytest.approx(grid.cell(s)["speedup"])
    for f in (pgv.heatmap_figure(grid), pgv.model_comparison_figure({"tiny": grid, "plain": plain_like(grid)})):
        assert f.layout.title.text and f.layout.xaxis.title.text and f.layout.yaxis.title.text
    answers = pgl.guiding_answers(grid, plain_like(grid))
    assert len(answers) == 3 and all(a["answer"] and a["look_at"] for a in answers)
    assert "plain" in answers[2]["question"]
    speed = fig.data[pgv.trace_index(0, 2, 0)]                            # error bars: min-max of the repetitions
    np.testing.assert_allclose(speed.error_y.array, grid.vs_ratio("speedup_max", s) - grid.vs_ratio("speedup", s))
    assert "within the noise" in pgv.heatmap_figure(grid).data[1].name


@pytest.fixture(scope="module")
def playground(grid):
    return pgl.Playground({"tiny": grid, "plain": plain_like(grid)}, model="tiny", live_prompts=1, live_tokens=6)


def _star(p, row, col):
    d = p.figure.data[pgv.trace_index(row, col, 2)]
    return d.x[0], d.y[0]


def test_each_slider_moves_the_plots_marker_and_readout(playground, grid):
    p = playground
    top_speed = pgv.trace_index(0, 2, 0)
    bottom_acc = pgv.trace_index(1, 0, 0)
    for r in grid.ratios:                                                   # skip ratio
        p.ratio_slider.value = r
        s = p.setting
        assert _star(p, 0, 2) == (r, pytest.approx(grid.cell(s)["speedup"]))
        np.testing.assert_allclose(p.figure.data[bottom_acc].y, grid.vs_threshold("acceptance_rate", s))
        assert f"skip ratio {r:.3f}" in p.readout.value and f"skip ratio {r:.3f}" in p.figure.layout.title.text
    for t in grid.thresholds:                                               # threshold
        p.threshold_slider.value = t
        s = p.setting
        assert _star(p, 1, 0) == (t, pytest.approx(grid.cell(s)["acceptance_rate"]))
        np.testing.assert_allclose(p.figure.data[top_speed].y, grid.vs_ratio("speedup", s))
        assert f"threshold {t:g}," in p.readout.value
    for k in grid.max_drafts:                                               # maximum draft
        p.max_draft_slider.value = k
        s = p.setting
        np.testing.assert_allclose(p.figure.data[top_speed].y, grid.vs_ratio("speedup", s))
        bars = p.figure.data[top_speed].error_y                            # the noise moves with the slice
        np.testing.assert_allclose(bars.array, grid.vs_ratio("speedup_max", s) - grid.vs_ratio("speedup", s))
        np.testing.assert_allclose(bars.arrayminus, grid.vs_ratio("speedup", s) - grid.vs_ratio("speedup_min", s))
        assert not isinstance(p.figure.data[top_speed].x, np.ndarray), type(p.figure.data[top_speed].x)   # lists in
        assert not isinstance(bars.array, np.ndarray), type(bars.array)
        assert _star(p, 0, 1)[1] == pytest.approx(grid.cell(s)["tokens_per_step"])
        assert f"max draft {k}" in p.readout.value
    for policy in ("static", "adaptive"):                                   # static / adaptive toggle
        p.policy_toggle.value = policy
        s = p.setting
        np.testing.assert_allclose(p.figure.data[top_speed].y, grid.vs_ratio("speedup", s))
        assert f"{policy} policy" in p.readout.value
        assert ("the adaptive threshold moved" in p.readout.value) == (policy == "adaptive")
    p.ratio_slider.value = grid.ratios[-1]
    p.model_toggle.value = "plain"                                          # model toggle
    other = p.grids["plain"]
    assert [v for _, v in p.ratio_slider.options] == other.ratios == grid.ratios[:-1]
    assert p.setting.ratio == other.ratios[-1]                              # snapped to the nearest ratio it has
    np.testing.assert_allclose(p.figure.data[top_speed].y, other.vs_ratio("speedup", p.setting))
    assert "<b>plain</b>" in p.readout.value and p.figure.layout.title.text.startswith("plain")
    p.model_toggle.value = "tiny"
    assert [v for _, v in p.ratio_slider.options] == grid.ratios
    np.testing.assert_allclose(p.figure.data[top_speed].y, grid.vs_ratio("speedup", p.setting))


def test_update_is_fast(playground, record_property):
    ms = playground.measure_update_ms()
    record_property("update_ms", ms)
    print(f"playground update: median {ms:.1f} ms per slider move (target <= 100 ms)")
    assert 0 < ms < 500                      # generous: the notebook records the measured median


def test_presets_set_the_sliders(playground, grid):
    table = pgl.presets(grid)
    assert list(table) == ["too timid", "paper's setting", "too aggressive", "best found"]
    paper = table["paper's setting"]
    assert (paper.policy, paper.threshold, paper.max_draft, paper.ratio) == ("adaptive", 0.5, 4, 0.5)
    assert table["too aggressive"].ratio == max(grid.ratios) and table["too timid"].ratio == min(grid.ratios)
    assert table["best found"] == grid.best()[0]
    for name, setting in table.items():
        playground.preset_buttons[name].click()
        assert playground.setting == setting
        assert (playground.ratio_slider.value, playground.threshold_slider.value) == (setting.ratio, setting.threshold)
        assert _star(playground, 0, 2) == (setting.ratio, pytest.approx(grid.cell(setting)["speedup"]))


def test_run_live_adds_a_point_to_the_plots(playground, grid):
    p = playground
    p.apply_preset("paper's setting")
    point = p.run_live()
    s = p.setting
    assert p.live["tiny"] == [point] and point["max_new_tokens"] == 6 and point["n_prompts"] == 1
    assert point["speedup"] > 0 and 0 <= point["acceptance_rate"] <= 1 and point["identical_to_plain"] is True
    assert point["speedup_min"] <= point["speedup"] <= point["speedup_max"]      # the plain loop's own noise
    assert point["vs_grid"] == pytest.approx(point["speedup"] / grid.cell(s)["speedup"])
    live_top = p.figure.data[pgv.trace_index(0, 2, 3)]
    live_bottom = p.figure.data[pgv.trace_index(1, 2, 3)]
    assert list(live_top.x) == [s.ratio] and live_top.y[0] == pytest.approx(point["speedup"])
    assert list(live_bottom.x) == [s.threshold]
    assert "live run" in p.readout.value and "live:" in p.status.value
    other = next(t for t in grid.thresholds if t != s.threshold)
    p.threshold_slider.value = other          # off the vs-ratio slice, still on the vs-threshold one
    assert len(p.figure.data[pgv.trace_index(0, 2, 3)].x) == 0
    assert list(p.figure.data[pgv.trace_index(1, 2, 3)].x) == [s.threshold]


def test_run_live_on_outside_prompts(grid):
    p = pgl.Playground({"tiny": grid}, model="tiny", live_prompts=1, live_tokens=4, live_source="packages")
    point = p.run_live()
    assert point["prompts"] == "packages" and point["identical_to_plain"] is True
    with pytest.raises(ValueError, match="source must be"):
        pgl.Playground({"tiny": grid}, model="tiny", live_source="pypi")

def test_tables_of_the_notebook(grid):
    paper = pgl.presets(grid)["paper's setting"]
    rows = grid.ratio_frame(paper)
    assert list(rows["ratio"]) == grid.ratios                       # one row per skip set, in ratio order
    assert list(rows["speedup"]) == pytest.approx(list(grid.vs_ratio("speedup", paper)), nan_ok=True)
    table = pgl.presets_frame(grid)
    assert list(table.index) == list(pgl.presets(grid))
    for name, s in pgl.presets(grid).items():
        assert table.loc[name, "speedup"] == pytest.approx(grid.cell(s)["speedup"], nan_ok=True)
        assert table.loc[name, "skip ratio"] == s.ratio
