"""Which sub-layers the draft skips, and how a transformers model skips them.

A decoder layer ``l`` of a pre-norm transformer adds two blocks to the residual stream::

    h = h + attention_l(norm(h))      # block (l, "attention")
    h = h + mlp_l(norm(h))            # block (l, "mlp")

Skipping a block means it adds nothing: its module is swapped, for the duration of a
``with skipping(model, skip):`` block, for a stand-in that returns zeros (or, when both
blocks of a layer are skipped, the whole layer for an identity). No modeling code is
forked and no global state is kept: the swap lives in the model's own ``_modules``
dictionaries and is undone on exit, so outside the context the model is exactly as loaded.
A skipped attention block appends nothing to its layer's KV cache, so cache layers drift
to different lengths while drafting; :func:`labkit.core.cache.crop_to` realigns them.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["SkipSet", "skipping", "batched_skipping", "decoder_layers", "parse_skip_set", "format_skip_set",
           "pre_mlp_norm"]


def _as_index_tuple(values: Iterable[int], name: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of layer indices, got {values!r}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int,)) and not (hasattr(v, "__index__")):
            raise TypeError(f"{name} must hold integer layer indices, got {v!r}")
        out.append(int(v))
    if len(set(out)) != len(out):
        dup = sorted({v for v in out if out.count(v) > 1})
        raise ValueError(f"{name} lists layer index {dup[0]} more than once")
    if any(v < 0 for v in out):
        raise ValueError(f"{name} holds a negative layer index ({min(out)})")
    return tuple(sorted(out))


@dataclass(frozen=True)
class SkipSet:
    """Attention and MLP blocks to skip, by layer index. Immutable and hashable.

    >>> s = SkipSet(attention=[3, 5], mlp=[5, 6])
    >>> s.to_mask(8)[:8]            # first half: attention of layers 0..7
    [False, False, False, True, False, True, False, False]
    >>> s.ratio(8)                   # 4 of 16 blocks
    0.25
    """

    attention: tuple[int, ...] = ()
    mlp: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "attention", _as_index_tuple(self.attention, "attention"))
        object.__setattr__(self, "mlp", _as_index_tuple(self.mlp, "mlp"))

    # -- conversions -------------------------------------------------------------------
    @classmethod
    def from_mask(cls, mask: Sequence[bool] | torch.Tensor) -> SkipSet:
        """Mask of length 2L: entries 0..L-1 are attention blocks, L..2L-1 are MLP blocks."""
        values = [bool(v) for v in (mask.tolist() if isinstance(mask, torch.Tensor) else mask)]
        if len(values) == 0 or len(values) % 2:
            raise ValueError(f"mask must have even, non-zero length 2L, got length {len(values)}")
        n_layers = len(values) // 2
        return cls(
            attention=[i for i in range(n_layers) if values[i]],
            mlp=[i for i in range(n_layers) if values[n_layers + i]],
        )

    def to_mask(self, n_layers: int) -> list[bool]:
        self.validate(n_layers)
        att, mlp = set(self.attention), set(self.mlp)
        return [i in att for i in range(n_layers)] + [i in mlp for i in range(n_layers)]

    @classmethod
    def all(cls, n_layers: int) -> SkipSet:
        return cls(attention=range(n_layers), mlp=range(n_layers))

    # -- properties --------------------------------------------------------------------
    def validate(self, n_layers: int) -> SkipSet:
        for name, idx in (("attention", self.attention), ("mlp", self.mlp)):
            if idx and idx[-1] >= n_layers:
                raise ValueError(
                    f"SkipSet.{name} holds layer index {idx[-1]}, but the model has "
                    f"{n_layers} layers (valid: 0..{n_layers - 1})"
                )
        return self

    @property
    def n_skipped(self) -> int:
        return len(self.attention) + len(self.mlp)

    def ratio(self, n_layers: int) -> float:
        """Fraction of the model's 2L sub-layers that are skipped."""
        self.validate(n_layers)
        return self.n_skipped / (2 * n_layers)

    def __bool__(self) -> bool:
        return self.n_skipped > 0

    def __str__(self) -> str:
        if not self:
            return "SkipSet(nothing skipped)"
        return f"SkipSet(attention={list(self.attention)}, mlp={list(self.mlp)})"

    def to_dict(self) -> dict:
        return {"attention": list(self.attention), "mlp": list(self.mlp)}

    @classmethod
    def from_dict(cls, d: dict) -> SkipSet:
        return cls(attention=d.get("attention", ()), mlp=d.get("mlp", ()))


def parse_skip_set(text: str) -> SkipSet:
    """``"attention=1,4;mlp=3,5"`` -> SkipSet(attention=[1, 4], mlp=[3, 5]); ``""`` -> nothing skipped."""
    fields = {"attention": [], "mlp": []}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, sep, values = part.partition("=")
        if not sep or key.strip() not in fields:
            raise ValueError(f"skip set text: expected 'attention=i,j;mlp=k,l', got {text!r}")
        fields[key.strip()] = [int(v) for v in values.split(",") if v.strip()]
    return SkipSet(**fields)


def format_skip_set(skip: SkipSet) -> str:
    """Inverse of :func:`parse_skip_set`."""
    return f"attention={','.join(map(str, skip.attention))};mlp={','.join(map(str, skip.mlp))}"


# ---------------------------------------------------------------------------------------
# Swapping blocks inside a model
# ---------------------------------------------------------------------------------------
class _SkippedAttention(nn.Module):
    """Stands in for a self-attention block: adds nothing, caches nothing."""

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs):
        return torch.zeros_like(hidden_states), None


