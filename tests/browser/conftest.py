"""Fixtures of the browser layer: Chromium driven by Playwright, and a JupyterLab server to point it at.

What a student sees is what these tests look at: JupyterLab runs on 127.0.0.1 (a free port, a random token) over a
throw-away root that holds FAST copies of the notebooks beside a link to the repository's ``data/`` (so their
relative paths such as ``../data/playground`` resolve), with its own settings and workspaces (nothing of a
developer's own JupyterLab set-up leaks in, nothing is written back).

Chromium comes from the system: ``$LABKIT_CHROMIUM``, else ``/usr/bin/chromium``, else ``chromium`` on PATH
(Playwright's own browser download is not used). Without it, or without the playwright package, every test here is
skipped with a message that says how to get it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))     # the layer's own helpers (servers, pages, notebook_page)
from servers import (
    CHROMIUM_ARGS,
    DEFAULT_CHROMIUM,
    INSTALL_HINT,
    LAB_CONFIG,
    REPO,
    SHOTS,
    chromium_path,
    free_port,
    stop_server,
    wait_for_http,
)


# -- Chromium -----------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def browser():
    """A headless system Chromium under Playwright (skips the test when either is missing). One per process (per
    xdist worker): each notebook's browser tests run in that notebook's xdist group, between other modules' tests, so
    a module-scoped one would start again for every notebook; idle, it holds no core."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is missing: "
                                   "pip install -e '.[test]' installs it")
    path = chromium_path()
    if path is None:
        where = os.environ.get("LABKIT_CHROMIUM") or DEFAULT_CHROMIUM
        pytest.skip(f"Chromium not found at {where}: {INSTALL_HINT}")
    pw = sync_api.sync_playwright().start()
    try:
        chromium = pw.chromium.launch(executable_path=path, headless=True, args=CHROMIUM_ARGS)
    except Exception:
        pw.stop()
        raise
    yield chromium
    chromium.close()
    pw.stop()


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Path:
    """build/browser/: the screenshots of this run, emptied once first (under xdist by the first worker to get here:
    a flag in the run's shared temporary folder, under a file lock, says it was done)."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base   # popen-gwN/.. is this run's, shared
    with FileLock(str(shared / "labkit-shots.lock")):
        flag = shared / "labkit-shots-emptied"
        if not flag.exists():
            shutil.rmtree(SHOTS, ignore_errors=True)
            flag.touch()
        SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS


# -- JupyterLab -----------------------------------------------------------------------------------
@dataclass
class LabServer:
    url: str            # http://127.0.0.1:PORT
    token: str
    root: Path          # the server's root: notebooks/ (FAST copies), data -> the repository's data/

    def notebook_url(self, name: str) -> str:
        # ?reset: a fresh workspace (no restored tabs); the token logs the page in (cookie)
        return f"{self.url}/lab/tree/notebooks/{name}?reset&token={self.token}"


def fast_copy(src: Path, dst: Path) -> None:
    """``src`` with its parameters cell switched to FAST mode (the committed notebooks say FAST = False)."""
    nb = json.loads(src.read_text())
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{src.name}: exactly one cell tagged 'parameters'"
    source = "".join(cells[0]["source"])
    assert "FAST = False" in source, f"{src.name}: the parameters cell should say FAST = False"
    cells[0]["source"] = source.replace("FAST = False", "FAST = True", 1)
    dst.write_text(json.dumps(nb, indent=1))


def lab_settings(folder: Path) -> None:
    """JupyterLab user settings for the test server: every cell laid out all the time (the default,
    content-visibility, leaves off-screen cells at a guessed height until they scroll in, so an output moves while a
    screenshot or a measurement is taken; what is drawn is the same). No news prompt comes from the lab's own
    defaults (``jupyter/labconfig``, as ``make lab`` starts it), checked by :func:`lab`."""
    settings = {"notebook-extension/tracker": {"windowingMode": "none"}}
    for name, values in settings.items():
        path = folder / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def lab_root(notebooks: list[Path]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="labkit-browser-"))
    (root / "notebooks").mkdir()
    (root / "data").symlink_to(REPO / "data", target_is_directory=True)
    for nb in notebooks:
        fast_copy(nb, root / "notebooks" / nb.name)
    lab_settings(root / "settings")
    return root


@pytest.fixture(scope="session")
def lab(browser):
    """A JupyterLab server on 127.0.0.1 over FAST copies of every notebook (it needs the browser: no Chromium,
    no server). One per process (per xdist worker: each its own free port, token and root), like :func:`browser`;
    every notebook's kernel is shut down after its tests."""
    from labkit.lessons.notebook import notebook_paths

    root = lab_root(notebook_paths())
    port, token = free_port(), os.urandom(16).hex()
    env = {**os.environ, "JUPYTER_CONFIG_PATH": str(LAB_CONFIG), "JUPYTERLAB_SETTINGS_DIR": str(root / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(root / "workspaces"), "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.expose_app_in_browser=True"]          # window.jupyterapp: commands, the kernel
    if os.getuid() == 0:
        cmd.append("--allow-root")
    log = root / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/api/status?token={token}", proc, log)
        news = f"{url}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}"
        with urllib.request.urlopen(news, timeout=30) as r:      # the news prompt (a toast over the figures) is off
            assert json.load(r)["schema"]["properties"]["fetchNews"]["default"] == "false", LAB_CONFIG
        yield LabServer(url, token, root)
    finally:
        stop_server(proc, f"{url}/api/shutdown?token={token}")
        shutil.rmtree(root, ignore_errors=True)
