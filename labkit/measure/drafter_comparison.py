"""Every drafter the lab has, on the same prompts, timed side by side against plain decoding.

Notation (as everywhere in labkit): p target, q draft, α per-token acceptance probability, accepted/drafted
(measured acceptance), tokens per step, γ max draft, d drafted per step.

A :class:`DrafterSpec` names one way to draft (layer skip, early exit after layer E, a separate small model,
prompt lookup, combinations, each with or without the target-confidence gate). :func:`compare_drafters` runs
plain decoding and every spec on every prompt, *interleaved* (for each repeat and prompt: plain, A, B, ...),
and reports per spec: median ms per token over repeats (with min and max), speedup = plain's median / the
spec's median, acceptance, tokens per step, drafted per step, the fraction of steps the gate made plain (gated),
whether the output equals plain greedy decoding token for token, and the memory the drafter adds beyond the
target (parameters, and KV-cache floats per token for a drafter with a cache of its own).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import pandas as pd
import torch
from tqdm.auto import tqdm

from ..core.decoding import GenerationResult, autoregressive_generate, speculative_generate
from ..core.drafters import Drafter, LookupDrafter, ModelDrafter, SelfDrafter
from ..core.early_exit import EarlyExitDrafter
from ..core.gate import TargetConfidenceGate
from ..core.policies import AdaptiveThreshold, DraftPolicy
from ..core.skip import SkipSet

__all__ = ["DrafterSpec", "standard_drafters", "with_gate", "compare_drafters", "interleaved_runs", "n_parameters",
           "kv_floats_per_token", "run_summary"]


@dataclass
class DrafterSpec:
    name: str                                   # row label
    family: str                                 # 'layer skip', 'early exit', 'separate model', 'prompt lookup', 'combination'
    make_drafter: Callable[[], Drafter]         # a fresh drafter per generation (some keep a cache of their own)
    make_policy: Callable[[], DraftPolicy]      # called once per row: an adaptive policy learns across prompts
    extra_parameters: int = 0                   # parameters beyond the target's
    extra_kv_per_token: int = 0                 # KV-cache floats per token beyond the target's
    gate: float | None = None                   # the gate's min_confidence, None: not gated
    exit_layer: int | None = None


def n_parameters(model) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())


def kv_floats_per_token(model) -> int:
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim


def with_gate(spec: DrafterSpec, min_confidence: float) -> DrafterSpec:
    """The same drafter, its policy wrapped in a :class:`TargetConfidenceGate`."""
    return DrafterSpec(f"{spec.name} + gate {min_confidence:g}", spec.family, spec.make_drafter,
                       lambda: TargetConfidenceGate(spec.make_policy(), min_confidence), spec.extra_parameters,
                       spec.extra_kv_per_token, min_confidence, spec.exit_layer)


def standard_drafters(model, skip: SkipSet, *, exit_layers=(), draft_model=None, lookup: int = 6,
                      combo_exit_layer: int | None = None,
                      make_policy: Callable[[], DraftPolicy] = AdaptiveThreshold) -> list[DrafterSpec]:
    """Layer skip with ``skip``, early exit after each of ``exit_layers``, the separate ``draft_model`` (if
    given), prompt lookup alone, and prompt lookup in front of layer skip, early exit at ``combo_exit_layer``
    and the separate model (prompt lookup is free, so it goes first and the model drafts when nothing matches)."""
    specs = [DrafterSpec("layer skip (searched)", "layer skip", lambda: SelfDrafter(model, skip), make_policy)]
    for e in exit_layers:
        specs.append(DrafterSpec(f"early exit E={e}", "early exit", lambda e=e: EarlyExitDrafter(model, e),
                                 make_policy, exit_layer=e))
    extra = {}
    if draft_model is not None:
        extra = dict(extra_parameters=n_parameters(draft_model), extra_kv_per_token=kv_floats_per_token(draft_model))
        specs.append(DrafterSpec("separate model", "separate model", lambda: ModelDrafter(model, draft_model),
                                 make_policy, **extra))
    specs.append(DrafterSpec("prompt lookup", "prompt lookup", lambda: LookupDrafter(lookup), make_policy))
    specs.append(DrafterSpec("lookup + layer skip (searched)", "combination",
                             lambda: LookupDrafter(lookup, SelfDrafter(model, skip)), make_policy))
    if combo_exit_layer is not None:
        specs.append(DrafterSpec(f"lookup + early exit E={combo_exit_layer}", "combination",
                                 lambda: LookupDrafter(lookup, EarlyExitDrafter(model, combo_exit_layer)), make_policy,
                                 exit_layer=combo_exit_layer))
    if draft_model is not None:
        specs.append(DrafterSpec("lookup + separate model", "combination",
                                 lambda: LookupDrafter(lookup, ModelDrafter(model, draft_model)), make_policy, **extra))
    return specs


def interleaved_runs(runs: dict[str, Callable[[torch.Tensor, int], GenerationResult]], prompt_ids: list[torch.Tensor],
                     repeats: int, max_new_tokens: int, desc: str = "runs",
                     progress: bool = True) -> dict[str, list[list[GenerationResult]]]:
    """results[label][repeat] = one GenerationResult per prompt, ``runs[label](ids, max_new_tokens)``; every
    label runs once per (repeat, prompt) before the next prompt (A B C A B C ...), after a short warm-up run each."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    if not prompt_ids:
        raise ValueError("no prompts given")
    for fn in runs.values():                                     # warm-up (first-call costs), not recorded
        fn(prompt_ids[0], 4)
    results = {label: [[] for _ in range(repeats)] for label in runs}
    bar = tqdm(total=repeats * len(prompt_ids) * len(runs), desc=desc, disable=not progress)
    for rep in range(repeats):
        for ids in prompt_ids:
            for label, fn in runs.items():
                results[label][rep].append(fn(ids, max_new_tokens))
                bar.update()
    bar.close()
    return results


