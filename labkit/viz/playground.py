"""The playground's figures: accepted / drafted, tokens per step and speedup against the skip ratio and the
threshold (notation: docs/notation.md).

Each builder reads a :class:`~labkit.measure.grid.run.PlaygroundGrid` (measured beforehand) and returns a figure;
:func:`panel_xy` gives the x/y of every trace for a setting and :func:`panel_errors` the speedup's min-max over
repetitions (error bars), so a widget can update the figure in place. Every curve is a slice of one draft
weights' cells (fp32 or int8: the setting's); each panel's y range is fitted to what it draws (:func:`axis_ranges`),
and a speedup axis always holds 1.0, the plain loop.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..measure.grid.results import PlaygroundGrid, Setting
from .style import MODEL_COLORS, PALETTE

__all__ = ["PANELS", "panel_xy", "panel_errors", "playground_figure", "heatmap_figure", "model_comparison_figure",
           "figure_title", "axis_ranges", "fmt"]


def fmt(v, spec=".2f") -> str:
    """A number for a label, or 'n/a' for None / NaN."""
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _nan(v) -> float:
    return float("nan") if v is None else float(v)


# (metric, legend name of the measured line, subplot title, y-axis title, colour)
PANELS = (("acceptance_rate", "accepted / drafted, measured (grid)", "accepted / drafted and draft cost c",
           "accepted / drafted; c (× plain step)", PALETTE["acceptance"]),
          ("tokens_per_step", "tokens per step A + 1, measured (grid)", "tokens per step",
           "tokens per step (tokens)", PALETTE["tokens_per_step"]),
          ("speedup", "speedup, measured (grid; bars: min–max of the repetitions)", "speedup",
           "speedup (× vs plain loop)", PALETTE["speedup"]))


AUX = {"acceptance_rate": ("c", "draft cost c (one drafted token / plain step)"),
       "tokens_per_step": ("drafted_per_step", "drafted per step d"),
       "speedup": ("analytic_speedup", "analytic limit (A + 1) / (d·c + c_v)")}


# trace order in every panel: measured line, auxiliary line, current setting, live runs
_PER_PANEL = 4


def trace_index(row: int, col: int, kind: int) -> int:
    """Position in ``fig.data`` of panel (row, col)'s trace ``kind`` (0 curve, 1 auxiliary, 2 star, 3 live points)."""
    return ((row * 3) + col) * _PER_PANEL + kind


def _live_matches(point: dict, setting: Setting, free: str) -> bool:
    """Is the live run ``point`` on ``setting``'s slice along ``free`` (same other knobs, same draft weights)?"""
    keys = [k for k in ("ratio", "threshold", "max_draft", "policy") if k != free]
    return (all(point[k] == getattr(setting, k) for k in keys)
            and point.get("draft_weights", "fp32") == setting.draft_weights)


def panel_xy(grid: PlaygroundGrid, setting: Setting, live: Sequence[dict] = ()) -> dict[int, tuple]:
    """x/y of every trace of :func:`playground_figure` for ``setting`` (by trace index)."""
    out = {}
    for row, (free, xs, get) in enumerate((("ratio", np.array(grid.ratios), grid.vs_ratio),
                                           ("threshold", np.array(grid.thresholds), grid.vs_threshold))):
        x_now = getattr(setting, free)
        k_now = int(np.argmin(np.abs(xs - x_now)))
        pts = [p for p in live if _live_matches(p, setting, free)]
        for col, (metric, *_) in enumerate(PANELS):
            y = get(metric, setting)
            aux = get(AUX[metric][0], setting)
            out[trace_index(row, col, 0)] = (xs, y)
            out[trace_index(row, col, 1)] = (xs, aux)
            out[trace_index(row, col, 2)] = (np.array([x_now]), np.array([y[k_now]]))
            out[trace_index(row, col, 3)] = (np.array([p[free] for p in pts], dtype=float),
                                              np.array([_nan(p.get(metric)) for p in pts], dtype=float))
    return out


def _error_bars(grid: PlaygroundGrid, setting: Setting, free: str) -> tuple[list, list]:
    """(plus, minus) of the measured speedup along ``free`` ('ratio' or 'threshold'): min-max over repetitions."""
    get = grid.vs_ratio if free == "ratio" else grid.vs_threshold
    y, lo, hi = (get(m, setting) for m in ("speedup", "speedup_min", "speedup_max"))
    return np.nan_to_num(hi - y).tolist(), np.nan_to_num(y - lo).tolist()


