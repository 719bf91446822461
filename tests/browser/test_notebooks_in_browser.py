"""Every notebook in a real Chromium, as a student runs it: JupyterLab, Run All, then look at what is drawn.

Per notebook (FAST mode, one kernel each, shut down after):

- no error output, no uncaught JavaScript error or console error on the page;
- every plotly figure draws what Python gave it: static figures, the x and y in the cell's output (equal, non-zero
  lengths where both are given, values within 1e-6); FigureWidgets, the x and y, title, x range and shapes the
  kernel holds, within 1e-6, and every HTML widget beside them shows the kernel's text;
- every control of the lab's widgets (one plan per interactive widget in :data:`PLANS`) is moved once through the page
  (click, option, arrow key), and after each move the figure data and the readout text change to what Python
  computed;
- every figure fits its output column at 1280 and 1920 px wide windows;
- screenshots of every figure and widget go to build/browser/.

Each clean Run All is also recorded for the papermill layer (the ``shared_runs`` fixture, tests/conftest.py): its
checks that use the same parameters read this run instead of executing the notebook again. Under xdist each
notebook's tests here and there are in one group, ``notebook-<stem>`` (one worker; tests/conftest.py).
"""
from __future__ import annotations

import ast
import json
import time
from dataclasses import dataclass

import papermill as pm
import pytest

from labkit.lessons.notebook import notebook_paths

from notebook_page import NotebookPage, WidgetDriver
from pages import PLOTLY_MIME, WIDGET_MIME, close, decode, wait_until

pytestmark = pytest.mark.browser
NOTEBOOKS = [p.name for p in notebook_paths()]
WIDTHS = (1280, 1920)


@dataclass
class Ran:
    name: str
    nb: NotebookPage
    outputs: list[dict]
    seconds: float

    @property
    def stem(self) -> str:
        return self.name.removesuffix(".ipynb")

    def of(self, mime: str) -> list[dict]:
        return [o for o in self.outputs if mime in o["output"].get("data", {})]

    def assert_no_page_errors(self) -> None:
        assert not self.nb.errors, "JavaScript errors on the page:\n" + "\n".join(self.nb.errors[:10])


def share(name: str, nb: NotebookPage, outputs: list[dict], lab, shared_runs: dict) -> None:
    """Record a clean Run All for the papermill layer: the notebook with its outputs, and the metrics record it wrote
    to its OUTPUT_DIR as committed (relative to the kernel's folder, the lab root's notebooks/)."""
    if any(o["output"]["output_type"] == "error" for o in outputs):
        return                                     # the papermill checks execute it themselves (a papermill traceback)
    source = next(p for p in notebook_paths() if p.name == name)
    output_dir = ast.literal_eval(pm.inspect_notebook(str(source))["OUTPUT_DIR"]["default"])
    metrics = (lab.root / "notebooks" / output_dir).resolve() / f"{source.stem}.json"
    shared_runs[source.stem] = {"where": "JupyterLab in Chromium, FAST, Run All", "notebook": nb.notebook_json(),
                                "metrics": json.loads(metrics.read_text()) if metrics.exists() else None}


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=lambda n: n.removesuffix(".ipynb"))
def ran(request, browser, lab, shared_runs):
    """The notebook opened in JupyterLab and run with Run All (its kernel is shut down afterwards)."""
    nb = NotebookPage(browser, lab.notebook_url(request.param))
    try:
        seconds = nb.run_all()
        outputs = nb.outputs()
        share(request.param, nb, outputs, lab, shared_runs)
        yield Ran(request.param, nb, outputs, seconds)
    finally:
        nb.close()


def test_notebook_runs_clean(ran):
    errors = [o["output"] for o in ran.outputs if o["output"]["output_type"] == "error"]
    assert not errors, f"{errors[0]['ename']}: {errors[0]['evalue']}"
    ran.assert_no_page_errors()
    print(f"{ran.name}: Run All took {ran.seconds:.1f} s in the browser")


def _static_mismatches(ran, out: dict) -> list[str]:
    """A static figure's drawn traces against the x/y in its cell output (what Python gave plotly)."""
    state = ran.nb.dom_state(out["id"])
    figures = state["figures"] if state else []
    if len(figures) != 1 or not figures[0]["ready"]:
        return [f"output {out['id']}: {len(figures)} plot(s) drawn for one figure"]
    given, drawn = out["output"]["data"][PLOTLY_MIME]["data"], figures[0]["traces"]
    if len(given) != len(drawn):
        return [f"output {out['id']}: {len(given)} traces given, {len(drawn)} drawn"]
    problems = []
    for i, (g, d) in enumerate(zip(given, drawn)):
        where = f"output {out['id']} ({figures[0]['title'][:60]!r}), trace {i} ({g.get('name') or g.get('type')})"
        x, y = decode(g.get("x")), decode(g.get("y"))
        if "z" not in g and x and y and not (len(d["x"] or []) == len(d["y"] or []) == len(x) > 0):
            problems.append(f"{where}: drawn x/y lengths {len(d['x'] or [])}/{len(d['y'] or [])}, given {len(x)}")
        for key, value in (("x", x), ("y", y)):
            if value is not None and not close(value, d[key]):
                problems.append(f"{where}: {key} drawn {str(d[key])[:80]}, given {str(value)[:80]}")
    return problems


