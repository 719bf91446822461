"""Parallel decoding, drawn (notebook 06): the fixed-point picture (positions × iterations, every cell the token an
iteration computed there, coloured by what happened to it), how many tokens each iteration fixed, and the
methods side by side (target forwards per token and wall clock).

Cell states (one palette, :data:`STATE_COLORS`): *final* — fixed by an earlier iteration, never touched again;
*fixed* — proven exact by this iteration (the matched prefix plus one); *changed* — this iteration replaced the
guess; *unchanged* — the guess survived but is not proven yet (a slot before it was still wrong).
"""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..core.jacobi import JacobiTrace
from .style import FIGURE_WIDTH, PALETTE, token_labels
from .timeline import header, plotly_text

__all__ = ["STATES", "STATE_COLORS", "grid_view", "grid_title", "iteration_grid_figure", "fixed_per_iteration_figure",
           "decoder_comparison_figure"]

STATES = ("final", "fixed", "changed", "unchanged")
STATE_COLORS = {s: PALETTE["fixed_now" if s == "fixed" else s] for s in STATES}
STATE_LABELS = {"final": "final (fixed by an earlier iteration)", "fixed": "fixed by this iteration",
                "changed": "changed (guess replaced)", "unchanged": "unchanged, not yet proven"}
_TEXT_COLORS = {"final": "#525252", "fixed": "white", "changed": "white", "unchanged": "#00441b"}


def _as_jacobi_trace(obj) -> JacobiTrace:
    trace = getattr(obj, "trace", obj)
    if not isinstance(trace, JacobiTrace):
        raise TypeError(f"expected a JacobiTrace or a jacobi_generate result, got {type(trace).__name__}")
    return trace


def _cell(it, position: int, final_token: dict[int, int]):
    """(state, token, guess going in or None, note) of one cell, or None where the position is not in the block."""
    if position < it.position:
        return "final", final_token[position], None, "fixed by an earlier iteration"
    j = position - it.position
    if j >= it.width:
        return None
    state = "fixed" if j < it.n_fixed else ("changed" if it.guess[j] != it.output[j] else "unchanged")
    new = ", entered with an initial guess" if j >= it.width - it.n_initialised else ""
    return state, it.output[j], it.guess[j], f"slot {j + 1} of the block{new}"


def grid_view(result, tokenizer, *, upto: int | None = None, max_positions: int = 24,
              max_iterations: int = 24) -> dict:
    """Lists for :func:`iteration_grid_figure`: z (state index per cell, None = empty), text and hover, columns
    after ``upto`` (0-based iteration) left empty — what a slider steps through."""
    trace = _as_jacobi_trace(result)
    its = trace.iterations[:max_iterations]
    seq = result.sequences[0].tolist()
    start = trace.prompt_length
    positions = list(range(start, min(len(seq), start + max_positions)))
    final_token = {p: seq[p] for p in positions}
    labels = token_labels(tokenizer, [t for it in its for t in it.output + it.guess] + seq[start:])
    upto = len(its) - 1 if upto is None else upto
    z, text, hover = [], [], []
    for pos in positions:
        zr, tr, hr = [], [], []
        for k, it in enumerate(its):
            cell = _cell(it, pos, final_token) if k <= upto else None
            if cell is None:
                zr.append(None), tr.append(""), hr.append("")
                continue
            state, token, guess, note = cell
            zr.append(STATES.index(state))
            tr.append(plotly_text(labels[token][:7]))
            guess = f"<br>guess going in: {plotly_text(labels[guess])}" if guess is not None else ""
            hr.append(f"iteration {k + 1}, position {pos}: <b>{plotly_text(labels[token])}</b><br>"
                      f"{STATE_LABELS[state]} · {note}{guess}")
        z.append(zr), text.append(tr), hover.append(hr)
    return {"z": z, "text": text, "hover": hover, "x": [f"it {k + 1}" for k in range(len(its))],
            "y": [f"+{p - start + 1}" for p in positions], "upto": upto, "n_iterations": len(its),
            "fixed_so_far": sum(it.n_emitted for it in its[: upto + 1])}


def _colorscale() -> list:
    n = len(STATES)
    scale = []
    for i, state in enumerate(STATES):
        scale += [[i / n, STATE_COLORS[state]], [(i + 1) / n, STATE_COLORS[state]]]
    return scale


def grid_title(trace: JacobiTrace, view: dict) -> str:
    return (f"{trace.method}, init {trace.init}, block {trace.block_size}: after iteration {view['upto'] + 1} of "
            f"{len(trace.iterations)}, {view['fixed_so_far']} tokens fixed<br><sup>each column is one forward of the "
            f"full model over the whole block; a slot is proven once every guess before it was right</sup>")


