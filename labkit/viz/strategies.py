"""Static versus adaptive skip sets (notebook 07): acceptance and speed per prompt source and strategy, the time
spent choosing, and the sets each strategy drafted with, step by step."""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ..measure.comparisons.adaptive import PLAIN
from .style import FIGURE_WIDTH, PALETTE

__all__ = ["source_color", "agreement_figure", "acceptance_figure", "speedup_figure", "overhead_figure",
           "set_timeline_figure", "block_labels", "TIMELINE_COLORSCALE"]

#: z of the set timeline: -1 no self-draft that step (prompt lookup, or nothing drafted), 0 kept, 1 skipped
TIMELINE_COLORSCALE = [[0.0, PALETTE["no_self_draft"]], [0.33, PALETTE["no_self_draft"]],
                       [0.34, PALETTE["kept"]], [0.66, PALETTE["kept"]], [0.67, PALETTE["skipped"]],
                       [1.0, PALETTE["skipped"]]]


def source_color(source: str) -> str:
    return PALETTE.get(f"source_{source}", PALETTE["source_file"])


def _methods(frame) -> list[str]:
    return [m for m in dict.fromkeys(frame["method"]) if m != PLAIN]


def _reference_line(fig: go.Figure, y: float, name: str, **line) -> None:
    """A horizontal reference line across the plot, labelled in the legend (a text label on the plot would
    collide with the bars' value labels)."""
    fig.add_hline(y=y, line=line)
    fig.add_scatter(x=[None], y=[None], mode="lines", line=line, name=name, hoverinfo="skip")


def _grouped_bars(frame, column: str, *, text: str, hover: str, textposition: str = "outside",
                  spread: bool = False) -> go.Figure:
    """One bar per method and source; ``spread``: min–max error bars from ``{column}_min`` / ``{column}_max``
    (an inside value label then sits at the bar's base, clear of the error bar and of a reference line at 1: a bar
    about twice that tall has its middle on the line)."""
    fig = go.Figure()
    methods = _methods(frame)
    for source in dict.fromkeys(frame["source"]):
        part = frame[(frame["source"] == source) & (frame["method"] != PLAIN)].set_index("method")
        y = [float(part.loc[m, column]) if m in part.index else None for m in methods]
        errors = {}
        if spread and f"{column}_min" in part:
            lo = [float(part.loc[m, f"{column}_min"]) if m in part.index else None for m in methods]
            hi = [float(part.loc[m, f"{column}_max"]) if m in part.index else None for m in methods]
            errors = dict(error_y=dict(type="data", symmetric=False, thickness=1.2, width=4,
                                       array=[h - v if v is not None else None for h, v in zip(hi, y)],
                                       arrayminus=[v - lo_ if v is not None else None for lo_, v in zip(lo, y)]))
        fig.add_bar(x=methods, y=y, name=f"{source} prompts", marker_color=source_color(source),
                    offsetgroup=f"{source} prompts", text=[text.format(v) if v is not None else "" for v in y],
                    textposition=textposition, insidetextanchor="start" if errors else "middle", **errors,
                    hovertemplate=f"%{{x}}, {source} prompts: {hover}<extra></extra>")
    fig.update_layout(barmode="group", width=FIGURE_WIDTH, height=430, legend_title_text="prompts",
                      xaxis_title="how the draft's skip set is chosen")
    return fig


def agreement_figure(agreement) -> go.Figure:
    """Teacher-forced agreement of each static set with the full model, per prompt source (grouped bars)."""
    fig = go.Figure()
    sets = list(dict.fromkeys(agreement["set"]))
    for source in dict.fromkeys(agreement["source"]):
        part = agreement[agreement["source"] == source].set_index("set")
        y = [float(part.loc[s, "agreement"]) for s in sets]
        fig.add_bar(x=sets, y=y, name=f"{source} prompts", marker_color=source_color(source),
                    text=[f"{v:.2f}" for v in y], textposition="outside",
                    hovertemplate="%{x}, " + source + " prompts: agreement %{y:.3f}<extra></extra>")
    fig.update_layout(title="Where the skipped model agrees with the full model (teacher-forced)", barmode="group",
                      width=min(FIGURE_WIDTH, 760), height=420, yaxis_range=[0, 1.08], legend_title_text="prompts",
                      xaxis_title="static skip set", yaxis_title="agreement (top-1 = full model's greedy token)")
    return fig


def acceptance_figure(frame) -> go.Figure:
    """Acceptance (accepted / drafted) of every method on every prompt source."""
    fig = _grouped_bars(frame, "acceptance", text="{:.2f}", hover="acceptance %{y:.3f}")
    fig.update_layout(title="Acceptance of drafted tokens, per prompt source", yaxis_range=[0, 1.1],
                      yaxis_title="accepted / drafted")
    return fig


