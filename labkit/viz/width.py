"""Notebook 12's figures: width drafts (contextual sparsity, pruning) beside depth drafts.

- :func:`sparsity_figure`: per layer, the fraction of an MLP's neurons that holds a given share of its output for
  one token (Deja Vu's observation, Liu et al. 2023, on the lab's model);
- :func:`recall_figure`: per layer, how many of the neurons that matter most the predictor's top k holds, beside
  the static ranking a pruned draft keeps;
- :func:`draft_data` / :func:`draft_figure`: at one kept fraction, each draft's agreement α, draft cost c (with the
  min–max of the per-round ratios) and the fraction of the parameters it reads (the kept-fraction explorer redraws
  it from :func:`draft_data`);
- :func:`mlp_cost_figure`: one MLP's time against the dense one (pruned, gathered, the predictor alone) beside the
  bytes each reads: the roofline's premise checked kernel by kernel;
- :func:`speed_figure`: reference speedups of every draft per prompt source, with their min–max.

Rows are plain dicts (:mod:`labkit.lessons.width` makes them); figures never show themselves.
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from .style import MODEL_COLORS, PALETTE

__all__ = ["sparsity_figure", "recall_figure", "draft_data", "draft_figure", "mlp_cost_figure", "speed_figure",
           "DRAFT_BARS"]

_LAYOUT = dict(margin=dict(l=60, r=20, t=60, b=50), template="plotly_white")
#: the explorer's bars per draft: (row key, legend name, colour)
DRAFT_BARS = (("alpha", "agreement α (teacher-forced)", PALETTE["acceptance"]),
              ("c", "draft cost c (this machine)", PALETTE["draft"]),
              ("params", "parameters read (÷ full model)", PALETTE["auxiliary"]))


def sparsity_figure(rows: Sequence[dict]) -> go.Figure:
    """Rows {layer, share, median, p10, p90}: the median over tokens (bars: the 10th–90th percentile) of the
    fraction of a layer's neurons that holds ``share`` of the MLP's summed contribution."""
    fig = go.Figure()
    for i, share in enumerate(sorted({r["share"] for r in rows})):
        mine = sorted((r for r in rows if r["share"] == share), key=lambda r: r["layer"])
        fig.add_trace(go.Bar(x=[r["layer"] for r in mine], y=[r["median"] for r in mine],
                             name=f"{share:.0%} of the output", marker_color=MODEL_COLORS[i % len(MODEL_COLORS)],
                             error_y=dict(type="data", symmetric=False, array=[r["p90"] - r["median"] for r in mine],
                                          arrayminus=[r["median"] - r["p10"] for r in mine])))
    fig.update_xaxes(title_text="layer", dtick=1)
    fig.update_yaxes(title_text="fraction of the layer's neurons needed", range=[0, 1])
    fig.update_layout(title="How sparse each MLP is per token (median, 10th–90th percentile)", barmode="group",
                      height=400, **_LAYOUT)
    return fig


def recall_figure(rows: Sequence[dict]) -> go.Figure:
    """Rows of :func:`labkit.training.width.recall` (several kept fractions): the predictor's recall per layer
    (solid) and the static ranking's (dotted), one colour per kept fraction."""
    fig = go.Figure()
    for i, kept in enumerate(sorted({r["kept"] for r in rows})):
        mine = sorted((r for r in rows if r["kept"] == kept), key=lambda r: r["layer"])
        color = MODEL_COLORS[i % len(MODEL_COLORS)]
        for key, dash, what in (("predictor", "solid", "predictor (per token)"), ("static", "dot", "static ranking")):
            fig.add_trace(go.Scatter(x=[r["layer"] for r in mine], y=[r[key] for r in mine], mode="lines+markers",
                                     name=f"kept {kept:g}: {what}", line=dict(color=color, dash=dash)))
    fig.update_xaxes(title_text="layer", dtick=1)
    fig.update_yaxes(title_text="recall of the top-k neurons", range=[0, 1.05])
    fig.update_layout(title="How many of the neurons that matter the draft keeps", height=420, **_LAYOUT)
    return fig


