"""What a step is expected to emit, and what that buys: the two formulas every estimate in labkit uses.

Notation: α per-token acceptance probability, γ tokens drafted per step, A mean accepted and d mean drafted
per step, c the cost of one drafted token and c_v the cost of one verification, both relative to one plain
decoding step (:mod:`labkit.core.decoding`).

- E(α, γ) = (1 - α^(γ+1)) / (1 - α): tokens a step emits on average when each drafted token is accepted
  independently with probability α (Leviathan et al. 2023): γ + 1 at α = 1, 1 at α = 0.
- (A + 1) / (d c + c_v): the speedup over plain decoding of a run whose steps accepted A and drafted d tokens on
  average (each step emits its accepted tokens and one of the target's own).
"""
from __future__ import annotations

import math

import torch

__all__ = ["expected_tokens", "speedup_limit"]


def expected_tokens(alpha, gamma):
    """E(α, γ) for numbers, or elementwise for tensors (broadcast); precise for α close to 1."""
    if isinstance(alpha, torch.Tensor) or isinstance(gamma, torch.Tensor):
        alpha = torch.as_tensor(alpha, dtype=torch.float64).clamp(0.0, 1.0)
        gamma = torch.as_tensor(gamma, dtype=torch.float64)
        below_one = alpha.clamp(max=1.0 - 1e-12)
        tokens = -torch.expm1((gamma + 1.0) * torch.log(below_one)) / (1.0 - below_one)
        return torch.where(alpha >= 1.0, gamma + 1.0, tokens)
    if alpha >= 1.0:
        return gamma + 1.0
    if alpha <= 0.0:
        return 1.0
    return -math.expm1((gamma + 1.0) * math.log(alpha)) / (1.0 - alpha)


def speedup_limit(mean_accepted: float, mean_drafted: float, c: float, c_v: float) -> float:
    """(A + 1) / (d c + c_v): the speedup a run's acceptance allows at costs c and c_v (NaN if c_v is NaN)."""
    return (mean_accepted + 1.0) / (mean_drafted * c + c_v)
