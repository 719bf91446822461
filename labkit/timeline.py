"""The draft/verify timeline, token by token: figure builders and the step replayer (notebook 03).

Everything here reads a :class:`~labkit.trace.Trace` (or a :class:`~labkit.decoding.GenerationResult`)
that :func:`~labkit.decoding.speculative_generate` recorded; nothing is simulated. Figures are
pure builders that return a ``plotly.graph_objects.Figure`` (they never show it).

Colours mean the same thing in every figure and in the replayer's text (:data:`KIND_COLORS`):
green = a drafted token the target accepted, red = the first drafted token it rejected, grey and
struck through = drafted after that rejection (thrown away, whatever the target says), blue = a token the *target*
chose itself (dark blue: its replacement for the rejected token; light blue: the bonus token
after a fully accepted draft).

Time axis: the measured phase durations (``StepRecord.draft_s``, ``verify_s``, and
``Trace.prefill_s``) laid end to end from the start of the call, in milliseconds. The small
bookkeeping gaps between phases are not measured and therefore not drawn.
"""
from __future__ import annotations

import contextlib
import html
import math
import re
import time
from pathlib import Path

import torch

from .skip import SkipSet
from .trace import Trace

__all__ = [
    "KIND_COLORS", "KIND_LABELS", "visible", "token_labels", "step_times", "timeline_figure",
    "comparison_figure", "confidence_figure", "threshold_trajectory_figure", "one_pass_check",
    "one_pass_figure", "summary_frame", "TraceReplayer", "demo_skip_set", "pick_prompt",
    "load_draft_model", "step_html", "compare_drafters", "highlight_shape",
]

# ---------------------------------------------------------------------------------------
# one palette for every figure and the replayer
# ---------------------------------------------------------------------------------------
KIND_COLORS = {
    "accepted": "#2ca25f",       # green: the target agreed
    "rejected": "#de2d26",       # red: the first disagreement
    "discarded": "#d4d4d4",      # grey, hatched and struck: drafted after the rejection, thrown away
    "replacement": "#2166ac",    # dark blue: the target's own token in place of the rejected one
    "bonus": "#92c5de",          # light blue: the target's extra token after a fully accepted draft
    "verify": "#bdbdbd",         # a verify pass that emitted no token of its own (accepted EOS)
    "prefill": "#efefef",        # the full model reading the prompt
}
KIND_TEXT_COLORS = {"accepted": "white", "rejected": "white", "discarded": "#525252", "replacement": "white",
                    "bonus": "#08306b", "verify": "#252525", "prefill": "#525252"}
KIND_LABELS = {
    "accepted": "accepted draft token",
    "rejected": "rejected draft token",
    "discarded": "discarded (after a rejection)",
    "replacement": "target's replacement",
    "bonus": "target's bonus token",
    "verify": "verify only (accepted EOS)",
    "prefill": "prompt prefill",
}
DRAFT_KINDS = ("accepted", "rejected", "discarded")
TARGET_KINDS = ("replacement", "bonus")
THRESHOLD_COLOR = "#7f3b08"      # brown: the policy's threshold (not a token kind)
HIGHLIGHT_NAME = "current step"

_VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍"}


def visible(text: str, compact: bool = True) -> str:
    """Whitespace made visible: ' ' -> '␣', newline -> '⏎', tab -> '⇥'; ``compact`` shortens runs of 4+ spaces
    to '␣×N'. An empty string (a token that decodes to nothing on its own) becomes '∅'."""
    if text == "":
        return "∅"
    out = "".join(_VISIBLE.get(c, c) for c in text)
    if compact:
        out = re.sub("␣{4,}", lambda m: f"␣×{len(m.group(0))}", out)
    return out


def token_labels(tokenizer, token_ids, compact: bool = True) -> dict[int, str]:
    """{token id: visible text} decoded one token at a time with ``tokenizer.decode([id])``."""
    labels = {}
    for t in set(int(t) for t in token_ids):
        labels[t] = visible(tokenizer.decode([t]), compact) if t >= 0 else "∅"
    return labels


def _plotly_text(text: str) -> str:
    """Plotly reads a small HTML subset in text: escape the token's own '<', '>' and '&'."""
    return html.escape(text, quote=False)


def _header(fig, title: str, height: int, legend_rows: int = 1, left: int = 70, right: int = 20,
            bottom: int = 50) -> None:
    """Title at the top, the legend in its own band under it (never over it), the plot below."""
    two_lines = "<br>" in title
    title_px = 58 if two_lines else 38
    fig.update_layout(
        height=height,
        # plotly anchors a two-line title by its first line: shift it down by a line
        title=dict(text=title, x=0.01, xanchor="left", y=1 - (30 if two_lines else 10) / height, yref="container",
                   yanchor="top"),
        legend=dict(orientation="h", x=0.0, xanchor="left", y=1 - (title_px + 8) / height, yref="container",
                    yanchor="top", font=dict(size=11), traceorder="normal"),
        margin=dict(l=left, r=right, b=bottom, t=title_px + 28 + 24 * legend_rows),
    )


def _as_trace(obj) -> Trace:
    trace = getattr(obj, "trace", obj)
    if not isinstance(trace, Trace):
        raise TypeError(f"expected a labkit Trace or a GenerationResult with a trace, got {type(obj).__name__}")
    return trace


# ---------------------------------------------------------------------------------------
# time layout
# ---------------------------------------------------------------------------------------
def step_times(trace, include_prefill: bool = True):
    """One row per step: when its draft and verify phases start and end (ms from the start of the call).

    Phases are laid end to end with their measured durations; with ``include_prefill`` the first
    draft starts after the prompt's prefill (which starts at 0).
    """
    import pandas as pd

    trace = _as_trace(trace)
    t = 1e3 * trace.prefill_s if include_prefill else 0.0
    rows = []
    for i, s in enumerate(trace.steps):
        d0, d1 = t, t + 1e3 * s.draft_s
        v1 = d1 + 1e3 * s.verify_s
        rows.append({"step": i, "draft_start_ms": d0, "draft_end_ms": d1, "verify_start_ms": d1, "verify_end_ms": v1,
                     "n_drafted": s.n_drafted, "n_accepted": s.n_accepted, "next_kind": s.next_kind})
        t = v1
    return pd.DataFrame(rows, columns=["step", "draft_start_ms", "draft_end_ms", "verify_start_ms", "verify_end_ms",
                                       "n_drafted", "n_accepted", "next_kind"])


