"""Notebook 04's glue: presets, the guiding answers written from the grid's numbers, and the Playground widget."""
from __future__ import annotations

import html
import math
import time
from dataclasses import replace
from typing import Callable

import numpy as np
import torch

from ..artifacts.models import load_model
from ..measure.grid import PlaygroundGrid, Setting, measure_live
from ..viz.playground import PANELS, axis_ranges, figure_title, fmt, panel_xy, playground_figure
from ..viz.widgets import as_widget, update_widget

__all__ = ["presets", "presets_frame", "guiding_answers", "Playground"]


def presets(grid: PlaygroundGrid) -> dict[str, Setting]:
    """Named settings: too timid / the paper's / too aggressive (paper's policy at the lowest, ≈ 50 %
    and highest skip ratio of the grid) and the best cell found."""
    paper = grid.nearest()
    return {
        "too timid": replace(paper, ratio=grid.ratios[0]),
        "paper's setting": paper,
        "too aggressive": replace(paper, ratio=grid.ratios[-1]),
        "best found": grid.best()[0],
    }


def presets_frame(grid: PlaygroundGrid):
    """The named presets side by side: setting, acceptance, tokens per step, speedup and its analytic limit."""
    import pandas as pd

    rows = []
    for name, s in presets(grid).items():
        cell = grid.cell(s)
        rows.append({"preset": name, "skip ratio": s.ratio, "policy": s.policy, "threshold": s.threshold,
                     "max draft": s.max_draft, "α": cell["acceptance_rate"], "tokens/step": cell["tokens_per_step"],
                     "speedup": cell["speedup"], "analytic limit": cell["analytic_speedup"]})
    return pd.DataFrame(rows).set_index("preset")


def _trend(first: float, last: float, what: str, tol: float = 0.02) -> str:
    if any(v is None or math.isnan(v) for v in (first, last)):
        return f"{what} is not measured at both ends"
    if abs(last - first) <= tol * max(1.0, abs(first)):
        return f"{what} stays at about {first:.2f}"
    return f"{what} {'falls' if last < first else 'rises'} from {first:.2f} to {last:.2f}"


def _direction(first: float, last: float, tol: float = 0.02) -> int:
    """-1 falling, +1 rising, 0 flat (or unknown)."""
    if any(v is None or math.isnan(v) for v in (first, last)) or abs(last - first) <= tol * max(1.0, abs(first)):
        return 0
    return 1 if last > first else -1


