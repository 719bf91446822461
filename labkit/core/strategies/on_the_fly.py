"""SWIFT (Xia et al. 2025): on-the-fly search of the skip set, scored by matchness on the recent context.

Random search with a model-based proposal every few rounds; it stops optimising once matchness is high and
starts again when acceptance falls. Measured acceptance has the last word (:class:`~.base.Probation`).
"""
from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, fields

import torch

from ..cache import fork_cache
from ..checks import record_from
from ..devices import clock
from ..forward import model_output
from ..skip import SkipSet, batched_skipping
from .base import Probation, SkipStrategy, SmoothedAcceptance, check_int, check_probability

__all__ = ["OnTheFlySettings", "OnTheFlyStrategy", "window_matchness"]


@torch.inference_mode()
def window_matchness(model, state, masks: torch.Tensor, window: int) -> torch.Tensor:
    """(K,) fraction of the last ``window`` verified positions where the model minus each candidate's blocks
    (``masks`` (K, 2L)) predicts the token that followed, teacher-forced: ONE batched forward of K x window
    tokens on a fork of the target's cache (the cache itself is not touched)."""
    T = len(state.tokens)                                   # the last token is pending: the cache holds T - 1
    w = min(window, T - 1)
    if w < 1:
        return torch.zeros(masks.shape[0])
    begin = T - 1 - w
    fork = fork_cache(model, state.cache, begin, masks.shape[0])
    device = next(model.parameters()).device
    ids = torch.tensor([state.tokens[begin:T - 1]], device=device).expand(masks.shape[0], -1)   # (K, w)
    with batched_skipping(model, masks):
        logits = model_output(model, ids, begin, fork).logits                           # (K, w, V)
    targets = torch.tensor(state.tokens[begin + 1:T], device=device)                     # (w,)
    return (logits.argmax(dim=-1) == targets).float().mean(dim=-1).cpu()


def _random_mask(n_blocks: int, n_skipped: int, rng: random.Random) -> tuple[bool, ...]:
    chosen = set(rng.sample(range(n_blocks), n_skipped))
    return tuple(b in chosen for b in range(n_blocks))


def _swap_one(mask: tuple[bool, ...], rng: random.Random) -> tuple[bool, ...]:
    """A neighbour with as many blocks skipped: one skipped block kept, one kept block skipped."""
    on = [b for b, m in enumerate(mask) if m]
    off = [b for b, m in enumerate(mask) if not m]
    if not on or not off:
        return mask
    out = list(mask)
    out[rng.choice(on)], out[rng.choice(off)] = False, True
    return tuple(out)


def _surrogate_proposal(history: Mapping[tuple, float], n_skipped: int, ridge: float = 1.0) -> tuple[bool, ...]:
    """The model-based proposal: a ridge regression of matchness on the skip mask (one weight per block) over
    every set scored so far; skip the n blocks whose weights say they cost the least matchness."""
    X = torch.tensor([list(m) for m in history], dtype=torch.float64)                  # (N, 2L)
    y = torch.tensor(list(history.values()), dtype=torch.float64)
    X1 = torch.cat([torch.ones(len(X), 1, dtype=torch.float64), X], dim=1)
    A = X1.T @ X1 + ridge * torch.eye(X1.shape[1], dtype=torch.float64)
    beta = torch.linalg.solve(A, X1.T @ y)[1:]                                           # (2L,) effect of skipping b
    best = set(torch.argsort(beta, descending=True)[:n_skipped].tolist())
    return tuple(b in best for b in range(X.shape[1]))


@dataclass(frozen=True)
class OnTheFlySettings:
    """The knobs of :class:`OnTheFlyStrategy` (each described in its docstring), checked once."""

    n_skipped: int | None = None
    window: int = 16
    population: int = 4
    every: int = 4
    model_every: int = 3
    stop_at: float = 0.9
    restart_below: float = 0.7
    margin: int = 2
    patience: int = 3
    budget: float = 0.08
    seed: int = 0
    trust_initial: bool = False
    trial_tokens: int = 32

    def __post_init__(self) -> None:
        for name, low in (("window", 1), ("population", 1), ("every", 1), ("model_every", 1), ("margin", 0),
                          ("patience", 1), ("trial_tokens", 1)):
            check_int(name, getattr(self, name), low)
        for name in ("stop_at", "restart_below", "budget"):
            object.__setattr__(self, name, check_probability(name, getattr(self, name)))
        object.__setattr__(self, "trust_initial", bool(self.trust_initial))


