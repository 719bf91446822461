"""Saturation, seen (notebook 08): how soon each layer's logit-lens reading is already the final token, the
lens token by token, and how well CALM's three exit signals predict "already right" (ROC)."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..measure.signals.saturation import CALM_SIGNALS, Saturation
from .style import FIGURE_WIDTH, MODEL_COLORS, PALETTE, visible

__all__ = ["saturation_curves_figure", "lens_heatmap_figure", "exit_roc_figure", "SIGNAL_COLORS"]

#: One colour per CALM signal.
SIGNAL_COLORS = dict(zip(CALM_SIGNALS, (PALETTE["acceptance"], PALETTE["tokens_per_step"], PALETTE["speedup"])))


def saturation_curves_figure(sats: Mapping[str, Saturation], *, title: str | None = None) -> go.Figure:
    """Top: fraction of tokens whose lens top-1 is already the final token (solid) and stays so (dotted),
    after every sub-layer. Bottom: mean cosine of that state with the last hidden state. One colour per model."""
    if not sats:
        raise ValueError("no saturation measurements to draw")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.62, 0.38])
    for color, (name, sat) in zip(MODEL_COLORS, sats.items()):
        x = sat.stages
        fig.add_scatter(x=x, y=sat.fraction_saturated().tolist(), mode="lines+markers", name=f"{name}: saturated",
                        line=dict(color=color), legendgroup=name, row=1, col=1,
                        hovertemplate=f"{name} after %{{x}}: %{{y:.0%}} already the final token<extra></extra>")
        fig.add_scatter(x=x, y=sat.fraction_settled().tolist(), mode="lines", name=f"{name}: settled for good",
                        line=dict(color=color, dash="dot"), legendgroup=name, row=1, col=1,
                        hovertemplate=f"{name} after %{{x}}: %{{y:.0%}} final from here on<extra></extra>")
        fig.add_scatter(x=x, y=np.nanmean(sat.cos_last, axis=0).tolist(), mode="lines+markers",
                        name=f"{name}: cosine to last", line=dict(color=color, width=1), marker=dict(size=4),
                        legendgroup=name, showlegend=False, row=2, col=1,
                        hovertemplate=f"{name} after %{{x}}: mean cosine %{{y:.2f}}<extra></extra>")
    n = len(next(iter(sats.values())).tokens)
    fig.update_yaxes(title_text="fraction of tokens", range=[0, 1.02], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(title_text="cosine to last", range=[0, 1.02], row=2, col=1)
    fig.update_xaxes(title_text="residual stream after … (layer, block)", tickangle=-45, row=2, col=1)
    fig.update_layout(title=title or f"Logit lens: when is the final token already on top? ({n} tokens per model)",
                      width=FIGURE_WIDTH, height=560, legend=dict(orientation="h", y=1.08, x=0),
                      margin=dict(t=110))
    return fig


def lens_heatmap_figure(sat: Saturation, tokenizer, *, prompt: int = 0, max_tokens: int = 32,
                        title: str | None = None) -> go.Figure:
    """Tokens (rows) x stages (columns): the lens probability of the final token; hover shows the lens top-1.
    A cell is outlined where the lens top-1 already is the final token."""
    rows = np.nonzero(sat.prompt_index == prompt)[0][:max_tokens]
    if len(rows) == 0:
        raise ValueError(f"no tokens recorded for prompt {prompt}")
    ids = sorted(set(sat.tokens[rows].tolist()) | set(sat.top1[rows].ravel().tolist()))
    text = {t: visible(tokenizer.decode([t])) for t in ids}
    y = [f"{i:>2} {text[int(sat.tokens[r])]}" for i, r in enumerate(rows)]
    hover = [[text[int(sat.top1[r, s])] for s in range(len(sat.stages))] for r in rows]
    fig = go.Figure(go.Heatmap(
        z=sat.p_final[rows].tolist(), x=sat.stages, y=y, zmin=0, zmax=1, colorscale="Greens", xgap=1, ygap=1,
        customdata=hover, colorbar=dict(title="p(final)", thickness=14),
        hovertemplate="token %{y}<br>after %{x}: p(final token) %{z:.2f}<br>lens top-1: %{customdata}<extra></extra>"))
    marks = [(s, i) for i, r in enumerate(rows) for s in range(len(sat.stages)) if sat.saturated[r, s]]
    fig.add_scatter(x=[sat.stages[s] for s, _ in marks], y=[y[i] for _, i in marks], mode="markers",
                    marker=dict(symbol="square-open", size=9, color=PALETTE["accepted"], line=dict(width=1.5)),
                    name="lens top-1 = final token", hoverinfo="skip")
    fig.update_layout(title=title or f"{sat.model}: the logit lens token by token (prompt {prompt})",
                      xaxis_title="residual stream after … (layer, block)", yaxis_title="generated token",
                      yaxis_autorange="reversed", width=FIGURE_WIDTH, height=170 + 18 * len(rows),
                      legend=dict(orientation="h", y=1.02, x=0, yanchor="bottom"), margin=dict(t=90))
    fig.update_xaxes(tickangle=-45)
    return fig


def exit_roc_figure(rocs: Mapping[str, Mapping[str, dict]], *, title: str | None = None) -> go.Figure:
    """One panel per model: the ROC curve of each CALM signal for "layer E already gives the final token"
    (pooled over exit layers), AUC in the legend; the diagonal is a coin flip."""
    if not rocs:
        raise ValueError("no ROC curves to draw")
    names = list(rocs)
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=names, horizontal_spacing=0.08)
    for col, name in enumerate(names, start=1):
        for signal, roc in rocs[name].items():
            fig.add_scatter(x=roc["fpr"].tolist(), y=roc["tpr"].tolist(), mode="lines", row=1, col=col,
                            name=f"{name}: {signal} (AUC {roc['auc']:.2f})",
                            line=dict(color=SIGNAL_COLORS.get(signal, PALETTE["auxiliary"])),
                            hovertemplate=f"{signal}<br>false exits %{{x:.0%}}<br>"
                                          f"right exits caught %{{y:.0%}}<extra></extra>")
        fig.add_scatter(x=[0, 1], y=[0, 1], mode="lines", line=dict(color="#999", dash="dash", width=1),
                        name="chance (a coin flip)", legendgroup="chance", showlegend=col == 1, hoverinfo="skip",
                        legendrank=2000, row=1, col=col)          # last in the legend
        fig.update_xaxes(title_text="false-positive rate (exits that would be wrong)", range=[0, 1], row=1, col=col)
    fig.update_yaxes(title_text="true-positive rate", range=[0, 1.01], row=1, col=1)
    fig.update_layout(title=title or "How well does each exit signal predict 'this layer is already right'?",
                      width=FIGURE_WIDTH, height=470, legend=dict(orientation="h", y=-0.22, x=0))
    return fig
