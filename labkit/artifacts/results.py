"""Reading the committed results that say which blocks to skip.

- ``data/search/<model>/best.json`` (written by ``python -m labkit search export``): the searched best
  skip set overall and in every 0.125-wide skip-ratio bucket (:func:`best_skip_set`, :func:`skip_sets_by_bucket`);
- ``data/models/<model>/robustness.json`` (``python -m labkit robustness``): the greedy-elimination path
  and the best set per ratio (:func:`greedy_path_sets`);
- ``data/models/<model>/training.json``: the fixed draft path a model was trained with (:func:`trained_draft_path`).

:func:`skip_set_for` is the one place that decides which set to draft with when a caller just wants "the
model's best", with its fallbacks.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..core.checks import check_number
from ..core.draft_config import DraftConfig
from ..core.skip import SkipSet, parse_skip_set
from .models import model_folder, model_key
from .paths import SEARCH_DIR

__all__ = ["BUCKET_WIDTH", "ratio_buckets", "bucket_index", "in_bucket", "best_skip_set", "best_config",
           "skip_sets_by_bucket", "skip_set_for", "late_blocks_fallback", "greedy_path_sets", "trained_draft_path",
           "search_hint"]

#: Width of the skip-ratio buckets results are kept per (8 buckets: [0, 0.125), ..., [0.875, 1]).
BUCKET_WIDTH = 0.125


def ratio_buckets(width: float = BUCKET_WIDTH) -> list[tuple[float, float]]:
    n = round(1 / width)
    return [(i / n, (i + 1) / n) for i in range(n)]


def in_bucket(ratio: float, bucket: tuple[float, float]) -> bool:
    """``lo <= ratio < hi``, the last bucket (hi = 1) inclusive."""
    lo, hi = bucket
    eps = 1e-12
    return lo - eps <= ratio < hi - eps or (hi >= 1.0 and ratio >= hi - eps)


def bucket_index(ratio: float, width: float = BUCKET_WIDTH) -> int:
    n = round(1 / width)
    return min(int(ratio * n + 1e-9), n - 1)


def search_hint(model) -> str:
    """The commands that (re)generate a model's search results."""
    m = str(model)
    return (f"`python -m labkit search --model {m} --objective priced --trials 100` (again with `--per-bucket "
            f"--trials 25` for every skip-ratio bucket), `python -m labkit search final --model {m}`, then "
            f"`python -m labkit search export --model {m} --objective priced`")


def _read_best(model, search_dir) -> dict:
    path = Path(search_dir or SEARCH_DIR) / model_key(model) / "best.json"
    if not path.exists():
        raise FileNotFoundError(f"no search results for model {str(model)!r} at {path}; regenerate them with "
                                f"{search_hint(model)}")
    return json.loads(path.read_text())


def _check_ratio(ratio) -> float:
    return check_number("ratio", ratio, 0.0, 1.0)


def best_skip_set(model: str = "default", ratio: float | None = None, *, search_dir=None,
                  skipping_something: bool = False) -> SkipSet:
    """The committed best skip set of ``model`` (overall, or in the 0.125-wide skip-ratio bucket holding ``ratio``).

    ``skipping_something=True`` (overall only): a set that drafts with fewer blocks than the full model:
    the overall best, or, where that is to skip nothing, the fastest per-bucket best that skips a block.
    """
    data = _read_best(model, search_dir)
    if ratio is None:
        overall = SkipSet.from_dict(data["overall"]["skip"])
        if overall or not skipping_something:
            return overall
        found = [b["best"] for b in data["buckets"] if b["best"] and b["best"]["n_skipped"] > 0]
        if not found:
            raise LookupError(f"no searched skip set of model {str(model)!r} skips anything")
        return SkipSet.from_dict(min(found, key=lambda f: f["value_ms_per_token"])["skip"])
    bucket = data["buckets"][bucket_index(_check_ratio(ratio), data.get("bucket_width", BUCKET_WIDTH))]
    if bucket["best"] is None:
        have = [f"[{b['lo']:g}, {b['hi']:g})" for b in data["buckets"] if b["best"]]
        raise LookupError(
            f"no searched skip set of model {str(model)!r} has a skip ratio in [{bucket['lo']:g}, {bucket['hi']:g}) "
            f"(buckets with results: {', '.join(have) or 'none'}); run `python -m labkit search --model {model} "
            f"--ratio-bucket {bucket['lo']:g} {bucket['hi']:g} --trials 40`, then `python -m labkit search export "
            f"--model {model}`")
    return SkipSet.from_dict(bucket["best"]["skip"])


