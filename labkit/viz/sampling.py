"""Speculative sampling, drawn (notebook 05): p and q at one real position with the acceptance probability
min(1, p/q) and the residual normalise(max(0, p − q)); the Monte-Carlo of three acceptance rules against p; and
acceptance, tokens per step and speedup across temperatures beside Leviathan's formulas.

Notation: p target, q draft (both at the same temperature), α = Σ min(p, q) = 1 − TV(p, q) the probability that
a drafted token is accepted. Each figure has a ``*_view`` function that computes its data as plain Python lists,
so a widget can update a ``FigureWidget`` in place with exactly what the builder draws.
"""
from __future__ import annotations

import math

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from ..core.sampling import residual_distribution
from ..measure.comparisons.speculative_sampling import acceptance_probability, alpha, total_variation
from .style import FIGURE_WIDTH, PALETTE
from .timeline import header, plotly_text

__all__ = ["CURRENT_T", "TICK_CHARS", "lossless_view", "lossless_schematic", "top_tokens", "distribution_view",
           "distribution_title", "distributions_figure", "monte_carlo_view", "monte_carlo_figure", "temperature_view",
           "temperature_figure"]

#: Name of the vertical lines that mark the temperature slider's value.
CURRENT_T = "current temperature"


def top_tokens(p: torch.Tensor, q: torch.Tensor, k: int, min_mass: float = 0.002) -> list[int]:
    """The union of the k most likely tokens under p and under q (those with at least ``min_mass`` under one of
    them, and at least the top token of each), most likely under p first."""
    ids = {int(p.argmax()), int(q.argmax())}
    for dist in (p, q):
        top = torch.topk(dist, k)
        ids |= {int(i) for v, i in zip(top.values, top.indices) if float(v) >= min_mass}
    return sorted(ids, key=lambda i: (-float(p[i]), -float(q[i])))


#: Characters per line of a token's tick label: long tokens wrap instead of being tilted (readable at any width).
TICK_CHARS = 9


def _wrap(text: str, width: int = TICK_CHARS) -> str:
    """``text`` in lines of at most ``width`` characters joined by <br> (plotly's line break)."""
    return "<br>".join(text[i:i + width] for i in range(0, len(text), width)) or text


def _names(ids: list[int], labels: dict[int, str]) -> list[str]:
    """Unique category names, upright and wrapped: the token's visible text, with its id where two tokens read
    the same."""
    texts = [labels.get(i, str(i)) for i in ids]
    return [_wrap(t if texts.count(t) == 1 else f"{t} #{i}") for t, i in zip(texts, ids)]


def distribution_view(p: torch.Tensor, q: torch.Tensor, labels: dict[int, str], *, k: int = 8,
                      drafted: int | None = None) -> dict:
    """Lists for :func:`distributions_figure`: the top tokens, their p, q, min(1, p/q) and residual mass."""
    ids = top_tokens(p, q, k)
    r = residual_distribution(p, q)
    accept = acceptance_probability(p, q)
    shown = lambda t: sum(float(t[i]) for i in ids)                         # noqa: E731
    return {
        "x": _names(ids, labels), "ids": ids, "p": [float(p[i]) for i in ids], "q": [float(q[i]) for i in ids],
        "accept": [float(accept[i]) for i in ids], "residual": [float(r[i]) for i in ids],
        "outline": [3 if i == drafted else 0 for i in ids],
        "shown_p": shown(p), "shown_q": shown(q), "shown_residual": shown(r),
        "alpha": alpha(p, q), "tv": total_variation(p, q),
        "drafted": labels.get(drafted, str(drafted)) if drafted is not None else None,
    }


def distribution_title(view: dict, where: str = "") -> str:
    head = f"{where} · " if where else ""
    drafted = f" · framed: the drafted token ‘{plotly_text(view['drafted'])}’" if view["drafted"] else ""
    rest = ("" if min(view["shown_p"], view["shown_q"]) >= 0.995 else
            "; the rest is spread thinly over the other tokens of the vocabulary")
    return (f"{head}α = Σ min(p, q) = {view['alpha']:.3f} = 1 − TV(p, q){drafted}<br><sup>the tokens shown hold "
            f"{view['shown_p']:.0%} of p, {view['shown_q']:.0%} of q and {view['shown_residual']:.0%} of the "
            f"residual{rest}</sup>")


