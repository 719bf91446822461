"""One notebook open in JupyterLab under Playwright: run it, list its outputs, ask its kernel, move its controls.

Controls are moved the way a student moves them: buttons and toggle buttons are clicked, dropdowns get an option
chosen, sliders get an arrow key on their focused handle. After each move :meth:`NotebookPage.settle` waits until
the kernel's state has changed and the page draws exactly that state.
"""
from __future__ import annotations

import json
import time

from pages import (
    JS_DOM_STATE,
    JS_KERNEL_EXEC,
    PY_WIDGET_STATE,
    exact,
    figure_part,
    text_part,
    watch_errors,
    widget_mismatches,
)

JS_NOTEBOOK_READY = """() => {
  const w = window.jupyterapp && jupyterapp.shell.currentWidget;
  if (!w || !w.context || !w.context.isReady || !w.sessionContext) return false;
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle' && w.content.widgets.length > 0;
}"""

# Done: every code cell has run (an execution count) or one of them shows an error; and the kernel is idle.
JS_RUN_FINISHED = """() => {
  const w = jupyterapp.shell.currentWidget;
  const cells = w.content.widgets.filter(c => c.model.type === 'code');
  const failed = cells.some(c => c.model.outputs.toJSON().some(o => o.output_type === 'error'));
  const done = cells.every(c => c.model.executionCount !== null);
  return (done || failed) && w.sessionContext.session.kernel.status === 'idle';
}"""

# Every output of every code cell, its output node tagged data-labkit-output="<cell>-<k>" to be found again.
JS_OUTPUTS = """() => {
  const out = [];
  jupyterapp.shell.currentWidget.content.widgets.forEach((cell, ci) => {
    if (cell.model.type !== 'code') return;
    const children = cell.outputArea.widgets;
    cell.model.outputs.toJSON().forEach((o, k) => {
      const id = `${ci}-${k}`;
      if (children[k]) children[k].node.setAttribute('data-labkit-output', id);
      out.push({cell: ci, id, output: o});
    });
  });
  return out;
}"""

# The controls of a widget output, by kind: button texts, slider / toggle / dropdown descriptions.
JS_CONTROLS = """(sel) => {
  const root = document.querySelector(sel);
  const label = el => { const l = el.querySelector('.widget-label'); return l ? l.textContent.trim() : ''; };
  return {
    button: Array.from(root.querySelectorAll('button.widget-button')).map(b => b.textContent.trim()),
    slider: Array.from(root.querySelectorAll('.widget-slider')).map(label),
    toggle: Array.from(root.querySelectorAll('.widget-toggle-buttons')).map(label),
    dropdown: Array.from(root.querySelectorAll('.widget-dropdown')).map(label),
  };
}"""


class NotebookPage:
    """A notebook tab in its own browser context, with the page's console errors collected."""

    def __init__(self, browser, url: str, width: int = 1280, height: int = 900):
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.errors = watch_errors(self.page)
        self.page.goto(url, wait_until="domcontentloaded", timeout=90_000)
        self.page.wait_for_function(JS_NOTEBOOK_READY, timeout=120_000, polling=250)
        self._helpers = False

    # -- running -----------------------------------------------------------------------------------
    def run_all(self, timeout_s: float = 300) -> float:
        """Run All, as from the menu; returns the seconds until the kernel was idle with every cell run."""
        t0 = time.monotonic()
        self.page.evaluate("() => { jupyterapp.commands.execute('notebook:run-all-cells'); }")
        self.page.wait_for_function(JS_RUN_FINISHED, timeout=timeout_s * 1000, polling=500)
        return time.monotonic() - t0

    def outputs(self) -> list[dict]:
        return self.page.evaluate(JS_OUTPUTS)

    def notebook_json(self) -> dict:
        """The notebook as JupyterLab holds it now (nbformat JSON: cells, their tags, their outputs)."""
        nb = self.page.evaluate("() => jupyterapp.shell.currentWidget.context.model.toJSON()")
        for cell in nb["cells"]:                 # JupyterLab gives a markdown cell without any "attachments": null
            if cell.get("attachments", {}) is None:
                del cell["attachments"]
        return nb

    def close(self) -> None:
        """Shut the kernel down (it would hold a core) and close the tab's browser context."""
        try:
            self.page.evaluate("() => jupyterapp.shell.currentWidget.sessionContext.shutdown()")
        finally:
            self.context.close()

    # -- kernel --------------------------------------------------------------------------------------
    def kernel(self, code: str) -> str:
        """Run ``code`` in the notebook's kernel (not as a cell: nothing is added to the notebook); its stdout."""
        result = self.page.evaluate(JS_KERNEL_EXEC, code)
        if result["error"]:
            raise AssertionError(f"kernel: {result['error'][-2000:]}\n{code}")
        return result["out"]

    def kernel_json(self, expression: str):
        return json.loads(self.kernel(f"import json as __j; print(__j.dumps({expression}))"))

    def python_state(self, model_id: str) -> dict:
        """Figures and HTML texts of the widget tree ``model_id`` as the kernel holds them."""
        if not self._helpers:
            self.kernel(PY_WIDGET_STATE)
            self._helpers = True
        return self.kernel_json(f"__labkit_widget_state({model_id!r})")

    def dom_state(self, output_id: str) -> dict | None:
        return self.page.evaluate(JS_DOM_STATE, f'[data-labkit-output="{output_id}"]')

    def scope(self, output_id: str):
        return self.page.locator(f'[data-labkit-output="{output_id}"]')

    def controls(self, output_id: str) -> dict[str, list[str]]:
        return self.page.evaluate(JS_CONTROLS, f'[data-labkit-output="{output_id}"]')

    # -- waiting for the page to show what Python holds ----------------------------------------------------
    def settle(self, model_id: str, output_id: str, before: dict | None = None, timeout_s: float = 30):
        """Wait until the kernel's state of the widget differs from ``before`` (if given), stays put, and the page
        draws exactly it; returns that state. Fails with what still differs."""
        problems = ["the kernel's state did not change"]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            py = self.python_state(model_id)
            if before is None or py != before:
                problems = widget_mismatches(py, self.dom_state(output_id))
                if not problems and self.python_state(model_id) == py:
                    return py
            time.sleep(0.25)
        raise AssertionError("; ".join(problems[:6]))


