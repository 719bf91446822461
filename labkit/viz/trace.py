"""What a trace says about each step: why drafting stopped (confidence against the threshold), how the
adaptive threshold moved, the one-pass check as a table, and the replayer's HTML of the text after a step."""
from __future__ import annotations

import html
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..core.trace import Trace
from .style import PALETTE, token_labels, visible
from .timeline import DRAFT_KINDS, KIND_COLORS, KIND_LABELS, TARGET_KINDS, as_trace, header, plotly_text

__all__ = ["confidence_figure", "threshold_trajectory_figure", "threshold_carry_figure", "one_pass_figure",
           "step_html"]


def _step_window(trace: Trace, steps):
    n = len(trace.steps)
    if steps is None:
        return range(n)
    return range(max(0, steps[0]), min(n, steps[1] + 1))


def _confidence_points(trace: Trace, window, labels: dict) -> dict:
    """Markers per token kind, the connecting line, the threshold segments and the stop rings, laid out with a
    gap between steps; also the x tick of each (or every n-th) step."""
    out = {"pts": {k: {"x": [], "y": [], "hover": []} for k in DRAFT_KINDS}, "line": ([], []), "thr": ([], []),
           "stop": ([], []), "ticks": ([], [])}
    x, every = 0, max(1, math.ceil(len(window) / 25))
    for n, i in enumerate(window):
        s = trace.steps[i]
        if n % every == 0:
            out["ticks"][0].append(x + (max(s.n_drafted, 1) - 1) / 2)
            out["ticks"][1].append(str(i))
        for j, (tok, c) in enumerate(zip(s.drafted, s.confidence)):
            kind = "accepted" if j < s.n_accepted else ("rejected" if j == s.n_accepted else "discarded")
            thr = "" if s.threshold is None else f"<br>threshold in force {s.threshold:.3f}"
            tok_text = plotly_text(labels[tok]) if labels else str(tok)
            for key, value in (("x", x + j), ("y", c),
                               ("hover", f"<b>{tok_text}</b> ({KIND_LABELS[kind]})<br>step {i}, "
                                         f"drafted token {j + 1} of {s.n_drafted}<br>"
                                         f"confidence (draft top-1 prob.) {c:.3f}{thr}")):
                out["pts"][kind][key].append(value)
        out["line"][0].extend([x + j for j in range(s.n_drafted)] + [None])
        out["line"][1].extend(list(s.confidence) + [None])
        if s.threshold is not None and s.n_drafted:
            out["thr"][0].extend([x - 0.45, x + s.n_drafted - 0.55, None])
            out["thr"][1].extend([s.threshold, s.threshold, None])
            if s.confidence[-1] < s.threshold:
                out["stop"][0].append(x + s.n_drafted - 1)
                out["stop"][1].append(s.confidence[-1])
        x += max(s.n_drafted, 1) + 1                                    # a gap between steps
    return out


