"""The search space: 2L binary variables ``attn_l`` / ``mlp_l`` (1 = skip that block), in
:meth:`~labkit.core.skip.SkipSet.to_mask` order, with the warm starts every study begins from and the
skip-ratio buckets a study can be restricted to."""
from __future__ import annotations

import random

from ..artifacts.results import in_bucket
from ..core.skip import SkipSet

__all__ = ["param_names", "skip_from_params", "params_from_skip", "warm_start_sets", "check_bucket",
           "blocks_outside", "stratified_sets"]


def param_names(n_layers: int) -> list[str]:
    """``attn_0 .. attn_{L-1}, mlp_0 .. mlp_{L-1}``: the order of :meth:`SkipSet.to_mask`."""
    return [f"attn_{l}" for l in range(n_layers)] + [f"mlp_{l}" for l in range(n_layers)]


def skip_from_params(params: dict, n_layers: int) -> SkipSet:
    return SkipSet.from_mask([bool(int(params[name])) for name in param_names(n_layers)])


def params_from_skip(skip: SkipSet, n_layers: int) -> dict[str, int]:
    return {name: int(v) for name, v in zip(param_names(n_layers), skip.to_mask(n_layers))}


def warm_start_sets(n_layers: int) -> dict[str, SkipSet]:
    odd = [l for l in range(n_layers) if l % 2 == 1]
    return {
        "no skip": SkipSet(),
        "every other layer": SkipSet(attention=odd, mlp=odd),
        "every other attention block": SkipSet(attention=odd),
    }


def check_bucket(bucket, n_layers: int | None = None) -> tuple[float, float] | None:
    if bucket is None:
        return None
    try:
        lo, hi = (float(v) for v in bucket)
    except (TypeError, ValueError):
        raise ValueError(f"ratio_bucket must be a pair (lo, hi), got {bucket!r}") from None
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"ratio_bucket must satisfy 0 <= lo < hi <= 1, got ({lo}, {hi})")
    if n_layers is not None and not any(in_bucket(k / (2 * n_layers), (lo, hi)) for k in range(2 * n_layers + 1)):
        raise ValueError(f"no skip set of a {n_layers}-layer model has a skip ratio in [{lo}, {hi})")
    return lo, hi


def blocks_outside(n_skipped: int, n_layers: int, bucket: tuple[float, float]) -> int:
    return min(abs(k - n_skipped) for k in range(2 * n_layers + 1) if in_bucket(k / (2 * n_layers), bucket))


def stratified_sets(n_layers: int, n_sets: int, seed: int, max_ratio: float = 0.75) -> list[SkipSet]:
    rng = random.Random(seed)
    blocks = 2 * n_layers
    sets, seen = [], set()
    tries = 0
    while len(sets) < n_sets and tries < 100 * n_sets:
        tries += 1
        k = round(max_ratio * blocks * (len(sets) + rng.random()) / n_sets)
        skip = SkipSet.from_mask([i in set(rng.sample(range(blocks), k)) for i in range(blocks)])
        if skip not in seen:
            seen.add(skip)
            sets.append(skip)
    return sets
