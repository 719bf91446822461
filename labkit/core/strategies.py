"""Skip strategies: the set of skipped blocks, chosen again before every draft, so it can follow the text.

Notation as in :mod:`labkit.core.decoding`: p target, q draft, α per-token acceptance probability,
accepted/drafted the measured acceptance, γ max draft, d drafted per step, c = draft cost per drafted token /
full step, c_v = verify cost per step / full step. A skip set z removes blocks (attention or MLP of a layer);
the draft is the model without them.

A :class:`SkipStrategy` is asked ``choose(state) -> SkipSet`` before each self-draft and told
``observe(state, start, verdict, n_drafted)`` after each verification (``n_drafted``: tokens its set drafted
in that step, 0 when prompt lookup drafted it). It never touches what is emitted (verification decides that) nor the
shared KV cache (side computations run on :func:`~labkit.core.cache.fork_cache`), so decoding stays lossless
whatever it chooses. Four strategies, each after a paper:

- :class:`StaticStrategy`: one fixed set (Draft & Verify with a searched set);
- :class:`OnTheFlyStrategy` (SWIFT, Xia et al. 2025): candidates scored by teacher-forced *matchness* on the
  recent context in one batched forward; mostly random search with a model-based proposal every few rounds;
  it stops optimising once matchness is high and starts again when acceptance falls;
- :class:`InContextStrategy` (CLaSp, Chen et al. 2025): a dynamic program over (layer, blocks skipped) keeps,
  for every count, the set whose hidden state is closest (cosine) to the full model's from the last verification;
- :class:`KnapsackStrategy` (KnapSpec): attention and MLP blocks chosen by a 0/1 knapsack that maximises the
  expected tokens per unit of time, with block costs from a latency model and values from measured importance.

Choosing costs time. Every strategy keeps a :class:`Ledger` (decode time seen, time spent choosing) and runs
its expensive work only while that stays within ``budget`` (a share of decode time).

A proxy (matchness on 16 tokens, cosine at one position) can prefer a set that drafts worse. On-the-fly and
in-context therefore let the target have the last word (:class:`_Probation`): every set's accepted/drafted is
counted while it drafts, a set that drafts worse than the best one measured is dropped for good and the strategy
goes back to that one, and each dropped set doubles the wait before the next search. On-the-fly searches as soon as
its start set has drafted a trial's worth of tokens (SWIFT's cold start; ``trust_initial=True`` waits until the
start set's acceptance falls), in-context only once acceptance falls.
"""
from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch

from .cache import fork_cache
from .forward import model_output
from .skip import SkipSet, batched_skipping, decoder_layers
from .verify import target_forward

__all__ = ["SkipStrategy", "Ledger", "StaticStrategy", "OnTheFlyStrategy", "InContextStrategy", "KnapsackStrategy",
           "BlockCosts", "expected_tokens", "window_matchness", "STRATEGY_NAMES"]

STRATEGY_NAMES = ("static", "on-the-fly", "in-context", "knapsack")


def expected_tokens(alpha: float, gamma: float) -> float:
    """E = (1 - α^(γ+1)) / (1 - α): tokens a step emits with i.i.d. acceptance α and γ drafted (Leviathan et al.)."""
    if alpha >= 1.0:
        return gamma + 1.0
    if alpha <= 0.0:
        return 1.0
    return -math.expm1((gamma + 1.0) * math.log(alpha)) / (1.0 - alpha)     # precise for α close to 1


def _check_share(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}")
    return float(value)


