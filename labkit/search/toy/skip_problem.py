"""The bridge from toy problems to the real one: a made-up skip-set objective with the real one's shape (2L binary
variables z, z_b = 1 skipping block b in the draft; f(z) = (draft ms + verify ms) / (accepted tokens + 1)), what
an ARD Gaussian process learns about which blocks matter, and how to declare the variables to Optuna's GP
(notebook 01, section 5). Notation (c_b, F, v, d_b, α, γ): :class:`ToySkipProblem`.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...core.checks import check_int, check_probability
from ..samplers import make_sampler, quiet_study
from .forrester_bo import fit_gp

__all__ = ["ToySkipProblem", "make_toy_skip_problem", "suggest_skip_mask", "ard_relevance", "ard_hit_rate",
           "declaration_comparison"]


@dataclass(frozen=True)
class ToySkipProblem:
    """A made-up cost model with the shape of the real skip-set objective (not measured).

    z has 2L entries in :class:`labkit.core.skip.SkipSet` mask order (0..L-1: attention of layer l,
    L..2L-1: MLP of layer l); z_b = 1 skips block b in the draft. With block costs c_b (ms), a fixed
    cost per forward F (embedding, LM head, framework), an extra verify cost v per drafted token, per-block
    damages d_b >= 0 and γ drafted tokens per step (notation: docs/notation.md):

    * plain decoding: full ms = F + sum_b c_b per token
    * draft ms  = γ (F + sum_b c_b (1 - z_b))     (the draft runs the kept blocks γ times)
    * verify ms = full ms + γ v                   (one forward checks all γ tokens)
    * per-token acceptance probability α = exp(-sum_b d_b z_b); accepted = α + α^2 + ... + α^γ
    * f(z) = (draft ms + verify ms) / (accepted + 1)    in ms per emitted token

    Skipping nothing (α = 1) costs γ full drafts plus a verify for γ + 1 tokens: slower than plain decoding
    by γ v / (γ + 1). Skipping everything (α ≈ 0) still pays γ F and a verify for one token: slower too.
    With F = v = 0 both ends are exactly plain decoding. The gain lies in between.
    """

    block_ms: np.ndarray     # (2L,) c_b
    damage: np.ndarray       # (2L,) d_b
    n_draft: int = 4         # γ
    fixed_ms: float = 0.0    # F
    verify_token_ms: float = 0.0   # v

    @property
    def full_ms(self) -> float:
        """Plain decoding's ms per token: one full forward."""
        return float(self.fixed_ms + self.block_ms.sum())

    @property
    def n_layers(self) -> int:
        return len(self.block_ms) // 2

    @property
    def block_names(self) -> list[str]:
        return [f"attn {l}" for l in range(self.n_layers)] + [f"mlp {l}" for l in range(self.n_layers)]

    def ms_per_token(self, z) -> np.ndarray:
        """f(z) for one mask (2L,) or a batch (n, 2L); returns ms per token."""
        z = np.asarray(z, dtype=float)
        draft_ms = self.n_draft * (self.fixed_ms + (1.0 - z) @ self.block_ms)
        verify_ms = self.full_ms + self.n_draft * self.verify_token_ms
        alpha = np.exp(-(z @ self.damage))
        accepted = sum(alpha ** j for j in range(1, self.n_draft + 1))
        return (draft_ms + verify_ms) / (accepted + 1.0)

    def brute_force_minimum(self) -> tuple[float, np.ndarray]:
        """(min f, argmin mask) over all 2^(2L) masks; fine up to 2L ~ 20."""
        n = len(self.block_ms)
        masks = (np.arange(2 ** n)[:, None] >> np.arange(n)) & 1
        values = self.ms_per_token(masks)
        best = int(np.argmin(values))
        return float(values[best]), masks[best].astype(bool)