def panel_errors(grid: PlaygroundGrid, setting: Setting) -> dict[int, tuple[list, list]]:
    """Error bars (plus, minus) of the measured speedup traces of :func:`playground_figure`, by trace index."""
    return {trace_index(row, 2, 0): _error_bars(grid, setting, free)
            for row, free in enumerate(("ratio", "threshold"))}


def figure_title(grid: PlaygroundGrid, setting: Setting) -> str:
    cell = grid.cell(setting)
    return (f"{grid.name}: {setting.describe()}<br>→ speedup {fmt(cell['speedup'])}× measured "
            f"({fmt(cell.get('speedup_min'))}–{fmt(cell.get('speedup_max'))}), {fmt(cell.get('analytic_speedup'))}× "
            f"analytic limit")


def _span(values, pad: float, floor: float | None = None, include: Sequence[float] = ()) -> list[float]:
    """[lo, hi] around the finite ``values`` (and ``include``), padded by ``pad`` of the span, not below ``floor``."""
    v = np.asarray([x for x in (*np.ravel(values), *include) if x is not None and np.isfinite(x)], float)
    if not len(v):
        return [0.0, 1.0]
    lo, hi = float(v.min()), float(v.max())
    margin = pad * max(hi - lo, 0.1 * max(abs(hi), 1e-9))
    lo, hi = lo - margin, hi + margin
    return [max(lo, floor) if floor is not None else lo, hi]


def axis_ranges(grid: PlaygroundGrid, setting: Setting, live: Sequence[dict] = ()) -> dict[str, list[float]]:
    """y range of each panel of :func:`playground_figure` for ``setting``, as layout paths ('yaxis2.range': [lo,
    hi]): fitted to what the panel draws (curves, error bars, live points), so an effect of 1.2 to 2.5 tokens per
    step is not drawn on a 0-11 axis. accepted / drafted keeps 0-1; a speedup axis always holds 1.0, the plain loop,
    so every speedup reads against it."""
    xy, errors = panel_xy(grid, setting, live), panel_errors(grid, setting)
    out = {}
    for row in range(2):
        for col, (metric, *_) in enumerate(PANELS):
            drawn = [xy[trace_index(row, col, kind)][1] for kind in (0, 1, 3)]
            if trace_index(row, col, 0) in errors:
                y = np.asarray(xy[trace_index(row, col, 0)][1], float)
                plus, minus = errors[trace_index(row, col, 0)]
                drawn += [y + np.asarray(plus), y - np.asarray(minus)]
            values = np.concatenate([np.asarray(d, float).ravel() for d in drawn])
            if metric == "acceptance_rate":
                span = [0.0, max(1.05, _span(values, 0.05)[1])]
            elif metric == "speedup":
                span = _span(values, 0.08, floor=0.0, include=(1.0,))
            else:
                span = _span(values, 0.08, floor=0.0)
            axis = row * 3 + col + 1
            out[f"yaxis{'' if axis == 1 else axis}.range"] = span
    return out


