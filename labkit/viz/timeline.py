"""The draft/verify timeline, token by token: two lanes (draft, verify) on one wall-clock axis (notebook 03).

Everything here reads a :class:`~labkit.core.trace.Trace` (or a :class:`~labkit.core.decoding.GenerationResult`)
that :func:`~labkit.core.decoding.speculative_generate` recorded; nothing is simulated. Colours mean the same
thing in every figure and in the replayer's text (:data:`KIND_COLORS`, from the one palette): green = a drafted
token the target accepted, red = the first drafted token it rejected, grey and struck through = drafted after
that rejection (thrown away), blue = a token the *target* chose itself (dark: its replacement for the rejected
token; light: the bonus token after a fully accepted draft).

Time axis: the measured phase durations (``StepRecord.draft_s``, ``verify_s``, ``Trace.prefill_s``) laid end to
end from the start of the call, in ms. The small bookkeeping gaps between phases are not measured, so not drawn.
"""
from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..core.checks import take_options
from ..core.trace import Trace
from .style import FIGURE_WIDTH, PALETTE, token_labels

__all__ = ["KIND_COLORS", "KIND_LABELS", "DRAFT_KINDS", "TARGET_KINDS", "HIGHLIGHT_NAME", "step_times",
           "timeline_figure", "comparison_figure", "highlight_shape", "as_trace", "plotly_text", "header"]

#: Colour of each token kind (and the verify-only and prefill bars), from the one palette.
KIND_COLORS = {k: PALETTE[k] for k in ("accepted", "rejected", "discarded", "replacement", "bonus", "verify",
                                       "prefill")}


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


HIGHLIGHT_NAME = "current step"


def plotly_text(text: str) -> str:
    """Plotly reads a small HTML subset in text: escape the token's own '<', '>' and '&'."""
    return html.escape(text, quote=False)


