"""Bayesian optimisation on toy problems, from a 1-D walkthrough to a made-up skip-set objective (notebook 01).

The loop, for minimising an expensive f over a box::

    observe a few points  ->  fit a surrogate (a Gaussian process, GP)  ->  maximise an
    acquisition function built from the GP's mean mu(x) and std sigma(x)  ->  evaluate f
    at the chosen x  ->  add (x, f(x)) to the data  ->  repeat

Everything here minimises. The two acquisitions, with best = the lowest f seen so far:

* Expected Improvement, I = best - mu(x) - xi, z = I / sigma(x):
  EI(x) = I * Phi(z) + sigma(x) * phi(z)   (maximise; Phi/phi: standard normal cdf/pdf)
* Lower Confidence Bound: LCB(x) = mu(x) - kappa * sigma(x)   (minimise; UCB of -f)

xi and kappa set exploration: larger values favour points where the GP is unsure.

Test functions: Forrester f(x) = (6x - 2)^2 sin(12x - 4) on [0, 1] (one global minimum,
-6.0207 at x = 0.7572, plus a local one near x = 0.14) and Branin on [-5, 10] x [0, 15]
(three global minima of 0.397887). The bridge to the real problem is a made-up cost model
(:class:`ToySkipProblem`) with the real objective's shape: 2L binary variables z (skip the
attention / MLP block of layer l) and f(z) = (draft ms + verify ms) / (accepted tokens + 1).
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import optuna
from scipy.stats import norm

from .samplers import make_sampler, quiet_optuna

__all__ = [
    "FORRESTER_X_MIN", "FORRESTER_F_MIN", "BRANIN_F_MIN", "BRANIN_MINIMA", "SAMPLER_NAMES", "ACQUISITIONS",
    "forrester", "branin", "fit_gp", "expected_improvement", "lower_confidence_bound",
    "BOHistory", "run_bo_1d", "best_so_far_1d", "acquisition_comparison", "exploration_table",
    "optuna_best_so_far", "sampler_comparison", "ToySkipProblem", "make_toy_skip_problem",
    "suggest_skip_mask", "ard_relevance", "ard_hit_rate", "declaration_comparison",
]

FORRESTER_X_MIN = 0.7572487585232999      # argmin on [0, 1] (0.7572 to 4 digits)


FORRESTER_F_MIN = -6.0207400557670825     # min on [0, 1] (-6.0207)


BRANIN_F_MIN = 0.39788735772973816        # 0.397887, reached at the three points below


BRANIN_MINIMA = ((-math.pi, 12.275), (math.pi, 2.275), (3 * math.pi, 2.475))


BRANIN_BOUNDS = ((-5.0, 10.0), (0.0, 15.0))


def forrester(x):
    """Forrester et al. (2008): f(x) = (6x - 2)^2 sin(12x - 4), x in [0, 1]. Works on arrays."""
    x = np.asarray(x, dtype=float)
    return (6.0 * x - 2.0) ** 2 * np.sin(12.0 * x - 4.0)


def branin(x1, x2):
    """Branin: a (x2 - b x1^2 + c x1 - r)^2 + s (1 - t) cos(x1) + s with a = 1, b = 5.1 / (4 pi^2),
    c = 5 / pi, r = 6, s = 10, t = 1 / (8 pi); x1 in [-5, 10], x2 in [0, 15]. Works on arrays."""
    x1, x2 = np.asarray(x1, dtype=float), np.asarray(x2, dtype=float)
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1 ** 2 + c * x1 - 6.0) ** 2 + 10.0 * (1 - t) * np.cos(x1) + 10.0


def fit_gp(X, y, seed: int = 0, ard: bool = False, n_restarts: int = 1,
           length_scale_bounds: tuple[float, float] = (1e-2, 1e2)):
    """Fit a GP with a Matérn nu = 5/2 kernel, k(r) = s^2 (1 + sqrt5 r + 5r^2/3) exp(-sqrt5 r),
    r = |x - x'| / l (ARD: r^2 = sum_d (x_d - x'_d)^2 / l_d^2, one length-scale per variable).

    The amplitude s^2 and the length-scale(s) l maximise the marginal likelihood (``n_restarts``
    extra random starts); y is standardised; a 1e-6 jitter stands in for noise (f is
    deterministic). Returns the fitted ``sklearn`` GaussianProcessRegressor.

    BLAS runs single-threaded here: the matrices are tiny, and a multi-threaded BLAS on a busy
    machine made each fit ~8x slower (threads spin-waiting for a free core).
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern
    from threadpoolctl import threadpool_limits

    X = np.asarray(X, dtype=float)
    X = X[:, None] if X.ndim == 1 else X
    length_scale = np.ones(X.shape[1]) if ard else 0.2
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * Matern(length_scale, length_scale_bounds, nu=2.5)
    gp = GaussianProcessRegressor(kernel, alpha=1e-6, normalize_y=True,
                                  n_restarts_optimizer=n_restarts, random_state=seed)
    with warnings.catch_warnings(), threadpool_limits(1, user_api="blas"):
        warnings.simplefilter("ignore", ConvergenceWarning)   # a length-scale at its bound is an answer
        return gp.fit(X, np.asarray(y, dtype=float))


