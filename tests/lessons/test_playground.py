"""labkit.lessons.playground (and the labkit.viz.playground figures it drives): the widget glue, on a grid measured
on a tiny random model (tests/tiny_grid.py; fp32 and int8 draft weights)."""
import copy
from dataclasses import replace

import numpy as np
import pytest

from labkit.lessons import playground as pgl
from labkit.measure.grid import run as pgm
from labkit.viz import playground as pgv

from tiny_grid import CONFIG, N_LAYERS, PROMPTS, SETS, grid, grid_data, tiny  # noqa: F401 (fixtures)


def plain_like(grid, fp32_only=False):
    """A second grid named 'plain' (the model toggle's other side): no highest skip ratio, lower acceptance
    and speedup; ``fp32_only``: its int8 cells left out (as a format-2 grid reads)."""
    data = copy.deepcopy(grid.data)
    data["model"] = "plain"
    top = max(r["ratio"] for r in data["ratios"])
    data["ratios"] = [r for r in data["ratios"] if r["ratio"] != top]
    data["cells"] = [c for c in data["cells"] if c["ratio"] != top and not (fp32_only and c["draft_weights"] == "int8")]
    for c in data["cells"]:
        c["acceptance_rate"] *= 0.3
        for key in ("speedup", "speedup_min", "speedup_max"):
            c[key] *= 0.5
    return pgm.PlaygroundGrid(data, name="plain")


def test_figures_have_titles_axes_and_the_current_point(grid):
    s = grid.nearest()
    fig = pgv.playground_figure(grid, s)
    assert len(fig.data) == 2 * 3 * 4 + 1 and fig.layout.title.text.startswith(grid.name)   # + the 1x line's legend
    assert fig.data[-1].name == "plain decoding (1×)" and not fig.layout.annotations[-1].text.startswith("plain")
    assert all(fig.layout[f"xaxis{i if i > 1 else ''}"].title.text for i in range(1, 7))
    assert all(fig.layout[f"yaxis{i if i > 1 else ''}"].title.text for i in range(1, 7))
    star = fig.data[pgv.trace_index(0, 2, 2)]
    assert star.x[0] == s.ratio and star.y[0] == pytest.approx(grid.cell(s)["speedup"])
    for f in (pgv.heatmap_figure(grid), pgv.model_comparison_figure({"tiny": grid, "plain": plain_like(grid)})):
        assert f.layout.title.text and f.layout.xaxis.title.text and f.layout.yaxis.title.text
    answers = pgl.guiding_answers(grid, plain_like(grid))
    assert len(answers) == 4 and all(a["answer"] and a["look_at"] for a in answers)
    assert "plain" in answers[2]["question"] and "int8" in answers[3]["question"]
    speed = fig.data[pgv.trace_index(0, 2, 0)]                            # error bars: min-max of the repetitions
    np.testing.assert_allclose(speed.error_y.array, grid.vs_ratio("speedup_max", s) - grid.vs_ratio("speedup", s))
    assert "within the noise" in pgv.heatmap_figure(grid).data[1].name
    heat = pgv.heatmap_figure(grid, draft_weights="int8")                 # the figures filter by the draft weights
    assert ("int8 draft weights" in heat.layout.title.text
            and "fp32 draft weights" in pgv.heatmap_figure(grid).layout.title.text)
    s8 = replace(s, draft_weights="int8")
    np.testing.assert_allclose(np.array(heat.data[0].z, dtype=float),
                               np.stack([grid.vs_ratio("speedup", replace(s8, threshold=t)) for t in grid.thresholds]))
    fig8 = pgv.playground_figure(grid, s8)
    np.testing.assert_allclose(fig8.data[pgv.trace_index(0, 2, 0)].y, grid.vs_ratio("speedup", s8))
    assert "int8 draft weights" in fig8.layout.title.text
    both = pgv.model_comparison_figure({"tiny": grid, "plain": plain_like(grid, fp32_only=True)}, s8)
    np.testing.assert_allclose(both.data[0].y, grid.vs_ratio("acceptance_rate", s8))   # int8 where the grid has it,
    np.testing.assert_allclose(both.data[3].y, plain_like(grid).vs_ratio("acceptance_rate", s))  # fp32 where not

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


