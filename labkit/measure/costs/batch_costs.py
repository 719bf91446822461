"""c and c_v at each batch size, and the load policy they imply: when a batch should draft less, or not at all.

Speculation spends spare compute, and so does batching. At batch size B one plain step (a (B, 1) forward behind a
cache of ``context`` positions per row) costs t(B) ms; a drafted position of every row (a (B, 1) forward of the
self-draft) costs c(B)·t(B), and a verify of γ + 1 tokens per row ((B, γ + 1)) costs c_v(B, γ)·t(B). With i.i.d.
acceptance α each row emits E(α, γ) tokens per step (:func:`labkit.core.expectation.expected_tokens`), so the
speedup over the batched plain loop is

    S(B, γ) = E(α, γ) / (γ·c(B) + c_v(B, γ))

and the :class:`~labkit.core.batch_decoding.LoadPolicy` takes, at every measured B, the γ that maximises it (the
same γ maximises the batch's predicted tokens per second, B / t(B) · S(B, γ)), or γ = 0 (plain decoding) where no γ
beats ``min_gain``: it shortens γ as c_v(B, γ) grows and turns speculation off past the predicted crossover
(:func:`predicted_crossover`, where the best S(B, γ) falls to 1). A serving engine does the same with a setting
(vLLM's ``num_speculative_tokens_per_batch_size``: a draft length per range of concurrent requests, 0 off).

Each ratio is read from the harness's interleaved protocol (:func:`~labkit.measure.harness.interleaved_ms`,
:func:`~labkit.measure.harness.ratio_spread`): the plain forward and the draft or verify forward at the same B timed
in the same rounds.
"""
from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from ...core.batch import batch_forward
from ...core.batch_decoding import LoadPolicy
from ...core.cache import crop_to, new_cache
from ...core.checks import check_int, check_probability, with_defaults
from ...core.draft_weights import draft_weights as build_draft_weights
from ...core.expectation import expected_tokens
from ...core.skip import SkipSet, skipping
from ..harness import interleaved_ms, ratio_spread

__all__ = ["BatchCosts", "measure_batch_costs", "load_policy", "predicted_speedup", "predicted_tokens_per_s",
           "alpha_from_acceptance", "best_gamma", "policy_rows", "predicted_crossover", "crossing_batch",
           "costs_from_dict"]


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


def costs_from_dict(data: dict) -> BatchCosts:
    """A :class:`BatchCosts` back from :meth:`BatchCosts.to_dict` (a reference file's record of one)."""
    try:
        return BatchCosts(list(data["batch_sizes"]), list(data["gammas"]), int(data["context"]),
                          list(data["plain_ms"]), list(data["c"]), {int(g): list(v) for g, v in data["c_v"].items()})
    except (KeyError, TypeError) as err:
        raise ValueError(f"data: not a BatchCosts record ({err!r})") from err


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


def best_gamma(costs: BatchCosts, alpha: float, index: int) -> int:
    """The measured γ with the highest S(B, γ) at ``costs.batch_sizes[index]`` (the shortest one among ties)."""
    return max(costs.gammas, key=lambda g: (predicted_speedup(costs, alpha, index, g), -g))


def load_policy(costs: BatchCosts, alpha: float, min_gain: float = 1.0) -> LoadPolicy:
    """γ per measured batch size: the one maximising S(B, γ), or 0 where the best S is not above ``min_gain``."""
    check_probability("alpha", alpha)
    if not min_gain > 0:
        raise ValueError(f"min_gain must be > 0, got {min_gain!r}")
    caps = []
    for i in range(len(costs.batch_sizes)):
        best = best_gamma(costs, alpha, i)
        caps.append(best if predicted_speedup(costs, alpha, i, best) > min_gain else 0)
    return LoadPolicy(tuple(costs.batch_sizes), tuple(caps))


def policy_rows(costs: BatchCosts, alpha: float, min_gain: float = 1.0) -> list[dict]:
    """One row per measured batch size: the best γ and its S, the policy's γ (0: off), and the predicted tokens per
    second of the plain loop, of the best γ and of the policy (what the lesson's figures draw)."""
    policy = load_policy(costs, alpha, min_gain)
    rows = []
    for i, (batch, cap) in enumerate(zip(costs.batch_sizes, policy.max_draft)):
        best = best_gamma(costs, alpha, i)
        rows.append({"batch": batch, "best_gamma": best, "speedup": predicted_speedup(costs, alpha, i, best),
                     "policy_gamma": cap, "plain_tokens_per_s": predicted_tokens_per_s(costs, alpha, i, 0),
                     "speculative_tokens_per_s": predicted_tokens_per_s(costs, alpha, i, best),
                     "policy_tokens_per_s": predicted_tokens_per_s(costs, alpha, i, cap)})
    return rows


def crossing_batch(batch_sizes, speedups) -> float | None:
    """Where a speedup against batch size falls to 1: linear in log B between the last size that gains and the
    first that does not; the first size if none gains, None if every size gains (the crossover lies beyond them).
    The same reading for a prediction and a measurement, so the two can stand side by side."""
    pairs = list(zip(batch_sizes, speedups))
    if not pairs:
        raise ValueError("batch_sizes: give at least one batch size with its speedup")
    for i, (batch, s) in enumerate(pairs):
        if s <= 1.0:
            if i == 0:
                return float(batch)
            (b0, s0), (b1, s1) = pairs[i - 1], (batch, s)
            t = (s0 - 1.0) / (s0 - s1)
            return float(math.exp(math.log(b0) + t * (math.log(b1) - math.log(b0))))
    return None


def predicted_crossover(costs: BatchCosts, alpha: float) -> float | None:
    """The batch size where the best S(B, γ) falls to 1 (:func:`crossing_batch` of the best γ's S at every measured
    B): past it no γ pays, and the load policy turns speculation off."""
    return crossing_batch(costs.batch_sizes, [predicted_speedup(costs, alpha, i, best_gamma(costs, alpha, i))
                                              for i in range(len(costs.batch_sizes))])


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