def speedup_figure(frame, xaxis_title: str | None = None) -> go.Figure:
    """Speedup over the plain loop of the same run, per method and source, with each row's analytic limit
    (A + 1) / (d c + c_v) as a marker and 1.0 (as fast as plain decoding) as a line. ``xaxis_title``: what the
    methods differ in (default: how the skip set is chosen)."""
    fig = _grouped_bars(frame, "speedup", text="{:.2f}×", hover="%{y:.2f}× the plain loop", textposition="inside",
                        spread=True)
    methods = _methods(frame)
    for i, source in enumerate(dict.fromkeys(frame["source"])):
        part = frame[(frame["source"] == source) & (frame["method"] != PLAIN)].set_index("method")
        fig.add_scatter(x=methods, y=[float(part.loc[m, "limit"]) if m in part.index else None for m in methods],
                        mode="markers", marker=dict(symbol="diamond-open", size=11, color=PALETTE["analytic"]),
                        name="analytic limit", showlegend=i == 0, offsetgroup=f"{source} prompts",
                        hovertemplate="%{x}: limit %{y:.2f}×<extra>" + source + "</extra>")
    _reference_line(fig, 1.0, "plain loop (1×)", dash="dash", color="black", width=1)
    fig.update_layout(title="Speed over the plain loop (same interleaved run; bars: min–max over repetitions), "
                            "and the analytic limit",
                      yaxis_title="speedup (×, higher is faster)", scattermode="group")
    if xaxis_title:
        fig.update_layout(xaxis_title=xaxis_title)
    return fig


def overhead_figure(frame, budget: float = 0.1) -> go.Figure:
    """Time spent choosing sets as a share of decode time, per method and source, with the target line."""
    shown = frame.assign(select_pct=100 * frame["select_share"])
    fig = _grouped_bars(shown, "select_pct", text="{:.1f}%", hover="choosing = %{y:.1f}% of decode time")
    _reference_line(fig, 100 * budget, f"target: {100 * budget:g} % of decode time", dash="dot",
                    color=PALETTE["current"], width=2)
    top = max(100 * budget, float(shown["select_pct"].max(skipna=True) or 0.0))
    line, reach = 100 * budget, 0.09 * 1.25 * top       # a label above its bar spans about 9 % of the axis
    for bar in fig.data:
        if bar.type == "bar":                           # a label that would sit on the target line goes inside
            bar.textposition = ["inside" if v is not None and line - reach <= v <= line else "outside" for v in bar.y]
    fig.update_layout(title="What choosing costs", yaxis_title="time choosing / decode time (%)",
                      yaxis_range=[0, 1.25 * top])
    return fig


def block_labels(n_layers: int) -> list[str]:
    return [f"attention {i}" for i in range(n_layers)] + [f"MLP {i}" for i in range(n_layers)]


def set_timeline_figure(steps: Sequence[int], matrix: Sequence[Sequence[int]], n_layers: int, *,
                        title: str = "Which blocks each step's draft skipped",
                        boundaries: Sequence[int] = ()) -> go.Figure:
    """Steps across, the 2L blocks down: orange where that step's draft skipped the block, pale blue where it
    kept it, grey where no self-draft ran (prompt lookup, or nothing drafted). ``steps``/``matrix`` from
    :func:`labkit.measure.comparisons.adaptive.set_timeline`; ``boundaries``: the steps where a new prompt starts
    (several prompts' timelines end to end), drawn as black lines."""
    fig = go.Figure(go.Heatmap(
        z=[list(row) for row in matrix], x=list(steps), y=block_labels(n_layers), zmin=-1, zmax=1,
        colorscale=TIMELINE_COLORSCALE, xgap=1, ygap=1, showscale=False,
        hovertemplate="step %{x}, %{y}: %{customdata}<extra></extra>",
        customdata=[[{-1: "no self-draft", 0: "kept", 1: "skipped"}[v] for v in row] for row in matrix],
    ))
    for name, color in (("skipped", PALETTE["skipped"]), ("kept", PALETTE["kept"]),
                        ("no self-draft (lookup, or nothing drafted)", PALETTE["no_self_draft"])):
        fig.add_scatter(x=[None], y=[None], mode="markers", marker=dict(size=12, symbol="square", color=color),
                        name=name)
    for b in boundaries:
        fig.add_vline(x=b - 0.5, line=dict(color="black", width=2))
    fig.update_layout(title=title, width=FIGURE_WIDTH, height=170 + 22 * 2 * n_layers, xaxis_title="decoding step",
                      yaxis_title="block", yaxis_autorange="reversed", legend_orientation="h",
                      legend_y=-0.25, plot_bgcolor="white")
    return fig
