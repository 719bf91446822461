"""Choosing a drafter (notebook 08): the family map, every drafter on one chart, the exit layer, the
target-confidence gate, and where an early-exit generation spends its time."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import FIGURE_WIDTH, MODEL_COLORS, PALETTE, rgba

__all__ = ["family_map_figure", "drafter_comparison_figure", "exit_layer_figure", "gate_sweep_figure",
           "gate_control_figure",
           "gate_signal_figure", "gate_signal_traces", "early_exit_profile_figure"]

_GROUP_COLORS = {"fewer parameters per token": "#6a3d9a", "more tokens per forward": "#1565c0",
                 "both": "#2e7d32", "baseline": "#9e9e9e"}


def family_map_figure(methods: Sequence[Mapping], chapters: Sequence[Mapping], *,
                      title: str | None = None) -> go.Figure:
    """The survey's map: methods (boxes at their ``x``, ``y`` in [0, 1], coloured by ``group``) and the lab's
    chapters (numbered badges on the method each one teaches; hover for the title)."""
    fig = go.Figure()
    for group, x0, x1 in (("fewer parameters per token", 0.0, 0.40), ("more tokens per forward", 0.60, 1.0)):
        fig.add_shape(type="rect", x0=x0, x1=x1, y0=0.1, y1=0.97, line=dict(color=_GROUP_COLORS[group], width=1),
                      fillcolor=rgba(_GROUP_COLORS[group], 0.05), layer="below")
        fig.add_annotation(x=(x0 + x1) / 2, y=0.99, text=f"<b>{group}</b>", showarrow=False,
                           font=dict(color=_GROUP_COLORS[group], size=14), yanchor="bottom")
    where = {m["key"]: (m["x"], m["y"]) for m in methods}
    for m in methods:
        color = _GROUP_COLORS.get(m["group"], "#444")
        fig.add_annotation(x=m["x"], y=m["y"], text=m["label"], showarrow=False, align="center",
                           bordercolor=color, borderwidth=1.5, borderpad=5, bgcolor="white", font=dict(size=11),
                           hovertext=m.get("refs", ""))
        for target in m.get("feeds", ()):
            tx, ty = where[target]
            edge = _half_width(m["label"]) * (1 if tx > m["x"] else -1)   # leave from the box's side facing it
            fig.add_annotation(x=tx - 0.07 * np.sign(edge), y=ty, ax=m["x"] + edge, ay=m["y"], xref="x", yref="y",
                               axref="x", ayref="y", showarrow=True, arrowhead=2, arrowwidth=1.2, arrowcolor="#888",
                               text="")
    count = {m: sum(ch["method"] == m for ch in chapters) for m in where}
    seen: dict[str, int] = {}
    xs, ys, labels, hovers = [], [], [], []
    for ch in chapters:                                     # badges side by side just above their method
        x, y = where[ch["method"]]
        k = seen.get(ch["method"], 0)
        seen[ch["method"]] = k + 1
        xs.append(x + 0.04 * (k - (count[ch["method"]] - 1) / 2))
        ys.append(y + (0.125 if ch["method"] == "self-spec" else 0.085))
        labels.append(ch["number"])
        hovers.append(f"chapter {ch['number']}: {ch['title']}")
    fig.add_scatter(x=xs, y=ys, mode="markers+text", text=labels, hovertext=hovers, hoverinfo="text",
                    marker=dict(size=24, color=PALETTE["current"], line=dict(color="white", width=1)),
                    textfont=dict(color="white", size=10), name="the lab's chapters")
    caption = "<br>".join(_wrap([f"{c['number']} {c['title']}" for c in chapters], " · ", 110))
    fig.add_annotation(x=0.5, y=0.0, text=caption, showarrow=False, font=dict(size=11), yanchor="top")
    fig.update_xaxes(visible=False, range=[-0.02, 1.02])
    fig.update_yaxes(visible=False, range=[-0.12, 1.06])
    fig.update_layout(title=title or ("Where self-speculative decoding sits in its family "
                                      "(red badges: the lab's chapters)"),
                      width=FIGURE_WIDTH, height=600, showlegend=False, plot_bgcolor="white",
                      margin=dict(l=20, r=20, t=60, b=20))
    return fig


def _half_width(label: str, px_per_char: float = 5.6, px_per_unit: float = 750.0) -> float:
    """Half a map box's width in x units (11 px text, 5 px padding; the map's plot is about 750 px per unit), at
    least 0.13: where a connector leaves the box."""
    longest = max(len(re.sub(r"<[^>]+>", "", line)) for line in label.split("<br>"))
    return max(0.13, (longest * px_per_char + 14) / 2 / px_per_unit)


def _wrap(items: list[str], sep: str, width: int) -> list[str]:
    """``items`` joined by ``sep`` into lines of at most ``width`` characters (an item is never split)."""
    lines: list[str] = []
    for item in items:
        if lines and len(lines[-1]) + len(sep) + len(item) <= width:
            lines[-1] += sep + item
        else:
            lines.append(item)
    return lines


def _error_bars(rows: pd.DataFrame) -> dict:
    """Plotly error bars from the harness's per-repetition min and max of the speedup (none when absent)."""
    if "speedup_min" not in rows or rows["speedup_min"].isna().all():
        return dict(visible=False)
    return dict(type="data", symmetric=False, array=(rows["speedup_max"] - rows["speedup"]).tolist(),
                arrayminus=(rows["speedup"] - rows["speedup_min"]).tolist(), thickness=1.2, width=4)


