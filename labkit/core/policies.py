"""When to stop drafting: small policy objects with visible state.

The decoder calls ``keep_drafting(n_drafted, confidence)`` after each drafted token
(``confidence`` = the draft's top-1 probability for that position; the token just drafted
is always kept), ``update(n_drafted, n_accepted)`` after each verification of a model draft, and
``observe_target(confidence)`` after every verification with the target's probability of the token
it emitted itself, and ``begin()`` when a generation starts. A step drafts at most ``max_draft`` tokens
(0: this step decodes plainly).

``AdaptiveThreshold`` is Draft & Verify's rule (Zhang et al. 2023, Sec. 3.3): a smoothed
acceptance rate AR <- beta1 * AR + (1 - beta1) * (accepted / drafted); the threshold is
pushed up by epsilon when AR is below the target (draft less, more carefully) and down by
epsilon when above (draft more), and the move itself is smoothed:
threshold <- beta2 * threshold + (1 - beta2) * (threshold +/- epsilon).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .checks import check_int, check_probability

__all__ = ["DraftPolicy", "FixedK", "StaticThreshold", "AdaptiveThreshold"]


class DraftPolicy:
    """Interface. ``max_draft`` bounds every draft; ``threshold`` is None for count-only policies.

    ``sampling_signal``: what ``keep_drafting`` receives as ``confidence`` while sampling: ``"confidence"``
    (the draft's top-1 probability, as when greedy) or ``"q"`` (q(d), the probability of the token the draft
    actually drew). Either is lossless; which predicts rejection better is measured in docs/decisions.md.
    """

    max_draft: int = 1
    threshold: float | None = None
    sampling_signal: str = "confidence"

    def keep_drafting(self, n_drafted: int, confidence: float) -> bool:
        raise NotImplementedError

    def update(self, n_drafted: int, n_accepted: int) -> None:
        """Called after each verification of a model draft (adaptive policies learn here)."""

    def observe_target(self, confidence: float) -> None:
        """Called after every verification with p(the token the target emitted): free, the verify pass made it."""

    def begin(self) -> None:
        """Called at the start of every generation, before its first step (what holds for one text only resets here)."""

    def state(self) -> dict:
        return {"threshold": self.threshold, "max_draft": self.max_draft}

    def reset(self) -> None:
        """Forget what was learned (adaptive policies)."""


@dataclass
class FixedK(DraftPolicy):
    """Always draft ``k`` tokens (fewer only at EOS or the end of the budget)."""

    k: int = 4

    def __post_init__(self) -> None:
        check_int("k", self.k, 1)

    @property
    def max_draft(self) -> int:  # type: ignore[override]
        return self.k

    def keep_drafting(self, n_drafted: int, confidence: float) -> bool:
        return n_drafted < self.k


@dataclass
class StaticThreshold(DraftPolicy):
    """Stop drafting after a token whose draft top-1 probability is below ``threshold``."""

    threshold: float = 0.6             # type: ignore[assignment]
    max_draft: int = 12

    def __post_init__(self) -> None:
        self.threshold = check_probability("threshold", self.threshold)
        check_int("max_draft", self.max_draft, 1)

    def keep_drafting(self, n_drafted: int, confidence: float) -> bool:
        return n_drafted < self.max_draft and confidence >= self.threshold


@dataclass
class AdaptiveThreshold(DraftPolicy):
    """Draft & Verify's adaptive draft-exit threshold (official defaults)."""

    beta1: float = 0.5                 # smoothing of the acceptance rate
    target: float = 0.9                # acceptance rate aimed for
    epsilon: float = 0.01              # step of the threshold
    beta2: float = 0.9                 # smoothing of the threshold's moves
    initial_threshold: float = 0.6
    max_draft: int = 12
    threshold: float = field(init=False)            # type: ignore[assignment]
    acceptance_rate: float = field(init=False)      # smoothed accepted / drafted
    n_updates: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        for name in ("beta1", "target", "epsilon", "beta2", "initial_threshold"):
            check_probability(name, getattr(self, name))
        check_int("max_draft", self.max_draft, 1)
        self.reset()

    def reset(self) -> None:
        self.threshold = float(self.initial_threshold)
        self.acceptance_rate = float(self.target)
        self.n_updates = 0

    def keep_drafting(self, n_drafted: int, confidence: float) -> bool:
        return n_drafted < self.max_draft and confidence >= self.threshold

    def update(self, n_drafted: int, n_accepted: int) -> None:
        if n_drafted == 0:
            return
        self.acceptance_rate = self.beta1 * self.acceptance_rate + (1 - self.beta1) * (n_accepted / n_drafted)
        moved = self.threshold + (self.epsilon if self.acceptance_rate < self.target else -self.epsilon)
        self.threshold = min(1.0, max(0.0, self.beta2 * self.threshold + (1 - self.beta2) * moved))
        self.n_updates += 1

    def state(self) -> dict:
        return {"threshold": self.threshold, "acceptance_rate": self.acceptance_rate,
                "max_draft": self.max_draft, "n_updates": self.n_updates}