def confidence_figure(trace, tokenizer=None, *, steps: tuple[int, int] | None = None, width: int | None = None,
                      height: int = 420):
    """Each step's draft confidences (top-1 probability) with the threshold in force over them.

    A threshold policy stops drafting right after a token whose confidence falls *below* the
    threshold (ringed); other steps stopped at the draft limit, the token budget or EOS.
    """
    trace = as_trace(trace)
    window = _step_window(trace, steps)
    labels = token_labels(tokenizer, [t for i in window for t in trace.steps[i].drafted]) if tokenizer else {}
    data = _confidence_points(trace, window, labels)
    fig = go.Figure(go.Scatter(x=data["line"][0], y=data["line"][1], mode="lines", line=dict(color="#bdbdbd", width=1),
                               hoverinfo="skip", showlegend=False))
    if data["thr"][0]:
        fig.add_trace(go.Scatter(x=data["thr"][0], y=data["thr"][1], mode="lines", hoverinfo="skip",
                                 line=dict(color=PALETTE["threshold"], width=2.5),
                                 name="threshold in force (stop below it)"))
    for kind, p in data["pts"].items():
        if p["x"]:
            fig.add_trace(go.Scatter(
                x=p["x"], y=p["y"], mode="markers", name=KIND_LABELS[kind], legendgroup=kind, meta={"kind": kind},
                marker=dict(color=KIND_COLORS[kind], size=9,
                            line=dict(color="#525252" if kind == "discarded" else "white", width=1)),
                hovertext=p["hover"], hovertemplate="%{hovertext}<extra></extra>"))
    if data["stop"][0]:
        fig.add_trace(go.Scatter(x=data["stop"][0], y=data["stop"][1], mode="markers", hoverinfo="skip",
                                 name="stop: confidence fell below the threshold",
                                 marker=dict(symbol="circle-open", size=17, color="black", line=dict(width=2))))
    top = max([c for i in window for c in trace.steps[i].confidence]
              + [t for i in window if (t := trace.steps[i].threshold) is not None] + [0.5])
    policy = "no threshold (count-only policy)" if all(trace.steps[i].threshold is None for i in window) else \
        "ringed markers fell below the threshold, so drafting stopped there"
    header(fig, f"Why drafting stopped: the draft's confidence at each drafted token<br><sup>{policy}; "
                f"the other steps hit the draft limit, the token budget or end-of-text</sup>", height)
    fig.update_layout(
        width=width, plot_bgcolor="white",
        xaxis=dict(title="step (its drafted tokens left to right; gaps separate steps)", tickvals=data["ticks"][0],
                   ticktext=data["ticks"][1], showgrid=False, zeroline=False),
        yaxis=dict(title="draft top-1 probability", range=[-0.02, min(1.05, top + 0.1)], gridcolor="#eeeeee",
                   zeroline=False))
    return fig


def _smoothed_rate(trace: Trace) -> tuple[list, str]:
    """The acceptance rate the policy saw at each step (AdaptiveThreshold's smoothed rate), else the cumulative one."""
    smoothed = [s.policy_state.get("acceptance_rate") for s in trace.steps]
    if all(v is not None for v in smoothed):
        return smoothed, "AR: smoothed accepted / drafted (what the policy sees)"
    acc = drafted = 0
    out = []
    for s in trace.steps:
        acc, drafted = acc + s.n_accepted, drafted + s.n_drafted
        out.append(acc / drafted if drafted else None)
    return out, "accepted / drafted so far (cumulative)"


def _add_target(fig, steps: list[int], rates: list, target: float) -> None:
    """The target rate as a dashed line (no shading: AR sits below a 0.9 target most of a run, so a band "below
    the target" covered nearly every step and told nothing; the threshold row shows where it rose)."""
    fig.add_trace(go.Scatter(x=[steps[0] - 0.5, steps[-1] + 0.5] if steps else [], y=[target, target], mode="lines",
                             name=f"target AR {target:g} (smoothed accepted / drafted)", hoverinfo="skip",
                             line=dict(color=KIND_COLORS["accepted"], dash="dash", width=1.5)),
                  row=1, col=1, secondary_y=False)


