import os
import re
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
torch.set_num_threads(1)   # tiny models: one thread is fastest and leaves the other core free
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
MAX_AUTO_WORKERS = 2       # -n auto (pyproject's addopts): two workers, fewer on fewer cores; -n N asks for N


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """How many xdist workers ``-n auto`` starts: PYTEST_XDIST_AUTO_NUM_WORKERS if set, else the cores this process may
    use, at most :data:`MAX_AUTO_WORKERS` (each worker may hold a notebook kernel, a JupyterLab server and a Chromium;
    the timings the suite checks want a core each)."""
    configured = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS")
    if configured:
        return int(configured)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_AUTO_WORKERS, cores))


# The tests that share one run of a notebook (see shared_runs): in these files, every test whose id is a notebook's stem
SHARED_RUN_FILES = ("tests/browser/test_notebooks_in_browser.py", "tests/lessons/test_notebooks.py")
NOTEBOOK_ID = re.compile(r"\[(\d\d_\w+)\]$")


def notebook_group(nodeid: str) -> str | None:
    """``notebook-<stem>`` for a test of :data:`SHARED_RUN_FILES` whose id is a notebook's stem; else None."""
    path, _, name = nodeid.partition("::")
    found = NOTEBOOK_ID.search(name)
    return f"notebook-{found.group(1)}" if path in SHARED_RUN_FILES and found else None


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` (pyproject's addopts) with the notebook groups: each notebook's tests of
    :data:`SHARED_RUN_FILES` are one unit of work (one worker, in collection order: the browser's first), scheduled
    first (the largest units go first); every other test goes alone to whichever worker is free. (The groups are read
    from the test ids because xdist's own ``xdist_group`` mark renames the test, which xdist 3.8 cannot do under
    pytest 9.2: the mark groups nothing there.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class NotebookGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return notebook_group(nodeid) or super()._split_scope(nodeid)

    return NotebookGroups(config, log)


@pytest.fixture(scope="session")
def shared_runs() -> dict:
    """Notebook runs made once in this process and read by more than one layer: ``{notebook stem: run}``.

    The browser layer records each clean Run All here (FAST, the other parameters as committed: SOLUTIONS = False);
    the papermill checks that would execute the notebook with those same parameters read that run instead of
    executing it again (tests/lessons/test_notebooks.py). Under xdist each notebook's browser tests and papermill
    checks are one group (:func:`pytest_xdist_make_scheduler`), so they run in one worker, the browser's first
    (collection order); where the browser layer did not run a notebook (no Chromium, ``-m "not browser"``, another
    ``--dist``), the papermill checks execute it themselves."""
    return {}
