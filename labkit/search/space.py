"""The search space: 2L binary variables ``attn_l`` / ``mlp_l`` (1 = skip that block), in
:meth:`~labkit.core.skip.SkipSet.to_mask` order, with the warm starts every study begins from and the
skip-ratio buckets a study can be restricted to. The ``priced`` objective searches the whole draft configuration
(:class:`~labkit.core.draft_config.DraftConfig`): the 2L blocks plus ``int8`` (0/1: draft weights), ``adaptive``
(0/1: the stop rule), ``threshold_i`` (index into :data:`CONFIG_THRESHOLDS`: the static threshold, or the adaptive
rule's initial one) and ``max_draft_i`` (index into :data:`CONFIG_MAX_DRAFTS`). Every variable is an integer,
ordinal where it has more than two values: Optuna's GP handles ``suggest_int`` well and categorical ones slowly."""
from __future__ import annotations

import random

from ..artifacts.results import in_bucket
from ..core.draft_config import DraftConfig
from ..core.skip import SkipSet

__all__ = ["param_names", "skip_from_params", "params_from_skip", "warm_start_sets", "check_bucket",
           "blocks_outside", "stratified_sets", "CONFIG_THRESHOLDS", "CONFIG_MAX_DRAFTS", "config_param_names",
           "config_from_params", "params_from_config", "suggest_config", "space_param_names", "warm_start_configs"]

CONFIG_THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
CONFIG_MAX_DRAFTS = (4, 8, 12)
_CONFIG_EXTRA = {"int8": 1, "adaptive": 1, "threshold_i": len(CONFIG_THRESHOLDS) - 1,
                 "max_draft_i": len(CONFIG_MAX_DRAFTS) - 1}                      # name -> highest value


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


def config_param_names(n_layers: int) -> list[str]:
    return param_names(n_layers) + list(_CONFIG_EXTRA)


def space_param_names(space: str, n_layers: int) -> list[str]:
    """The parameter names of a search ``space``: "mask" (the blocks) or "config" (the whole draft)."""
    if space not in ("mask", "config"):
        raise ValueError(f"space must be 'mask' or 'config', got {space!r}")
    return param_names(n_layers) if space == "mask" else config_param_names(n_layers)


def config_from_params(params: dict, n_layers: int) -> DraftConfig:
    return DraftConfig(skip=skip_from_params(params, n_layers), draft_weights="int8" if int(params["int8"]) else None,
                       policy="adaptive" if int(params["adaptive"]) else "static",
                       threshold=CONFIG_THRESHOLDS[int(params["threshold_i"])],
                       max_draft=CONFIG_MAX_DRAFTS[int(params["max_draft_i"])])


def _nearest(values, value) -> int:
    return min(range(len(values)), key=lambda i: abs(values[i] - value))


def params_from_config(config: DraftConfig, n_layers: int) -> dict[str, int]:
    """The parameters of ``config`` (threshold and max draft snapped to the nearest values of the space)."""
    return {**params_from_skip(config.skip, n_layers), "int8": int(config.draft_weights == "int8"),
            "adaptive": int(config.policy == "adaptive"), "threshold_i": _nearest(CONFIG_THRESHOLDS, config.threshold),
            "max_draft_i": _nearest(CONFIG_MAX_DRAFTS, config.max_draft)}


def suggest_config(trial, n_layers: int) -> DraftConfig:
    """Ask an Optuna trial for one draft configuration (integers only, see the module docstring)."""
    params = {name: trial.suggest_int(name, 0, 1) for name in param_names(n_layers)}
    params.update({name: trial.suggest_int(name, 0, high) for name, high in _CONFIG_EXTRA.items()})
    return config_from_params(params, n_layers)


def warm_start_configs(n_layers: int) -> dict[str, DraftConfig]:
    """The mask warm starts, each with the model's own weights and with int8 weights, static threshold 0.5."""
    return {f"{label}, {w or 'fp32'} draft weights, static 0.5": DraftConfig(skip, w, "static", 0.5, 12)
            for label, skip in warm_start_sets(n_layers).items() if skip for w in (None, "int8")}
