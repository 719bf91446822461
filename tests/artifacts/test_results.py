"""Reading the committed results: best skip sets by bucket, and the one skip-set-with-fallbacks decision."""
import json

import pytest

from labkit import SkipSet
from labkit.artifacts.results import (
    BUCKET_WIDTH,
    best_skip_set,
    greedy_path_sets,
    late_blocks_fallback,
    skip_set_for,
    skip_sets_by_bucket,
)


def write_best(search_dir, key, overall: SkipSet, buckets: list[tuple[SkipSet | None, float]]):
    """best.json as labkit.search.export writes it (only what the readers use)."""
    entries = [{"lo": i * BUCKET_WIDTH, "hi": (i + 1) * BUCKET_WIDTH, "n_trials": 3,
                "best": None if skip is None else {"skip": skip.to_dict(), "value_ms_per_token": ms,
                                                   "n_skipped": skip.n_skipped}}
               for i, (skip, ms) in enumerate(buckets)]
    folder = search_dir / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "best.json").write_text(json.dumps({"overall": {"skip": overall.to_dict()}, "bucket_width": BUCKET_WIDTH,
                                                  "buckets": entries}))


def test_skip_set_for_never_drafts_with_the_full_model(tmp_path):
    """A search whose best is 'skip nothing' gives the fastest searched set that skips something."""
    slow, fast = SkipSet(attention=[1], mlp=[1, 2]), SkipSet(mlp=[3])
    write_best(tmp_path, "toy", SkipSet(), [(SkipSet(), 5.0), (slow, 5.6), (None, 0), (fast, 5.2)])
    skip, source = skip_set_for("toy", 4, search_dir=tmp_path)
    assert skip == fast and "skips something" in source
    write_best(tmp_path, "toy", slow, [(SkipSet(), 5.0), (slow, 5.6), (None, 0), (fast, 5.2)])
    assert skip_set_for("toy", 4, search_dir=tmp_path) == (slow, "data/search (Bayesian optimization)")
    assert best_skip_set("toy", 0.2, search_dir=tmp_path) == slow
    with pytest.raises(LookupError, match="ratio-bucket 0.25 0.375"):
        best_skip_set("toy", 0.3, search_dir=tmp_path)
    assert [e["skip"] for e in skip_sets_by_bucket("toy", 4, search_dir=tmp_path)] == [fast.to_dict(), slow.to_dict()]


def test_without_a_search_the_model_card_then_a_fixed_set_decide(tmp_path):
    skip, source = skip_set_for(str(tmp_path / "no-model"), 12, search_dir=tmp_path)
    assert skip == late_blocks_fallback(12) == SkipSet(attention=[6, 8, 10, 11], mlp=[5, 7, 9, 10, 11])
    assert source.startswith("fallback")
    folder = tmp_path / "carded"
    folder.mkdir()
    card = SkipSet(attention=[2], mlp=[1, 3])
    (folder / "robustness.json").write_text(json.dumps({
        "by_ratio": [{"ratio": 0.25, "skip_set": SkipSet(mlp=[3]).to_dict()},
                     {"ratio": 0.5, "skip_set": card.to_dict()}],
        "greedy_path": [{"skip_set": SkipSet(mlp=[3]).to_dict()}, {"skip_set": card.to_dict()}]}))
    assert skip_set_for(str(folder), 4, search_dir=tmp_path) == (card, "robustness.json (best agreement at 50 %)")
    assert greedy_path_sets(str(folder), 4) == [SkipSet(mlp=[3]), card]
    assert greedy_path_sets(str(folder), 2) == []                   # a card of another shape


@pytest.mark.parametrize("n", [2, 4, 6, 8, 24])
def test_late_blocks_fallback_skips_a_third_to_a_half_and_never_layer_0_attention(n):
    skip = late_blocks_fallback(n).validate(n)
    assert 0 not in skip.attention and 0.3 <= skip.ratio(n) <= 0.5