def _window_ms(times, trace, steps, window_ms, include_prefill) -> tuple[float, float]:
    if window_ms is not None:
        return float(window_ms[0]), float(window_ms[1])
    if len(times) == 0:
        return 0.0, max(1e3 * trace.prefill_s, 1.0)
    first, last = (0, len(times) - 1) if steps is None else (max(0, steps[0]), min(len(times) - 1, steps[1]))
    start = 0.0 if (first == 0 and include_prefill) else float(times.draft_start_ms[first])
    end = float(times.verify_end_ms[last])
    pad = 0.01 * (end - start)
    return start - pad, end + pad


# character width estimate for chip text (font size 11): chips get text only when it fits
_CHAR_PX = 6.3
_PLOT_MARGIN_PX = 190
# Figures take the width of the notebook's output column (width=None); chip text is fitted for this many px, the
# column beside JupyterLab's file browser at a 1280-px window (wider columns only leave the text more room).
_NOMINAL_WIDTH_PX = 820


def _fits(text: str, width_ms: float, px_per_ms: float) -> bool:
    return len(text) * _CHAR_PX + 4 <= width_ms * px_per_ms


def _timeline_bars(trace: Trace, tokenizer, *, lanes: tuple[float, float], px_per_ms: float, include_prefill: bool,
                   showlegend: bool):
    """Plotly bar traces (one per kind, ``meta={"kind": ...}``) for one trace's two lanes, and its step times."""
    import plotly.graph_objects as go

    y_draft, y_verify = lanes
    times = step_times(trace, include_prefill)
    ids = [t for s in trace.steps for t in s.drafted] + [s.next_token for s in trace.steps]
    short, full = token_labels(tokenizer, ids), token_labels(tokenizer, ids, compact=False)
    bars = {k: {"base": [], "x": [], "y": [], "text": [], "hover": [], "step": []} for k in KIND_COLORS}

    def add(kind, start, width, y, text, hover, step):
        b = bars[kind]
        b["base"].append(start)
        b["x"].append(width)
        b["y"].append(y)
        b["text"].append(text)
        b["hover"].append(hover)
        b["step"].append(step)

    if include_prefill:
        text = f"prompt: {trace.prompt_length} tokens"
        text = text if _fits(text, 1e3 * trace.prefill_s, px_per_ms) else ""
        add("prefill", 0.0, 1e3 * trace.prefill_s, y_verify, text,
            f"<b>prefill</b>: the full model reads the {trace.prompt_length}-token prompt<br>"
            f"{1e3 * trace.prefill_s:.1f} ms", -1)
    for i, s in enumerate(trace.steps):
        row = times.iloc[i]
        k = s.n_drafted
        chip = (row.draft_end_ms - row.draft_start_ms) / k if k else 0.0
        for j, tok in enumerate(s.drafted):
            kind = "accepted" if j < s.n_accepted else ("rejected" if j == s.n_accepted else "discarded")
            q, p = s.q[j], s.p[j]
            lines = [f"<b>{_plotly_text(full[tok])}</b>  ({KIND_LABELS[kind]})",
                     f"step {i}, drafted token {j + 1} of {k}",
                     f"draft probability q = {q:.3f}", f"target probability p = {p:.3f}"]
            if trace.sampling:
                ratio = min(1.0, p / q) if q > 0 else float("nan")
                note = "" if kind != "discarded" else " (never tested: an earlier token was rejected)"
                lines.append(f"accept probability min(1, p/q) = {ratio:.3f}{note}")
            else:
                lines.append("greedy: accepted iff it equals the target's argmax")
            lines.append(f"draft confidence (top-1) = {s.confidence[j]:.3f}"
                         + (f", threshold {s.threshold:.3f}" if s.threshold is not None else ""))
            text = ""
            if _fits(short[tok], chip, px_per_ms):      # measured on the plain label: tags take no room
                text = _plotly_text(short[tok])
                text = f"<s>{text}</s>" if kind == "discarded" else text
            add(kind, row.draft_start_ms + j * chip, chip, y_draft, text, "<br>".join(lines), i)
        # the verify pass: one bar, coloured by the token the target appended
        width = row.verify_end_ms - row.verify_start_ms
        kind = s.next_kind if s.next_kind in TARGET_KINDS else "verify"
        tok_text = _plotly_text(short[s.next_token]) if kind != "verify" else ""
        head = f"<b>step {i} · verify</b>: 1 forward pass of the full model checked {k} drafted token{'s' * (k != 1)}"
        lines = [head, f"accepted {s.n_accepted} of {k}", f"{width:.1f} ms (draft phase {1e3 * s.draft_s:.1f} ms)"]
        if kind == "replacement":
            lines.append(f"target's replacement <b>{_plotly_text(full[s.next_token])}</b> for rejected "
                         f"{_plotly_text(full[s.drafted[s.n_accepted]])}")
        elif kind == "bonus":
            lines.append(f"all {k} accepted: target's bonus token <b>{_plotly_text(full[s.next_token])}</b>")
        else:
            lines.append("the draft ended on an accepted end-of-text token: nothing more to add")
        label = short[s.next_token] if kind != "verify" else ""
        # longest text that fits; lengths are measured on the plain label
        candidates = [f"checks {k} → {{}}", "→ {}", "{}"] if label else [f"checks {k}"]
        text = next((c.format(tok_text) for c in candidates if _fits(c.format(label), width, px_per_ms)), "")
        add(kind, row.verify_start_ms, width, y_verify, text, "<br>".join(lines), i)

    traces = []
    for kind, b in bars.items():
        if not b["x"]:
            continue
        marker = dict(color=KIND_COLORS[kind], line=dict(color="white", width=1))
        if kind == "discarded":
            marker["pattern"] = dict(shape="/", fgcolor="#9e9e9e", size=6, solidity=0.15)
        if kind == "prefill":
            marker["line"] = dict(color="#9e9e9e", width=1)
        traces.append(go.Bar(
            orientation="h", base=b["base"], x=b["x"], y=b["y"], width=0.62, name=KIND_LABELS[kind],
            legendgroup=kind, showlegend=showlegend, marker=marker, text=b["text"], textposition="inside",
            insidetextanchor="middle", textangle=0, textfont=dict(color=KIND_TEXT_COLORS[kind], size=11),
            hovertext=b["hover"], hovertemplate="%{hovertext}<extra></extra>", customdata=b["step"],
            meta={"kind": kind}, cliponaxis=True,
        ))
    return traces, times


