"""Every command's bad calls, as a user makes them: one line on stderr naming the option and what it accepts, exit
status 2, no traceback, nothing written, and no model loaded (each fails in milliseconds once labkit is imported).

The table runs in one process (``tests/cli_calls.py`` runs each call as ``python -m labkit`` does: a process costs
seconds of ``import labkit``); three of the issue's cases (the table holds them all) also run one process each,
exactly as typed in a shell. A failure while working (a model folder that does not
load) ends in one line with exit status 1, and ``--debug`` shows its traceback.
"""
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from labkit import cli

ROOT = Path(__file__).resolve().parent.parent
PROG = "python -m labkit"
NO_CUDA = f"no CUDA device on this machine (torch {torch.__version__}); use 'cpu' or 'auto'"
FOLDER_NAME = "must be a folder name (letters, digits, '_', '.', '-'; not empty, no '/')"
NOT_A_MODEL = "is neither a shipped model (default, plain, draft) nor a Hugging Face model folder"
SOURCES = "must be one of stdlib, packages, stdlib-long, packages-long, stubs or an existing .txt/.jsonl prompt file"
DTYPES = "dtype must be one of fp32, float32, bf16, bfloat16, fp16, float16, half (or a torch.dtype)"
CUDA_HERE = torch.cuda.is_available()