def expected_improvement(mu, sigma, best: float, xi: float = 0.01):
    """EI for minimisation: I = best - mu - xi, z = I / sigma, EI = I Phi(z) + sigma phi(z).

    Where sigma = 0 the GP is certain and EI = max(I, 0) (the sigma -> 0 limit), so a point
    whose mean is above ``best`` has EI = 0. Larger xi asks for a bigger improvement: explore.
    """
    mu, sigma = np.asarray(mu, dtype=float), np.asarray(sigma, dtype=float)
    improvement = best - mu - xi
    safe_sigma = np.where(sigma > 0, sigma, 1.0)
    z = improvement / safe_sigma
    ei = improvement * norm.cdf(z) + sigma * norm.pdf(z)
    return np.where(sigma > 0, np.maximum(ei, 0.0), np.maximum(improvement, 0.0))


def lower_confidence_bound(mu, sigma, kappa: float = 2.0):
    """LCB(x) = mu(x) - kappa sigma(x), to be minimised (UCB of -f). kappa = 0: pure exploitation."""
    return np.asarray(mu, dtype=float) - kappa * np.asarray(sigma, dtype=float)


ACQUISITIONS = ("EI", "LCB")


def _choose_next(acquisition: str, values: np.ndarray) -> int:
    """Index of the next point: argmax EI, argmin LCB."""
    if acquisition == "EI":
        return int(np.argmax(values))
    if acquisition == "LCB":
        return int(np.argmin(values))
    raise ValueError(f"acquisition must be one of {ACQUISITIONS}, got {acquisition!r}")


@dataclass
class BOHistory:
    """One 1-D BO run. Step i fits the GP to the first ``n_init + i`` observations, computes the
    acquisition on ``grid`` and picks ``next_x[i]``, which becomes observation ``n_init + i``."""

    acquisition: str
    xi: float
    kappa: float
    seed: int
    n_init: int
    grid: np.ndarray = field(repr=False)                 # (G,) candidate points on [0, 1]
    f_grid: np.ndarray = field(repr=False)               # (G,) the true f on the grid
    x_observed: np.ndarray = field(repr=False)           # (n_init + n_iter,) in evaluation order
    y_observed: np.ndarray = field(repr=False)
    mean: np.ndarray = field(repr=False)                 # (n_iter, G) GP posterior mean at step i
    std: np.ndarray = field(repr=False)                  # (n_iter, G) GP posterior std at step i
    acquisition_values: np.ndarray = field(repr=False)   # (n_iter, G) EI or LCB at step i
    next_x: np.ndarray = field(repr=False)               # (n_iter,) the point chosen at step i
    seconds: float = 0.0                                  # wall time of the run
    x_min: float = FORRESTER_X_MIN                        # the objective's known minimum (for figures and the gap)
    f_min: float = FORRESTER_F_MIN

    @property
    def n_iter(self) -> int:
        return len(self.next_x)

    @property
    def best_so_far(self) -> np.ndarray:
        """(n_init + n_iter,) lowest f after each evaluation."""
        return np.minimum.accumulate(self.y_observed)

    @property
    def best_y(self) -> float:
        return float(self.y_observed.min())

    @property
    def best_x(self) -> float:
        return float(self.x_observed[np.argmin(self.y_observed)])

    @property
    def gap(self) -> float:
        """best_y - the known minimum (>= 0 up to rounding)."""
        return self.best_y - self.f_min


