"""A self-draft's whole configuration: which blocks it skips, which weights it reads, when it stops.

The paper searches the skip set alone and fixes the rest. On a small model on a CPU the other two knobs move
the speed as much as the set does (int8 draft weights roughly halve what a kept block costs; the stop rule sets how
many tokens each verify carries), and the best set depends on them: a cheaper draft can afford more blocks. So the
lab's search, its playground and its shipped results speak of a :class:`DraftConfig`:

- ``skip``: the :class:`~labkit.core.skip.SkipSet` (2L binary choices);
- ``draft_weights``: None (the model's own) or ``"int8"`` (:mod:`labkit.core.draft_weights`);
- ``policy``: ``"static"`` (stop after a token whose draft confidence is below ``threshold``) or ``"adaptive"``
  (Draft & Verify's adaptive threshold, starting at ``threshold``), at most ``max_draft`` tokens a step.

- ``width``: None, or a :class:`~labkit.core.width.WidthSet` (the MLP neurons' kept fraction per layer,
  dynamic or pruned: a width draft, :mod:`labkit.core.width`), alone or with the skip set; its predictors are
  fitted for the model, so they are given when the drafter is made (``generate_kwargs(model, predictors)``).

A draft head is fitted for one skip set, so it is not part of a configuration a search varies.
"""
from __future__ import annotations

from dataclasses import dataclass

from .checks import check_int, check_probability
from .draft_weights import DRAFT_WEIGHTS
from .policies import AdaptiveThreshold, DraftPolicy, StaticThreshold
from .skip import SkipSet
from .width import WidthPredictors, WidthSet, width_drafter

__all__ = ["DraftConfig", "STOP_POLICIES"]

STOP_POLICIES = ("static", "adaptive")


@dataclass(frozen=True)
class DraftConfig:
    """One draft configuration (see the module docstring). Immutable and hashable."""

    skip: SkipSet = SkipSet()
    draft_weights: str | None = None
    policy: str = "static"
    threshold: float = 0.5
    max_draft: int = 12
    width: WidthSet | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.skip, SkipSet):
            raise TypeError(f"skip must be a SkipSet, got {type(self.skip).__name__}")
        if self.draft_weights is not None and self.draft_weights not in DRAFT_WEIGHTS:
            raise ValueError(f"draft_weights must be None or one of {DRAFT_WEIGHTS}, got {self.draft_weights!r}")
        if self.policy not in STOP_POLICIES:
            raise ValueError(f"policy must be one of {STOP_POLICIES}, got {self.policy!r}")
        object.__setattr__(self, "threshold", check_probability("threshold", self.threshold))
        check_int("max_draft", self.max_draft, 1)
        if self.width is not None and not isinstance(self.width, WidthSet):
            raise TypeError(f"width must be None or a WidthSet, got {type(self.width).__name__}")
        if self.width is not None and self.draft_weights is not None:
            raise ValueError("a width draft reads the model's own weights: give draft_weights=None with width")

    def make_policy(self) -> DraftPolicy:
        """A fresh stop rule (an adaptive one learns from here on; reuse it across prompts to carry its state)."""
        if self.policy == "static":
            return StaticThreshold(self.threshold, self.max_draft)
        return AdaptiveThreshold(initial_threshold=self.threshold, max_draft=self.max_draft)

    def generate_kwargs(self, model=None, predictors: WidthPredictors | None = None) -> dict:
        """What :func:`~labkit.core.decoding.speculative_generate` takes for this draft, with a fresh policy:
        ``speculative_generate(model, ids, **config.generate_kwargs())``; a width draft needs the model and its
        predictors (:func:`labkit.training.width.load_or_fit`) and comes back as a drafter."""
        if self.width is None:
            return {"skip": self.skip, "draft_weights": self.draft_weights, "policy": self.make_policy()}
        if model is None or predictors is None:
            raise ValueError("a width draft needs the model and its predictors: "
                             "config.generate_kwargs(model, predictors)")
        return {"drafter": width_drafter(model, predictors, self.width, self.skip), "policy": self.make_policy()}

    @property
    def weights_label(self) -> str:
        return self.draft_weights or "fp32"

    def describe(self, n_layers: int | None = None) -> str:
        kind = "threshold" if self.policy == "static" else "initial threshold"
        size = (f"{self.skip.n_skipped} blocks skipped"
                + (f" (ratio {self.skip.ratio(n_layers):.3f})" if n_layers else ""))
        width = f", {self.width}" if self.width is not None else ""
        return (f"{size}{width}, {self.weights_label} draft weights, {self.policy} stop rule ({kind} "
                f"{self.threshold:g}, at most {self.max_draft} drafted)")

    def to_dict(self) -> dict:
        out = {"skip": self.skip.to_dict(), "draft_weights": self.draft_weights, "policy": self.policy,
               "threshold": self.threshold, "max_draft": self.max_draft}
        return out if self.width is None else {**out, "width": self.width.to_dict()}

    @classmethod
    def from_dict(cls, d: dict) -> DraftConfig:
        """Inverse of :meth:`to_dict`; a bare skip-set dict ({"attention": ..., "mlp": ...}) is a set with the
        defaults (fp32 weights, static 0.5, at most 12), which is how older results read."""
        if "skip" not in d:
            return cls(skip=SkipSet.from_dict(d))
        return cls(skip=SkipSet.from_dict(d["skip"]), draft_weights=d.get("draft_weights"),
                   policy=d.get("policy", "static"), threshold=float(d.get("threshold", 0.5)),
                   max_draft=int(d.get("max_draft", 12)),
                   width=WidthSet.from_dict(d["width"]) if d.get("width") else None)