def guiding_answers(grid: PlaygroundGrid, other: PlaygroundGrid | None = None,
                    setting: Setting | None = None) -> list[dict]:
    """The guiding questions, where to look in the plots, and the answer in this grid's numbers.

    Every clause is chosen by the data (a peak inside the range or at an edge, curves rising,
    falling or flat), so the text stays true whatever a regenerated grid shows.
    """
    s = setting or grid.nearest()
    sp, acc, c = grid.vs_ratio("speedup", s), grid.vs_ratio("acceptance_rate", s), grid.vs_ratio("c", s)
    ratios = np.array(grid.ratios)
    i = int(np.nanargmax(sp))
    interior = 0 < i < len(ratios) - 1
    where = ("inside the range" if interior else
             "at the lowest skip ratio of the grid" if i == 0 else "at the highest skip ratio of the grid")
    c_dir, a_dir = _direction(c[0], c[-1]), _direction(acc[0], acc[-1])
    c_why = {-1: "skipped blocks are not computed",
             0: "a forward pass of this model is mostly fixed overhead, so skipping blocks saves little",
             1: "skipping saved no measurable time here"}[c_dir]
    a_why = {-1: "the draft drifts further from the full model", 0: "the draft stays close to the full model",
             1: "the searched sets at higher ratios happen to agree better"}[a_dir]
    a1 = (f"With the {s.policy} policy, threshold {s.threshold:g} and max draft {s.max_draft}, the speedup peaks at "
          f"skip ratio {ratios[i]:.3f} ({fmt(sp[i])}×, {where}). Going right, "
          f"{_trend(c[0], c[-1], 'the draft cost c')} "
          f"({c_why}) and {_trend(acc[0], acc[-1], 'the acceptance α')} ({a_why}).")
    if interior:
        gain = "the cheaper drafts" if c_dir < 0 else "what skipping saves"
        a1 += (f" Past {ratios[i]:.3f}, the tokens lost to rejected drafts outweigh {gain}, and the speedup drops to "
               f"{fmt(sp[-1])}× at {ratios[-1]:.3f}.")
    elif i == len(ratios) - 1:
        a1 += " Within the grid's range, the cheaper drafts still pay for the lost acceptance, so there is no fall yet."
    else:
        a1 += " Every extra skipped block costs more acceptance than it saves in draft cost, so there is no rise."
    limit = grid.vs_ratio("analytic_speedup", s)
    if not np.all(np.isnan(limit)):
        ia = int(np.nanargmax(limit))
        a1 += (" The dashed analytic limit, built from the same α and c, peaks at the same skip ratio." if ia == i
               else f" The dashed analytic limit, built from the same α and c, peaks at {ratios[ia]:.3f}.")

    th = np.array(grid.thresholds)
    acc_t, tps_t, d_t, sp_t = (grid.vs_threshold(m, s) for m in
                               ("acceptance_rate", "tokens_per_step", "drafted_per_step", "speedup"))
    j = int(np.nanargmax(sp_t))
    acc_dir, d_dir, tps_dir = (_direction(v[0], v[-1]) for v in (acc_t, d_t, tps_t))
    a2 = (f"At skip ratio {s.ratio:.3f}, raising the threshold from {th[0]:g} to {th[-1]:g}: "
          f"{_trend(acc_t[0], acc_t[-1], 'α')}")
    a2 += (", because the draft stops before the tokens it is unsure of. " if acc_dir > 0 else ". ")
    a2 += f"{_trend(d_t[0], d_t[-1], 'The number of drafted tokens per step')}"
    a2 += f" and {_trend(tps_t[0], tps_t[-1], 'the number of tokens per step')}"
    a2 += (", so each verify pass buys fewer tokens. " if tps_dir < 0 else ". ")
    a2 += f"The speedup is highest at threshold {th[j]:g} ({fmt(sp_t[j])}×)"
    top_acc = np.nanmax(acc_t)
    if not math.isnan(acc_t[j]) and acc_t[j] >= top_acc - 0.01:
        a2 += ", which here is also where α is highest."
    else:
        a2 += (f", not where α is highest ({fmt(top_acc)} at threshold {th[int(np.nanargmax(acc_t))]:g}; "
               f"{fmt(acc_t[j])} at {th[j]:g}).")
    out = [
        {"question": "At what skip ratio does speedup peak, and why does it fall after?",
         "look_at": "top row: speedup vs skip ratio, beside α and the draft cost ratio c", "answer": a1},
        {"question": "Why does a higher threshold raise acceptance but not always speed?",
         "look_at": "bottom row: α, tokens and drafted tokens per step, and speedup vs threshold", "answer": a2},
    ]
    if other is not None:
        so = other.nearest(threshold=s.threshold, max_draft=s.max_draft, policy=s.policy)
        sp_o, acc_o = other.vs_ratio("speedup", so), other.vs_ratio("acceptance_rate", so)
        io = int(np.nanargmax(sp_o))
        a3 = (f"For {other.name!r} on the same slice, α is {fmt(acc_o[0])} at skip ratio {other.ratios[0]:.3f} "
              f"(vs {fmt(acc[0])} for {grid.name!r}) and {fmt(acc_o[-1])} at {other.ratios[-1]:.3f}. Its best "
              f"speedup is {fmt(sp_o[io])}× at {other.ratios[io]:.3f}, against {fmt(sp[i])}× for {grid.name!r}. ")
        if acc_o[0] < acc[0] - 0.05:
            a3 += ("It was trained only as a full model, so removing even a few blocks changes its predictions: "
                   if other.name == "plain" else "")
            a3 += ("its α" if other.name == "plain" else "Its α") + " is lower from the first skipped blocks on. "
        shape = (f"its speedup rises to a peak at {other.ratios[io]:.3f} and falls again"
                 if 0 < io < len(other.ratios) - 1 else "its speedup only moves one way across the grid's skip ratios")
        if sp_o[io] <= 1.0:
            a3 += (f"On this slice {shape}, and it stays below 1: no skip ratio makes its drafts pay for themselves, "
                   f"so there is no hump above plain decoding.")
        elif 0 < io < len(other.ratios) - 1:
            a3 += (f"This grid does show a hump for it too: {shape}. Compare the heights: the acceptance a model keeps "
                   "at moderate skip ratios sets how high its peak can go.")
        else:
            a3 += f"On this slice {shape}, so there is no rise and fall inside the range."
        out.append({"question": f"Why is there no hump for the {other.name!r} model?",
                    "look_at": "the model toggle, or the side-by-side figure: α and speedup vs skip ratio",
                    "answer": a3})
    return out


def _load_for_live(name: str):
    return load_model(name)