def make_toy_skip_problem(n_layers: int = 8, seed: int = 0, n_draft: int = 4, fixed_ms: float = 1.0,
                          verify_token_ms: float = 0.3) -> ToySkipProblem:
    """A toy problem in which a few blocks matter much more than the rest: the first and last
    layers and two random MLPs carry large damages, most attention blocks nearly none (the
    pattern layer-skipping papers report). Costs (made up): attention 0.4-0.6 ms, MLP 0.7-0.9 ms,
    1 ms fixed per forward, 0.3 ms of verify per drafted token."""
    check_int("n_layers", n_layers, 4)             # the first, the last and two middle layers matter
    check_int("n_draft", n_draft, 1)
    rng = np.random.default_rng(seed)
    L = n_layers
    block_ms = np.concatenate([rng.uniform(0.4, 0.6, L), rng.uniform(0.7, 0.9, L)])
    damage = np.concatenate([rng.uniform(0.0, 0.01, L), rng.uniform(0.02, 0.06, L)])
    important = [0, L - 1, L, 2 * L - 1, *(L + rng.choice(np.arange(1, L - 1), 2, replace=False))]
    damage[important] = rng.uniform(1.0, 2.5, len(important))
    return ToySkipProblem(block_ms, damage, n_draft, fixed_ms, verify_token_ms)


def suggest_skip_mask(trial, n_layers: int) -> list[bool]:
    """2L skip decisions for one Optuna trial, in SkipSet mask order (attn_0..attn_{L-1},
    mlp_0..mlp_{L-1}); each is ``suggest_int(name, 0, 1)``, which GPSampler fits with its own
    ARD length-scale (Optuna 5 does so for categoricals too). Not ``suggest_categorical``: on the toy
    it did worse (docs/decisions.md).
    """
    attention = [trial.suggest_int(f"attn_{l}", 0, 1) for l in range(n_layers)]
    mlp = [trial.suggest_int(f"mlp_{l}", 0, 1) for l in range(n_layers)]
    return [bool(v) for v in attention + mlp]


def ard_relevance(problem: ToySkipProblem, n_samples: int = 80, skip_probability: float = 0.3,
                  seed: int = 0) -> dict[str, np.ndarray]:
    """Fit an ARD GP to f at ``n_samples`` random masks (each block skipped with probability
    ``skip_probability``); returns its fitted length-scales l_b and the toy's true damages d_b,
    each (2L,). A short l_b means f changes fast along z_b: that block matters."""
    check_int("n_samples", n_samples, 2)
    check_probability("skip_probability", skip_probability)
    rng = np.random.default_rng(seed)
    Z = (rng.random((n_samples, len(problem.block_ms))) < skip_probability).astype(float)
    gp = fit_gp(Z, problem.ms_per_token(Z), seed=seed, ard=True, n_restarts=1,
                length_scale_bounds=(1e-2, 1e3))
    return {"length_scale": np.atleast_1d(gp.kernel_.k2.length_scale).astype(float), "damage": problem.damage}


def ard_hit_rate(relevance: dict[str, np.ndarray], important_damage: float = 0.5) -> float:
    """Of the m blocks with true damage >= ``important_damage``, the fraction found among the m
    shortest fitted length-scales (1.0: the ARD GP ranks every block that matters first)."""
    important = relevance["damage"] >= important_damage
    shortest = np.argsort(relevance["length_scale"])[: int(important.sum())]
    return float(important[shortest].mean())


def declaration_comparison(problem: ToySkipProblem, n_trials: int = 40, seeds: Sequence[int] = (0, 1, 2)) -> dict:
    """GPSampler on the toy with the 2L skip variables declared ``suggest_int(name, 0, 1)`` or
    ``suggest_categorical(name, [0, 1])``: {declaration: {"best": [per seed], "s_per_trial": float}}."""
    n = len(problem.block_ms)

    def objective(kind):
        def f(trial):
            if kind == "int":
                z = [trial.suggest_int(f"z{b}", 0, 1) for b in range(n)]
            else:
                z = [trial.suggest_categorical(f"z{b}", [0, 1]) for b in range(n)]
            return float(problem.ms_per_token(np.array(z, dtype=float)))
        return f

    out = {}
    for kind in ("int", "categorical"):
        t0, best = time.perf_counter(), []
        for seed in seeds:
            study = quiet_study(make_sampler("gp", seed), objective(kind), n_trials)
            best.append(study.best_value)
        out[kind] = {"best": best, "s_per_trial": (time.perf_counter() - t0) / (n_trials * len(seeds))}
    return out
