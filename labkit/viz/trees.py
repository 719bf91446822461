"""Draft trees drawn: one real tree step with its attention mask beside it, the verdict walking it stage by stage;
c_v against the number of tree nodes; the tree shapes beside the chain.

A tree step is a :class:`~labkit.core.trace.StepRecord` with ``parents`` (each node's parent, -1 the pending token
t_0) and ``path`` (the accepted nodes). The greedy verdict walks from t_0: at each row it accepts the child whose
token is the target's argmax there, rejects that row's other children, and stops at the first row with no match,
where the target's own token is emitted (the replacement; the bonus after a leaf). Stage 0 is the tree as drafted,
stage j ≤ len(path) has accepted path[:j], and the last stage shows the target's token.

Notation (docs/notation.md): q the draft's probability of a node's token; c_v the cost of one verify forward over
t_0 + N nodes ÷ one plain decoding step.
"""
from __future__ import annotations

import re

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import FIGURE_WIDTH, MODEL_COLORS, PALETTE, rgba, token_labels

__all__ = ["tree_layout", "n_stages", "node_status", "mask_z", "tree_view", "tree_edges", "mask_ticks",
           "tree_step_figure", "stage_title",
           "verify_width_figure", "short_label", "shapes_figure", "STATUSES"]

#: What the verdict has done with a node at a stage, in the order the figure's traces draw them.
STATUSES = ("drafted", "accepted", "rejected", "not reached")
_COLORS = {"drafted": "#969696", "accepted": PALETTE["accepted"], "rejected": PALETTE["rejected"],
           "not reached": PALETTE["discarded"]}


def tree_layout(parents: list[int]) -> tuple[list[int], list[float]]:
    """(x, y) of t_0 and every node (index 0: t_0, i + 1: node i): x is the depth, leaves take consecutive rows in
    depth-first order and a parent sits at the middle of its children's rows."""
    kids: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for i, parent in enumerate(parents):
        kids[parent + 1].append(i + 1)
    x, y, next_row = [0] * (len(parents) + 1), [0.0] * (len(parents) + 1), [0]

    def place(row: int, depth: int) -> None:
        x[row] = depth
        for kid in kids[row]:
            place(kid, depth + 1)
        if kids[row]:
            y[row] = sum(y[k] for k in kids[row]) / len(kids[row])
        else:
            y[row], next_row[0] = float(next_row[0]), next_row[0] + 1
    place(0, 0)
    return x, y


def n_stages(step) -> int:
    """Stages of the walk: the drafted tree, one per accepted node, and the target's token (none after an accepted
    EOS, which emits nothing more)."""
    return 1 + len(step.path or []) + (step.next_kind != "none")


def _row_of(path: list[int], j: int) -> int:
    """The row (0: t_0, i + 1: node i) whose children the verdict judges after accepting path[:j]."""
    return path[j - 1] + 1 if j else 0


def node_status(step, stage: int) -> list[str]:
    """Each node's status at ``stage`` (see the module docstring): accepted, rejected (a judged row's child that is
    not the match), not reached (below a rejected node), or drafted (not judged yet)."""
    parents, path = step.parents or [], step.path or []
    status = ["drafted"] * len(parents)
    judged = [_row_of(path, j) for j in range(min(stage, len(path) + 1))]      # row j is judged at stage j + 1
    for row in judged:
        for i, parent in enumerate(parents):
            if parent + 1 == row:
                status[i] = "rejected"
    for i in path[:stage]:
        status[i] = "accepted"
    for i, parent in enumerate(parents):                             # parents come first: one pass suffices
        if parent >= 0 and status[parent] in ("rejected", "not reached"):
            status[i] = "not reached"
    return status


def mask_z(parents: list[int], lit: list[int]) -> list[list[int]]:
    """The tree attention mask as 0 (hidden), 1 (seen) and 2 (seen, on a row of t_0 or an accepted node in
    ``lit``): rows and columns t_0 then the nodes, as :func:`labkit.core.tree.ancestry` builds it."""
    rows = {0} | {i + 1 for i in lit}
    seen = [[False] * (len(parents) + 1) for _ in range(len(parents) + 1)]
    seen[0][0] = True
    for i, parent in enumerate(parents):
        seen[i + 1] = list(seen[parent + 1])
        seen[i + 1][i + 1] = True
    return [[(2 if r in rows else 1) if v else 0 for v in row] for r, row in enumerate(seen)]


