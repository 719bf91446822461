"""Where a decoder block's time goes on this machine (the roofline), and what that does to self-drafting's costs.

A kernel that does F FLOPs while moving B bytes has the **arithmetic intensity** I = F / B (FLOP per byte). A
machine that streams at most β bytes/s and computes at most π FLOP/s runs it in at least max(B / β, F / π): the
**roofline** (Williams, Waterman and Patterson 2009) says it attains at most min(π, β·I) FLOP/s. Below the
*ridge* I* = π / β a kernel is **memory-bound** (its bytes take the time), above it **compute-bound**; and a kernel
whose bytes and FLOPs are both small is **overhead-bound**: the framework's few microseconds per call take the time.

One decoder block at batch size 1 reads every weight once per forward. Decoding one token uses each weight for one
multiply-add (2 FLOPs), so I ≈ 2 / (bytes per weight) = 0.5 FLOP/byte in fp32, far below the ridge of any CPU or
GPU: a big enough model decodes **memory-bound**, and a draft that skips a fraction of the blocks skips that
fraction of the bytes, so its cost c falls in proportion to the blocks it keeps (the survey's section 4.1.4). A
verify forward over T tokens reads the weights once for T tokens: I grows about T-fold, towards compute-bound,
and until it gets there a verify costs about one plain step (c_v ≈ 1). The lab's shipped models are the third
regime: 7 M parameters (30 MB in fp32) sit in this CPU's caches and a block is a few dozen µs of per-call work, so
neither bytes nor FLOPs decide, and the fixed part of a forward (embedding, LM head, Python) stays when blocks go.

- :func:`measure_ceiling`: the roofs, measured quickly: a large copy (bytes read + written per second), a copy
  small enough to stay in cache (where a small model's weights live), and a large matrix product (FLOP/s), on the
  model's device and dtype (:class:`Ceiling`).
- :func:`block_budget` and :func:`time_blocks`: bytes, FLOPs and measured ms of one attention and one MLP block for
  T tokens behind a cache of ``context`` tokens; :func:`roofline_points` puts them together as rows (intensity,
  achieved GB/s and GFLOP/s).
- :func:`draft_cost_curve`: c against the fraction of blocks kept (whole layers skipped, spread evenly:
  :func:`uniform_layer_skip`); :func:`verify_cost_curve`: c_v against the tokens one verify forward reads (what
  they allow, the analytic limit at the best γ: :func:`labkit.measure.costs.analytic.limit_curve`).
- :func:`widened_model`: a randomly initialised model of the same family, wider and deeper (random weights need no
  training to be timed: the bytes and FLOPs of a forward do not depend on their values).

Timings go through :func:`labkit.measure.harness.interleaved_ms` (interleaved rounds, odd rounds reversed), each
forward from the same cache of ``context`` tokens (cut back after it); every clock waits for the device. A cost is
the fastest sample over the fastest plain step (:func:`~labkit.measure.harness.ratio_spread`, "fastest": on a busy
shared CPU other work only ever adds time), with the range of the per-round ratios beside it as its noise.
Notation (docs/notation.md): c the cost of one drafted token and c_v of one verify forward, in plain decoding
steps; α the per-token acceptance probability; γ the tokens drafted per step; E(α, γ) the expected tokens per step.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ...artifacts.models import random_model
from ...core.cache import crop_to, new_cache
from ...core.checks import check_int, check_number, check_probability
from ...core.devices import clock, device_name, model_device, model_dtype, resolve_dtype
from ...core.draft_weights import draft_weights as build_draft_weights
from ...core.forward import forward_tokens
from ...core.skip import SkipSet, decoder_layers, skipping
from ..harness import interleaved_ms, ratio_spread

__all__ = ["Ceiling", "measure_ceiling", "cache_bytes", "parameter_count", "weight_bytes", "block_budget",
           "time_blocks", "roofline_points", "CachedForwards", "inner_for", "uniform_layer_skip", "draft_cost_curve",
           "verify_cost_curve", "prefill_cost", "widened_model", "BLOCKS"]

#: The two blocks of a decoder layer, as :class:`~labkit.core.skip.SkipSet` names them.
BLOCKS = ("attention", "mlp")
_MODULES = {"attention": "self_attn", "mlp": "mlp"}


# -- the machine's two roofs -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ceiling:
    """The machine's roofs on one device and dtype: ``bandwidth_gbs`` (a large copy, ``copy_mb``: bytes read +
    written per second, 10⁹), ``cache_gbs`` (the same for a copy of ``cache_copy_mb``, small enough to stay in the
    largest cache, ``cache_bytes`` big) and ``gflops`` (a ``matmul_n``-square matrix product, 10⁹ FLOP/s), with
    the thread count they ran on."""

    device: str
    dtype: str
    threads: int
    bandwidth_gbs: float
    cache_gbs: float
    gflops: float
    copy_mb: float
    cache_copy_mb: float
    cache_bytes: int
    matmul_n: int

    @property
    def ridge(self) -> float:
        """The intensity (FLOP/byte) where the memory roof meets the compute roof: below it memory-bound."""
        return self.gflops / self.bandwidth_gbs

    def memory_roof(self, working_bytes: float) -> float:
        """The bandwidth (GB/s) a working set of ``working_bytes`` streams at: the cache's if it fits the largest
        cache, else memory's."""
        return self.cache_gbs if 0 < working_bytes <= self.cache_bytes else self.bandwidth_gbs

    def attainable_gflops(self, intensity: float, bandwidth_gbs: float | None = None) -> float:
        """The roofline: min(peak FLOP/s, bandwidth × intensity), in GFLOP/s (default bandwidth: memory's)."""
        return min(self.gflops, (bandwidth_gbs or self.bandwidth_gbs) * intensity)

    def to_dict(self) -> dict:
        return {**asdict(self), "ridge": self.ridge}


