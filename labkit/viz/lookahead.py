"""Lookahead decoding, drawn (notebook 06): the n-gram pool filling up step by step beside what each step accepted,
one step's combined attention mask (the verification trie and the lookahead window in one forward), tokens per
target forward against the window W, and the drafters without a draft forward on the speedup formula.
"""
from __future__ import annotations

import plotly.graph_objects as go

from ..core.lookahead import combined_mask
from .style import FIGURE_WIDTH, PALETTE
from .timeline import header

__all__ = ["pool_figure", "combined_mask_figure", "window_sweep_figure", "draftless_figure"]


def pool_figure(history: list[dict], *, width: int = FIGURE_WIDTH, height: int = 400) -> go.Figure:
    """Per lookahead step (``LookaheadDrafter.history``): n-grams in the pool after it (line) and drafted tokens
    it accepted (bars)."""
    steps = list(range(len(history)))
    fig = go.Figure()
    fig.add_bar(x=steps, y=[len(h["accepted"]) for h in history], name="accepted drafted tokens",
                marker_color=PALETTE["fixed_now"], yaxis="y2",
                hovertemplate="step %{x}: %{y} accepted<extra></extra>")
    fig.add_scatter(x=steps, y=[h["pool"] for h in history], mode="lines", name="n-grams in the pool",
                    line=dict(color=PALETTE["target"]), hovertemplate="step %{x}: %{y} n-grams<extra></extra>")
    fig.update_layout(template="plotly_white", width=width, xaxis=dict(title="lookahead step (one target forward)"),
                      yaxis=dict(title="n-grams in the pool", rangemode="tozero"),
                      yaxis2=dict(title="accepted", overlaying="y", side="right", rangemode="tozero", dtick=1,
                                  showgrid=False))
    header(fig, "The pool fills from the window; accepted drafts follow", height, legend_rows=1)
    return fig


def _row_labels(parents: list[int], n_levels: int, W: int) -> list[str]:
    return (["t₀"] + [f"trie {i} (↑{p if p >= 0 else 't₀'})" for i, p in enumerate(parents)]
            + [f"window ({lv},{c})" for lv in range(n_levels) for c in range(W)])


def combined_mask_figure(parents: list[int], n_levels: int, W: int, *, width: int = FIGURE_WIDTH,
                         height: int = 560) -> go.Figure:
    """One step's attention over [t₀, the trie, the window] (:func:`labkit.core.lookahead.combined_mask`): a dark
    cell where the row's token sees the column's (every row also sees the cached prefix, not drawn); the row's
    position after t₀ in the hover."""
    visible, offsets = combined_mask(parents, n_levels, W)
    labels = _row_labels(parents, n_levels, W)
    z = visible.int().tolist()
    fig = go.Figure(go.Heatmap(z=z, x=labels, y=labels, showscale=False, xgap=1, ygap=1,
                               colorscale=[[0, "#f0f0f0"], [1, PALETTE["target"]]],
                               customdata=[[offsets[r]] * len(labels) for r in range(len(labels))],
                               hovertemplate="%{y} (position t₀+%{customdata}) sees %{x}: %{z}<extra></extra>"))
    n_tree = len(parents) + 1
    for edge in (n_tree - 0.5,):                     # the border between the two branches
        fig.add_hline(y=edge, line=dict(color="black", width=1))
        fig.add_vline(x=edge, line=dict(color="black", width=1))
    fig.update_layout(template="plotly_white", width=width, xaxis=dict(tickangle=-60, side="top"),
                      yaxis=dict(autorange="reversed"))
    header(fig, f"One forward, two branches: {len(parents)} trie nodes and a {n_levels} × {W} window", height,
           legend_rows=0, left=150)
    return fig


def window_sweep_figure(rows: list[dict], *, width: int = FIGURE_WIDTH, height: int = 400) -> go.Figure:
    """Tokens per target forward against the window W, one line per n-gram size N (rows of
    :func:`labkit.lessons.lookahead.window_sweep`), plain decoding's 1 dotted."""
    fig = go.Figure()
    for N in sorted({r["N"] for r in rows}):
        mine = sorted((r for r in rows if r["N"] == N), key=lambda r: r["W"])
        fig.add_scatter(x=[r["W"] for r in mine], y=[r["tokens_per_forward"] for r in mine], mode="lines+markers",
                        name=f"N = {N}", hovertemplate=f"N {N}, W %{{x}}: %{{y:.2f}} tokens per forward<extra></extra>")
    fig.add_hline(y=1.0, line=dict(color="black", width=1, dash="dot"))
    fig.update_layout(template="plotly_white", width=width, xaxis=dict(title="window W (columns)", dtick=1),
                      yaxis=dict(title="tokens per target forward", rangemode="tozero"))
    header(fig, "A wider window pools more n-grams, and widens every forward", height, legend_rows=1)
    return fig


def draftless_figure(frame, *, width: int = FIGURE_WIDTH, height: int = 420) -> go.Figure:
    """Per drafter of a :func:`labkit.measure.parallel.compare_decoders` frame (the reference row left out): tokens
    per verify (A + 1) and the verify cost c_v side by side, and the speedup the formula allows (A + 1)/(d·c + c_v)
    beside the one measured."""
    methods = list(frame.index[1:])
    fig = go.Figure()
    for column, name, color in (("tokens_per_step", "tokens per verify (A + 1)", PALETTE["fixed_now"]),
                                ("c_v", "verify cost c_v (× a plain step)", PALETTE["draft"]),
                                ("limit", "speedup the formula allows", PALETTE["target"]),
                                ("speedup", "speedup measured on this machine", PALETTE["residual"])):
        fig.add_bar(x=methods, y=[float(frame.loc[m, column]) for m in methods], name=name, marker_color=color,
                    hovertemplate=f"%{{x}}: {name} %{{y:.2f}}<extra></extra>")
    fig.add_hline(y=1.0, line=dict(color="black", width=1, dash="dot"))
    fig.update_layout(barmode="group", template="plotly_white", width=width, yaxis=dict(rangemode="tozero"))
    header(fig, "No draft forward: what each verify emits, what it costs, what that allows", height, legend_rows=2)
    return fig
