"""KnapSpec: a 0/1 knapsack over attention and MLP blocks that maximises expected tokens per unit of time.

Block costs come from a latency model (corrected online from this loop's timings), values from measured
importance; the model proposes, measured rates decide.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..expectation import expected_tokens
from ..skip import SkipSet
from .base import SkipStrategy, check_int, check_probability

__all__ = ["BlockCosts", "KnapsackStrategy", "knapsack", "knapsack_set"]


@dataclass
class BlockCosts:
    """Milliseconds a forward spends per block (what skipping saves) and per verification, as a latency model
    gives them (:class:`labkit.measure.costs.costmodel.CostModel` has these fields; any object or mapping with them
    does: core does not import measure)."""

    attention_ms: list[float]
    mlp_ms: list[float]
    fixed_ms: float
    verify_ms: list[float]                   # [k] = verify forward of the pending token + k drafted
    layer_ms: list[float] | None = None      # per-layer overhead, saved when both blocks of a layer skip

    @classmethod
    def of(cls, costs) -> BlockCosts:
        get = (lambda k, d=None: costs.get(k, d)) if isinstance(costs, Mapping) else \
              (lambda k, d=None: getattr(costs, k, d))
        missing = [k for k in ("attention_ms", "mlp_ms", "fixed_ms", "verify_ms") if get(k) is None]
        if missing:
            raise TypeError(f"costs must give {', '.join(missing)} (a labkit CostModel or a mapping), "
                            f"got {type(costs).__name__}")
        return cls([float(v) for v in get("attention_ms")], [float(v) for v in get("mlp_ms")],
                   float(get("fixed_ms")), [float(v) for v in get("verify_ms")],
                   [float(v) for v in get("layer_ms")] if get("layer_ms") is not None else None)

    @property
    def saving_ms(self) -> list[float]:
        """(2L,) time a one-token forward saves by skipping each block (a layer's overhead split between its two)."""
        layer = self.layer_ms or [0.0] * len(self.attention_ms)
        return [a + o / 2 for a, o in zip(self.attention_ms, layer)] + [m + o / 2 for m, o in zip(self.mlp_ms, layer)]

    @property
    def full_ms(self) -> float:
        return self.fixed_ms + sum(self.saving_ms)


def knapsack(savings: Sequence[float], values: Sequence[float], resolution: float) -> tuple[torch.Tensor, torch.Tensor]:
    """0/1 knapsack over blocks: for every total saving t (in units of ``resolution`` ms), the least total value
    (importance lost) of a set saving exactly t. Returns (least value per t, (n_items, T) take table)."""
    weights = [max(0, round(s / resolution)) for s in savings]
    T = sum(weights) + 1
    least = torch.full((T,), float("inf"), dtype=torch.float64)
    least[0] = 0.0
    takes = torch.zeros(len(weights), T, dtype=torch.bool)
    for i, (w, v) in enumerate(zip(weights, values)):
        shifted = torch.full((T,), float("inf"), dtype=torch.float64)
        shifted[w:] = least[:T - w] + v
        takes[i] = shifted < least
        least = torch.minimum(least, shifted)
    return least, takes


def knapsack_set(takes: torch.Tensor, savings_units: Sequence[int], t: int) -> tuple[bool, ...]:
    """The items of the knapsack solution that saves exactly ``t`` units (walking the take table back)."""
    chosen = [False] * takes.shape[0]
    for i in range(takes.shape[0] - 1, -1, -1):
        if takes[i, t]:
            chosen[i], t = True, t - savings_units[i]
    return tuple(chosen)


class KnapsackStrategy(SkipStrategy):
    """KnapSpec-style: skip the attention and MLP blocks that a 0/1 knapsack says buy the most tokens per
    millisecond, and keep the set that measures fastest.

    Weight of block b: the ms a one-token forward saves without it (``costs``, a latency model: attention and MLP
    blocks cost differently). Value: its importance u_b, the agreement it costs at the ``anchor`` set z0
    (measured: log α(z0) - log α(z0 + b) for a block z0 keeps, log α(z0 - b) - log α(z0) for one it skips). The
    predicted acceptance of a set z is α(z) = min(1, α(z0) exp(Σ_{z0} u - Σ_z u)). For every saving the knapsack
    gives the set that loses the least importance; each is rated E(α, γ) / (γ draft_ms + verify_ms[γ]) at its best
    γ in 1..max_draft (tokens per ms).

    The latency model is corrected online from what this decoding loop took: verifying (a full forward) gives the
    machine's speed against ``costs`` (a busy machine scales every forward), drafting gives the per-token work any
    set pays on top (sampling, Python). Times are then counted in the model's ms, so rates measured at busy and
    quiet moments compare.

    The model proposes, measurement decides: it starts at the anchor, and each time the set in force has emitted
    ``min_tokens`` more tokens it compares measured rates (tokens per model-ms while a set was in force, kept for
    every set tried) with the predicted rate of the best set not tried yet (corrected by how the model's
    predictions compared with the measurements so far); it moves when another set is ahead by ``margin``.
    """

    name = "knapsack"

    def __init__(self, costs, importance: Sequence[float], *, anchor: SkipSet | None = None,
                 anchor_alpha: float = 1.0, min_tokens: int = 64, margin: float = 0.05, max_draft: int | None = None,
                 resolution_ms: float | None = None):
        super().__init__()
        self.costs = BlockCosts.of(costs)
        self.importance = [min(10.0, max(0.0, float(v))) for v in importance]        # (2L,) u_b >= 0
        L = len(self.costs.attention_ms)
        if len(self.costs.mlp_ms) != L or len(self.importance) != 2 * L:
            raise ValueError(f"costs and importance must cover 2L = {2 * L} blocks (attention first), got "
                             f"{L} + {len(self.costs.mlp_ms)} costs and {len(self.importance)} importances")
        self.anchor = anchor if anchor is not None else SkipSet()
        self.anchor_alpha = check_probability("anchor_alpha", anchor_alpha)
        self.min_tokens, self.margin = check_int("min_tokens", min_tokens, 1), check_probability("margin", margin)
        self.max_draft = min(max_draft or len(self.costs.verify_ms) - 1, len(self.costs.verify_ms) - 1)
        self.resolution = resolution_ms or self.costs.full_ms / 400
        self.units = [max(0, round(s / self.resolution)) for s in self.costs.saving_ms]
        self.least, self.takes = knapsack(self.costs.saving_ms, self.importance, self.resolution)
        self.anchor_loss = self._loss(self.anchor)
        self.saving_t = [t for t in torch.nonzero(torch.isfinite(self.least)).flatten().tolist() if t > 0]
        self._sets: dict[int, SkipSet] = {}                 # knapsack solution per saving t, built when first asked
        self.reset()

    def _bind(self, model) -> None:
        if 2 * self.n_layers != len(self.importance):
            raise ValueError(f"the knapsack was built for {len(self.importance) // 2} layers, the model has "
                             f"{self.n_layers}")

    def reset(self) -> None:
        super().reset()
        self.scale, self.draft_overhead_ms, self._draft_s = 1.0, 0.0, 0.0
        self.measured: dict[SkipSet, list[float]] = {}     # set -> [tokens emitted, model-ms] while in force
        self.current = self.anchor if self.anchor else self._untried()
        self.since, self.n_moves = 0, 0

    # -- the model ------------------------------------------------------------------------------
    def _loss(self, skip: SkipSet) -> float:
        return sum(v for v, m in zip(self.importance, skip.to_mask(len(self.importance) // 2)) if m)

    def _saving(self, skip: SkipSet) -> float:
        return sum(w for w, m in zip(self.costs.saving_ms, skip.to_mask(len(self.importance) // 2)) if m)

    def predicted_alpha(self, skip: SkipSet) -> float:
        return min(1.0, self.anchor_alpha * math.exp(self.anchor_loss - self._loss(skip)))

    def predicted_rate(self, skip: SkipSet) -> tuple[float, int]:
        """(tokens per model-ms, best draft length) the model predicts for ``skip`` in this loop."""
        alpha = self.predicted_alpha(skip)
        draft_ms = max(self.costs.full_ms - self._saving(skip), 1e-3) + self.draft_overhead_ms
        return max((expected_tokens(alpha, g) / (g * draft_ms + self.costs.verify_ms[g]), g)
                   for g in range(1, self.max_draft + 1))

    def _untried(self) -> SkipSet | None:
        """The knapsack solution with the best predicted rate that has not drafted yet (all savings at once)."""
        t = torch.tensor(self.saving_t, dtype=torch.float64)
        alpha = torch.clamp(self.anchor_alpha * torch.exp(self.anchor_loss - self.least[self.saving_t]), max=1 - 1e-9)
        draft = torch.clamp(self.costs.full_ms - t * self.resolution, min=1e-3) + self.draft_overhead_ms     # (T,)
        g = torch.arange(1, self.max_draft + 1, dtype=torch.float64)[:, None]                                # (γ, 1)
        verify = torch.tensor(self.costs.verify_ms[1:self.max_draft + 1], dtype=torch.float64)[:, None]
        rate = (expected_tokens(alpha, g) / (g * draft + verify)).max(dim=0).values            # (T,)
        for i in torch.argsort(rate, descending=True).tolist():
            key = self.saving_t[i]
            if key not in self._sets:
                self._sets[key] = SkipSet.from_mask(knapsack_set(self.takes, self.units, key))
            if self._sets[key] not in self.measured:
                return self._sets[key]
        return None

    # -- measurement ----------------------------------------------------------------------------
    def rate(self, skip: SkipSet) -> float:
        tokens, ms = self.measured.get(skip, (0.0, 0.0))
        return tokens / ms if ms else float("nan")

    def _correction(self) -> float:
        """Median of measured / predicted rate over the sets tried: how far the model's numbers are off here."""
        ratios = sorted(self.rate(z) / self.predicted_rate(z)[0] for z, (n, _) in self.measured.items()
                        if n >= self.min_tokens)
        return ratios[len(ratios) // 2] if ratios else 1.0

    def _decide(self) -> None:
        """Move to the set measured (or, untried, predicted) fastest, if it beats the set in force by ``margin``."""
        tried = {z: self.rate(z) for z, (n, _) in self.measured.items() if n >= self.min_tokens}
        untried = self._untried()
        options = dict(tried)
        if untried is not None:
            options[untried] = self.predicted_rate(untried)[0] * self._correction()
        best = max(options, key=options.get)
        if best != self.current and options[best] > (1 + self.margin) * tried[self.current]:
            self.current, self.n_moves = best, self.n_moves + 1

    def _choose(self, state) -> SkipSet:
        if self.since >= self.min_tokens:
            self.since = 0
            self._decide()
        return self.current

    # -- the latency model, from this loop -----------------------------------------------------
    def drafted(self, n_drafted: int, seconds: float) -> None:
        self._draft_s = seconds
        if n_drafted:
            per_token = 1e3 * seconds / n_drafted / self.scale                       # model-ms
            residual = per_token - (self.costs.full_ms - self._saving(self.current))
            self.draft_overhead_ms = 0.9 * self.draft_overhead_ms + 0.1 * max(residual, 0.0)

    def _observe(self, state, start, verdict, n_drafted) -> None:
        if not n_drafted or self.last_step_s is None:
            return
        k = min(n_drafted, len(self.costs.verify_ms) - 1)
        ratio = 1e3 * (self.last_step_s - self._draft_s) / self.costs.verify_ms[k]
        self.scale = 0.9 * self.scale + 0.1 * ratio
        tokens, ms = self.measured.setdefault(self.current, [0.0, 0.0])
        emitted = len(state.tokens) - start
        self.measured[self.current] = [tokens + emitted, ms + 1e3 * self.last_step_s / self.scale]
        self.since += emitted

    def state(self) -> dict:
        return {**super().state(), "rate": self.rate(self.current), "predicted_rate": self.predicted_rate(
            self.current)[0], "predicted_alpha": self.predicted_alpha(self.current), "sets_tried": len(self.measured),
            "n_moves": self.n_moves, "scale": self.scale, "draft_overhead_ms": self.draft_overhead_ms}