def _lane_axis(draft_label: str, lanes=(1.0, 0.0)) -> dict:
    return dict(tickvals=[lanes[1], lanes[0]], ticktext=["<b>verify</b><br>full model,<br>1 pass per step",
                                                          f"<b>draft</b><br>{draft_label}"],
                range=[min(lanes) - 0.6, max(lanes) + 0.75], fixedrange=True, zeroline=False, showgrid=False,
                ticklabelstandoff=8)


def _step_decorations(times, y0, y1, px_per_ms, xref="x", yref="y", label_y=None):
    """Alternating background bands per step and 'step i' labels where there is room."""
    shapes, annotations = [], []
    for row in times.itertuples():
        if row.step % 2 == 1:
            shapes.append(dict(type="rect", xref=xref, yref=yref, x0=row.draft_start_ms, x1=row.verify_end_ms,
                               y0=y0, y1=y1, fillcolor="rgba(0,0,0,0.045)", line=dict(width=0), layer="below"))
        if label_y is not None and (row.verify_end_ms - row.draft_start_ms) * px_per_ms >= 44:
            annotations.append(dict(x=0.5 * (row.draft_start_ms + row.verify_end_ms), y=label_y, xref=xref, yref=yref,
                                    text=f"step {row.step}", showarrow=False, font=dict(size=10, color="#636363")))
    return shapes, annotations


def highlight_shape(times, step: int, y0=-0.5, y1=1.6, xref="x", yref="y") -> dict:
    """A yellow frame around one step's draft + verify phases."""
    row = times.iloc[step]
    return dict(type="rect", xref=xref, yref=yref, x0=row.draft_start_ms, x1=row.verify_end_ms, y0=y0, y1=y1,
                fillcolor="rgba(255, 196, 0, 0.16)", line=dict(color="#e6a100", width=2), layer="below",
                name=HIGHLIGHT_NAME)


def timeline_figure(trace, tokenizer, *, steps: tuple[int, int] | None = None,
                    window_ms: tuple[float, float] | None = None, draft_label: str = "skipped layers",
                    highlight_step: int | None = None, include_prefill: bool = True, width: int | None = None,
                    height: int = 330, title: str | None = None):
    """Draft and verify lanes on one wall-clock axis (ms), one chip per token.

    ``steps=(first, last)`` (inclusive) or ``window_ms=(t0, t1)`` sets the initially visible window
    (pan or zoom out in the figure to see the rest); chips carry their token's text when it fits
    that window. ``draft_label`` names the drafter (e.g. "skipped layers", "2-layer draft model").
    """
    import plotly.graph_objects as go

    trace = _as_trace(trace)
    times = step_times(trace, include_prefill)
    x0, x1 = _window_ms(times, trace, steps, window_ms, include_prefill)
    px_per_ms = ((width or _NOMINAL_WIDTH_PX) - _PLOT_MARGIN_PX) / max(x1 - x0, 1e-9)
    bars, _ = _timeline_bars(trace, tokenizer, lanes=(1.0, 0.0), px_per_ms=px_per_ms, include_prefill=include_prefill,
                             showlegend=True)
    fig = go.Figure(bars)
    shapes, annotations = _step_decorations(times, -0.5, 1.6, px_per_ms, label_y=1.55)
    if highlight_step is not None and len(times):
        shapes.append(highlight_shape(times, highlight_step))
    s = trace.summary()
    mode = "sampling" if trace.sampling else "greedy"
    subtitle = (f"{mode} · {s['steps']} steps · {s['emitted']} tokens · acceptance {s['acceptance_rate']:.0%} · "
                f"{s['tokens_per_step']:.2f} tokens per step · {s['ms_per_token_with_prefill']:.1f} ms per token")
    fig.update_layout(
        barmode="overlay", width=width, shapes=shapes, annotations=annotations,
        xaxis=dict(title="wall-clock time since the call started (ms)", range=[x0, x1], zeroline=False),
        yaxis=_lane_axis(draft_label), plot_bgcolor="white", bargap=0,
        uniformtext=dict(minsize=9, mode="hide"), hoverlabel=dict(font=dict(family="monospace", size=12)),
    )
    _header(fig, f"{title or 'Draft/verify timeline, token by token'}<br><sup>{subtitle}</sup>", height, left=110)
    return fig


