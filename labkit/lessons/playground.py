"""Notebook 04's glue: presets and the Playground widget (the sentences are in :mod:`.playground_claims`)."""
from __future__ import annotations

import html
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import numpy as np
import torch

from ..artifacts.models import load_model
from ..artifacts.prompts import benchmark_prompts, source_label
from ..core.devices import dtype_name, model_device, model_dtype, resolve_device, resolve_dtype
from ..measure.grid.results import PlaygroundGrid, Setting
from ..measure.grid.run import measure_live
from ..viz.playground import PANELS, axis_ranges, figure_title, fmt, panel_errors, panel_xy, playground_figure
from ..viz.widgets import as_widget, update_widget
from .playground_claims import guiding_answers, live_verdict

__all__ = ["presets", "presets_frame", "guiding_answers", "Playground"]


def presets(grid: PlaygroundGrid, draft_weights: str | None = None) -> dict[str, Setting]:
    """Named settings: too timid / the paper's / too aggressive (paper's policy at the lowest, ≈ 50 %
    and highest skip ratio of the grid) and the best cell found (highest median speedup; see
    :func:`~labkit.lessons.playground_claims.best_found_sentence` for how many cells its noise cannot rank).

    ``draft_weights`` (the widget's toggle): every preset with those weights, "best found" the best of their
    cells; None: the first three with the paper's own (fp32) weights, "best found" the best of the whole grid."""
    paper = grid.nearest(draft_weights=draft_weights)
    return {
        "too timid": replace(paper, ratio=grid.ratios[0]),
        "paper's setting": paper,
        "too aggressive": replace(paper, ratio=grid.ratios[-1]),
        "best found": grid.best(None if draft_weights is None else paper.draft_weights)[0],
    }


def presets_frame(grid: PlaygroundGrid, draft_weights: str | None = None):
    """The named presets (:func:`presets`) side by side: setting, accepted / drafted, tokens per step, speedup
    with its min-max over repetitions, the cells (of the same draft weights) within its noise, and the analytic
    limit."""
    import pandas as pd

    rows = []
    for name, s in presets(grid, draft_weights).items():
        cell = grid.cell(s)
        rows.append({"preset": name, "skip ratio": s.ratio, "policy": s.policy, "threshold": s.threshold,
                     "max draft": s.max_draft, "draft weights": s.draft_weights,
                     "accepted / drafted": cell["acceptance_rate"],
                     "tokens/step": cell["tokens_per_step"], "speedup": cell["speedup"],
                     "speedup min": cell["speedup_min"], "speedup max": cell["speedup_max"],
                     "cells within its noise": len(grid.within_noise(s)),
                     "analytic limit": cell["analytic_speedup"]})
    return pd.DataFrame(rows).set_index("preset")


_WEIGHTS_TIP = {"fp32": "the draft reads the model's own weights",
                "int8": "the draft reads int8 copies of the linear weights (verification keeps the model's own)"}


def _live_loader(device, dtype) -> Callable:
    """``load_model`` on ``device`` in ``dtype``, both checked now (a bad name fails here, not at the click)."""
    resolve_device(device), resolve_dtype(dtype)
    return partial(load_model, device=device, dtype=dtype)


def _other_weights_html(grid: PlaygroundGrid, s: Setting) -> str:
    """The same knobs with the grid's other draft weights, one readout line ('' for a grid with one kind)."""
    parts = []
    for weights in grid.draft_weights:
        if weights != s.draft_weights:
            other = grid.cell(replace(s, draft_weights=weights))
            parts.append(f"with {weights} draft weights: speedup {fmt(other['speedup'])}× (min–max "
                         f"{fmt(other['speedup_min'])}–{fmt(other['speedup_max'])}), c = {fmt(other.get('c'), '.3f')}, "
                         f"accepted / drafted {fmt(other['acceptance_rate'])}")
    return f"<br>the same knobs {'; '.join(parts)}" if parts else ""


