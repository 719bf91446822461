"""Batches through the harness: one batched call as one harness :class:`~labkit.measure.harness.Decoder`, so a
reference group times plain and self-speculative decoding of B rows at once with the protocol every other
comparison uses (interleaved repetitions, every row checked token-identical to the batched plain loop).

The harness calls a decoder once per prompt with ids of shape (1, T). A batch unit hands it a (B, T) block of B
prompts instead, right-padded with :data:`PAD` (never a token id; :func:`pack_rows`); the decoder unpacks the rows
(:func:`unpack_rows`), decodes them in one call and returns a :class:`BatchRun`: every row's sequence joined into
one (1, L) tensor, so that the harness's identity check compares every row, and the counts of drafted and accepted
tokens over every row's verify steps. The batched loop does not time drafting and verifying apart, so c and c_v of a
batch row are NaN; :mod:`labkit.measure.costs.batch_costs` measures them per batch size instead.

Three rows per batch size: the batched plain loop, the shipped self-draft always on, and the load policy (the
shipped draft with γ capped by batch size from c(B), c_v(B, γ) and α: :func:`batch_calibration`; γ = 0 decodes the
batch plainly, as vLLM's per-batch-size draft length of 0 does).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from ...core.batch_decoding import BatchResult, LoadPolicy
from ...core.checks import check_int
from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.draft_config import DraftConfig
from ...core.policies import FixedK
from ..costs.batch_costs import alpha_from_acceptance, load_policy, measure_batch_costs
from ..harness import Decoder, Method

__all__ = ["PAD", "pack_rows", "unpack_rows", "BatchRun", "plain_batch_decoder", "speculative_batch_decoder",
           "policy_batch_decoder", "BatchCalibration", "batch_calibration", "batch_label"]

#: the padding of a packed block of prompts (token ids are never negative)
PAD = -1


def batch_label(name: str, batch: int) -> str:
    """A batch row's label: 'plain loop, batch 4' (every row of a batch group names its batch size)."""
    return f"{name}, batch {batch}"


def pack_rows(prompts, batch: int) -> list[torch.Tensor]:
    """``prompts`` (each (1, T) ids or a list of ints) in blocks of ``batch`` rows, each a (B, T) tensor padded on
    the right with :data:`PAD`; the last block holds the rows left over."""
    check_int("batch", batch, 1)
    rows = [p[0].tolist() if isinstance(p, torch.Tensor) else list(p) for p in prompts]
    if not rows:
        raise ValueError("prompts: give at least one prompt")
    blocks = []
    for start in range(0, len(rows), batch):
        group = rows[start:start + batch]
        width = max(len(r) for r in group)
        blocks.append(torch.tensor([r + [PAD] * (width - len(r)) for r in group], dtype=torch.long))
    return blocks


def unpack_rows(block: torch.Tensor) -> list[list[int]]:
    """The prompts of a packed block, padding removed."""
    if not isinstance(block, torch.Tensor) or block.dim() != 2:
        raise ValueError(f"block must be a (B, T) tensor from pack_rows, got {type(block).__name__}")
    return [[t for t in row.tolist() if t != PAD] for row in block]


class _Trace:
    """A trace-shaped view of a batch's counts, what :func:`labkit.measure.harness.record_of` reads: ``summary()``
    and no per-step records."""

    def __init__(self, result: BatchResult) -> None:
        self.steps: list = []
        self._summary = {"drafted": sum(result.drafted), "accepted": sum(result.accepted),
                         "steps": sum(result.steps), "emitted": result.n_new, "draft_s": math.nan,
                         "verify_s": math.nan}

    def summary(self) -> dict:
        return dict(self._summary)


@dataclass
class BatchRun:
    """A batched call's output as the harness reads one: ``sequences`` (1, L) every row's prompt and new tokens in
    turn, ``prompt_length`` their prompts' total, so L - prompt_length is the batch's new tokens; ``trace`` the
    drafted and accepted tokens and row-steps (None for the plain loop); ``result`` the BatchResult itself."""

    sequences: torch.Tensor
    prompt_length: int
    trace: _Trace | None
    result: BatchResult

    @classmethod
    def of(cls, result: BatchResult, speculative: bool) -> BatchRun:
        joined = torch.cat([s[0].cpu() for s in result.sequences])[None]
        return cls(joined, sum(result.prompt_lengths), _Trace(result) if speculative else None, result)