def comparison_figure(traces: dict, tokenizer, *, window_ms: tuple[float, float] | None = None,
                      first_steps: int | None = None, draft_labels: dict | None = None, width: int | None = None,
                      row_height: int = 190,
                      title: str = "Same prompt, different drafting: timelines on one time scale"):
    """Timelines of several runs stacked on a shared ms axis (``traces``: {label: Trace or GenerationResult}).

    The initial view: ``window_ms``, else the time the slowest run needed for its ``first_steps`` steps,
    else everything.
    """
    from plotly.subplots import make_subplots

    labels = list(traces)
    draft_labels = draft_labels or {}
    subtitles = []
    for label in labels:
        s = _as_trace(traces[label]).summary()
        subtitles.append(f"<b>{label}</b>: acceptance {s['acceptance_rate']:.0%}, {s['tokens_per_step']:.2f} tokens/step, "
                         f"{s['ms_per_token_with_prefill']:.1f} ms/token")
    fig = make_subplots(rows=len(labels), cols=1, shared_xaxes=True, vertical_spacing=0.16 / max(1, len(labels) - 1)
                        if len(labels) > 1 else 0.0, subplot_titles=subtitles)
    all_times = {label: step_times(_as_trace(traces[label])) for label in labels}
    if window_ms is None:
        last = (lambda t: len(t) - 1) if first_steps is None else (lambda t: min(first_steps, len(t)) - 1)
        end = max((float(t.verify_end_ms.iloc[last(t)]) for t in all_times.values() if len(t)), default=1.0)
        window_ms = (-0.01 * end, 1.01 * end)
    px_per_ms = ((width or _NOMINAL_WIDTH_PX) - _PLOT_MARGIN_PX) / max(window_ms[1] - window_ms[0], 1e-9)
    seen = set()
    for r, label in enumerate(labels, start=1):
        trace = _as_trace(traces[label])
        bars, times = _timeline_bars(trace, tokenizer, lanes=(1.0, 0.0), px_per_ms=px_per_ms, include_prefill=True,
                                     showlegend=False)
        for bar in bars:
            kind = bar.meta["kind"]
            bar.showlegend = kind not in seen
            seen.add(kind)
            fig.add_trace(bar, row=r, col=1)
        axis = "" if r == 1 else str(r)
        shapes, _ = _step_decorations(times, -0.5, 1.5, px_per_ms, xref=f"x{axis}", yref=f"y{axis}")
        for shape in shapes:
            fig.add_shape(**shape)
        fig.update_yaxes(_lane_axis(draft_labels.get(label, "skipped layers")), row=r, col=1)
    fig.update_xaxes(range=list(window_ms), zeroline=False)
    fig.update_xaxes(title_text="wall-clock time since the call started (ms)", row=len(labels), col=1)
    fig.update_annotations(font=dict(size=12), x=0.0, xanchor="left")
    fig.update_layout(barmode="overlay", width=width, plot_bgcolor="white", bargap=0,
                      uniformtext=dict(minsize=9, mode="hide"), hoverlabel=dict(font=dict(family="monospace", size=12)))
    _header(fig, title, 130 + row_height * len(labels), left=110)
    return fig


# ---------------------------------------------------------------------------------------
# why drafting stopped
# ---------------------------------------------------------------------------------------
def _step_window(trace: Trace, steps):
    n = len(trace.steps)
    if steps is None:
        return range(n)
    return range(max(0, steps[0]), min(n, steps[1] + 1))


def confidence_figure(trace, tokenizer=None, *, steps: tuple[int, int] | None = None, width: int | None = None,
                      height: int = 420):
    """Each step's draft confidences (top-1 probability) with the threshold in force over them.

    A threshold policy stops drafting right after a token whose confidence falls *below* the
    threshold (ringed); other steps stopped at the draft limit, the token budget or EOS.
    """
    import plotly.graph_objects as go

    trace = _as_trace(trace)
    window = _step_window(trace, steps)
    labels = token_labels(tokenizer, [t for i in window for t in trace.steps[i].drafted]) if tokenizer else {}
    pts = {k: {"x": [], "y": [], "hover": []} for k in DRAFT_KINDS}
    line_x, line_y, thr_x, thr_y, stop_x, stop_y = [], [], [], [], [], []
    tickvals, ticktext = [], []
    x = 0
    every = max(1, math.ceil(len(window) / 25))
    for n, i in enumerate(window):
        s = trace.steps[i]
        if n % every == 0:
            tickvals.append(x + (max(s.n_drafted, 1) - 1) / 2)
            ticktext.append(str(i))
        for j, (tok, c) in enumerate(zip(s.drafted, s.confidence)):
            kind = "accepted" if j < s.n_accepted else ("rejected" if j == s.n_accepted else "discarded")
            pts[kind]["x"].append(x + j)
            pts[kind]["y"].append(c)
            tok_text = _plotly_text(labels[tok]) if labels else str(tok)
            thr = "" if s.threshold is None else f"<br>threshold in force {s.threshold:.3f}"
            pts[kind]["hover"].append(f"<b>{tok_text}</b> ({KIND_LABELS[kind]})<br>step {i}, drafted token {j + 1} of "
                                      f"{s.n_drafted}<br>confidence (draft top-1 prob.) {c:.3f}{thr}")
            line_x.append(x + j)
            line_y.append(c)
        line_x.append(None)
        line_y.append(None)
        if s.threshold is not None and s.n_drafted:
            thr_x += [x - 0.45, x + s.n_drafted - 0.55, None]
            thr_y += [s.threshold, s.threshold, None]
            last = s.confidence[-1]
            if last < s.threshold:
                stop_x.append(x + s.n_drafted - 1)
                stop_y.append(last)
        x += max(s.n_drafted, 1) + 1          # a gap between steps
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=line_x, y=line_y, mode="lines", line=dict(color="#bdbdbd", width=1),
                             hoverinfo="skip", showlegend=False))
    if thr_x:
        fig.add_trace(go.Scatter(x=thr_x, y=thr_y, mode="lines", line=dict(color=THRESHOLD_COLOR, width=2.5),
                                 name="threshold in force (stop below it)", hoverinfo="skip"))
    for kind in DRAFT_KINDS:
        p = pts[kind]
        if not p["x"]:
            continue
        fig.add_trace(go.Scatter(
            x=p["x"], y=p["y"], mode="markers", name=KIND_LABELS[kind], legendgroup=kind, meta={"kind": kind},
            marker=dict(color=KIND_COLORS[kind], size=9, line=dict(color="#525252" if kind == "discarded" else "white",
                                                                     width=1)),
            hovertext=p["hover"], hovertemplate="%{hovertext}<extra></extra>"))
    if stop_x:
        fig.add_trace(go.Scatter(x=stop_x, y=stop_y, mode="markers", name="stop: confidence fell below the threshold",
                                 marker=dict(symbol="circle-open", size=17, color="black", line=dict(width=2)),
                                 hoverinfo="skip"))
    top = max([c for i in window for c in trace.steps[i].confidence]
              + [t for i in window if (t := trace.steps[i].threshold) is not None] + [0.5])
    policy = "no threshold (count-only policy)" if all(trace.steps[i].threshold is None for i in window) else \
        "ringed markers fell below the threshold, so drafting stopped there"
    _header(fig, f"Why drafting stopped: the draft's confidence at each drafted token<br><sup>{policy}; "
                 f"the other steps hit the draft limit, the token budget or end-of-text</sup>", height)
    fig.update_layout(
        width=width, plot_bgcolor="white",
        xaxis=dict(title="step (its drafted tokens left to right; gaps separate steps)", tickvals=tickvals,
                   ticktext=ticktext, showgrid=False, zeroline=False),
        yaxis=dict(title="draft top-1 probability", range=[-0.02, min(1.05, top + 0.1)], gridcolor="#eeeeee",
                   zeroline=False),
    )
    return fig


