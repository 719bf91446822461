"""Figures of the skip-set search. Every builder returns a ``plotly.graph_objects.Figure`` (never shows it).

- :func:`optimization_history` and :func:`param_importances`: Optuna's own plotly figures, titled and
  with units;
- :func:`skip_mask_heatmap`: which blocks a skip set (or several, e.g. the best per skip-ratio
  bucket) removes, layers across, attention/MLP down;
- :func:`best_so_far_figure`: sampler comparison, median best-so-far with a band over seeds;
- :func:`rank_scatter`: modelled vs measured ms per token, with the Spearman correlation;
- :func:`speedup_dots_figure`: drafts' speedups over the plain loop, dots with min-max bars.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import optuna
import plotly.graph_objects as go

from ..core.skip import SkipSet
from ..measure.costs.analytic import UNIT
from .style import PALETTE

__all__ = ["optimization_history", "param_importances", "skip_mask_heatmap", "best_so_far_figure", "rank_scatter",
           "speedup_dots_figure"]

SAMPLER_LABELS = {"gp": "GP (GPSampler)", "tpe": "TPE", "random": "random search"}


def _feasible_value(trial) -> float:
    ev = trial.user_attrs.get("eval", {})
    return trial.value if ev.get("feasible", True) else float("nan")


def optimization_history(study, *, title: str | None = None, baseline_ms: float | None = None) -> go.Figure:
    """Each trial's ms per generated token and the best so far (penalised out-of-bucket trials left out)."""
    trials = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    penalised = any(not t.user_attrs.get("eval", {}).get("feasible", True) for t in trials)
    if not penalised:   # Optuna draws its own "Best Value" line only without a target function
        fig = optuna.visualization.plot_optimization_history(study, target_name=UNIT)
    else:
        fig = optuna.visualization.plot_optimization_history(study, target=_feasible_value, target_name=UNIT)
        best, xs, ys = math.inf, [], []
        for t in trials:
            v = _feasible_value(t)
            if not math.isnan(v):
                best = min(best, v)
            if math.isfinite(best):
                xs.append(t.number)
                ys.append(best)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name="Best Value (in the ratio bucket)",
                                 line=dict(shape="hv")))
    for trace in fig.data:
        trace.showlegend = True
    fig.update_layout(
        title=title or f"Skip-set search: ms per generated token by trial ({study.study_name})",
        xaxis_title="trial number", yaxis_title=f"{UNIT} (lower is better)", legend_title_text="",
    )
    if baseline_ms:
        fig.add_hline(y=baseline_ms, line_dash="dash", line_color="black",
                      annotation_text=f"plain decoding {baseline_ms:.2f} ms/token", annotation_position="top right")
    return fig


def param_importances(study, *, title: str | None = None) -> go.Figure:
    """fANOVA importance of each block's skip/keep switch for the ms per generated token."""
    fig = optuna.visualization.plot_param_importances(study, target_name=UNIT)
    fig.update_layout(
        title=title or f"Which blocks matter: importance for {UNIT} ({study.study_name})",
        xaxis_title="importance (fANOVA, share of the variance explained)",
        yaxis_title="block switch (attn_l / mlp_l, 1 = skipped)", showlegend=False,
        height=max(450, 22 * len(fig.data[0].y) + 150) if fig.data else 450,
    )
    return fig