def test_the_draft_weights_toggle_moves_every_curve_to_its_cells(playground, grid):
    """fp32 -> int8 -> fp32: every curve, the star, the title and the readout follow the toggle's cells."""
    p = playground
    top_speed = pgv.trace_index(0, 2, 0)
    assert list(p.weights_toggle.options) == ["fp32", "int8"]
    for weights in ("int8", "fp32"):
        p.weights_toggle.value = weights
        s = p.setting
        assert s.draft_weights == weights
        for row, get in ((0, grid.vs_ratio), (1, grid.vs_threshold)):
            for col, metric in enumerate(("acceptance_rate", "tokens_per_step", "speedup")):
                np.testing.assert_allclose(p.figure.data[pgv.trace_index(row, col, 0)].y, get(metric, s))
        assert _star(p, 0, 2) == (s.ratio, pytest.approx(grid.cell(s)["speedup"]))
        assert (f"{weights} draft weights" in p.readout.value
                and f"{weights} draft weights" in p.figure.layout.title.text)
        other = "fp32" if weights == "int8" else "int8"
        assert f"the same knobs with {other} draft weights: speedup" in p.readout.value
        assert list(p.figure.data[top_speed].y) != list(grid.vs_ratio("speedup", replace(s, draft_weights=other)))


def test_update_is_fast(playground, record_property):
    ms = playground.measure_update_ms()
    record_property("update_ms", ms)
    print(f"playground update: median {ms:.1f} ms per slider move (target <= 100 ms)")
    assert 0 < ms < 500                      # generous: the notebook records the measured median


def test_presets_set_the_sliders(playground, grid):
    table = pgl.presets(grid)
    assert list(table) == ["too timid", "paper's setting", "too aggressive", "best found"]
    paper = table["paper's setting"]
    assert (paper.policy, paper.threshold, paper.max_draft, paper.ratio, paper.draft_weights) == (
        "adaptive", 0.5, 4, 0.5, "fp32")                                   # the paper drafts with the model's own
    assert table["too aggressive"].ratio == max(grid.ratios) and table["too timid"].ratio == min(grid.ratios)
    assert table["best found"] == grid.best()[0]                            # of the whole grid
    for weights in ("int8", "fp32"):                  # the widget's presets keep the toggle's draft weights
        playground.weights_toggle.value = weights
        table = pgl.presets(grid, weights)
        assert playground.presets() == table and {s.draft_weights for s in table.values()} == {weights}
        assert table["best found"] == grid.best(weights)[0]
        for name, setting in table.items():
            playground.preset_buttons[name].click()
            assert playground.setting == setting
            assert ((playground.ratio_slider.value, playground.threshold_slider.value)
                    == (setting.ratio, setting.threshold))
            assert _star(playground, 0, 2) == (setting.ratio, pytest.approx(grid.cell(setting)["speedup"]))
    frame = pgl.presets_frame(grid, "int8")
    assert set(frame["draft weights"]) == {"int8"}
    assert frame.loc["best found", "speedup"] == pytest.approx(grid.best("int8")[1]["speedup"])


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
    assert "live run" in p.readout.value and "this machine" in p.status.value
    other = next(t for t in grid.thresholds if t != s.threshold)
    p.threshold_slider.value = other          # off the vs-ratio slice, still on the vs-threshold one
    assert len(p.figure.data[pgv.trace_index(0, 2, 3)].x) == 0
    assert list(p.figure.data[pgv.trace_index(1, 2, 3)].x) == [s.threshold]