def threshold_trajectory_figure(trace, *, target: float | None = None, width: int | None = None,
                                height: int = 560):
    """The adaptive threshold over a generation, against the (smoothed) acceptance rate that drives it.

    Top: each step's acceptance (accepted / drafted), the smoothed rate the policy reads from
    ``policy_state`` (AdaptiveThreshold; for other policies the cumulative rate from the trace) and
    the ``target`` rate, over grey bars of tokens drafted per step. Bottom, on its own scale: the
    threshold in force at each step. Shaded: steps after which the smoothed rate was below the target,
    so the threshold rose for the next step.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    trace = _as_trace(trace)
    steps = list(range(len(trace.steps)))
    thr = [s.threshold for s in trace.steps]
    smoothed = [s.policy_state.get("acceptance_rate") for s in trace.steps]
    if any(v is None for v in smoothed):      # not an adaptive policy: cumulative acceptance instead
        acc = drafted = 0
        smoothed = []
        for s in trace.steps:
            acc, drafted = acc + s.n_accepted, drafted + s.n_drafted
            smoothed.append(acc / drafted if drafted else None)
        rate_name = "acceptance rate so far (cumulative)"
    else:
        rate_name = "smoothed acceptance rate (what the policy sees)"
    raw = [s.n_accepted / s.n_drafted if s.n_drafted else None for s in trace.steps]
    has_threshold = any(t is not None for t in thr)
    fig = make_subplots(rows=2 if has_threshold else 1, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        row_heights=[0.6, 0.4] if has_threshold else None,
                        specs=[[{"secondary_y": True}]] + ([[{}]] if has_threshold else []))
    fig.add_trace(go.Bar(x=steps, y=[s.n_drafted for s in trace.steps], name="tokens drafted in the step",
                         marker=dict(color="rgba(120,120,120,0.25)"),
                         hovertemplate="step %{x}: %{y} drafted<extra></extra>"), row=1, col=1, secondary_y=True)
    fig.add_trace(go.Scatter(x=steps, y=raw, mode="markers", name="this step's acceptance (accepted / drafted)",
                             marker=dict(color=KIND_COLORS["accepted"], size=5, opacity=0.45),
                             hovertemplate="step %{x}: %{y:.2f}<extra></extra>"), row=1, col=1, secondary_y=False)
    fig.add_trace(go.Scatter(x=steps, y=smoothed, mode="lines", name=rate_name,
                             line=dict(color=KIND_COLORS["accepted"], width=2.5),
                             hovertemplate="step %{x}: %{y:.3f}<extra></extra>"), row=1, col=1, secondary_y=False)
    if target is not None:
        fig.add_trace(go.Scatter(x=[steps[0] - 0.5, steps[-1] + 0.5] if steps else [], y=[target, target],
                                 mode="lines", name=f"target acceptance {target:g}", hoverinfo="skip",
                                 line=dict(color=KIND_COLORS["accepted"], dash="dash", width=1.5)),
                      row=1, col=1, secondary_y=False)
        below = [i for i, r in enumerate(smoothed) if r is not None and r < target]
        runs = []
        for i in below:                              # contiguous runs of steps below the target
            if runs and runs[-1][1] == i - 1:
                runs[-1][1] = i
            else:
                runs.append([i, i])
        for a, b in runs:
            fig.add_shape(type="rect", xref="x", yref="paper", x0=a, x1=b + 1, y0=0, y1=1, layer="below",
                          fillcolor="rgba(222,45,38,0.08)", line_width=0)      # through both rows
        if runs:
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", hoverinfo="skip",
                                     name="below target: threshold rises next step",
                                     marker=dict(symbol="square", size=12, color="rgba(222,45,38,0.18)")),
                          row=1, col=1, secondary_y=False)
    if has_threshold:
        fig.add_trace(go.Scatter(x=steps, y=thr, mode="lines", line=dict(color=THRESHOLD_COLOR, width=2.5, shape="hv"),
                                 name="threshold in force", hovertemplate="step %{x}: %{y:.3f}<extra></extra>"),
                      row=2, col=1)
        lo, hi = min(t for t in thr if t is not None), max(t for t in thr if t is not None)
        pad = max(0.01, 0.1 * (hi - lo))
        fig.update_yaxes(title_text="threshold (probability)", range=[lo - pad, hi + pad], gridcolor="#eeeeee",
                         row=2, col=1)
    s = trace.summary()
    _header(fig, "The adaptive threshold follows the acceptance rate<br><sup>below the target the threshold "
                 "rises (draft fewer, safer tokens); above it the threshold falls (draft more) · "
                 f"{s['steps']} steps, {s['emitted']} tokens</sup>", height, legend_rows=2, right=70)
    fig.update_layout(width=width, plot_bgcolor="white", bargap=0.15)
    fig.update_xaxes(showgrid=False)
    fig.update_xaxes(title_text="step", row=2 if has_threshold else 1, col=1)
    fig.update_yaxes(title_text="acceptance rate", range=[0, 1.05], gridcolor="#eeeeee", row=1, col=1,
                     secondary_y=False)
    top = max([st.n_drafted for st in trace.steps] + [1])
    fig.update_yaxes(title_text="tokens drafted", range=[0, max(3.0, 2.5 * top)], dtick=max(1, math.ceil(top / 4)),
                     showgrid=False, row=1, col=1, secondary_y=True)
    return fig


# ---------------------------------------------------------------------------------------
# the one-forward-pass check
# ---------------------------------------------------------------------------------------
@torch.inference_mode()
def one_pass_check(model, sequence, prompt_length: int = 1, tokenizer=None) -> dict:
    """Feed ``sequence`` to the full model in ONE forward; compare its argmax at every position with
    the sequence's next token (for the model's own greedy output they all agree).

    Returns ``{"table": DataFrame (one row per checked position), "all_match": bool, "n_checked": int,
    "n_match": int, "forward_ms": float}``. Positions ``prompt_length - 1 .. T - 2`` are checked:
    those whose next token was generated.
    """
    import pandas as pd

    ids = sequence.sequences if hasattr(sequence, "sequences") else sequence
    ids = torch.as_tensor(ids, dtype=torch.long)
    if ids.dim() == 1:
        ids = ids[None]
    if ids.shape[0] != 1 or ids.shape[1] < 2:
        raise ValueError(f"sequence must have shape (1, T) with T >= 2, got {tuple(ids.shape)}")
    if not 1 <= prompt_length < ids.shape[1]:
        raise ValueError(f"prompt_length must be in [1, {ids.shape[1] - 1}], got {prompt_length}")
    t0 = time.perf_counter()
    logits = model(input_ids=ids, use_cache=False).logits[0].float()          # (T, V): one pass
    forward_ms = 1e3 * (time.perf_counter() - t0)
    probs = torch.softmax(logits, dim=-1)
    argmax = logits.argmax(dim=-1)
    seq = ids[0]
    rows = []
    labels = token_labels(tokenizer, seq.tolist() + argmax.tolist()) if tokenizer is not None else None
    for t in range(prompt_length - 1, seq.shape[0] - 1):
        nxt, am = int(seq[t + 1]), int(argmax[t])
        row = {"position": t, "input_token": int(seq[t]), "next_token": nxt, "argmax": am, "match": nxt == am,
               "p_argmax": float(probs[t, am])}
        if labels is not None:
            row.update(input_text=labels[int(seq[t])], next_text=labels[nxt], argmax_text=labels[am])
        rows.append(row)
    table = pd.DataFrame(rows)
    n_match = int(table["match"].sum())
    return {"table": table, "all_match": n_match == len(table), "n_checked": len(table), "n_match": n_match,
            "forward_ms": forward_ms}


def one_pass_figure(check: dict, *, max_rows: int = 14, width: int | None = None,
                    plain_ms_per_token: float | None = None):
    """The one-pass check as a table: the token fed in, the sequence's next token, the argmax at that position."""
    import plotly.graph_objects as go

    table = check["table"].head(max_rows)
    has_text = "next_text" in table
    col = (lambda name, fallback: [_plotly_text(v) for v in table[name]] if has_text else table[fallback].tolist())
    match_text = ["✔ same" if m else "✘ differs" for m in table["match"]]
    match_fill = ["#c7e9c0" if m else "#fcbba1" for m in table["match"]]
    fig = go.Figure(go.Table(
        columnwidth=[70, 150, 170, 190, 80],
        header=dict(values=["<b>position</b>", "<b>token fed in</b>", "<b>next token in the sequence</b>",
                            "<b>full model's argmax here</b>", "<b>same?</b>"],
                    fill_color="#f0f0f0", align="left", font=dict(size=12)),
        cells=dict(values=[table["position"].tolist(), col("input_text", "input_token"), col("next_text", "next_token"),
                           col("argmax_text", "argmax"), match_text],
                   fill_color=[["white"] * len(table)] * 4 + [match_fill], align="left",
                   font=dict(family="monospace", size=12), height=24),
    ))
    extra = ""
    if plain_ms_per_token is not None:
        extra = (f" · generating them one by one took {plain_ms_per_token * check['n_checked']:.0f} ms "
                 f"({plain_ms_per_token:.1f} ms per token)")
    verdict = "all match" if check["all_match"] else f"{check['n_checked'] - check['n_match']} differ"
    shown = f"first {len(table)} of {check['n_checked']} positions shown"
    fig.update_layout(
        title=dict(text=f"One forward pass predicts every next token at once: {check['n_match']}/{check['n_checked']} "
                        f"{verdict}<br><sup>one pass over the whole sequence took {check['forward_ms']:.0f} ms{extra} · "
                        f"{shown}</sup>", x=0.01),
        width=width, height=100 + 30 + 24 * len(table) + 25, margin=dict(l=20, r=20, t=90, b=10),
    )
    return fig