def _initial_design(rng: np.random.Generator, n_init: int) -> np.ndarray:
    return rng.uniform(0.0, 1.0, n_init)


def run_bo_1d(acquisition: str = "EI", n_iter: int = 15, xi: float = 0.01, kappa: float = 2.0,
              seed: int = 0, n_init: int = 3, grid_size: int = 501) -> BOHistory:
    """Minimise Forrester with BO: ``n_init`` uniform random points, then ``n_iter`` steps of
    fit GP -> acquisition on a grid of ``grid_size`` points -> evaluate its best point.

    Maximising the acquisition on a dense grid is exact enough in 1-D; in more dimensions one
    uses a gradient optimiser with restarts (as Optuna's GPSampler does).
    """
    from threadpoolctl import threadpool_limits

    _choose_next(acquisition, np.zeros(1))   # validates the name before any work
    with threadpool_limits(1, user_api="blas"):   # tiny matrices: see fit_gp
        return _run_bo_1d(acquisition, n_iter, xi, kappa, seed, n_init, grid_size)


def _run_bo_1d(acquisition: str, n_iter: int, xi: float, kappa: float, seed: int, n_init: int,
               grid_size: int) -> BOHistory:
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    grid = np.linspace(0.0, 1.0, grid_size)
    xs = list(_initial_design(rng, n_init))
    ys = list(forrester(np.array(xs)))
    means, stds, acqs, chosen = [], [], [], []
    for _ in range(n_iter):
        gp = fit_gp(np.array(xs), np.array(ys), seed=seed)
        mu, sigma = gp.predict(grid[:, None], return_std=True)
        if acquisition == "EI":
            values = expected_improvement(mu, sigma, best=min(ys), xi=xi)
        else:
            values = lower_confidence_bound(mu, sigma, kappa=kappa)
        x_next = float(grid[_choose_next(acquisition, values)])
        means.append(mu), stds.append(sigma), acqs.append(values), chosen.append(x_next)
        xs.append(x_next)
        ys.append(float(forrester(x_next)))
    return BOHistory(acquisition, xi, kappa, seed, n_init, grid, forrester(grid), np.array(xs),
                     np.array(ys), np.array(means), np.array(stds), np.array(acqs), np.array(chosen),
                     time.perf_counter() - t0)


def best_so_far_1d(acquisition: str, n_iter: int, seed: int, n_init: int = 3, xi: float = 0.01,
                   kappa: float = 2.0) -> np.ndarray:
    """(n_init + n_iter,) best-so-far on Forrester; ``"random"`` is uniform random search with
    the same initial design (same seed), the baseline every BO method must beat."""
    if acquisition == "random":
        rng = np.random.default_rng(seed)
        xs = np.concatenate([_initial_design(rng, n_init), rng.uniform(0.0, 1.0, n_iter)])
        return np.minimum.accumulate(forrester(xs))
    return run_bo_1d(acquisition, n_iter, xi, kappa, seed, n_init).best_so_far


def acquisition_comparison(acquisitions: Sequence[str] = ("EI", "LCB", "random"), n_iter: int = 15,
                           seeds: Sequence[int] = (0, 1, 2), n_init: int = 3, xi: float = 0.01,
                           kappa: float = 2.0) -> dict[str, np.ndarray]:
    """{acquisition: (n_seeds, n_init + n_iter) best-so-far curves}, one row per seed."""
    return {name: np.array([best_so_far_1d(name, n_iter, s, n_init, xi, kappa) for s in seeds])
            for name in acquisitions}