def distributions_figure(view: dict, *, where: str = "", width: int = FIGURE_WIDTH, height: int = 680) -> go.Figure:
    """Three rows over the same tokens: p and q; the probability min(1, p/q) that each token, if drafted, is
    accepted; and the residual normalise(max(0, p − q)) the replacement is drawn from after a rejection."""
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.42, 0.29, 0.29],
                        subplot_titles=["target p and draft q", "accept probability min(1, p/q) if drafted",
                                        "residual normalise(max(0, p − q)): where a rejection resamples"])
    line = dict(color="black", width=view["outline"])
    fig.add_bar(x=view["x"], y=view["p"], name="p (target, full model)", marker=dict(color=PALETTE["target"],
                line=line), row=1, col=1, hovertemplate="%{x}<br>p = %{y:.4f}<extra></extra>")
    fig.add_bar(x=view["x"], y=view["q"], name="q (draft, skipped blocks)", marker=dict(color=PALETTE["draft"],
                line=line), row=1, col=1, hovertemplate="%{x}<br>q = %{y:.4f}<extra></extra>")
    fig.add_bar(x=view["x"], y=view["accept"], name="min(1, p/q)", marker_color=PALETTE["accepted"], row=2, col=1,
                hovertemplate="%{x}<br>accepted with probability %{y:.3f}<extra></extra>")
    fig.add_bar(x=view["x"], y=view["residual"], name="residual", marker_color=PALETTE["residual"], row=3, col=1,
                hovertemplate="%{x}<br>residual %{y:.4f}<extra></extra>")
    fig.add_hline(y=1.0, line=dict(color="black", width=1, dash="dot"), row=2, col=1)
    fig.update_yaxes(title_text="probability", row=1, col=1)
    fig.update_yaxes(title_text="P(accept)", range=[0, 1.08], row=2, col=1)
    fig.update_yaxes(title_text="probability", row=3, col=1)
    fig.update_xaxes(title_text="token (whitespace shown as ␣ ⏎)", tickangle=0, tickfont=dict(size=13), row=3,
                     col=1)
    fig.update_annotations(font=dict(size=12))
    fig.update_layout(barmode="group", template="plotly_white", width=width)
    header(fig, distribution_title(view, where), height, bottom=100)
    return fig


#: A small p and q for the schematic: q over-proposes some tokens and under-proposes others.
SCHEMATIC_P = {"the": 0.40, "a": 0.25, "this": 0.15, "one": 0.12, "my": 0.08}
SCHEMATIC_Q = {"the": 0.25, "a": 0.40, "this": 0.05, "one": 0.22, "my": 0.08}


def lossless_view(p: dict[str, float] | None = None, q: dict[str, float] | None = None) -> dict:
    """Lists for :func:`lossless_schematic`: per token p, q, the accepted mass min(p, q) and the residual mass
    max(0, p − q); α = Σ min(p, q). ``p`` and ``q``: {token: probability} over the same tokens (defaults: a small
    made-up pair)."""
    p, q = p or SCHEMATIC_P, q or SCHEMATIC_Q
    if set(p) != set(q):
        raise ValueError("p and q must be over the same tokens")
    x = list(p)
    accepted = [min(p[t], q[t]) for t in x]
    residual = [max(0.0, p[t] - q[t]) for t in x]
    return {"x": x, "p": [p[t] for t in x], "q": [q[t] for t in x], "accepted": accepted, "residual": residual,
            "alpha": sum(accepted), "rest": sum(residual)}


def lossless_schematic(view: dict | None = None, *, width: int = FIGURE_WIDTH, height: int = 430) -> go.Figure:
    """Why speculative sampling is lossless, as one slide: for every token the mass emitted by accepting a draft,
    min(p, q), stacked under the mass emitted by resampling after a rejection, (1 − α) · max(0, p − q) / (1 − α)
    = max(0, p − q); the stack is exactly p (outlined), whatever q (beside it) is."""
    v = view or lossless_view()
    fig = go.Figure()
    fig.add_bar(x=v["x"], y=v["accepted"], name=f"accepted draft: min(p, q)   (Σ = α = {v['alpha']:.2f})",
                marker_color=PALETTE["accepted"], offsetgroup="emitted", width=0.38, offset=-0.4,
                hovertemplate="%{x}<br>min(p, q) = %{y:.2f}<extra></extra>")
    fig.add_bar(x=v["x"], y=v["residual"], base=v["accepted"], offsetgroup="emitted", width=0.38, offset=-0.4,
                name=f"rejected, resampled: max(0, p − q)   (Σ = 1 − α = {v['rest']:.2f})",
                marker_color=PALETTE["residual"], hovertemplate="%{x}<br>max(0, p − q) = %{y:.2f}<extra></extra>")
    fig.add_bar(x=v["x"], y=v["p"], name="target p (the stack is exactly p)", offsetgroup="emitted", width=0.38,
                offset=-0.4, marker=dict(color="rgba(0,0,0,0)", line=dict(color=PALETTE["target"], width=3)),
                hovertemplate="%{x}<br>p = %{y:.2f}<extra></extra>")
    fig.add_bar(x=v["x"], y=v["q"], name="draft q (what was proposed)", width=0.3, offset=0.04,
                marker=dict(color=PALETTE["draft"], opacity=0.55), hovertemplate="%{x}<br>q = %{y:.2f}<extra></extra>")
    fig.update_layout(barmode="overlay", template="plotly_white", width=width, bargap=0.25)
    fig.update_yaxes(title_text="probability of emitting the token", rangemode="tozero")
    fig.update_xaxes(title_text="token", tickfont=dict(size=14))
    header(fig, "Why speculative sampling is lossless: min(p, q) + max(0, p − q) = p for every token", height,
           legend_rows=2)
    return fig