def header(fig, title: str, height: int, legend_rows: int = 1, left: int = 70, right: int = 20,
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


def as_trace(obj) -> Trace:
    trace = getattr(obj, "trace", obj)
    if not isinstance(trace, Trace):
        raise TypeError(f"expected a labkit Trace or a GenerationResult with a trace, got {type(obj).__name__}")
    return trace


def step_times(trace, include_prefill: bool = True):
    """One row per step: when its draft and verify phases start and end (ms from the start of the call).

    Phases are laid end to end with their measured durations; with ``include_prefill`` the first
    draft starts after the prompt's prefill (which starts at 0).
    """
    import pandas as pd

    trace = as_trace(trace)
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


def _fits(text: str, width_ms: float, px_per_ms: float) -> bool:
    return len(text) * _CHAR_PX + 4 <= width_ms * px_per_ms


def _chip_hover(trace: Trace, i: int, j: int, kind: str, label: str) -> str:
    """Hover text of drafted token j of step i: q, p, (sampling) the acceptance probability, the confidence."""
    s = trace.steps[i]
    q, p = s.q[j], s.p[j]
    lines = [f"<b>{plotly_text(label)}</b>  ({KIND_LABELS[kind]})", f"step {i}, drafted token {j + 1} of {s.n_drafted}",
             f"draft probability q = {q:.3f}", f"target probability p = {p:.3f}"]
    if trace.sampling:
        note = "" if kind != "discarded" else " (never tested: an earlier token was rejected)"
        lines.append(f"accept probability min(1, p/q) = {min(1.0, p / q) if q > 0 else float('nan'):.3f}{note}")
    else:
        lines.append("greedy: accepted iff it equals the target's argmax")
    lines.append(f"draft confidence (top-1) = {s.confidence[j]:.3f}"
                 + (f", threshold {s.threshold:.3f}" if s.threshold is not None else ""))
    return "<br>".join(lines)


def _verify_hover(trace: Trace, i: int, kind: str, width_ms: float, full: dict) -> str:
    """Hover text of step i's verify pass: what it checked, what it accepted, the token the target added."""
    s, k = trace.steps[i], trace.steps[i].n_drafted
    lines = [f"<b>step {i} · verify</b>: 1 forward pass of the full model checked {k} drafted token{'s' * (k != 1)}",
             f"accepted {s.n_accepted} of {k}", f"{width_ms:.1f} ms (draft phase {1e3 * s.draft_s:.1f} ms)"]
    if kind == "replacement":
        lines.append(f"target's replacement <b>{plotly_text(full[s.next_token])}</b> for rejected "
                     f"{plotly_text(full[s.drafted[s.n_accepted]])}")
    elif kind == "bonus":
        lines.append(f"all {k} accepted: target's bonus token <b>{plotly_text(full[s.next_token])}</b>")
    else:
        lines.append("the draft ended on an accepted end-of-text token: nothing more to add")
    return "<br>".join(lines)


class _Lanes:
    """Collects one bar per token chip and verify pass, by kind, then turns them into plotly traces."""

    def __init__(self, trace: Trace, tokenizer, lanes: tuple[float, float], px_per_ms: float):
        self.trace, self.px_per_ms = trace, px_per_ms
        self.y_draft, self.y_verify = lanes
        ids = [t for s in trace.steps for t in s.drafted] + [s.next_token for s in trace.steps]
        self.short, self.full = token_labels(tokenizer, ids), token_labels(tokenizer, ids, compact=False)
        self.bars = {k: {"base": [], "x": [], "y": [], "text": [], "hover": [], "step": []} for k in KIND_COLORS}

    def add(self, kind: str, start: float, width: float, y: float, text: str, hover: str, step: int) -> None:
        for key, value in zip(("base", "x", "y", "text", "hover", "step"), (start, width, y, text, hover, step)):
            self.bars[kind][key].append(value)

    def prefill(self) -> None:
        t = self.trace
        text = f"prompt: {t.prompt_length} tokens"
        self.add("prefill", 0.0, 1e3 * t.prefill_s, self.y_verify,
                 text if _fits(text, 1e3 * t.prefill_s, self.px_per_ms) else "",
                 f"<b>prefill</b>: the full model reads the {t.prompt_length}-token prompt<br>"
                 f"{1e3 * t.prefill_s:.1f} ms", -1)

    def draft_chips(self, i: int, row) -> None:
        """One chip per drafted token, sharing the step's measured draft time equally."""
        s = self.trace.steps[i]
        chip = (row.draft_end_ms - row.draft_start_ms) / s.n_drafted if s.n_drafted else 0.0
        for j, tok in enumerate(s.drafted):
            kind = "accepted" if j < s.n_accepted else ("rejected" if j == s.n_accepted else "discarded")
            text = ""
            if _fits(self.short[tok], chip, self.px_per_ms):       # measured on the plain label: tags take no room
                text = plotly_text(self.short[tok])
                text = f"<s>{text}</s>" if kind == "discarded" else text
            self.add(kind, row.draft_start_ms + j * chip, chip, self.y_draft, text,
                     _chip_hover(self.trace, i, j, kind, self.full[tok]), i)

    def verify_bar(self, i: int, row) -> None:
        """The verify pass: one bar, coloured by the token the target appended, with the longest text that fits."""
        s = self.trace.steps[i]
        width = row.verify_end_ms - row.verify_start_ms
        kind = s.next_kind if s.next_kind in TARGET_KINDS else "verify"
        label = self.short[s.next_token] if kind != "verify" else ""
        candidates = [f"checks {s.n_drafted} → {{}}", "→ {}", "{}"] if label else [f"checks {s.n_drafted}"]
        text = next((c.format(plotly_text(label)) for c in candidates if _fits(c.format(label), width, self.px_per_ms)),
                    "")
        self.add(kind, row.verify_start_ms, width, self.y_verify, text,
                 _verify_hover(self.trace, i, kind, width, self.full), i)

    def traces(self, showlegend: bool) -> list:
        out = []
        for kind, b in self.bars.items():
            if not b["x"]:
                continue
            marker = dict(color=KIND_COLORS[kind], line=dict(color="white", width=1))
            if kind == "discarded":
                marker["pattern"] = dict(shape="/", fgcolor="#9e9e9e", size=6, solidity=0.15)
            if kind == "prefill":
                marker["line"] = dict(color="#9e9e9e", width=1)
            out.append(go.Bar(
                orientation="h", base=b["base"], x=b["x"], y=b["y"], width=0.62, name=KIND_LABELS[kind],
                legendgroup=kind, showlegend=showlegend, marker=marker, text=b["text"], textposition="inside",
                insidetextanchor="middle", textangle=0, textfont=dict(color=KIND_TEXT_COLORS[kind], size=11),
                hovertext=b["hover"], hovertemplate="%{hovertext}<extra></extra>", customdata=b["step"],
                meta={"kind": kind}, cliponaxis=True,
            ))
        return out


def _timeline_bars(trace: Trace, tokenizer, *, lanes: tuple[float, float], px_per_ms: float, include_prefill: bool,
                   showlegend: bool):
    """Plotly bar traces (one per kind, ``meta={"kind": ...}``) for one trace's two lanes, and its step times."""
    times = step_times(trace, include_prefill)
    collected = _Lanes(trace, tokenizer, lanes, px_per_ms)
    if include_prefill:
        collected.prefill()
    for i in range(len(trace.steps)):
        row = times.iloc[i]
        collected.draft_chips(i, row)
        collected.verify_bar(i, row)
    return collected.traces(showlegend), times


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
                    highlight_step: int | None = None, include_prefill: bool = True, **layout):
    """Draft and verify lanes on one wall-clock axis (ms), one chip per token.

    ``steps=(first, last)`` (inclusive) or ``window_ms=(t0, t1)`` sets the initially visible window
    (pan or zoom out in the figure to see the rest); chips carry their token's text when it fits
    that window. ``draft_label`` names the drafter (e.g. "skipped layers", "2-layer draft model").
    ``layout``, by name: ``width`` (default the lab's figure width), ``height`` (330) and ``title``.
    """
    take_options("timeline_figure", layout, ("width", "height", "title"))
    width, height, title = layout.get("width"), layout.get("height", 330), layout.get("title")
    trace = as_trace(trace)
    times = step_times(trace, include_prefill)
    x0, x1 = _window_ms(times, trace, steps, window_ms, include_prefill)
    px_per_ms = ((width or FIGURE_WIDTH) - _PLOT_MARGIN_PX) / max(x1 - x0, 1e-9)     # chip text fits a column this wide
    bars, _ = _timeline_bars(trace, tokenizer, lanes=(1.0, 0.0), px_per_ms=px_per_ms, include_prefill=include_prefill,
                             showlegend=True)
    fig = go.Figure(bars)
    shapes, annotations = _step_decorations(times, -0.5, 1.6, px_per_ms, label_y=1.55)
    if highlight_step is not None and len(times):
        shapes.append(highlight_shape(times, highlight_step))
    s = trace.summary()
    mode = "sampling" if trace.sampling else "greedy"
    subtitle = (f"{mode} · {s['steps']} steps · {s['emitted']} tokens · "
                f"accepted / drafted {s['acceptance_rate']:.0%} · "
                f"{s['tokens_per_step']:.2f} tokens per step · {s['ms_per_token_with_prefill']:.1f} ms per token")
    fig.update_layout(
        barmode="overlay", width=width, shapes=shapes, annotations=annotations,
        xaxis=dict(title="wall-clock time since the call started (ms)", range=[x0, x1], zeroline=False),
        yaxis=_lane_axis(draft_label), plot_bgcolor="white", bargap=0,
        uniformtext=dict(minsize=9, mode="hide"), hoverlabel=dict(font=dict(family="monospace", size=12)),
    )
    header(fig, f"{title or 'Draft/verify timeline, token by token'}<br><sup>{subtitle}</sup>", height, left=110)
    return fig


