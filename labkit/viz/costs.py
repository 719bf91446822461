"""What a forward costs and what skipping buys (notebook 02): the cost model's block costs, the verify cost
of checking several tokens in one pass, and the predicted ms per token along greedy-elimination paths."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from ..core.skip import SkipSet
from ..measure.costs.analytic import UNIT, predicted_cost_frame
from ..measure.costs.costmodel import verify_cost_in_steps
from .style import MODEL_COLORS, PALETTE

__all__ = ["cost_breakdown_figure", "verify_cost_figure", "predicted_cost_figure"]


def _breakdown_columns(cm, pooled: bool) -> tuple[list[str], list[list]]:
    """x labels and the (attention, MLP, overhead) bar heights of :func:`cost_breakdown_figure`: one bar per layer
    and their mean, or, when the fit pooled every layer to one cost, one layer and all L of them."""
    L = cm.n_layers
    parts = (list(cm.attention_ms), list(cm.mlp_ms), list(cm.layer_ms))
    if pooled:
        return ["fixed", "one layer", f"all {L} layers"], [[None, v[0], sum(v)] for v in parts]
    return (["fixed"] + [str(l) for l in range(L)] + ["mean layer"],
            [[None] + v + [sum(v) / L] for v in parts])


def cost_breakdown_figure(cost_model, *, title: str | None = None) -> go.Figure:
    """Stacked bars: each layer's fitted attention, MLP and layer-overhead ms, their mean over layers, and the
    fixed ms of every forward. When every layer has the same cost (a tied model, or a fit that pooled the layers
    completely) eight identical bars would say nothing: one layer and all L layers are drawn instead."""
    cm = cost_model
    L = cm.n_layers
    total_att, total_mlp, total_layer = sum(cm.attention_ms), sum(cm.mlp_ms), sum(cm.layer_ms)
    full = cm.draft_ms(SkipSet())
    visible = 5e-3 * full / L                  # half a percent of a layer's share: below it, bars look identical
    scatter = any(max(v) - min(v) > max(1e-3 * abs(sum(v) / L), visible)
                  for v in (cm.attention_ms, cm.mlp_ms, cm.layer_ms))
    x, (att, mlp, layer) = _breakdown_columns(cm, pooled=not scatter)

    def share(v: float) -> str:
        return f"{v:.2f} ms in all, {v / full:.0%}"

    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=[cm.fixed_ms] + [None] * (len(x) - 1),
                         name=f"fixed per forward: embedding, final norm, LM head, framework ({share(cm.fixed_ms)})",
                         marker_color=PALETTE["fixed"],
                         hovertemplate="fixed: %{y:.3f} ms<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=att, name=f"attention block ({share(total_att)})", marker_color=PALETTE["attention"],
                         hovertemplate="%{x} attention: %{y:.3f} ms<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=mlp, name=f"MLP block ({share(total_mlp)})",
                         marker_color=PALETTE["mlp"], hovertemplate="%{x} MLP: %{y:.3f} ms<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=layer,
                         name=f"layer overhead, saved only when both blocks are skipped ({share(total_layer)})",
                         marker_color=PALETTE["layer_overhead"],
                         hovertemplate="%{x} overhead: %{y:.3f} ms<extra></extra>"))
    r2 = cm.fit.get("r2")
    threads = cm.machine.get("torch_threads")
    sub = (f"one-token step of the full model = {cm.full_step_ms:.2f} ms"
           + (f" on {threads} thread{'s' if threads != 1 else ''}" if threads else "")
           + (f"; block costs fitted over {cm.fit.get('n_sets', '?')} skip sets, R² = {r2:.2f}"
              if r2 is not None and not math.isnan(r2) else ""))
    if cm.fit.get("tied"):
        sub += "<br>tied: every layer at the mean of the fitted per-layer costs"
    elif not scatter:
        sub += "<br>pooled: the layers did not differ beyond the timing noise, so every layer gets one shared cost"
    elif r2 is not None and not math.isnan(r2) and r2 < 0.97:
        sub += "<br>single layers scatter (a regression on noisy timings); their sums and the mean layer are reliable"
    fig.update_layout(
        barmode="stack", title=title or f"Where one forward of {cm.model or 'the model'} spends its time<br>"
                                        f"<sup>{sub}</sup>",
        xaxis_title=("fixed: paid by every forward; " + ("one layer, and all of them together" if not scatter else
                                                         "decoder layer; mean layer: the average of layers 0..L-1")),
        yaxis_title="ms per one-token forward",
        legend=dict(orientation="h", yanchor="top", y=-0.2, x=0, traceorder="normal"), height=540,
        margin=dict(t=110),
    )
    return fig


def verify_cost_figure(cost_model, *, highlight: int = 5, title: str | None = None) -> go.Figure:
    """Cost of one forward over n tokens (the verify step), in one-token steps, against n separate steps."""
    cm = cost_model
    full = cm.full_step_ms
    n = list(range(1, cm.max_draft + 2))
    fitted = [v / full for v in cm.verify_ms]
    raw = cm.fit.get("verify_raw_ms")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=n, y=n, mode="lines", line=dict(color="#7f7f7f", dash="dash"),
                             name="n separate one-token steps (plain decoding)",
                             hovertemplate="%{x} steps<extra></extra>"))
    if raw and len(raw) == len(n):
        fig.add_trace(go.Scatter(x=n, y=[v / full for v in raw], mode="markers", marker=dict(size=8, color="#1f78b4"),
                                 name="one forward over n tokens: measured (median)",
                                 customdata=raw, hovertemplate="%{x} tokens: %{customdata:.2f} ms = %{y:.2f} steps"
                                                               "<extra></extra>"))
    fig.add_trace(go.Scatter(x=n, y=fitted, mode="lines", line=dict(color="#1f78b4", width=3),
                             name="one forward over n tokens: robust line (used by the cost model)",
                             customdata=cm.verify_ms,
                             hovertemplate="%{x} tokens: %{customdata:.2f} ms = %{y:.2f} steps<extra></extra>"))
    if 1 <= highlight <= len(n):
        v = verify_cost_in_steps(cm, highlight)
        fig.add_annotation(x=highlight, y=v, text=f"verifying {highlight} tokens costs {v:.1f} one-token steps",
                           showarrow=True, arrowhead=2, ax=60, ay=-70, bgcolor="white")
    fig.update_layout(
        title=title or (f"Checking n tokens at once costs far less than n steps<br>"
                        f"<sup>one-token step = {full:.2f} ms; KV cache of {cm.context} tokens</sup>"),
        xaxis_title="tokens in the forward (the pending token + drafted tokens)",
        yaxis_title="cost in one-token steps (ms / one-token step ms)",
        legend=dict(yanchor="top", y=0.98, x=0.02, bgcolor="rgba(255,255,255,0.8)"), height=480, margin=dict(t=90),
    )
    fig.update_xaxes(tickmode="linear", dtick=1)
    return fig


def _add_path(fig, cost_model, name: str, path: Sequence, colour: str) -> None:
    """One model's predicted cost along its own path (its measured agreement), its cheapest set starred."""
    part = predicted_cost_frame(cost_model, path, label=name)
    fig.add_trace(go.Scatter(
        x=part["n_skipped"], y=part["ms_per_token"], mode="lines+markers", name=f"{name}: its measured agreement",
        line=dict(color=colour, width=3), marker=dict(size=5),
        customdata=list(zip(part["alpha"], part["gamma"], part["speedup"])),
        hovertemplate=(f"{name}<br>%{{x}} skipped: α = %{{customdata[0]:.2f}}, best γ = %{{customdata[1]}}<br>"
                       "%{y:.2f} ms/token (%{customdata[2]:.2f}x)<extra></extra>")))
    best = part.loc[part["ms_per_token"].idxmin()]
    fig.add_trace(go.Scatter(
        x=[best["n_skipped"]], y=[best["ms_per_token"]], mode="markers+text",
        marker=dict(symbol="star", size=16, color=colour, line=dict(color="black", width=1)),
        text=[f"{best['speedup']:.2f}x"], textposition="bottom center", showlegend=False,
        hovertemplate=(f"{name}: cheapest set on the path<br>{int(best['n_skipped'])} skipped, "
                       f"α = {best['alpha']:.2f}, γ = {int(best['gamma'])}: %{{y:.2f}} ms/token<extra></extra>")))


