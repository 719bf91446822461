"""Making skip strategies for a model: :func:`skip_strategy` (``labkit.skip_strategy``) and what it measures.

A strategy (:mod:`labkit.core.strategies`) only needs numbers: a starting set, a latency model, per-block
importance. This module finds them for a lab model: the starting set from the committed search results
(:func:`labkit.artifacts.results.skip_set_for`), block costs from the cost model (:mod:`.costmodel`, loaded
from ``results/costmodel/<model>.json`` or measured, a few seconds, and saved there), and importance from
teacher-forced agreement when one block is skipped (:func:`block_importance`, on held-out stdlib prompts:
in-distribution text, where the importance is measured once; the knapsack then calibrates its scale on the text at
hand). Both are measured once per model and machine and kept under ``results/`` (keyed by a hash of the weights in
memory, the CPU and what was measured), so a second ``skip_strategy("knapsack", model)`` costs well under a second.
"""
from __future__ import annotations

import hashlib
import json
import math
import platform
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..artifacts.models import MODELS_DIR, model_key
from ..artifacts.paths import RESULTS_DIR
from ..artifacts.prompts import prompts
from ..artifacts.results import skip_set_for
from ..core.architectures import check_supported
from ..core.skip import SkipSet
from ..core.strategies import (
    STRATEGY_NAMES,
    InContextStrategy,
    KnapsackStrategy,
    OnTheFlyStrategy,
    SkipStrategy,
    StaticStrategy,
)
from .agreement import AgreementProbe
from .costs.costmodel import CostModel, measure_cost_model, tied_cost_model
from .machine import machine_info

__all__ = ["skip_strategy", "STRATEGY_NAMES", "block_importance", "strategy_cost_model", "model_name_of",
           "weights_hash", "IMPORTANCE_DIR"]


def model_name_of(model) -> str:
    """The shipped name of a model loaded from data/models (else its folder or hub id)."""
    check_supported(model)
    path = Path(str(getattr(model, "name_or_path", "") or ""))
    try:
        return path.resolve().relative_to(MODELS_DIR.resolve()).parts[0]
    except (ValueError, IndexError):
        return str(path)


IMPORTANCE_DIR = RESULTS_DIR / "strategies"


def weights_hash(model) -> str:
    """SHA-256 (16 hex) of the model's parameters as they are in memory: what a cached measurement belongs to."""
    h = hashlib.sha256()
    with torch.no_grad():
        for name, p in model.named_parameters():
            h.update(name.encode())
            h.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]


def _importance_path(model, anchor: SkipSet, n_prompts: int, n_tokens: int, seed: int) -> Path:
    key = json.dumps({"weights": weights_hash(model), "anchor": anchor.to_dict(), "n_prompts": n_prompts,
                      "n_tokens": n_tokens, "seed": seed, "python": platform.python_version()}, sort_keys=True)
    return IMPORTANCE_DIR / f"importance-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def block_importance(model, tokenizer, *, anchor: SkipSet | None = None, n_prompts: int = 8, n_tokens: int = 32,
                     seed: int = 0, cache: bool = True, progress: bool = True) -> dict:
    """What each block costs in agreement at the set ``anchor`` z0 (default: nothing skipped), teacher-forced on
    ``n_prompts`` held-out stdlib prompts (those that choose sets, never the benchmark's): u_b = log α(z0) -
    log α(z0 + b) for a block z0 keeps, log α(z0 - b) - log α(z0) for one it skips. Returns {"importance": u
    (2L, attention first), "anchor": z0, "anchor_alpha": α(z0), "n_positions"}. About 5 s for the lab's models,
    with a progress bar; ``cache``: kept under ``results/strategies/`` and read back for the same weights, anchor
    and prompts."""
    check_supported(model)
    anchor = anchor if anchor is not None else SkipSet()
    path = _importance_path(model, anchor, n_prompts, n_tokens, seed) if cache else None
    if path is not None and path.exists():
        found = json.loads(path.read_text())
        return {**found, "anchor": SkipSet.from_dict(found["anchor"])}
    result = _measure_importance(model, tokenizer, anchor, n_prompts, n_tokens, seed, progress)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**result, "anchor": anchor.to_dict()}))
    return result