#: command -> [(arguments, the error after "python -m labkit <command>: error: ")]; every one exits with status 2.
#: Relative paths are read in the calls' working folder, which holds notes.md (a file) and empty/ (a folder).
BAD_CALLS = {
    "train": [
        (["--name", ""], f"argument --name: {FOLDER_NAME}, got ''"),
        (["--name", "../up"], f"argument --name: {FOLDER_NAME}, got '../up'"),
        (["--lr", "x"], "argument --lr: must be a number, got 'x'"),
        (["--lr", "0"], "--lr must be a number > 0.0, got 0.0"),
        (["--n-heads", "3"], "--hidden-size must be a multiple of n_heads, got 256 and 3"),
        (["--recipe", "fast"], "--recipe must be 'skip_robust' or 'plain', got 'fast'"),
        (["--draft-skip-prob", "1.5"], "--draft-skip-prob must be a number in [0.0, 1.0], got 1.5"),
        (["--work-dir", "notes.md"], "argument --work-dir: 'notes.md' is there and is not a folder"),
        (["--corpus-packages", "optuna"], "--corpus-packages: 'optuna' is an outside-prompt package (labkit.artifacts"
                                          ".prompts.STUB_PACKAGES); it stays out of training so its prompts stay "
                                          "outside"),
    ],
    "train-draft-head": [
        (["--model", "nope"], f"argument --model: 'nope' {NOT_A_MODEL} (nope is no folder here)"),
        (["--model", "plain"], "--skip is needed: model 'plain' was not trained with a fixed draft path"),
        (["--skip", "attn=1"], "--skip set text: expected 'attention=i,j;mlp=k,l', got 'attn=1'"),
        (["--holdout", "1"], "argument --holdout: must be a number in (0, 1), got '1'"),
        (["--epochs", "0"], "argument --epochs: must be an integer >= 1, got 0"),
    ],
    "train-heads": [
        (["--model", "empty"], f"argument --model: 'empty' {NOT_A_MODEL} (empty exists but holds no config.json)"),
        (["--n-heads", "8", "--new-tokens", "8"],
         "--new-tokens must be larger than --n-heads (each position needs n_heads labels)"),
        (["--corpus-root", "missing"], "argument --corpus-root: no folder at 'missing'"),
        (["--lr", "-1"], "argument --lr: must be a number > 0.0, got -1.0"),
    ],
    "robustness": [
        (["--model", "nope"], f"argument --model: 'nope' {NOT_A_MODEL} (nope is no folder here)"),
        (["--prompt-source", "wikipedia"], f"argument --prompt-source: {SOURCES}, got 'wikipedia'"),
        (["--prompt-source", "missing.txt"], f"argument --prompt-source: {SOURCES}, got 'missing.txt'"),
        (["--prompts", "0"], "argument --prompts: must be an integer >= 1, got 0"),
    ],
    "costmodel": [
        (["--model", "nope"], f"argument --model: 'nope' {NOT_A_MODEL} (nope is no folder here)"),
        (["--context", "0"], "argument --context: must be an integer >= 1, got 0"),
        (["--pooling", "some"], "argument --pooling: invalid choice: 'some' (choose from 'partial', 'full', 'none')"),
        (["--out", "empty"], "argument --out: 'empty' is there and is not a file"),
    ],
    "calibrate": [
        (["--dtype", "int4"], f"argument --dtype: {DTYPES}, got 'int4'"),
        (["--widen", "12"], "argument --widen: must be HIDDENxLAYERS, two integers >= 1 (e.g. 1536x12), got '12'"),
        (["--tokens", "1"], "argument --tokens: must be an integer >= 2, got 1"),
        (["--kept", "1", "1.5"], "argument --kept: must be a number in [0.0, 1.0], got 1.5"),
        (["--draft-weights", "int4"], "argument --draft-weights: invalid choice: 'int4' (choose from 'int8')"),
        *([] if CUDA_HERE else [(["--device", "cuda"], f"argument --device: device='cuda': {NO_CUDA}")]),
    ],
    "search": [
        (["--sources", "wikipedia"], "argument --sources: invalid choice: 'wikipedia' (choose from 'stdlib', "
                                     "'packages', 'stdlib-long', 'packages-long', 'stubs')"),
        (["--sources", "stdlib"], "--sources is not read by the modelled objective (only by priced: --objective "
                                  "priced)"),
        (["--policy", "fixed:2"], "--policy is not read by the modelled objective (only by measured: --objective "
                                  "measured)"),
        (["--objective", "measured", "--policy", "nope"], "--policy must be 'adaptive' or 'fixed:K', got 'nope'"),
        (["--trials", "-1"], "argument --trials: must be an integer >= 1, got -1"),
        (["--dtype", "int4"], f"argument --dtype: {DTYPES}, got 'int4'"),
        (["--cost-model", "missing.json"], "argument --cost-model: no file at 'missing.json'"),
        (["--grace-period", "5"], "--grace-period (5 s) must be longer than heartbeat_interval (10 s), or a live "
                                  "worker's trial is failed between two heartbeats"),
        (["--ratio-bucket", "0.5", "0.2"], "--ratio-bucket must satisfy 0 <= lo < hi <= 1, got (0.5, 0.2)"),
        (["export", "--storage", "none.db"], "--storage: no study storage at none.db; export reads the studies a run "
                                             "wrote"),
        (["publish"], "argument action: invalid choice: 'publish' (choose from 'run', 'export', 'compare', 'rank', "
                      "'check', 'final')"),
    ],
    "grid": [
        (["--dtype", "int4"], f"argument --dtype: {DTYPES}, got 'int4'"),
        (["--thresholds", "2"], "argument --thresholds: must be a number in [0.0, 1.0], got 2.0"),
        (["--draft-weights", "fp32", "fp32"], "--draft-weights lists a value twice: ('fp32', 'fp32')"),
        (["--showcase-model", "nope"], f"argument --showcase-model: 'nope' {NOT_A_MODEL} (nope is no folder here)"),
        (["--search-dir", "missing"], "argument --search-dir: no folder at 'missing'"),
        *([] if CUDA_HERE else [(["--device", "cuda"], f"argument --device: device='cuda': {NO_CUDA}")]),
    ],
    "bench": [
        (["--models", "default", "nope"], f"argument --models: 'nope' {NOT_A_MODEL} (nope is no folder here)"),
        (["--prompts", "0"], "argument --prompts: must be an integer >= 1, got 0"),
        (["--tokens", "many"], "argument --tokens: must be an integer, got 'many'"),
        (["--strategy-sources", "wikipedia"], f"argument --strategy-sources: {SOURCES}, got 'wikipedia'"),
        (["--out", "notes.md"], "argument --out: 'notes.md' is there and is not a folder"),
        *([] if CUDA_HERE else [(["--device", "cuda", "--debug"], f"argument --device: device='cuda': {NO_CUDA}")]),
    ],
    "reference": [
        (["--only", "nope"], "argument --only: groups must be among summary, 02, 06, 07, 09, 10, 11, 12, 13, "
                             "got 'nope'"),
        (["--sources", "wikipedia"], "argument --sources: sources must be among stdlib, packages, stdlib-long, "
                                     "packages-long, stubs, got 'wikipedia'"),
        (["--out", "notes.md"], "argument --out: 'notes.md' is there and is not a folder"),
        (["--model", "nope"], f"argument --model: 'nope' {NOT_A_MODEL} (nope is no folder here)"),
    ],
    "device-bench": [
        (["--device", "tpu"], "argument --device: device must be 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto', got 'tpu'"),
        (["--sources", "wikipedia"], f"argument --sources: {SOURCES}, got 'wikipedia'"),
        (["--sections", "speed"], "argument --sections: invalid choice: 'speed' (choose from 'lossless', 'bench', "
                                  "'divergence', 'calibration')"),
        (["--export-prompts", "notes.md"], "argument --export-prompts: 'notes.md' is there and is not a folder"),
    ],
    "stop-signal": [
        (["--model", "nope"], f"argument --model: 'nope' {NOT_A_MODEL} (nope is no folder here)"),
        (["--temperature", "0"], "argument --temperature: must be a number > 0.0, got 0.0"),
        (["--gamma", "0"], "argument --gamma: must be an integer >= 1, got 0"),
        (["--n-prompts", "x"], "argument --n-prompts: must be an integer, got 'x'"),
    ],
    "notebooks": [
        (["pdf"], "argument command: invalid choice: 'pdf' (choose from 'html', 'run')"),
        ([], "the following arguments are required: command"),
        (["run", "--fast"], "unrecognized arguments: --fast"),
    ],
}


