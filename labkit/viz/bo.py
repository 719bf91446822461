"""Figures of the Bayesian-optimisation lesson (notebook 01): one BO step (GP mean, band, acquisition),
best-so-far curves over seeds, and the ARD length-scales of the toy skip-set problem.

The builders read the toy runs of :mod:`labkit.search.toy` by their fields (a history's grid, means, stds,
acquisition values and chosen points), so this module needs nothing but numbers.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .search import SAMPLER_LABELS
from .style import PALETTE, rgba

__all__ = ["ACQUISITION_LABELS", "step_trace_xy", "bo_step_figure", "acquisition_comparison_figure",
           "sampler_comparison_figure", "ard_relevance_figure", "acquisition_axis_title", "step_title"]

_COLORS = {"EI": PALETTE["EI"], "LCB": PALETTE["LCB"], "random": PALETTE["random"], "gp": PALETTE["gp"],
           "tpe": PALETTE["tpe"]}


ACQUISITION_LABELS = {"EI": "Expected Improvement (EI)", "LCB": "Lower Confidence Bound (LCB)",
                      "random": "random search"}


_TOP_Y_RANGE = (-14.0, 22.0)   # Forrester spans [-6.02, 15.83]; early bands are clipped


def _band_xy(x, lower, upper) -> tuple[np.ndarray, np.ndarray]:
    """A closed polygon (upper left-to-right, lower right-to-left) for a fill='toself' band."""
    x = np.asarray(x)
    return np.concatenate([x, x[::-1]]), np.concatenate([upper, np.asarray(lower)[::-1]])


def acquisition_axis_title(acquisition: str) -> str:
    return "EI(x) (unitless)" if acquisition == "EI" else "LCB(x) (unitless)"


def step_title(history, i: int) -> str:
    knob = f"ξ = {history.xi:g}" if history.acquisition == "EI" else f"κ = {history.kappa:g}"
    rule = "argmax EI" if history.acquisition == "EI" else "argmin LCB"
    return (f"BO on Forrester, step {i + 1} of {history.n_iter}: GP on {history.n_init + i} points, "
            f"{history.acquisition} ({knob}) → next x = {history.next_x[i]:.3f} ({rule})")


def step_trace_xy(history, i: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
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


def bo_step_figure(history, i: int) -> go.Figure:
    """Step i of a 1-D run: top, the true f, the GP mean with its mu ± 2 sigma band, the points
    seen so far and the next x; bottom, the acquisition with its chosen point."""
    if not 0 <= i < history.n_iter:
        raise IndexError(f"step {i} outside 0..{history.n_iter - 1}")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.06)
    color = PALETTE[history.acquisition]
    xy = step_trace_xy(history, i)
    traces = [
        (go.Scatter(x=history.grid, y=history.f_grid, name="true f(x) (unknown to BO)",
                    line=dict(color="black", dash="dot", width=1.5)), 1),
        (go.Scatter(x=[history.x_min], y=[history.f_min], name="known minimum", mode="markers",
                    marker=dict(symbol="x", size=11, color="#2ca02c")), 1),
        (go.Scatter(x=xy[2][0], y=xy[2][1], name="GP μ ± 2σ", fill="toself", fillcolor=rgba("#1f77b4", 0.18),
                    line=dict(width=0), hoverinfo="skip"), 1),
        (go.Scatter(x=xy[3][0], y=xy[3][1], name="GP mean μ(x)", line=dict(color="#1f77b4", width=2.5)), 1),
        (go.Scatter(x=xy[4][0], y=xy[4][1], name="observed points", mode="markers",
                    marker=dict(color="black", size=9, line=dict(color="white", width=1))), 1),
        (go.Scatter(x=xy[5][0], y=xy[5][1], name="next x", mode="lines", legendgroup="next",
                    line=dict(color=PALETTE["next"], dash="dash", width=2)), 1),
        (go.Scatter(x=xy[6][0], y=xy[6][1], name=f"acquisition: {history.acquisition}",
                    line=dict(color=color, width=2)), 2),
        (go.Scatter(x=xy[7][0], y=xy[7][1], name="next x", mode="markers", legendgroup="next", showlegend=False,
                    marker=dict(symbol="star", size=16, color=PALETTE["next"], line=dict(color="black", width=1))), 2),
    ]
    for trace, row in traces:
        fig.add_trace(trace, row=row, col=1)
    fig.update_yaxes(title_text="f(x) (unitless)", range=list(_TOP_Y_RANGE), row=1, col=1)
    fig.update_yaxes(title_text=acquisition_axis_title(history.acquisition), exponentformat="power",
                     row=2, col=1)
    fig.update_xaxes(range=[-0.02, 1.02])
    fig.update_xaxes(title_text="x (unitless)", row=2, col=1)
    fig.update_layout(title=dict(text=step_title(history, i), font=dict(size=15)), height=600,
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
        color = _COLORS.get(name, PALETTE["speedup"])
        label = labels.get(name, name)
        band_name = "min–max" if band == "minmax" else "25–75%"
        bx, by = _band_xy(x, lo, hi)
        fig.add_trace(go.Scatter(x=bx, y=by, fill="toself", fillcolor=rgba(color, 0.10),
                                 line=dict(width=1, color=rgba(color, 0.45), dash="dot"),
                                 name=f"{label}: {band_name} of {gap.shape[0]} seeds", legendgroup=name,
                                 showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=x, y=np.median(gap, axis=0), name=f"{label}: median ({band_name} band)",
                                 legendgroup=name, mode="lines", line=dict(color=color, width=2.5)))
    if vline is not None:
        fig.add_vline(x=vline[0], line=dict(color="grey", dash="dot"), annotation_text=vline[1],
                      annotation_position="top right")
    fig.update_layout(title=title, template="plotly_white", height=480, xaxis_title=x_title,
                      legend=dict(orientation="h", y=-0.18, x=0),       # below the plot: the curves keep the width
                      yaxis=dict(title="best-so-far − known minimum (unitless, log scale)", type="log",
                                 exponentformat="power"))
    return fig


def acquisition_comparison_figure(curves: dict[str, np.ndarray], f_min: float, n_init: int = 3,
                                  band: str = "minmax") -> go.Figure:
    """Gap to the Forrester minimum vs evaluations, median over seeds, per acquisition."""
    n_seeds = len(next(iter(curves.values())))
    return _best_so_far_band_figure(
        curves, f_min, ACQUISITION_LABELS,
        f"Forrester: best-so-far gap by acquisition ({n_seeds} seeds; lower is better)",
        "evaluations of f (count, initial design included)", vline=(n_init + 0.5, "BO starts"), band=band)


def sampler_comparison_figure(curves: dict[str, np.ndarray], f_min: float, band: str = "minmax") -> go.Figure:
    """Gap to the Branin minimum vs trials, median over seeds, per Optuna sampler."""
    runs = {k: v for k, v in curves.items() if not k.endswith("s/trial")}
    n_seeds = len(next(iter(runs.values())))
    return _best_so_far_band_figure(
        runs, f_min, SAMPLER_LABELS,
        f"Branin with Optuna: best-so-far gap by sampler ({n_seeds} seeds; lower is better)",
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
