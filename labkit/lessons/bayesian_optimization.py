"""Notebook 01's glue: the BO stepper (◀ ▶ and a slider over the steps of a 1-D run, EI / LCB, ξ and κ)."""
from __future__ import annotations

import time

import numpy as np

from ..search.toy import ACQUISITIONS, run_bo_1d
from ..viz.bo import ACQUISITION_LABELS, acquisition_axis_title, bo_step_figure, step_title, step_trace_xy
from ..viz.style import PALETTE
from ..viz.widgets import as_widget, update_widget

__all__ = ["BOStepper"]


class BOStepper:
    """Step through a 1-D BO run: ◀ ▶ buttons and a slider over steps, a dropdown EI / LCB and
    sliders for xi and kappa. A step change only copies precomputed arrays into the
    FigureWidget; an acquisition or xi/kappa change re-runs the (cheap) BO, then refreshes.

    ``stepper.widget`` is the thing to display; ``update()`` refreshes the figure in place.
    """

    def __init__(self, n_iter: int = 15, n_init: int = 3, seed: int = 0, acquisition: str = "EI",
                 xi: float = 0.01, kappa: float = 2.0):
        import ipywidgets as widgets

        self.n_iter, self.n_init, self.seed = n_iter, n_init, seed
        self.history = run_bo_1d(acquisition, n_iter, xi, kappa, seed, n_init)
        self.figure = as_widget(bo_step_figure(self.history, 0))
        self.last_update_ms = float("nan")
        self.prev_button = widgets.Button(description="◀", tooltip="previous step", layout=widgets.Layout(width="48px"))
        self.next_button = widgets.Button(description="▶", tooltip="next step", layout=widgets.Layout(width="48px"))
        self.step_slider = widgets.IntSlider(value=0, min=0, max=n_iter - 1, description="step",
                                             continuous_update=True, layout=widgets.Layout(width="420px"))
        self.acquisition_dropdown = widgets.Dropdown(
            options=[(ACQUISITION_LABELS[a], a) for a in ACQUISITIONS], value=acquisition, description="acquisition")
        self.xi_slider = widgets.FloatSlider(value=xi, min=0.0, max=3.0, step=0.01, description="ξ (EI)",
                                             continuous_update=False, readout_format=".2f")
        self.kappa_slider = widgets.FloatSlider(value=kappa, min=0.0, max=6.0, step=0.1, description="κ (LCB)",
                                                continuous_update=False, readout_format=".1f")
        self.status = widgets.HTML()
        self.prev_button.on_click(lambda _: self.step(-1))
        self.next_button.on_click(lambda _: self.step(+1))
        self.step_slider.observe(lambda _: self.update(), names="value")
        for control in (self.acquisition_dropdown, self.xi_slider, self.kappa_slider):
            control.observe(lambda _: self.rerun(), names="value")
        self._sync_enabled()
        self.widget = widgets.VBox([
            widgets.HBox([self.prev_button, self.step_slider, self.next_button]),
            widgets.HBox([self.acquisition_dropdown, self.xi_slider, self.kappa_slider]),
            self.figure, self.status])
        self._set_status()

    def step(self, delta: int) -> None:
        """Move the step slider by ``delta`` (clamped); its observer refreshes the figure."""
        self.step_slider.value = int(np.clip(self.step_slider.value + delta, 0, self.n_iter - 1))

    def rerun(self) -> None:
        """Re-run BO with the current acquisition, xi and kappa, then refresh the figure."""
        self._sync_enabled()
        self.history = run_bo_1d(self.acquisition_dropdown.value, self.n_iter, self.xi_slider.value,
                                 self.kappa_slider.value, self.seed, self.n_init)
        self.update()

    def update(self) -> None:
        """Copy step ``step_slider.value`` of the current history into the FigureWidget."""
        t0 = time.perf_counter()
        i = self.step_slider.value
        h = self.history
        traces = {index: {"x": x, "y": y} for index, (x, y) in step_trace_xy(h, i).items()}
        traces[6].update({"name": f"acquisition: {h.acquisition}", "line.color": PALETTE[h.acquisition]})
        update_widget(self.figure, traces, layout={"yaxis2.title.text": acquisition_axis_title(h.acquisition),
                                                  "title.text": step_title(h, i)})
        self.last_update_ms = (time.perf_counter() - t0) * 1000
        self._set_status()

    def measure_update_ms(self) -> float:
        """Median ms of a slider move (observer + in-place refresh) over every step."""
        start, times = self.step_slider.value, []
        for i in [*range(self.n_iter), start]:
            t0 = time.perf_counter()
            if self.step_slider.value == i:
                self.update()
            else:
                self.step_slider.value = i
            times.append((time.perf_counter() - t0) * 1000)
        return float(np.median(times))

    def _sync_enabled(self) -> None:
        is_ei = self.acquisition_dropdown.value == "EI"
        self.xi_slider.disabled, self.kappa_slider.disabled = not is_ei, is_ei

    def _set_status(self) -> None:
        h = self.history
        self.status.value = (f"run: {h.n_iter} steps in {h.seconds * 1000:.0f} ms; best f = {h.best_y:.4f} "
                             f"at x = {h.best_x:.4f} (gap {h.gap:.4f}); last refresh "
                             f"{self.last_update_ms:.1f} ms")