def best_config(model: str = "default", ratio: float | None = None, *, search_dir=None) -> DraftConfig:
    """The committed best draft configuration of ``model`` (overall, or in the skip-ratio bucket holding
    ``ratio``): skip set, draft weights and stop rule as the ``priced`` search chose them (overall: the
    configuration its wall-clock final check picked). Results of a skip-set-only search read as that set with
    fp32 weights and a static threshold 0.5 (the lab's default stop rule)."""
    data = _read_best(model, search_dir)
    if ratio is None:
        entry = data["overall"]
    else:
        entry = data["buckets"][bucket_index(_check_ratio(ratio), data.get("bucket_width", BUCKET_WIDTH))]["best"]
        if entry is None:
            best_skip_set(model, ratio, search_dir=search_dir)           # raises the LookupError that explains it
    return DraftConfig.from_dict(entry.get("config") or entry["skip"])


def skip_sets_by_bucket(model: str, n_layers: int, *, search_dir=None) -> list[dict]:
    """The searched best skip set of every skip-ratio bucket that has one (empty sets left out), by ratio."""
    found, seen = [], set()
    for lo, hi in ratio_buckets():
        try:
            skip = best_skip_set(model, (lo + hi) / 2, search_dir=search_dir)
        except LookupError:
            continue
        if not skip or skip in seen:
            continue
        seen.add(skip)
        found.append({"bucket": [lo, hi], "ratio": skip.ratio(n_layers), "n_skipped": skip.n_skipped,
                      "skip": skip.to_dict()})
    if not found:
        raise LookupError(f"the search results of model {model!r} hold no non-empty skip set; run the search "
                          f"with `--per-bucket` (see labkit.search) and export it")
    return sorted(found, key=lambda e: e["ratio"])


def late_blocks_fallback(n_layers: int) -> SkipSet:
    """A fixed set that skips only in the later half (later layers are the more redundant ones, and the lab's
    skip-robust training skips them more often): alternating MLP/attention blocks from layer L/2 - 1 on, both
    blocks of the last sixth, never layer 0's attention. 8 layers: attention [4, 6, 7], MLP [3, 5, 7]."""
    start = max(1, n_layers // 2 - 1)
    tail = n_layers - max(1, n_layers // 6)
    attention = [l for l in range(start, n_layers) if (l - start) % 2 == 1 or l >= tail]
    mlp = [l for l in range(start, n_layers) if (l - start) % 2 == 0 or l >= tail]
    return SkipSet(attention=attention, mlp=mlp)


def _card_set_at_half(model) -> SkipSet | None:
    path = model_folder(model) / "robustness.json"
    if not path.exists():
        return None
    rows = json.loads(path.read_text())["by_ratio"]
    return SkipSet.from_dict(min(rows, key=lambda r: abs(r["ratio"] - 0.5))["skip_set"])


def skip_set_for(model, n_layers: int, *, search_dir=None) -> tuple[SkipSet, str]:
    """The skip set to draft with when a caller wants "this model's best", and where it came from.

    In order: the searched best (``data/search``); where the search's best is to skip nothing (no set beats
    plain decoding on that model), the fastest searched set that skips something, so self-speculation never
    drafts with the full model; the model card's best set at 50 % skipped (``robustness.json``); a fixed
    fallback (:func:`late_blocks_fallback`).
    """
    try:
        overall = best_skip_set(model, search_dir=search_dir)
        if overall:
            return overall.validate(n_layers), "data/search (Bayesian optimization)"
        return (best_skip_set(model, search_dir=search_dir, skipping_something=True).validate(n_layers),
                "data/search: fastest set that skips something (the search's best is to skip nothing)")
    except (FileNotFoundError, LookupError, ValueError, KeyError):
        pass
    card = _card_set_at_half(model)
    if card is not None:
        return card.validate(n_layers), "robustness.json (best agreement at 50 %)"
    return late_blocks_fallback(n_layers), "fallback: alternate blocks of the later layers"


def greedy_path_sets(model: str | Path, n_layers: int) -> list[SkipSet]:
    """The greedy-elimination path stored in ``model``'s robustness.json (entry i skips i + 1 blocks).

    Empty when the model has no such file, or when its sets do not fit ``n_layers`` (a file of another shape).
    """
    path = model_folder(model) / "robustness.json"
    if not path.exists():
        return []
    sets = [SkipSet.from_dict(row["skip_set"]) for row in json.loads(path.read_text()).get("greedy_path", [])]
    try:
        for skip in sets:
            skip.validate(n_layers)
    except ValueError:
        return []
    return sets


def trained_draft_path(model: str | Path) -> dict[str, SkipSet]:
    """{"trained draft path": set} when ``model`` (a shipped name or a folder) was trained with a fixed draft path,
    else {}."""
    record = model_folder(model) / "training.json"
    if not record.exists():
        return {}
    recipe = json.loads(record.read_text()).get("recipe", {})
    if recipe.get("recipe") != "skip_robust" or not recipe.get("draft_skip") or not recipe.get("draft_skip_prob"):
        return {}
    return {"trained draft path": parse_skip_set(recipe["draft_skip"])}