def monte_carlo_view(p: torch.Tensor, row: dict, labels: dict[int, str], *, k: int = 10) -> dict:
    """Lists for one panel of :func:`monte_carlo_figure` over the top tokens: p, the rule's empirical frequencies,
    their deviation (emitted − p) and the sampling noise of n draws from p itself (2 standard errors,
    2 √(p (1 − p) / n)): a deviation far outside that band is what the test detects."""
    freq = row["counts"].double() / row["n"]
    ids = top_tokens(p.double(), freq, k)
    verdict = "consistent with p" if row["consistent_with_p"] else "NOT distributed as p"
    p_value = row["p_value"]
    shown = "n/a (too few bins)" if math.isnan(p_value) else (f"{p_value:.3g}" if p_value >= 1e-4 else "< 1e-4")
    pv, fv = [float(p[i]) for i in ids], [float(freq[i]) for i in ids]
    return {"x": _names(ids, labels), "p": pv, "empirical": fv, "deviation": [f - q for f, q in zip(fv, pv)],
            "noise": [2 * math.sqrt(max(q * (1 - q), 0.0) / row["n"]) for q in pv], "zero": [0.0] * len(ids),
            "title": (f"<b>{row['rule']}</b>: χ² = {row['statistic']:.0f}, df = {row['df']}, p-value {shown} → "
                      f"{verdict}")}


def monte_carlo_figure(p: torch.Tensor, rows: list[dict], labels: dict[int, str], *, k: int = 8,
                       width: int = FIGURE_WIDTH, height: int | None = None) -> go.Figure:
    """One panel per rule: how far the frequency of each token the rule emitted in n Monte-Carlo runs lies from p
    (emitted − p, the most likely tokens; bars of p and of the frequency look alike at this scale), beside the
    band that n draws from p itself would scatter in; titled with the chi-square test of "distributed as p"."""
    if not rows:
        raise ValueError("no Monte-Carlo rows to draw")
    views = [monte_carlo_view(p, row, labels, k=k) for row in rows]
    # each panel at least twice its noise band tall: an exact rule's deviations stay small inside it, while a wrong
    # rule's fill their panel (one shared scale would let one very wrong rule flatten a subtly wrong one)
    reach = [1.15 * max(max(abs(d) for d in v["deviation"]), 2 * max(v["noise"]), 1e-6) for v in views]
    fig = make_subplots(rows=len(rows), cols=1, vertical_spacing=0.3 / len(rows),
                        subplot_titles=[v["title"] for v in views])
    for i, view in enumerate(views, start=1):
        fig.add_scatter(x=view["x"], y=view["zero"], mode="markers", marker=dict(size=1, color="rgba(0,0,0,0)"),
                        error_y=dict(type="data", array=view["noise"], color="#9e9e9e", thickness=8, width=0),
                        name="noise: ±2 standard errors of n draws from p", showlegend=i == 1, legendgroup="noise",
                        row=i, col=1, hovertemplate="%{x}<br>±%{error_y.array:.4f}<extra></extra>")
        fig.add_bar(x=view["x"], y=view["deviation"], name="emitted − p (Monte-Carlo frequency minus p)",
                    marker_color=PALETTE["live"], showlegend=i == 1, legendgroup="mc", row=i, col=1, width=0.35,
                    customdata=[[a, b] for a, b in zip(view["empirical"], view["p"])],
                    hovertemplate="%{x}<br>emitted %{customdata[0]:.4f} − p %{customdata[1]:.4f} = %{y:+.4f}"
                                  "<extra></extra>")
        fig.add_hline(y=0.0, line=dict(color="black", width=1), row=i, col=1)
        fig.update_yaxes(title_text="emitted − p", zeroline=False, range=[-reach[i - 1], reach[i - 1]], row=i, col=1)
        fig.update_xaxes(tickangle=0, tickfont=dict(size=12), row=i, col=1)
    fig.update_annotations(font=dict(size=12), x=0.0, xanchor="left")
    fig.update_layout(template="plotly_white", width=width)
    header(fig, f"{rows[0]['n']:,} Monte-Carlo runs of one drafted slot per rule, each tested against p at level "
                f"{rows[0]['level']}", height or 170 + 270 * len(rows), bottom=70)
    return fig


