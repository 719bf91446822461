"""labkit.measure.grid: the playground grid measured on a tiny random model (tests/tiny_grid.py), its file,
its noise summary and the command line that regenerates it."""
import json

import pytest

from labkit import SkipSet, best_skip_set
from labkit.measure import grid as pgm
from tiny_grid import CONFIG, N_LAYERS, PROMPTS, SETS, grid, grid_data, tiny  # noqa: F401 (fixtures)


def test_grid_shape_values_and_metadata(grid_data, grid, tiny):
    cells = grid_data["cells"]
    ratios = [s.ratio(N_LAYERS) for s in SETS]
    assert grid.ratios == ratios and grid.thresholds == [0.0, 0.5, 0.9] and grid.max_drafts == [2, 4]
    assert grid.policies == ["static", "adaptive"]
    keys = {(c["ratio"], c["threshold"], c["max_draft"], c["policy"]) for c in cells}
    assert len(cells) == len(keys) == 3 * 3 * 2 * 2
    for entry, skip in zip(grid_data["ratios"], SETS):           # the search's best set of each bucket
        assert SkipSet.from_dict(entry["skip"]) == skip == best_skip_set(tiny["path"], entry["ratio"],
                                                                         search_dir=tiny["search_dir"])
        assert entry["plain_ms_per_token"] > 0 and len(entry["plain_ms_per_token_by_prompt"]) == 2
    for c in cells:
        assert 0.0 <= c["acceptance_rate"] <= 1.0
        assert 1.0 <= c["tokens_per_step"] <= c["max_draft"] + 1
        assert 0.0 <= c["drafted_per_step"] <= c["max_draft"]
        assert c["new_tokens"] == 2 * 8
        assert c["plain_ms_per_token"] > 0                            # the plain runs around the cell's chunks
        assert c["speedup"] == pytest.approx(sorted(c["speedup_repeats"])[1], rel=1e-4)   # median of 3 repetitions
        assert len(c["speedup_repeats"]) == CONFIG.repeats == 3 and c["repeats_agree"] is True
        assert c["speedup_min"] <= c["speedup"] <= c["speedup_max"]
        assert c["c"] > 0 and c["c_v"] > 0 and c["analytic_speedup"] > 0
        assert c["c_forward"] > 0 and c["c_v_forward"] > 0 and c["analytic_speedup_forward"] > 0    # cost model
        # (A + 1) * steps >= new tokens and draft + verify time <= the whole call: the limit bounds the measurement
        assert c["analytic_speedup"] >= c["speedup"] * (1 - 1e-3)
        assert c["identical_to_plain"] is True                        # greedy self-speculation is lossless
    for entry in grid_data["ratios"]:                                # 12 cells in chunks of 5: 4 plain runs
        assert entry["plain_runs"] == CONFIG.repeats * 2 * (1 + 3)                   # per prompt and repetition
        assert entry["plain_ms_min"] <= entry["plain_ms_per_token"] <= entry["plain_ms_max"]
    assert grid_data["noise"]["median_relative_spread"] >= 0
    # a static threshold of 0 never stops early: it drafts at least as much as 0.9 does
    for r in ratios:
        for k in (2, 4):
            lo = grid.cell(pgm.Setting(r, 0.0, k, "static"))["drafted_per_step"]
            hi = grid.cell(pgm.Setting(r, 0.9, k, "static"))["drafted_per_step"]
            assert lo >= hi
    assert grid_data["command"] == pgm.regenerate_command(tiny["path"])
    assert grid_data["machine"]["platform"] and grid_data["created_at"].endswith("Z")
    assert [p["text"] for p in grid_data["prompts"]] == PROMPTS
    assert grid_data["cost_model"]["n_layers"] == N_LAYERS


def test_missing_or_foreign_grid_file_names_the_regeneration_command(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"python -m labkit\.playground --model plain"):
        pgm.load_grid("plain", playground_dir=tmp_path)
    (tmp_path / "default.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match=r"python -m labkit\.playground --model default"):
        pgm.load_grid("default", playground_dir=tmp_path)
    (tmp_path / "default.json").write_text(json.dumps({"format": "labkit.playground/1"}))    # an older grid
    with pytest.raises(ValueError, match=r"older labkit.*python -m labkit\.playground --model default"):
        pgm.load_grid("default", playground_dir=tmp_path)


def test_within_noise_is_the_overlap_of_min_max_ranges(grid_data):
    import copy
    data = copy.deepcopy(grid_data)
    for i, c in enumerate(data["cells"]):           # disjoint ranges, except cells 0 and 1
        c["speedup"], c["speedup_min"], c["speedup_max"] = 10.0 + i, 9.9 + i, 10.1 + i
    data["cells"][1].update(speedup=10.05, speedup_min=10.0, speedup_max=10.2)
    g = pgm.PlaygroundGrid(data)
    first = pgm.Setting(*(data["cells"][0][k] for k in ("ratio", "threshold", "max_draft", "policy")))
    second = pgm.Setting(*(data["cells"][1][k] for k in ("ratio", "threshold", "max_draft", "policy")))
    assert g.within_noise(first) == [second]
    data["cells"][1].update(speedup_min=10.2, speedup_max=10.3)                            # now apart
    assert pgm.PlaygroundGrid(data).within_noise(first) == []


def test_cli_regenerates_a_grid_file_with_its_provenance(tiny):
    out = tiny["root"] / "cli" / "tiny4.json"
    argv = ["--model", tiny["path"], "--search-dir", str(tiny["search_dir"]), "--out", str(out),
            "--thresholds", "0.5", "--max-drafts", "2", "--policies", "static", "--n-prompts", "1",
            "--max-new-tokens", "4", "--cost-model-repeats", "0", "--max-ratio", "0.6", "--repeats", "2",
            "--showcase-model", "none"]
    assert pgm.main(argv) == out
    data = json.loads(out.read_text())
    assert data["command"].startswith("python -m labkit.playground --model ")
    assert "--max-new-tokens 4" in data["command"]
    assert [c["ratio"] for c in data["cells"]] == [0.25, 0.5]                    # 0.75 is above --max-ratio
    assert data["prompts"][0]["source"].count(":") >= 1                           # a held-out stdlib function
    assert data["prompts"][0]["why"] == "benchmark order" and data["settings"]["showcase_model"] is None
    assert data["cost_model"] is None and data["cells"][0]["c_forward"] is None
    assert data["cells"][0]["analytic_speedup"] > 0
    assert len(data["cells"][0]["speedup_repeats"]) == 2 and data["settings"]["repeats"] == 2
