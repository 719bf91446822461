"""One decoding step of a model taken apart on this machine: where its milliseconds go, and what that predicts.

A plain step (one token behind a cache of ``context`` tokens) is timed whole; then forward hooks time every
attention block, MLP block, norm and the LM head inside the same forward, and the arithmetic inside the blocks is
timed alone on the same weights and shapes: each block's matrix products (its linear layers' own ``forward``), the
attention kernel over the cache (``scaled_dot_product_attention``) and the cache update (two concatenations per
layer, what the KV cache does). What a block takes beyond its own arithmetic is **framework and Python work**: the
module calls, reshapes, rotary positions, small element-wise kernels and dispatch around the products. The
:data:`PARTS` of a step:

- ``matrix products``: the blocks' linear layers alone; ``attention kernel`` and ``cache updates``: alone too;
- ``framework in the blocks``: the blocks' hooked time minus the three above;
- ``norms``: every RMSNorm's hooked time; ``LM head``: its hooked time (a matrix product onto the vocabulary);
- ``rest of the forward``: the hooked forward minus all of the above (embedding, positions and masks, the loop over
  the layers, the output), and the hooks' own cost.

Why it matters: a skipped block takes its *whole* time with it, framework work included, while the LM head and the
rest stay; so c follows the blocks kept, plus a fixed floor (:func:`predicted_c`). Int8 weights shrink only the
matrix products and the LM head: their share of the step bounds what int8 can save (:func:`int8_bound`). And the
width at which a block's matrix products would match its framework work (:func:`crossover_width`: a product's time
grows with its weights, about the width squared, in the memory- or cache-bound regime) says how much larger a model
must be before its bytes, not its calls, set the step: the regime of a large model on a GPU, where c ≈ blocks kept.

Timings: the fastest of ``repeats`` samples (other work on a shared machine only adds time); the hooked parts all come
from the one fastest hooked forward, so they add up to a forward that happened; c times the configuration's step and
the full model's in the same interleaved rounds. Notation (docs/notation.md): c the cost of one drafted token in
plain decoding steps.
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...core.cache import crop_to
from ...core.checks import check_int
from ...core.devices import clock, model_device
from ...core.forward import forward_tokens
from ...core.skip import SkipSet, decoder_layers, skipping
from ..harness import interleaved_ms, ratio_spread
from .roofline import CachedForwards, inner_for

__all__ = ["PARTS", "ARITHMETIC", "AnatomyConfig", "step_anatomy", "predicted_c", "int8_bound", "crossover_width"]

#: The parts of a step, in the order a figure stacks them.
PARTS = ("matrix products", "attention kernel", "cache updates", "LM head", "framework in the blocks", "norms",
         "rest of the forward")
#: The parts whose time is arithmetic on weights or cached keys and values (the rest is per-call work).
ARITHMETIC = ("matrix products", "attention kernel", "cache updates", "LM head")


@dataclass(frozen=True)
class AnatomyConfig:
    """``context``: cached tokens behind the step; ``repeats``: timed samples per part (the fastest is kept);
    ``seed``: the random context's tokens."""
    context: int = 128
    repeats: int = 7
    seed: int = 0

    def __post_init__(self):
        check_int("context", self.context, 1)
        check_int("repeats", self.repeats, 1)
        check_int("seed", self.seed, 0)


def _is_norm(module: nn.Module) -> bool:
    return isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("RMSNorm")


def _linears(module: nn.Module) -> list[nn.Module]:
    """The linear layers (``nn.Linear`` or an int8 stand-in with ``in_features``) directly inside ``module``."""
    return [m for m in module.modules() if m is not module and hasattr(m, "in_features")]


