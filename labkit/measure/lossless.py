"""Lossless, checked on any model, device and precision: every way the engine drafts, under every draft policy,
against the plain loop on the same model (greedy: token-identical).

In reduced precision the reference is the plain loop *in that precision*: the verify's argmax in bf16, not fp32's.
A verify forward reads several tokens at once, so its matrix products can round differently from one-token steps;
at an exact near-tie the two argmaxes could differ. The check reports every mismatch it finds rather than assume
none; the tests (``tests/core/test_devices.py``) and the device benchmark (:mod:`labkit.measure.bench.device`)
run it.
"""
from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch

from ..artifacts.models import random_model
from ..core.cascade import cascade
from ..core.decoding import autoregressive_generate, speculative_generate
from ..core.draft_config import DraftConfig
from ..core.draft_head import DraftHead
from ..core.drafters import LookupDrafter, ModelDrafter, SelfDrafter
from ..core.early_exit import EarlyExitDrafter
from ..core.gate import TargetConfidenceGate
from ..core.medusa import HeadsDrafter, MedusaHeads
from ..core.policies import AdaptiveThreshold, FixedK, StaticThreshold
from ..core.skip import SkipSet
from ..core.strategies import InContextStrategy, KnapsackStrategy, OnTheFlyStrategy
from ..core.tree_shapes import draft_tree

__all__ = ["random_draft_head", "random_heads", "drafter_cases", "policy_cases", "check_lossless", "first_divergence"]


def random_draft_head(model, skip: SkipSet, *, scale: float = 0.5, seed: int = 0) -> DraftHead:
    """A :class:`DraftHead` for ``model`` and ``skip`` with random weights (a draft visibly unlike the plain skip)."""
    head = DraftHead(model.config.hidden_size, skip)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        head.proj.weight.copy_(scale * torch.randn(head.proj.weight.shape, generator=generator))
        head.proj.bias.copy_(scale * torch.randn(head.proj.bias.shape, generator=generator))
    return head.eval().requires_grad_(False)


def random_heads(model, n_heads: int = 2, *, scale: float = 0.3, seed: int = 0) -> MedusaHeads:
    """Untrained :class:`MedusaHeads` (random residual blocks) for ``model``: they draft, badly."""
    heads = MedusaHeads(model.config.hidden_size, n_heads)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for block in heads.blocks:
            block.weight.copy_(scale * torch.randn(block.weight.shape, generator=generator))
            if block.bias is not None:
                block.bias.copy_(scale * torch.randn(block.bias.shape, generator=generator))
    return heads.eval().requires_grad_(False)