def cache_bytes(device=None) -> int:
    """The largest cache in front of ``device``'s memory, in bytes (a CPU's last level from Linux's sysfs, a GPU's
    L2); 0 where it cannot be read."""
    device = torch.device(device or "cpu")
    if device.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 0)
    sizes = []
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=0)


def _copy_gbs(mb: float, device, dtype, repeats: int) -> float:
    size = torch.tensor([], dtype=dtype).element_size()
    n = max(1, int(mb * 2 ** 20 / size))
    src, dst = torch.ones(n, device=device, dtype=dtype), torch.empty(n, device=device, dtype=dtype)
    inner = max(1, min(50, int(64 / mb)))                           # a small copy: several per sample
    ms = min(interleaved_ms({"copy": lambda: dst.copy_(src)}, repeats=repeats, inner=inner)["copy"])
    return 2 * n * size / (ms / 1e3) / 1e9


@torch.inference_mode()
def measure_ceiling(device=None, dtype=None, *, copy_mb: float = 256.0, cache_copy_mb: float | None = None,
                    matmul_n: int = 1024, repeats: int = 5) -> Ceiling:
    """Measure the roofs (a second or two on a CPU): copying a ``copy_mb`` MB tensor (twice its bytes move: read
    and written), copying one small enough to stay in the largest cache (``cache_copy_mb``, default a quarter of
    it, at most 4 MB), and a ``matmul_n``-square matrix product (2 n³ FLOPs); each the fastest of ``repeats``
    rounds (other work on a shared machine only ever adds time). ``device``/``dtype``: torch's (default the CPU,
    fp32)."""
    check_number("copy_mb", copy_mb, 1.0)
    check_int("matmul_n", matmul_n, 16)
    device, dtype = torch.device(device or "cpu"), dtype or torch.float32
    cached = cache_bytes(device)
    small = cache_copy_mb or min(4.0, max(cached / 4 / 2 ** 20, 0.25))
    g = torch.Generator(device="cpu").manual_seed(0)
    a = torch.randn(matmul_n, matmul_n, generator=g).to(device, dtype)
    b = torch.randn(matmul_n, matmul_n, generator=g).to(device, dtype)
    matmul_s = min(interleaved_ms({"matmul": lambda: a @ b}, repeats=repeats)["matmul"]) / 1e3
    return Ceiling(device=device_name(device), dtype=str(dtype).removeprefix("torch."), threads=torch.get_num_threads(),
                   bandwidth_gbs=_copy_gbs(copy_mb, device, dtype, repeats),
                   cache_gbs=_copy_gbs(small, device, dtype, repeats), gflops=2 * matmul_n ** 3 / matmul_s / 1e9,
                   copy_mb=float(copy_mb), cache_copy_mb=float(small), cache_bytes=cached, matmul_n=matmul_n)


# -- bytes and FLOPs of one block -----------------------------------------------------------------------------------
def parameter_count(model) -> int:
    """All parameters of ``model`` (embeddings and head included)."""
    return sum(p.numel() for p in model.parameters())


def weight_bytes(model) -> int:
    """Bytes of all of ``model``'s parameters in their dtype."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _attention_shape(model) -> tuple[int, int, int]:
    """(query heads, key/value heads, head dim) of the model's attention."""
    config = model.config
    heads = int(config.num_attention_heads)
    kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
    return heads, kv_heads, head_dim


