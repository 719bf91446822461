"""Optuna's samplers on a two-dimensional test function: GP, TPE and random search minimising Branin at equal
trials (notebook 01, section 4), with the samplers the skip-set search uses (:mod:`labkit.search.samplers`, by
the same names: 'gp', 'tpe', 'random').

Branin on x1 in [-5, 10], x2 in [0, 15]: a (x2 - b x1^2 + c x1 - r)^2 + s (1 - t) cos(x1) + s, three global
minima of 0.397887.
"""
from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from ...core.checks import check_choice, check_int
from ..samplers import SAMPLERS, make_sampler, quiet_study

__all__ = ["BRANIN_F_MIN", "BRANIN_MINIMA", "BRANIN_BOUNDS", "SAMPLERS", "branin", "optuna_best_so_far",
           "sampler_comparison"]


BRANIN_F_MIN = 0.39788735772973816        # 0.397887, reached at the three points below
BRANIN_MINIMA = ((-math.pi, 12.275), (math.pi, 2.275), (3 * math.pi, 2.475))
BRANIN_BOUNDS = ((-5.0, 10.0), (0.0, 15.0))


def branin(x1, x2):
    """Branin: a (x2 - b x1^2 + c x1 - r)^2 + s (1 - t) cos(x1) + s with a = 1, b = 5.1 / (4 pi^2),
    c = 5 / pi, r = 6, s = 10, t = 1 / (8 pi); x1 in [-5, 10], x2 in [0, 15]. Works on arrays."""
    x1, x2 = np.asarray(x1, dtype=float), np.asarray(x2, dtype=float)
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1 ** 2 + c * x1 - 6.0) ** 2 + 10.0 * (1 - t) * np.cos(x1) + 10.0


def _branin_objective(trial) -> float:
    (lo1, hi1), (lo2, hi2) = BRANIN_BOUNDS
    return float(branin(trial.suggest_float("x1", lo1, hi1), trial.suggest_float("x2", lo2, hi2)))


def optuna_best_so_far(sampler: str, n_trials: int, seed: int) -> np.ndarray:
    """(n_trials,) best-so-far of one Optuna study minimising Branin with ``sampler`` ('gp', 'tpe' or 'random',
    built as the skip-set search builds it; GP and TPE start with 10 random trials, then model the data)."""
    check_int("n_trials", n_trials, 1)
    study = quiet_study(make_sampler(sampler, seed), _branin_objective, n_trials)
    return np.minimum.accumulate([t.value for t in study.trials])


def sampler_comparison(samplers: Sequence[str] = SAMPLERS, n_trials: int = 40,
                       seeds: Sequence[int] = (0, 1, 2)) -> dict[str, np.ndarray]:
    """{sampler: (n_seeds, n_trials) best-so-far curves on Branin}; also the seconds per trial
    of each sampler under the key ``f"{name} s/trial"`` (a float)."""
    for name in samplers:
        check_choice("samplers", name, SAMPLERS)
    out: dict = {}
    for name in samplers:
        t0 = time.perf_counter()
        out[name] = np.array([optuna_best_so_far(name, n_trials, s) for s in seeds])
        out[f"{name} s/trial"] = (time.perf_counter() - t0) / (n_trials * len(seeds))
    return out