def shoot(ran, paths: dict) -> None:
    """Screenshots of outputs (``{output id: png path}``), in a window tall enough to hold the tallest widget."""
    page = ran.nb.page
    page.set_viewport_size({"width": WIDTHS[0], "height": 2000})
    try:
        for output_id, path in paths.items():
            ran.nb.scope(output_id).screenshot(path=path)
    finally:
        page.set_viewport_size({"width": WIDTHS[0], "height": 900})


def test_figures_draw_what_python_gave(ran, shots):
    static, widgets = ran.of(PLOTLY_MIME), ran.of(WIDGET_MIME)

    def mismatches():
        return [p for out in static for p in _static_mismatches(ran, out)]
    wait_until(lambda: not mismatches(), 30)                  # the last outputs may still be drawing
    problems = mismatches()
    assert not problems, "\n".join(problems[:10])
    for out in widgets:
        model_id = out["output"]["data"][WIDGET_MIME]["model_id"]
        ran.nb.settle(model_id, out["id"], timeout_s=60)       # the page draws the kernel's x, y, title, shapes
    shoot(ran, {out["id"]: shots / f"{ran.stem}-{out['id']}.png" for out in static + widgets})
    ran.assert_no_page_errors()
    print(f"{ran.name}: {len(static)} static figure(s) and {len(widgets)} widget(s) draw what Python gave")


# -- controls ----------------------------------------------------------------------------------------------
def bo_stepper(d: WidgetDriver) -> None:
    """01: the stepper starts at step 0 with EI (xi = 0), so xi moves first, then EI -> LCB enables kappa."""
    d.button("▶")
    d.button("◀")
    d.slider("step")
    d.slider("ξ (EI)")
    d.dropdown("acquisition")
    d.slider("κ (LCB)")


def trace_replayer(d: WidgetDriver) -> None:
    """03: the replayer starts at step 0."""
    d.button("▶")
    d.button("◀")
    d.slider("step")


SAME_AS_PRESET = ("(lambda p: lab.grid.nearest(p.ratio, p.threshold, p.max_draft, p.policy, p.draft_weights) "
                  "== lab.setting)(lab.presets()[{name!r}])")


def draft_weights_toggle(d: WidgetDriver) -> None:
    """04: to the draft weights not selected (the playground opens on the grid's best cell, int8 or fp32), when the
    grid has both; a grid read from a format-2 file has fp32 cells only, so its toggle shows that one option and
    there is nothing to move (said in the log)."""
    options = d.nb.kernel_json("list(lab.weights_toggle.options)")
    if len(options) > 1:
        before = d.nb.kernel_json("lab.setting.draft_weights")
        d.toggle("draft weights")
        assert d.nb.kernel_json("lab.setting.draft_weights") == next(w for w in options if w != before)
        return
    assert options == ["fp32"], options
    d.moved["toggle"].add("draft weights")
    d.log.append("toggle 'draft weights': the grid has fp32 cells only (a format-2 file): one option, not moved")


def playground(d: WidgetDriver) -> None:
    """04: every slider, the policy toggle, the draft weights toggle, each preset (first moving away from it if it
    is the current setting), a live run (with the selected draft weights), and last the model toggle."""
    for label in ("skip ratio", "threshold", "max draft γ"):
        d.slider(label)
    d.toggle("policy")
    draft_weights_toggle(d)
    for name in d.nb.kernel_json("list(lab.preset_buttons)"):
        if d.nb.kernel_json(SAME_AS_PRESET.format(name=name)):
            d.slider("skip ratio")
        d.button(name)
    d.button("run live", timeout_s=180)
    d.toggle("model")


def sampling_explorer(d: WidgetDriver) -> None:
    """05: a real drafted position and the temperature p and q are re-warped at."""
    d.dropdown("position")
    d.slider("temperature")


def monte_carlo_panel(d: WidgetDriver) -> None:
    """05: which acceptance rule, how many draws, and new draws."""
    d.toggle("rule")
    d.dropdown("draws n")
    d.button("draw again")