def comparison_figure(traces: dict, tokenizer, *, window_ms: tuple[float, float] | None = None,
                      first_steps: int | None = None, draft_labels: dict | None = None, width: int | None = None,
                      row_height: int = 190,
                      title: str = "Same prompt, different drafting: timelines on one time scale"):
    """Timelines of several runs stacked on a shared ms axis (``traces``: {label: Trace or GenerationResult}).

    The initial view: ``window_ms``, else the time the slowest run needed for its ``first_steps`` steps,
    else everything.
    """
    labels = list(traces)
    draft_labels = draft_labels or {}
    subtitles = []
    for label in labels:
        s = as_trace(traces[label]).summary()
        subtitles.append(f"<b>{label}</b>: accepted / drafted {s['acceptance_rate']:.0%}, "
                         f"{s['tokens_per_step']:.2f} tokens/step, {s['ms_per_token_with_prefill']:.1f} ms/token")
    fig = make_subplots(rows=len(labels), cols=1, shared_xaxes=True, vertical_spacing=0.16 / max(1, len(labels) - 1)
                        if len(labels) > 1 else 0.0, subplot_titles=subtitles)
    all_times = {label: step_times(as_trace(traces[label])) for label in labels}
    if window_ms is None:
        last = (lambda t: len(t) - 1) if first_steps is None else (lambda t: min(first_steps, len(t)) - 1)
        end = max((float(t.verify_end_ms.iloc[last(t)]) for t in all_times.values() if len(t)), default=1.0)
        window_ms = (-0.01 * end, 1.01 * end)
    px_per_ms = ((width or FIGURE_WIDTH) - _PLOT_MARGIN_PX) / max(window_ms[1] - window_ms[0], 1e-9)
    seen = set()
    for r, label in enumerate(labels, start=1):
        trace = as_trace(traces[label])
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
    header(fig, title, 130 + row_height * len(labels), left=110)
    return fig
