"""Batches drawn (notebook 13): tokens per second and per-token latency against batch size for the batched plain
loop, the self-draft always on and the load policy; the calibration's predicted speedup beside the measured one;
and the predicted speedup S(B, γ) of one γ against batch size (the γ explorer's figure).

Figures take plain rows: ``{"batch", "method", "tokens_per_s", "low", "high", "latency_ms", ...}`` (one per method
and batch size, :func:`labkit.lessons.batches.measured_rows`) and the rows of
:func:`labkit.measure.costs.batch_costs.policy_rows`. Batch size is on a log axis (1 to 32).
Notation (docs/notation.md): γ the tokens drafted per step, c and c_v the draft and verify costs in plain steps.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import FIGURE_WIDTH, PALETTE

__all__ = ["METHOD_COLORS", "throughput_figure", "prediction_figure", "gamma_data", "gamma_figure"]

#: one colour per batch method: off (the plain loop), always on, the load policy
METHOD_COLORS = {"plain loop": PALETTE["plain"], "always on": PALETTE["layer skip"], "load policy": PALETTE["speedup"]}
_LAYOUT = dict(margin=dict(l=60, r=20, t=60, b=50), template="plotly_white")
_BATCH_AXIS = dict(type="log", title_text="batch size B (rows decoded together)")


def _ticks(batches: Sequence[int]) -> dict:
    return dict(tickvals=list(batches), ticktext=[str(b) for b in batches])


def throughput_figure(rows: Sequence[dict]) -> go.Figure:
    """Left: the batch's tokens per second against B, one line per method, error bars the min-max of the
    repetitions; right: the per-token latency of one row (ms between its tokens) against B."""
    if not rows:
        raise ValueError("rows: give at least one measured row")
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("throughput: tokens per second of the batch",
                                        "latency: ms per token of one row"))
    batches = sorted({r["batch"] for r in rows})
    for method in dict.fromkeys(r["method"] for r in rows):
        own = sorted((r for r in rows if r["method"] == method), key=lambda r: r["batch"])
        color = METHOD_COLORS.get(method, PALETTE["auxiliary"])
        fig.add_trace(go.Scatter(
            x=[r["batch"] for r in own], y=[r["tokens_per_s"] for r in own], mode="lines+markers", name=method,
            legendgroup=method, line=dict(color=color),
            error_y=dict(type="data", symmetric=False, array=[r["high"] - r["tokens_per_s"] for r in own],
                         arrayminus=[r["tokens_per_s"] - r["low"] for r in own]),
            hovertemplate="B = %{x}: %{y:.0f} tokens/s<extra>" + method + "</extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(
            x=[r["batch"] for r in own], y=[r["latency_ms"] for r in own], mode="lines+markers", name=method,
            legendgroup=method, showlegend=False, line=dict(color=color),
            hovertemplate="B = %{x}: %{y:.1f} ms per token of a row<extra>" + method + "</extra>"), row=1, col=2)
    for col in (1, 2):
        fig.update_xaxes(**_BATCH_AXIS, **_ticks(batches), row=1, col=col)
    fig.update_yaxes(title_text="tokens per second", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="ms per token (one row)", rangemode="tozero", row=1, col=2)
    fig.update_layout(**_LAYOUT, height=420, legend=dict(orientation="h", y=-0.22),
                      title="Batched decoding: what the batch gets and what one row waits")
    return fig


def prediction_figure(measured: Sequence[dict], predicted: Sequence[dict]) -> go.Figure:
    """Speedup over the batched plain loop against B: measured always on and load policy (error bars min-max),
    and the calibration's best S(B, γ) (dashed); the line at 1 is where speculation stops paying."""
    fig = go.Figure()
    batches = sorted({r["batch"] for r in measured} | {r["batch"] for r in predicted})
    for method in ("always on", "load policy"):
        own = sorted((r for r in measured if r["method"] == method), key=lambda r: r["batch"])
        if not own:
            continue
        fig.add_trace(go.Scatter(
            x=[r["batch"] for r in own], y=[r["speedup"] for r in own], mode="lines+markers",
            name=f"{method}, measured", line=dict(color=METHOD_COLORS[method]),
            error_y=dict(type="data", symmetric=False, array=[r["speedup_high"] - r["speedup"] for r in own],
                         arrayminus=[r["speedup"] - r["speedup_low"] for r in own])))
    fig.add_trace(go.Scatter(x=[r["batch"] for r in predicted], y=[r["speedup"] for r in predicted],
                             mode="lines+markers", name="calibration's prediction, best γ",
                             line=dict(color=PALETTE["analytic"], dash="dash"),
                             text=[f"γ = {r['best_gamma']}" for r in predicted],
                             hovertemplate="B = %{x}: S = %{y:.2f} (%{text})<extra></extra>"))
    fig.add_hline(y=1.0, line=dict(color=PALETTE["auxiliary"], dash="dot"))
    fig.update_xaxes(**_BATCH_AXIS, **_ticks(batches))
    fig.update_yaxes(title_text="speedup over the batched plain loop", rangemode="tozero")
    fig.update_layout(**_LAYOUT, height=400, title="Predicted from c(B), c_v(B, γ) and α, beside the measurement")
    return fig


def gamma_data(predicted: Mapping[int, Sequence[float]], batches: Sequence[int], gamma: int,
               measured: Sequence[dict]) -> list[dict]:
    """Traces of the γ explorer: the predicted S(B, γ) at ``gamma`` (``predicted[γ]``: one S per batch size), the
    best γ's S at every B (the policy's prediction), and the measured always-on speedup."""
    if gamma not in predicted:
        raise ValueError(f"gamma must be one of {sorted(predicted)}, got {gamma!r}")
    best = [max(predicted[g][i] for g in predicted) for i in range(len(batches))]
    on = sorted((r for r in measured if r["method"] == "always on"), key=lambda r: r["batch"])
    return [{"x": list(batches), "y": list(predicted[gamma]), "name": f"predicted S(B, γ = {gamma})"},
            {"x": list(batches), "y": best, "name": "predicted, best γ at each B"},
            {"x": [r["batch"] for r in on], "y": [r["speedup"] for r in on], "name": "always on, measured"}]


def gamma_figure(traces: Sequence[dict]) -> go.Figure:
    """The γ explorer's figure: the three traces of :func:`gamma_data` and the break-even line at 1."""
    styles = (dict(color=PALETTE["current"]), dict(color=PALETTE["analytic"], dash="dash"),
              dict(color=METHOD_COLORS["always on"]))
    fig = go.Figure([go.Scatter(x=t["x"], y=t["y"], name=t["name"], mode="lines+markers", line=style)
                     for t, style in zip(traces, styles)])
    fig.add_hline(y=1.0, line=dict(color=PALETTE["auxiliary"], dash="dot"))
    fig.update_xaxes(**_BATCH_AXIS, **_ticks(traces[0]["x"]))
    fig.update_yaxes(title_text="speedup over the batched plain loop", range=[0, 2.5])
    fig.update_layout(**_LAYOUT, height=400, width=FIGURE_WIDTH, title=traces[0]["name"],
                      legend=dict(orientation="h", y=-0.25))
    return fig