class Playground:
    """Sliders over a precomputed grid; ``widget`` is the thing to display, ``update()`` refreshes.

    The knobs: skip ratio, threshold, max draft γ, policy and draft weights (fp32 / int8: which cells every
    curve, the star and the readout show, and what "run live" measures).

    ``grids``: one :class:`PlaygroundGrid` or a dict name → grid (the model toggle's options).
    ``loader(name) -> (model, tokenizer)`` is used by "run live" (default :func:`labkit.load_model` on ``device``
    in ``dtype``, None: the CPU, fp32; the grid's ``model`` field is the name passed; give a loader or
    ``device``/``dtype``, not both). A live point records the device and precision it ran in. ``live_source``: the
    prompts "run live" measures on: "grid"
    (the grid's own), or any source of :func:`labkit.prompts` ("stdlib", "packages", a .txt/.jsonl file).
    """

    def __init__(self, grids, *, model: str | None = None, loader: Callable | None = None,
                 live_prompts: int = 2, live_tokens: int = 48, live_source="grid", device=None, dtype=None):
        if isinstance(grids, PlaygroundGrid):
            grids = {grids.name: grids}
        if not grids:
            raise ValueError("Playground needs at least one grid")
        self.grids: dict[str, PlaygroundGrid] = dict(grids)
        if loader is not None and (device is not None or dtype is not None):
            raise ValueError("give loader or device/dtype, not both: a loader places its own models")
        self.loader = loader or _live_loader(device, dtype)
        self.live_prompts, self.live_tokens, self.live_source = live_prompts, live_tokens, live_source
        if live_source != "grid":
            benchmark_prompts(live_prompts, source=live_source)            # a bad source fails here, not at the click
        self.live: dict[str, list[dict]] = {name: [] for name in self.grids}
        self._loaded: dict[str, tuple] = {}
        self._hold = 0
        name = model if model is not None else next(iter(self.grids))
        if name not in self.grids:
            raise KeyError(f"no grid for model {name!r} (have: {', '.join(self.grids)})")
        start = self.grids[name].best()[0]                   # open on the grid's fastest cell
        self._status_for = None                              # the (model, setting) the status line speaks of
        self._build_controls(name, start)
        self.figure = as_widget(playground_figure(self.grids[name], start, self.live[name]))
        self.widget = self._layout()
        self.update()

    def _build_controls(self, name: str, start: Setting) -> None:
        """The model toggle, the five knobs, the preset and live buttons, wired to the refresh."""
        import ipywidgets as widgets

        grid = self.grids[name]
        wide, narrow = widgets.Layout(width="420px"), widgets.Layout(width="300px")
        self.model_toggle = widgets.ToggleButtons(options=list(self.grids), value=name, description="model")
        self.ratio_slider = widgets.SelectionSlider(options=self._ratio_options(grid), value=start.ratio,
                                                    description="skip ratio", continuous_update=True, layout=wide)
        self.threshold_slider = widgets.SelectionSlider(options=self._threshold_options(grid), value=start.threshold,
                                                        description="threshold", continuous_update=True, layout=wide)
        self.max_draft_slider = widgets.SelectionSlider(options=[(str(k), k) for k in grid.max_drafts],
                                                        value=start.max_draft, description="max draft γ",
                                                        continuous_update=True, layout=narrow)
        short = {"button_width": "92px"}                 # two toggles beside the model one fit the column
        self.policy_toggle = widgets.ToggleButtons(options=grid.policies, value=start.policy, description="policy",
                                                   style=short)
        self.weights_toggle = widgets.ToggleButtons(
            options=grid.draft_weights, value=start.draft_weights, description="draft weights", style=short,
            tooltips=[_WEIGHTS_TIP[w] for w in grid.draft_weights])
        self.preset_buttons = {}
        for preset in presets(grid):
            button = widgets.Button(description=preset, layout=widgets.Layout(width="auto"))
            button.on_click(lambda _, p=preset: self.apply_preset(p))
            self.preset_buttons[preset] = button
        self.live_button = widgets.Button(description="run live", icon="play", button_style="warning",
                                          tooltip="re-measure the current setting on this machine "
                                                  f"({self.live_prompts} prompts × {self.live_tokens} tokens)")
        self.live_button.on_click(lambda _: self.run_live())
        self.readout, self.status = widgets.HTML(), widgets.HTML()
        for control in self._knobs():
            control.observe(lambda _: self._changed(), names="value")
        self.model_toggle.observe(lambda _: self._model_changed(), names="value")

    def _layout(self):
        import ipywidgets as widgets

        return widgets.VBox([
            widgets.HBox([self.model_toggle, self.policy_toggle, self.weights_toggle]),
            widgets.HBox([self.ratio_slider, self.threshold_slider, self.max_draft_slider]),
            widgets.HBox([widgets.HTML("<b>presets:</b>&nbsp;"), *self.preset_buttons.values(),
                          widgets.HTML("&nbsp;&nbsp;"), self.live_button]),
            self.readout, self.figure, self.status])

    # -- state ------------------------------------------------------------------------------
    def _knobs(self) -> tuple:
        """The controls that pick the cell, in the order of :class:`Setting`'s fields."""
        return (self.ratio_slider, self.threshold_slider, self.max_draft_slider, self.policy_toggle,
                self.weights_toggle)

    @staticmethod
    def _ratio_options(grid: PlaygroundGrid):
        return [(f"{r:.3f}", r) for r in grid.ratios]

    @staticmethod
    def _threshold_options(grid: PlaygroundGrid):
        return [(f"{t:g}", t) for t in grid.thresholds]

    @property
    def model_name(self) -> str:
        return self.model_toggle.value

    @property
    def grid(self) -> PlaygroundGrid:
        return self.grids[self.model_name]

    @property
    def setting(self) -> Setting:
        return Setting(*(control.value for control in self._knobs()))

    def _move_knobs(self, s: Setting) -> None:
        """Every knob to ``s`` (a setting of the current grid) without a refresh per knob."""
        self._hold += 1
        try:
            for control, value in zip(self._knobs(), (s.ratio, s.threshold, s.max_draft, s.policy, s.draft_weights)):
                control.value = value
        finally:
            self._hold -= 1

    def set(self, setting: Setting) -> None:
        """Move every knob to ``setting`` (snapped to the grid), refreshing once."""
        self._move_knobs(self.grid.nearest(setting.ratio, setting.threshold, setting.max_draft, setting.policy,
                                           setting.draft_weights))
        self.update()

    def presets(self) -> dict[str, Setting]:
        """The presets at the selected draft weights (:func:`presets`)."""
        return presets(self.grid, self.weights_toggle.value)

    def apply_preset(self, name: str) -> Setting:
        table = self.presets()
        if name not in table:
            raise KeyError(f"unknown preset {name!r} (have: {', '.join(table)})")
        self.set(table[name])
        self.status.value = f"preset <b>{html.escape(name)}</b>: {html.escape(self.setting.describe())}"
        self._status_for = (self.model_name, self.setting)
        return self.setting

    def _changed(self) -> None:
        if not self._hold:
            self.update()

    def _model_changed(self) -> None:
        """Swap the grid: slider options of the new model, the nearest setting, axis ranges."""
        old = self.setting
        grid = self.grid
        s = grid.nearest(old.ratio, old.threshold, old.max_draft, old.policy, old.draft_weights)
        self._hold += 1
        try:
            self.ratio_slider.options = self._ratio_options(grid)
            self.threshold_slider.options = self._threshold_options(grid)
            self.max_draft_slider.options = [(str(k), k) for k in grid.max_drafts]
            self.policy_toggle.options = grid.policies
            self.weights_toggle.options = grid.draft_weights
            self.weights_toggle.tooltips = [_WEIGHTS_TIP[w] for w in grid.draft_weights]
        finally:
            self._hold -= 1
        self._move_knobs(s)
        with self.figure.batch_update():
            for row in range(2):
                for col in range(len(PANELS)):
                    axis = row * 3 + col + 1
                    getattr(self.figure.layout, f"xaxis{'' if axis == 1 else axis}").range = (
                        [min(grid.ratios) - 0.04, max(grid.ratios) + 0.04] if row == 0 else
                        [min(grid.thresholds) - 0.05, max(grid.thresholds) + 0.05])
        self.update()

    # -- refresh ----------------------------------------------------------------------------
    def update(self) -> None:
        """Copy the current slice of the grid (and matching live points) into the FigureWidget."""
        grid, s = self.grid, self.setting
        xy = panel_xy(grid, s, self.live[self.model_name])
        traces = {index: {"x": x, "y": y} for index, (x, y) in xy.items()}
        for index, (plus, minus) in panel_errors(grid, s).items():
            traces[index].update({"error_y.array": plus, "error_y.arrayminus": minus})
        layout = {"title.text": figure_title(grid, s), **axis_ranges(grid, s, self.live[self.model_name])}
        update_widget(self.figure, traces, layout=layout)         # y ranges follow the slice (viz.playground)
        self.readout.value = self._readout_html(grid, s)
        if self._status_for != (self.model_name, s):              # a preset's or live run's line is about its cell
            self.status.value, self._status_for = "", None

    def _readout_html(self, grid: PlaygroundGrid, s: Setting) -> str:
        cell = grid.cell(s)
        skip = grid.skip_set(s.ratio)
        entry = grid.ratio_entry(s.ratio)
        moved = ""
        if s.policy == "adaptive" and cell.get("final_threshold") is not None:
            moved = f"; the adaptive threshold moved {s.threshold:g} → {fmt(cell['final_threshold'])}"
        same = {True: "yes", False: "NO", None: "n/a"}[cell.get("identical_to_plain")]
        details = (f"skip set ({entry['n_skipped']} of {2 * grid.data['n_layers']} blocks, bucket "
                   f"[{entry['bucket'][0]:g}, {entry['bucket'][1]:g})): {html.escape(str(skip))}; "
                   f"{fmt(cell['ms_per_token'])} ms/token vs {fmt(cell['plain_ms_per_token'])} for the plain loop "
                   f"(this skip set's shared baseline); analytic limit {fmt(cell.get('analytic_speedup'))}× with "
                   f"c = {fmt(cell.get('c'), '.3f')}, c_v = {fmt(cell.get('c_v'), '.2f')} (forward passes only: "
                   f"{fmt(cell.get('analytic_speedup_forward'))}×){moved}{_other_weights_html(grid, s)}")
        return (f"<b>{html.escape(grid.name)}</b>, {html.escape(s.describe())}<br>"
                f"speedup <b>{fmt(cell['speedup'])}×</b> (min–max {fmt(cell['speedup_min'])}–"
                f"{fmt(cell['speedup_max'])} over {len(cell['speedup_repeats'])} repetitions; "
                f"{len(grid.within_noise(s))} other {s.draft_weights} cells within its noise) · accepted / drafted "
                f"<b>{fmt(cell['acceptance_rate'])}</b> · <b>{fmt(cell['tokens_per_step'])}</b> tokens per step "
                f"(d = {fmt(cell['drafted_per_step'])} drafted) · identical to plain decoding: {same}"
                f"{self._live_html(s)}<details><summary>details of this cell</summary>{details}</details>")

    def _live_html(self, s: Setting) -> str:
        """The latest live run of exactly ``s`` (draft weights included), as a readout line ('' if none)."""
        live = [p for p in self.live[self.model_name]
                if all(p[k] == getattr(s, k) for k in ("ratio", "threshold", "max_draft", "policy"))
                and p.get("draft_weights", "fp32") == s.draft_weights]
        if not live:
            return ""
        p = live[-1]
        where = "" if (p.get("device", "cpu"), p.get("dtype", "fp32")) == ("cpu", "fp32") else \
            f"{p['device']}, {p['dtype']}, "
        return (f"<br><b>live run</b> ({p['n_prompts']} prompts × {p['max_new_tokens']} tokens, {where}"
                f"{p['measured_at']}): speedup {fmt(p['speedup'])}× ({fmt(p['speedup_min'])}–"
                f"{fmt(p['speedup_max'])}) on this machine = {fmt(p['vs_grid'])} × the grid's, accepted / drafted "
                f"{fmt(p['acceptance_rate'])}, {fmt(p['tokens_per_step'])} tokens/step")

    def measure_update_ms(self) -> float:
        """Median ms of a slider move (observer + refresh) over every option of every slider and toggle."""
        times, start = [], self.setting
        for slider in self._knobs():
            values = [o[1] if isinstance(o, tuple) else o for o in slider.options]
            original = slider.value
            for v in [*values, original]:
                t0 = time.perf_counter()
                if slider.value == v:
                    self.update()
                else:
                    slider.value = v
                times.append((time.perf_counter() - t0) * 1000)
        self.set(start)
        return float(np.median(times))

    # -- live -------------------------------------------------------------------------------
    def _live_texts(self, grid) -> list[str]:
        if self.live_source == "grid":
            return grid.prompt_texts[: self.live_prompts]
        return [p.text for p in benchmark_prompts(self.live_prompts, source=self.live_source)]

    def run_live(self) -> dict:
        """Re-measure the current setting on this machine and add it to the plots; returns the point."""
        name, grid, s = self.model_name, self.grid, self.setting
        self.live_button.disabled = True
        self.status.value = f"measuring {html.escape(s.describe())} live…"
        try:
            if name not in self._loaded:
                self._loaded[name] = self.loader(grid.data["model"])
            model, tokenizer = self._loaded[name]
            with torch.inference_mode():
                point = measure_live(model, tokenizer, grid.skip_set(s.ratio), s, self._live_texts(grid),
                                     max_new_tokens=self.live_tokens, cost_model=grid.cost_model_for(s.draft_weights))
                point["prompts"] = "grid" if self.live_source == "grid" else source_label(self.live_source)
                point["device"], point["dtype"] = str(model_device(model)), dtype_name(model_dtype(model))
        except Exception as err:
            self.status.value = f"<span style='color:#d62728'>live run failed: {html.escape(repr(err))}</span>"
            raise
        finally:
            self.live_button.disabled = False
        cell = grid.cell(s)
        point["grid_speedup"] = cell["speedup"]
        point["vs_grid"] = point["speedup"] / cell["speedup"] if cell.get("speedup") else float("nan")
        self.live[name].append(point)
        self.update()
        self.status.value = f"live ({point['seconds']:.1f} s): {html.escape(live_verdict(point, cell))}"
        self._status_for = (name, s)
        return point