def block_budget(model, tokens: int = 1, context: int = 64) -> dict[str, dict]:
    """What one block of each kind moves and computes for ``tokens`` new tokens behind ``context`` cached ones:
    {"attention" | "mlp": {params, weight_bytes, bytes, flops, intensity}}. Bytes: the block's weights (read once
    per forward), its input and output activations, and for attention the keys and values it reads and writes;
    FLOPs: 2 per weight per token (a multiply-add), and for attention the scores and the weighted sum over the
    context (2 · 2 · T · (context + T) · heads · head dim)."""
    check_int("tokens", tokens, 1)
    check_int("context", context, 0)
    layer = decoder_layers(model)[0]
    heads, kv_heads, head_dim = _attention_shape(model)
    size = model_dtype(model).itemsize
    activations = 2 * tokens * int(model.config.hidden_size) * size
    out = {}
    for block in BLOCKS:
        module = getattr(layer, _MODULES[block])
        params = sum(p.numel() for p in module.parameters())
        nbytes, flops = params * size + activations, 2 * params * tokens
        if block == "attention":
            nbytes += 2 * (context + tokens) * kv_heads * head_dim * size
            flops += 4 * tokens * (context + tokens) * heads * head_dim
        out[block] = {"params": params, "weight_bytes": params * size, "bytes": nbytes, "flops": flops,
                      "intensity": flops / nbytes}
    return out


