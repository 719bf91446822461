"""Turning logits into the distributions decoding samples from, and the acceptance rule.

Notation (used in every decoding module): ``p`` is the target (full model)
distribution, ``q`` the draft distribution, both after the same warping (temperature,
top-k, top-p). A drafted token x ~ q is accepted with probability min(1, p(x) / q(x)); at
the first rejection the replacement is drawn from normalise(max(0, p - q)). This makes
every emitted token an exact sample of p (Leviathan et al. 2023, Chen et al. 2023).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Warp", "point_mass", "residual_distribution", "sample", "uniform"]


@dataclass(frozen=True)
class Warp:
    """How logits become a sampling distribution. ``do_sample=False`` means greedy (argmax)."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.do_sample, bool):
            raise TypeError(f"do_sample must be a bool, got {self.do_sample!r}")
        if self.do_sample and not (self.temperature > 0):
            raise ValueError(f"temperature must be > 0 when sampling, got {self.temperature!r}")
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ValueError(f"top_k must be a positive integer or None, got {self.top_k!r}")
        if self.top_p is not None and not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p!r}")

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """(..., V) logits -> (..., V) probabilities. Greedy mode gives plain softmax (for confidences)."""
        logits = logits.float()
        if not self.do_sample:
            return torch.softmax(logits, dim=-1)
        logits = logits / self.temperature
        if self.top_k is not None and self.top_k < logits.shape[-1]:
            kth = torch.topk(logits, self.top_k, dim=-1).values[..., -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p is not None and self.top_p < 1.0:
            sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
            cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
            # drop a token once the mass *before* it already reaches top_p (the top token always stays)
            drop_sorted = (cumulative - torch.softmax(sorted_logits, dim=-1)) >= self.top_p
            drop = drop_sorted.scatter(-1, order, drop_sorted)
            logits = logits.masked_fill(drop, float("-inf"))
        return torch.softmax(logits, dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One token id drawn from a (V,) distribution, with ``generator`` on its own device (the draw follows the
    caller's generator wherever p lives: a CPU generator gives the same tokens on any device)."""
    if generator is not None and probs.device != generator.device:
        probs = probs.to(generator.device)
    return int(torch.multinomial(probs, 1, generator=generator))


def point_mass(token: int, vocab_size: int, device) -> torch.Tensor:
    """(V,) q of a copied token: all its mass on ``token`` (a lookup draft's q(d) = 1), on ``device``."""
    q = torch.zeros(vocab_size, device=device)
    q[token] = 1.0
    return q


def uniform(generator: torch.Generator | None) -> float:
    """One r ~ U(0, 1) from ``generator`` (on its own device; the CPU's when None)."""
    return float(torch.rand((), generator=generator, device=generator.device if generator is not None else "cpu"))


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """normalise(max(0, p - q)); falls back to p where p <= q everywhere (then p == q)."""
    r = torch.clamp(p - q, min=0.0)
    total = r.sum()
    return r / total if total > 0 else p
