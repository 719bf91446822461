"""Notebook 06's glue: the iteration stepper (slider and ◀ ▶ over the positions × iterations grid of real runs)
and the sentences that compare methods, written from the measured numbers (so they stay true on any rerun).

Notation: a Jacobi iteration is one forward of the target p over a block of guessed tokens; it fixes the matched
prefix plus one. "Forwards per token" counts forwards of the full model (plain decoding: 1).
"""
from __future__ import annotations

from ..viz.jacobi import grid_title, grid_view, iteration_grid_figure
from ..viz.style import FIGURE_WIDTH
from ..viz.widgets import update_widget
from .stepper import live_figure, step_controls, stepper_box

__all__ = ["IterationStepper", "forwards_sentence", "reference_label", "speed_sentence", "why_sentence"]


def reference_label(block_size: int = 4):
    """A function giving each live row of section 5 its label in the reference group 06 (None: not measured
    there). Why: :func:`labkit.lessons.reference_claims.live_beside_reference` matches rows by label, and the
    reference names the Jacobi rows' block size and calls the lab's best draft "shipped configuration"."""
    def label(method: str) -> str | None:
        if method == "self-speculative":
            return "shipped configuration"
        if method.startswith(("jacobi", "gauss-seidel")):
            return f"{method} (block {block_size})"
        return None
    return label


def _tokens_per_forward_phrase(tpf: float) -> str:
    if tpf < 1.02:
        return "no better than plain decoding's one"
    if tpf < 1.15:
        return "barely more than plain decoding's one"
    return "clearly more than plain decoding's one"


def forwards_sentence(frame, vanilla: str = "jacobi, pad", speculative: str = "self-speculative") -> str:
    """How many full-model forwards per token vanilla Jacobi needed, the best parallel (Jacobi / Gauss-Seidel)
    variant, and self-speculative decoding; ``frame`` from
    :func:`labkit.measure.comparisons.parallel.compare_decoders`."""
    v = frame.loc[vanilla]
    text = (f"Vanilla Jacobi ({vanilla}) needed {v.forwards_per_token:.3f} forwards of the full model per token, i.e. "
            f"{v.tokens_per_forward:.2f} tokens per forward: {_tokens_per_forward_phrase(v.tokens_per_forward)}.")
    parallel = [m for m in frame.index if m.startswith(("jacobi", "gauss-seidel")) and m != vanilla]
    if parallel:
        best = min(parallel, key=lambda m: frame.loc[m, "forwards_per_token"])
        b = frame.loc[best]
        relation = ("fewer than" if b.forwards_per_token < v.forwards_per_token else "no fewer than")
        text += (f" The best other parallel variant, {best}, needed {b.forwards_per_token:.3f} "
                 f"({relation} vanilla Jacobi).")
    if speculative in frame.index:
        s = frame.loc[speculative]
        fewest = frame.loc[[vanilla] + parallel, "forwards_per_token"].min()
        relation = ("fewer than every parallel variant" if s.forwards_per_token < fewest else
                    "not fewer than the best parallel variant")
        text += (f" Self-speculative decoding needed {s.forwards_per_token:.3f}, {relation} "
                 f"(its drafting forwards of the skipped model are not counted here; the wall clock includes them).")
    return text


def speed_sentence(frame, reference: str | None = None) -> str:
    """Which methods ran faster than the reference on this machine, which slower, and which within the noise: a
    method is faster (slower) only when its whole min–max speedup range over the interleaved repetitions lies above
    (below) 1; a range that contains 1 is "within the noise"."""
    reference = reference or frame.index[0]
    rows = sorted(((m, float(frame.loc[m, "speedup"])) for m in frame.index if m != reference), key=lambda r: -r[1])
    spread = {"speedup_min", "speedup_max"} <= set(frame.columns)
    lo = {m: float(frame.loc[m, "speedup_min"]) if spread else s for m, s in rows}
    hi = {m: float(frame.loc[m, "speedup_max"]) if spread else s for m, s in rows}
    shown = lambda m, s: f"{m} ({s:.2f}×, {lo[m]:.2f}–{hi[m]:.2f})" if spread else f"{m} ({s:.2f}×)"  # noqa: E731
    groups = {"faster than": [shown(m, s) for m, s in rows if lo[m] > 1.0],
              "slower than": [shown(m, s) for m, s in rows if hi[m] < 1.0],
              "within the noise of": [shown(m, s) for m, s in rows if lo[m] <= 1.0 <= hi[m]]}
    parts = [f"{word} the {reference}: {', '.join(items)}" for word, items in groups.items() if items]
    single = not spread or all(lo[m] == hi[m] for m, _ in rows)
    head = ("Wall clock on this machine (one run, so no spread: a difference of a few percent may be noise) — "
            if single else "Wall clock on this machine (median speedup and its min–max over the interleaved "
                           "repetitions) — ")
    return head + "; ".join(parts) + "."


