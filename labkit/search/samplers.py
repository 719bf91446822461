"""Optuna's samplers by short name, seeded, a quiet context for Optuna's logging, and a quiet in-memory study."""
from __future__ import annotations

import warnings
from contextlib import contextmanager

import optuna

__all__ = ["SAMPLERS", "make_sampler", "quiet_optuna", "quiet_study"]

SAMPLERS = ("gp", "tpe", "random")


def make_sampler(name: str, seed: int, deterministic: bool = True):
    """An Optuna sampler by short name ('gp', 'tpe', 'random'), seeded."""
    if name == "gp":
        with warnings.catch_warnings():   # deterministic_objective is marked experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.GPSampler(seed=seed, deterministic_objective=deterministic)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}")


@contextmanager
def quiet_optuna():
    """Optuna's log at WARNING and its ExperimentalWarnings silenced, restored afterwards."""
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(level)


def quiet_study(sampler, objective, n_trials: int):
    """An in-memory study that minimised ``objective`` for ``n_trials`` trials with ``sampler``, Optuna's log quiet
    (the toy problems' studies: nothing to store or resume)."""
    with quiet_optuna():
        study = optuna.create_study(direction="minimize", sampler=sampler)
        study.optimize(objective, n_trials=n_trials)
    return study