def iteration_stepper(d: WidgetDriver) -> None:
    """06: the stepper starts at iteration 0 of the first run."""
    d.button("▶")
    d.button("◀")
    d.slider("iteration")
    d.dropdown("run")


def set_explorer(d: WidgetDriver) -> None:
    """07: which strategy, which prompt source, which prompt."""
    d.dropdown("strategy")
    d.dropdown("prompts")
    d.slider("prompt #")


def exit_layer_explorer(d: WidgetDriver) -> None:
    """08: the exit layer (a selection slider over the measured exits)."""
    d.slider("exit layer E")


def gate_explorer(d: WidgetDriver) -> None:
    """09: the gate threshold, then which ungated runs the histogram shows."""
    d.slider("gate")
    d.dropdown("runs")


def tree_stepper(d: WidgetDriver) -> None:
    """10: the stepper starts at stage 0 of the first step; a new step starts again from stage 0."""
    d.button("▶")
    d.button("◀")
    d.slider("stage")
    d.dropdown("tree step")


def limit_explorer(d: WidgetDriver) -> None:
    """11: which regime's measured costs, then α."""
    d.dropdown("regime")
    d.slider("α")


def kept_explorer(d: WidgetDriver) -> None:
    """12: the kept fraction of the MLP neurons (a selection slider over the measured fractions)."""
    d.slider("kept")


def gamma_explorer(d: WidgetDriver) -> None:
    """13: the draft length γ whose predicted S(B, γ) is drawn against batch size."""
    d.slider("γ")


#: One plan per interactive widget of a notebook, in page order.
PLANS = {"01_bayesian_optimization": [bo_stepper], "03_draft_verify_timeline": [trace_replayer],
         "04_playground": [playground], "05_speculative_sampling": [sampling_explorer, monte_carlo_panel],
         "06_parallel_decoding": [iteration_stepper], "07_adaptive_skip_sets": [set_explorer],
         "08_saturation_and_early_exit": [exit_layer_explorer], "09_choosing_a_drafter": [gate_explorer],
         "10_draft_trees": [tree_stepper], "11_roofline_and_regimes": [limit_explorer],
         "12_width_drafts": [kept_explorer],
         "13_batches": [gamma_explorer]}


def test_every_control_changes_the_figure_to_pythons_values(ran, shots):
    interactive = [o for o in ran.of(WIDGET_MIME) if any(ran.nb.controls(o["id"]).values())]
    if ran.stem not in PLANS:
        assert not interactive, f"{ran.name} has interactive widgets: add a plan for them to PLANS"
        pytest.skip(f"{ran.name} has no interactive widgets")
    plans = PLANS[ran.stem]
    assert len(interactive) == len(plans), f"{ran.name}: {len(plans)} plan(s), {len(interactive)} interactive widget(s)"
    for out, plan in zip(interactive, plans):
        driver = WidgetDriver(ran.nb, out["output"]["data"][WIDGET_MIME]["model_id"], out["id"])
        plan(driver)
        assert not driver.unmoved(), f"{plan.__name__}: controls never exercised: {driver.unmoved()}"
        shoot(ran, {out["id"]: shots / f"{ran.stem}-{out['id']}-after-controls.png"})
        print("\n".join(driver.log))
    ran.assert_no_page_errors()


# -- layout ----------------------------------------------------------------------------------------------------
JS_FIT = """(ids) => ids.flatMap(id => {
  const node = document.querySelector(`[data-labkit-output="${id}"]`);
  const column = node.querySelector('.jp-OutputArea-output') || node;
  node.scrollIntoView();
  const col = column.getBoundingClientRect();
  return Array.from(node.querySelectorAll('.js-plotly-plot')).map(gd => {
    const r = (gd.querySelector('.main-svg') || gd).getBoundingClientRect();
    return {id, title: gd._fullLayout && gd._fullLayout.title ? gd._fullLayout.title.text : '',
            left: r.left - col.left, right: r.right - col.right, column: col.width, plot: r.width};
  });
})"""


def test_figures_fit_the_output_column(ran):
    ids = [o["id"] for o in ran.of(PLOTLY_MIME) + ran.of(WIDGET_MIME)]
    page = ran.nb.page
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            time.sleep(1.0)                                   # let plots that follow the window resize
            boxes = page.evaluate(JS_FIT, ids)
            wide = [b for b in boxes if b["left"] < -1 or b["right"] > 1]
            assert not wide, f"at {width} px: " + "; ".join(
                f"output {b['id']} ({b['title'][:50]!r}) is {b['plot']:.0f} px in a {b['column']:.0f} px column"
                for b in wide)
    finally:
        page.set_viewport_size({"width": WIDTHS[0], "height": 900})
    ran.assert_no_page_errors()