def plain_batch_decoder(model, label: str) -> Decoder:
    """The batched plain loop over a packed block (one forward of every unfinished row per step)."""
    method = Method("plain", label, family="baseline")
    return Decoder(method, lambda ids, n: BatchRun.of(autoregressive_generate(model, unpack_rows(ids), n), False))


def speculative_batch_decoder(model, config: DraftConfig, label: str) -> Decoder:
    """A self-draft configuration over a packed block, every row drafting (its stop rule made once: each row
    copies it, as the one-sequence rows carry theirs)."""
    policy = config.make_policy()
    kwargs = {k: v for k, v in config.generate_kwargs().items() if k != "policy"}
    method = Method("self-spec", label, policy=config.policy, skip=str(config.skip), weights=config.draft_weights or "")
    return Decoder(method, lambda ids, n: BatchRun.of(
        speculative_generate(model, unpack_rows(ids), max_new_tokens=n, policy=policy, **kwargs), True))


def policy_batch_decoder(model, config: DraftConfig, load: LoadPolicy, label: str) -> Decoder:
    """The load policy over a packed block: γ capped at ``load.cap(B)`` for B rows (a batch of one gets the cap in
    its stop rule, since the one-sequence path reads no load policy); a cap of 0 decodes the batch plainly."""
    capped = {1: replace(config, max_draft=max(1, min(config.max_draft, load.cap(1))))}
    policies = {1: capped[1].make_policy(), "many": config.make_policy()}
    kwargs = {k: v for k, v in config.generate_kwargs().items() if k != "policy"}

    def run(ids, n):
        prompts = unpack_rows(ids)
        if load.cap(len(prompts)) == 0:
            return BatchRun.of(autoregressive_generate(model, prompts, n), True)
        if len(prompts) == 1:
            return BatchRun.of(speculative_generate(model, prompts, max_new_tokens=n, policy=policies[1], **kwargs),
                               True)
        return BatchRun.of(speculative_generate(model, prompts, max_new_tokens=n, policy=policies["many"],
                                                load=load, **kwargs), True)
    caps = ", ".join(f"{b}: {g}" for b, g in zip(load.batch_sizes, load.max_draft))
    method = Method("self-spec", label, policy=f"{config.policy}, γ cap by batch size ({caps})",
                    skip=str(config.skip), weights=config.draft_weights or "")
    return Decoder(method, run)


@dataclass
class BatchCalibration:
    """c(B), c_v(B, γ) (a :class:`~labkit.measure.costs.batch_costs.BatchCosts`), α and the load policy they give."""

    costs: object
    alpha: float
    acceptance: float
    policy: LoadPolicy

    def to_dict(self) -> dict:
        return {"costs": self.costs.to_dict(), "alpha": self.alpha, "acceptance": self.acceptance,
                "policy": {"batch_sizes": list(self.policy.batch_sizes), "max_draft": list(self.policy.max_draft)}}


def batch_calibration(model, config: DraftConfig, prompts: list[list[int]], *, batch_sizes=(1, 2, 4, 8, 16, 32),
                      gammas=(1, 2, 3, 4, 6, 8), tokens: int = 32, repeats: int = 5) -> BatchCalibration:
    """c and c_v at every batch size (at the prompts' median length), α from accepted / drafted of a fixed γ = 4
    run of the first four prompts as one batch, and :func:`~labkit.measure.costs.batch_costs.load_policy`."""
    if not prompts:
        raise ValueError("prompts: give at least one prompt")
    context = sorted(len(p) for p in prompts)[len(prompts) // 2]
    costs = measure_batch_costs(model, config.skip, batch_sizes, gammas, context=context,
                                draft_weights=config.draft_weights, repeats=repeats)
    kwargs = {k: v for k, v in config.generate_kwargs().items() if k != "policy"}
    run = speculative_generate(model, [list(p) for p in prompts[:4]], max_new_tokens=tokens, policy=FixedK(4),
                               **kwargs)
    acceptance = sum(run.accepted) / max(1, sum(run.drafted))
    alpha = alpha_from_acceptance(min(acceptance, 1.0), 4)
    return BatchCalibration(costs, alpha, acceptance, load_policy(costs, alpha))
