"""Parallel (Jacobi) decoding measured beside plain and self-speculative decoding on the same prompts.

Two numbers per method: *target forwards per generated token* (plain decoding: 1; Jacobi: iterations per token;
self-speculative decoding: verify steps per token; drafting forwards of the skipped model are counted apart)
and *wall clock* per generated token, every method run once per prompt in turn (A B C … A B C …, so a slow
patch of this shared machine hits all alike), medians over repetitions. Greedy throughout: every method must
give the plain loop's tokens, and the table says whether it did.

Notation: p target, q draft, α acceptance, γ drafted per step; a Jacobi iteration applies the target once to a
block of guessed tokens and fixes its matched prefix plus one (see :mod:`labkit.core.jacobi`).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from ...core.decoding import GenerationResult, autoregressive_generate, speculative_generate
from ...core.drafters import LookupDrafter
from ...core.jacobi import JacobiTrace, jacobi_generate
from ...core.policies import AdaptiveThreshold, FixedK
from ...core.skip import SkipSet
from ...core.trace import Trace
from ..harness import Decoder as Run
from ..harness import Method, frame, run_interleaved, summarise

__all__ = ["target_forwards", "jacobi_statistics", "decoders", "compare_decoders"]

Decoder = Callable[[torch.Tensor, int], GenerationResult]


def target_forwards(result: GenerationResult) -> int:
    """Forwards of the full model after the prefill: one per token (plain), per iteration (Jacobi), per step
    (speculative)."""
    trace = result.trace
    if trace is None:
        return len(result.new_tokens)
    if isinstance(trace, JacobiTrace):
        return len(trace.iterations)
    if isinstance(trace, Trace):
        return len(trace.steps)
    raise TypeError(f"unknown trace type {type(trace).__name__}")


def jacobi_statistics(traces: list[JacobiTrace]) -> dict:
    """How the fixes came, over whole runs: iterations per token, the share of iterations that fixed exactly one
    token (no better than plain decoding), and how often a guess fed in was already right (matched / guessed)."""
    its = [it for trace in traces for it in trace.iterations]
    if not its:
        raise ValueError("no Jacobi iterations to summarise")
    tokens = sum(it.n_emitted for it in its)
    guessed = sum(it.width - 1 for it in its)
    matched = sum(it.n_matched for it in its)
    return {"iterations": len(its), "tokens": tokens, "iterations_per_token": len(its) / tokens,
            "tokens_per_iteration": tokens / len(its),
            "one_token_share": sum(it.n_fixed == 1 for it in its) / len(its),
            "guess_right_rate": matched / guessed if guessed else float("nan"),
            "max_fixed": max(it.n_fixed for it in its)}


def decoders(model, skip: SkipSet, *, block_size: int, inits=("pad", "self-draft"),
             methods=("jacobi", "gauss-seidel"), spec_policy=AdaptiveThreshold, lookup: int = 6,
             draft_weights: str | None = None) -> dict[str, Decoder]:
    """The methods the notebook compares: the plain loop, each Jacobi method × initialisation, self-speculative
    decoding with ``skip`` and ``draft_weights`` (a fresh ``spec_policy()`` per call, so no run learns from
    another; ``DraftConfig.make_policy`` gives a shipped configuration's stop rule) and, with
    ``lookup`` > 0, prompt lookup alone (drafts copied from the context, up to ``lookup`` tokens; a plain step
    where nothing matches)."""
    out: dict[str, Decoder] = {"plain loop": lambda ids, n: autoregressive_generate(model, ids, n, eos_token_id=[])}
    for method in methods:
        for init in inits:
            kw = {"skip": skip} if init == "self-draft" else {}
            out[f"{method}, {init}"] = (lambda ids, n, m=method, i=init, kw=kw: jacobi_generate(
                model, ids, n, block_size=block_size, method=m, init=i, eos_token_id=[], **kw))
    out["self-speculative"] = lambda ids, n: speculative_generate(model, ids, skip=skip, policy=spec_policy(),
                                                                  draft_weights=draft_weights, max_new_tokens=n,
                                                                  eos_token_id=[])
    if lookup:
        out["prompt lookup"] = lambda ids, n: speculative_generate(model, ids, drafter=LookupDrafter(lookup),
                                                                   policy=FixedK(lookup), max_new_tokens=n,
                                                                   eos_token_id=[])
    return out


def compare_decoders(prompt_ids: list[torch.Tensor], methods: Mapping[str, Decoder], *, max_new_tokens: int = 64,
                     repeats: int = 3, progress: bool = True):
    """Every method on every prompt, interleaved by :func:`labkit.measure.harness.run_interleaved`, ``repeats``
    times (after one warm-up call each). The first method is the reference: speedup = its median ms per token / the
    method's, identical = the same tokens on every run; forwards_per_token = target forwards / generated tokens.
    Returns (DataFrame indexed by method, {method: [GenerationResult of each prompt, last repetition]})."""
    if not prompt_ids or not methods:
        raise ValueError("give at least one prompt and one method")
    decoders = [Run(Method("plain" if i == 0 else "parallel", label), fn) for i, (label, fn) in
                enumerate(methods.items())]
    runs = run_interleaved(decoders, prompt_ids, max_new_tokens=max_new_tokens, repeats=repeats, warmup_tokens=8,
                           desc="decoders", progress=progress)
    rows = summarise(runs, reference=decoders[0].method)
    for row, d in zip(rows, decoders):
        flat = [r.result for rep in runs.records[d.method] for r in rep]
        tokens, forwards = sum(len(r.new_tokens) for r in flat), sum(target_forwards(r) for r in flat)
        row.update(forwards_per_token=forwards / tokens, tokens_per_forward=tokens / forwards, tokens=tokens)
    last = {d.method.label: runs.results(d.method) for d in decoders}
    return frame(rows), last
