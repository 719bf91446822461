"""Reference answers to the notebooks' exercises (docs/solutions.md shows and discusses the same code).

The notebooks use these only when run with ``SOLUTIONS = True`` (the automated runs); students write their own.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.stats import norm

from ..measure.costs.analytic import expected_tokens_per_step
from ..measure.grid.results import PlaygroundGrid, Setting

__all__ = ["expected_improvement", "f_prediction", "verify_greedy", "peak_ratio", "break_even"]


def expected_improvement(mu, sigma, best, xi):
    """01: EI for minimisation, I = best - mu - xi, z = I / sigma, EI = I Phi(z) + sigma phi(z);
    max(I, 0) at sigma 0."""
    mu, sigma = np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
    improvement = best - mu - xi
    z = improvement / np.where(sigma > 0, sigma, 1.0)
    ei = improvement * norm.cdf(z) + sigma * norm.pdf(z)
    return np.where(sigma > 0, np.maximum(ei, 0.0), np.maximum(improvement, 0.0))


def f_prediction(alpha, gamma, draft_ms, verify_ms):
    """02: f = (γ draft ms + verify ms) / E(α, γ), with E(α, γ) = (1 - α^(γ+1)) / (1 - α)."""
    tokens_per_step = (1 - alpha ** (gamma + 1)) / (1 - alpha) if alpha < 1 else gamma + 1
    assert abs(tokens_per_step - expected_tokens_per_step(alpha, gamma)) < 1e-9
    return (gamma * draft_ms + verify_ms) / tokens_per_step


def verify_greedy(logits, drafted):
    """03: accept the longest prefix of the draft that equals the target's argmax, then the target's own token."""
    target = torch.as_tensor(logits).argmax(dim=-1).tolist()     # (γ+1,): the target's choice at every position
    n = 0
    while n < len(drafted) and drafted[n] == target[n]:
        n += 1
    return n, target[n]


def peak_ratio(grid: PlaygroundGrid, setting: Setting):
    """04: the skip ratio with the highest measured speedup on the setting's slice."""
    speedups = grid.vs_ratio("speedup", setting)
    return grid.ratios[int(np.nanargmax(speedups))]


def break_even(c, c_v, gamma):
    """04: the α where E(α, γ) = γ·c + c_v, by bisection: E(α, γ) = (1 - α^(γ+1)) / (1 - α) rises with α."""
    cost = gamma * c + c_v
    lo, hi = 0.0, 1.0
    for _ in range(50):
        alpha = (lo + hi) / 2
        tokens_per_step = (1 - alpha ** (gamma + 1)) / (1 - alpha)
        lo, hi = (alpha, hi) if tokens_per_step < cost else (lo, alpha)
    return (lo + hi) / 2