# ---------------------------------------------------------------------------------------
# summaries
# ---------------------------------------------------------------------------------------
def summary_frame(runs: dict):
    """One row per run ({label: GenerationResult or Trace}): acceptance, tokens per step, time per token."""
    import pandas as pd

    rows = []
    for label, run in runs.items():
        s = _as_trace(run).summary()
        rows.append({"run": label, "steps": s["steps"], "tokens": s["emitted"], "drafted": s["drafted"],
                     "accepted": s["accepted"], "acceptance_rate": s["acceptance_rate"],
                     "tokens_per_step": s["tokens_per_step"], "drafted_per_step": s["drafted_per_step"],
                     "ms_per_token": s["ms_per_token_with_prefill"]})
    return pd.DataFrame(rows).set_index("run")


# ---------------------------------------------------------------------------------------
# the replayer: ◀ ▶, a slider over steps, the text growing
# ---------------------------------------------------------------------------------------
_HTML_STYLE = {
    "prompt": "color:#8c8c8c",
    "accepted": "background:#e5f5e0",
    "replacement": "background:#c6dbef",
    "bonus": "background:#deebf7",
}
_HTML_CURRENT = {
    "accepted": "background:#a1d99b;outline:1px solid #2ca25f;font-weight:bold",
    "rejected": "background:#fcbba1;color:#a50f15;text-decoration:line-through;outline:1px solid #de2d26",
    "discarded": "background:#f0f0f0;color:#969696;text-decoration:line-through",
    "replacement": "background:#2166ac;color:white;font-weight:bold",
    "bonus": "background:#92c5de;color:#08306b;font-weight:bold;outline:1px solid #2166ac",
}


def _span(text: str, style: str, title: str | None = None) -> str:
    t = f' title="{html.escape(title, quote=True)}"' if title else ""
    return f'<span style="{style};border-radius:2px"{t}>{html.escape(text, quote=False)}</span>'