def draft_data(rows: Sequence[dict], kept: float) -> list[dict]:
    """The explorer's traces at ``kept``: one bar trace per :data:`DRAFT_BARS` entry ({x, y, name, error}), the
    drafts in row order; the depth draft's row (kept 1.0 of the neurons) is shown at every kept fraction."""
    mine = [r for r in rows if r["kept"] == kept or r["draft"] == "depth"]
    if not any(r["kept"] == kept for r in mine):
        raise ValueError(f"kept must be one of {sorted({r['kept'] for r in rows if r['draft'] != 'depth'})}, "
                         f"got {kept!r}")
    out = []
    for key, name, _ in DRAFT_BARS:
        error = ([r["c_max"] - r["c"] for r in mine], [r["c"] - r["c_min"] for r in mine]) if key == "c" else None
        out.append({"x": [r["draft"] for r in mine], "y": [r[key] for r in mine], "name": name, "error": error})
    return out


def draft_figure(rows: Sequence[dict], kept: float, errors: bool = True) -> go.Figure:
    """Each draft's agreement α, draft cost c and parameters read at ``kept`` (:func:`draft_data`); ``errors``: c's
    range over the timing rounds as error bars (a widget redrawing x and y only leaves them out)."""
    fig = go.Figure()
    for trace, (_, _, color) in zip(draft_data(rows, kept), DRAFT_BARS):
        error = (dict(type="data", symmetric=False, array=trace["error"][0], arrayminus=trace["error"][1])
                 if trace["error"] and errors else None)
        fig.add_trace(go.Bar(x=trace["x"], y=trace["y"], name=trace["name"], marker_color=color, error_y=error))
    fig.update_yaxes(title_text="α, c or share of parameters", range=[0, 1.6])
    fig.update_layout(title=f"Width drafts keeping {kept:g} of the MLP neurons, beside the depth draft",
                      barmode="group", height=420, legend=dict(orientation="h", y=-0.15), **_LAYOUT)
    return fig


def mlp_cost_figure(rows: Sequence[dict]) -> go.Figure:
    """Rows {kernel, kept, ratio, ratio_min, ratio_max, bytes}: each kernel's time over the dense MLP's (bars, with
    the per-round range) and the bytes it reads over the dense MLP's (diamonds), per kept fraction."""
    fig = go.Figure()
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    for i, kernel in enumerate(kernels):
        mine = [r for r in rows if r["kernel"] == kernel]
        color = MODEL_COLORS[i % len(MODEL_COLORS)]
        x = [f"kept {r['kept']:g}" for r in mine]
        fig.add_trace(go.Bar(x=x, y=[r["ratio"] for r in mine], name=f"{kernel}: time", marker_color=color,
                             error_y=dict(type="data", symmetric=False,
                                          array=[r["ratio_max"] - r["ratio"] for r in mine],
                                          arrayminus=[r["ratio"] - r["ratio_min"] for r in mine])))
        fig.add_trace(go.Scatter(x=x, y=[r["bytes"] for r in mine], mode="markers", name=f"{kernel}: bytes",
                                 marker=dict(symbol="diamond", size=11, color=color, line=dict(width=1))))
    fig.add_hline(y=1.0, line=dict(color=PALETTE["analytic"], dash="dot"))
    fig.update_yaxes(title_text="÷ the dense MLP (time, or bytes read)", rangemode="tozero")
    fig.update_layout(title="One MLP, one token: time and bytes against the dense MLP (this machine)",
                      barmode="group", scattermode="group", height=440, **_LAYOUT)
    return fig


def speed_figure(rows: Sequence[dict]) -> go.Figure:
    """Rows {method, source, speedup, low, high} (a reference group): speedup over the plain loop per draft, one
    colour per prompt source, with the min–max over repetitions, and the line speedup = 1."""
    fig = go.Figure()
    for i, source in enumerate(dict.fromkeys(r["source"] for r in rows)):
        mine = [r for r in rows if r["source"] == source]
        fig.add_trace(go.Bar(x=[r["method"] for r in mine], y=[r["speedup"] for r in mine], name=source,
                             marker_color=PALETTE.get(f"source_{source}", MODEL_COLORS[i % len(MODEL_COLORS)]),
                             error_y=dict(type="data", symmetric=False,
                                          array=[r["high"] - r["speedup"] for r in mine],
                                          arrayminus=[r["speedup"] - r["low"] for r in mine])))
    fig.add_hline(y=1.0, line=dict(color=PALETTE["analytic"], dash="dot"))
    fig.update_yaxes(title_text="speedup over the plain loop", rangemode="tozero")
    fig.update_layout(title="Depth and width drafts in the reference run (fp32)", barmode="group", height=420,
                      **_LAYOUT)
    return fig