def tree_view(step, labels: dict[int, str], stage: int) -> dict:
    """Everything the figure draws at ``stage``: per status the nodes' x, y, text and hover; the accepted path's
    line; the target's token node; the mask's z; the title. ``labels``: {token id: visible text}."""
    parents, path = step.parents or [], step.path or []
    stage = max(0, min(stage, n_stages(step) - 1))
    x, y = tree_layout(parents)
    status = node_status(step, stage)
    by = {s: {"x": [], "y": [], "text": [], "hover": []} for s in STATUSES}
    for i, s in enumerate(status):
        text = labels.get(step.drafted[i], "?")
        by[s]["x"].append(x[i + 1])
        by[s]["y"].append(y[i + 1])
        by[s]["text"].append(text)
        by[s]["hover"].append(f"node {i} {text!r}: parent {parents[i] if parents[i] >= 0 else 't₀'}, "
                              f"q = {step.q[i]:.3f}, {s}")
    lit = path[:stage]
    line = {"x": [0] + [x[i + 1] for i in lit], "y": [y[0]] + [y[i + 1] for i in lit]}
    final = stage == len(path) + 1
    last = _row_of(path, len(path))
    target = ({"x": [x[last] + 1], "y": [y[last]], "text": [labels.get(step.next_token, "?")]} if final
              else {"x": [], "y": [], "text": []})
    if final:
        line = {"x": line["x"] + target["x"], "y": line["y"] + target["y"]}
    return {"nodes": by, "path": line, "target": target, "z": mask_z(parents, lit), "stage": stage,
            "title": stage_title(step, stage, labels), "root": {"x": [0], "y": [y[0]]}}


def stage_title(step, stage: int, labels: dict[int, str]) -> str:
    """One line: what the verdict did at ``stage``."""
    path = step.path or []
    if stage == 0:
        return f"the drafted tree: {len(step.drafted)} nodes, verified in one forward"
    if stage <= len(path):
        node = path[stage - 1]
        return f"stage {stage}: node {node} {labels.get(step.drafted[node], '?')!r} is the target's argmax: accepted"
    word = "bonus" if step.next_kind == "bonus" else "replacement"
    return f"stage {stage}: no child matches; the target's own token {labels.get(step.next_token, '?')!r} ({word})"


def tree_edges(parents: list[int]) -> tuple[list, list]:
    """(x, y) of every parent–child edge, each edge's ends then None (a gap), in :func:`tree_layout`'s layout."""
    x, y = tree_layout(parents)
    ex, ey = [], []
    for i, parent in enumerate(parents):
        ex += [x[parent + 1], x[i + 1], None]
        ey += [y[parent + 1], y[i + 1], None]
    return ex, ey


def mask_ticks(n_nodes: int) -> list[str]:
    """The mask's row and column labels: t₀, then the nodes' indexes."""
    return ["t₀"] + [str(i) for i in range(n_nodes)]


def tree_step_figure(step, tokenizer, stage: int = 0, *, width: int | None = FIGURE_WIDTH) -> go.Figure:
    """The tree of one real step (left) and its attention mask (right) at ``stage`` of the verdict's walk.
    Traces: 0 edges, 1 t_0, 2–5 the nodes by status (:data:`STATUSES`), 6 the accepted path, 7 the target's
    token, 8 the mask (a heatmap). :func:`tree_view` gives what each trace draws at another stage."""
    parents = step.parents or []
    labels = token_labels(tokenizer, list(step.drafted) + [step.next_token])
    view = tree_view(step, labels, stage)
    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.08,
                        subplot_titles=("the tree (x: depth)", "attention mask (row sees column)"))
    ex, ey = tree_edges(parents)
    fig.add_trace(go.Scatter(x=ex, y=ey, mode="lines", line=dict(color="#cccccc", width=1.5), name="edges",
                             hoverinfo="skip", showlegend=False), 1, 1)
    fig.add_trace(go.Scatter(x=view["root"]["x"], y=view["root"]["y"], mode="markers+text", text=["t₀"],
                             textposition="middle left", marker=dict(size=12, color="#222222", symbol="square"),
                             name="t₀ (pending)", showlegend=False), 1, 1)
    for s in STATUSES:
        n = view["nodes"][s]
        fig.add_trace(go.Scatter(x=n["x"], y=n["y"], mode="markers+text", text=n["text"], hovertext=n["hover"],
                                 hoverinfo="text", textposition="middle right", textfont=dict(size=10),
                                 marker=dict(size=11, color=_COLORS[s], line=dict(color="white", width=1)),
                                 name=s), 1, 1)
    fig.add_trace(go.Scatter(x=view["path"]["x"], y=view["path"]["y"], mode="lines", name="accepted path",
                             line=dict(color=rgba(PALETTE["accepted"], 0.45), width=7), hoverinfo="skip"), 1, 1)
    fig.add_trace(go.Scatter(x=view["target"]["x"], y=view["target"]["y"], mode="markers+text",
                             text=view["target"]["text"], textposition="middle right", name="target's token",
                             marker=dict(size=13, color=PALETTE["replacement"], symbol="diamond")), 1, 1)
    ticks = mask_ticks(len(parents))
    fig.add_trace(go.Heatmap(z=view["z"], x=list(range(len(ticks))), y=list(range(len(ticks))), zmin=0, zmax=2,
                             colorscale=[[0, "#ffffff"], [0.33, "#ffffff"], [0.34, "#c6dbef"], [0.66, "#c6dbef"],
                                         [0.67, PALETTE["accepted"]], [1, PALETTE["accepted"]]],
                             showscale=False, xgap=1, ygap=1, name="mask",
                             hovertemplate="row %{y} sees column %{x}: %{z}<extra></extra>"), 1, 2)
    depth = max(tree_layout(parents)[0]) + 1                          # the target's token may sit one deeper
    fig.update_xaxes(title_text="depth", dtick=1, range=[-0.5, depth + 0.9], row=1, col=1)
    fig.update_yaxes(showticklabels=False, autorange="reversed", row=1, col=1)
    fig.update_xaxes(tickvals=list(range(len(ticks))), ticktext=ticks, tickfont=dict(size=9), title_text="column",
                     row=1, col=2)
    fig.update_yaxes(tickvals=list(range(len(ticks))), ticktext=ticks, tickfont=dict(size=9), autorange="reversed",
                     title_text="row", row=1, col=2)
    fig.update_layout(title=view["title"], height=460, width=width, legend=dict(orientation="h", y=-0.15),
                      margin=dict(l=40, r=20, t=80, b=60), template="plotly_white")
    return fig