def _short(name: str) -> str:
    """A chart label: 'early exit E=3' -> 'E3', 'layer skip (searched)' -> 'skip', 'prompt lookup' -> 'lookup'."""
    for long, short in (("early exit E=", "E"), ("layer skip (searched)", "skip"), ("layer skip (best draft)", "skip"),
                        ("separate model", "model"),
                        ("prompt lookup", "lookup"), ("lookup + ", "lookup+")):
        name = name.replace(long, short)
    return name


def drafter_comparison_figure(table: pd.DataFrame, *, title: str | None = None) -> go.Figure:
    """Every drafter: tokens per step (x) against speedup over plain decoding (y), coloured by family; open
    markers are gated (unlabelled: hover for their name); marker area grows with the parameters the drafter
    adds; hover for all the numbers. Labels are short: E3 = early exit after layer 3, skip = the searched layer
    skip, model = the separate model, lookup+X = prompt lookup in front of X."""
    rows = table.reset_index()
    rows = rows[rows["drafter"] != "plain"]
    if rows.empty:
        raise ValueError("no drafters in the table")
    fig = go.Figure()
    biggest = max(1, rows["extra_parameters"].max())
    for family in dict.fromkeys(rows["family"]):
        for gated in (False, True):
            sel = rows[(rows["family"] == family) & (rows["gate"].notna() == gated)]
            if sel.empty:
                continue
            sizes = [12 + 22 * math.sqrt(p / biggest) for p in sel["extra_parameters"]]
            custom = np.stack([sel["acceptance"].fillna(float("nan")), sel["extra_parameters"],
                               sel["ms_per_token"], sel["ms_min"], sel["ms_max"]], axis=1).tolist()
            fig.add_scatter(
                x=sel["tokens_per_step"].tolist(), y=sel["speedup"].tolist(),
                error_y=_error_bars(sel),
                mode="markers" if gated else "markers+text",              # gated twins: hover only (less clutter)
                text=sel["drafter"].tolist(), texttemplate=[_short(d) for d in sel["drafter"]],
                textposition="middle right", textfont=dict(size=10),
                name=f"{family}{' (gated)' if gated else ''}", customdata=custom,
                marker=dict(size=sizes, color="white" if gated else PALETTE.get(family, "#444"),
                            line=dict(color=PALETTE.get(family, "#444"), width=2),
                            symbol="circle"),
                hovertemplate="%{text}<br>speedup %{y:.2f}x · %{x:.2f} tokens/step<br>acceptance %{customdata[0]:.0%}"
                              "<br>extra parameters %{customdata[1]:,.0f}<br>%{customdata[2]:.2f} ms/token "
                              "(%{customdata[3]:.2f}-%{customdata[4]:.2f})<extra></extra>")
    xs = rows["tokens_per_step"].dropna()
    low, high = min(1.0, float(xs.min())), float(xs.max())
    fig.add_scatter(x=[low, high * 1.05], y=[1.0, 1.0], mode="lines",
                    line=dict(color="black", dash="dash", width=1), name="plain decoding (1x)", hoverinfo="skip")
    fig.update_xaxes(range=[low - 0.05 * (high - low), high + 0.2 * (high - low)])   # room for the labels at right
    fig.update_layout(title=title or "Every drafter on the same prompts (bars: min–max over repetitions; "
                                     "marker area: parameters added)",
                      xaxis_title="tokens per step (per full-model forward)",
                      yaxis_title="speedup over plain decoding (x)", width=FIGURE_WIDTH, height=560,
                      legend=dict(orientation="h", y=-0.15, x=0))
    return fig


