"""How much of the model a draft can drop (notebook 02): agreement with one block skipped, agreement along
greedy-elimination paths, and one completion drafted by a skip set beside the full model's."""
from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from ..core.skip import SkipSet
from ..measure.agreement import TokenComparison
from ..measure.comparisons.robustness import agreement_at_ratio, elimination_frame
from .style import MODEL_COLORS, PALETTE, visible

__all__ = ["single_block_figure", "redundancy_figure", "token_comparison_html"]


def single_block_figure(single: Mapping, *, title: str | None = None) -> go.Figure:
    """Heatmap of the agreement with one block skipped: layers across, attention / MLP down.

    ``single``: ``AgreementProbe.single_block_agreement()`` (``{'attention': [...], 'mlp': [...]}``), or a
    mapping ``{model label: that dict}`` to stack several models on one colour scale (0..1).
    """
    items = {"": single} if "attention" in single and "mlp" in single else dict(single)
    if not items:
        raise ValueError("no agreement to draw")
    n_layers = None
    z, labels = [], []
    for label, d in items.items():
        for part, key in (("attention", "attention"), ("MLP", "mlp")):
            values = [float(v) for v in d[key]]
            if n_layers is None:
                n_layers = len(values)
            if len(values) != n_layers:
                raise ValueError("every model must have the same number of layers")
            z.append(values)
            labels.append(f"{label} · {part}" if label else part)
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(n_layers)), y=labels, zmin=0.0, zmax=1.0, colorscale="Viridis", xgap=2, ygap=2,
        texttemplate="%{z:.2f}", textfont=dict(size=11),
        hovertemplate="%{y}, layer %{x} skipped: agreement %{z:.3f}<extra></extra>",
        colorbar=dict(title="agreement", thickness=16),
    ))
    fig.update_layout(
        title=title or "Agreement with the full model when ONE block is skipped",
        xaxis_title="decoder layer whose block is skipped", yaxis_title="block skipped",
        height=max(320, 46 * len(labels) + 170), yaxis_autorange="reversed",
    )
    fig.update_xaxes(tickmode="linear", dtick=1)
    return fig


def _add_star(fig, label: str, skip: SkipSet, agreement: float, n_layers: int) -> None:
    """One skip set as a star; the legend names it, its text stays short and below it (clear of the title)."""
    if not 0.0 <= agreement <= 1.0:
        raise ValueError(f"agreement of {label!r} must be in [0, 1], got {agreement}")
    skip.validate(n_layers)
    fig.add_trace(go.Scatter(
        x=[skip.n_skipped], y=[agreement], mode="markers+text", name=f"{label} ({agreement:.0%})",
        text=[f"{agreement:.0%}"], textposition="bottom right", marker=dict(symbol="star", size=16, color="#222222"),
        hovertemplate=f"{label}<br>{skip}<br>agreement %{{y:.3f}}<extra></extra>"))


def redundancy_figure(paths: Mapping[str, Sequence], n_layers: int, *, band: tuple[float, float] | None = None,
                      band_label: str = "skip ratios seen in training", mark_ratio: float | None = 0.5,
                      sets: Mapping[str, tuple[SkipSet, float]] | None = None,
                      title: str | None = None) -> go.Figure:
    """Agreement against blocks skipped along each model's greedy-elimination path.

    ``band``: a skip-ratio range to shade (e.g. the ratios the skip-robust recipe trained on);
    ``mark_ratio``: a vertical line with each model's agreement there;
    ``sets``: single skip sets to show as stars, {label: (skip set, agreement)} (e.g. a trained draft path).
    """
    df = elimination_frame(paths, n_layers)
    blocks = 2 * n_layers
    fig = go.Figure()
    if band is not None:
        lo, hi = band
        fig.add_vrect(x0=lo * blocks, x1=hi * blocks, fillcolor="#cccccc", opacity=0.25, line_width=0)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"shaded: {band_label}", hoverinfo="skip",
                                 marker=dict(symbol="square", size=14, color="#cccccc")))   # in the legend, not on
        # the plot: a label there crossed the 50 % line and the legend in a notebook-wide figure
    notes = []
    for i, (name, part) in enumerate(df.groupby("model", sort=False)):
        colour = MODEL_COLORS[i % len(MODEL_COLORS)]
        fig.add_trace(go.Scatter(
            x=part["n_skipped"], y=part["agreement"], mode="lines+markers", name=name,
            line=dict(color=colour, width=3), marker=dict(size=6),
            customdata=list(zip(part["ratio"], part["added"])),
            hovertemplate=(f"{name}<br>%{{x}} blocks skipped (ratio %{{customdata[0]:.2f}})<br>"
                           "this round removed: %{customdata[1]}<br>agreement %{y:.3f}<extra></extra>"),
        ))
        if mark_ratio is not None:
            a = agreement_at_ratio(paths[name], n_layers, mark_ratio)
            notes.append(f"{name}: {a:.0%}")
    for label, (skip, a) in (sets or {}).items():
        _add_star(fig, label, skip, a, n_layers)
    if mark_ratio is not None:
        k = int(round(mark_ratio * blocks))
        fig.add_vline(x=k, line_dash="dot", line_color="black")
        fig.add_annotation(x=k, y=0.1, xanchor="left", xshift=4, showarrow=False, bgcolor="rgba(255,255,255,0.8)",
                           text=f"{k} of {blocks} skipped: " + ", ".join(notes))
        # above the legend's height and below the stars and their labels (top)
    fig.update_layout(
        title=title or "How much of the model can a draft drop? Best set found at each size (greedy elimination)",
        xaxis_title=f"blocks skipped (of {blocks}: {n_layers} attention + {n_layers} MLP)",
        yaxis_title="agreement (top-1, teacher-forced: estimates α)",
        yaxis_range=[0, 1.04], legend=dict(yanchor="bottom", y=0.02, x=0.02, bgcolor="rgba(255,255,255,0.8)"),
        height=500,
    )
    fig.update_xaxes(range=[-0.5, blocks + 0.5], tickmode="linear", dtick=2)
    return fig


