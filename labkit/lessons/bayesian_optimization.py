"""Notebook 01's glue: the BO stepper (◀ ▶ and a slider over the steps of a 1-D run, EI / LCB, ξ and κ), and the
sentences that describe its results, written from the numbers (see :mod:`labkit.lessons.claims`)."""
from __future__ import annotations

import time

import numpy as np
import optuna

from ..search.toy.forrester_bo import ACQUISITIONS, FORRESTER_X_MIN, run_bo_1d
from ..viz.bo import ACQUISITION_LABELS, acquisition_axis_title, bo_step_figure, step_title, step_trace_xy
from ..viz.search import SAMPLER_LABELS
from ..viz.style import PALETTE
from ..viz.widgets import as_widget, update_widget
from .claims import is_missing, join, ranking, who_wins
from .stepper import SliderLook, step_controls

__all__ = ["BOStepper", "first_step_sentence", "last_step_sentence", "exploration_sentences", "exploration_view",
           "per_trial_line", "acquisition_sentence", "sampler_sentence", "toy_ends_sentence", "ard_sentence",
           "sampler_declaration_note"]


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
        # the slider shows the step number the title says (1..n_iter); the history is indexed from 0
        self.controls = step_controls("step", self.update, (1, 1, n_iter),
                                      look=SliderLook("420px", "48px", continuous_update=True))
        self.step_slider, self.prev_button, self.next_button = (self.controls.slider, self.controls.prev_button,
                                                                self.controls.next_button)
        self.acquisition_dropdown = widgets.Dropdown(
            options=[(ACQUISITION_LABELS[a], a) for a in ACQUISITIONS], value=acquisition, description="acquisition")
        self.xi_slider = widgets.FloatSlider(value=xi, min=0.0, max=3.0, step=0.01, description="ξ (EI)",
                                             continuous_update=False, readout_format=".2f")
        self.kappa_slider = widgets.FloatSlider(value=kappa, min=0.0, max=6.0, step=0.1, description="κ (LCB)",
                                                continuous_update=False, readout_format=".1f")
        self.status = widgets.HTML()
        for control in (self.acquisition_dropdown, self.xi_slider, self.kappa_slider):
            control.observe(lambda _: self.rerun(), names="value")
        self._sync_enabled()
        self.widget = widgets.VBox([
            self.controls.row,
            widgets.HBox([self.acquisition_dropdown, self.xi_slider, self.kappa_slider]),
            self.figure, self.status])
        self._set_status()

    def step(self, delta: int) -> None:
        """Move the step slider by ``delta`` (clamped); its observer refreshes the figure."""
        self.controls.step_by(delta)

    def rerun(self) -> None:
        """Re-run BO with the current acquisition, xi and kappa, then refresh the figure."""
        self._sync_enabled()
        self.history = run_bo_1d(self.acquisition_dropdown.value, self.n_iter, self.xi_slider.value,
                                 self.kappa_slider.value, self.seed, self.n_init)
        self.update()

    def update(self) -> None:
        """Copy step ``step_slider.value`` (1-based, as the title says) of the current history into the figure."""
        t0 = time.perf_counter()
        i = self.step_slider.value - 1
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
        for i in [*range(1, self.n_iter + 1), start]:
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


# -- sentences written from the numbers (see labkit.lessons.claims) -----------------------------------------
def first_step_sentence(history) -> str:
    """Where the first acquisition points, and whether that is where the GP is least sure."""
    x_next, widest = float(history.next_x[0]), float(history.grid[int(np.argmax(history.std[0]))])
    text = (f"The first step: {history.n_init} points, a GP that knows little, and "
            f"{history.acquisition} pointing at x = {x_next:.2f}")
    if abs(x_next - widest) <= 0.05:
        return text + ", where the band is widest: low values are most plausible where the GP knows least."
    return text + (f"; the band is widest at x = {widest:.2f}, but {history.acquisition} also weighs how low the "
                   f"mean is, and the mean is lower at {x_next:.2f}.")