def exit_layer_figure(table: pd.DataFrame, exit_alpha: Mapping[int, float] | None = None, *,
                      selected: int | None = None, title: str | None = None) -> go.Figure:
    """Early exit at each measured E, two panels on one E axis: acceptance on top (measured, bars; the logit lens'
    teacher-forced α, line), speedup below with its min-max bars, the best layer-skip draft and plain decoding as
    reference lines; ``selected`` E outlined and ringed (the last trace). Why two panels: one axis per quantity,
    no twin y-axes to misread, and bars one E wide however sparse the measured E."""
    ee = table[(table["family"] == "early exit") & table["gate"].isna()].sort_values("exit_layer")
    if ee.empty:
        raise ValueError("the table has no ungated early-exit rows")
    es = ee["exit_layer"].astype(int).tolist()
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.45, 0.55])
    fig.add_bar(x=es, y=ee["acceptance"].tolist(), name="acceptance (measured)", width=0.6,
                marker_color=rgba(PALETTE["early exit"], 0.55),
                marker_line=dict(color=[PALETTE["current"] if e == selected else rgba(PALETTE["early exit"], 0.55)
                                        for e in es],
                                 width=[3 if e == selected else 0 for e in es]),
                hovertemplate="E=%{x}: acceptance %{y:.0%}<extra></extra>", row=1, col=1)
    if exit_alpha:
        ks = [k for k in sorted(exit_alpha) if min(es) <= k <= max(es)]
        fig.add_scatter(x=ks, y=[exit_alpha[k] for k in ks], mode="lines+markers", name="lens α at E (teacher-forced)",
                        line=dict(color=PALETTE["acceptance"], dash="dot"), row=1, col=1,
                        hovertemplate="E=%{x}: %{y:.0%} of tokens already final<extra></extra>")
    fig.add_scatter(x=es, y=ee["speedup"].tolist(), mode="lines+markers", name="speedup (median, min-max)",
                    line=dict(color=PALETTE["speedup"], width=3), error_y=_error_bars(ee), row=2, col=1,
                    hovertemplate="E=%{x}: %{y:.2f}x<extra></extra>")
    skip = table[(table["family"] == "layer skip") & table["gate"].isna()]
    span = [min(es) - 0.5, max(es) + 0.5]
    if not skip.empty:
        name = skip.index[0] if skip.index.name == "drafter" else "layer skip"
        value = float(skip["speedup"].iloc[0])
        fig.add_scatter(x=span, y=[value, value], mode="lines", hoverinfo="skip", row=2, col=1,
                        line=dict(color=PALETTE["layer skip"], dash="dash"), name=f"{name}: {value:.2f}x")
    fig.add_scatter(x=span, y=[1.0, 1.0], mode="lines", hoverinfo="skip", row=2, col=1,
                    line=dict(color="black", dash="dot", width=1), name="plain decoding: 1x")
    chosen = ee[ee["exit_layer"] == selected]
    fig.add_scatter(x=chosen["exit_layer"].astype(int).tolist(), y=chosen["speedup"].tolist(), mode="markers",
                    name="selected E", hovertemplate="E=%{x}: %{y:.2f}x<extra>selected</extra>", row=2, col=1,
                    marker=dict(size=18, symbol="circle-open", color=PALETTE["current"], line=dict(width=3)))
    fig.update_yaxes(title_text="acceptance", range=[0, 1.05], tickformat=".0%", row=1, col=1)
    highs = ee["speedup_max"] if "speedup_max" in ee else ee["speedup"]
    top = max([1.0, *highs.dropna().tolist(), *skip["speedup"].tolist()]) * 1.1
    fig.update_yaxes(title_text="speedup over plain (x)", range=[0, top], tickformat=".2~f", row=2, col=1)
    fig.update_xaxes(tickmode="array", tickvals=es, range=span)
    fig.update_xaxes(title_text="exit layer E (the draft runs layers 0..E-1)", row=2, col=1)
    fig.update_layout(title=title or "Early exit: deeper exits draft better and cost more", width=FIGURE_WIDTH,
                      height=560, legend=dict(orientation="h", y=-0.14, x=0), bargap=0.4)
    return fig