def skip_mask_heatmap(skips: SkipSet | Mapping[str, SkipSet], n_layers: int, *, title: str | None = None) -> go.Figure:
    """Skipped (orange) vs kept (pale blue) blocks: layers across, attention and MLP rows per set."""
    items = {"": skips} if isinstance(skips, SkipSet) else dict(skips)
    if not items:
        raise ValueError("no skip set to draw")
    z, labels, hover = [], [], []
    for label, skip in items.items():
        mask = skip.to_mask(n_layers)
        for part, values in (("attention", mask[:n_layers]), ("MLP", mask[n_layers:])):
            name = f"{label} | {part}" if label else part
            labels.append(name)
            z.append([1 if v else 0 for v in values])
            hover.append([f"{name}, layer {l}: {'skipped' if v else 'kept'}" for l, v in enumerate(values)])
    scale = [[0.0, PALETTE["kept"]], [0.5, PALETTE["kept"]], [0.5, PALETTE["skipped"]], [1.0, PALETTE["skipped"]]]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(n_layers)), y=labels, zmin=0, zmax=1, colorscale=scale, xgap=2, ygap=2,
        text=hover, hoverinfo="text",
        colorbar=dict(title="block", tickvals=[0.25, 0.75], ticktext=["kept", "skipped"], thickness=18,
                      len=1.0 if len(labels) <= 4 else 0.5),
    ))
    if title is None:
        if isinstance(skips, SkipSet):
            title = f"Skip set: {skips.n_skipped} of {2 * n_layers} blocks skipped (ratio {skips.ratio(n_layers):.2f})"
        else:
            title = "Skip sets: blocks skipped (orange) and kept (pale blue)"
    fig.update_layout(title=title, xaxis_title="decoder layer", yaxis_title="block",
                      height=max(320, 34 * len(labels) + 160), yaxis_autorange="reversed")
    fig.update_xaxes(tickmode="linear", dtick=1)
    return fig


def _quantile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def best_so_far_figure(curves: Mapping[str, Sequence[Sequence[float]]], *, baseline_ms: float | None = None,
                       band: str = "minmax", title: str | None = None) -> go.Figure:
    """Median best-so-far ms/token over seeds per sampler, with a band (``minmax`` or ``iqr``) over seeds.

    Each median's last value is written at its end (with its speedup over ``baseline_ms`` when given): where the
    samplers finish against the plain loop is the point, so the y-axis spans trial 2 onwards (the first random
    trial, often far worse, is noted above the plot instead of stretching the axis)."""
    if band not in ("minmax", "iqr"):
        raise ValueError("band must be 'minmax' or 'iqr'")
    lo_q, hi_q = (0.0, 1.0) if band == "minmax" else (0.25, 0.75)
    fig = go.Figure()
    n_seeds, shown, first, longest = 0, [], [], 1
    for sampler, runs in curves.items():
        runs = [list(r) for r in runs]
        if not runs:
            continue
        n_seeds = max(n_seeds, len(runs))
        n = min(len(r) for r in runs)
        x = list(range(1, n + 1))
        longest = max(longest, n)
        med = [statistics.median(r[i] for r in runs) for i in range(n)]
        low = [_quantile([r[i] for r in runs], lo_q) for i in range(n)]
        high = [_quantile([r[i] for r in runs], hi_q) for i in range(n)]
        shown += low[1:] + high[1:] if n > 1 else low + high
        first.append(high[0])
        colour = PALETTE.get(sampler)
        label = SAMPLER_LABELS.get(sampler, sampler)
        fig.add_trace(go.Scatter(x=x + x[::-1], y=high + low[::-1], fill="toself", line=dict(width=0),
                                 fillcolor=colour or "rgba(0,0,0,0.1)", opacity=0.2, hoverinfo="skip",
                                 name=f"{label}: {'min-max' if band == 'minmax' else 'inter-quartile'} over seeds",
                                 legendgroup=sampler, showlegend=True))
        fig.add_trace(go.Scatter(x=x, y=med, mode="lines", line=dict(color=colour, width=2.5),
                                 name=f"{label}: median over {len(runs)} seeds", legendgroup=sampler))
        end = f"{med[-1]:.2f} ms/token" + (f" = {baseline_ms / med[-1]:.2f}x plain" if baseline_ms else "")
        fig.add_annotation(x=n, y=med[-1], text=end, showarrow=False, xanchor="left", xshift=6,
                           font=dict(color=colour or "black", size=12))
    if baseline_ms:
        shown.append(baseline_ms)
        fig.add_hline(y=baseline_ms, line_dash="dash", line_color="black")
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color="black", dash="dash"),
                                 name=f"plain decoding: {baseline_ms:.2f} ms/token", hoverinfo="skip"))
    layout = {"xaxis_range": [1, longest]}         # the end labels sit in the right margin, not on a longer axis
    if shown:
        lo, hi = min(shown), max(shown)
        pad = 0.08 * max(hi - lo, 1e-9)
        layout["yaxis_range"] = [lo - pad, hi + pad]
        if max(first, default=lo) > hi + pad:
            fig.add_annotation(x=1, y=1.0, yref="paper", text=f"trial 1: up to {max(first):.2f} (above the axis)",
                               showarrow=False, xanchor="left", yanchor="bottom", font=dict(size=11))
    fig.update_layout(title=title or f"Best skip set found so far, by sampler ({n_seeds} seeds)",
                      xaxis_title="trials run", yaxis_title="best ms per token so far (lower: better)",
                      legend=dict(orientation="h", y=-0.22, yanchor="top", x=0), margin=dict(r=190, b=150),
                      height=540, **layout)
    return fig