def last_step_sentence(history) -> str:
    """Whether the last steps cluster in the global basin and the acquisition has collapsed."""
    last = history.next_x[-min(5, history.n_iter):]
    in_basin = int(np.sum(np.abs(last - FORRESTER_X_MIN) < 0.05))
    spread = float(last.max() - last.min())
    top = float(np.max(history.acquisition_values[-1]))
    text = (f"The last step: {in_basin} of the last {len(last)} points lie in the global basin (within 0.05 of "
            f"x = {FORRESTER_X_MIN:.4f}) and they span {spread:.3f}; the largest {history.acquisition} left is "
            f"{top:.2g}")
    if history.acquisition == "EI" and in_basin == len(last) and spread < 0.05:
        return text + ": the band has collapsed around the best point and the search has converged."
    if in_basin == 0:
        return text + ": the search has not found the global basin yet."
    return text + ": the search is still moving."


def exploration_sentences(table) -> str:
    """Which settings of the exploration table found the global basin, and when."""
    found = table[table["found the global basin"]]
    trapped = table[~table["found the global basin"]]
    names = lambda rows: join([f"{a} {s}" for a, s in zip(rows["acquisition"], rows["setting"])])   # noqa: E731
    text = ""
    if len(trapped):
        text += (f"Trapped in the local basin near 0.14: {names(trapped)}; the GP is confident, wrongly, that the "
                 f"unexplored half is high, and these settings keep refining what they already know. ")
    if len(found):
        steps = join([f"{a} {s} at step {int(k)}" for a, s, k in
                      zip(found["acquisition"], found["setting"], found["first BO step in the global basin"])])
        text += f"Found the global basin: {steps}. "
    slow = found.sort_values("gap to minimum").iloc[-1] if len(found) else None
    if slow is not None and slow["gap to minimum"] > 10 * found["gap to minimum"].min():
        text += (f"Of those, {slow['acquisition']} {slow['setting']} ends least precise (gap "
                 f"{slow['gap to minimum']:.4f}): exploring far away costs evaluations near the optimum.")
    return text.strip()


def exploration_view(table):
    """The exploration table for reading: the first BO step in the global basin as a whole number, or 'never'
    (the table itself keeps None / NaN for the sentences and metrics)."""
    column = "first BO step in the global basin"
    return table.assign(**{column: ["never" if is_missing(k) else str(int(k)) for k in table[column]]})


def acquisition_sentence(curves: dict, f_min: float, grid_floor: float) -> str:
    """Median final gap per acquisition over seeds, against random search; seeds left in the local basin."""
    finals = {k: float(np.median(v[:, -1] - f_min)) for k, v in curves.items()}
    spreads = {k: (float(np.min(v[:, -1] - f_min)), float(np.max(v[:, -1] - f_min))) for k, v in curves.items()}
    text = _tie_sentence(finals, grid_floor) or who_wins(finals, lower_is_better=True, what="median final gap",
                                                         spec=".2g", spreads=spreads, noise="the spread over seeds")
    trapped = {k: int(np.sum(v[:, -1] - f_min > 1.0)) for k, v in curves.items()}
    stuck = [f"{k} on {n} of {len(curves[k])} seeds" for k, n in trapped.items() if n]
    text += (f" Ended outside the global basin (a gap above 1): {join(stuck)}." if stuck else
             " Every seed ends in the global basin (a gap below 1).")
    return text + (f" The floor at about {grid_floor:.1g} is the candidate grid's (step 0.002): its best point is "
                   f"that far above the true minimum.")


def _tie_sentence(finals: dict, grid_floor: float) -> str:
    """'A (g) and B (g) tie for the lowest median final gap …' when the best medians differ by no more than the
    grid's floor (the grid cannot resolve a smaller difference); '' when one is lowest alone."""
    order = ranking(finals, lower_is_better=True)
    tied = [k for k in order if finals[k] - finals[order[0]] <= max(grid_floor, 1e-12)]
    if len(tied) < 2:
        return ""
    rest = [f"{k} ({finals[k]:.2g})" for k in order if k not in tied]
    return (f"{join([f'{k} ({finals[k]:.2g})' for k in tied])} tie for the lowest median final gap: they differ "
            f"by no more than the grid's floor" + (f"; then {join(rest)}." if rest else "."))