def iteration_grid_figure(result, tokenizer, *, upto: int | None = None, max_positions: int = 24,
                          max_iterations: int = 24, width: int = FIGURE_WIDTH, height: int | None = None) -> go.Figure:
    """Positions (rows, +1 = the first generated token) × iterations (columns): the token each iteration computed
    at each position, coloured final / fixed / changed / unchanged; columns after ``upto`` are left empty."""
    trace = _as_jacobi_trace(result)
    view = grid_view(result, tokenizer, upto=upto, max_positions=max_positions, max_iterations=max_iterations)
    fig = go.Figure(go.Heatmap(
        z=view["z"], x=view["x"], y=view["y"], text=view["text"], hovertext=view["hover"], zmin=0,
        zmax=len(STATES), colorscale=_colorscale(), showscale=False, xgap=1, ygap=1, texttemplate="%{text}",
        textfont=dict(size=10), hovertemplate="%{hovertext}<extra></extra>", hoverongaps=False))
    for state in STATES:                                            # legend entries for the cell colours
        fig.add_scatter(x=[None], y=[None], mode="markers", name=STATE_LABELS[state],
                        marker=dict(symbol="square", size=13, color=STATE_COLORS[state],
                                    line=dict(color="#999", width=1)))
    fig.update_layout(width=width, plot_bgcolor="white", xaxis=dict(title="iteration (one forward each)"),
                      yaxis=dict(title="position after the prompt", autorange="reversed", type="category"))
    header(fig, grid_title(trace, view), height or 150 + 22 * len(view["y"]), left=60)
    return fig


def fixed_per_iteration_figure(traces: dict[str, list[JacobiTrace]], *, width: int = FIGURE_WIDTH,
                               height: int = 380) -> go.Figure:
    """For each method: the share of iterations that fixed 1, 2, 3, … tokens (1 = no better than plain decoding)."""
    fig = go.Figure()
    colors = [PALETTE["fixed_now"], PALETTE["target"], PALETTE["draft"], PALETTE["residual"], PALETTE["auxiliary"],
              PALETTE["changed"]]
    top = max((it.n_fixed for ts in traces.values() for t in ts for it in t.iterations), default=1)
    for (label, ts), color in zip(traces.items(), colors * 3):
        fixed = [it.n_fixed for t in ts for it in t.iterations]
        if not fixed:
            continue
        x = list(range(1, top + 1))
        fig.add_bar(x=x, y=[fixed.count(v) / len(fixed) for v in x], name=label, marker_color=color,
                    hovertemplate=f"{label}<br>%{{y:.0%}} of iterations fixed %{{x}} token(s)<extra></extra>")
    fig.update_layout(barmode="group", template="plotly_white", width=width, yaxis=dict(title="share of iterations",
                      tickformat=".0%"), xaxis=dict(title="tokens fixed by one iteration", dtick=1))
    header(fig, "How many tokens one iteration fixes", height, legend_rows=2)
    return fig


def decoder_comparison_figure(frame, *, reference=None, width: int = FIGURE_WIDTH, height: int = 430) -> go.Figure:
    """Two panels over the methods of :func:`labkit.measure.comparisons.parallel.compare_decoders`: target forwards per
    generated token, and wall-clock speedup over the first method with its min–max spread (this machine).
    ``reference``: {method: (median, min, max)} from a committed reference run, drawn as black diamonds with their
    range beside this machine's bars, so the bars never stand alone against the reference's ranking."""
    methods = list(frame.index)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.28,
                        subplot_titles=["full-model forwards per token (plain = 1)",
                                        f"speedup over the {methods[0]} (×, min–max)"])
    fig.add_bar(y=methods, x=[float(v) for v in frame["forwards_per_token"]], orientation="h", showlegend=False,
                marker_color=PALETTE["target"], hovertemplate="%{y}: %{x:.3f} forwards per token<extra></extra>",
                row=1, col=1)
    speed = [float(v) for v in frame["speedup"]]
    # the min–max of the per-repetition ratios (what the sentence reads), not the plain median over each method's
    # fastest and slowest ms: the reference method then has no error bar against itself
    lo = [float(v) for v in frame["speedup_min"]] if "speedup_min" in frame else speed
    hi = [float(v) for v in frame["speedup_max"]] if "speedup_max" in frame else speed
    fig.add_bar(y=methods, x=speed, orientation="h", showlegend=False, marker_color=PALETTE["speedup"],
                error_x=dict(type="data", symmetric=False, array=[h - s for h, s in zip(hi, speed)],
                             arrayminus=[s - low for low, s in zip(lo, speed)]),
                hovertemplate="%{y}: %{x:.2f}×<extra></extra>", row=1, col=2, name="this machine")
    marked = [m for m in methods if m in (reference or {})]
    if marked:
        ref = [[float(v) for v in reference[m]] for m in marked]
        fig.add_scatter(y=marked, x=[r[0] for r in ref], mode="markers", name="reference run (min–max)",
                        marker=dict(symbol="diamond", size=10, color="black"), row=1, col=2,
                        error_x=dict(type="data", symmetric=False, array=[r[2] - r[0] for r in ref],
                                     arrayminus=[r[0] - r[1] for r in ref], color="black"),
                        hovertemplate="%{y}: reference %{x:.2f}×<extra></extra>")
        fig.data[1].showlegend = True
    for col in (1, 2):
        fig.add_vline(x=1.0, line=dict(color="black", width=1, dash="dot"), row=1, col=col)
        fig.update_yaxes(autorange="reversed", row=1, col=col)
    fig.update_annotations(font=dict(size=12))          # subplot titles: short and small enough for their column
    fig.update_layout(template="plotly_white", width=width)
    header(fig, "Same prompts, interleaved: how many forwards, how much wall clock", height,
           legend_rows=1 if marked else 0, left=170)
    return fig