def _check_int(name: str, value: int, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


@dataclass
class Ledger:
    """Where a strategy's time went: decoding (draft + verify of the steps it drafted) and choosing."""

    decode_s: float = 0.0
    select_s: float = 0.0

    def affords(self, cost_s: float, budget: float) -> bool:
        """Would spending ``cost_s`` more keep choosing within ``budget`` x decode time?"""
        return self.select_s + cost_s <= budget * self.decode_s

    @property
    def share(self) -> float:
        """Time spent choosing / decode time (the overhead the benchmark reports)."""
        return self.select_s / self.decode_s if self.decode_s else 0.0


class SkipStrategy:
    """Interface. Subclasses implement ``_choose`` and ``_observe``; the public methods time them.

    ``choose`` and ``observe`` keep a :class:`Ledger`; ``take_select_s`` hands the decoder the seconds spent
    since it last asked, split into (before the draft, after the verification), for the step's record.
    """

    name = "strategy"
    budget = 0.1                        # at most this share of decode time goes to choosing

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.n_layers: int | None = None
        self.skip = SkipSet()           # the set in force (the last one chosen)
        self.last_step_s: float | None = None
        self._ready_at: float | None = None
        self._pending = [0.0, 0.0]

    # -- the decoder's side ---------------------------------------------------------------
    def bind(self, model) -> "SkipStrategy":
        """Check the strategy fits ``model`` (called by the drafter at every call; a strategy serves one model)."""
        n = int(model.config.num_hidden_layers)
        if self.n_layers is not None and self.n_layers != n:
            raise ValueError(f"this {self.name} strategy was used with a {self.n_layers}-layer model; "
                             f"the model has {n} layers: make a new strategy for it")
        self.n_layers, self.model = n, model
        self._bind(model)
        return self

    def choose(self, state) -> SkipSet:
        t0 = time.perf_counter()
        self.skip = self._choose(state).validate(self.n_layers)
        self._ready_at = time.perf_counter()
        self._pending[0] += self._ready_at - t0
        self.ledger.select_s += self._ready_at - t0
        return self.skip

    def observe(self, state, start: int, verdict, n_drafted: int) -> None:
        """After a verification: ``n_drafted`` tokens of the step were drafted with this strategy's set (0: another
        drafter, e.g. prompt lookup, drafted it)."""
        t0 = time.perf_counter()
        self.last_step_s = t0 - self._ready_at if n_drafted and self._ready_at is not None else None
        if self.last_step_s is not None:
            self.ledger.decode_s += self.last_step_s                  # this step's draft + verify
        self._ready_at = None
        self._observe(state, start, verdict, n_drafted)
        spent = time.perf_counter() - t0
        self._pending[1] += spent
        self.ledger.select_s += spent

    def take_select_s(self) -> tuple[float, float]:
        """Seconds spent choosing (before the draft, after the verification) since the last call."""
        out, self._pending = tuple(self._pending), [0.0, 0.0]
        return out

    @property
    def needs_hidden_states(self) -> bool:
        """True: the next verify forward must return the target's hidden states (through ``verify_forward``)."""
        return False

    def verify_forward(self, state, draft):
        """The verify forward when ``needs_hidden_states``: one full forward with hidden states."""
        return target_forward(state, draft.tokens, hidden_states=True)

    def start(self, state) -> None:
        """A new call begins (its prompt is in the cache)."""

    def drafted(self, n_drafted: int, seconds: float) -> None:
        """The set just chosen drafted ``n_drafted`` tokens in ``seconds`` (a latency model may learn from it)."""

    # -- what subclasses write ------------------------------------------------------------
    def _bind(self, model) -> None:
        """Check sets against the model."""

    def _choose(self, state) -> SkipSet:
        raise NotImplementedError

    def _observe(self, state, start: int, verdict, n_drafted: int) -> None:
        """Learn from a verification."""

    # -- visible state ----------------------------------------------------------------------
    def state(self) -> dict:
        return {"strategy": self.name, "skip": str(self.skip), "n_skipped": self.skip.n_skipped,
                "select_ms": 1e3 * self.ledger.select_s, "select_share": self.ledger.share}

    def reset(self) -> None:
        """Forget what was learned and the time spent."""
        self.ledger = Ledger()
        self._ready_at, self._pending = None, [0.0, 0.0]


class StaticStrategy(SkipStrategy):
    """One fixed set, whatever the text (Draft & Verify with a searched set)."""

    name = "static"

    def __init__(self, skip: SkipSet):
        super().__init__()
        if not isinstance(skip, SkipSet):
            raise TypeError(f"skip must be a labkit.SkipSet, got {type(skip).__name__}")
        self.skip = self.initial = skip

    def _bind(self, model) -> None:
        self.initial.validate(self.n_layers)

    def _choose(self, state) -> SkipSet:
        return self.initial


class _Acceptance:
    """Smoothed α of the set in force, per token the target judged: an accepted token counts 1, the first rejected
    one 0 (the tokens drafted after it were never judged). What the target says, free, after every verification."""

    def __init__(self, beta: float, initial: float):
        self.beta, self.initial = beta, initial
        self.value = initial

    def update(self, n_drafted: int, n_accepted: int) -> None:
        kept = self.beta ** n_accepted
        self.value = kept * self.value + (1 - kept)
        if n_accepted < n_drafted:
            self.value *= self.beta

    def reset(self) -> None:
        self.value = self.initial


class _Probation:
    """The target checks the proxy: measured acceptance decides, whatever matchness or cosine said. Every set keeps
    its accepted/drafted over all its drafts; each time the set in force has drafted ``tokens`` more tokens, it is
    compared with the best set measured so far (over at least ``tokens`` drafted), and if it drafts worse the
    strategy goes back to that set and its proxy never proposes this one again. Verdicts are free (every
    verification gives one), so a wrong move costs a few steps. Until the set in force has drafted ``tokens`` the
    strategy makes no other move (``settling``)."""

    def __init__(self, tokens: int):
        self.tokens = tokens
        self.counts: dict = {}                           # set -> [accepted, drafted] over all its drafts
        self.since_move = self.since_check = 0           # tokens drafted by the set in force since it came, and
                                                         # since it was last compared
        self.rejected: set = set()

    def acceptance(self, key) -> float:
        accepted, drafted = self.counts.get(key, (0, 0))
        return accepted / drafted if drafted else float("nan")

    @property
    def settling(self) -> bool:
        return self.since_move < self.tokens

    def wait(self, every: int) -> int:
        """Steps between two searches: ``every``, doubled for each set the target has dropped (up to 16x): a
        proxy proven wrong that often is consulted less."""
        return every * 2 ** min(len(self.rejected), 4)

    def moved(self) -> None:
        """A new set is in force."""
        self.since_move = self.since_check = 0

    def count(self, key, n_drafted: int, n_accepted: int):
        """Count a verification of ``key`` (the set in force); returns the set to go back to, if any."""
        accepted, drafted = self.counts.get(key, (0, 0))
        self.counts[key] = [accepted + n_accepted, drafted + n_drafted]
        self.since_move, self.since_check = self.since_move + n_drafted, self.since_check + n_drafted
        if self.since_check < self.tokens:
            return None
        self.since_check = 0
        measured = [k for k, (_, d) in self.counts.items() if d >= self.tokens]
        best = max(measured, key=self.acceptance)
        if best == key or not self.acceptance(key) < self.acceptance(best):
            return None
        self.rejected.add(key)
        self.moved()
        return best


# ---------------------------------------------------------------------------------------
# SWIFT: matchness on the recent context, random search with a model-based proposal
# ---------------------------------------------------------------------------------------
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
    ids = torch.tensor([state.tokens[begin:T - 1]]).expand(masks.shape[0], -1)          # (K, w)
    with batched_skipping(model, masks):
        logits = model_output(model, ids, begin, fork).logits                           # (K, w, V)
    targets = torch.tensor(state.tokens[begin + 1:T])                                    # (w,)
    return (logits.argmax(dim=-1) == targets).float().mean(dim=-1)


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
    and searches only once acceptance falls. Measured acceptance has the last word (:class:`_Probation`): a set
    that drafts worse than the best set measured so far is dropped for good and the search settles back there.
    """

    name = "on-the-fly"

    def __init__(self, initial: SkipSet, *, n_skipped: int | None = None, window: int = 16, population: int = 4,
                 every: int = 4, model_every: int = 3, stop_at: float = 0.9, restart_below: float = 0.7,
                 margin: int = 2, patience: int = 3, budget: float = 0.08, seed: int = 0, trust_initial: bool = False,
                 trial_tokens: int = 32):
        super().__init__()
        if not isinstance(initial, SkipSet):
            raise TypeError(f"initial must be a labkit.SkipSet, got {type(initial).__name__}")
        self.initial, self.n_skipped = initial, initial.n_skipped if n_skipped is None else n_skipped
        self.trust_initial, self.trial_tokens = bool(trust_initial), _check_int("trial_tokens", trial_tokens, 1)
        self.window, self.population = _check_int("window", window, 1), _check_int("population", population, 1)
        self.every, self.model_every = _check_int("every", every, 1), _check_int("model_every", model_every, 1)
        self.stop_at = _check_share("stop_at", stop_at)
        self.restart_below = _check_share("restart_below", restart_below)
        self.budget, self.seed, self.margin = _check_share("budget", budget), seed, _check_int("margin", margin, 0)
        self.patience = _check_int("patience", patience, 1)
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
        self.acceptance, self.probation = _Acceptance(0.95, 1.0), _Probation(self.trial_tokens)

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
            t0 = time.perf_counter()
            self._score(state)
            self.round_cost_s, self.steps_since = time.perf_counter() - t0, 0
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


# ---------------------------------------------------------------------------------------
# CLaSp: a dynamic program over (layer, blocks skipped) on the last verification's hidden states
# ---------------------------------------------------------------------------------------
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
        if key in ("past_key_values", "cache"):                                  # its name before / since 5.24
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


@torch.inference_mode()
def layer_dp(model, captured: dict, hidden_states: Sequence[torch.Tensor], index: int, cache, position: int,
             n_skipped: int, follow: Sequence[Sequence[bool]] = ()) -> tuple[tuple[bool, ...], list[float], list]:
    """CLaSp's dynamic program at one position: for layer l = 0..L-1 and every count k of blocks skipped so far,
    keep the candidate whose output is closest (cosine) to the full model's ``hidden_states[l + 1]`` there; each
    layer runs once, on all candidates in one batch. Returns the mask (2L) of the set reaching exactly
    ``n_skipped``, the cosine of its state after every layer, and the same cosines for each set in ``follow``
    (masks run alongside in the same batches, e.g. the set in force)."""
    L = len(decoder_layers(model))
    best = {0: (hidden_states[0][index], (), [])}                   # k -> (state (H,), choices, cosines)
    tracks = [(hidden_states[0][index], (), [], tuple(m)) for m in follow]
    for l in range(L):
        lo, hi = n_skipped - 2 * (L - 1 - l), n_skipped               # counts from which n_skipped stays reachable
        rows, plan = [], []
        for k, (h, path, cos) in best.items():
            for option in _LAYER_OPTIONS:
                new_k = k + sum(option)
                if lo <= new_k <= hi:
                    plan.append((new_k, path + (option,), cos, option != (True, True)))
                    rows.append((h, option))
        for j, (h, path, cos, mask) in enumerate(tracks):              # followed sets: new_k = -1 - j
            option = (mask[l], mask[L + l])
            plan.append((-1 - j, path + (option,), cos, option != (True, True)))
            rows.append((h, option))
        computed = [r for r, p in zip(rows, plan) if p[3]]
        out = iter(())
        if computed:
            masks = torch.zeros(len(computed), 2 * L, dtype=torch.bool)
            for r, (_, (skip_att, skip_mlp)) in enumerate(computed):
                masks[r, l], masks[r, L + l] = skip_att, skip_mlp
            h_in = torch.stack([h for h, _ in computed])[:, None]       # (B, 1, H)
            out = iter(replay_layer(model, l, captured[l], index, h_in, masks, cache, position)[:, 0])
        target = hidden_states[l + 1][index]
        norm = model.model.norm if l == L - 1 else None                 # the last state is reported after the norm
        new = {}
        for (h, _), (new_k, path, cos, runs) in zip(rows, plan):
            h_out = next(out) if runs else h
            score = float(torch.nn.functional.cosine_similarity(norm(h_out) if norm else h_out, target, dim=-1))
            if new_k not in new or score > new[new_k][2][-1]:
                new[new_k] = (h_out, path, cos + [score])
        best = {k: v for k, v in new.items() if k >= 0}
        tracks = [new[-1 - j] + (tracks[j][3],) for j in range(len(tracks))]
    _, path, cosines = best[n_skipped]
    mask = tuple(a for a, _ in path) + tuple(m for _, m in path)
    return mask, cosines, [cos for _, _, cos, _ in tracks]


class InContextStrategy(SkipStrategy):
    """CLaSp-style in-context layer skipping (Chen et al. 2025): after a verification, :func:`layer_dp` on the
    target's hidden states at the last accepted position picks the set of ``n_skipped`` blocks whose hidden
    states stay closest to the full model's; that set drafts from then on, if its final state is closer than the
    set in force's (run alongside in the same batches) by at least ``margin``. No search beforehand.

    The DP costs about as much as a few decoding steps on a CPU, so it runs at most after every ``every``-th
    verification of its own drafts (doubled per set dropped), only within ``budget``, and only while the smoothed
    acceptance of the set in force is below ``redo_below`` or the set has not settled (the DP kept the same set
    ``settle_after`` times in a row) since the acceptance last fell. Measured acceptance has the last word
    (:class:`_Probation`, ``trial_tokens``): a set that drafts worse than the best set measured so far is dropped
    for good and the strategy goes back there and settles.
    """

    name = "in-context"

    def __init__(self, initial: SkipSet, *, n_skipped: int | None = None, every: int = 6, budget: float = 0.08,
                 settle_after: int = 2, redo_below: float = 0.75, margin: float = 0.02, trial_tokens: int = 32):
        super().__init__()
        self.trial_tokens = _check_int("trial_tokens", trial_tokens, 1)
        if not isinstance(initial, SkipSet):
            raise TypeError(f"initial must be a labkit.SkipSet, got {type(initial).__name__}")
        self.initial, self.n_skipped = initial, initial.n_skipped if n_skipped is None else n_skipped
        self.every, self.budget = _check_int("every", every, 1), _check_share("budget", budget)
        self.settle_after = _check_int("settle_after", settle_after, 1)
        self.redo_below, self.margin = _check_share("redo_below", redo_below), _check_share("margin", margin)
        self.reset()

    def _bind(self, model) -> None:
        self.initial.validate(self.n_layers)
        if not 0 <= self.n_skipped <= 2 * self.n_layers:
            raise ValueError(f"n_skipped must be in 0..{2 * self.n_layers}, got {self.n_skipped}")

    def reset(self) -> None:
        super().reset()
        self.current, self.cosines, self.n_dp, self.same_in_a_row = self.initial, [], 0, self.settle_after
        self.steps_since, self.dp_cost_s, self._planned, self._captured = 0, 0.0, False, None
        self.acceptance, self.probation = _Acceptance(0.95, 1.0), _Probation(self.trial_tokens)

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
            t0 = time.perf_counter()
            self._run_dp(state, start, verdict)
            self.dp_cost_s = time.perf_counter() - t0
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


# ---------------------------------------------------------------------------------------
# KnapSpec: a knapsack over attention and MLP blocks, tokens per unit of time
# ---------------------------------------------------------------------------------------
@dataclass
class BlockCosts:
    """Milliseconds a forward spends per block (what skipping saves) and per verification, as a latency model
    gives them (:class:`labkit.measure.costmodel.CostModel` has these fields; any object or mapping with them
    does: core does not import measure)."""

    attention_ms: list[float]
    mlp_ms: list[float]
    fixed_ms: float
    verify_ms: list[float]                   # [k] = verify forward of the pending token + k drafted
    layer_ms: list[float] | None = None      # per-layer overhead, saved when both blocks of a layer skip

    @classmethod
    def of(cls, costs) -> "BlockCosts":
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
        self.anchor_alpha = _check_share("anchor_alpha", anchor_alpha)
        self.min_tokens, self.margin = _check_int("min_tokens", min_tokens, 1), _check_share("margin", margin)
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
        rate = ((1 - alpha ** (g + 1)) / (1 - alpha) / (g * draft + verify)).max(dim=0).values            # (T,)
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
