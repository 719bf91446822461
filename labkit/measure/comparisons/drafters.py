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

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.draft_config import DraftConfig
from ...core.drafters import Drafter, LookupDrafter, ModelDrafter, SelfDrafter
from ...core.early_exit import EarlyExitDrafter
from ...core.gate import TargetConfidenceGate
from ...core.policies import AdaptiveThreshold, DraftPolicy
from ...core.skip import SkipSet
from ..harness import Decoder, Method, run_interleaved, summarise

__all__ = ["DrafterSpec", "standard_drafters", "with_gate", "compare_drafters", "n_parameters",
           "kv_floats_per_token"]


@dataclass
class DrafterSpec:
    name: str                                   # row label
    family: str                                 # 'layer skip', 'early exit', 'separate model', 'prompt lookup',
                                                # 'combination'
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


def standard_drafters(model, skip: SkipSet | DraftConfig, *, exit_layers=(), draft_model=None, lookup: int = 6,
                      combo_exit_layer: int | None = None, make_policy: Callable[[], DraftPolicy] = AdaptiveThreshold,
                      with_lookup: bool = True) -> list[DrafterSpec]:
    """Layer skip with ``skip`` (a SkipSet: "layer skip (searched)"; a whole DraftConfig, e.g.
    ``labkit.best_config(model)``: "layer skip (best draft)", with its draft weights and its own stop rule), early
    exit after each of ``exit_layers``, the separate ``draft_model`` (if given), and with ``with_lookup`` prompt
    lookup alone and in front of layer skip, early exit at ``combo_exit_layer`` and the separate model (prompt
    lookup is free, so it goes first and the model drafts when nothing matches)."""
    if isinstance(skip, DraftConfig):
        config = skip
        label, skip_policy = "layer skip (best draft)", config.make_policy

        def self_drafter():
            return SelfDrafter(model, config.skip, weights=config.draft_weights)
    else:
        label, skip_policy, fixed = "layer skip (searched)", make_policy, skip

        def self_drafter():
            return SelfDrafter(model, fixed)
    specs = [DrafterSpec(label, "layer skip", self_drafter, skip_policy)]
    for e in exit_layers:
        specs.append(DrafterSpec(f"early exit E={e}", "early exit", lambda e=e: EarlyExitDrafter(model, e),
                                 make_policy, exit_layer=e))
    extra = {}
    if draft_model is not None:
        extra = dict(extra_parameters=n_parameters(draft_model), extra_kv_per_token=kv_floats_per_token(draft_model))
        specs.append(DrafterSpec("separate model", "separate model", lambda: ModelDrafter(model, draft_model),
                                 make_policy, **extra))
    if not with_lookup:
        return specs
    specs.append(DrafterSpec("prompt lookup", "prompt lookup", lambda: LookupDrafter(lookup), make_policy))
    specs.append(DrafterSpec(f"lookup + {label}", "combination",
                             lambda: LookupDrafter(lookup, self_drafter()), skip_policy))
    if combo_exit_layer is not None:
        specs.append(DrafterSpec(f"lookup + early exit E={combo_exit_layer}", "combination",
                                 lambda: LookupDrafter(lookup, EarlyExitDrafter(model, combo_exit_layer)), make_policy,
                                 exit_layer=combo_exit_layer))
    if draft_model is not None:
        specs.append(DrafterSpec("lookup + separate model", "combination",
                                 lambda: LookupDrafter(lookup, ModelDrafter(model, draft_model)), make_policy, **extra))
    return specs


def compare_drafters(model, tokenizer, prompt_texts: list[str], specs: list[DrafterSpec], *, max_new_tokens: int = 64,
                     repeats: int = 2, progress: bool = True) -> pd.DataFrame:
    """Plain greedy decoding and every spec on every prompt, interleaved by
    :func:`labkit.measure.harness.run_interleaved`; one row per spec (and 'plain') with the harness's columns."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names) or "plain" in names:
        raise ValueError(f"spec names must be distinct and not 'plain': {names}")
    prompt_ids = [tokenizer(t, return_tensors="pt")["input_ids"] for t in prompt_texts]
    decoders = [Decoder(Method("plain", "plain", family="baseline"),
                        lambda ids, n: autoregressive_generate(model, ids, n))]
    for s in specs:
        policy = s.make_policy()                    # one per row: an adaptive policy learns across prompts
        decoders.append(Decoder(Method(s.family, s.name, gate=s.gate, exit_layer=s.exit_layer),
                                lambda ids, n, s=s, p=policy: speculative_generate(
                                    model, ids, drafter=s.make_drafter(), policy=p, max_new_tokens=n)))
    runs = run_interleaved(decoders, prompt_ids, max_new_tokens=max_new_tokens, repeats=repeats, warmup_tokens=4,
                           desc="drafters", progress=progress)
    rows = summarise(runs)
    extra = {s.name: (s.extra_parameters, s.extra_kv_per_token) for s in specs}
    for row in rows:
        row["drafter"] = row["method"]
        row["family"] = row["kind"]
        row["extra_parameters"], row["extra_kv_per_token"] = extra.get(row["method"], (0, 0))
    columns = ["drafter", "family", "speedup", "speedup_min", "speedup_max", "ms_per_token", "ms_min", "ms_max",
               "acceptance", "tokens_per_step", "drafted_per_step", "gated_fraction", "extra_parameters",
               "extra_kv_per_token", "identical", "gate", "exit_layer", "new_tokens"]
    return pd.DataFrame(rows)[columns].set_index("drafter")