def _legend_html() -> str:
    items = [("accepted", "accepted draft"), ("rejected", "rejected draft"), ("discarded", "discarded draft"),
             ("replacement", "target's replacement"), ("bonus", "target's bonus")]
    return "&ensp;".join(_span(f"\u2009{label}\u2009", _HTML_CURRENT[k]) for k, label in items)


def step_html(trace, tokenizer, step: int, prompt_ids=None, *, show_prompt: bool = True) -> str:
    """HTML of the text after ``step``: earlier steps' tokens tinted (green accepted, blue the target's own),
    this step's draft and verdict in strong colours (rejected/discarded struck through). Code text is escaped."""
    trace = _as_trace(trace)
    n = len(trace.steps)
    if not 0 <= step < n:
        raise IndexError(f"step {step} out of range: the trace has {n} steps")
    parts = []
    if show_prompt and prompt_ids is not None:
        parts.append(_span(tokenizer.decode(list(prompt_ids)), _HTML_STYLE["prompt"]))
    for i in range(step):
        s = trace.steps[i]
        for tok in s.drafted[:s.n_accepted]:
            parts.append(_span(tokenizer.decode([tok]), _HTML_STYLE["accepted"]))
        if s.next_kind in TARGET_KINDS:
            parts.append(_span(tokenizer.decode([s.next_token]), _HTML_STYLE[s.next_kind]))
    s = trace.steps[step]
    for j, tok in enumerate(s.drafted):
        kind = "accepted" if j < s.n_accepted else ("rejected" if j == s.n_accepted else "discarded")
        text = tokenizer.decode([tok])
        title = f"{kind}: q={s.q[j]:.3f} p={s.p[j]:.3f}"
        if kind == "accepted":          # part of the text: whitespace shown, line breaks kept
            shown = visible(text, compact=False).replace("⏎", "⏎\n")
        else:                           # not part of the text: whitespace shown, no line breaks
            shown = visible(text, compact=False)
        parts.append(_span(shown, _HTML_CURRENT[kind], title))
    if s.next_kind in TARGET_KINDS:
        parts.append(_span(visible(tokenizer.decode([s.next_token]), compact=False).replace("⏎", "⏎\n"),
                           _HTML_CURRENT[s.next_kind],
                           KIND_LABELS[s.next_kind]))
    k = s.n_drafted
    if s.next_kind == "replacement":
        verdict = (f"the target rejected draft token {s.n_accepted + 1} "
                   f"<code>{html.escape(visible(tokenizer.decode([s.drafted[s.n_accepted]])))}</code> and put "
                   f"<code>{html.escape(visible(tokenizer.decode([s.next_token])))}</code> in its place")
    elif s.next_kind == "bonus":
        verdict = (f"all accepted, so the target added a bonus token "
                   f"<code>{html.escape(visible(tokenizer.decode([s.next_token])))}</code>")
    else:
        verdict = "the draft ended on an accepted end-of-text token"
    thr = "" if s.threshold is None else f" · threshold {s.threshold:.3f}"
    emitted = sum(t.n_emitted for t in trace.steps[:step + 1])
    header = (f"<b>Step {step}</b> (of 0–{n - 1}) · drafted {k}, accepted {s.n_accepted}: {verdict}<br>"
              f"draft {1e3 * s.draft_s:.1f} ms + verify {1e3 * s.verify_s:.1f} ms (1 forward pass checked {k} "
              f"token{'s' * (k != 1)}){thr} · {emitted} new tokens so far")
    body = "".join(parts)
    return (f'<div style="font-family:sans-serif;font-size:13px;line-height:1.5">{header}<br>{_legend_html()}</div>'
            f'<div style="font-family:monospace;font-size:13px;white-space:pre-wrap;border:1px solid #ddd;'
            f'padding:6px;margin-top:4px;max-height:360px;overflow:auto">{body}</div>')


class TraceReplayer:
    """Replays a trace step by step: ◀ ▶ buttons, a slider over steps, the growing text, and the
    timeline with the current step framed (the view follows the step).

    ``run``: a GenerationResult (its prompt is shown) or a Trace. Display it in a notebook as the
    last expression of a cell (or ``display(replayer)``); ``update()`` redraws for the slider value.
    """

    def __init__(self, run, tokenizer, *, window_steps: int = 8, draft_label: str = "skipped layers",
                 width: int | None = None, figure_widget: bool = True):
        import ipywidgets as widgets

        self.trace = _as_trace(run)
        self.tokenizer = tokenizer
        self.prompt_ids = (run.sequences[0, :run.prompt_length].tolist() if hasattr(run, "sequences") else None)
        self.n_steps = len(self.trace.steps)
        self.times = step_times(self.trace)
        last = max(self.n_steps - 1, 0)
        window = (0, min(window_steps, self.n_steps) - 1) if self.n_steps else None
        fig = timeline_figure(self.trace, tokenizer, steps=window, draft_label=draft_label, width=width,
                              highlight_step=0 if self.n_steps else None)
        self._span_ms = fig.layout.xaxis.range[1] - fig.layout.xaxis.range[0]
        self.figure = fig
        if figure_widget:
            try:
                from .viz.widgets import as_widget
                self.figure = as_widget(fig)
            except Exception:  # no anywidget / widget frontend: keep the static figure, still updated
                self.figure = fig
        self.prev_button = widgets.Button(description="◀", tooltip="previous step", layout=widgets.Layout(width="44px"))
        self.next_button = widgets.Button(description="▶", tooltip="next step", layout=widgets.Layout(width="44px"))
        self.slider = widgets.IntSlider(value=0, min=0, max=last, description="step", continuous_update=False,
                                        disabled=self.n_steps == 0, layout=widgets.Layout(width="520px"))
        self.html = widgets.HTML()
        self.prev_button.on_click(lambda _: self.step_by(-1))
        self.next_button.on_click(lambda _: self.step_by(+1))
        self.slider.observe(lambda change: self.update(), names="value")
        children = [widgets.HBox([self.prev_button, self.slider, self.next_button]), self.html]
        if isinstance(self.figure, widgets.DOMWidget):
            children.append(self.figure)
        self.widget = widgets.VBox(children)
        self.update()

    @property
    def step(self) -> int:
        return int(self.slider.value)

    def step_by(self, delta: int) -> None:
        self.slider.value = min(max(self.slider.value + delta, self.slider.min), self.slider.max)

    def update(self) -> None:
        """Redraw the text and frame the current step in the timeline (panning the view to it)."""
        if self.n_steps == 0:
            self.html.value = "<i>the trace has no steps (nothing was generated)</i>"
            return
        step = self.step
        self.html.value = step_html(self.trace, self.tokenizer, step, self.prompt_ids)
        row = self.times.iloc[step]
        lo, hi = self.figure.layout.xaxis.range
        if row.draft_start_ms < lo or row.verify_end_ms > hi:     # follow the step, keeping the zoom
            lo = max(row.draft_start_ms - 0.25 * self._span_ms, -0.01 * self._span_ms)
            hi = lo + self._span_ms
        shapes = [s for s in self.figure.layout.shapes if s.name != HIGHLIGHT_NAME] + [highlight_shape(self.times, step)]
        batch = getattr(self.figure, "batch_update", None)
        with (batch() if batch else contextlib.nullcontext()):
            self.figure.layout.shapes = shapes
            self.figure.layout.xaxis.range = [lo, hi]

    def highlighted(self) -> tuple[float, float] | None:
        """(x0, x1) in ms of the frame around the current step in the figure."""
        for s in self.figure.layout.shapes:
            if s.name == HIGHLIGHT_NAME:
                return float(s.x0), float(s.x1)
        return None

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
        if self.widget.children[-1] is not self.figure:       # static figure fallback
            display(self.figure)