def playground_figure(grid: PlaygroundGrid, setting: Setting | None = None, live: Sequence[dict] = ()) -> go.Figure:
    """accepted / drafted, tokens per step and speedup against the skip ratio (top) and the threshold
    (bottom), the other knobs fixed at ``setting``, with the current setting starred, the speedup's min-max
    over repetitions as error bars, the analytic limit dashed and live runs as diamonds."""
    setting = setting or grid.nearest()
    xy, errors = panel_xy(grid, setting, live), panel_errors(grid, setting)
    fig = make_subplots(rows=2, cols=3, horizontal_spacing=0.07, vertical_spacing=0.17,
                        subplot_titles=[title for _, _, title, _, _ in PANELS] * 2)   # x titles name the knob
    fig.update_annotations(font_size=13)
    for row in range(2):
        for col, (metric, name, _, _, color) in enumerate(PANELS):
            first = row == 0
            traces = [
                go.Scatter(name=name, mode="lines+markers", legendgroup=metric, showlegend=first,
                           line=dict(color=color, width=2.5), marker=dict(size=7)),
                go.Scatter(name=AUX[metric][1], mode="lines+markers", legendgroup=f"aux-{metric}", showlegend=first,
                           line=dict(color=PALETTE["analytic"] if metric == "speedup" else PALETTE["auxiliary"],
                                     dash="dash" if metric == "speedup" else "dot", width=1.8),
                           marker=dict(size=5)),
                go.Scatter(name="current setting", mode="markers", legendgroup="current",
                           showlegend=first and col == 0,
                           marker=dict(symbol="star", size=17, color=PALETTE["current"],
                                       line=dict(color="black", width=1))),
                go.Scatter(name="live run on this machine", mode="markers", legendgroup="live",
                           showlegend=first and col == 0,
                           marker=dict(symbol="diamond", size=12, color=PALETTE["live"],
                                       line=dict(color="black", width=1))),
            ]
            for kind, trace in enumerate(traces):
                x, y = xy[trace_index(row, col, kind)]
                trace.x, trace.y = np.asarray(x, float).tolist(), np.asarray(y, float).tolist()   # lists: widget-safe
                if trace_index(row, col, kind) in errors:
                    plus, minus = errors[trace_index(row, col, kind)]
                    trace.error_y = dict(type="data", array=plus, arrayminus=minus, visible=True, thickness=1.5,
                                         width=4, color=color)
                fig.add_trace(trace, row=row + 1, col=col + 1)
            if metric == "speedup":       # labelled in the legend: a label on the plot sat on the curves near 1x
                fig.add_hline(y=1.0, line=dict(color="black", width=1, dash="dot"), row=row + 1, col=col + 1)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="plain decoding (1×)", hoverinfo="skip",
                             line=dict(color="black", width=1, dash="dot")))     # after every panel's traces
    ranges = axis_ranges(grid, setting, live)
    for row in range(2):
        for col, (_, _, _, y_title, _) in enumerate(PANELS):
            axis = row * 3 + col + 1
            fig.update_yaxes(title_text=y_title, range=ranges[f"yaxis{'' if axis == 1 else axis}.range"],
                             row=row + 1, col=col + 1, title_font_size=11)
            fig.update_xaxes(title_text=("skip ratio (fraction of the 2L blocks skipped)" if row == 0 else
                                         "draft-exit threshold (adaptive: initial value; unitless)"),
                             row=row + 1, col=col + 1, title_font_size=11)
    fig.update_xaxes(range=[min(grid.ratios) - 0.04, max(grid.ratios) + 0.04], row=1)
    fig.update_xaxes(range=[min(grid.thresholds) - 0.05, max(grid.thresholds) + 0.05], row=2)
    fig.update_layout(title=dict(text=figure_title(grid, setting), font=dict(size=14)), template="plotly_white",
                      height=740, margin=dict(t=100, b=120, l=60, r=20),
                      legend=dict(orientation="h", y=-0.13, x=0, font=dict(size=11)))
    return fig


def _slice(grid: PlaygroundGrid, s: Setting, metric: str) -> np.ndarray:
    return np.stack([grid.vs_ratio(metric, replace(s, threshold=t)) for t in grid.thresholds])   # (T, R)


