"""Regimes drawn: the roofline with the measured blocks on it, c against the fraction of blocks kept (against the
diagonal c = kept), c_v against the tokens a verify reads, the analytic limit against α and γ, and a calibration's
prediction beside its measurement, and one decoding step taken apart (``anatomy_figure``).

Rows are those of :mod:`labkit.measure.costs.roofline` and :mod:`labkit.measure.costs.calibration`; a figure that
compares models or precisions takes ``{label: rows}`` and gives each label one colour, in order.
Notation (docs/notation.md): c the cost of one drafted token and c_v of one verify forward, in plain decoding
steps; α the per-token acceptance probability; γ the tokens drafted per step.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from ..measure.costs.analytic import best_limit
from .style import MODEL_COLORS, PALETTE

__all__ = ["roofline_figure", "draft_cost_figure", "verify_cost_figure", "limit_by_alpha_figure", "limit_gamma_data",
           "limit_gamma_figure", "calibration_figure", "anatomy_figure", "color_of", "IDEAL"]

#: The label of the memory-bound ideal: c = the fraction of blocks kept, c_v = 1 (a GPU decoding a large model).
IDEAL = "memory-bound ideal (c = kept, c_v = 1)"
_LAYOUT = dict(margin=dict(l=60, r=20, t=60, b=50), template="plotly_white")


def color_of(labels: Sequence[str], label: str) -> str:
    """The colour of ``label`` among ``labels`` (one per label, in order; the ideal in the analytic colour)."""
    if label == IDEAL:
        return PALETTE["analytic"]
    return MODEL_COLORS[list(labels).index(label) % len(MODEL_COLORS)]


def _span(values: Sequence[float], pad: float = 3.0) -> tuple[float, float]:
    return min(values) / pad, max(values) * pad


def roofline_figure(points: Sequence[dict], ceilings: Mapping[str, object]) -> go.Figure:
    """Achieved GFLOP/s against arithmetic intensity (FLOP/byte), both axes logarithmic: the roofline
    min(peak, bandwidth × intensity) of each ceiling (``{label: Ceiling}``; solid the first, dashed the others),
    the first ceiling's cache roof (dotted: what a working set that fits the largest cache can stream at), and every
    measured block (``points``: rows of :func:`labkit.measure.costs.roofline.roofline_points`), one colour per
    ``regime``, circles for attention and squares for MLP blocks (labelled with their token count T). One legend
    entry per regime (the shapes are named in the title) and each regime's T labels on their own side of the
    marker, so two regimes' points at one spot keep readable labels."""
    fig = go.Figure()
    xs = [p["intensity"] for p in points]
    lo, hi = _span(xs + [c.ridge for c in ceilings.values()])
    grid = [lo * (hi / lo) ** (i / 60) for i in range(61)]
    for k, (label, ceiling) in enumerate(ceilings.items()):
        fig.add_trace(go.Scatter(x=grid, y=[ceiling.attainable_gflops(x) for x in grid], mode="lines",
                                 name=f"roofline {label}: {ceiling.bandwidth_gbs:.0f} GB/s, {ceiling.gflops:.0f} "
                                      f"GFLOP/s", line=dict(color=PALETTE["analytic"], dash="dash" if k else "solid",
                                                           width=1.5)))
    first_label, first = next(iter(ceilings.items()))
    fig.add_trace(go.Scatter(x=grid, y=[first.attainable_gflops(x, first.cache_gbs) for x in grid], mode="lines",
                             name=f"cache roof {first_label}: {first.cache_gbs:.0f} GB/s (a working set that fits "
                                  f"the {first.cache_bytes / 2 ** 20:.0f} MB cache)",
                             line=dict(color=PALETTE["auxiliary"], dash="dot", width=1.5)))
    regimes = list(dict.fromkeys(p["regime"] for p in points))
    sides = ("top center", "bottom center", "middle right", "middle left")
    for i, regime in enumerate(regimes):
        for block, symbol in (("attention", "circle"), ("mlp", "square")):
            mine = [p for p in points if p["regime"] == regime and p["block"] == block]
            if not mine:
                continue
            fig.add_trace(go.Scatter(
                x=[p["intensity"] for p in mine], y=[p["gflop_per_s"] for p in mine],
                mode="markers+text" if block == "mlp" else "markers",
                text=[f"T={p['tokens']}" for p in mine], textposition=sides[i % len(sides)], textfont=dict(size=9),
                marker=dict(symbol=symbol, size=9, color=color_of(regimes, regime)), name=regime,
                legendgroup=regime, showlegend=block == "mlp" or not any(
                    p["regime"] == regime and p["block"] == "mlp" for p in points),
                customdata=[[p["ms"], p["gb_per_s"], p["bytes"] / 2 ** 20] for p in mine],
                hovertemplate="%{text}<br>%{x:.2f} FLOP/byte, %{y:.2f} GFLOP/s<br>%{customdata[0]:.3f} ms, "
                              "%{customdata[1]:.1f} GB/s, %{customdata[2]:.1f} MB<extra></extra>"))
    fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOP per byte moved)")
    fig.update_yaxes(type="log", title_text="achieved GFLOP/s")
    fig.update_layout(title="One block on this machine's roofline (circles: attention, squares: MLP; T: tokens in "
                            "the forward)", height=600,
                      legend=dict(font=dict(size=10), orientation="h", yanchor="top", y=-0.15, x=0),
                      margin=dict(l=60, r=20, t=60, b=50), template="plotly_white")
    return fig