class _PartClock:
    """Forward hooks on the blocks, norms and LM head of the modules in place now (skips and int8 swaps applied):
    seconds per part, summed over the calls of one forward."""

    def __init__(self, model):
        self.device, self._open, self._handles = model_device(model), {}, []
        self.seconds = dict.fromkeys(("blocks", "norms", "LM head"), 0.0)
        for layer in decoder_layers(model):
            for name in ("self_attn", "mlp"):
                block = layer._modules.get(name)
                if block is not None and _linears(block):          # a skipped block's stand-in has none
                    self._watch(block, "blocks")
        for module in model.modules():
            if _is_norm(module):
                self._watch(module, "norms")
        self._watch(model.get_output_embeddings(), "LM head")

    def _watch(self, module: nn.Module, part: str) -> None:
        key = id(module)

        def start(*_):
            self._open[key] = clock(self.device)

        def stop(*_):
            self.seconds[part] += clock(self.device) - self._open.pop(key)
        self._handles += [module.register_forward_pre_hook(start), module.register_forward_hook(stop)]

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def _kept_blocks(model) -> tuple[list[nn.Module], list[nn.Module]]:
    """(attention blocks, MLP blocks) in place now: a skipped block's stand-in has no linear layers."""
    attention, mlp = [], []
    for layer in decoder_layers(model):
        for name, kept in (("self_attn", attention), ("mlp", mlp)):
            block = layer._modules.get(name)
            if block is not None and _linears(block):
                kept.append(block)
    return attention, mlp


def _kernels(model, context: int) -> dict:
    """Callables that run one step's worth of each arithmetic part alone, on the blocks in place now."""
    device, dtype = model_device(model), next(model.parameters()).dtype
    config = model.config
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    attention, mlp = _kept_blocks(model)
    x = torch.randn(1, 1, config.hidden_size, device=device, dtype=dtype)
    inputs = [(lin, torch.randn(1, 1, lin.in_features, device=device, dtype=dtype))
              for block in attention + mlp for lin in _linears(block)]
    q = torch.randn(1, heads, 1, head_dim, device=device, dtype=dtype)
    kv = torch.randn(1, heads, context + 1, head_dim, device=device, dtype=dtype)
    new = torch.randn(1, config.num_key_value_heads, 1, head_dim, device=device, dtype=dtype)
    cached = torch.randn(1, config.num_key_value_heads, context, head_dim, device=device, dtype=dtype)
    head = model.get_output_embeddings()

    def products():
        for lin, inp in inputs:
            lin.forward(inp)

    def attend():
        for _ in attention:
            F.scaled_dot_product_attention(q, kv, kv)

    def update():
        for _ in attention:
            torch.cat([cached, new], dim=-2)
            torch.cat([cached, new], dim=-2)
    return {"matrix products": products, "attention kernel": attend, "cache updates": update,
            "LM head": lambda: head.forward(x)}


def _hooked_forwards(model, runner: CachedForwards, repeats: int) -> list[dict]:
    """``repeats`` hooked one-token forwards (after one untimed): per sample, seconds per hooked part and whole."""
    device, samples = model_device(model), []
    part_clock = _PartClock(model)
    try:
        ids = runner.ids[:, runner.context: runner.context + 1]
        for rep in range(repeats + 1):
            part_clock.seconds = dict.fromkeys(part_clock.seconds, 0.0)
            t0 = clock(device)
            forward_tokens(model, ids, runner.context, runner.cache, logits_to_keep=1)
            total = clock(device) - t0
            crop_to(runner.cache, runner.context)
            if rep:
                samples.append({**part_clock.seconds, "forward": total})
    finally:
        part_clock.remove()
    return samples


