"""labkit.measure.grid.results: reading the playground's grid: older (format-2) files read as fp32 cells, a missing
or foreign file names the command that regenerates it, and "within the noise" is the overlap of min-max ranges."""
import copy
import json

import pytest

from labkit.measure.grid import results as gr
from labkit.measure.grid import run as pgm

from tiny_grid import grid_data, tiny  # noqa: F401 (fixtures)


def test_a_format_2_file_reads_as_fp32_cells(grid_data, tmp_path):
    """The grids committed before the draft-weights axis: every cell is an fp32 one, no int8 cost model."""
    old = copy.deepcopy(grid_data)
    old["format"] = "labkit.playground/2"
    old["cells"] = [{k: v for k, v in c.items() if k != "draft_weights"} for c in old["cells"]
                    if c["draft_weights"] == "fp32"]
    del old["cost_model_int8"]
    path = pgm.save_grid(old, tmp_path / "old.json")
    g = gr.load_grid("old", path=path)
    assert g.draft_weights == ["fp32"] and len(g) == len(grid_data["cells"]) // 2
    assert set(g.cost_models) == {"fp32"} and g.cost_model_for("int8") is None
    s = g.nearest(draft_weights="int8")                             # snapped to what the grid has
    assert s.draft_weights == "fp32" and g.cell(s)["draft_weights"] == "fp32"
    assert g.best()[0].draft_weights == "fp32" and "1 draft weights (fp32)" in g.describe()
    assert list(g.ratio_frame(s)["ratio"]) == g.ratios
    with pytest.raises(KeyError, match="int8"):
        g.best("int8")


def test_missing_or_foreign_grid_file_names_the_regeneration_command(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"python -m labkit grid --model plain"):
        gr.load_grid("plain", playground_dir=tmp_path)
    (tmp_path / "default.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match=r"python -m labkit grid --model default"):
        gr.load_grid("default", playground_dir=tmp_path)
    (tmp_path / "default.json").write_text(json.dumps({"format": "labkit.playground/1"}))    # an older grid
    with pytest.raises(ValueError, match=r"older labkit.*python -m labkit grid --model default"):
        gr.load_grid("default", playground_dir=tmp_path)


def test_within_noise_is_the_overlap_of_min_max_ranges(grid_data):
    data = copy.deepcopy(grid_data)
    for i, c in enumerate(data["cells"]):           # disjoint ranges, except cells 0 and 1
        c["speedup"], c["speedup_min"], c["speedup_max"] = 10.0 + i, 9.9 + i, 10.1 + i
    data["cells"][1].update(speedup=10.05, speedup_min=10.0, speedup_max=10.2)
    g = gr.PlaygroundGrid(data)
    keys = ("ratio", "threshold", "max_draft", "policy", "draft_weights")
    first = gr.Setting(*(data["cells"][0][k] for k in keys))
    second = gr.Setting(*(data["cells"][1][k] for k in keys))
    assert first.draft_weights == second.draft_weights
    assert g.within_noise(first) == [second]
    data["cells"][1].update(speedup_min=10.2, speedup_max=10.3)                            # now apart
    assert gr.PlaygroundGrid(data).within_noise(first) == []
