"""Bayesian optimisation, from a 1-D walkthrough to the skip-set search (notebook 01).

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
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from scipy.stats import norm

from .viz.widgets import as_widget, update_widget

__all__ = [
    "FORRESTER_X_MIN", "FORRESTER_F_MIN", "BRANIN_F_MIN", "BRANIN_MINIMA", "SAMPLER_NAMES",
    "forrester", "branin", "fit_gp", "expected_improvement", "lower_confidence_bound",
    "BOHistory", "run_bo_1d", "best_so_far_1d", "acquisition_comparison", "exploration_table",
    "optuna_best_so_far", "sampler_comparison", "ToySkipProblem", "make_toy_skip_problem",
    "suggest_skip_mask", "ard_relevance", "ard_hit_rate",
    "step_trace_xy", "bo_step_figure", "acquisition_comparison_figure", "sampler_comparison_figure",
    "ard_relevance_figure", "BOStepper",
]

# -- test functions ----------------------------------------------------------------------------
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


# -- the surrogate and the acquisitions --------------------------------------------------------
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


# -- the 1-D loop ------------------------------------------------------------------------------
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
        return self.best_y - FORRESTER_F_MIN


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
    best f found, its gap to the known minimum, and the points chosen, as a pandas DataFrame."""
    import pandas as pd

    settings = [("EI", "ξ", xi, dict(xi=xi)) for xi in xis] + [("LCB", "κ", k, dict(kappa=k)) for k in kappas]
    rows = []
    for acquisition, symbol, value, knob in settings:
        h = run_bo_1d(acquisition, n_iter, seed=seed, n_init=n_init, **knob)
        rows.append({"acquisition": acquisition, "setting": f"{symbol} = {value:g}", "best f found": h.best_y,
                     "gap to minimum": h.gap, "found the global basin": abs(h.best_x - FORRESTER_X_MIN) < 0.05,
                     "points chosen": " ".join(f"{x:.2f}" for x in h.next_x)})
    return pd.DataFrame(rows)


# -- Optuna on Branin --------------------------------------------------------------------------
SAMPLER_NAMES = ("GPSampler", "TPESampler", "RandomSampler")


def _make_sampler(sampler_name: str, seed: int, deterministic: bool = True):
    """Optuna's sampler by class name (GPSampler, TPESampler, RandomSampler), as labkit.search builds it."""
    from .search import make_sampler

    short = {"GPSampler": "gp", "TPESampler": "tpe", "RandomSampler": "random"}
    if sampler_name not in short:
        raise ValueError(f"sampler_name must be one of {SAMPLER_NAMES}, got {sampler_name!r}")
    return make_sampler(short[sampler_name], seed, deterministic)


def _branin_objective(trial) -> float:
    (lo1, hi1), (lo2, hi2) = BRANIN_BOUNDS
    return float(branin(trial.suggest_float("x1", lo1, hi1), trial.suggest_float("x2", lo2, hi2)))


def _run_study(sampler, objective: Callable, n_trials: int):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
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


# -- the bridge: a toy skip-set objective ------------------------------------------------------
@dataclass(frozen=True)
class ToySkipProblem:
    """A made-up cost model with the shape of the real skip-set objective (not measured).

    z has 2L entries in :class:`labkit.skip.SkipSet` mask order (0..L-1: attention of layer l,
    L..2L-1: MLP of layer l); z_b = 1 skips block b in the draft. With block costs c_b (ms),
    per-block damages d_b >= 0 and k drafted tokens per step:

    * draft ms  = k * sum_b c_b (1 - z_b)         (the draft runs the kept blocks k times)
    * verify ms = sum_b c_b                       (one full forward checks all k tokens)
    * acceptance alpha = exp(-sum_b d_b z_b); accepted = alpha + alpha^2 + ... + alpha^k
    * f(z) = (draft ms + verify ms) / (accepted + 1)    in ms per emitted token

    Skipping nothing gives alpha = 1 and f = full forward ms; skipping everything gives
    alpha ~ 0 and the same f: both ends are plain decoding, the gain lies in between.
    """

    block_ms: np.ndarray     # (2L,) c_b
    damage: np.ndarray       # (2L,) d_b
    n_draft: int = 4

    @property
    def n_layers(self) -> int:
        return len(self.block_ms) // 2

    @property
    def block_names(self) -> list[str]:
        return [f"attn {l}" for l in range(self.n_layers)] + [f"mlp {l}" for l in range(self.n_layers)]

    def ms_per_token(self, z) -> np.ndarray:
        """f(z) for one mask (2L,) or a batch (n, 2L); returns ms per token."""
        z = np.asarray(z, dtype=float)
        draft_ms = self.n_draft * ((1.0 - z) @ self.block_ms)
        verify_ms = self.block_ms.sum()
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


