"""labkit.search.export: the committed results data/search/<model>/ written from a storage and read back
(best_skip_set overall and per bucket, and its errors)."""
import json

import pytest

from labkit import SkipSet
from labkit.artifacts.results import best_skip_set
from labkit.search import SearchConfig, export_results, run_search

from tiny_search import FAST, QUIET, db, tiny  # noqa: F401 (fixtures)


def test_export_and_best_skip_set(tiny, tmp_path):
    storage = db(tmp_path)
    run_search(tiny, SearchConfig(sampler="random", **FAST), trials=10, storage=storage, **QUIET)
    run_search(tiny, SearchConfig(sampler="random", ratio_bucket=(0.75, 0.875), **FAST), trials=6, storage=storage,
               **QUIET)
    out = export_results(tiny, storage=storage, out_dir=tmp_path / "search" / "tiny4")
    best = json.loads((out / "best.json").read_text())
    rows = json.loads((out / "trials.json").read_text())
    assert (out / "trials.csv").read_text().count("\n") == len(rows) + 1
    assert len(best["studies"]) == 2 and best["n_trials"] == len(rows)
    assert best["overall"]["value_ms_per_token"] == min(r["value_ms_per_token"] for r in rows)
    overall = best_skip_set(tiny, search_dir=tmp_path / "search")
    assert overall == SkipSet.from_dict(best["overall"]["skip"])
    for b in best["buckets"]:
        if b["best"]:
            mid = (b["lo"] + b["hi"]) / 2
            got = best_skip_set(tiny, ratio=mid, search_dir=tmp_path / "search")
            assert b["lo"] <= got.ratio(4) < b["hi"] or got.ratio(4) == 1.0
            in_bucket = [r["value_ms_per_token"] for r in rows
                         if b["lo"] <= r["ratio"] < b["hi"] or (b["hi"] == 1 and r["ratio"] == 1)]
            assert b["best"]["value_ms_per_token"] == min(in_bucket)
    empty = [b for b in best["buckets"] if not b["best"]]
    if empty:
        with pytest.raises(LookupError, match="python -m labkit.search"):
            best_skip_set(tiny, ratio=(empty[0]["lo"] + empty[0]["hi"]) / 2, search_dir=tmp_path / "search")
    with pytest.raises(FileNotFoundError, match="python -m labkit.search"):
        best_skip_set("plain", search_dir=tmp_path / "nothing-here")
    with pytest.raises(ValueError):
        best_skip_set(tiny, ratio=1.5, search_dir=tmp_path / "search")