# ---------------------------------------------------------------------------------------
# the notebook's choices
# ---------------------------------------------------------------------------------------
def demo_skip_set(model, name: str = "default", verbose: bool = True) -> SkipSet:
    """The skip set notebook 03 drafts with.

    The searched best skip set (``labkit.best_skip_set``) when it exists and answers for ``name``;
    otherwise a fixed fallback that skips blocks only in the later half of the model (later layers
    are the more redundant ones, and the lab's skip-robust training skips them more often):
    alternating MLP/attention blocks from layer L/2 - 1 on, both blocks of the last sixth, never
    layer 0's attention. For 8 layers: attention [4, 6, 7] and MLP [3, 5, 7], 6 of 16 blocks
    (37.5 %); for 12 layers: attention [6, 8, 10, 11] and MLP [5, 7, 9, 10, 11], 9 of 24.
    """
    from . import search

    n_layers = int(model.config.num_hidden_layers)
    try:
        found = search.best_skip_set(model=name, skipping_something=True).validate(n_layers)
        if verbose:
            print(f"skip set: searched best for {name!r}: {found} ({found.ratio(n_layers):.0%} of blocks)")
        return found
    except (FileNotFoundError, LookupError, ValueError) as err:  # no usable search result: fixed fallback
        if verbose:
            print(f"labkit.best_skip_set(model={name!r}) unavailable ({type(err).__name__}); using the fallback")
    start = max(1, n_layers // 2 - 1)
    tail = n_layers - max(1, n_layers // 6)
    attention = [l for l in range(start, n_layers) if (l - start) % 2 == 1 or l >= tail]
    mlp = [l for l in range(start, n_layers) if (l - start) % 2 == 0 or l >= tail]
    skip = SkipSet(attention=attention, mlp=mlp)
    if verbose:
        print(f"skip set: fixed fallback {skip} ({skip.ratio(n_layers):.0%} of blocks skipped)")
    return skip


def pick_prompt(tokenizer, model, n_new: int, *, seed: int = 0, n_candidates: int = 16):
    """The first held-out prompt (``labkit.prompts(n_candidates, seed=seed)`` order) that leaves room for
    ``n_new`` tokens in the model's context; returns (Prompt, input_ids (1, T), n_new that fits)."""
    from .corpus import prompts

    context = int(getattr(model.config, "max_position_embeddings", 10**9))
    best = None
    for prompt in prompts(n_candidates, seed=seed):
        ids = tokenizer(prompt.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        if ids.shape[1] + n_new <= context:
            return prompt, ids, n_new
        if best is None or ids.shape[1] < best[1].shape[1]:
            best = (prompt, ids)
    prompt, ids = best
    return prompt, ids, max(0, context - ids.shape[1])


def load_draft_model(name: str = "draft", *, verbose: bool = True):
    """(model, tokenizer) of a separate draft model, or None (with a note) when it is not there yet."""
    from .models import MODELS_DIR, SHIPPED_MODELS, load_model

    if name in SHIPPED_MODELS and not (MODELS_DIR / name / "config.json").exists():
        if verbose:
            print(f"No separate draft model yet: {MODELS_DIR / name} does not exist "
                  f"(train it with `python -m labkit.train --name {name}`); skipping this section.")
        return None
    if name not in SHIPPED_MODELS and not (Path(name) / "config.json").exists():
        if verbose:
            print(f"No draft model at {name}; skipping this section.")
        return None
    return load_model(name)


def compare_drafters(model, input_ids, *, skip: SkipSet, draft_model, max_new_tokens: int, policy_factory=None,
                     labels: tuple[str, str] = ("self-draft (skipped layers)", "separate draft model")) -> dict:
    """Greedy runs of the same prompt drafted by ``model`` minus ``skip`` and by ``draft_model``
    (each with a fresh policy, after a short warm-up): ``{label: GenerationResult}``."""
    from .decoding import speculative_generate
    from .policies import AdaptiveThreshold

    policy_factory = policy_factory or AdaptiveThreshold
    speculative_generate(model, input_ids, draft_model=draft_model, policy=policy_factory(),
                         max_new_tokens=min(4, max_new_tokens))                      # warm-up: first-call costs
    runs = {}
    runs[labels[0]] = speculative_generate(model, input_ids, skip=skip, policy=policy_factory(),
                                           max_new_tokens=max_new_tokens)
    runs[labels[1]] = speculative_generate(model, input_ids, draft_model=draft_model, policy=policy_factory(),
                                           max_new_tokens=max_new_tokens)
    return runs