def _visible(text: str) -> str:
    return html.escape(visible(text))


_CELL = ("padding:2px 5px;border:1px solid #ffffff;font-family:monospace;font-size:13px;white-space:pre;"
         "min-width:2.4em;text-align:center;")


def token_comparison_html(comparison: TokenComparison, tokenizer, *, per_row: int = 12,
                          labels: tuple[str, str] = ("full model", "draft")) -> str:
    """An HTML table, ``per_row`` positions per block: the full model's token, the draft's token given the
    same prefix (green: the same, red: different) and the draft's own continuation (grey after it diverged)."""
    c = comparison
    if per_row < 1:
        raise ValueError("per_row must be >= 1")
    full_name, draft_name = labels
    dec = lambda t: _visible(tokenizer.decode([t]))                                 # noqa: E731
    divergence = c.first_divergence
    legend = (f'<span style="background:{PALETTE["accepted"]};color:white;padding:1px 5px">the draft agrees</span> '
              f'<span style="background:{PALETTE["rejected"]};color:white;padding:1px 5px">the draft disagrees '
              f'(the full model\'s token replaces it)</span> '
              '<span style="background:#eeeeee;color:#777777;padding:1px 5px">the draft alone, after it diverged</span>'
              ' &nbsp; ⏎ newline, ␣ space')
    parts = ['<div style="font-family:sans-serif">', f'<div style="margin:6px 0">{legend}</div>']
    for start in range(0, len(c.full), per_row):
        cols = range(start, min(start + per_row, len(c.full)))
        rows = [f'<td style="{_CELL}color:#999999">{i}</td>' for i in cols]
        full = [f'<td style="{_CELL}background:#f4f4f4">{dec(c.full[i])}</td>' for i in cols]
        forced = []
        for i in cols:
            ok = c.draft_forced[i] == c.full[i]
            forced.append(f'<td style="{_CELL}background:{PALETTE["accepted"] if ok else PALETTE["rejected"]};'
                          f'color:white" '
                          f'title="position {i}: draft {html.escape(repr(tokenizer.decode([c.draft_forced[i]])))}, '
                          f'full model {html.escape(repr(tokenizer.decode([c.full[i]])))}">'
                          f'{dec(c.draft_forced[i])}</td>')
        free = []
        for i in cols:
            gone = divergence is not None and i >= divergence
            style = "background:#eeeeee;color:#777777" if gone else "background:#e5f5e0"
            free.append(f'<td style="{_CELL}{style}">{dec(c.draft_free[i])}</td>' if i < len(c.draft_free)
                        else f'<td style="{_CELL}"></td>')
        head = lambda text: f'<th style="{_CELL}text-align:right;font-family:sans-serif;background:white">{text}</th>'  # noqa: E731
        parts.append('<table style="border-collapse:collapse;margin-bottom:8px">'
                     f'<tr>{head("position")}{"".join(rows)}</tr>'
                     f'<tr>{head(full_name + " (greedy)")}{"".join(full)}</tr>'
                     f'<tr>{head(draft_name + ", same prefix")}{"".join(forced)}</tr>'
                     f'<tr>{head(draft_name + " on its own")}{"".join(free)}</tr></table>')
    runs = c.accepted_runs()
    div_text = (f"its own continuation leaves the full model's at position {divergence}" if divergence is not None
                else "its own continuation never leaves the full model's")
    parts.append(f'<div style="font-family:sans-serif">{sum(c.agree)} of {len(c.full)} tokens agree '
                 f'({c.agreement:.0%}); longest agreeing run {max(runs)} tokens; {div_text}.</div></div>')
    return "\n".join(parts)