def verify_width_figure(rows: list[dict], *, cheap: float = 1.5) -> go.Figure:
    """c_v against the number of tree nodes N (log axis), median with min–max error bars, and the line c_v =
    ``cheap`` (what the notebook calls still cheap)."""
    xs = [r["nodes"] for r in rows]
    fig = go.Figure(go.Scatter(
        x=xs, y=[r["c_v"] for r in rows], mode="lines+markers", name="c_v (median)",
        line=dict(color=MODEL_COLORS[2]),
        error_y=dict(type="data", symmetric=False, array=[r["c_v_max"] - r["c_v"] for r in rows],
                     arrayminus=[r["c_v"] - r["c_v_min"] for r in rows])))
    fig.add_hline(y=1.0, line=dict(color=PALETTE["auxiliary"], dash="dot"), annotation_text="one plain step")
    fig.add_hline(y=cheap, line=dict(color=PALETTE["threshold"], dash="dash"), annotation_text=f"c_v = {cheap}",
                  annotation_position="bottom right")
    fig.update_xaxes(type="log", tickvals=xs, title_text="tree nodes N verified with t₀ (one forward)")
    fig.update_yaxes(title_text="c_v (verify ÷ plain step)", rangemode="tozero")
    fig.update_layout(title="What a verify forward costs as the tree grows", height=380,
                      margin=dict(l=60, r=20, t=60, b=50), template="plotly_white")
    return fig


def short_label(method: str) -> str:
    """A shape's label for a crowded chart: its first word and the numbers in its parentheses, e.g. 'dynamic (top 3,
    16 nodes)' -> 'dynamic 3/16'."""
    head, _, rest = method.partition(" (")
    numbers = re.findall(r"\d+(?:\.\d+)?", rest)
    return f"{head} {'/'.join(numbers)}" if numbers else head


def shapes_figure(rows: list[dict]) -> go.Figure:
    """Speedup over the plain loop with min–max error bars (left) and tokens per step against nodes per verify
    (right), one colour per prompt source; ``rows`` from :func:`labkit.measure.costs.tree_costs.compare_shapes`."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("speedup over the plain loop (min–max)", "tokens per step vs nodes per verify"))
    for i, source in enumerate(dict.fromkeys(r["source"] for r in rows)):
        color = PALETTE.get(f"source_{source}", MODEL_COLORS[0])
        mine = [r for r in rows if r["source"] == source and r["kind"] != "plain"]
        fig.add_trace(go.Bar(
            x=[r["method"] for r in mine], y=[r["speedup"] for r in mine], name=f"{source} prompts",
            marker_color=color, legendgroup=source,
            error_y=dict(type="data", symmetric=False, array=[r["speedup_max"] - r["speedup"] for r in mine],
                         arrayminus=[r["speedup"] - r["speedup_min"] for r in mine])), 1, 1)
        fig.add_trace(go.Scatter(
            x=[r["nodes_per_verify"] for r in mine], y=[r["tokens_per_step"] for r in mine], mode="markers+text",
            text=[short_label(r["method"]) for r in mine], textfont=dict(size=9),
            textposition="top center" if i == 0 else "bottom center",     # two sources' labels never stack
            marker=dict(size=10, color=color), name=f"{source} prompts", legendgroup=source, showlegend=False,
            cliponaxis=False), 1, 2)                            # a label at the plot's edge is drawn whole
    fig.add_hline(y=1.0, line=dict(color=PALETTE["auxiliary"], dash="dot"), row=1, col=1)
    fig.update_xaxes(tickangle=-30, tickfont=dict(size=9), row=1, col=1)
    fig.update_yaxes(title_text="speedup", row=1, col=1)
    fig.update_xaxes(title_text="nodes per verify", type="log", row=1, col=2)
    fig.update_yaxes(title_text="tokens per step", row=1, col=2)
    fig.update_layout(barmode="group", height=490, legend=dict(orientation="h", y=-0.35),
                      title="Chain and trees, same prompts, measured on this machine",
                      margin=dict(l=60, r=70, t=90, b=60), template="plotly_white")
    return fig