def sampler_sentence(curves: dict, n_trials: int, n_random: int = 10) -> str:
    """Who reaches the lowest Branin value (median over seeds, min-max as the noise), and at what cost; ``curves`` as
    :func:`labkit.search.toy.branin_samplers.sampler_comparison` returns them (keyed 'gp', 'tpe', 'random')."""
    names = [k for k in curves if not k.endswith("s/trial")]
    label = {k: SAMPLER_LABELS.get(k, k) for k in names}
    finals = {label[k]: float(np.median(curves[k][:, -1])) for k in names}
    spreads = {label[k]: (float(np.min(curves[k][:, -1])), float(np.max(curves[k][:, -1]))) for k in names}
    text = who_wins(finals, lower_is_better=True, what=f"median best after {n_trials} trials", spec=".3f",
                    spreads=spreads, noise="the spread over seeds")
    proposals = max(0, n_trials - n_random)
    return text + (f" Each model-based sampler had {proposals} proposals after its {n_random} random trials"
                   + (": few enough that the curves may not have separated." if proposals < 20 else "."))


def per_trial_line(curves: dict) -> str:
    """What one trial of each sampler cost on this machine (a live timing: the line says so; the ranking above
    it does not depend on it)."""
    names = [k for k in curves if not k.endswith("s/trial")]
    cost = join([f"{SAMPLER_LABELS.get(k, k)} {1000 * curves[k + ' s/trial']:.1f} ms" for k in names])
    return f"On this machine one trial cost: {cost}."


def toy_ends_sentence(toy) -> str:
    """Both ends of the toy's skip ratio against plain decoding, and the best mask."""
    n = 2 * toy.n_layers
    ends = {"skipping nothing": float(toy.ms_per_token(np.zeros(n))),
            "skipping everything": float(toy.ms_per_token(np.ones(n)))}
    best, _ = toy.brute_force_minimum()
    parts = []
    for name, ms in ends.items():
        side = ("slower than" if ms > toy.full_ms * 1.001 else "faster than" if ms < toy.full_ms * 0.999
                else "as fast as")
        parts.append(f"{name} costs {ms:.2f} ms/token, {side} plain decoding ({toy.full_ms:.2f})")
    why = (" Every draft still pays the fixed part of a forward, and the verify pass still runs." if
           all(ms > toy.full_ms * 1.001 for ms in ends.values()) else "")
    return (f"In the toy, {parts[0]}; {parts[1]}.{why} The best mask ({best:.2f} ms/token, "
            f"{toy.full_ms / best:.2f}x) lies in between.")


def ard_sentence(relevance: dict, hit_rate: float, upper_bound: float = 1e3) -> str:
    """How well the ARD length-scales single out the blocks that matter."""
    important = relevance["damage"] >= 0.5
    pinned = int(np.sum(relevance["length_scale"] >= 0.99 * upper_bound))
    text = (f"{hit_rate:.0%} of the {int(important.sum())} blocks that matter (red) are among the "
            f"{int(important.sum())} shortest length-scales")
    text += ("; " if hit_rate >= 0.75 else ", so the fit only partly separates them; ")
    return text + (f"{pinned} of the {len(important)} length-scales sit at the upper bound ({upper_bound:g}: "
                   f"'irrelevant'). A single shared length-scale could not express this.")


def sampler_declaration_note() -> str:
    """What the installed Optuna's GPSampler does with categorical vs integer parameters (a version note)."""
    return (f"In the installed Optuna ({optuna.__version__}) `GPSampler` gives *every* parameter its own "
            f"length-scale, categoricals included (a 0/1 distance: equal or not), so for a {{0, 1}} variable both "
            f"declarations give the same kernel up to a rescaled length-scale, and the acquisition optimiser "
            f"enumerates both values either way. The lab uses `suggest_int(name, 0, 1)` because the value *is* a "
            f"number (the skip mask) and every sampler (TPE, random, the stored trials) reads it alike. "
            f"docs/decisions.md compares the two declarations on the toy.")