# -- forwards from one cache ---------------------------------------------------------------------------------------
class CachedForwards:
    """Forwards of ``model`` from the same cache of ``context`` random tokens (cut back after each): one token under
    a skip set (a draft step, or a plain step with nothing skipped), T tokens with every logit (a verify), and a
    prefill of T tokens into a fresh cache (a prompt read)."""

    def __init__(self, model, context: int, max_tokens: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.model, self.context = model, context
        self.ids = torch.randint(0, int(model.config.vocab_size), (1, context + max_tokens), generator=g)
        self.cache = new_cache(model)
        forward_tokens(model, self.ids[:, :context], 0, self.cache, logits_to_keep=1)

    def one_token(self, skip: SkipSet | None = None, weights=None) -> None:
        """``weights``: draft weights to read instead of the model's own (``core.draft_weights``; None: its own)."""
        with skipping(self.model, skip), (weights.swapped() if weights is not None else nullcontext()):
            forward_tokens(self.model, self.ids[:, self.context: self.context + 1], self.context, self.cache,
                           logits_to_keep=1)
        crop_to(self.cache, self.context)

    def verify(self, tokens: int) -> None:
        forward_tokens(self.model, self.ids[:, self.context: self.context + tokens], self.context, self.cache)
        crop_to(self.cache, self.context)

    def prefill(self, tokens: int) -> None:
        forward_tokens(self.model, self.ids[:, :tokens], 0, new_cache(self.model), logits_to_keep=1)


def inner_for(model, context: int, target_ms: float = 3.0) -> int:
    """Forwards per timing sample so that one sample lasts about ``target_ms`` (1 for a large model, at most 10):
    a sample of a few ms is less at the mercy of the clock's and the scheduler's granularity."""
    runner = CachedForwards(model, _check_context(model, context, 1), 1)
    ms = min(interleaved_ms({"step": runner.one_token}, repeats=3)["step"])
    return max(1, min(10, math.ceil(target_ms / max(ms, 1e-3))))


def _check_context(model, context: int, max_tokens: int) -> int:
    check_int("context", context, 1)
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and context + max_tokens > limit:
        raise ValueError(f"context ({context}) + tokens ({max_tokens}) exceeds the model's {limit} positions")
    return context


class _BlockClock:
    """Forward hooks on every layer's attention and MLP module: the seconds each call took, per block kind."""

    def __init__(self, model):
        self.device, self.seconds, self._open, self._handles = model_device(model), {b: 0.0 for b in BLOCKS}, {}, []
        for layer in decoder_layers(model):
            for block in BLOCKS:
                module = getattr(layer, _MODULES[block])
                self._handles.append(module.register_forward_pre_hook(self._start(module)))
                self._handles.append(module.register_forward_hook(self._stop(module, block)))

    def _start(self, module):
        def hook(*_):
            self._open[id(module)] = clock(self.device)
        return hook

    def _stop(self, module, block):
        def hook(*_):
            self.seconds[block] += clock(self.device) - self._open.pop(id(module))
        return hook

    def reset(self) -> None:
        self.seconds = {b: 0.0 for b in BLOCKS}

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


@torch.inference_mode()
def time_blocks(model, tokens: int = 1, *, context: int = 64, repeats: int = 5, seed: int = 0) -> dict[str, dict]:
    """Measured ms of one attention and one MLP block in a forward over ``tokens`` tokens behind ``context`` cached
    ones: each block's calls are timed by hooks (the clock waits for the device), averaged over the layers; per
    kind ``ms`` the fastest of ``repeats`` forwards (after one untimed; other work only ever adds time) and
    ``ms_max`` the slowest. Also ``forward_ms``: the fastest whole forward."""
    check_int("repeats", repeats, 1)
    _check_context(model, context, tokens)
    runner, hooks = CachedForwards(model, context, tokens, seed), _BlockClock(model)
    n_layers = len(decoder_layers(model))
    per_block: dict[str, list[float]] = {b: [] for b in BLOCKS}
    forwards = []
    try:
        runner.verify(tokens)
        for _ in range(repeats):
            hooks.reset()
            t0 = clock()
            runner.verify(tokens)
            forwards.append(1e3 * (clock() - t0))
            for b in BLOCKS:
                per_block[b].append(1e3 * hooks.seconds[b] / n_layers)
    finally:
        hooks.remove()
    out = {b: {"ms": min(v), "ms_max": max(v)} for b, v in per_block.items()}
    out["forward_ms"] = min(forwards)
    return out


def roofline_points(model, tokens: Sequence[int] = (1,), *, context: int = 64, repeats: int = 5,
                    regime: str = "", seed: int = 0) -> list[dict]:
    """One row per (block, T): ``regime``, ``block``, ``tokens``, ``context``, ``params``, ``bytes``, ``flops``,
    ``intensity`` (FLOP/byte), measured ``ms`` (the fastest of the forwards; ``ms_max`` the slowest), achieved
    ``gb_per_s`` and ``gflop_per_s`` (at ``ms``), and ``forward_ms`` (the whole forward over T tokens)."""
    rows = []
    for t in tokens:
        budget = block_budget(model, t, context)
        timed = time_blocks(model, t, context=context, repeats=repeats, seed=seed)
        for block in BLOCKS:
            b, m = budget[block], timed[block]
            seconds = m["ms"] / 1e3
            rows.append({"regime": regime, "block": block, "tokens": int(t), "context": context,
                         "params": b["params"], "bytes": b["bytes"], "flops": b["flops"],
                         "intensity": b["intensity"], "ms": m["ms"], "ms_max": m["ms_max"],
                         "gb_per_s": b["bytes"] / seconds / 1e9, "gflop_per_s": b["flops"] / seconds / 1e9,
                         "forward_ms": timed["forward_ms"]})
    return rows


# -- c against the blocks kept, c_v against the tokens verified -------------------------------------------------------
def uniform_layer_skip(n_layers: int, kept: float) -> SkipSet:
    """Skip whole layers, keeping round(kept · L) of them spread evenly (the middle of each of that many equal
    stretches of layers); both blocks of a skipped layer go. kept = 1: nothing skipped."""
    check_int("n_layers", n_layers, 1)
    check_probability("kept", kept)
    n = round(kept * n_layers)
    keep = {min(n_layers - 1, int((i + 0.5) * n_layers / n)) for i in range(n)} if n else set()
    gone = [i for i in range(n_layers) if i not in keep]
    return SkipSet(attention=gone, mlp=gone)


def _kept_blocks(skip: SkipSet, n_layers: int) -> float:
    return 1.0 - skip.ratio(n_layers)


@torch.inference_mode()
def draft_cost_curve(model, kept: Sequence[float] = (1.0, 0.75, 0.5, 0.25), *, context: int = 64, repeats: int = 5,
                     inner: int = 1, skips: dict | None = None, draft_weights: str | None = None,
                     seed: int = 0) -> list[dict]:
    """c against the fraction of blocks kept: for each ``kept``, one-token forwards with
    :func:`uniform_layer_skip` against the plain step (nothing skipped), interleaved. ``skips``: further named skip
    sets to time in the same rounds ({label: SkipSet}); ``draft_weights``: what the skip sets' forwards read
    ("int8": :mod:`labkit.core.draft_weights`; None: the model's own; the plain step always its own). One row
    each: ``label``, ``kept`` (the fraction of blocks the set keeps), ``c`` (the fastest draft step over the
    fastest plain step), ``c_min``–``c_max`` (the range of the per-round ratios: the noise), ``draft_ms``,
    ``plain_ms`` (the fastest of each)."""
    n_layers = len(decoder_layers(model))
    _check_context(model, context, 1)
    sets = {f"kept {k:.2f}": uniform_layer_skip(n_layers, k) for k in kept}
    sets.update(skips or {})
    runner = CachedForwards(model, context, 1, seed)
    weights = build_draft_weights(model, draft_weights)
    calls = {"plain": runner.one_token,
             **{label: (lambda s=s: runner.one_token(s, weights)) for label, s in sets.items()}}
    samples = interleaved_ms(calls, repeats=repeats, inner=inner)
    plain = samples["plain"]
    rows = []
    for label, skip in sets.items():
        c, lo, hi = ratio_spread(samples[label], plain, "fastest")
        rows.append({"label": label, "kept": _kept_blocks(skip, n_layers), "skip": skip.to_dict(), "c": c,
                     "c_min": lo, "c_max": hi, "draft_ms": min(samples[label]),
                     "plain_ms": min(plain)})
    return rows


@torch.inference_mode()
def prefill_cost(model, tokens: int, *, repeats: int = 5, inner: int = 1, seed: int = 0) -> dict:
    """A prompt's prefill, one forward over ``tokens`` tokens into an empty cache, against one plain step behind
    ``tokens`` cached ones, interleaved: {``prefill``: the fastest prefill over the fastest plain step,
    ``prefill_ms``, ``plain_ms``}."""
    check_int("tokens", tokens, 1)
    runner = CachedForwards(model, _check_context(model, tokens, 1), 1, seed)
    samples = interleaved_ms({"plain": runner.one_token, "prefill": lambda: runner.prefill(tokens)},
                             repeats=repeats, inner=inner)
    ratio, _, _ = ratio_spread(samples["prefill"], samples["plain"], "fastest")
    return {"prefill": ratio, "prefill_ms": min(samples["prefill"]),
            "plain_ms": min(samples["plain"])}


@torch.inference_mode()
def verify_cost_curve(model, tokens: Sequence[int] = (1, 2, 4, 8, 16, 32, 64), *, context: int = 64,
                      repeats: int = 5, inner: int = 1, seed: int = 0) -> list[dict]:
    """c_v against the tokens a verify forward reads (the pending token and T − 1 drafted ones, every logit kept),
    against the plain step, interleaved. One row per T: ``tokens``, ``c_v`` (the fastest verify over the fastest
    plain step), ``c_v_min``–``c_v_max`` (the range of the per-round ratios), ``verify_ms``, ``plain_ms``."""
    tokens = [check_int("a token count", t, 1) for t in tokens]
    _check_context(model, context, max(tokens))
    runner = CachedForwards(model, context, max(tokens), seed)
    calls = {"plain": runner.one_token, **{t: (lambda t=t: runner.verify(t)) for t in tokens}}
    samples = interleaved_ms(calls, repeats=repeats, inner=inner)
    plain = samples["plain"]
    rows = []
    for t in tokens:
        c_v, lo, hi = ratio_spread(samples[t], plain, "fastest")
        rows.append({"tokens": t, "c_v": c_v, "c_v_min": lo, "c_v_max": hi,
                     "verify_ms": min(samples[t]), "plain_ms": min(plain)})
    return rows


# -- a wider model of the same family ----------------------------------------------------------------------------------
def widened_model(model, *, hidden_size: int, n_layers: int, branch_scale: float = 1.0, seed: int = 0,
                  dtype=None):
    """A randomly initialised causal LM of ``model``'s family with ``hidden_size`` and ``n_layers``: the head size,
    vocabulary and the ratios of MLP width and key/value heads to the width are ``model``'s; the output head is its
    own (not tied to the embedding). On ``model``'s device, in ``dtype`` (default ``model``'s; the same ``seed``
    gives the same weights, rounded to it), in eval mode.

    ``branch_scale`` multiplies the two projections that write into the residual stream (attention's ``o_proj``,
    the MLP's ``down_proj``): below 1 each block only nudges the stream, so a draft that drops some of them still
    often picks the full model's token, as a large trained model's does (GPT-2 scales these projections by
    1/√(2L) for a related reason). The bytes and FLOPs of a forward do not depend on it."""
    check_int("hidden_size", hidden_size, 8)
    check_int("n_layers", n_layers, 1)
    check_number("branch_scale", branch_scale, 0.0)
    wide = random_model(model.config, hidden_size=hidden_size, n_layers=n_layers, tie_word_embeddings=False,
                        seed=seed)                   # fp32 on the CPU first: one seed, one set of weights, any dtype
    with torch.no_grad():
        for layer in decoder_layers(wide):
            layer.self_attn.o_proj.weight.mul_(branch_scale)
            layer.mlp.down_proj.weight.mul_(branch_scale)
    wide.generation_config.eos_token_id = None
    return wide.to(model_device(model), resolve_dtype(dtype) if dtype is not None else model_dtype(model)).eval()
