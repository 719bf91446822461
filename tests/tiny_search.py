"""Shared pieces of the search tests (tests/search/): tiny random Llamas saved as model folders (4 and 3 layers), a
hand-made cost model of the 4-layer one (tests that are not about measuring skip the timing), small objective
settings, and helpers for storages and worker processes. Test modules import the fixtures they use by name.

The models are saved with save_pretrained (safetensors) plus a character-level tokenizer, so ``load_model(path)``, in
this process and in worker subprocesses, reads them like any other model folder."""
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from labkit.measure.costs.costmodel import CostModel
from labkit.search import open_storage

from tiny_models import save_tiny_model_folder

REPO = Path(__file__).resolve().parents[1]
#: a hand-made cost model of the 4-layer tiny model
CM = CostModel(n_layers=4, fixed_ms=0.3, attention_ms=[0.1] * 4, mlp_ms=[0.08] * 4, layer_ms=[0.05] * 4,
               verify_ms=[1.25 + 0.01 * k for k in range(13)], full_step_ms=1.22)
FAST = {"n_prompts": 1, "n_tokens": 6}                     # a SearchConfig's settings
QUIET = {"progress": False, "cost_model": CM}              # run_search's


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(save_tiny_model_folder(tmp_path_factory.mktemp("models") / "tiny4", n_layers=4))


@pytest.fixture(scope="module")
def tiny3(tmp_path_factory):
    return str(save_tiny_model_folder(tmp_path_factory.mktemp("models") / "tiny3", n_layers=3))


def db(tmp_path, name="search.db") -> str:
    """A SQLite storage URL in ``tmp_path``."""
    return f"sqlite:///{tmp_path / name}"


def complete(storage: str, study_name: str) -> list:
    """The study's COMPLETE trials, read back from the storage."""
    study = optuna.load_study(study_name=study_name, storage=open_storage(storage))
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def worker(model: str, storage: str, study_name: str, trials: int, seed: int = 0) -> subprocess.Popen:
    """``python -m labkit.search`` in a subprocess (random sampler, modelled objective, tiny settings)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "labkit.search", "--model", model, "--objective", "modelled", "--sampler", "random",
           "--trials", str(trials), "--storage", storage, "--study-name", study_name, "--prompts", "1", "--tokens", "4",
           "--no-progress", "--threads", "1", "--seed", str(seed)]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
