"""Notebook 03's glue: the step replayer (◀ ▶ and a slider over a real trace), the skip set it drafts with,
and one prompt drafted two ways."""
from __future__ import annotations

import contextlib

from ..artifacts.results import skip_set_for
from ..core.decoding import speculative_generate
from ..core.policies import AdaptiveThreshold
from ..core.skip import SkipSet
from ..viz.timeline import HIGHLIGHT_NAME, as_trace, highlight_shape, step_times, timeline_figure
from ..viz.trace import step_html
from ..viz.widgets import as_widget

__all__ = ["TraceReplayer", "demo_skip_set", "compare_drafters"]


class TraceReplayer:
    """Replays a trace step by step: ◀ ▶ buttons, a slider over steps, the growing text, and the
    timeline with the current step framed (the view follows the step).

    ``run``: a GenerationResult (its prompt is shown) or a Trace. Display it in a notebook as the
    last expression of a cell (or ``display(replayer)``); ``update()`` redraws for the slider value.
    """

    def __init__(self, run, tokenizer, *, window_steps: int = 8, draft_label: str = "skipped layers",
                 width: int | None = None, figure_widget: bool = True):
        import ipywidgets as widgets

        self.trace = as_trace(run)
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


def demo_skip_set(model, name: str = "default", verbose: bool = True) -> SkipSet:
    """The skip set notebook 03 drafts with: :func:`labkit.artifacts.results.skip_set_for` (the searched best,
    else the model card's, else a fixed set of late blocks), said aloud."""
    n_layers = int(model.config.num_hidden_layers)
    skip, source = skip_set_for(name, n_layers)
    if verbose:
        print(f"skip set for {name!r} from {source}: {skip} ({skip.ratio(n_layers):.0%} of blocks)")
    return skip


def compare_drafters(model, input_ids, *, skip: SkipSet, draft_model, max_new_tokens: int, policy_factory=None,
                     labels: tuple[str, str] = ("self-draft (skipped layers)", "separate draft model")) -> dict:
    """Greedy runs of the same prompt drafted by ``model`` minus ``skip`` and by ``draft_model``
    (each with a fresh policy, after a short warm-up): ``{label: GenerationResult}``."""
    policy_factory = policy_factory or AdaptiveThreshold
    speculative_generate(model, input_ids, draft_model=draft_model, policy=policy_factory(),
                         max_new_tokens=min(4, max_new_tokens))                      # warm-up: first-call costs
    runs = {}
    runs[labels[0]] = speculative_generate(model, input_ids, skip=skip, policy=policy_factory(),
                                           max_new_tokens=max_new_tokens)
    runs[labels[1]] = speculative_generate(model, input_ids, draft_model=draft_model, policy=policy_factory(),
                                           max_new_tokens=max_new_tokens)
    return runs