def snapshot(*folders: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folders`` with its size and modification time (what a written call would change)."""
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for folder in folders if folder.exists()
            for p in sorted(folder.rglob("*"))}


def workdir(tmp_path: Path) -> Path:
    """The calls' working folder: a file, an empty folder and nothing else."""
    (tmp_path / "notes.md").write_text("notes\n")
    (tmp_path / "empty").mkdir()
    return tmp_path


def run_in_one_process(calls: list[list[str]], cwd: Path) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "cli_calls.py"), json.dumps(calls)], cwd=cwd,
                         env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def python_m_labkit(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m labkit <args>`` in its own process, as typed in a shell."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-m", "labkit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_every_command_has_its_bad_calls():
    assert set(BAD_CALLS) == {c.name for c in cli.COMMANDS}
    assert all(len(calls) >= 3 for calls in BAD_CALLS.values())


def test_every_bad_call_ends_in_one_line_with_status_2_and_writes_nothing(tmp_path):
    cwd = workdir(tmp_path)
    calls = [[name, *args] for name, table in BAD_CALLS.items() for args, _ in table]
    expected = [f"{PROG} {name}: error: {line}\n" for name, table in BAD_CALLS.items() for _, line in table]
    watched = (ROOT / "data", cwd)
    before = snapshot(*watched)
    results = run_in_one_process(calls + [["benchmark"]], cwd)
    assert snapshot(*watched) == before, "a bad call wrote a file"
    for call, want, got in zip(calls, expected, results, strict=False):
        assert "Traceback" not in got["stderr"], f"{call}: {got['stderr'][-2000:]}"
        assert (got["code"], got["stderr"], got["stdout"]) == (2, want, ""), call
    unknown = results[-1]
    assert unknown["code"] == 2 and unknown["stderr"].startswith(f"{PROG}: error: unknown command 'benchmark' "
                                                                  "(did you mean 'bench'?); the commands are: train, ")
    assert unknown["stderr"].count("\n") == 1


@pytest.mark.parametrize("args, line", [
    pytest.param(["bench", "--device", "cuda"], f"bench: error: argument --device: device='cuda': {NO_CUDA}",
                 marks=pytest.mark.skipif(CUDA_HERE, reason="this machine has a CUDA device")),
    (["train", "--name", ""], f"train: error: argument --name: {FOLDER_NAME}, got ''"),
    (["search", "--sources", "wikipedia"], "search: error: argument --sources: invalid choice: 'wikipedia' (choose "
                                           "from 'stdlib', 'packages', 'stdlib-long', 'packages-long', "
                                           "'stubs')"),
], ids=lambda value: value[0] if isinstance(value, list) else None)
def test_the_issues_cases_as_typed_in_a_shell(args, line, tmp_path):
    before = snapshot(ROOT / "data")
    res = python_m_labkit(args, workdir(tmp_path))
    assert (res.returncode, res.stderr, res.stdout) == (2, f"{PROG} {line}\n", "")
    assert snapshot(ROOT / "data") == before                 # train --name "" once wrote into data/checkpoints/


def test_a_failure_while_working_is_one_line_with_status_1_and_debug_shows_the_traceback(tmp_path):
    cwd = workdir(tmp_path)
    (cwd / "broken").mkdir()
    (cwd / "broken" / "config.json").write_text("{}")                  # passes the check, then fails to load
    with ThreadPoolExecutor(2) as pool:
        plain, debug = pool.map(lambda extra: python_m_labkit(["robustness", "--model", "broken", *extra], cwd),
                                ([], ["--debug"]))
    assert plain.returncode == 1 and plain.stderr.count("\n") == 1 and "Traceback" not in plain.stderr
    assert plain.stderr.startswith(f"{PROG} robustness: error: could not load model 'broken'; tried: local folder")
    assert plain.stderr.endswith("(--debug shows the traceback)\n")
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr
    assert debug.stderr.rstrip().splitlines()[-1].startswith("OSError: could not load model 'broken'")
    assert sorted(p.name for p in (cwd / "broken").iterdir()) == ["config.json"]

