"""CLaSp (Chen et al. 2025): in-context layer skipping by a dynamic program over (layer, blocks skipped).

After a verification, the DP runs each layer once on every candidate (in one batch) at the last accepted
position and keeps, for every count of blocks skipped, the candidate whose hidden state is closest (cosine) to
the full model's. No search beforehand; measured acceptance has the last word (:class:`~.base.Probation`).
"""
from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..cache import fork_cache
from ..devices import clock
from ..skip import SkipSet, batched_skipping, decoder_layers
from ..verify import target_forward
from .base import Probation, SkipStrategy, SmoothedAcceptance, check_int, check_probability

__all__ = ["InContextStrategy", "LayerChoice", "capture_layer_calls", "replay_layer", "layer_dp"]


@contextlib.contextmanager
def capture_layer_calls(model):
    """Record the keyword arguments the model passes each decoder layer during a forward ({layer: kwargs}), so
    a layer can be run again, alone, on other hidden states (:func:`replay_layer`)."""
    captured: dict[int, dict] = {}
    handles = []
    for i, layer in enumerate(decoder_layers(model)):
        def hook(module, args, kwargs, i=i):
            captured[i] = dict(kwargs)
        handles.append(layer.register_forward_pre_hook(hook, with_kwargs=True))
    try:
        yield captured
    finally:
        for handle in handles:
            handle.remove()


def replay_layer(model, layer: int, kwargs: dict, index: int, hidden: torch.Tensor, masks: torch.Tensor,
                 cache, position: int) -> torch.Tensor:
    """Run decoder layer ``layer`` again on B candidate hidden states (B, 1, H) at one position of a captured
    forward (``index`` within it; ``position`` absolute), each row skipping the blocks ``masks`` (B, 2L) says.
    The row's query attends to the target's cached keys/values before ``position`` (a fork: ``cache`` is not
    touched) and to itself, so one query needs no mask."""
    fork = fork_cache(model, cache, position, hidden.shape[0], layers={layer})
    call = {}
    for key, value in kwargs.items():
        if key == "cache":
            value = fork
        elif key == "attention_mask":
            value = None
        elif key == "position_embeddings":
            value = tuple(t[:, index:index + 1] for t in value)                 # (1, 1, head_dim) each
        elif key in ("position_ids", "cache_position") and isinstance(value, torch.Tensor):
            value = value[..., index:index + 1]
        call[key] = value
    with batched_skipping(model, masks):
        out = decoder_layers(model)[layer](hidden, **call)
    return out[0] if isinstance(out, tuple) else out                             # (B, 1, H)


#: (skip attention, skip MLP) of one layer, and how many blocks that skips
_LAYER_OPTIONS = ((False, False), (True, False), (False, True), (True, True))


@dataclass(frozen=True)
class LayerChoice:
    """One candidate of the dynamic program after some layers: its hidden state (H,) at the position, the
    (skip attention, skip MLP) it chose at each layer so far, and its cosine to the full model's state after each."""

    hidden: torch.Tensor
    path: tuple = ()
    cosines: tuple = ()

    def then(self, option: tuple[bool, bool], hidden: torch.Tensor, cosine: float) -> LayerChoice:
        return LayerChoice(hidden, self.path + (option,), self.cosines + (cosine,))

    @property
    def mask(self) -> tuple[bool, ...]:
        """(2L,) attention blocks first, then MLP blocks (the layout of :meth:`SkipSet.to_mask`)."""
        return tuple(a for a, _ in self.path) + tuple(m for _, m in self.path)