def rank_scatter(result: Mapping, *, title: str | None = None) -> go.Figure:
    """Modelled vs measured ms per token of each skip set (from :func:`labkit.search.rank_agreement`)."""
    rows = result["rows"]
    fig = go.Figure(go.Scatter(
        x=[r["modelled_ms"] for r in rows], y=[r["measured_ms"] for r in rows], mode="markers",
        marker=dict(size=10, color=[r["ratio"] for r in rows], colorscale="Viridis", showscale=True,
                    colorbar=dict(title="skip ratio")),
        text=[f"skip {r['skip']}<br>alpha {r['alpha']:.2f}" for r in rows], hoverinfo="text+x+y", name="skip set",
    ))
    fig.update_layout(
        title=title or (f"Modelled vs measured cost of {len(rows)} skip sets "
                        f"(Spearman rho {result['spearman_rho']:.2f})"),
        xaxis_title=f"modelled {UNIT}", yaxis_title=f"measured {UNIT}", showlegend=False,
    )
    return fig


def speedup_dots_figure(summary: Mapping[str, Mapping[str, float]], *, title: str | None = None) -> go.Figure:
    """Speedup over the plain loop per draft (``{label: {"speedup", "low", "high"}}``, e.g.
    :func:`labkit.lessons.draft_search.draft_summary`): one dot per draft at its median, the min-max range as error
    bars, the plain loop's 1.0 as a line. Dots, not bars: the axis starts near the smallest range so that
    differences stay visible, and a bar's length from a non-zero baseline would exaggerate them. Each draft's median
    is written in its axis label."""
    labels = list(summary)
    x = [float(summary[k]["speedup"]) for k in labels]
    low = [float(summary[k]["low"]) for k in labels]
    high = [float(summary[k]["high"]) for k in labels]
    fig = go.Figure(go.Scatter(
        y=labels, x=x, mode="markers", marker=dict(color=PALETTE["speedup"], size=12),
        error_x=dict(type="data", symmetric=False, array=[h - v for h, v in zip(high, x)],
                     arrayminus=[v - lo for v, lo in zip(x, low)], color="#333333", thickness=1.5, width=6),
        name="speedup", customdata=list(zip(low, high)),
        hovertemplate="%{y}: %{x:.2f}x (%{customdata[0]:.2f}–%{customdata[1]:.2f})<extra></extra>"))
    fig.add_vline(x=1.0, line_dash="dash", line_color="black", annotation_text="plain loop",
                  annotation_position="top")
    start = max(0.0, min(low + [1.0]) - 0.1)
    fig.update_layout(title=title or "Speedup over the plain loop",
                      xaxis_title="× the plain loop (dot: median; bar: min–max over repeats)",
                      xaxis_range=[start, max(high + [1.0]) * 1.05], showlegend=False,
                      height=max(260, 60 * len(labels) + 160), margin=dict(l=10),
                      yaxis=dict(autorange="reversed", tickmode="array", tickvals=labels,
                                 ticktext=[f"{k}: {v:.2f}x" for k, v in zip(labels, x)]))
    return fig