def _error(rows, key):
    return dict(type="data", symmetric=False, array=[r[f"{key}_max"] - r[key] for r in rows],
                arrayminus=[r[key] - r[f"{key}_min"] for r in rows])


def draft_cost_figure(curves: Mapping[str, Sequence[dict]], band: float = 0.1) -> go.Figure:
    """c against the fraction of blocks kept (rows of :func:`labkit.measure.costs.roofline.draft_cost_curve` per
    label; the uniform layer skips only), with the min–max of the per-round ratios, the diagonal c = kept (time in
    proportion to the blocks kept) and a band of ± ``band`` around it."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[0, 1, 1, 0], y=[-band, 1 - band, 1 + band, band], fill="toself", mode="lines",
                             line=dict(width=0), fillcolor="rgba(0,0,0,0.07)", name=f"c = kept ± {band}",
                             hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name="c = kept (time ∝ blocks kept)",
                             line=dict(color=PALETTE["analytic"], dash="dot")))
    labels = list(curves)
    for i, (label, rows) in enumerate(curves.items()):
        rows = sorted((r for r in rows if r["label"].startswith("kept")), key=lambda r: r["kept"])
        shift = 0.012 * (i - (len(labels) - 1) / 2)              # side by side, so overlapping error bars stay apart
        fig.add_trace(go.Scatter(x=[r["kept"] + shift for r in rows], y=[r["c"] for r in rows], mode="lines+markers",
                                 customdata=[r["kept"] for r in rows],
                                 hovertemplate="kept %{customdata:.2f}: c = %{y:.2f}<extra>" + label + "</extra>",
                                 name=label, line=dict(color=color_of(labels, label)), error_y=_error(rows, "c")))
    fig.update_xaxes(title_text="fraction of blocks kept (whole layers skipped, spread evenly)", range=[0, 1.05])
    fig.update_yaxes(title_text="draft cost c (one drafted token ÷ plain step)", range=[0, 1.3])
    fig.update_layout(title="Draft cost against the blocks kept", height=420, **_LAYOUT)
    return fig


def verify_cost_figure(curves: Mapping[str, Sequence[dict]]) -> go.Figure:
    """c_v against the tokens one verify forward reads (log axis; rows of
    :func:`labkit.measure.costs.roofline.verify_cost_curve` per label), with the min–max of the per-round ratios and
    the line c_v = 1 (a verify that costs one plain step)."""
    fig = go.Figure()
    labels = list(curves)
    ticks = sorted({r["tokens"] for rows in curves.values() for r in rows})
    for label, rows in curves.items():
        rows = sorted(rows, key=lambda r: r["tokens"])
        fig.add_trace(go.Scatter(x=[r["tokens"] for r in rows], y=[r["c_v"] for r in rows], mode="lines+markers",
                                 name=label, line=dict(color=color_of(labels, label)), error_y=_error(rows, "c_v")))
    fig.add_trace(go.Scatter(x=[ticks[0], ticks[-1]], y=[1.0, 1.0], mode="lines", name="c_v = 1 (one plain step)",
                             line=dict(color=PALETTE["auxiliary"], dash="dot"), hoverinfo="skip"))
    fig.update_xaxes(type="log", tickvals=ticks, title_text="tokens in one verify forward (the pending token + drafts)")
    fig.update_yaxes(type="log", title_text="verify cost c_v (÷ plain step)")
    fig.update_layout(title="Verify cost against the tokens verified", height=420, **_LAYOUT)
    return fig


def limit_by_alpha_figure(regimes: Mapping[str, tuple[Sequence[dict], Sequence[dict]]], kept: float,
                          alphas: Sequence[float]) -> go.Figure:
    """The analytic limit at the best γ against α, one line per regime (``{label: (draft rows, verify rows)}``) at
    the measured c of the uniform skip keeping ``kept`` of the blocks, and the memory-bound ideal (c = kept,
    c_v = 1); the line speedup = 1 (break-even)."""
    fig = go.Figure()
    labels = list(regimes) + [IDEAL]
    series = {label: (_c_at(draft, kept), verify) for label, (draft, verify) in regimes.items()}
    series[IDEAL] = (kept, [{"tokens": 1, "c_v": 1.0}, {"tokens": 64, "c_v": 1.0}])
    for label, (c, verify) in series.items():
        fig.add_trace(go.Scatter(x=list(alphas), y=[best_limit(a, c, verify)["limit"] for a in alphas],
                                 mode="lines", name=f"{label}: c = {c:.2f}", line=dict(
                                     color=color_of(labels, label), dash="dash" if label == IDEAL else "solid")))
    fig.add_hline(y=1.0, line=dict(color=PALETTE["auxiliary"], dash="dot"), annotation_text="break-even")
    fig.update_xaxes(title_text="α (per-token acceptance probability)")
    fig.update_yaxes(title_text="analytic limit E(α, γ) ÷ (γ·c + c_v), best γ")
    fig.update_layout(title=f"What the costs allow, with {kept:.0%} of the blocks kept", height=420, **_LAYOUT)
    return fig


def _nearest(draft_rows: Sequence[dict], kept: float) -> dict:
    """The uniform skip whose fraction of blocks kept is nearest ``kept`` (a model of 6 layers keeps 2 for 0.25)."""
    rows = [r for r in draft_rows if r["label"].startswith("kept")]
    return min(rows, key=lambda r: abs(r["kept"] - kept))


def _c_at(draft_rows: Sequence[dict], kept: float) -> float:
    return _nearest(draft_rows, kept)["c"]


def limit_gamma_data(draft_rows: Sequence[dict], verify_rows: Sequence[dict], alpha: float,
                     kept: Sequence[float], gammas: Sequence[int]) -> list[dict]:
    """The traces of :func:`limit_gamma_figure` as data: for the uniform skip nearest each fraction in ``kept``,
    E(α, γ) / (γ·c + c_v(γ + 1)) at every γ with the measured costs, then the same fractions under the memory-bound
    ideal (c = the fraction that skip keeps, c_v = 1). [{name, x, y}]."""
    out = []
    for ideal in (False, True):
        for k in kept:
            row = _nearest(draft_rows, k)
            c = row["kept"] if ideal else row["c"]
            verify = [{"tokens": 1, "c_v": 1.0}, {"tokens": 2, "c_v": 1.0}] if ideal else verify_rows
            ys = [best_limit(alpha, c, verify, [g])["limit"] for g in gammas]
            out.append({"name": f"{'ideal, ' if ideal else ''}kept {row['kept']:.2f} (c = {c:.2f})",
                        "x": list(gammas), "y": ys})
    return out


def limit_gamma_figure(traces: Sequence[dict], title: str = "") -> go.Figure:
    """The analytic limit against γ (``traces`` from :func:`limit_gamma_data`): solid the measured costs, dashed the
    memory-bound ideal, one colour per kept fraction; the line speedup = 1."""
    fig = go.Figure()
    half = len(traces) // 2
    for i, t in enumerate(traces):
        fig.add_trace(go.Scatter(x=t["x"], y=t["y"], mode="lines+markers", name=t["name"],
                                 line=dict(color=MODEL_COLORS[i % half % len(MODEL_COLORS)],
                                           dash="dash" if i >= half else "solid")))
    fig.add_hline(y=1.0, line=dict(color=PALETTE["auxiliary"], dash="dot"))
    fig.update_xaxes(title_text="γ (tokens drafted per step)", dtick=1)
    fig.update_yaxes(title_text="analytic limit (× plain decoding)", rangemode="tozero")
    fig.update_layout(title=title or "Analytic limit against γ", height=420, legend=dict(font=dict(size=10)),
                      **_LAYOUT)
    return fig


def calibration_figure(calibrations: Mapping[str, object]) -> go.Figure:
    """Predicted against measured speedup per calibration (``{label: Calibration}``): the prediction at the chosen
    γ, the measurement with its min–max over the interleaved repetitions; the line speedup = 1."""
    labels = list(calibrations)
    cals = list(calibrations.values())
    fig = go.Figure()
    fig.add_trace(go.Bar(x=labels, y=[c.predicted_speedup for c in cals], name="predicted",
                         marker_color=PALETTE["analytic"], opacity=0.55,
                         text=[f"{c.predicted_speedup:.2f}×" for c in cals], textposition="inside"))
    fig.add_trace(go.Bar(x=labels, y=[c.measured_speedup for c in cals], name="measured (min–max)",
                         text=[f"{c.measured_speedup:.2f}×" for c in cals], textposition="inside",
                         marker_color=PALETTE["speedup"], error_y=dict(
                             type="data", symmetric=False,
                             array=[c.measured["speedup_max"] - c.measured_speedup for c in cals],
                             arrayminus=[c.measured_speedup - c.measured["speedup_min"] for c in cals])))
    fig.add_hline(y=1.0, line=dict(color=PALETTE["auxiliary"], dash="dot"), annotation_text="plain decoding",
                  annotation_position="top left")
    fig.update_yaxes(title_text="speedup over the plain loop", rangemode="tozero")
    fig.update_layout(title="The calibration's prediction beside the measured run", barmode="group", height=400,
                      **_LAYOUT)
    return fig


#: The colour of each part of a step (labkit.measure.costs.step_anatomy.PARTS): arithmetic in greens and blues, per-call
#: work in greys.
_PART_COLORS = {"matrix products": "#2ca25f", "attention kernel": "#1f78b4", "cache updates": "#a6cee3",
                "LM head": "#6a3d9a", "framework in the blocks": "#7f7f7f", "norms": "#bdbdbd",
                "rest of the forward": "#d9d9d9"}


def anatomy_figure(anatomies: Mapping[str, dict]) -> go.Figure:
    """One horizontal bar per configuration (``{label: step_anatomy(...)}``), stacked by part: where one step's
    milliseconds go. Arithmetic (matrix products, attention kernel, cache updates, LM head) in colour, per-call work
    (framework in the blocks, norms, the rest of the forward) in greys."""
    labels = list(anatomies)
    fig = go.Figure()
    for part, colour in _PART_COLORS.items():
        values = [anatomies[label]["parts"][part] for label in labels]
        fig.add_bar(y=labels, x=values, name=part, orientation="h", marker_color=colour,
                    hovertemplate=f"{part}: %{{x:.3f}} ms<extra>%{{y}}</extra>")
    fig.update_layout(barmode="stack", height=140 + 60 * len(labels), legend=dict(orientation="h", y=-0.35),
                      title="Where one decoding step's time goes on this machine (ms)",
                      xaxis_title="ms per step (hooked forward)", yaxis=dict(autorange="reversed"),
                      **{**_LAYOUT, "margin": dict(l=200, r=20, t=60, b=50)})
    return fig
