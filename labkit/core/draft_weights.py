"""Draft weights: the self-draft may read a cheaper copy of the model's weights; verification never does.

Why: for one token, a small model's linear layers on a CPU are bound by streaming their weights, not by arithmetic
(the lab's 7 M-parameter model: about 29 µs for a 256 x 688 fp32 matrix-vector product, 16 µs with int8
weights, casts included; docs/notes/draft_weights_costs.py).
Skipping blocks removes some of that traffic; reading the kept blocks' weights as int8 removes three quarters of
what is left. The draft q then comes from a slightly different function of the same weights, which costs nothing
in correctness: the target p (the full model, its own fp32 weights) verifies every drafted token with the usual
rule, so greedy output stays token-identical to plain decoding and sampled output exact (q is whatever the draft
used). It can only cost acceptance α, which the benchmark measures beside the speed.

:class:`Int8DraftWeights` holds an int8 stand-in (per-output-channel scales, bfloat16 activations, the kernel
gpt-fast and torchao use for weight-only int8 on CPU) for every ``nn.Linear`` of the model, built once and reused
(:func:`draft_weights`); ``swapped()`` puts them in place for the duration of a draft and always undoes it.
:class:`ModuleSwaps` is that mechanism alone, which the width drafts (:mod:`labkit.core.width`) reuse.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

__all__ = ["DRAFT_WEIGHTS", "ModuleSwaps", "Int8Linear", "Int8DraftWeights", "draft_weights"]

#: What ``speculative_generate(draft_weights=...)`` accepts besides None (the model's own weights).
DRAFT_WEIGHTS = ("int8",)


class Int8Linear(nn.Module):
    """y = (x W_int8^T) * s + b: weight-only int8 with one scale per output row; x is cast to bfloat16 and back."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        weight = linear.weight.detach().float()                                   # (N, K)
        scales = weight.abs().amax(dim=1).clamp_min(1e-12) / 127                  # (N,)
        self.register_buffer("weight", (weight / scales[:, None]).round().clamp(-127, 127).to(torch.int8).contiguous())
        self.register_buffer("scales", scales.to(torch.bfloat16))
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())
        self.in_features, self.out_features = linear.in_features, linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, self.in_features).to(torch.bfloat16)                # (B*T, K)
        y = torch._weight_int8pack_mm(flat, self.weight, self.scales)            # (B*T, N)
        y = y.to(x.dtype).reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


class ModuleSwaps:
    """Stand-in modules a draft reads in place of some of the model's own (int8 linears, gathered MLPs...).

    ``_swaps`` holds (parent's ``_modules``, name, own module, stand-in); :meth:`swapped` puts every stand-in in
    place for the duration of a draft and always undoes it. A slot that already holds something else when the draft
    begins (a block :func:`~labkit.core.skip.skipping` removed) is left alone: skipping wins over other weights."""

    def __init__(self, swaps: list[tuple[dict, str, nn.Module, nn.Module]]):
        self._swaps = swaps
        self._versions = self._weight_versions()

    def _weight_versions(self) -> list[tuple[int, int]]:
        return [(w.data_ptr(), w._version) for _, _, own, _ in self._swaps for w in own.parameters()]

    def current(self) -> bool:
        """False once any of the swapped modules' weights was replaced or changed in place since these were built."""
        return self._weight_versions() == self._versions

    @contextmanager
    def swapped(self) -> Iterator[None]:
        """The stand-ins in place of the model's own modules; the originals back afterwards, also on errors."""
        done = []
        try:
            for modules, name, own, stand_in in self._swaps:
                if modules[name] is own:
                    modules[name] = stand_in
                    done.append((modules, name, own))
            yield
        finally:
            for modules, name, own in done:
                modules[name] = own


class Int8DraftWeights(ModuleSwaps):
    """int8 stand-ins for every ``nn.Linear`` of ``model`` (its decoder blocks and its LM head)."""

    def __init__(self, model: nn.Module):
        device = next(model.parameters()).device
        swaps = []                                                 # (parent's _modules, name, own, int8)
        for parent in model.modules():
            for name, child in parent.named_children():
                if isinstance(child, nn.Linear):
                    swaps.append((parent._modules, name, child, Int8Linear(child).to(device)))
        if not swaps:
            raise ValueError("draft_weights='int8': the model has no nn.Linear layers to quantize")
        super().__init__(swaps)
        try:                                                        # fail here, not in the middle of a draft
            swaps[0][3](torch.zeros(1, swaps[0][2].in_features, device=device))
        except (RuntimeError, NotImplementedError) as error:
            raise RuntimeError(f"draft_weights='int8' needs torch._weight_int8pack_mm on {device}: {error}") from error


_BUILT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()     # model -> its Int8DraftWeights


def draft_weights(model: nn.Module, kind: str | None) -> Int8DraftWeights | None:
    """The draft weights ``kind`` names for ``model`` (None: the model's own), built once per model and rebuilt
    only when its weights change."""
    if kind is None:
        return None
    if kind not in DRAFT_WEIGHTS:
        raise ValueError(f"draft_weights must be None or one of {DRAFT_WEIGHTS}, got {kind!r}")
    built = _BUILT.get(model)
    if built is None or not built.current():
        built = _BUILT[model] = Int8DraftWeights(model)
    return built
