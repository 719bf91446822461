"""Notebook 10's glue: the tree stepper (a real tree step, its attention mask, the verdict walking it stage by stage)
and every sentence the notebook writes from its numbers: what a wider verify costs (c_v against tree nodes), which
shape won on each prompt source, and why a tree helps where the draft is unsure and costs where it is sure.

Rows are the harness's (:mod:`labkit.measure.harness`) with ``source`` and ``nodes_per_verify`` added
(:func:`labkit.measure.costs.tree_costs.compare_shapes`). A row is faster or slower than another only when their min–max
speedup ranges over the interleaved repetitions do not overlap; otherwise the sentence says "within the noise".
Notation (docs/notation.md): c the draft cost and c_v the verify cost, both in plain decoding steps; tokens per
step A + 1.
"""
from __future__ import annotations

from ..core.tree import children
from ..viz.style import FIGURE_WIDTH, token_labels
from ..viz.trees import STATUSES, mask_ticks, n_stages, tree_edges, tree_layout, tree_step_figure, tree_view
from ..viz.widgets import update_widget
from .claims import compare, num, overlaps
from .stepper import SliderLook, live_figure, step_controls, stepper_box

__all__ = ["TreeStepper", "left_top1", "pick_steps", "off_top1_sentence", "cheap_up_to", "width_sentence",
           "spec_rows", "shapes_sentence", "trade_sentence", "unsure_sentence", "REFERENCE_LABELS"]


# -- the steps drawn -----------------------------------------------------------------------------------------------
def left_top1(step) -> bool:
    """Did the accepted path leave the draft's top-1 path (at some row, a child other than the first, the draft's
    most likely token, was accepted)? Such a step accepted tokens a chain would not have drafted."""
    kids, row = children(step.parents or []), 0
    for node in step.path or []:
        if kids[row] and kids[row][0] != node:
            return True
        row = node + 1
    return False


def pick_steps(trace, k: int = 4, max_nodes: int = 24) -> dict:
    """Up to ``k`` tree steps of ``trace`` worth drawing, {label: StepRecord}: the longest accepted path that left the
    top-1 path, the longest accepted path, a step that accepted nothing, and the widest tree (each once; trees of
    more than ``max_nodes`` nodes are left out)."""
    steps = [(i, s) for i, s in enumerate(trace.steps) if s.parents and len(s.parents) <= max_nodes]
    if not steps:
        raise ValueError("the trace has no tree steps to draw")
    rules = [lambda s: (left_top1(s), len(s.path or [])), lambda s: len(s.path or []),
             lambda s: (not s.path, len(s.parents)), lambda s: len(s.parents)]
    chosen: list[int] = []
    for rule in rules:
        i = max((i for i, _ in steps if i not in chosen), key=lambda i: rule(trace.steps[i]), default=None)
        if i is not None:
            chosen.append(i)
    out = {}
    for i in sorted(chosen[:k]):
        s = trace.steps[i]
        note = ", off the top-1 path" if left_top1(s) else ""
        out[f"step {i}: {len(s.parents)} nodes, {len(s.path or [])} accepted{note}"] = s
    return out


def off_top1_sentence(traces) -> str:
    """How often the accepted path of a tree step left the draft's top-1 path, over ``traces``."""
    steps = [s for t in traces for s in t.steps if s.parents]
    if not steps:
        return "No tree steps were recorded."
    off = sum(left_top1(s) for s in steps)
    accepting = sum(bool(s.path) for s in steps)
    return (f"In {off} of the {len(steps)} tree steps ({off / len(steps):.0%}; {accepting} accepted at least one "
            f"node) the accepted path left the draft's top-1 path: those tokens came from a sibling that a chain "
            f"would never have drafted.")