class Playground:
    """Sliders over a precomputed grid; ``widget`` is the thing to display, ``update()`` refreshes.

    ``grids``: one :class:`PlaygroundGrid` or a dict name → grid (the model toggle's options).
    ``loader(name) -> (model, tokenizer)`` is used by "run live" (default :func:`labkit.load_model`;
    the grid's ``model`` field is the name passed).
    """

    def __init__(self, grids, *, model: str | None = None, loader: Callable | None = None,
                 live_prompts: int = 2, live_tokens: int = 48):
        import ipywidgets as widgets

        if isinstance(grids, PlaygroundGrid):
            grids = {grids.name: grids}
        if not grids:
            raise ValueError("Playground needs at least one grid")
        self.grids: dict[str, PlaygroundGrid] = dict(grids)
        self.loader = loader or _load_for_live
        self.live_prompts, self.live_tokens = live_prompts, live_tokens
        self.live: dict[str, list[dict]] = {name: [] for name in self.grids}
        self._loaded: dict[str, tuple] = {}
        self._hold = 0
        name = model if model is not None else next(iter(self.grids))
        if name not in self.grids:
            raise KeyError(f"no grid for model {name!r} (have: {', '.join(self.grids)})")
        grid = self.grids[name]
        start = grid.nearest()

        self.model_toggle = widgets.ToggleButtons(options=list(self.grids), value=name, description="model")
        self.ratio_slider = widgets.SelectionSlider(options=self._ratio_options(grid), value=start.ratio,
                                                    description="skip ratio", continuous_update=True,
                                                    layout=widgets.Layout(width="420px"))
        self.threshold_slider = widgets.SelectionSlider(options=self._threshold_options(grid), value=start.threshold,
                                                        description="threshold", continuous_update=True,
                                                        layout=widgets.Layout(width="420px"))
        self.max_draft_slider = widgets.SelectionSlider(options=[(str(k), k) for k in grid.max_drafts],
                                                        value=start.max_draft, description="max draft",
                                                        continuous_update=True, layout=widgets.Layout(width="300px"))
        self.policy_toggle = widgets.ToggleButtons(options=grid.policies, value=start.policy, description="policy")
        self.preset_buttons = {}
        for preset in presets(grid):
            button = widgets.Button(description=preset, layout=widgets.Layout(width="auto"))
            button.on_click(lambda _, p=preset: self.apply_preset(p))
            self.preset_buttons[preset] = button
        self.live_button = widgets.Button(description="run live", icon="play", button_style="warning",
                                          tooltip="re-measure the current setting on this machine "
                                                  f"({live_prompts} prompts × {live_tokens} tokens)")
        self.live_button.on_click(lambda _: self.run_live())
        self.readout = widgets.HTML()
        self.status = widgets.HTML()
        self.figure = as_widget(playground_figure(grid, start, self.live[name]))
        for control in (self.ratio_slider, self.threshold_slider, self.max_draft_slider, self.policy_toggle):
            control.observe(lambda _: self._changed(), names="value")
        self.model_toggle.observe(lambda _: self._model_changed(), names="value")
        self.widget = widgets.VBox([
            widgets.HBox([self.model_toggle, self.policy_toggle]),
            widgets.HBox([self.ratio_slider, self.threshold_slider, self.max_draft_slider]),
            widgets.HBox([widgets.HTML("<b>presets:</b>&nbsp;"), *self.preset_buttons.values(),
                          widgets.HTML("&nbsp;&nbsp;"), self.live_button]),
            self.readout, self.figure, self.status])
        self.update()

    # -- state ------------------------------------------------------------------------------
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
        return Setting(self.ratio_slider.value, self.threshold_slider.value, self.max_draft_slider.value,
                       self.policy_toggle.value)

    def set(self, setting: Setting) -> None:
        """Move every slider to ``setting`` (snapped to the grid), refreshing once."""
        s = self.grid.nearest(setting.ratio, setting.threshold, setting.max_draft, setting.policy)
        self._hold += 1
        try:
            self.ratio_slider.value, self.threshold_slider.value = s.ratio, s.threshold
            self.max_draft_slider.value, self.policy_toggle.value = s.max_draft, s.policy
        finally:
            self._hold -= 1
        self.update()

    def apply_preset(self, name: str) -> Setting:
        table = presets(self.grid)
        if name not in table:
            raise KeyError(f"unknown preset {name!r} (have: {', '.join(table)})")
        self.set(table[name])
        self.status.value = f"preset <b>{html.escape(name)}</b>: {html.escape(self.setting.describe())}"
        return self.setting

    def _changed(self) -> None:
        if not self._hold:
            self.update()

    def _model_changed(self) -> None:
        """Swap the grid: slider options of the new model, the nearest setting, axis ranges."""
        old = self.setting
        grid = self.grid
        s = grid.nearest(old.ratio, old.threshold, old.max_draft, old.policy)
        self._hold += 1
        try:
            self.ratio_slider.options = self._ratio_options(grid)
            self.threshold_slider.options = self._threshold_options(grid)
            self.max_draft_slider.options = [(str(k), k) for k in grid.max_drafts]
            self.policy_toggle.options = grid.policies
            self.ratio_slider.value, self.threshold_slider.value = s.ratio, s.threshold
            self.max_draft_slider.value, self.policy_toggle.value = s.max_draft, s.policy
        finally:
            self._hold -= 1
        ranges = axis_ranges(grid)
        with self.figure.batch_update():
            for row in range(2):
                for col, (metric, *_) in enumerate(PANELS):
                    axis = row * 3 + col + 1
                    getattr(self.figure.layout, f"yaxis{'' if axis == 1 else axis}").range = ranges[metric]
                    getattr(self.figure.layout, f"xaxis{'' if axis == 1 else axis}").range = (
                        [min(grid.ratios) - 0.04, max(grid.ratios) + 0.04] if row == 0 else
                        [min(grid.thresholds) - 0.05, max(grid.thresholds) + 0.05])
        self.update()

    # -- refresh ----------------------------------------------------------------------------
    def update(self) -> None:
        """Copy the current slice of the grid (and matching live points) into the FigureWidget."""
        grid, s = self.grid, self.setting
        xy = panel_xy(grid, s, self.live[self.model_name])
        update_widget(self.figure, {index: {"x": x, "y": y} for index, (x, y) in xy.items()},
                      layout={"title.text": figure_title(grid, s)})
        self.readout.value = self._readout_html(grid, s)

    def _readout_html(self, grid: PlaygroundGrid, s: Setting) -> str:
        cell = grid.cell(s)
        skip = grid.skip_set(s.ratio)
        entry = grid.ratio_entry(s.ratio)
        moved = ""
        if s.policy == "adaptive" and cell.get("final_threshold") is not None:
            moved = f"; the adaptive threshold moved {s.threshold:g} → {fmt(cell['final_threshold'])}"
        same = {True: "yes", False: "NO", None: "n/a"}[cell.get("identical_to_plain")]
        live = [p for p in self.live[self.model_name] if all(p[k] == getattr(s, k) for k in
                                                             ("ratio", "threshold", "max_draft", "policy"))]
        live_txt = ""
        if live:
            p = live[-1]
            live_txt = (f"<br><b>live run</b> ({p['n_prompts']} prompts × {p['max_new_tokens']} tokens, "
                        f"{p['measured_at']}): speedup {fmt(p['speedup'])}× = {fmt(p['vs_grid'])} × the grid's, "
                        f"α {fmt(p['acceptance_rate'])}, {fmt(p['tokens_per_step'])} tokens/step")
        return (f"<b>{html.escape(grid.name)}</b>, {html.escape(s.describe())}<br>"
                f"skip set ({entry['n_skipped']} of {2 * grid.data['n_layers']} blocks, bucket "
                f"[{entry['bucket'][0]:g}, {entry['bucket'][1]:g})): {html.escape(str(skip))}<br>"
                f"α = <b>{fmt(cell['acceptance_rate'])}</b>, <b>{fmt(cell['tokens_per_step'])}</b> tokens per step "
                f"({fmt(cell['drafted_per_step'])} drafted), <b>{fmt(cell['ms_per_token'])}</b> ms/token vs "
                f"{fmt(cell['plain_ms_per_token'])} for the plain loop → speedup <b>{fmt(cell['speedup'])}×</b> "
                f"(analytic limit {fmt(cell.get('analytic_speedup'))}× with c = {fmt(cell.get('c'), '.3f')}, "
                f"c_v = {fmt(cell.get('c_v'), '.2f')}; forward passes only: "
                f"{fmt(cell.get('analytic_speedup_forward'))}×){moved}; output identical to plain decoding: {same}"
                f"{live_txt}")

    def measure_update_ms(self) -> float:
        """Median ms of a slider move (observer + refresh) over every option of every slider."""
        times, start = [], self.setting
        for slider in (self.ratio_slider, self.threshold_slider, self.max_draft_slider, self.policy_toggle):
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
                point = measure_live(model, tokenizer, grid.skip_set(s.ratio), s,
                                     grid.prompt_texts[: self.live_prompts], max_new_tokens=self.live_tokens,
                                     cost_model=grid.cost_model)
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
        self.status.value = (f"live: speedup {fmt(point['speedup'])}× on this machine vs {fmt(cell['speedup'])}× "
                             f"in the grid ({fmt(point['vs_grid'])}×) in {point['seconds']:.1f} s")
        return point