def step_anatomy(model, *, skip: SkipSet | None = None, weights=None, config: AnatomyConfig | None = None) -> dict:
    """Where one step of ``model`` (under ``skip``, with draft ``weights`` such as ``core.draft_weights``'s int8;
    None: the full model's own) spends its time here: {``step_ms`` (the whole step, no hooks), ``c`` (its cost in
    full-model steps timed in the same rounds: fastest, min, max of the per-round ratios), ``hooked_ms``,
    ``parts`` ({part: ms per step}, :data:`PARTS`, summing to ``hooked_ms``), ``blocks`` (attention and MLP blocks
    executed), ``per_block_ms`` (hooked ms of one block), ``per_block_arithmetic_ms`` (its share of the products,
    attention kernel and cache updates), ``hidden_size``}."""
    config = config or AnatomyConfig()
    if weights is not None and not hasattr(weights, "swapped"):
        raise ValueError(f"weights must be draft weights with .swapped() (core.draft_weights) or None, got {weights!r}")
    runner = CachedForwards(model, config.context, 1, config.seed)
    inner = inner_for(model, config.context)
    with torch.no_grad():        # this configuration's step and the full model's, interleaved: c from the same rounds
        steps = interleaved_ms({"step": lambda: runner.one_token(skip, weights), "full": runner.one_token},
                               repeats=config.repeats, inner=inner)
    step = steps["step"]
    with torch.no_grad(), skipping(model, skip), (weights.swapped() if weights is not None else nullcontext()):
        hooked = _hooked_forwards(model, runner, config.repeats * inner)
        kernels = interleaved_ms(_kernels(model, config.context), repeats=config.repeats, inner=inner)
        attention, mlp = _kept_blocks(model)
    quietest = min(hooked, key=lambda sample: sample["forward"])     # one forward's parts, never mixed across samples
    fastest = {part: 1e3 * quietest[part] for part in ("blocks", "norms", "LM head", "forward")}
    alone = {part: min(v) for part, v in kernels.items()}
    in_blocks = alone["matrix products"] + alone["attention kernel"] + alone["cache updates"]
    parts = {"matrix products": alone["matrix products"], "attention kernel": alone["attention kernel"],
             "cache updates": alone["cache updates"], "LM head": fastest["LM head"],
             "framework in the blocks": max(0.0, fastest["blocks"] - in_blocks), "norms": fastest["norms"]}
    parts["rest of the forward"] = max(0.0, fastest["forward"] - sum(parts.values()))
    blocks = len(attention) + len(mlp)
    return {"step_ms": min(step), "step_ms_max": max(step), "c": ratio_spread(step, steps["full"], "fastest"),
            "hooked_ms": sum(parts.values()), "parts": parts,
            "blocks": blocks, "per_block_ms": fastest["blocks"] / max(blocks, 1),
            "per_block_arithmetic_ms": in_blocks / max(blocks, 1), "hidden_size": int(model.config.hidden_size)}


def predicted_c(full: dict, kept: float) -> float:
    """c of a draft keeping the fraction ``kept`` of the blocks, if each block takes its whole measured time with
    it and everything else stays: (everything but the blocks + kept × the blocks' time) ÷ the step."""
    if not 0.0 <= kept <= 1.0:
        raise ValueError(f"kept must be a fraction in [0, 1], got {kept!r}")
    parts = full["parts"]
    blocks = parts["matrix products"] + parts["attention kernel"] + parts["cache updates"] + parts[
        "framework in the blocks"]
    total = sum(parts.values())
    return (total - blocks + kept * blocks) / total


def int8_bound(anatomy: dict) -> float:
    """The smallest share of its step a configuration could take if int8 weights made every matrix product (the
    blocks' and the LM head's) free: 1 − their share. Int8 only changes the bytes a product reads."""
    parts = anatomy["parts"]
    return 1.0 - (parts["matrix products"] + parts["LM head"]) / sum(parts.values())


def crossover_width(anatomy: dict) -> float:
    """The hidden size at which one block's arithmetic would take as long as its framework work, if the arithmetic
    grew with the block's weights (∝ width²) and the framework work stayed: H · √(framework ÷ arithmetic)."""
    arithmetic = anatomy["per_block_arithmetic_ms"]
    framework = anatomy["per_block_ms"] - arithmetic
    if arithmetic <= 0 or framework <= 0:
        return math.nan
    return anatomy["hidden_size"] * math.sqrt(framework / arithmetic)