class TreeStepper:
    """A real tree step and its attention mask, the greedy verdict stepped stage by stage: a step selector, ◀ ▶ and
    a slider ("stage"); the accepted path lights up in the tree and in the mask's rows. ``steps``: {label:
    StepRecord with parents and path}. Display it as the last expression of a cell."""

    def __init__(self, steps: dict, tokenizer, *, width: int = FIGURE_WIDTH):
        import ipywidgets as widgets

        if not steps:
            raise ValueError("give at least one tree step")
        self.steps, self.tokenizer = steps, tokenizer
        self.step_choice = widgets.Dropdown(options=list(steps), description="tree step",
                                            layout=widgets.Layout(width="420px"), style={"description_width": "70px"})
        self.controls = step_controls("stage", self.update, (0, 0, n_stages(self.step) - 1), what="stage",
                                      look=SliderLook(slider_width="480px"))
        self.slider, self.prev_button, self.next_button = (self.controls.slider, self.controls.prev_button,
                                                           self.controls.next_button)
        self.readout = widgets.HTML()
        self.figure = live_figure(tree_step_figure(self.step, tokenizer, 0, width=width))
        self.step_choice.observe(lambda _: self._new_step(), names="value")
        self.widget = stepper_box([self.step_choice, self.controls.row, self.readout], self.figure)
        self.update()

    @property
    def step(self):
        return self.steps[self.step_choice.value]

    def step_by(self, delta: int) -> None:
        self.controls.step_by(delta)

    def _new_step(self) -> None:
        """A new step starts from its drafted tree (stage 0)."""
        self.slider.value = 0
        self.slider.max = n_stages(self.step) - 1
        _, y = tree_layout(self.step.parents)
        edges_x, edges_y = tree_edges(self.step.parents)
        labels = mask_ticks(len(self.step.parents))
        ticks = list(range(len(labels)))
        update_widget(self.figure, {0: {"x": edges_x, "y": edges_y}, 1: {"x": [0], "y": [y[0]]}},
                      layout={"xaxis2.tickvals": ticks, "xaxis2.ticktext": labels, "yaxis2.tickvals": ticks,
                              "yaxis2.ticktext": labels})
        self.update()

    def update(self) -> None:
        step = self.step
        labels = token_labels(self.tokenizer, list(step.drafted) + [step.next_token])
        view = tree_view(step, labels, int(self.slider.value))
        n = len(step.parents)
        traces = {2 + k: {"x": view["nodes"][s]["x"], "y": view["nodes"][s]["y"], "text": view["nodes"][s]["text"],
                          "hovertext": view["nodes"][s]["hover"]} for k, s in enumerate(STATUSES)}
        traces[6] = {"x": view["path"]["x"], "y": view["path"]["y"]}
        traces[7] = {"x": view["target"]["x"], "y": view["target"]["y"], "text": view["target"]["text"]}
        traces[8] = {"z": view["z"], "x": list(range(n + 1)), "y": list(range(n + 1))}
        update_widget(self.figure, traces, layout={"title.text": view["title"]})
        counts = ", ".join(f"{len(view['nodes'][s]['x'])} {s}" for s in STATUSES)
        lit = 1 + len(view["nodes"]["accepted"]["x"])
        self.readout.value = (f"stage {view['stage']} of {n_stages(step) - 1}: {counts}; {lit} mask row(s) lit "
                              f"(t₀ and the accepted nodes)")

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
        if self.figure not in self.widget.children:
            display(self.figure)


# -- what a verify costs -------------------------------------------------------------------------------------------
def cheap_up_to(rows: list[dict], cheap: float = 1.5) -> int | None:
    """The largest N whose c_v (median) and all smaller ones stay at or below ``cheap``; None if the first does not."""
    last = None
    for r in sorted(rows, key=lambda r: r["nodes"]):
        if r["c_v"] > cheap:
            break
        last = r["nodes"]
    return last


def width_sentence(rows: list[dict], cheap: float = 1.5) -> str:
    """What one verify forward over t_0 + N nodes costs, in plain decoding steps, from
    :func:`labkit.measure.costs.tree_costs.verify_width_costs`' rows: where c_v stops being cheap and the slope."""
    rows = sorted(rows, key=lambda r: r["nodes"])
    first, last = rows[0], rows[-1]
    span = (f"from c_v = {first['c_v']:.2f} ({first['c_v_min']:.2f}–{first['c_v_max']:.2f}) at N = {first['nodes']} "
            f"to {last['c_v']:.2f} ({last['c_v_min']:.2f}–{last['c_v_max']:.2f}) at N = {last['nodes']}")
    slope = (last["c_v"] - first["c_v"]) / (last["nodes"] - first["nodes"]) if len(rows) > 1 else float("nan")
    k = cheap_up_to(rows, cheap)
    if k is None:
        where = f"already above {cheap} plain steps at N = {first['nodes']}"
    elif k == last["nodes"]:
        where = f"at or below {cheap} plain steps through all N measured"
    else:
        where = f"at or below {cheap} plain steps up to N = {k} nodes and above it from the next width on"
    flat = last["c_v_min"] <= first["c_v_max"]
    trend = ("the whole range lies within the noise of one width" if flat else
             f"about {slope:.3f} of a plain step per extra node on average")
    return (f"A verify forward over t₀ and N tree nodes costs {span} (median, min–max over the interleaved "
            f"repetitions): {where}; {trend}.")


# -- shapes against the chain --------------------------------------------------------------------------------------
#: Section 4's live shape labels and the labels reference group 10 gives the same configurations (the others it
#: did not measure): what :func:`labkit.lessons.reference_claims.live_lines` needs to put a live row beside its own.
REFERENCE_LABELS = {"chain": "chain (shipped)",
                    "confidence (below 0.6, 2 siblings)": "shipped draft, confidence tree (below 0.6, siblings 2)",
                    "dynamic (top 2, 8 nodes)": "shipped draft, dynamic tree (top_k 2, nodes 8)"}


def spec_rows(rows: list[dict], source: str) -> dict:
    """{method: row} of one source's speculative rows (the chain and the trees), in the order they ran."""
    return {r["method"]: r for r in rows if r["source"] == source and r["kind"] != "plain"}


def _spread(r: dict) -> tuple[float, float]:
    return (r["speedup_min"], r["speedup_max"])


def _best_tree(mine: dict) -> str:
    return max((m for m, r in mine.items() if r["kind"] == "tree"), key=lambda m: mine[m]["speedup"])