def threshold_trajectory_figure(trace, *, target: float | None = None, width: int | None = None, height: int = 560):
    """The adaptive threshold over a generation, against the (smoothed) acceptance rate that drives it.

    Top: each step's acceptance (accepted / drafted), the smoothed rate the policy reads from
    ``policy_state`` (AdaptiveThreshold; for other policies the cumulative rate from the trace) and
    the ``target`` rate, over grey bars of tokens drafted per step. Bottom, on its own scale: the
    threshold in force at each step.
    """
    trace = as_trace(trace)
    steps = list(range(len(trace.steps)))
    thr = [s.threshold for s in trace.steps]
    rates, rate_name = _smoothed_rate(trace)
    has_threshold = any(t is not None for t in thr)
    fig = make_subplots(rows=2 if has_threshold else 1, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        row_heights=[0.6, 0.4] if has_threshold else None,
                        specs=[[{"secondary_y": True}]] + ([[{}]] if has_threshold else []))
    drafted = [s.n_drafted for s in trace.steps]
    fig.add_trace(go.Bar(x=steps, y=drafted, name="d: tokens drafted in the step",
                         marker=dict(color="rgba(120,120,120,0.25)"),
                         hovertemplate="step %{x}: %{y} drafted<extra></extra>"), row=1, col=1, secondary_y=True)
    fig.add_trace(go.Scatter(x=steps, y=[s.n_accepted / s.n_drafted if s.n_drafted else None for s in trace.steps],
                             mode="markers", name="this step's accepted / drafted",
                             marker=dict(color=KIND_COLORS["accepted"], size=5, opacity=0.45),
                             hovertemplate="step %{x}: %{y:.2f}<extra></extra>"), row=1, col=1, secondary_y=False)
    fig.add_trace(go.Scatter(x=steps, y=rates, mode="lines", name=rate_name,
                             line=dict(color=KIND_COLORS["accepted"], width=2.5),
                             hovertemplate="step %{x}: %{y:.3f}<extra></extra>"), row=1, col=1, secondary_y=False)
    if target is not None:
        _add_target(fig, steps, rates, target)
    if has_threshold:
        fig.add_trace(go.Scatter(x=steps, y=thr, mode="lines", name="threshold in force",
                                 line=dict(color=PALETTE["threshold"], width=2.5, shape="hv"),
                                 hovertemplate="step %{x}: %{y:.3f}<extra></extra>"), row=2, col=1)
        lo, hi = min(t for t in thr if t is not None), max(t for t in thr if t is not None)
        pad = max(0.01, 0.1 * (hi - lo))
        fig.update_yaxes(title_text="threshold (probability)", range=[lo - pad, hi + pad], gridcolor="#eeeeee",
                         row=2, col=1)
    header(fig, "The adaptive threshold follows the smoothed accepted / drafted (AR)<br>"
                "<sup>below the target the threshold rises (draft fewer, safer tokens); "
                "above it the threshold falls (draft more) · "
                f"{len(steps)} steps, {trace.n_emitted} tokens</sup>", height, legend_rows=2, right=70)
    fig.update_layout(width=width, plot_bgcolor="white", bargap=0.15)
    fig.update_xaxes(showgrid=False)
    fig.update_xaxes(title_text="step", row=2 if has_threshold else 1, col=1)
    fig.update_yaxes(title_text="accepted / drafted", range=[0, 1.05], gridcolor="#eeeeee", row=1, col=1,
                     secondary_y=False)
    top = max(drafted + [1])
    fig.update_yaxes(title_text="tokens drafted d", range=[0, max(3.0, 2.5 * top)], dtick=max(1, math.ceil(top / 4)),
                     showgrid=False, row=1, col=1, secondary_y=True)
    return fig


def one_pass_figure(check: dict, *, max_rows: int = 14, width: int | None = None,
                    plain_ms_per_token: float | None = None):
    """The one-pass check as a table: the token fed in, the sequence's next token, the argmax at that position."""
    table = check["table"].head(max_rows)
    has_text = "next_text" in table

    def col(name, fallback):
        return [plotly_text(visible(v)) for v in table[name]] if has_text else table[fallback].tolist()

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
        title=dict(text=f"One forward pass predicts every next token at once: "
                        f"{check['n_match']}/{check['n_checked']} {verdict}<br>"
                        f"<sup>one pass over the whole sequence took {check['forward_ms']:.0f} ms{extra} · "
                        f"{shown}</sup>", x=0.01),
        width=width, height=100 + 30 + 24 * len(table) + 25, margin=dict(l=20, r=20, t=90, b=10),
    )
    return fig


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
    trace = as_trace(trace)
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
              f"on this machine draft {1e3 * s.draft_s:.1f} ms + verify {1e3 * s.verify_s:.1f} ms (1 forward pass "
              f"checked {k} token{'s' * (k != 1)}){thr} · {emitted} new tokens so far")
    body = "".join(parts)
    return (f'<div style="font-family:sans-serif;font-size:13px;line-height:1.5">{header}<br>{_legend_html()}</div>'
            f'<div style="font-family:monospace;font-size:13px;white-space:pre-wrap;border:1px solid #ddd;'
            f'padding:6px;margin-top:4px;max-height:360px;overflow:auto">{body}</div>')