def _measure_importance(model, tokenizer, anchor: SkipSet, n_prompts: int, n_tokens: int, seed: int,
                        progress: bool) -> dict:
    L = model.config.num_hidden_layers
    probe = AgreementProbe.from_prompts(model, tokenizer, [p.text for p in prompts(n_prompts, seed=seed)], n_tokens)
    base_mask = anchor.to_mask(L)
    log_alpha = lambda skip: math.log(max(probe.agreement(skip), 1e-4))                     # noqa: E731
    base = log_alpha(anchor)
    importance = []
    for b, skipped in enumerate(tqdm(base_mask, desc="block importance", unit="block", disable=not progress)):
        flipped = SkipSet.from_mask([m != (i == b) for i, m in enumerate(base_mask)])
        importance.append(log_alpha(flipped) - base if skipped else base - log_alpha(flipped))
    return {"importance": importance, "anchor": anchor, "anchor_alpha": math.exp(base),
            "n_positions": probe.n_positions}


def strategy_cost_model(model, model_name: str | None = None) -> CostModel:
    """The model's cost model, tied across layers (identical layers cost the same): ``results/costmodel/<model>.json``
    when there is one (``python -m labkit costmodel``), else the one measured earlier for these weights on this CPU
    (``results/strategies/``), else measured now (a few seconds) and kept there."""
    check_supported(model)
    name = model_name or model_name_of(model)
    path = RESULTS_DIR / "costmodel" / f"{model_key(name)}.json"
    cost_model = CostModel.load(path) if path.exists() else None
    if cost_model is None or cost_model.n_layers != model.config.num_hidden_layers:
        cpu = str(machine_info().get("cpu_model", ""))
        cached = IMPORTANCE_DIR / f"costmodel-{weights_hash(model)}-{hashlib.sha256(cpu.encode()).hexdigest()[:8]}.json"
        if cached.exists():
            cost_model = CostModel.load(cached)
        else:
            cost_model = measure_cost_model(model, model_name=name)
            cost_model.save(cached)
    return tied_cost_model(cost_model)


def _load_tokenizer(model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model.name_or_path)


def skip_strategy(name: str, model, *, skip: SkipSet | None = None, model_name: str | None = None, cost_model=None,
                  importance=None, tokenizer=None, **options) -> SkipStrategy:
    """A skip strategy for ``model``: ``"static"``, ``"on-the-fly"`` (SWIFT), ``"in-context"`` (CLaSp) or
    ``"knapsack"`` (KnapSpec); pass it as ``speculative_generate(skip=...)``.

    ``skip``: the static set, and where on-the-fly and in-context start (default: the model's best searched set,
    :func:`~labkit.artifacts.results.skip_set_for`). Knapsack only: ``cost_model`` (default
    :func:`strategy_cost_model`) and ``importance`` (a :func:`block_importance` result or a list of 2L values;
    default measured now, with ``tokenizer`` or the model folder's). ``options`` go to the strategy's class
    (e.g. ``n_skipped``, ``budget``, ``every``, ``window``).
    """
    if name not in STRATEGY_NAMES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGY_NAMES)}, got {name!r}")
    check_supported(model)
    if skip is None:
        skip, _ = skip_set_for(model_name or model_name_of(model), model.config.num_hidden_layers)
    elif not isinstance(skip, SkipSet):
        raise TypeError(f"skip must be a labkit.SkipSet, got {type(skip).__name__}")
    if name == "static":
        return StaticStrategy(skip, **options)
    if name == "on-the-fly":
        return OnTheFlyStrategy(skip, **options)
    if name == "in-context":
        return InContextStrategy(skip, **options)
    cost_model = cost_model if cost_model is not None else strategy_cost_model(model, model_name)
    if importance is None:
        importance = block_importance(model, tokenizer or _load_tokenizer(model), anchor=skip)
    if isinstance(importance, dict):
        options = {"anchor": importance["anchor"], "anchor_alpha": importance["anchor_alpha"], **options}
        importance = importance["importance"]
    return KnapsackStrategy(cost_model, importance, **options)