def _run_layer(model, layer: int, kwargs: dict, index: int, cache, position: int,
               rows: list[tuple[torch.Tensor, tuple[bool, bool]]]) -> list[torch.Tensor]:
    """Each row's hidden state (H,) through decoder layer ``layer`` minus the blocks its option skips, all in one
    batch; a row that skips both blocks passes through unchanged (nothing runs for it)."""
    n_layers = len(decoder_layers(model))
    runs = [r for r, (_, option) in enumerate(rows) if option != (True, True)]
    out = [h for h, _ in rows]
    if runs:
        masks = torch.zeros(len(runs), 2 * n_layers, dtype=torch.bool)              # (B, 2L)
        for i, r in enumerate(runs):
            masks[i, layer], masks[i, n_layers + layer] = rows[r][1]
        h_in = torch.stack([rows[r][0] for r in runs])[:, None]                    # (B, 1, H)
        for r, h in zip(runs, replay_layer(model, layer, kwargs, index, h_in, masks, cache, position)[:, 0]):
            out[r] = h
    return out


@torch.inference_mode()
def layer_dp(model, captured: dict, hidden_states: Sequence[torch.Tensor], index: int, cache, position: int,
             n_skipped: int, follow: Sequence[Sequence[bool]] = ()) -> tuple[tuple[bool, ...], list[float], list]:
    """CLaSp's dynamic program at one position: for layer l = 0..L-1 and every count k of blocks skipped so far,
    keep the candidate whose output is closest (cosine) to the full model's ``hidden_states[l + 1]`` there; each
    layer runs once, on all candidates in one batch. Returns the mask (2L) of the set reaching exactly
    ``n_skipped``, the cosine of its state after every layer, and the same cosines for each set in ``follow``
    (masks run alongside in the same batches, e.g. the set in force)."""
    L = len(decoder_layers(model))
    start = LayerChoice(hidden_states[0][index])
    best = {0: start}                                  # blocks skipped so far -> the closest candidate
    followed = [start] * len(follow)
    for l in range(L):
        lowest = n_skipped - 2 * (L - 1 - l)           # counts from which n_skipped stays reachable
        moves = [(k + sum(o), choice, o) for k, choice in best.items() for o in _LAYER_OPTIONS
                 if lowest <= k + sum(o) <= n_skipped]
        moves += [(-1 - j, choice, (follow[j][l], follow[j][L + l])) for j, choice in enumerate(followed)]
        outputs = _run_layer(model, l, captured[l], index, cache, position, [(c.hidden, o) for _, c, o in moves])
        target = hidden_states[l + 1][index]
        norm = model.model.norm if l == L - 1 else None    # the last state is reported after the norm
        new: dict[int, LayerChoice] = {}
        for (key, choice, option), h in zip(moves, outputs):
            score = float(torch.nn.functional.cosine_similarity(norm(h) if norm else h, target, dim=-1))
            if key not in new or score > new[key].cosines[-1]:
                new[key] = choice.then(option, h, score)
        best = {k: c for k, c in new.items() if k >= 0}
        followed = [new[-1 - j] for j in range(len(follow))]
    chosen = best[n_skipped]
    return chosen.mask, list(chosen.cosines), [list(c.cosines) for c in followed]