class _SkippedMLP(nn.Module):
    """Stands in for an MLP block: adds nothing."""

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs):
        return torch.zeros_like(hidden_states)


class _SkippedLayer(nn.Module):
    """Stands in for a whole decoder layer whose two blocks are both skipped."""

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs):
        return hidden_states


_SKIPPED_ATTENTION = _SkippedAttention()
_SKIPPED_MLP = _SkippedMLP()
_SKIPPED_LAYER = _SkippedLayer()
_NO_NORM = nn.Identity()

#: The norms that only feed (or only rescale the output of) each block, per model family. A
#: skipped block's stand-in ignores its input and returns zeros, and every RMSNorm maps zeros to
#: zeros, so these norms can be swapped for identities too: less work per drafted token.
_BLOCK_NORMS = {
    "gemma2": {"self_attn": ("input_layernorm", "post_attention_layernorm"),
               "mlp": ("pre_feedforward_layernorm", "post_feedforward_layernorm")},
    None: {"self_attn": ("input_layernorm",), "mlp": ("post_attention_layernorm",)},   # Llama, Mistral, Qwen2
}


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The ModuleList of decoder layers of a supported causal LM."""
    base = getattr(model, "model", None)
    layers = getattr(base, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(
            f"{type(model).__name__} has no `.model.layers` ModuleList; "
            "layer skipping supports Llama-style decoder models (see labkit.SUPPORTED_ARCHITECTURES)"
        )
    return layers


def pre_mlp_norm(model: nn.Module) -> str:
    """Name of the norm that reads the residual stream between a layer's attention and MLP blocks (its input is
    the stream after attention): ``post_attention_layernorm`` (Llama, Mistral, Qwen2), ``pre_feedforward_layernorm``
    (Gemma2, whose ``post_attention_layernorm`` rescales the attention output before it is added)."""
    return _BLOCK_NORMS.get(getattr(model.config, "model_type", None), _BLOCK_NORMS[None])["mlp"][0]


@contextlib.contextmanager
def skipping(model: nn.Module, skip: SkipSet | None) -> Iterator[nn.Module]:
    """Run ``model`` with the blocks in ``skip`` removed from the residual stream.

    The swap touches only ``_modules`` entries and is always undone, also on exceptions.
    """
    if not skip:
        yield model
        return
    layers = decoder_layers(model)
    skip.validate(len(layers))
    att, mlp = set(skip.attention), set(skip.mlp)
    norms = _BLOCK_NORMS.get(getattr(model.config, "model_type", None), _BLOCK_NORMS[None])
    saved: list[tuple[dict, str, nn.Module]] = []

    def swap(modules: dict, key: str, stand_in: nn.Module) -> None:
        saved.append((modules, key, modules[key]))
        modules[key] = stand_in

    try:
        for i, layer in enumerate(layers):
            if i in att and i in mlp:
                swap(layers._modules, str(i), _SKIPPED_LAYER)
                continue
            for block, skipped, stand_in in (("self_attn", i in att, _SKIPPED_ATTENTION),
                                             ("mlp", i in mlp, _SKIPPED_MLP)):
                if skipped:
                    swap(layer._modules, block, stand_in)
                    for norm in norms[block]:
                        if norm in layer._modules:
                            swap(layer._modules, norm, _NO_NORM)
        yield model
    finally:
        for modules, key, original in reversed(saved):
            modules[key] = original


class _MaskedBlock(nn.Module):
    """Runs ``block`` and scales its output by ``keep`` (B, 1, 1): row b of the batch skips it where keep is 0."""

    def __init__(self, block: nn.Module, keep: torch.Tensor):
        super().__init__()
        self.block, self.keep = block, keep

    def forward(self, *args, **kwargs):
        out = self.block(*args, **kwargs)
        if isinstance(out, tuple):                                 # attention: (output, weights)
            return (out[0] * self.keep,) + tuple(out[1:])
        return out * self.keep


@contextlib.contextmanager
def batched_skipping(model: nn.Module, masks: torch.Tensor) -> Iterator[nn.Module]:
    """Run ``model`` on a batch whose row b skips the blocks where ``masks[b]`` (B, 2L) is True (attention
    blocks first, as :meth:`SkipSet.to_mask`): one forward scores B skip sets at once.

    A masked block still runs, and its output is multiplied by 0 in the rows that skip it, which removes
    it from their residual stream exactly as :func:`skipping` does (a norm after a block maps 0 to 0). Its
    keys/values still reach the cache: only use this on a throwaway cache (:func:`labkit.core.cache.fork_cache`).
    """
    layers = decoder_layers(model)
    L = len(layers)
    if masks.dim() != 2 or masks.shape[1] != 2 * L:
        raise ValueError(f"masks must have shape (B, {2 * L}) for a model of {L} layers, got {tuple(masks.shape)}")
    weight = next(model.parameters())
    keep = (~masks.bool()).to(weight.device, weight.dtype)                   # (B, 2L)
    saved: list[tuple[dict, str, nn.Module]] = []
    try:
        for i, layer in enumerate(layers):
            for column, name in ((i, "self_attn"), (L + i, "mlp")):
                if bool(keep[:, column].all()):
                    continue
                saved.append((layer._modules, name, layer._modules[name]))
                layer._modules[name] = _MaskedBlock(layer._modules[name], keep[:, column, None, None])
        yield model
    finally:
        for modules, key, original in reversed(saved):
            modules[key] = original