def gate_sweep_figure(table: pd.DataFrame, *, title: str | None = None) -> go.Figure:
    """Speedup (left) and acceptance (right) against the gate's threshold, one line per prompt set (colour) and
    policy (dash); the ungated value of each line as a marker at threshold 0 ("no gate")."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["speedup over plain (x)", "acceptance (accepted / drafted)"],
                        horizontal_spacing=0.1)
    dashes = ["solid", "dash", "dot", "dashdot"]
    for color, prompts in zip(MODEL_COLORS, dict.fromkeys(table["prompts"])):
        for dash, policy in zip(dashes, dict.fromkeys(table["policy"])):
            sel = table[(table["prompts"] == prompts) & (table["policy"] == policy)]
            gated = sel[sel["threshold"].notna()].sort_values("threshold")
            base = sel[sel["threshold"].isna()]
            x = [0.0] + gated["threshold"].tolist()
            for col, key in ((1, "speedup"), (2, "acceptance")):
                y = base[key].tolist()[:1] + gated[key].tolist()
                fig.add_scatter(x=x, y=y, mode="lines+markers", line=dict(color=color, dash=dash), row=1, col=col,
                                name=f"{prompts} · {policy}", legendgroup=f"{prompts}{policy}", showlegend=col == 1,
                                hovertemplate=f"{prompts} · {policy}<br>gate %{{x}}: %{{y:.2f}}<extra></extra>")
    fig.add_hline(y=1.0, line_dash="dot", line_color="black", row=1, col=1)
    fig.update_xaxes(title_text="gate threshold (0 = no gate)", range=[-0.03, 1.0])
    fig.update_layout(title=title or "The target-confidence gate: speedup and acceptance against its threshold",
                      width=FIGURE_WIDTH, height=450, legend=dict(orientation="h", y=-0.22, x=0))
    return fig


#: Colours of the gate-control arms.
_ARM_COLORS = {"no gate": "#616161", "gate": "#1565c0", "random control": "#ef6c00"}


def gate_control_figure(table: pd.DataFrame, *, title: str | None = None) -> go.Figure:
    """Left: speedup over plain decoding of no gate, the gate and its random control (same fraction of steps made
    plain at random), grouped by prompt set, with min–max error bars over the interleaved repetitions; the value
    inside each bar at its base (clear of the 1x line); plain decoding as a labelled line. Right: the fraction of
    steps each arm decoded plainly."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38], horizontal_spacing=0.12,
                        subplot_titles=["speedup over plain (x), min–max over repetitions",
                                        "steps decoded plainly"])
    prompts = list(dict.fromkeys(table["prompts"]))
    for arm in ("no gate", "gate", "random control"):
        for t in sorted(table.loc[table["arm"] == arm, "threshold"].fillna(-1).unique()):
            sel = table[(table["arm"] == arm) & (table["threshold"].fillna(-1) == t)].set_index("prompts")
            sel = sel.reindex(prompts)
            name = arm if arm == "no gate" else f"{arm} {t:g}"
            fig.add_bar(x=prompts, y=sel["speedup"].tolist(), name=name, marker_color=_ARM_COLORS[arm],
                        error_y=_error_bars(sel), text=[f"{v:.2f}x" for v in sel["speedup"]],
                        textposition="inside", insidetextanchor="start", legendgroup=name, row=1, col=1,
                        hovertemplate=f"{name}, %{{x}} prompts: %{{y:.2f}}x<extra></extra>")
            fig.add_bar(x=prompts, y=sel["gated_fraction"].tolist(), name=name, marker_color=_ARM_COLORS[arm],
                        showlegend=False, legendgroup=name, row=1, col=2,
                        text=[f"{v:.0%}" for v in sel["gated_fraction"]], textposition="inside", textangle=0,
                        hovertemplate=f"{name}, %{{x}} prompts: %{{y:.0%}} of steps plain<extra></extra>")
    fig.add_hline(y=1.0, line=dict(color="black", dash="dot", width=1), row=1, col=1)
    fig.add_scatter(x=[None], y=[None], mode="lines", line=dict(color="black", dash="dot", width=1),
                    name="plain decoding (1x)", hoverinfo="skip", row=1, col=1)   # the line's legend entry
    fig.update_yaxes(rangemode="tozero", row=1, col=1)
    fig.update_yaxes(range=[0, 1], tickformat=".0%", row=1, col=2)
    fig.update_layout(barmode="group", title=title or "Does the gate pick the right steps? Gate vs its random control",
                      width=FIGURE_WIDTH, height=440, legend=dict(orientation="h", y=-0.18, x=0))
    return fig