def shapes_sentence(rows: list[dict], source: str, chain: str = "chain") -> str:
    """The best tree against the chain on ``source``, measured on this machine: both speedups with their min–max
    ranges and one verdict (within the noise when the ranges overlap), in under 50 words. The figure shows every
    shape; the sentence ranks nothing else on a live run."""
    mine = spec_rows(rows, source)
    best, c = _best_tree(mine), mine[chain]
    b = mine[best]
    if overlaps(_spread(b), _spread(c)):
        verdict = "within the noise of each other (the min–max ranges overlap)"
    else:
        verdict = (f"the tree {'faster' if b['speedup'] > c['speedup'] else 'slower'} beyond the noise (the "
                   f"min–max ranges do not overlap)")
    return (f"On this machine, on {source} prompts, the tree with the highest median, {best}, measured "
            f"{b['speedup']:.2f}× ({b['speedup_min']:.2f}–{b['speedup_max']:.2f}) and the chain {c['speedup']:.2f}× "
            f"({c['speedup_min']:.2f}–{c['speedup_max']:.2f}): {verdict}.")


def trade_sentence(rows: list[dict], source: str, chain: str = "chain") -> str:
    """The trade of the best tree against the chain on ``source``: extra tokens per step against the dearer step
    (drafting + verify, d·c + c_v = tokens per step ÷ analytic limit), and whether the wall clock agrees."""
    mine = spec_rows(rows, source)
    best, c = _best_tree(mine), mine[chain]
    b = mine[best]
    cost_b, cost_c = b["tokens_per_step"] / b["limit"], c["tokens_per_step"] / c["limit"]
    gain, dearer = b["tokens_per_step"] / c["tokens_per_step"], cost_b / cost_c
    paid = ("about paid for (within 3 % of)" if abs(gain / dearer - 1) <= 0.03 else
            "paid for" if gain > dearer else "did not pay for")
    clock = ("the wall clock cannot tell them apart (overlapping min–max ranges)" if overlaps(_spread(b), _spread(c))
             else f"the wall clock agrees beyond the noise ({b['speedup']:.2f}× against {c['speedup']:.2f}×)"
             if (b["speedup"] > c["speedup"]) == (gain > dearer) else
             f"the wall clock says otherwise ({b['speedup']:.2f}× against {c['speedup']:.2f}×: time outside "
             f"drafting and verifying, e.g. the tree's bookkeeping, decides)")
    return (f"On this machine, on {source} prompts, {best} verified {b['nodes_per_verify']:.1f} nodes per step "
            f"against the chain's {c['nodes_per_verify']:.1f} and emitted {b['tokens_per_step']:.2f} tokens per "
            f"step against {c['tokens_per_step']:.2f} (×{gain:.2f}); its step cost {cost_b:.2f} plain steps (c_v = "
            f"{b['c_v']:.2f}) against {cost_c:.2f} (c_v = {c['c_v']:.2f}), ×{dearer:.2f}: the extra tokens {paid} "
            f"the wider tree, and {clock}.")


def unsure_sentence(rows: list[dict], sources: tuple[str, str] = ("stdlib", "packages"),
                    chain: str = "chain") -> str:
    """Where the draft is unsure (the chain's lower acceptance) the tree has more to win: the best tree's extra
    tokens per step over the chain on each source."""
    a, b = (spec_rows(rows, s) for s in sources)
    gain = {s: m[_best_tree(m)]["tokens_per_step"] - m[chain]["tokens_per_step"] for s, m in zip(sources, (a, b))}
    surer = compare(a[chain]["acceptance"], b[chain]["acceptance"], a_name=f"the chain's acceptance on {sources[0]}",
                    b_name=f"its acceptance on {sources[1]}", rel_tol=0.02)
    more = compare(gain[sources[0]], gain[sources[1]], a_name=f"the best tree's extra tokens per step on {sources[0]}",
                   b_name=f"those on {sources[1]}", rel_tol=0.05)
    if abs(a[chain]["acceptance"] - b[chain]["acceptance"]) <= 0.02 * max(a[chain]["acceptance"], 1e-12):
        return f"{surer[0].upper()}{surer[1:]}: the draft was about as sure on both sources, so this pair cannot say."
    unsure = sources[1] if a[chain]["acceptance"] > b[chain]["acceptance"] else sources[0]
    sure = sources[0] if unsure == sources[1] else sources[1]
    if abs(gain[unsure] - gain[sure]) <= 0.05 * max(abs(gain[unsure]), abs(gain[sure]), 1e-12):   # compare's tolerance
        tail = f"so on these prompts the tree won about as many tokens where the draft was less sure ({unsure})"
    elif gain[unsure] > gain[sure]:
        tail = f"so the tree won more tokens where the draft was less sure ({unsure})"
    else:
        tail = f"yet the tree did not win more tokens where the draft was less sure ({unsure}) on these prompts"
    return f"{surer[0].upper()}{surer[1:]}; {more}: {tail} (tokens per step, {num(gain[unsure])} extra there)."
