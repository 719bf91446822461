"""Width drafts: the self-draft computes only some of each layer's MLP neurons; the verify runs them all.

Depth drafts (:mod:`labkit.core.skip`) drop whole blocks. Width drafts keep every block and drop neurons inside
the MLPs, the survey's *contextual sparsity* (Deja Vu, Liu et al. 2023): for one token most of a layer's neurons
contribute little, and which ones matter can be predicted from the layer's input. Two kinds, one
:class:`WidthSet` (the kept fraction of each layer's neurons, and how they are chosen):

- ``"dynamic"``: before each drafted token, a low-rank predictor per layer scores every neuron from the MLP's
  input x (H,): rank-r stand-ins of the gate and up projections, g̃ = (x A_g) B_g and ũ = (x A_u) B_u, give
  scores |act(g̃)·ũ| (B_u carries ‖w_down[:, i]‖), one (H, 2r) and one (2, r, I) product; the top k = kept·I
  neurons are computed and nothing else;
- ``"pruned"``: a static cut: the neurons ranked by importance on calibration text (mean contribution
  |act(g_i x) (u_i x)|·‖w_down[:, i]‖), the top k kept once, their weights copied contiguous and dense (no
  gather and no predictor per token).

One neuron i of a gated MLP is a row of the gate and up projections and a column of the down projection:
y = Σ_i w_down[:, i] · act(g_i·x)(u_i·x). A dynamic draft gathers k of them per token. The layout that gathers
cheapest on this CPU (docs/notes/width_layouts.py, one thread, interleaved): gate and up rows interleaved in one
(I, 2, H) tensor, so one gather brings both, and the down projection stored transposed (I, H), so its neurons are
rows too (gathering columns of the (H, I) down projection strides through memory: several times slower).

Lossless for the same reason as int8 draft weights (:mod:`labkit.core.draft_weights`, whose swap mechanism,
:class:`~labkit.core.draft_weights.ModuleSwaps`, puts the stand-in MLPs in place for a draft): q changes, the
verify's p does not, so greedy output stays token-identical and sampled output exact; only acceptance α can
suffer. :class:`WidthPredictors` holds what a model's width drafts need (its fitting lives in
:mod:`labkit.training.width`); :func:`width_drafter` is the drafter, with or without a skip set as well.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .checks import check_choice, check_int
from .draft_weights import ModuleSwaps
from .drafters import SelfDrafter
from .skip import SkipSet, decoder_layers

__all__ = ["WIDTH_KINDS", "WidthSet", "WidthPredictors", "GatheredMLP", "PrunedMLP", "WidthDraftWeights",
           "width_drafter", "mlp_parts", "neuron_contributions"]

WIDTH_KINDS = ("dynamic", "pruned")


@dataclass(frozen=True)
class WidthSet:
    """The kept fraction of each layer's MLP neurons (1.0: the whole MLP) and ``kind``, how they are chosen
    (``"dynamic"``: per token by a predictor; ``"pruned"``: once, by importance). Immutable and hashable."""

    mlp: tuple[float, ...]
    kind: str = "dynamic"

    def __post_init__(self) -> None:
        if isinstance(self.mlp, (str, bytes)) or not hasattr(self.mlp, "__iter__"):
            raise TypeError(f"mlp must be a sequence of kept fractions, one per layer, got {self.mlp!r}")
        values = tuple(float(v) for v in self.mlp)
        bad = [v for v in values if not 0.0 < v <= 1.0]
        if not values or bad:
            raise ValueError(f"mlp must hold one kept fraction in (0, 1] per layer, got {list(self.mlp)}")
        object.__setattr__(self, "mlp", values)
        check_choice("kind", self.kind, WIDTH_KINDS)

    @classmethod
    def uniform(cls, n_layers: int, kept: float, kind: str = "dynamic") -> WidthSet:
        return cls((kept,) * check_int("n_layers", n_layers, 1), kind)

    def validate(self, n_layers: int) -> WidthSet:
        if len(self.mlp) != n_layers:
            raise ValueError(f"WidthSet.mlp has {len(self.mlp)} kept fractions, the model {n_layers} layers")
        return self

    def kept_neurons(self, n_neurons: int) -> tuple[int, ...]:
        """k per layer: round(kept · I), at least one neuron."""
        return tuple(max(1, round(f * n_neurons)) for f in self.mlp)

    def __str__(self) -> str:
        return f"WidthSet({self.kind}, MLP kept {', '.join(f'{f:g}' for f in self.mlp)})"

    def to_dict(self) -> dict:
        return {"mlp": list(self.mlp), "kind": self.kind}

    @classmethod
    def from_dict(cls, d: dict) -> WidthSet:
        return cls(tuple(d["mlp"]), d.get("kind", "dynamic"))


def mlp_parts(mlp: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, object]:
    """(gate (I, H), up (I, H), down (H, I), act_fn) of a gated MLP (Llama, Mistral, Qwen2, Gemma2)."""
    try:
        gate, up, down, act = mlp.gate_proj, mlp.up_proj, mlp.down_proj, mlp.act_fn
    except AttributeError as error:
        raise TypeError(f"width drafts need a gated MLP (gate_proj, up_proj, down_proj, act_fn); "
                        f"{type(mlp).__name__} has none: {error}") from error
    if any(layer.bias is not None for layer in (gate, up, down)):
        raise TypeError("width drafts support MLPs without biases (the four supported families)")
    return gate.weight.detach(), up.weight.detach(), down.weight.detach(), act


def neuron_contributions(mlp: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """|act(g_i x)(u_i x)| · ‖w_down[:, i]‖ for every neuron i at every row of x (N, H) -> (N, I): how much
    each neuron adds to the MLP's output for that input, what a predictor should rank and a pruning keep."""
    gate, up, down, act = mlp_parts(mlp)
    inner = act(F.linear(x, gate)) * F.linear(x, up)
    return inner.abs() * down.norm(dim=0)


