"""Speculate only when the target is sure: a gate around any draft policy.

Notation (as everywhere in labkit): p target, q draft, γ max draft. After every verification the decoder
tells the policy p(x) of the token x the target emitted itself (``observe_target``): a number the verify
pass already computed, so reading it is free. A low p(x) says the text is at a fork the target itself
is unsure of, where a draft (which imitates the target) is likely to be rejected; then the next step
drafts nothing (``max_draft = 0``: the decoder runs one plain step, the draft's cost saved). A high p(x)
lets the wrapped policy draft as it would have. (The gate proposed in a practitioner's series on
reimplementing Draft & Verify; CALM's "softmax response" read from the target instead of the draft.)

Lossless like every policy: a policy only decides how many tokens to draft, never which are emitted.
"""
from __future__ import annotations

import math

from .checks import check_probability
from .policies import DraftPolicy

__all__ = ["TargetConfidenceGate"]


class TargetConfidenceGate(DraftPolicy):
    """Wraps ``policy``: the step after the target emitted a token with probability below ``min_confidence``
    drafts nothing. ``TargetConfidenceGate(AdaptiveThreshold(), 0.5)``.

    ``threshold`` and ``keep_drafting``/``update`` are the wrapped policy's (the draft-exit rule is
    unchanged). The gate opens at the start of every generation (``begin``: the first step drafts, nothing
    is known about the new text yet); the wrapped policy's learned state carries across generations as
    usual. ``reset()`` also forgets the counts in ``state()``.
    """

    def __init__(self, policy: DraftPolicy, min_confidence: float = 0.5):
        if not isinstance(policy, DraftPolicy):
            raise TypeError(f"policy must be a labkit draft policy, got {type(policy).__name__}")
        self.policy = policy
        self.min_confidence = check_probability("min_confidence", min_confidence)
        self.reset_gate()

    def reset_gate(self) -> None:
        self.open, self.last_confidence = True, float("nan")
        self.n_observed = self.n_closed = 0

    def reset(self) -> None:
        self.policy.reset()
        self.reset_gate()

    def begin(self) -> None:
        self.policy.begin()
        self.open, self.last_confidence = True, float("nan")

    # -- the policy interface --------------------------------------------------------------------
    @property
    def max_draft(self) -> int:  # type: ignore[override]
        return self.policy.max_draft if self.open else 0

    @property
    def threshold(self):  # type: ignore[override]
        return self.policy.threshold

    def keep_drafting(self, n_drafted: int, confidence: float) -> bool:
        return self.policy.keep_drafting(n_drafted, confidence)

    def update(self, n_drafted: int, n_accepted: int) -> None:
        self.policy.update(n_drafted, n_accepted)

    def observe_target(self, confidence: float) -> None:
        self.policy.observe_target(confidence)
        self.last_confidence = float(confidence)
        # NaN (no probability known) keeps the gate open: never stop drafting on missing information
        self.open = math.isnan(self.last_confidence) or self.last_confidence >= self.min_confidence
        self.n_observed += 1
        self.n_closed += not self.open

    def state(self) -> dict:
        return {**self.policy.state(), "gate_min_confidence": self.min_confidence, "gate_open": self.open,
                "gate_last_confidence": self.last_confidence, "gate_closed_fraction":
                    self.n_closed / self.n_observed if self.n_observed else float("nan")}

    def __repr__(self) -> str:
        return f"TargetConfidenceGate({self.policy!r}, min_confidence={self.min_confidence})"
