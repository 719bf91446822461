"""Cascades drawn: what each level of a cascade proposed, what the level above it kept, and what it drafted itself,
per step (from ``StepRecord.levels``, summed by :func:`labkit.measure.comparisons.cascades.level_parts`).

A level k proposes tokens to the level above (the top: to the target); the level above verifies them with one
forward, keeps a prefix and adds one token of its own (a replacement or a bonus). Kept ÷ proposed is the level
pair's acceptance; a level whose proposals are almost never kept only adds its forwards to the step.
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import PALETTE

__all__ = ["level_parts_figure", "PART_COLORS"]

#: The three bars per level, in drawing order.
PART_COLORS = {"proposed": PALETTE["discarded"], "accepted": PALETTE["accepted"], "own": PALETTE["replacement"]}
_NAMES = {"proposed": "proposed to the level above", "accepted": "kept by the level above",
          "own": "drafted itself (not taken from below)"}


def level_parts_figure(parts: list[dict]) -> go.Figure:
    """One panel per cascade (``parts``: dicts of :func:`~labkit.measure.comparisons.cascades.level_parts` with
    ``cascade`` set), the levels cheapest first on x, three bars per level: tokens proposed, kept by the level above
    (the top: by the target) and drafted itself, per step; each level's kept share and ms per forward above its bars."""
    labels = list(dict.fromkeys(p["cascade"] for p in parts))
    if not labels:
        raise ValueError("no cascade levels to draw")
    fig = make_subplots(rows=1, cols=len(labels), subplot_titles=labels, shared_yaxes=True,
                        horizontal_spacing=0.04)
    fig.update_annotations(font=dict(size=12))                     # the panel titles
    top = max(p["proposed"] for p in parts) or 1.0
    for col, label in enumerate(labels, start=1):
        mine = [p for p in parts if p["cascade"] == label]
        xs = [p["level"] + (" → target" if p["is_top"] else "") for p in mine]
        for key, color in PART_COLORS.items():
            fig.add_trace(go.Bar(
                x=xs, y=[p[key] for p in mine], name=_NAMES[key], marker_color=color, legendgroup=key,
                showlegend=col == 1,
                customdata=[[p["kept"], p["ms_per_forward"], p["used"]] for p in mine],
                hovertemplate=(f"%{{x}}<br>{_NAMES[key]}: %{{y:.2f}} per step<br>kept %{{customdata[0]:.0%}}"
                               "<br>%{customdata[1]:.2f} ms per forward<br>in %{customdata[2]:.0%} of steps"
                               "<extra></extra>")), 1, col)
        for x, p in zip(xs, mine):
            kept = "n/a" if p["kept"] != p["kept"] else f"{p['kept']:.0%}"
            fig.add_annotation(x=x, y=top * 1.08, text=f"kept {kept}<br>{p['ms_per_forward']:.2f} ms/fwd",
                               showarrow=False, font=dict(size=9), row=1, col=col)
        fig.update_xaxes(tickfont=dict(size=9), row=1, col=col)
    fig.update_yaxes(title_text="tokens per step", range=[0, top * 1.25], row=1, col=1)
    fig.update_layout(barmode="group", height=440, title="What each level of a cascade did per step",
                      legend=dict(orientation="h", y=-0.2), margin=dict(l=60, r=20, t=80, b=60),
                      template="plotly_white")
    return fig
