"""Bayesian optimisation in one dimension, by hand: a Gaussian process fitted to a few evaluations of the Forrester
function, an acquisition choosing the next point on a grid, repeated (notebook 01, sections 1 to 3).

Everything here minimises. The two acquisitions, with best = the lowest f seen so far and the GP's mean mu(x)
and std sigma(x):

* Expected Improvement, I = best - mu(x) - xi, z = I / sigma(x):
  EI(x) = I * Phi(z) + sigma(x) * phi(z)   (maximise; Phi/phi: standard normal cdf/pdf)
* Lower Confidence Bound: LCB(x) = mu(x) - kappa * sigma(x)   (minimise; UCB of -f)

xi and kappa set exploration: larger values favour points where the GP is unsure. The test function is
Forrester f(x) = (6x - 2)^2 sin(12x - 4) on [0, 1]: one global minimum, -6.0207 at x = 0.7572, plus a local one
near x = 0.14 that traps pure exploitation.
"""
from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from ...core.checks import check_int, check_number

__all__ = ["FORRESTER_X_MIN", "FORRESTER_F_MIN", "ACQUISITIONS", "forrester", "fit_gp", "expected_improvement",
           "lower_confidence_bound", "BOHistory", "run_bo_1d", "best_so_far_1d", "acquisition_comparison",
           "exploration_table"]

FORRESTER_X_MIN = 0.7572487585232999      # argmin on [0, 1] (0.7572 to 4 digits)
FORRESTER_F_MIN = -6.0207400557670825     # min on [0, 1] (-6.0207)


def forrester(x):
    """Forrester et al. (2008): f(x) = (6x - 2)^2 sin(12x - 4), x in [0, 1]. Works on arrays."""
    x = np.asarray(x, dtype=float)
    return (6.0 * x - 2.0) ** 2 * np.sin(12.0 * x - 4.0)



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
    check_int("n_iter", n_iter, 1)
    check_int("n_init", n_init, 1)
    check_int("grid_size", grid_size, 2)
    check_number("xi", xi, 0.0)
    check_number("kappa", kappa, 0.0)
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

