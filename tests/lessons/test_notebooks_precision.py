"""Every notebook that loads a model takes DEVICE and DTYPE next to MODEL and passes them on; a notebook runs end to
end on a local checkpoint of a supported family in bf16 (a tiny random Llama saved as a Hugging Face folder, with the
shipped byte-level tokenizer, so that text decodes back exactly)."""
import json

import nbformat
import papermill as pm
import pytest

from labkit.artifacts.paths import MODELS_DIR, NOTEBOOK_DIR
from labkit.lessons.notebook import execute_notebook, notebook_paths

from tiny_models import save_tiny_model_folder

NO_MODEL = {"01_bayesian_optimization"}          # no model: nothing to place (the BO lesson runs on toy functions)
LOADS = ("load_model(", "load_draft_model(", "run_search(", "compare_samplers(", "Playground(")
#: notebooks whose parameters another session owns and checks (11: the regime lesson names them itself)
OWN_PARAMETERS = {"11_roofline_and_regimes"}


def _model_notebooks():
    return [p for p in [*notebook_paths(), NOTEBOOK_DIR / "app_playground.ipynb"] if p.stem not in NO_MODEL]


@pytest.mark.parametrize("path", _model_notebooks(), ids=lambda p: p.stem)
def test_device_and_dtype_are_parameters_passed_wherever_a_model_is_loaded(path):
    params = pm.inspect_notebook(str(path))
    assert {"MODEL", "DEVICE", "DTYPE"} <= set(params), path.stem
    if path.stem in OWN_PARAMETERS:
        return
    assert (params["DEVICE"]["default"], params["DTYPE"]["default"]) == ('"cpu"', '"fp32"')
    nb = nbformat.read(str(path), as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"
            and "parameters" not in c.get("metadata", {}).get("tags", [])]
    calls = [line for src in code for line in src.replace(",\n", ", ").splitlines() if any(k in line for k in LOADS)]
    assert calls, f"{path.stem} loads no model"
    for line in calls:
        assert "device=DEVICE" in line and "dtype=DTYPE" in line, f"{path.stem}: {line.strip()}"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return str(save_tiny_model_folder(tmp_path_factory.mktemp("checkpoint") / "tiny4", n_layers=4,
                                      tokenizer_from=MODELS_DIR / "default"))


def _stream(executed) -> str:
    nb = nbformat.read(str(executed), as_version=4)
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.get("output_type") == "stream")


@pytest.mark.slow
@pytest.mark.notebooks
@pytest.mark.parametrize("stem, extra", [
    ("00_setup_check", {}),
    # no grid and no separate draft model for a new checkpoint: the threshold given, the draft model's section skipped
    ("03_draft_verify_timeline", {"INITIAL_THRESHOLD": 0.5, "SOLUTIONS": True}),
], ids=["00_setup_check-bf16", "03_draft_verify_timeline-bf16"])
def test_a_notebook_runs_on_a_local_checkpoint_in_bf16(stem, extra, checkpoint, tmp_path):
    if "DRAFT_MODEL" in pm.inspect_notebook(str(NOTEBOOK_DIR / f"{stem}.ipynb")):
        extra = {**extra, "DRAFT_MODEL": str(tmp_path / "no-draft-model")}
    executed = execute_notebook(NOTEBOOK_DIR / f"{stem}.ipynb", {
        "FAST": True, "OUTPUT_DIR": str(tmp_path), "MODEL": checkpoint, "DEVICE": "cpu", "DTYPE": "bf16", **extra},
        out_dir=tmp_path / "executed", timeout=600)
    text = _stream(executed)
    metrics = json.loads((tmp_path / f"{stem}.json").read_text())["metrics"]
    if stem == "00_setup_check":
        assert "(bfloat16 on cpu)" in text and metrics["n_layers"] == 4 and metrics["n_new_tokens"] > 0
    else:
        assert metrics["greedy_identical_to_plain"] is True and metrics["one_pass_check_ok"] is True
        assert "No draft model at" in text and "correct: " in text and "not yet: " not in text
