"""notebooks/app_playground.ipynb, the page `make app` serves with Voila: clean on disk and runs (no browser needed;
tests/browser/test_app.py drives the served page)."""
import nbformat
import papermill as pm
import pytest

from labkit.artifacts.paths import BUILD_DIR, NOTEBOOK_DIR
from labkit.lessons.notebook import execute_notebook

APP = NOTEBOOK_DIR / "app_playground.ipynb"


def test_app_notebook_hygiene():
    nb = nbformat.read(str(APP), as_version=4)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), "commit without outputs"
    assert len([c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]) == 1
    assert all(spec["default"] not in (None, "") for spec in pm.inspect_notebook(str(APP)).values())


@pytest.mark.slow
@pytest.mark.notebooks
def test_app_notebook_runs_and_shows_the_playground():
    executed = execute_notebook(APP, out_dir=BUILD_DIR / "notebooks", timeout=300)
    outputs = [o for c in nbformat.read(str(executed), as_version=4).cells if c.cell_type == "code"
               for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs), "no widget shown"