def drafter_cases(model, seed: int = 0) -> Iterator[tuple[str, dict]]:
    """(name, keyword arguments of ``speculative_generate``) for every way the engine drafts, sized to ``model``:
    a static set, int8 draft weights, a draft head, prompt lookup, the three skip strategies, a separate draft
    model, early exit, Medusa heads, the three tree shapes and a cascade. Fresh objects on every call."""
    L = model.config.num_hidden_layers
    rng = random.Random(seed)
    skip = SkipSet(attention=[L // 4], mlp=[L // 2])
    sparse = SkipSet(attention=sorted({0, L // 4}), mlp=sorted({L // 4, L // 2}))
    costs = {"attention_ms": [0.3] * L, "mlp_ms": [0.1] * L, "fixed_ms": 0.3, "verify_ms": [1.9 + 0.1 * k for k in
                                                                                            range(13)]}
    yield "static set", {"skip": skip}
    yield "int8 draft weights", {"skip": skip, "draft_weights": "int8"}
    yield "draft head", {"skip": skip, "draft_head": random_draft_head(model, skip, seed=seed)}
    yield "lookup", {"skip": skip, "lookup": 3}
    yield "on the fly", {"skip": OnTheFlyStrategy(skip, every=1, window=4, budget=1.0, seed=seed)}
    yield "in context", {"skip": InContextStrategy(skip, n_skipped=min(3, 2 * L), every=1, budget=1.0,
                                                   redo_below=1.0)}
    yield "knapsack", {"skip": KnapsackStrategy(costs, [rng.random() for _ in range(2 * L)], anchor=skip,
                                                anchor_alpha=0.5, min_tokens=1)}
    small = random_model(model.config, n_layers=max(1, L // 2), device=model.device, dtype=model.dtype, seed=seed + 1)
    yield "draft model", {"drafter": ModelDrafter(model, small)}
    yield "early exit", {"drafter": LookupDrafter(3, EarlyExitDrafter(model, max(1, L // 2)))}
    yield "medusa heads", {"drafter": HeadsDrafter(model, random_heads(model, seed=seed))}
    for shape in ("static", "confidence", "dynamic"):
        yield f"{shape} tree", {"drafter": SelfDrafter(model, skip, tree=draft_tree(shape))}
    yield "cascade", {"drafter": cascade(["lookup", DraftConfig(sparse), skip], controller="dynamic")}


def policy_cases() -> list:
    """Every draft policy: a fixed length, a static and an adaptive threshold, and the target-confidence gate."""
    return [FixedK(4), StaticThreshold(0.3, 6), AdaptiveThreshold(max_draft=8),
            TargetConfidenceGate(AdaptiveThreshold(max_draft=8), 0.5)]


def check_lossless(model, prompts: Sequence[torch.Tensor], max_new_tokens: int = 20, *, seed: int = 0,
                   cases: Sequence[str] | None = None) -> list[dict]:
    """One row per (drafter, policy): how many prompts gave exactly the plain loop's greedy tokens on ``model`` (its
    device and dtype), or the error a drafter raised there (e.g. no int8 kernel on that device)."""
    plain = [autoregressive_generate(model, ids, max_new_tokens).sequences for ids in prompts]
    rows = []
    for name, kwargs in drafter_cases(model, seed):
        if cases is not None and name not in cases:
            continue
        for policy in policy_cases():
            row = {"drafter": name, "policy": type(policy).__name__, "prompts": len(prompts), "identical": 0,
                   "error": ""}
            try:
                for ids, expected in zip(prompts, plain):
                    out = speculative_generate(model, ids, policy=policy, max_new_tokens=max_new_tokens, **kwargs)
                    row["identical"] += int(torch.equal(out.sequences, expected))
            except (RuntimeError, NotImplementedError, ValueError) as error:
                row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
            rows.append(row)
    return rows


@torch.inference_mode()
def first_divergence(model, ids: torch.Tensor, max_new_tokens: int, **spec_kwargs) -> dict:
    """Where greedy self-speculative decoding (``spec_kwargs`` as ``speculative_generate`` takes them) first leaves
    the plain loop on ``model``, and what the target said there three ways: the plain loop's token (a one-token step
    on its cache), the speculative run's (a verify forward over several tokens) and the argmax of one forward over
    the whole prefix, with that forward's top-two logit gap. In exact arithmetic the three agree; in bf16 a gap of
    about one rounding step is a tie that kernels of different shapes may break differently (they are not
    batch-invariant). ``position``: None when the
    two outputs are identical."""
    plain = autoregressive_generate(model, ids, max_new_tokens).sequences[0].tolist()
    spec = speculative_generate(model, ids, max_new_tokens=max_new_tokens, **spec_kwargs).sequences[0].tolist()
    n = ids.shape[1]
    at = next((i for i in range(n, min(len(plain), len(spec))) if plain[i] != spec[i]), None)
    row = {"prompt_tokens": n, "new_tokens": len(plain) - n, "position": None if at is None else at - n}
    if at is None:
        return row
    logits = model(input_ids=torch.tensor([plain[:at]], device=model.device)).logits[0, -1].float()   # (V,)
    top = torch.topk(logits, 2)
    row.update(plain_token=plain[at], spec_token=spec[at], prefix_argmax=int(top.indices[0]),
               top2_gap=float(top.values[0] - top.values[1]),
               rounding_step=float(torch.finfo(model.dtype).eps * top.values[0].abs()))
    return row
