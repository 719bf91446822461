"""A playground grid measured on a tiny random Llama: shared by tests/measure/grid/test_run.py (the grid and its
file) and tests/lessons/test_playground.py (the widget glue built on it). Both draft weights (fp32 and int8),
each with its own cost model, as the default grid has them.

The model is saved with a character-level tokenizer, so ``load_model(path)`` (used by the CLI and by "run live")
reads it like any model folder; the search results it reads are a stub ``best.json`` in the format
``labkit.search.export_results`` writes. Test modules import the fixtures by name.
"""
import json
import time

import pytest

from labkit import SkipSet, load_model
from labkit.artifacts.results import BUCKET_WIDTH, ratio_buckets
from labkit.measure.grid import run as pgm

from tiny_models import save_tiny_model_folder

PROMPTS = ["def add(a, b):\n    return", "for i in range(10):\n    print(i"]

N_LAYERS = 4

# one best set per bucket for ratios 0.25, 0.5 and 0.75 of the 8 blocks
SETS = [SkipSet(attention=[3], mlp=[3]), SkipSet(attention=[2, 3], mlp=[2, 3]),
        SkipSet(attention=[1, 2, 3], mlp=[1, 2, 3])]

CONFIG = pgm.GridConfig(thresholds=(0.0, 0.5, 0.9), max_drafts=(2, 4), draft_weights=("fp32", "int8"), n_prompts=2,
                        max_new_tokens=8, plain_every=5, cost_model_repeats=1, cost_model_sets=6)


def write_search_stub(search_dir, key, sets):
    """best.json as labkit.search.export_results writes it (only what best_skip_set reads, plus context)."""
    buckets = []
    for lo, hi in ratio_buckets():
        inside = [s for s in sets if lo <= s.ratio(N_LAYERS) < hi]
        best = ({"skip": inside[0].to_dict(), "ratio": inside[0].ratio(N_LAYERS), "n_skipped": inside[0].n_skipped,
                 "value_ms_per_token": 1.0, "speedup": 1.0, "study": "stub", "trial": 0} if inside else None)
        buckets.append({"lo": lo, "hi": hi, "n_trials": len(inside), "best": best})
    folder = search_dir / key
    folder.mkdir(parents=True)
    (folder / "best.json").write_text(json.dumps({"model": key, "bucket_width": BUCKET_WIDTH, "n_layers": N_LAYERS,
                                                  "overall": buckets[4]["best"], "buckets": buckets}))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("playground")
    path = save_tiny_model_folder(root / "tiny4", n_layers=N_LAYERS)
    write_search_stub(root / "search", "tiny4", SETS)
    return {"path": str(path), "search_dir": root / "search", "root": root}


@pytest.fixture(scope="module")
def grid_data(tiny):
    model, tokenizer = load_model(tiny["path"])
    t0 = time.perf_counter()
    data = pgm.compute_grid(model, tokenizer, model_name=tiny["path"], config=CONFIG, search_dir=tiny["search_dir"],
                            prompt_texts=PROMPTS, progress=False)
    print(f"tiny grid: {len(data['cells'])} cells in {time.perf_counter() - t0:.1f} s")
    return data


@pytest.fixture(scope="module")
def grid(grid_data, tiny):
    path = pgm.save_grid(grid_data, tiny["root"] / "grids" / "tiny4.json")
    return pgm.load_grid(tiny["path"], path=path)