def predicted_cost_figure(cost_model, paths: Mapping[str, Sequence], *, alphas: Sequence[float] = (0.6, 0.8, 0.9),
                          title: str | None = None) -> go.Figure:
    """Predicted ms per generated token against blocks skipped.

    Thin grey lines: a fixed agreement α (drawn on the first path's sets), showing that if α did not fall,
    skipping more would always pay. Thick lines: each model's own measured agreement along its path, with its
    cheapest set starred. Dashed: plain decoding (one full step per token).
    """
    if not paths:
        raise ValueError("no path to draw")
    cm, L = cost_model, cost_model.n_layers
    fig = go.Figure()
    first = next(iter(paths))
    fixed = predicted_cost_frame(cm, paths[first], alphas=alphas, label=first)
    greys = ["#bdbdbd", "#969696", "#737373", "#525252"]
    for j, alpha in enumerate(alphas):
        part = fixed[(fixed.alpha_source == "fixed") & (fixed.alpha == float(alpha))]
        fig.add_trace(go.Scatter(
            x=part["n_skipped"], y=part["ms_per_token"], mode="lines", name=f"if agreement stayed at α = {alpha:g}",
            line=dict(color=greys[min(j, len(greys) - 1)], width=1.5), customdata=part["gamma"],
            hovertemplate=f"α = {alpha:g}<br>%{{x}} skipped: %{{y:.2f}} ms/token (γ = %{{customdata}})<extra></extra>"))
    for i, (name, path) in enumerate(paths.items()):
        _add_path(fig, cm, name, path, MODEL_COLORS[i % len(MODEL_COLORS)])
    fig.add_trace(go.Scatter(x=[0, 2 * L], y=[cm.full_step_ms] * 2, mode="lines", line=dict(color="black", dash="dash"),
                             name=f"plain decoding: {cm.full_step_ms:.2f} ms/token (one full step)",
                             hovertemplate="plain decoding: %{y:.2f} ms/token<extra></extra>"))
    fig.update_layout(
        title=title or ("Predicted cost per token, f(z) = (γ·draft ms + verify ms[γ]) / E(α, γ)<br>"
                        "<sup>along the greedy-elimination paths; γ = the best draft length for each α</sup>"),
        xaxis_title=f"blocks skipped (of {2 * L})", yaxis_title=f"predicted {UNIT} (lower is better)",
        legend=dict(yanchor="bottom", y=0.02, x=0.01, xanchor="left", bgcolor="rgba(255,255,255,0.85)"),
        height=540, margin=dict(t=90))
    ymax = max(max(t.y) for t in fig.data if t.y is not None and len(t.y))
    fig.update_yaxes(range=[0, min(ymax, 2.5 * cm.full_step_ms) * 1.05])
    fig.update_xaxes(tickmode="linear", dtick=2)
    return fig
