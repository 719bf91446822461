"""Processes the browser tests start: where Chromium is, free ports, waiting for a server and stopping it."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "build" / "browser"
LAB_CONFIG = REPO / "jupyter"     # the lab's JupyterLab defaults (labconfig/); `make lab` sets JUPYTER_CONFIG_PATH
DEFAULT_CHROMIUM = "/usr/bin/chromium"
# Flags that let Chromium run headless as root in a container on a closed network: no sandbox (root), no GPU,
# and none of the background fetches (they would flood a closed network with refused connections).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
INSTALL_HINT = "install it with `apt-get install -y chromium` (Debian) or set LABKIT_CHROMIUM"


def chromium_path() -> str | None:
    """The Chromium executable these tests drive, or None when there is none."""
    configured = os.environ.get("LABKIT_CHROMIUM")
    candidates = [configured] if configured else [DEFAULT_CHROMIUM, shutil.which("chromium"),
                                                  shutil.which("chromium-browser")]
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    """Poll ``url`` until it answers 200; fail early (with the server's log) if the server died."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    pytest.fail(f"server did not answer {url} within {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def stop_server(proc: subprocess.Popen, shutdown_url: str | None = None) -> None:
    """Ask the server to shut down (its kernels with it), then make sure the process is gone."""
    if shutdown_url and proc.poll() is None:
        try:
            urllib.request.urlopen(urllib.request.Request(shutdown_url, method="POST"), timeout=10).close()
        except OSError:
            pass
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
