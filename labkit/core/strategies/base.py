"""The skip-strategy interface, the ledger of where its time goes, and the simplest strategy: one fixed set.

Notation as in :mod:`labkit.core.decoding`. A strategy is asked ``choose(state) -> SkipSet`` before each
self-draft and told ``observe(state, start, verdict, n_drafted)`` after each verification; it may ask to watch
the verify forward (``needs_hidden_states`` / ``verify_forward``). :class:`SmoothedAcceptance` and
:class:`Probation` are the target's word on a set, which the on-the-fly and in-context strategies share.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..checks import check_int, check_probability
from ..devices import clock
from ..skip import SkipSet
from ..verify import target_forward

__all__ = ["STRATEGY_NAMES", "Ledger", "SkipStrategy", "StaticStrategy", "SmoothedAcceptance", "Probation",
           "check_int", "check_probability"]

STRATEGY_NAMES = ("static", "on-the-fly", "in-context", "knapsack")


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

    ``choose`` and ``observe`` keep a :class:`Ledger` (the budget of choosing); the decoder times both for the
    step's record. A strategy that learns from the target's hidden states says so with ``needs_hidden_states``
    before a draft, and its ``verify_forward`` then verifies that draft.
    """

    name = "strategy"
    budget = 0.1                        # at most this share of decode time goes to choosing

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.n_layers: int | None = None
        self.skip = SkipSet()           # the set in force (the last one chosen)
        self.last_step_s: float | None = None
        self._ready_at: float | None = None

    # -- the decoder's side ---------------------------------------------------------------
    def bind(self, model) -> SkipStrategy:
        """Check the strategy fits ``model`` (called by the drafter at every call; a strategy serves one model)."""
        n = int(model.config.num_hidden_layers)
        if self.n_layers is not None and self.n_layers != n:
            raise ValueError(f"this {self.name} strategy was used with a {self.n_layers}-layer model; "
                             f"the model has {n} layers: make a new strategy for it")
        self.n_layers, self.model = n, model
        self._bind(model)
        return self

    def choose(self, state) -> SkipSet:
        t0 = clock()
        self.skip = self._choose(state).validate(self.n_layers)
        self._ready_at = clock()
        self.ledger.select_s += self._ready_at - t0
        return self.skip

    def observe(self, state, start: int, verdict, n_drafted: int) -> None:
        """After a verification: ``n_drafted`` tokens of the step were drafted with this strategy's set (0: another
        drafter, e.g. prompt lookup, drafted it)."""
        t0 = clock()
        self.last_step_s = t0 - self._ready_at if n_drafted and self._ready_at is not None else None
        if self.last_step_s is not None:
            self.ledger.decode_s += self.last_step_s                  # this step's draft + verify
        self._ready_at = None
        self._observe(state, start, verdict, n_drafted)
        self.ledger.select_s += clock() - t0

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
        self._ready_at = None


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


class SmoothedAcceptance:
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


class Probation:
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