def run_summary(reps: list[list[GenerationResult]]) -> dict:
    """Median ms/token over repeats (each repeat: all prompts' time / all their tokens) and trace totals."""
    ms = [1e3 * sum(r.elapsed_s for r in rep) / max(1, sum(len(r.new_tokens) for r in rep)) for rep in reps]
    out = {"ms_per_token": statistics.median(ms), "ms_min": min(ms), "ms_max": max(ms),
           "new_tokens": sum(len(r.new_tokens) for r in reps[0])}
    traces = [r.trace for rep in reps for r in rep if r.trace is not None]
    if traces:
        steps = sum(len(t.steps) for t in traces)
        drafted, accepted = sum(t.n_drafted for t in traces), sum(t.n_accepted for t in traces)
        # a step was gated when the step before it left the gate closed (policy_state is recorded after it)
        gated = sum(1 for t in traces for s in t.steps[:-1] if s.policy_state.get("gate_open") is False)
        out.update(acceptance=accepted / drafted if drafted else float("nan"),
                   tokens_per_step=sum(t.n_emitted for t in traces) / steps if steps else float("nan"),
                   drafted_per_step=drafted / steps if steps else float("nan"),
                   gated_fraction=gated / steps if steps else float("nan"))
    return out


def compare_drafters(model, tokenizer, prompt_texts: list[str], specs: list[DrafterSpec], *, max_new_tokens: int = 64,
                     repeats: int = 2, progress: bool = True) -> pd.DataFrame:
    """Plain greedy decoding and every spec on every prompt, interleaved; one row per spec (and 'plain')."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names) or "plain" in names:
        raise ValueError(f"spec names must be distinct and not 'plain': {names}")
    prompt_ids = [tokenizer(t, return_tensors="pt")["input_ids"] for t in prompt_texts]
    policies = {s.name: s.make_policy() for s in specs}
    runs = {"plain": lambda ids, n: autoregressive_generate(model, ids, n)}
    for s in specs:
        runs[s.name] = lambda ids, n, s=s: speculative_generate(model, ids, drafter=s.make_drafter(),
                                                                policy=policies[s.name], max_new_tokens=n)
    results = interleaved_runs(runs, prompt_ids, repeats, max_new_tokens, desc="drafters", progress=progress)
    plain = run_summary(results["plain"])
    rows = [{"drafter": "plain", "family": "plain", "speedup": 1.0, "tokens_per_step": 1.0, "identical": True,
             "extra_parameters": 0, "extra_kv_per_token": 0, "gate": None, "exit_layer": None, **plain}]
    for s in specs:
        summary = run_summary(results[s.name])
        identical = all(a.new_tokens == b.new_tokens for ra, rb in zip(results[s.name], results["plain"])
                        for a, b in zip(ra, rb))
        rows.append({"drafter": s.name, "family": s.family, "speedup": plain["ms_per_token"] / summary["ms_per_token"],
                     "identical": identical, "extra_parameters": s.extra_parameters,
                     "extra_kv_per_token": s.extra_kv_per_token, "gate": s.gate, "exit_layer": s.exit_layer, **summary})
    columns = ["drafter", "family", "speedup", "ms_per_token", "ms_min", "ms_max", "acceptance", "tokens_per_step",
               "drafted_per_step", "gated_fraction", "extra_parameters", "extra_kv_per_token", "identical",
               "gate", "exit_layer", "new_tokens"]
    return pd.DataFrame(rows)[columns].set_index("drafter")