def make_toy_skip_problem(n_layers: int = 8, seed: int = 0, n_draft: int = 4) -> ToySkipProblem:
    """A toy problem in which a few blocks matter much more than the rest: the first and last
    layers and two random MLPs carry large damages, most attention blocks nearly none (the
    pattern layer-skipping papers report). Costs: attention 0.4-0.6 ms, MLP 0.7-0.9 ms."""
    if n_layers < 4:
        raise ValueError(f"the toy needs n_layers >= 4 (first, last and two middle layers), got {n_layers}")
    rng = np.random.default_rng(seed)
    L = n_layers
    block_ms = np.concatenate([rng.uniform(0.4, 0.6, L), rng.uniform(0.7, 0.9, L)])
    damage = np.concatenate([rng.uniform(0.0, 0.01, L), rng.uniform(0.02, 0.06, L)])
    important = [0, L - 1, L, 2 * L - 1, *(L + rng.choice(np.arange(1, L - 1), 2, replace=False))]
    damage[important] = rng.uniform(1.0, 2.5, len(important))
    return ToySkipProblem(block_ms, damage, n_draft)


def suggest_skip_mask(trial, n_layers: int) -> list[bool]:
    """2L skip decisions for one Optuna trial, in SkipSet mask order (attn_0..attn_{L-1},
    mlp_0..mlp_{L-1}); each is ``suggest_int(name, 0, 1)``, which GPSampler fits with its own
    ARD length-scale. Not ``suggest_categorical``: in this lab's first search (2L = 80) that
    cost 5-36 s per trial and got stuck proposing 'skip all'.
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


# -- figures -----------------------------------------------------------------------------------
COLORS = {"EI": "#1f77b4", "LCB": "#ff7f0e", "random": "#7f7f7f", "GPSampler": "#1f77b4",
          "TPESampler": "#2ca02c", "RandomSampler": "#7f7f7f"}
ACQUISITION_LABELS = {"EI": "Expected Improvement (EI)", "LCB": "Lower Confidence Bound (LCB)",
                      "random": "random search"}
_NEXT_COLOR = "#d62728"
_TOP_Y_RANGE = (-14.0, 22.0)   # Forrester spans [-6.02, 15.83]; early bands are clipped


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _band_xy(x, lower, upper) -> tuple[np.ndarray, np.ndarray]:
    """A closed polygon (upper left-to-right, lower right-to-left) for a fill='toself' band."""
    x = np.asarray(x)
    return np.concatenate([x, x[::-1]]), np.concatenate([upper, np.asarray(lower)[::-1]])


def _acquisition_axis_title(acquisition: str) -> str:
    return "EI(x) (unitless)" if acquisition == "EI" else "LCB(x) (unitless)"


def _step_title(history: BOHistory, i: int) -> str:
    knob = f"ξ = {history.xi:g}" if history.acquisition == "EI" else f"κ = {history.kappa:g}"
    rule = "argmax EI" if history.acquisition == "EI" else "argmin LCB"
    return (f"BO on Forrester, step {i + 1} of {history.n_iter}: GP on {history.n_init + i} points, "
            f"{history.acquisition} ({knob}) → next x = {history.next_x[i]:.3f} ({rule})")


def step_trace_xy(history: BOHistory, i: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """x/y of the traces of :func:`bo_step_figure` that change with the step, by trace index."""
    n_seen = history.n_init + i
    mu, sigma, grid = history.mean[i], history.std[i], history.grid
    x_next = history.next_x[i]
    k = int(np.searchsorted(grid, x_next))
    return {
        2: _band_xy(grid, mu - 2 * sigma, mu + 2 * sigma),
        3: (grid, mu),
        4: (history.x_observed[:n_seen], history.y_observed[:n_seen]),
        5: (np.array([x_next, x_next]), np.array(_TOP_Y_RANGE)),
        6: (grid, history.acquisition_values[i]),
        7: (np.array([x_next]), np.array([history.acquisition_values[i][k]])),
    }


def bo_step_figure(history: BOHistory, i: int) -> go.Figure:
    """Step i of a 1-D run: top, the true f, the GP mean with its mu ± 2 sigma band, the points
    seen so far and the next x; bottom, the acquisition with its chosen point."""
    if not 0 <= i < history.n_iter:
        raise IndexError(f"step {i} outside 0..{history.n_iter - 1}")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.06)
    color = COLORS[history.acquisition]
    xy = step_trace_xy(history, i)
    traces = [
        (go.Scatter(x=history.grid, y=history.f_grid, name="true f(x) (unknown to BO)",
                    line=dict(color="black", dash="dot", width=1.5)), 1),
        (go.Scatter(x=[FORRESTER_X_MIN], y=[FORRESTER_F_MIN], name="known minimum", mode="markers",
                    marker=dict(symbol="x", size=11, color="#2ca02c")), 1),
        (go.Scatter(x=xy[2][0], y=xy[2][1], name="GP μ ± 2σ", fill="toself", fillcolor=_rgba("#1f77b4", 0.18),
                    line=dict(width=0), hoverinfo="skip"), 1),
        (go.Scatter(x=xy[3][0], y=xy[3][1], name="GP mean μ(x)", line=dict(color="#1f77b4", width=2.5)), 1),
        (go.Scatter(x=xy[4][0], y=xy[4][1], name="observed points", mode="markers",
                    marker=dict(color="black", size=9, line=dict(color="white", width=1))), 1),
        (go.Scatter(x=xy[5][0], y=xy[5][1], name="next x", mode="lines", legendgroup="next",
                    line=dict(color=_NEXT_COLOR, dash="dash", width=2)), 1),
        (go.Scatter(x=xy[6][0], y=xy[6][1], name=f"acquisition: {history.acquisition}",
                    line=dict(color=color, width=2)), 2),
        (go.Scatter(x=xy[7][0], y=xy[7][1], name="next x", mode="markers", legendgroup="next", showlegend=False,
                    marker=dict(symbol="star", size=16, color=_NEXT_COLOR, line=dict(color="black", width=1))), 2),
    ]
    for trace, row in traces:
        fig.add_trace(trace, row=row, col=1)
    fig.update_yaxes(title_text="f(x) (unitless)", range=list(_TOP_Y_RANGE), row=1, col=1)
    fig.update_yaxes(title_text=_acquisition_axis_title(history.acquisition), exponentformat="power",
                     row=2, col=1)
    fig.update_xaxes(range=[-0.02, 1.02])
    fig.update_xaxes(title_text="x (unitless)", row=2, col=1)
    fig.update_layout(title=dict(text=_step_title(history, i), font=dict(size=15)), height=600,
                      template="plotly_white", legend=dict(orientation="h", y=-0.12, x=0),
                      margin=dict(t=60, b=90))
    return fig


def _best_so_far_band_figure(curves: dict[str, np.ndarray], f_min: float, labels: dict[str, str],
                             title: str, x_title: str, x_start: int = 1, vline: tuple[float, str] | None = None,
                             band: str = "minmax") -> go.Figure:
    """Median gap (best-so-far - f_min) per method over seeds, with a min-max or IQR band; log y."""
    fig = go.Figure()
    for name, runs in curves.items():
        gap = np.clip(np.asarray(runs, dtype=float) - f_min, 1e-8, None)
        x = np.arange(x_start, x_start + gap.shape[1])
        lo, hi = (gap.min(0), gap.max(0)) if band == "minmax" else np.percentile(gap, [25, 75], axis=0)
        color = COLORS.get(name, "#9467bd")
        label = labels.get(name, name)
        band_name = "min–max" if band == "minmax" else "25–75%"
        bx, by = _band_xy(x, lo, hi)
        fig.add_trace(go.Scatter(x=bx, y=by, fill="toself", fillcolor=_rgba(color, 0.15), line=dict(width=0),
                                 name=f"{label}: {band_name} of {gap.shape[0]} seeds", legendgroup=name,
                                 hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=x, y=np.median(gap, axis=0), name=f"{label}: median", legendgroup=name,
                                 mode="lines", line=dict(color=color, width=2.5)))
    if vline is not None:
        fig.add_vline(x=vline[0], line=dict(color="grey", dash="dot"), annotation_text=vline[1],
                      annotation_position="top right")
    fig.update_layout(title=title, template="plotly_white", height=480, xaxis_title=x_title,
                      yaxis=dict(title="best-so-far − known minimum (unitless, log scale)", type="log",
                                 exponentformat="power"))
    return fig


def acquisition_comparison_figure(curves: dict[str, np.ndarray], n_init: int = 3,
                                  band: str = "minmax") -> go.Figure:
    """Gap to the Forrester minimum vs evaluations, median over seeds, per acquisition."""
    n_seeds = len(next(iter(curves.values())))
    return _best_so_far_band_figure(
        curves, FORRESTER_F_MIN, ACQUISITION_LABELS,
        f"Forrester: best-so-far gap by acquisition ({n_seeds} seeds; lower is better)",
        "evaluations of f (count, initial design included)", vline=(n_init + 0.5, "BO starts"), band=band)


def sampler_comparison_figure(curves: dict[str, np.ndarray], band: str = "minmax") -> go.Figure:
    """Gap to the Branin minimum vs trials, median over seeds, per Optuna sampler."""
    runs = {k: v for k, v in curves.items() if not k.endswith("s/trial")}
    n_seeds = len(next(iter(runs.values())))
    return _best_so_far_band_figure(
        runs, BRANIN_F_MIN, {}, f"Branin with Optuna: best-so-far gap by sampler ({n_seeds} seeds; lower is better)",
        "trial (count)", vline=(10.5, "model-based samplers start"), band=band)


def ard_relevance_figure(relevance: dict[str, np.ndarray], block_names: Sequence[str],
                         important_damage: float = 0.5) -> go.Figure:
    """Bars of the ARD GP's fitted length-scale per skip variable (log scale), coloured by
    whether the block really matters in the toy (true damage >= ``important_damage``)."""
    length_scale, damage = relevance["length_scale"], relevance["damage"]
    important = damage >= important_damage
    fig = go.Figure()
    for mask, name, color in ((important, f"blocks that matter (true damage ≥ {important_damage:g})", "#d62728"),
                              (~important, "the other blocks", "#7f7f7f")):
        fig.add_trace(go.Bar(x=np.asarray(block_names)[mask], y=length_scale[mask], name=name, marker_color=color,
                             customdata=damage[mask], hovertemplate="%{x}: ℓ = %{y:.3g}, damage %{customdata:.2f}"))
    fig.update_layout(title="ARD: one length-scale per skip variable; the short ones mark the blocks that matter",
                      template="plotly_white", height=430, barmode="relative",
                      xaxis=dict(title="skip variable z_b (block of layer l)", categoryorder="array",
                                 categoryarray=list(block_names)),
                      yaxis=dict(title="fitted length-scale ℓ_b (unitless, log scale)", type="log",
                                 exponentformat="power"),
                      legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0))
    return fig


# -- widget glue -------------------------------------------------------------------------------
class BOStepper:
    """Step through a 1-D BO run: ◀ ▶ buttons and a slider over steps, a dropdown EI / LCB and
    sliders for xi and kappa. A step change only copies precomputed arrays into the
    FigureWidget; an acquisition or xi/kappa change re-runs the (cheap) BO, then refreshes.

    ``stepper.widget`` is the thing to display; ``update()`` refreshes the figure in place.
    """

    def __init__(self, n_iter: int = 15, n_init: int = 3, seed: int = 0, acquisition: str = "EI",
                 xi: float = 0.01, kappa: float = 2.0):
        import ipywidgets as widgets

        self.n_iter, self.n_init, self.seed = n_iter, n_init, seed
        self.history = run_bo_1d(acquisition, n_iter, xi, kappa, seed, n_init)
        self.figure = as_widget(bo_step_figure(self.history, 0))
        self.last_update_ms = float("nan")
        self.prev_button = widgets.Button(description="◀", tooltip="previous step", layout=widgets.Layout(width="48px"))
        self.next_button = widgets.Button(description="▶", tooltip="next step", layout=widgets.Layout(width="48px"))
        self.step_slider = widgets.IntSlider(value=0, min=0, max=n_iter - 1, description="step",
                                             continuous_update=True, layout=widgets.Layout(width="420px"))
        self.acquisition_dropdown = widgets.Dropdown(
            options=[(ACQUISITION_LABELS[a], a) for a in ACQUISITIONS], value=acquisition, description="acquisition")
        self.xi_slider = widgets.FloatSlider(value=xi, min=0.0, max=3.0, step=0.01, description="ξ (EI)",
                                             continuous_update=False, readout_format=".2f")
        self.kappa_slider = widgets.FloatSlider(value=kappa, min=0.0, max=6.0, step=0.1, description="κ (LCB)",
                                                continuous_update=False, readout_format=".1f")
        self.status = widgets.HTML()
        self.prev_button.on_click(lambda _: self.step(-1))
        self.next_button.on_click(lambda _: self.step(+1))
        self.step_slider.observe(lambda _: self.update(), names="value")
        for control in (self.acquisition_dropdown, self.xi_slider, self.kappa_slider):
            control.observe(lambda _: self.rerun(), names="value")
        self._sync_enabled()
        self.widget = widgets.VBox([
            widgets.HBox([self.prev_button, self.step_slider, self.next_button]),
            widgets.HBox([self.acquisition_dropdown, self.xi_slider, self.kappa_slider]),
            self.figure, self.status])
        self._set_status()

    def step(self, delta: int) -> None:
        """Move the step slider by ``delta`` (clamped); its observer refreshes the figure."""
        self.step_slider.value = int(np.clip(self.step_slider.value + delta, 0, self.n_iter - 1))

    def rerun(self) -> None:
        """Re-run BO with the current acquisition, xi and kappa, then refresh the figure."""
        self._sync_enabled()
        self.history = run_bo_1d(self.acquisition_dropdown.value, self.n_iter, self.xi_slider.value,
                                 self.kappa_slider.value, self.seed, self.n_init)
        self.update()

    def update(self) -> None:
        """Copy step ``step_slider.value`` of the current history into the FigureWidget."""
        t0 = time.perf_counter()
        i = self.step_slider.value
        h = self.history
        traces = {index: {"x": x, "y": y} for index, (x, y) in step_trace_xy(h, i).items()}
        traces[6].update({"name": f"acquisition: {h.acquisition}", "line.color": COLORS[h.acquisition]})
        update_widget(self.figure, traces, layout={"yaxis2.title.text": _acquisition_axis_title(h.acquisition),
                                                  "title.text": _step_title(h, i)})
        self.last_update_ms = (time.perf_counter() - t0) * 1000
        self._set_status()

    def measure_update_ms(self) -> float:
        """Median ms of a slider move (observer + in-place refresh) over every step."""
        start, times = self.step_slider.value, []
        for i in [*range(self.n_iter), start]:
            t0 = time.perf_counter()
            if self.step_slider.value == i:
                self.update()
            else:
                self.step_slider.value = i
            times.append((time.perf_counter() - t0) * 1000)
        return float(np.median(times))

    def _sync_enabled(self) -> None:
        is_ei = self.acquisition_dropdown.value == "EI"
        self.xi_slider.disabled, self.kappa_slider.disabled = not is_ei, is_ei

    def _set_status(self) -> None:
        h = self.history
        self.status.value = (f"run: {h.n_iter} steps in {h.seconds * 1000:.0f} ms; best f = {h.best_y:.4f} "
                             f"at x = {h.best_x:.4f} (gap {h.gap:.4f}); last refresh "
                             f"{self.last_update_ms:.1f} ms")