class WidgetDriver:
    """Moves the controls of one widget output and checks each move (see :meth:`act`)."""

    def __init__(self, nb: NotebookPage, model_id: str, output_id: str):
        self.nb, self.model_id, self.output_id = nb, model_id, output_id
        self.scope = nb.scope(output_id)
        self.moved: dict[str, set[str]] = {"button": set(), "slider": set(), "toggle": set(), "dropdown": set()}
        self.log: list[str] = []

    def act(self, kind: str, name: str, move, timeout_s: float = 30) -> dict:
        """Do ``move()`` (a click or key press on the page), then require that the kernel's figure data and readout
        text both changed and that the page draws the new state within 1e-6."""
        before = self.nb.python_state(self.model_id)
        t0 = time.monotonic()
        move()
        try:
            after = self.nb.settle(self.model_id, self.output_id, before, timeout_s)
        except AssertionError as err:
            raise AssertionError(f"{kind} {name!r}: {err}") from None
        assert figure_part(after) != figure_part(before), f"{kind} {name!r} did not change the figure data"
        assert text_part(after) != text_part(before), f"{kind} {name!r} did not change the readout text"
        self.moved[kind].add(name)
        self.log.append(f"{kind} {name!r}: page shows Python's new state after {time.monotonic() - t0:.1f} s")
        return after

    def button(self, text: str, timeout_s: float = 30) -> dict:
        target = self.scope.locator("button.widget-button", has_text=exact(text))
        return self.act("button", text, lambda: target.click(), timeout_s)

    def toggle(self, label: str) -> dict:
        """Click the first option of the toggle group ``label`` that is not selected."""
        group = self._labelled(".widget-toggle-buttons", label)
        target = group.locator("button.widget-toggle-button:not(.mod-active)").first
        return self.act("toggle", label, lambda: target.click())

    def dropdown(self, label: str) -> dict:
        """Choose the options of dropdown ``label`` after the selected one in turn (wrapping) until one changes the
        figure: two options may rightly draw the same picture (a strategy that kept its start set on this prompt
        draws what the static set draws), but some option must change it, to Python's values; else fail."""
        select = self._labelled(".widget-dropdown", label).locator("select")
        options = select.locator("option").all_text_contents()
        start = options.index(select.evaluate("s => s.options[s.selectedIndex].textContent"))
        same = []
        for k in range(1, len(options)):
            choice = options[(start + k) % len(options)]
            try:
                return self.act("dropdown", label, lambda c=choice: select.select_option(label=c))
            except AssertionError as err:
                if "did not change the figure data" not in str(err):
                    raise
                same.append(choice)
        raise AssertionError(f"dropdown {label!r}: no option changed the figure data (tried {same})")

    def slider(self, label: str) -> dict:
        """One arrow-key step on the focused handle of slider ``label`` (right, or left at the right end)."""
        handle = self._labelled(".widget-slider", label).locator(".noUi-handle")
        now, top = (float(handle.get_attribute(a)) for a in ("aria-valuenow", "aria-valuemax"))
        key = "ArrowLeft" if now >= top else "ArrowRight"

        def move():
            handle.focus()
            handle.press(key)
        return self.act("slider", label, move)

    def unmoved(self) -> dict[str, list[str]]:
        """Controls of the widget output that no move has exercised yet."""
        present = self.nb.controls(self.output_id)
        return {k: sorted(set(v) - self.moved[k]) for k, v in present.items() if set(v) - self.moved[k]}

    def _labelled(self, css: str, label: str):
        return self.scope.locator(css).filter(has=self.nb.page.locator(".widget-label", has_text=exact(label)))