def threshold_carry_figure(runs: dict, *, target: float | None = None, width: int | None = None,
                           height: int = 560):
    """The adaptive threshold over consecutive prompts, one line per protocol (``{label: [GenerationResult per
    prompt]}``, e.g. one policy carried across the prompts against a fresh one for every prompt): top, AR (the
    smoothed accepted / drafted the policy reads) against its ``target``; bottom, the threshold in force. x counts
    the tokens generated since the first prompt, so the protocols line up at the prompt boundaries (dotted)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, row_heights=[0.45, 0.55])
    colors = (PALETTE["threshold"], "#7f7f7f", KIND_COLORS["accepted"])
    boundaries, all_thr = [], []
    for i, (label, results) in enumerate(runs.items()):
        xs, thr, ar, hover, done = [], [], [], [], 0
        for k, result in enumerate(results):
            trace = as_trace(result)
            for j, step in enumerate(trace.steps):
                xs.append(done)
                thr.append(step.threshold)
                ar.append(step.policy_state.get("acceptance_rate"))
                hover.append(f"prompt {k + 1}, step {j}")
                done += step.n_emitted
            if i == 0:
                boundaries.append(done)
        all_thr += [t for t in thr if t is not None]
        line = dict(color=colors[i % len(colors)], width=2.5 if i == 0 else 1.8, dash="solid" if i == 0 else "dot")
        fig.add_trace(go.Scatter(x=xs, y=ar, mode="lines", name=f"AR, {label}", line=line, legendgroup=label,
                                 customdata=hover, hovertemplate="%{customdata}: AR %{y:.3f}<extra></extra>"),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=xs, y=thr, mode="lines", name=f"threshold, {label}", legendgroup=label,
                                 line=dict(line, shape="hv"), customdata=hover,
                                 hovertemplate="%{customdata}: threshold %{y:.3f}<extra></extra>"), row=2, col=1)
    if target is not None and boundaries:
        fig.add_trace(go.Scatter(x=[0, boundaries[-1]], y=[target, target], mode="lines", hoverinfo="skip",
                                 name=f"target AR {target:g}", line=dict(color="black", dash="dash", width=1)),
                      row=1, col=1)
    for b in boundaries[:-1]:
        fig.add_vline(x=b, line=dict(color="#999999", dash="dot", width=1))
    if all_thr:
        lo, hi = min(all_thr), max(all_thr)
        pad = max(0.02, 0.15 * (hi - lo))
        fig.update_yaxes(range=[lo - pad, hi + pad], row=2, col=1)
    header(fig, "One adaptive threshold carried across consecutive prompts, against a fresh one per prompt<br>"
                f"<sup>{len(boundaries)} prompts (dotted: where the next prompt starts) · the threshold moves by at "
                "most (1 − β₂)·ε per step</sup>", height, legend_rows=2, right=30)
    fig.update_layout(width=width, plot_bgcolor="white")
    fig.update_yaxes(title_text="AR (smoothed accepted / drafted)", range=[0, 1.05], gridcolor="#eeeeee", row=1, col=1)
    fig.update_yaxes(title_text="threshold (probability)", gridcolor="#eeeeee", row=2, col=1)
    fig.update_xaxes(title_text="tokens generated since the first prompt", row=2, col=1)
    return fig