class GatheredMLP(nn.Module):
    """A dynamic width draft's MLP: the predictor's top-k neurons per token, gathered from the cheap layout."""

    def __init__(self, mlp: nn.Module, a: torch.Tensor, b: torch.Tensor, k: int):
        super().__init__()
        gate, up, down, self.act = mlp_parts(mlp)
        self.register_buffer("gate_up", torch.stack([gate, up], dim=1).contiguous())       # (I, 2, H)
        self.register_buffer("down_t", down.t().contiguous())                              # (I, H)
        self.register_buffer("a", a.to(gate.dtype).contiguous())                          # (H, 2r)
        self.register_buffer("b", b.to(gate.dtype).contiguous())                          # (2, r, I)
        self.k = k

    def scores(self, flat: torch.Tensor) -> torch.Tensor:
        """|act(g̃)·ũ| (N, I) for inputs (N, H): the predictor's estimate of each neuron's contribution."""
        z = (flat @ self.a).reshape(len(flat), 2, -1).transpose(0, 1)                    # (2, N, r)
        g, u = torch.bmm(z, self.b)                                                        # (N, I) each
        return (self.act(g) * u).abs()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])                                                  # (N, H)
        chosen = self.scores(flat).topk(self.k, dim=-1).indices                           # (N, k)
        if len(flat) == 1:                                      # a drafted token: no per-row loop, no stack
            return self._one(flat[0], chosen[0]).reshape(x.shape)
        out = torch.stack([self._one(row, idx) for row, idx in zip(flat, chosen)])
        return out.reshape(x.shape)

    def _one(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        gu = self.gate_up.index_select(0, idx).reshape(2 * self.k, -1) @ x                # (2k,)
        inner = self.act(gu[0::2]) * gu[1::2]                                              # (k,)
        return inner @ self.down_t.index_select(0, idx)                                    # (H,)


class PrunedMLP(nn.Module):
    """A pruned width draft's MLP: the k most important neurons, copied once, contiguous and dense."""

    def __init__(self, mlp: nn.Module, importance: torch.Tensor, k: int):
        super().__init__()
        gate, up, down, self.act = mlp_parts(mlp)
        keep = importance.topk(k).indices.sort().values.to(gate.device)
        self.register_buffer("gate", gate.index_select(0, keep).contiguous())              # (k, H)
        self.register_buffer("up", up.index_select(0, keep).contiguous())                  # (k, H)
        self.register_buffer("down", down.index_select(1, keep).contiguous())              # (H, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.act(F.linear(x, self.gate)) * F.linear(x, self.up), self.down)


@dataclass
class WidthPredictors:
    """What a model's width drafts read, per layer l: the low-rank predictor A_l (H, 2r) = [A_g | A_u] and
    B_l (2, r, I) = [B_g, B_u] of a dynamic draft (:class:`GatheredMLP`) and the importance (I,) a pruned draft
    ranks by. ``info``: how they were fitted."""

    a: list[torch.Tensor]
    b: list[torch.Tensor]
    importance: list[torch.Tensor]
    info: dict

    def __post_init__(self) -> None:
        if not (len(self.a) == len(self.b) == len(self.importance)) or not self.a:
            raise ValueError(f"a, b and importance need one tensor per layer, got {len(self.a)}, {len(self.b)}, "
                             f"{len(self.importance)}")

    @property
    def n_layers(self) -> int:
        return len(self.a)

    def check(self, model: nn.Module) -> None:
        """A clear error when these were made for a model of other sizes."""
        layers = decoder_layers(model)
        gate = mlp_parts(layers[0].mlp)[0]
        if len(layers) != self.n_layers or (self.a[0].shape[0], self.b[0].shape[-1]) != (gate.shape[1], gate.shape[0]):
            raise ValueError(f"predictors: made for {self.n_layers} layers, H = {self.a[0].shape[0]}, "
                             f"I = {self.b[0].shape[-1]}; the model has {len(layers)} layers, H = {gate.shape[1]}, "
                             f"I = {gate.shape[0]}")

    @classmethod
    def random(cls, model: nn.Module, rank: int = 4, seed: int = 0) -> WidthPredictors:
        """Random predictors and importances for ``model`` (tests: any choice of neurons must stay lossless)."""
        g = torch.Generator().manual_seed(seed)
        layers = decoder_layers(model)
        n_in, n_out = mlp_parts(layers[0].mlp)[0].shape[1], mlp_parts(layers[0].mlp)[0].shape[0]
        return cls([torch.randn(n_in, 2 * rank, generator=g) for _ in layers],
                   [torch.randn(2, rank, n_out, generator=g) for _ in layers],
                   [torch.rand(n_out, generator=g) for _ in layers], {"kind": "random", "seed": seed})

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save({"a": self.a, "b": self.b, "importance": self.importance, "info": self.info}, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> WidthPredictors:
        d = torch.load(Path(path), weights_only=True)
        return cls(d["a"], d["b"], d["importance"], d["info"])


class WidthDraftWeights(ModuleSwaps):
    """Each decoder layer's MLP swapped for a :class:`GatheredMLP` or :class:`PrunedMLP` during a draft (kept
    fraction 1.0: the layer's own MLP)."""

    def __init__(self, model: nn.Module, predictors: WidthPredictors, width: WidthSet):
        if not isinstance(predictors, WidthPredictors):
            raise TypeError(f"predictors must be WidthPredictors, got {type(predictors).__name__}")
        if not isinstance(width, WidthSet):
            raise TypeError(f"width must be a WidthSet, got {type(width).__name__}")
        layers = decoder_layers(model)
        width.validate(len(layers))
        predictors.check(model)
        n_neurons = mlp_parts(layers[0].mlp)[0].shape[0]
        swaps = []
        for i, (layer, k) in enumerate(zip(layers, width.kept_neurons(n_neurons))):
            if k >= n_neurons:
                continue
            device = mlp_parts(layer.mlp)[0].device
            stand_in = (GatheredMLP(layer.mlp, predictors.a[i].to(device), predictors.b[i].to(device), k)
                        if width.kind == "dynamic" else PrunedMLP(layer.mlp, predictors.importance[i], k))
            swaps.append((layer._modules, "mlp", layer.mlp, stand_in))
        super().__init__(swaps)
        self.width = width


def width_drafter(model: nn.Module, predictors: WidthPredictors, width: WidthSet, skip: SkipSet | None = None,
                  **kwargs):
    """A self-drafter whose draft computes only ``width``'s neurons (and skips ``skip``'s blocks: depth and width
    combined): ``speculative_generate(model, ids, drafter=width_drafter(model, predictors, width))``.
    ``kwargs`` go to :class:`~labkit.core.drafters.SelfDrafter` (``tree``)."""
    return SelfDrafter(model, skip, weights=WidthDraftWeights(model, predictors, width), **kwargs)