class InContextStrategy(SkipStrategy):
    """CLaSp-style in-context layer skipping (Chen et al. 2025): after a verification, :func:`layer_dp` on the
    target's hidden states at the last accepted position picks the set of ``n_skipped`` blocks whose hidden
    states stay closest to the full model's; that set drafts from then on, if its final state is closer than the
    set in force's (run alongside in the same batches) by at least ``margin``. No search beforehand.

    The DP costs about as much as a few decoding steps on a CPU, so it runs at most after every ``every``-th
    verification of its own drafts (doubled per set dropped), only within ``budget``, and only while the smoothed
    acceptance of the set in force is below ``redo_below`` or the set has not settled (the DP kept the same set
    ``settle_after`` times in a row) since the acceptance last fell. Measured acceptance has the last word
    (:class:`~.base.Probation`, ``trial_tokens``): a set that drafts worse than the best set measured so far is dropped
    for good and the strategy goes back there and settles.
    """

    name = "in-context"

    def __init__(self, initial: SkipSet, *, n_skipped: int | None = None, every: int = 6, budget: float = 0.08,
                 settle_after: int = 2, redo_below: float = 0.75, margin: float = 0.02, trial_tokens: int = 32):
        super().__init__()
        self.trial_tokens = check_int("trial_tokens", trial_tokens, 1)
        if not isinstance(initial, SkipSet):
            raise TypeError(f"initial must be a labkit.SkipSet, got {type(initial).__name__}")
        self.initial, self.n_skipped = initial, initial.n_skipped if n_skipped is None else n_skipped
        self.every, self.budget = check_int("every", every, 1), check_probability("budget", budget)
        self.settle_after = check_int("settle_after", settle_after, 1)
        self.redo_below, self.margin = check_probability("redo_below", redo_below), check_probability("margin", margin)
        self.reset()

    def _bind(self, model) -> None:
        self.initial.validate(self.n_layers)
        if not 0 <= self.n_skipped <= 2 * self.n_layers:
            raise ValueError(f"n_skipped must be in 0..{2 * self.n_layers}, got {self.n_skipped}")

    def reset(self) -> None:
        super().reset()
        self.current, self.cosines, self.n_dp, self.same_in_a_row = self.initial, [], 0, self.settle_after
        self.steps_since, self.dp_cost_s, self._planned, self._captured = 0, 0.0, False, None
        self.acceptance, self.probation = SmoothedAcceptance(0.95, 1.0), Probation(self.trial_tokens)

    @property
    def settled(self) -> bool:
        return self.same_in_a_row >= self.settle_after

    @property
    def needs_hidden_states(self) -> bool:
        return self._planned

    def verify_forward(self, state, draft):
        with capture_layer_calls(self.model) as captured:
            out = target_forward(state, draft.tokens, hidden_states=True)
        self._captured = captured
        return out

    def _choose(self, state) -> SkipSet:
        self.steps_since += 1
        self._planned = (self.steps_since >= self.probation.wait(self.every) and not self.settled
                         and not self.probation.settling
                         and self.ledger.affords(self.dp_cost_s, self.budget))
        return self.current

    def _observe(self, state, start, verdict, n_drafted) -> None:
        if n_drafted:
            self.acceptance.update(n_drafted, verdict.n_accepted)
            back = self.probation.count(self.current, n_drafted, verdict.n_accepted)
            if back is not None:                          # the move drafted worse: back, and settle there
                self.current, self.same_in_a_row = back, self.settle_after
                self.acceptance.value = self.acceptance.initial
            elif self.acceptance.value < self.redo_below:                 # acceptance fell: look again
                self.same_in_a_row = min(self.same_in_a_row, self.settle_after - 1)
        if self._planned and self._captured is not None and verdict.hidden_states is not None:
            t0 = clock()
            self._run_dp(state, start, verdict)
            self.dp_cost_s = clock() - t0
        self._planned, self._captured = False, None

    def _run_dp(self, state, start, verdict) -> None:
        """:func:`layer_dp` at the last position whose input tokens were verified; move if its set is closer by
        ``margin`` than the set in force (and was never dropped)."""
        index = verdict.n_accepted
        in_force = self.current.to_mask(self.n_layers)
        mask, cosines, (followed,) = layer_dp(self.model, self._captured, verdict.hidden_states, index,
                                              state.cache, start - 1 + index, self.n_skipped, follow=[in_force])
        proposal = SkipSet.from_mask(mask)
        better = cosines[-1] > followed[-1] + self.margin and proposal not in self.probation.rejected
        chosen = proposal if better else self.current
        if chosen != self.current:
            self.probation.moved()
        self.cosines = cosines if better else followed
        self.same_in_a_row = self.same_in_a_row + 1 if chosen == self.current else 0
        self.current, self.n_dp, self.steps_since = chosen, self.n_dp + 1, 0

    def state(self) -> dict:
        return {**super().state(), "n_dp": self.n_dp, "settled": self.settled,
                "final_cosine": self.cosines[-1] if self.cosines else float("nan"), "acceptance": self.acceptance.value,
                "sets_dropped": len(self.probation.rejected)}


