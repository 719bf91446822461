"""labkit.measure.grid.run: the playground grid measured on a tiny random model (tests/tiny_grid.py), its file,
its noise summary, its draft-weights axis (fp32 and int8 cells, interleaved; format-2 files still read) and the
command line that regenerates it."""
import json

import pytest

from labkit import SkipSet, best_skip_set
from labkit.measure.grid import run as pgm

from tiny_grid import CONFIG, N_LAYERS, PROMPTS, SETS, grid, grid_data, tiny  # noqa: F401 (fixtures)


def test_grid_shape_values_and_metadata(grid_data, grid, tiny):
    cells = grid_data["cells"]
    ratios = [s.ratio(N_LAYERS) for s in SETS]
    assert grid.ratios == ratios and grid.thresholds == [0.0, 0.5, 0.9] and grid.max_drafts == [2, 4]
    assert grid.policies == ["static", "adaptive"] and grid.draft_weights == ["fp32", "int8"]
    keys = {(c["ratio"], c["threshold"], c["max_draft"], c["policy"], c["draft_weights"]) for c in cells}
    assert len(cells) == len(keys) == 3 * 3 * 2 * 2 * 2
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
    for entry in grid_data["ratios"]:                                # 24 cells in chunks of 5: 6 plain runs
        assert entry["plain_runs"] == CONFIG.repeats * 2 * (1 + 5)                   # per prompt and repetition
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


def test_int8_cells_are_lossless_and_use_the_int8_cost_model(grid_data, grid):
    """Every int8 cell decodes exactly what plain decoding does; its forward-only columns come from the cost model
    whose drafts were timed with int8 weights (full step and verifies: the model's own)."""
    assert grid_data["format"] == pgm.FORMAT == "labkit.playground/3"
    assert list(grid_data["settings"]["draft_weights"]) == ["fp32", "int8"]
    assert grid_data["cost_model"]["draft_weights"] is None and grid_data["cost_model_int8"]["draft_weights"] == "int8"
    assert set(grid.cost_models) == {"fp32", "int8"} and grid.cost_model is grid.cost_model_for("fp32")
    int8 = [c for c in grid_data["cells"] if c["draft_weights"] == "int8"]
    assert len(int8) == len(grid_data["cells"]) // 2
    assert all(c["identical_to_plain"] is True and c["repeats_agree"] is True for c in int8)
    for entry in grid_data["ratios"]:
        skip = SkipSet.from_dict(entry["skip"])
        assert entry["c_forward"] == pytest.approx(grid.cost_model_for("fp32").draft_cost_ratio(skip), rel=1e-4)
        assert entry["c_forward_int8"] == pytest.approx(grid.cost_model_for("int8").draft_cost_ratio(skip), rel=1e-4)
        for w, key in (("fp32", "c_forward"), ("int8", "c_forward_int8")):
            s = pgm.Setting(entry["ratio"], 0.5, 4, "static", w)
            assert grid.cell(s)["c_forward"] == pytest.approx(entry[key], rel=1e-4)
            assert grid.vs_ratio("c_forward", s) == pytest.approx(
                [r["c_forward" if w == "fp32" else "c_forward_int8"] for r in grid_data["ratios"]], rel=1e-4)
    s = grid.nearest(draft_weights="int8")
    assert s.draft_weights == "int8" and "int8 draft weights" in s.describe()
    assert grid.best("int8")[0].draft_weights == "int8" and grid.best("fp32")[0].draft_weights == "fp32"
    assert all(n.draft_weights == "int8" for n in grid.within_noise(s))
    assert set(grid.ratio_frame(s)["speedup"]) <= {c["speedup"] for c in int8}


def test_int8_cells_are_shuffled_among_the_fp32_ones_between_plain_runs(tiny, monkeypatch):
    """One skip set, one prompt: the runs in call order; the fp32 and int8 cells share the chunks between plain
    runs (so they share the baselines around them) instead of running one kind after the other."""
    from labkit import load_model
    calls = []
    spec, plain = pgm.speculative_generate, pgm.autoregressive_generate
    monkeypatch.setattr(pgm, "speculative_generate",
                        lambda *a, **k: calls.append(k.get("draft_weights") or "fp32") or spec(*a, **k))
    monkeypatch.setattr(pgm, "autoregressive_generate", lambda *a, **k: calls.append("plain") or plain(*a, **k))
    model, tokenizer = load_model(tiny["path"])
    cfg = pgm.GridConfig(thresholds=(0.0, 0.5, 0.9), max_drafts=(2,), policies=("static",), n_prompts=1,
                         max_new_tokens=4, repeats=1, plain_every=3, cost_model_repeats=0, showcase_model=None)
    data = pgm.compute_grid(model, tokenizer, model_name=tiny["path"], config=cfg, skip_sets=[SETS[1]],
                            prompt_texts=PROMPTS, progress=False)
    timed = calls[calls.index("plain", 1):]                         # after the untimed warm-up runs
    chunks = " ".join(timed).split("plain")
    assert [len(c.split()) for c in chunks] == [0, 3, 3, 0]        # plain, 3 cells, plain, 3 cells, plain
    assert sorted(timed) == sorted(["plain"] * 3 + ["fp32"] * 3 + ["int8"] * 3)
    assert any(set(c.split()) == {"fp32", "int8"} for c in chunks)  # a chunk with both kinds
    assert {c["draft_weights"] for c in data["cells"]} == {"fp32", "int8"} and len(data["cells"]) == 6



def test_config_and_setting_check_the_draft_weights():
    for bad in (("int4",), (), ("fp32", "fp32")):
        with pytest.raises(ValueError, match="draft_weights"):
            pgm.GridConfig(draft_weights=bad)
    with pytest.raises(ValueError, match="draft weights"):
        pgm.Setting(0.5, 0.5, 4, "static", "int4")
    assert pgm.draft_weights_arg("fp32") is None and pgm.draft_weights_arg("int8") == "int8"
    assert pgm.GridConfig().draft_weights == ("fp32", "int8") and len(pgm.GridConfig().thresholds) == 5




def test_cli_regenerates_a_grid_file_with_its_provenance(tiny):
    out = tiny["root"] / "cli" / "tiny4.json"
    argv = ["--model", tiny["path"], "--search-dir", str(tiny["search_dir"]), "--out", str(out),
            "--thresholds", "0.5", "--max-drafts", "2", "--policies", "static", "--n-prompts", "1",
            "--max-new-tokens", "4", "--cost-model-repeats", "0", "--max-ratio", "0.6", "--repeats", "2",
            "--showcase-model", "none", "--draft-weights", "int8"]
    assert pgm.main(argv) == out
    data = json.loads(out.read_text())
    assert data["command"].startswith("python -m labkit grid --model ")
    assert "--max-new-tokens 4" in data["command"]
    assert [c["ratio"] for c in data["cells"]] == [0.25, 0.5]                    # 0.75 is above --max-ratio
    assert data["prompts"][0]["source"].count(":") >= 1                           # a held-out stdlib function
    assert data["prompts"][0]["why"] == "benchmark order" and data["settings"]["showcase_model"] is None
    assert data["cost_model"] is None and data["cost_model_int8"] is None and data["cells"][0]["c_forward"] is None
    assert {c["draft_weights"] for c in data["cells"]} == {"int8"} and data["settings"]["draft_weights"] == ["int8"]
    assert all(c["identical_to_plain"] is True for c in data["cells"])
    assert data["cells"][0]["analytic_speedup"] > 0
    assert len(data["cells"][0]["speedup_repeats"]) == 2 and data["settings"]["repeats"] == 2