#: The four histogram traces of the gate figure: (first drafted token accepted?, kept by the gate?, name).
GATE_SIGNAL_PARTS = ((True, True, "accepted, drafted"), (False, True, "rejected, drafted"),
                     (True, False, "accepted, gated away"), (False, False, "rejected, gated away"))


def gate_signal_traces(signal: pd.DataFrame, threshold: float) -> list[list[float]]:
    """The x values (previous confidences) of each trace of :func:`gate_signal_figure`, as Python lists."""
    kept = signal["prev_confidence"] >= threshold
    return [signal.loc[(signal["first_accepted"] == accepted) & (kept == keep), "prev_confidence"].tolist()
            for accepted, keep, _ in GATE_SIGNAL_PARTS]


def gate_signal_figure(signal: pd.DataFrame, threshold: float, *, title: str | None = None) -> go.Figure:
    """What the gate reads: the target's confidence in the token before each drafted step, split by whether the
    step's first drafted token was accepted (green) or not (red); faded: the steps a gate at ``threshold`` would
    have decoded plainly."""
    fig = go.Figure()
    bins = dict(start=0.0, end=1.0, size=0.05)
    for (accepted, keep, name), values in zip(GATE_SIGNAL_PARTS, gate_signal_traces(signal, threshold)):
        color = PALETTE["accepted"] if accepted else PALETTE["rejected"]
        fig.add_histogram(x=values, xbins=bins, name=name, marker_color=color, opacity=0.85 if keep else 0.3)
    fig.add_vline(x=float(threshold), line_color=PALETTE["threshold"], line_width=3)
    fig.add_vrect(x0=0, x1=float(threshold), fillcolor=rgba(PALETTE["threshold"], 0.08), line_width=0)
    fig.add_annotation(x=float(threshold), y=1.0, yref="paper",
                       text=f"gate {threshold:.2f}: steps left of here go plain",
                       showarrow=False, xanchor="left", yanchor="bottom")
    fig.update_layout(barmode="stack", title=title or "What the gate reads: the target's confidence in its last token",
                      xaxis_title="target's probability of the token it emitted before the step",
                      yaxis_title="drafted steps", width=FIGURE_WIDTH, height=400,
                      legend=dict(orientation="h", y=-0.22, x=0))
    fig.update_xaxes(range=[0, 1])
    return fig


def early_exit_profile_figure(profiles: Mapping[str, dict], *, title: str | None = None) -> go.Figure:
    """Stacked bars, ms per generated token by where it went (full forwards, early layers only, late layers
    only, outside model calls), one bar per implementation; the first layer's token count as text."""
    parts = (("full", "full forward"), ("early", "early layers"), ("late", "late layers"), ("outside", "outside model"))
    names = list(profiles)
    fig = go.Figure()
    for key, label in parts:
        fig.add_bar(y=names, x=[profiles[n][f"{key}_ms_per_token"] for n in names], orientation="h", name=label,
                    marker_color=PALETTE[label], hovertemplate=f"%{{y}}<br>{label}: %{{x:.2f}} ms/token<extra></extra>")
    for n in names:
        p = profiles[n]
        fig.add_annotation(y=n, x=p["ms_per_token"], text=f"  {p['ms_per_token']:.2f} ms/token · layer 0 read "
                           f"{p['first_layer_tokens']} tokens, layer L-1 {p['last_layer_tokens']}",
                           showarrow=False, xanchor="left", font=dict(size=11))
    longest = max(p["ms_per_token"] for p in profiles.values())
    fig.update_layout(barmode="stack", title=title or "Early exit, ours vs transformers': where the time goes",
                      xaxis_title="ms per generated token", xaxis_range=[0, 1.9 * longest], width=FIGURE_WIDTH,
                      height=160 + 60 * len(names), legend=dict(orientation="h", y=-0.35, x=0),
                      margin=dict(l=230))
    return fig