def exploration_table(n_iter: int = 15, seed: int = 0, xis: Sequence[float] = (0.0, 0.01, 0.1, 1.0),
                      kappas: Sequence[float] = (0.0, 2.0, 4.0), n_init: int = 3):
    """One row per setting (EI with each xi, LCB with each kappa) on the same initial design:
    best f found, its gap to the known minimum, the first BO step (1-based) whose point lies within 0.05 of
    the global minimum (None: never), and the points chosen, as a pandas DataFrame."""
    import pandas as pd

    settings = [("EI", "ξ", xi, dict(xi=xi)) for xi in xis] + [("LCB", "κ", k, dict(kappa=k)) for k in kappas]
    rows = []
    for acquisition, symbol, value, knob in settings:
        h = run_bo_1d(acquisition, n_iter, seed=seed, n_init=n_init, **knob)
        inside = np.flatnonzero(np.abs(h.next_x - FORRESTER_X_MIN) < 0.05)
        rows.append({"acquisition": acquisition, "setting": f"{symbol} = {value:g}", "best f found": h.best_y,
                     "gap to minimum": h.gap, "found the global basin": abs(h.best_x - FORRESTER_X_MIN) < 0.05,
                     "first BO step in the global basin": int(inside[0]) + 1 if len(inside) else None,
                     "points chosen": " ".join(f"{x:.2f}" for x in h.next_x)})
    return pd.DataFrame(rows)


SAMPLER_NAMES = ("GPSampler", "TPESampler", "RandomSampler")


def _make_sampler(sampler_name: str, seed: int, deterministic: bool = True):
    """Optuna's sampler by class name (GPSampler, TPESampler, RandomSampler), as labkit.search builds it."""
    short = {"GPSampler": "gp", "TPESampler": "tpe", "RandomSampler": "random"}
    if sampler_name not in short:
        raise ValueError(f"sampler_name must be one of {SAMPLER_NAMES}, got {sampler_name!r}")
    return make_sampler(short[sampler_name], seed, deterministic)


def _branin_objective(trial) -> float:
    (lo1, hi1), (lo2, hi2) = BRANIN_BOUNDS
    return float(branin(trial.suggest_float("x1", lo1, hi1), trial.suggest_float("x2", lo2, hi2)))


def _run_study(sampler, objective: Callable, n_trials: int):
    with quiet_optuna():
        study = optuna.create_study(direction="minimize", sampler=sampler)
        study.optimize(objective, n_trials=n_trials)
    return study


def optuna_best_so_far(sampler_name: str, n_trials: int, seed: int) -> np.ndarray:
    """(n_trials,) best-so-far of one Optuna study minimising Branin with the named sampler
    (GPSampler and TPESampler start with 10 random trials, then model the data)."""
    study = _run_study(_make_sampler(sampler_name, seed), _branin_objective, n_trials)
    return np.minimum.accumulate([t.value for t in study.trials])


def sampler_comparison(sampler_names: Sequence[str] = SAMPLER_NAMES, n_trials: int = 40,
                       seeds: Sequence[int] = (0, 1, 2)) -> dict[str, np.ndarray]:
    """{sampler: (n_seeds, n_trials) best-so-far curves on Branin}; also the seconds per trial
    of each sampler under the key ``f"{name} s/trial"`` (a float)."""
    out: dict = {}
    for name in sampler_names:
        t0 = time.perf_counter()
        out[name] = np.array([optuna_best_so_far(name, n_trials, s) for s in seeds])
        out[f"{name} s/trial"] = (time.perf_counter() - t0) / (n_trials * len(seeds))
    return out


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
    if n_layers < 4:
        raise ValueError(f"the toy needs n_layers >= 4 (first, last and two middle layers), got {n_layers}")
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
    ARD length-scale (Optuna 5 does so for categoricals too). Not ``suggest_categorical``: this lab's
    first search (2L = 80) cost 5-36 s per trial with it and got stuck proposing 'skip all', and on the
    toy it did worse (docs/decisions.md).
    """
    attention = [trial.suggest_int(f"attn_{l}", 0, 1) for l in range(n_layers)]
    mlp = [trial.suggest_int(f"mlp_{l}", 0, 1) for l in range(n_layers)]
    return [bool(v) for v in attention + mlp]


def ard_relevance(problem: ToySkipProblem, n_samples: int = 80, skip_probability: float = 0.3,
                  seed: int = 0) -> dict[str, np.ndarray]:
    """Fit an ARD GP to f at ``n_samples`` random masks (each block skipped with probability
    ``skip_probability``); returns its fitted length-scales l_b and the toy's true damages d_b,
    each (2L,). A short l_b means f changes fast along z_b: that block matters."""
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
            study = _run_study(_make_sampler("GPSampler", seed), objective(kind), n_trials)
            best.append(study.best_value)
        out[kind] = {"best": best, "s_per_trial": (time.perf_counter() - t0) / (n_trials * len(seeds))}
    return out
