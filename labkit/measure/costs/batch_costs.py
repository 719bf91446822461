"""c and c_v at each batch size, and the load policy they imply: when a batch should draft less, or not at all.

Speculation spends spare compute, and so does batching. At batch size B one plain step (a (B, 1) forward behind a
cache of ``context`` positions per row) costs t(B) ms; a drafted position of every row (a (B, 1) forward of the
self-draft) costs c(B)·t(B), and a verify of γ + 1 tokens per row ((B, γ + 1)) costs c_v(B, γ)·t(B). With i.i.d.
acceptance α each row emits E(α, γ) tokens per step (:func:`labkit.core.expectation.expected_tokens`), so the
speedup over the batched plain loop is

    S(B, γ) = E(α, γ) / (γ·c(B) + c_v(B, γ))

and the :class:`~labkit.core.batch_decoding.LoadPolicy` takes, at every measured B, the γ that maximises it, or
γ = 0 (plain decoding) where no γ beats ``min_gain``. A serving engine does the same with a setting (vLLM's
speculative ``disable_by_batch_size``: no speculation above that many running requests).

Each ratio is read from the harness's interleaved protocol (:func:`~labkit.measure.harness.interleaved_ms`,
:func:`~labkit.measure.harness.ratio_spread`): the plain forward and the draft or verify forward at the same B timed
in the same rounds.
"""
from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from ...core.batch import batch_forward
from ...core.batch_decoding import LoadPolicy
from ...core.cache import crop_to, new_cache
from ...core.checks import check_int, with_defaults
from ...core.draft_weights import draft_weights as build_draft_weights
from ...core.expectation import expected_tokens
from ...core.skip import SkipSet, skipping
from ..harness import interleaved_ms, ratio_spread

__all__ = ["BatchCosts", "measure_batch_costs", "load_policy", "predicted_speedup", "predicted_tokens_per_s",
           "alpha_from_acceptance"]


@dataclass
class BatchCosts:
    """Measured per batch size: ``plain_ms[i]`` (one (B, 1) forward), ``c[i]`` and ``c_v[γ][i]`` (ratios to it)."""

    batch_sizes: list[int]
    gammas: list[int]
    context: int
    plain_ms: list[float] = field(default_factory=list)
    c: list[float] = field(default_factory=list)
    c_v: dict[int, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"batch_sizes": self.batch_sizes, "gammas": self.gammas, "context": self.context,
                "plain_ms": self.plain_ms, "c": self.c, "c_v": {str(g): v for g, v in self.c_v.items()}}


def _filled_cache(model, batch: int, context: int, seed: int):
    """A cache holding ``context`` random tokens in each of ``batch`` rows, and its valid mask."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, int(model.config.vocab_size), (batch, context), generator=generator)
    cache, valid = new_cache(model), torch.ones(batch, context, dtype=torch.bool)
    batch_forward(model, cache, torch.zeros(batch, 0, dtype=torch.bool), ids,
                  torch.arange(context)[None].expand(batch, -1), valid, last_only=True)
    return cache, valid


def _forward_call(model, cache, valid, width: int, stack_of=None):
    """A callable: one (B, width) forward behind the cache, cut back after (``stack_of()``: contexts around it)."""
    batch, context = valid.shape
    ids = torch.ones(batch, width, dtype=torch.long)
    positions = context + torch.arange(width)[None].expand(batch, -1)
    new = torch.ones(batch, width, dtype=torch.bool)

    def call():
        with ExitStack() as stack:
            for ctx in (stack_of() if stack_of else ()):
                stack.enter_context(ctx)
            batch_forward(model, cache, valid, ids, positions, new, last_only=True)
        crop_to(cache, context)
    return call


#: How :func:`measure_batch_costs` times, by name, with its defaults.
BATCH_TIMING_DEFAULTS = {"context": 128, "repeats": 5, "inner": 3, "seed": 0}


@torch.inference_mode()
def measure_batch_costs(model, skip: SkipSet, batch_sizes=(1, 2, 4, 8, 16), gammas=(1, 2, 3, 4, 6, 8), *,
                        draft_weights: str | None = None, **timing) -> BatchCosts:
    """t(B), c(B) and c_v(B, γ) of ``model`` drafting with ``skip`` (and ``draft_weights``) at every batch size.
    ``timing``, by name (:data:`BATCH_TIMING_DEFAULTS`): ``context``, ``repeats``, ``inner``, ``seed``."""
    context, repeats, inner, seed = with_defaults("measure_batch_costs", timing, BATCH_TIMING_DEFAULTS).values()
    check_int("context", context, 1)
    for b in batch_sizes:
        check_int("batch_sizes", b, 1)
    for g in gammas:
        check_int("gammas", g, 1)
    weights = build_draft_weights(model, draft_weights)
    costs = BatchCosts(list(batch_sizes), list(gammas), context, c_v={g: [] for g in gammas})

    def draft_contexts():
        return [skipping(model, skip)] + ([weights.swapped()] if weights is not None else [])

    for batch in tqdm(batch_sizes, desc="batch costs"):
        cache, valid = _filled_cache(model, batch, context, seed)
        calls = {"plain": _forward_call(model, cache, valid, 1),
                 "draft": _forward_call(model, cache, valid, 1, draft_contexts)}
        calls.update({f"verify {g}": _forward_call(model, cache, valid, g + 1) for g in gammas})
        samples = interleaved_ms(calls, repeats=repeats, inner=inner)
        costs.plain_ms.append(min(samples["plain"]))
        costs.c.append(ratio_spread(samples["draft"], samples["plain"], "fastest")[0])
        for g in gammas:
            costs.c_v[g].append(ratio_spread(samples[f"verify {g}"], samples["plain"], "fastest")[0])
    return costs


def predicted_speedup(costs: BatchCosts, alpha: float, index: int, gamma: int) -> float:
    """S(B, γ) = E(α, γ) / (γ c(B) + c_v(B, γ)) at ``costs.batch_sizes[index]``; 1 for γ = 0."""
    if gamma == 0:
        return 1.0
    return expected_tokens(alpha, gamma) / (gamma * costs.c[index] + costs.c_v[gamma][index])


def predicted_tokens_per_s(costs: BatchCosts, alpha: float, index: int, gamma: int) -> float:
    """Tokens per second of the whole batch: B / t(B) for plain decoding, times S(B, γ) when drafting γ."""
    batch = costs.batch_sizes[index]
    return 1e3 * batch / costs.plain_ms[index] * predicted_speedup(costs, alpha, index, gamma)


def load_policy(costs: BatchCosts, alpha: float, min_gain: float = 1.0) -> LoadPolicy:
    """γ per measured batch size: the one maximising S(B, γ), or 0 where the best S is below ``min_gain``."""
    caps = []
    for i in range(len(costs.batch_sizes)):
        best = max(costs.gammas, key=lambda g, i=i: predicted_speedup(costs, alpha, i, g))
        caps.append(best if predicted_speedup(costs, alpha, i, best) > min_gain else 0)
    return LoadPolicy(tuple(costs.batch_sizes), tuple(caps))


def alpha_from_acceptance(acceptance: float, gamma: int) -> float:
    """α whose i.i.d. acceptance gives accepted / drafted = ``acceptance`` at a fixed draft of ``gamma``:
    (α + α² + … + α^γ) / γ, inverted by bisection."""
    check_int("gamma", gamma, 1)
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        if (expected_tokens(mid, gamma) - 1.0) / gamma < acceptance:
            low = mid
        else:
            high = mid
    return (low + high) / 2