def why_sentence(stats: dict, label: str = "vanilla Jacobi") -> str:
    """Why vanilla Jacobi barely beats one token per forward, in the numbers of
    :func:`labkit.measure.comparisons.parallel.jacobi_statistics`."""
    share, right = stats["one_token_share"], stats["guess_right_rate"]
    verdict = ("so nearly every iteration fixed only the one token that needs no guess" if share >= 0.8 else
               "so many iterations fixed more than the one token that needs no guess")
    return (f"In {label}, {share:.0%} of the {stats['iterations']} iterations fixed exactly one token, and a guess fed "
            f"into the model was already the right token {right:.1%} of the time ({verdict}; the most one iteration "
            f"fixed was {stats['max_fixed']}).")


class IterationStepper:
    """Step through the iterations of real Jacobi runs (``runs``: {label: jacobi_generate result}): a run selector,
    ◀ ▶ and a slider; the grid shows the iterations up to the slider's. Display as the last expression of a cell."""

    def __init__(self, runs: dict, tokenizer, *, max_positions: int = 24, max_iterations: int = 24,
                 width: int = FIGURE_WIDTH):
        import ipywidgets as widgets

        if not runs:
            raise ValueError("give at least one run")
        self.runs, self.tokenizer = runs, tokenizer
        self.limits = dict(max_positions=max_positions, max_iterations=max_iterations)
        self.run = widgets.Dropdown(options=list(runs), description="run", layout=widgets.Layout(width="360px"))
        # the slider shows the iteration number the title says (1-based); the trace is indexed from 0
        self.controls = step_controls("iteration", self.update, (1, 1, self._last()), what="iteration")
        self.slider, self.prev_button, self.next_button = (self.controls.slider, self.controls.prev_button,
                                                           self.controls.next_button)
        self.readout = widgets.HTML()
        self.figure = live_figure(iteration_grid_figure(self.result, tokenizer, upto=0, width=width, **self.limits))
        self.run.observe(lambda _: self._new_run(), names="value")
        self.widget = stepper_box([self.run, self.controls.row, self.readout], self.figure)
        self.update()

    @property
    def result(self):
        return self.runs[self.run.value]

    def _last(self) -> int:
        """The last iteration the grid can show (1-based)."""
        return max(1, min(len(self.result.trace.iterations), self.limits["max_iterations"]))

    def _new_run(self) -> None:
        self.slider.max = self._last()
        self.slider.value = min(self.slider.value, self.slider.max)
        self.update()

    def step_by(self, delta: int) -> None:
        self.controls.step_by(delta)

    def update(self) -> None:
        i = int(self.slider.value) - 1
        view = grid_view(self.result, self.tokenizer, upto=i, **self.limits)
        fig = self.figure
        update_widget(fig, {0: {"z": view["z"], "text": view["text"], "hovertext": view["hover"], "x": view["x"],
                                "y": view["y"]}}, layout={"title.text": grid_title(self.result.trace, view)})
        it = self.result.trace.iterations[i]
        guesses = f"{it.n_matched} guess{'es' * (it.n_matched != 1)}"
        self.readout.value = (f"iteration {i + 1}: block of {it.width} slots, "
                              f"{sum(it.changed)} changed, {it.n_fixed} fixed ({guesses} confirmed + 1)")

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)
        if self.figure not in self.widget.children:
            display(self.figure)