def heatmap_figure(grid: PlaygroundGrid, policy: str | None = None, max_draft: int | None = None,
                   draft_weights: str | None = None) -> go.Figure:
    """Measured speedup over skip ratio × threshold for one policy, max draft and draft weights (default fp32):
    the slice's best cell boxed, the cells whose min-max range over repetitions overlaps the best's ringed (the
    noise cannot rank them)."""
    s = grid.nearest(max_draft=max_draft, policy=policy, draft_weights=draft_weights)
    z, lo, hi = (_slice(grid, s, m) for m in ("speedup", "speedup_min", "speedup_max"))
    text = [[fmt(v) for v in row] for row in z]
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"{r:.3f}" for r in grid.ratios], y=[f"{t:g}" for t in grid.thresholds], text=text,
        customdata=np.dstack([lo, hi]), texttemplate="%{text}", colorscale="RdBu", zmid=1.0,
        colorbar=dict(title="speedup (×)"),
        hovertemplate="skip ratio %{x}, threshold %{y}: %{z:.2f}× (min–max %{customdata[0]:.2f}–"
                      "%{customdata[1]:.2f})<extra></extra>"))
    ti, ri = np.unravel_index(int(np.nanargmax(z)), z.shape)
    near = [(t, r) for t in range(z.shape[0]) for r in range(z.shape[1])
            if (t, r) != (ti, ri) and hi[t, r] >= lo[ti, ri] and lo[t, r] <= hi[ti, ri]]
    fig.add_trace(go.Scatter(x=[f"{grid.ratios[r]:.3f}" for _, r in near],
                             y=[f"{grid.thresholds[t]:g}" for t, _ in near], mode="markers",
                             name="within the noise of the best",
                             marker=dict(symbol="circle-open", size=30, color=PALETTE["noise"], line=dict(width=2.5))))
    fig.add_trace(go.Scatter(x=[f"{grid.ratios[ri]:.3f}"], y=[f"{grid.thresholds[ti]:g}"], mode="markers",
                             name="best on this slice (median of the repetitions)",
                             marker=dict(symbol="square-open", size=38, color="black", line=dict(width=3))))
    fig.update_layout(title=f"{grid.name}: measured speedup, {s.policy} policy, max draft {s.max_draft}, "
                            f"{s.draft_weights} draft weights<br><sup>blue > 1 > red; box: best, rings: within its "
                            f"noise</sup>",
                      template="plotly_white",
                      height=430,
                      xaxis_title="skip ratio (fraction of the 2L blocks skipped)",
                      yaxis_title="draft-exit threshold (unitless)", showlegend=False)
    return fig


def model_comparison_figure(grids: dict[str, PlaygroundGrid], setting: Setting | None = None) -> go.Figure:
    """accepted / drafted and speedup (min-max bars) vs skip ratio for several models on the same policy slice
    and draft weights (each model snapped to the nearest setting its grid has)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.1,
                        subplot_titles=("accepted / drafted vs skip ratio", "speedup vs skip ratio"))
    first = next(iter(grids.values()))
    s0 = setting or first.nearest()
    for i, (name, g) in enumerate(grids.items()):
        s = g.nearest(threshold=s0.threshold, max_draft=s0.max_draft, policy=s0.policy,
                      draft_weights=s0.draft_weights)
        for col, metric in enumerate(("acceptance_rate", "speedup")):
            bars = None
            if metric == "speedup":
                plus, minus = _error_bars(g, s, "ratio")
                bars = dict(type="data", array=plus, arrayminus=minus, thickness=1.5, width=4)
            fig.add_trace(go.Scatter(x=g.ratios, y=g.vs_ratio(metric, s), name=f"{name}: measured",
                                     legendgroup=name, showlegend=col == 0, mode="lines+markers", error_y=bars,
                                     line=dict(color=MODEL_COLORS[i % len(MODEL_COLORS)], width=2.5)),
                          row=1, col=col + 1)
        fig.add_trace(go.Scatter(x=g.ratios, y=g.vs_ratio("analytic_speedup", s), name=f"{name}: analytic limit",
                                 legendgroup=name, mode="lines",
                                 line=dict(color=MODEL_COLORS[i % len(MODEL_COLORS)], dash="dash", width=1.5)),
                      row=1, col=2)
    fig.add_hline(y=1.0, line=dict(color="black", width=1, dash="dot"), row=1, col=2)
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="plain decoding (1×)", hoverinfo="skip",
                             line=dict(color="black", width=1, dash="dot")), row=1, col=2)   # the line's legend entry
    fig.update_yaxes(title_text="accepted / drafted", range=[0, 1.05], row=1, col=1)
    speedups = [v for g in grids.values() for m in ("speedup_min", "speedup_max", "analytic_speedup")
                for v in g.vs_ratio(m, g.nearest(threshold=s0.threshold, max_draft=s0.max_draft, policy=s0.policy,
                                                 draft_weights=s0.draft_weights))]
    fig.update_yaxes(title_text="speedup (× vs plain loop)", range=_span(speedups, 0.08, floor=0.0, include=(1.0,)),
                     row=1, col=2)
    fig.update_xaxes(title_text="skip ratio (fraction of the 2L blocks skipped)")
    fig.update_layout(title=f"{' vs '.join(grids)}: same decoding settings, different training<br>"
                            f"<sup>{s0.policy} policy, threshold {s0.threshold:g}, max draft {s0.max_draft}, "
                            f"{s0.draft_weights} draft weights</sup>",
                      template="plotly_white", height=440, legend=dict(orientation="h", y=-0.2, x=0))
    return fig