def test_run_live_measures_the_selected_draft_weights(playground, grid):
    """With int8 selected, "run live" decodes with int8 drafts (still identical to plain decoding), uses the int8
    cost model, and its point shows on the int8 curves only."""
    p = playground
    p.apply_preset("paper's setting")
    if not any(pt["draft_weights"] == "fp32" for pt in p.live["tiny"]):
        p.run_live()            # the fp32 live run the test above makes, when that test ran in another worker
    p.weights_toggle.value = "int8"
    point = p.run_live()
    s = p.setting
    assert s.draft_weights == "int8" and point["draft_weights"] == "int8" and point["identical_to_plain"] is True
    skip = grid.skip_set(s.ratio)
    assert point["c_forward"] == pytest.approx(grid.cost_model_for("int8").draft_cost_ratio(skip))
    assert point["vs_grid"] == pytest.approx(point["speedup"] / grid.cell(s)["speedup"])
    live_top = p.figure.data[pgv.trace_index(0, 2, 3)]
    assert list(live_top.x) == [s.ratio] and live_top.y[0] == pytest.approx(point["speedup"])
    assert "live run" in p.readout.value
    p.weights_toggle.value = "fp32"                    # the fp32 slice has only the fp32 live run of the test above
    assert [pt["draft_weights"] for pt in p.live["tiny"]] == ["fp32", "int8"]
    assert list(p.figure.data[pgv.trace_index(0, 2, 3)].y) == pytest.approx([p.live["tiny"][0]["speedup"]])


def test_model_toggle_snaps_the_draft_weights_to_what_the_grid_has(grid):
    """A twin without int8 cells (a format-2 grid): the toggle offers fp32 only there, and int8 again on return."""
    p = pgl.Playground({"tiny": grid, "plain": plain_like(grid, fp32_only=True)}, model="tiny")
    p.weights_toggle.value = "int8"
    p.model_toggle.value = "plain"
    assert list(p.weights_toggle.options) == ["fp32"] and p.setting.draft_weights == "fp32"
    np.testing.assert_allclose(p.figure.data[pgv.trace_index(0, 2, 0)].y,
                               p.grids["plain"].vs_ratio("speedup", p.setting))
    assert "the same knobs with" not in p.readout.value
    p.model_toggle.value = "tiny"
    assert list(p.weights_toggle.options) == ["fp32", "int8"] and p.setting.draft_weights == "fp32"


def test_run_live_on_outside_prompts(grid):
    p = pgl.Playground({"tiny": grid}, model="tiny", live_prompts=1, live_tokens=4, live_source="packages")
    point = p.run_live()
    assert point["prompts"] == "packages" and point["identical_to_plain"] is True
    with pytest.raises(ValueError, match="source must be"):
        pgl.Playground({"tiny": grid}, model="tiny", live_source="pypi")

def test_run_live_in_bf16_loads_the_model_in_bf16(grid):
    """``Playground(..., device=, dtype=)``: "run live" loads the grid's model there, and its point says so."""
    import torch

    p = pgl.Playground({"tiny": grid}, model="tiny", live_prompts=1, live_tokens=4, device="cpu", dtype="bf16")
    point = p.run_live()
    model, _ = p._loaded["tiny"]
    assert next(model.parameters()).dtype == torch.bfloat16
    assert (point["device"], point["dtype"]) == ("cpu", "bf16") and point["identical_to_plain"] is True
    assert "live run</b> (1 prompts × 4 tokens, cpu, bf16," in p.readout.value
    with pytest.raises(ValueError, match="dtype must be one of"):
        pgl.Playground({"tiny": grid}, model="tiny", dtype="int4")            # at construction, not at the click
    with pytest.raises(ValueError, match="give loader or device/dtype, not both"):
        pgl.Playground({"tiny": grid}, model="tiny", loader=lambda name: None, dtype="bf16")


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






def test_the_playground_opens_on_its_best_cell_and_its_status_follows_the_selection(grid):
    """It opens on the grid's fastest cell (not an fp32 cell at 1.11x while the grid's best is 1.42x); a live run's
    line is about its cell and model, and goes when either changes (no stale "live: 1.43x" after switching)."""
    p = pgl.Playground({"tiny": grid, "plain": plain_like(grid)}, model="tiny", live_prompts=1, live_tokens=6)
    assert p.setting == grid.best()[0]
    p.run_live()
    assert "this machine" in p.status.value and "the grid" in p.status.value
    p.model_toggle.value = "plain"
    assert p.status.value == "" and "live run" not in p.readout.value
    p.model_toggle.value = "tiny"
    p.apply_preset("paper's setting")
    assert "preset" in p.status.value
    p.threshold_slider.value = next(t for t in grid.thresholds if t != p.setting.threshold)
    assert p.status.value == ""