def temperature_view(sweep, curve: tuple[list[float], list[float]] | None = None) -> dict:
    """Lists for :func:`temperature_figure` from
    :func:`~labkit.measure.comparisons.speculative_sampling.temperature_sweep`."""
    col = lambda name: [float(v) for v in sweep[name]]                       # noqa: E731
    view = {name: col(name) for name in ("temperature", "measured_alpha", "predicted_alpha", "tokens_per_step",
                                         "expected_tokens_per_step", "measured_speedup", "speedup_min",
                                         "speedup_max", "predicted_speedup", "predicted_speedup_cv")}
    view["curve_t"], view["curve_alpha"] = (list(curve[0]), list(curve[1])) if curve else ([], [])
    return view


def temperature_figure(view: dict, *, gamma: int, current: float | None = None, width: int = FIGURE_WIDTH,
                       height: int = 520) -> go.Figure:
    """Three panels against the temperature: α (measured, predicted from the same decisions' p and q, and
    re-warped at one run's positions), tokens per step (measured vs Leviathan's E) and the wall-clock speedup
    over plain sampling (measured, with its min-max over the repetitions as error bars, vs E/(γc + 1) and
    E/(γc + c_v)). ``current``: a marker line (the slider)."""
    t = view["temperature"]
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                        subplot_titles=["α: per drafted token", f"tokens per step (γ = {gamma})",
                                        "speedup over plain sampling"])
    measured = dict(mode="lines+markers", marker=dict(size=9), line=dict(width=2.5))
    predicted = dict(mode="lines+markers", marker=dict(size=7, symbol="diamond"), line=dict(width=1.5, dash="dash"))
    traces = [
        (1, "measured_alpha", "α measured (accepted / tested)", PALETTE["acceptance"], measured),
        (1, "predicted_alpha", "α predicted: mean Σ min(p, q)", PALETTE["analytic"], predicted),
        (2, "tokens_per_step", "tokens per step, measured", PALETTE["tokens_per_step"], measured),
        (2, "expected_tokens_per_step", "Leviathan E(α, γ)", PALETTE["analytic"], predicted),
        (3, "measured_speedup", "speedup, measured (bars: min–max over repeats)", PALETTE["speedup"], measured),
        (3, "predicted_speedup", "Leviathan E / (γc + 1)", PALETTE["analytic"], predicted),
        (3, "predicted_speedup_cv", "E / (γc + c_v), verify cost measured", PALETTE["auxiliary"], predicted),
    ]
    spread = dict(type="data", symmetric=False, color=PALETTE["speedup"], thickness=1.5, width=4,
                  array=[hi - v for v, hi in zip(view["measured_speedup"], view["speedup_max"])],
                  arrayminus=[v - lo for v, lo in zip(view["measured_speedup"], view["speedup_min"])])
    for col, key, name, color, style in traces:
        error = {"error_y": spread} if key == "measured_speedup" else {}
        fig.add_scatter(x=t, y=view[key], name=name, line_color=color, **style, **error, row=1, col=col)
    fig.add_scatter(x=view["curve_t"], y=view["curve_alpha"], name="Σ min(p, q) re-warped at one run's positions",
                    mode="lines", line=dict(color=PALETTE["auxiliary"], width=1.5, dash="dot"), row=1, col=1)
    fig.add_hline(y=1.0, line=dict(color="black", width=1, dash="dot"), row=1, col=3)
    for col in (1, 2, 3):
        fig.add_vline(x=current if current is not None else t[0], line=dict(color=PALETTE["current"], width=2),
                      visible=current is not None, name=CURRENT_T, row=1, col=col)
        fig.update_xaxes(title_text="temperature T", row=1, col=col)
    fig.update_yaxes(range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(rangemode="tozero", row=1, col=2)        # from 0: three close points do not fill the panel
    fig.update_layout(template="plotly_white", width=width)
    # eight legend entries wrap to four rows at this width; one more band keeps the subplot titles clear of them
    header(fig, "Real sampled runs across temperatures, beside what p and q predict", height, legend_rows=5,
           left=50, bottom=60)
    return fig
