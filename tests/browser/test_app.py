"""`make app`: the playground as a standalone Voila page (notebooks/app_playground.ipynb), driven in Chromium.

Voila runs the notebook as committed (it is small: two grids and the widget, a few seconds), with its code hidden.
The page has no JupyterLab to ask the kernel through, so the Python side is computed here: the same Playground
built from the same grids in this process, moved the same way, must equal what the page draws and reads out.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import pytest

from pages import (
    JS_DOM_STATE,
    PY_WIDGET_STATE,
    close,
    exact,
    figure_part,
    html_text,
    wait_until,
    watch_errors,
    widget_mismatches,
)
from servers import REPO, free_port, stop_server

pytestmark = pytest.mark.browser
APP = REPO / "notebooks" / "app_playground.ipynb"
VOILA_ARGS = ["--no-browser", "--Voila.ip=127.0.0.1"]           # the Makefile's `app` target adds --token


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def app_url(browser, tmp_path_factory):
    """Voila serving the app notebook on 127.0.0.1 with a random token; the page's URL."""
    port, token = free_port(), os.urandom(16).hex()
    log = tmp_path_factory.mktemp("voila") / "voila.log"
    cmd = [sys.executable, "-m", "voila", str(APP), *VOILA_ARGS, f"--port={port}", f"--token={token}"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=APP.parent,
                                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    try:
        if not wait_until(lambda: proc.poll() is not None or _listening(port), 60) or proc.poll() is not None:
            pytest.fail(f"voila did not start:\n{log.read_text()[-3000:]}")
        yield f"http://127.0.0.1:{port}/?token={token}"
    finally:
        proc.terminate()
        stop_server(proc)


@pytest.fixture(scope="module")
def local():
    """The playground the page should show, built here from the same grids and parameters."""
    from labkit.lessons.playground import Playground
    from labkit.measure.grid.run import load_grid

    grids = {name: load_grid(name, REPO / "data" / "playground") for name in ("default", "plain")}
    lab = Playground(grids, model="default", live_prompts=2, live_tokens=48)
    namespace = {}
    exec(PY_WIDGET_STATE, namespace)
    lab.state = lambda: namespace["__labkit_widget_state"](lab.widget.model_id)
    return lab


def _page_matches(page, lab) -> list[str]:
    return widget_mismatches(lab.state(), page.evaluate(JS_DOM_STATE, "body"))


def test_app_page_runs_the_playground(browser, app_url, local, shots):
    context = browser.new_context(viewport={"width": 1280, "height": 1300})
    page = context.new_page()
    errors = watch_errors(page)
    try:
        t0 = time.monotonic()
        page.goto(app_url, timeout=180_000)
        page.wait_for_function("() => document.querySelector('.js-plotly-plot') && "
                               "document.querySelector('.js-plotly-plot')._fullData", timeout=120_000)
        print(f"app page drawn {time.monotonic() - t0:.1f} s after the request")
        assert "Playground(grids" not in page.inner_text("body"), "the app shows code"
        assert wait_until(lambda: not _page_matches(page, local), 30), _page_matches(page, local)

        # a slider, moved with the keyboard: the page must draw what the same move computes here
        handle = page.locator(".widget-slider").filter(
            has=page.locator(".widget-label", has_text=exact("skip ratio"))).locator(".noUi-handle")
        handle.focus()
        handle.press("ArrowRight")
        options = [value for _, value in local.ratio_slider.options]
        local.ratio_slider.value = options[options.index(local.ratio_slider.value) + 1]
        assert wait_until(lambda: not _page_matches(page, local), 30), _page_matches(page, local)

        # the draft weights toggle (when the grid has int8 cells; a format-2 grid offers fp32 only): a click on the
        # weights not selected (the page opens on the grid's best cell, int8 or fp32) must redraw every curve, the
        # star and the readout from those cells, as the same move does here
        if len(local.weights_toggle.options) > 1:
            before = local.state()
            other = next(w for w in local.weights_toggle.options if w != local.weights_toggle.value)
            group = page.locator(".widget-toggle-buttons").filter(
                has=page.locator(".widget-label", has_text=exact("draft weights")))
            group.locator("button.widget-toggle-button", has_text=exact(other)).click()
            local.weights_toggle.value = other
            assert (figure_part(local.state()) != figure_part(before)
                    and f"{other} draft weights" in local.readout.value)
            assert wait_until(lambda: not _page_matches(page, local), 30), _page_matches(page, local)

        # run live: a measurement on this machine, so its numbers cannot be computed here; the page must add one live
        # point at the current skip ratio to the top row, whose speedup is the one the readout states
        page.locator("button.widget-button", has_text=exact("run live")).click()
        readout = page.locator(".widget-html-content").filter(has_text="live run")
        readout.wait_for(timeout=180_000)
        state = page.evaluate(JS_DOM_STATE, "body")
        live = [t for t in state["figures"][0]["traces"] if t["name"] == "live run on this machine"]
        text = html_text(readout.inner_html())
        found = re.search(r"live run .*?speedup ([\d.]+)×", text)
        assert found, f"no live run speedup in the readout: {text[:500]}"    # e.g. "live run failed: ..."
        speedup = float(found.group(1))
        assert close(live[0]["x"], [local.ratio_slider.value]) and len(live[2]["y"]) == 1, live[:3]
        assert abs(live[2]["y"][0] - speedup) <= 0.005, (live[2]["y"], speedup)
        page.screenshot(path=shots / "app_playground.png", full_page=True)
        assert not errors, "\n".join(errors[:10])
    finally:
        context.close()