class OnTheFlyStrategy(SkipStrategy):
    """SWIFT-style on-the-fly search (Xia et al. 2025) at a fixed number of skipped blocks.

    While *optimising*: every ``every`` steps (doubled per set dropped; only within ``budget``), score the
    incumbent and ``population`` candidates in one batched forward over the last ``window`` verified tokens
    (:func:`window_matchness`); candidates are mostly random (neighbours of the incumbent, or uniformly random
    sets), and every ``model_every``-th round one comes from a ridge-regression surrogate of matchness over all
    sets scored (in place of SWIFT's Gaussian process). A candidate replaces the incumbent when it matches at least
    ``margin`` more of the window's positions. Optimisation stops once the incumbent's matchness reaches
    ``stop_at`` or it has held for ``patience`` rounds (*settled*: choosing is then free), and starts again when
    the smoothed acceptance of its drafts falls below ``restart_below``. It searches as soon as its start set has
    drafted ``trial_tokens`` tokens (SWIFT's cold start); with ``trust_initial`` it starts settled on ``initial``
    and searches only once acceptance falls. Measured acceptance has the last word (:class:`~.base.Probation`): a set
    that drafts worse than the best set measured so far is dropped for good and the search settles back there.
    """

    name = "on-the-fly"

    def __init__(self, initial: SkipSet, settings: OnTheFlySettings | None = None, **options):
        super().__init__()
        if not isinstance(initial, SkipSet):
            raise TypeError(f"initial must be a labkit.SkipSet, got {type(initial).__name__}")
        settings = record_from("settings", settings, OnTheFlySettings, options)
        for f in fields(settings):                                   # read as self.window, self.every, ...
            setattr(self, f.name, getattr(settings, f.name))
        self.initial, self.settings = initial, settings
        self.n_skipped = initial.n_skipped if settings.n_skipped is None else settings.n_skipped
        self.reset()

    def _bind(self, model) -> None:
        self.initial.validate(self.n_layers)
        if not 0 <= self.n_skipped <= 2 * self.n_layers:
            raise ValueError(f"n_skipped must be in 0..{2 * self.n_layers}, got {self.n_skipped}")
        if self.incumbent is None:
            self.incumbent = tuple(self.initial.to_mask(self.n_layers))
            if self.initial.n_skipped != self.n_skipped:       # start from a random set of the asked size
                self.incumbent = _random_mask(2 * self.n_layers, self.n_skipped, self.rng)

    def reset(self) -> None:
        super().reset()
        self.rng = random.Random(self.seed)
        self.incumbent: tuple[bool, ...] | None = None
        if self.n_layers is not None:
            self._bind(self.model)
        self.history: dict[tuple, float] = {}        # every set scored -> its mean matchness
        self.matchness, self.rounds, self.steps_since, self.held = float("nan"), 0, 0, 0
        trusted = self.trust_initial and self.initial.n_skipped == self.n_skipped
        self.phase, self.round_cost_s = "settled" if trusted else "optimising", 0.0
        self.acceptance, self.probation = SmoothedAcceptance(0.95, 1.0), Probation(self.trial_tokens)

    def _candidates(self) -> list[tuple[bool, ...]]:
        out = []
        if self.rounds % self.model_every == self.model_every - 1 and len(self.history) >= 4:
            out.append(_surrogate_proposal(self.history, self.n_skipped))
        while len(out) < self.population:
            if self.rng.random() < 0.5:
                out.append(_swap_one(_swap_one(self.incumbent, self.rng), self.rng))
            else:
                out.append(_random_mask(len(self.incumbent), self.n_skipped, self.rng))
        return out

    def _score(self, state) -> None:
        """One optimisation round: incumbent + candidates, one batched forward."""
        sets = [self.incumbent] + [c for c in self._candidates()
                                   if c != self.incumbent and c not in self.probation.rejected]
        scores = window_matchness(self.model, state, torch.tensor(sets), self.window).tolist()
        for mask, m in zip(sets, scores):
            seen = self.history.get(mask)
            self.history[mask] = m if seen is None else 0.5 * (seen + m)
        best = max(range(len(sets)), key=lambda i: scores[i])
        positions = min(self.window, len(state.tokens) - 1)
        if (scores[best] - scores[0]) * positions >= max(self.margin, 1):       # same window, enough more positions
            self.probation.moved()
            self.incumbent, self.held = sets[best], 0
        else:
            best, self.held = 0, self.held + 1
        self.matchness, self.rounds = scores[best], self.rounds + 1
        if self.matchness >= self.stop_at or self.held >= self.patience:
            self.phase, self.held = "settled", 0

    def _choose(self, state) -> SkipSet:
        self.steps_since += 1
        due = (self.phase == "optimising" and self.steps_since >= self.probation.wait(self.every)
               and not self.probation.settling)
        if due and len(state.tokens) > 2 and self.ledger.affords(self.round_cost_s, self.budget):
            t0 = clock()
            self._score(state)
            self.round_cost_s, self.steps_since = clock() - t0, 0
        return SkipSet.from_mask(self.incumbent)

    def _observe(self, state, start, verdict, n_drafted) -> None:
        if not n_drafted:
            return
        self.acceptance.update(n_drafted, verdict.n_accepted)
        back = self.probation.count(self.incumbent, n_drafted, verdict.n_accepted)
        if back is not None:                                # the move drafted worse: back, and settle there
            self.incumbent, self.phase, self.acceptance.value = back, "settled", self.acceptance.initial
        elif self.phase == "settled" and self.acceptance.value < self.restart_below:
            self.phase, self.acceptance.value = "optimising", self.acceptance.initial

    def state(self) -> dict:
        return {**super().state(), "phase": self.phase, "matchness": self.matchness, "rounds": self.rounds,
                "sets_scored": len(self.history), "acceptance": self.acceptance.value,
                "sets_dropped": len(self.probation.rejected)}


