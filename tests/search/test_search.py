"""Skip-set search: both objectives, buckets, export/read-back, resume after kill -9, two workers, errors.

The models are tiny random Llamas saved with save_pretrained (safetensors) plus a character-level
tokenizer, so ``load_model(path)``, in this process and in worker subprocesses, reads them like
any other model folder.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from labkit import SkipSet
from labkit.artifacts.results import best_skip_set, ratio_buckets
from labkit.measure.costs.costmodel import CostModel
from labkit.search import (
    SearchConfig,
    export_results,
    open_storage,
    param_names,
    params_from_skip,
    run_search,
    skip_from_params,
    warm_start_sets,
)
from labkit.search.__main__ import main

from tiny_models import save_tiny_model_folder

REPO = Path(__file__).resolve().parents[2]
# a hand-made cost model for the 4-layer tiny model: tests that are not about measuring skip the timing
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
    return f"sqlite:///{tmp_path / name}"


def complete(storage: str, study_name: str) -> list:
    study = optuna.load_study(study_name=study_name, storage=open_storage(storage))
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def worker(model: str, storage: str, study_name: str, trials: int, seed: int = 0) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "labkit.search", "--model", model, "--objective", "modelled", "--sampler", "random",
           "--trials", str(trials), "--storage", storage, "--study-name", study_name, "--prompts", "1", "--tokens", "4",
           "--no-progress", "--threads", "1", "--seed", str(seed)]
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


# -- search space -----------------------------------------------------------------------------
def test_search_space_and_warm_start():
    assert param_names(2) == ["attn_0", "attn_1", "mlp_0", "mlp_1"]
    skip = SkipSet(attention=[1], mlp=[0, 3])
    assert skip_from_params(params_from_skip(skip, 4), 4) == skip
    warm = warm_start_sets(4)
    assert warm["no skip"] == SkipSet()
    assert warm["every other layer"] == SkipSet(attention=[1, 3], mlp=[1, 3])
    assert warm["every other attention block"] == SkipSet(attention=[1, 3])
    assert ratio_buckets()[:2] == [(0.0, 0.125), (0.125, 0.25)] and len(ratio_buckets()) == 8


# -- both objectives ----------------------------------------------------------------------------
def test_modelled_search_with_gp(tiny, tmp_path):
    storage = db(tmp_path)
    res = run_search(tiny, SearchConfig(objective="modelled", sampler="gp", seed=0, n_prompts=1, n_tokens=6),
                     trials=12, storage=storage, progress=False)         # measures this machine's cost model
    study = res.study
    assert res.n_complete == 12 and res.n_new == 12
    assert [t.user_attrs.get("warm_start") for t in study.trials[:3]] == [
        "no skip", "every other layer", "every other attention block"]
    assert study.trials[0].user_attrs["eval"]["alpha"] == 1.0                 # the full model agrees with itself
    values = [t.value for t in study.trials]
    assert all(v > 0 for v in values) and res.best_value == min(values)
    assert res.best_skip == skip_from_params(min(study.trials, key=lambda t: t.value).params, 4)
    attrs = study.user_attrs
    assert attrs["model"] == str(Path(tiny).resolve()) and attrs["objective"] == "modelled"
    assert attrs["search_space"]["params"] == param_names(4) and attrs["cost_model"]["n_layers"] == 4
    assert attrs["cost_model"]["full_step_ms"] != CM.full_step_ms
    for t in study.trials:
        ev = t.user_attrs["eval"]
        assert 0 <= ev["alpha"] <= 1 and 1 <= ev["gamma"] <= 12 and ev["feasible"]


def test_measured_search(tiny, tmp_path):
    res = run_search(tiny, SearchConfig(objective="measured", sampler="tpe", n_prompts=1, max_new_tokens=6),
                     trials=4, storage=db(tmp_path), progress=False)
    assert res.n_complete == 4 and res.baseline_ms > 0 and 0 < res.best_value < 1e4
    for t in res.study.trials:
        ev = t.user_attrs["eval"]
        assert ev["tokens_per_step"] >= 1 and ev["speedup"] > 0
    assert res.study.trials[0].user_attrs["eval"]["acceptance_rate"] == 1.0   # no skip: every draft accepted


def test_ratio_bucket_penalises_sets_outside(tiny, tmp_path):
    storage = db(tmp_path)
    free = run_search(tiny, SearchConfig(sampler="random", **FAST), trials=8, storage=storage, **QUIET).study
    known = {skip_from_params(t.params, 4) for t in free.trials if t.user_attrs["eval"]["ratio"] == 0.5}
    res = run_search(tiny, SearchConfig(sampler="random", ratio_bucket=(0.5, 0.625), **FAST), trials=12,
                     storage=storage, **QUIET)
    trials = res.study.trials
    starts = [t.user_attrs["warm_start"] for t in trials if "warm_start" in t.user_attrs]
    assert starts[0] == "every other layer"                              # the only fixed warm start inside
    # then the best sets inside the bucket that the unconstrained study already evaluated
    assert len(starts) == 1 + min(3, len(known - {warm_start_sets(4)["every other layer"]}))
    assert all(s.startswith("best known in the bucket") for s in starts[1:])
    inside = [t for t in trials if t.user_attrs["eval"]["feasible"]]
    outside = [t for t in trials if not t.user_attrs["eval"]["feasible"]]
    assert inside and outside
    assert all(t.user_attrs["eval"]["ratio"] == 0.5 for t in inside)     # 4 of 8 blocks (5/8 is the next bucket)
    assert min(t.value for t in outside) > max(t.value for t in inside)
    assert res.best_skip.ratio(4) == 0.5 and res.extra["study_name"].endswith("ratio0.5-0.625")



def test_bucket_study_starts_from_the_model_cards_greedy_path(tiny, tmp_path):
    import shutil

    from labkit.search.study import model_card_sets

    folder = tmp_path / "carded"
    shutil.copytree(tiny, folder)
    path = [SkipSet(mlp=[3]), SkipSet(attention=[3], mlp=[3]), SkipSet(attention=[2, 3], mlp=[3]),
            SkipSet(attention=[2, 3], mlp=[1, 3])]                                   # 1..4 of 8 blocks
    card = {"greedy_path": [{"skipped": s.n_skipped, "skip_set": s.to_dict()} for s in path]}
    (folder / "robustness.json").write_text(json.dumps(card))
    assert model_card_sets(str(folder), (0.5, 0.625), 4) == {
        "model card's greedy elimination, 4 skipped": path[3]}
    assert model_card_sets(str(folder), (0.5, 0.625), 3) == {}                     # a card of another shape
    assert model_card_sets(tiny, (0.5, 0.625), 4) == {}                            # no card
    res = run_search(str(folder), SearchConfig(sampler="random", ratio_bucket=(0.5, 0.625), **FAST), trials=3,
                     storage=db(tmp_path), **QUIET)
    starts = [t.user_attrs.get("warm_start") for t in res.study.trials]
    assert starts[:2] == ["every other layer", "model card's greedy elimination, 4 skipped"]
    assert skip_from_params(res.study.trials[1].params, 4) == path[3]

# -- export and read-back -----------------------------------------------------------------------
def test_export_and_best_skip_set(tiny, tmp_path):
    storage = db(tmp_path)
    run_search(tiny, SearchConfig(sampler="random", **FAST), trials=10, storage=storage, **QUIET)
    run_search(tiny, SearchConfig(sampler="random", ratio_bucket=(0.75, 0.875), **FAST), trials=6, storage=storage,
               **QUIET)
    out = export_results(tiny, storage=storage, out_dir=tmp_path / "search" / "tiny4")
    best = json.loads((out / "best.json").read_text())
    rows = json.loads((out / "trials.json").read_text())
    assert (out / "trials.csv").read_text().count("\n") == len(rows) + 1
    assert len(best["studies"]) == 2 and best["n_trials"] == len(rows)
    assert best["overall"]["value_ms_per_token"] == min(r["value_ms_per_token"] for r in rows)
    overall = best_skip_set(tiny, search_dir=tmp_path / "search")
    assert overall == SkipSet.from_dict(best["overall"]["skip"])
    for b in best["buckets"]:
        if b["best"]:
            mid = (b["lo"] + b["hi"]) / 2
            got = best_skip_set(tiny, ratio=mid, search_dir=tmp_path / "search")
            assert b["lo"] <= got.ratio(4) < b["hi"] or got.ratio(4) == 1.0
            in_bucket = [r["value_ms_per_token"] for r in rows
                         if b["lo"] <= r["ratio"] < b["hi"] or (b["hi"] == 1 and r["ratio"] == 1)]
            assert b["best"]["value_ms_per_token"] == min(in_bucket)
    empty = [b for b in best["buckets"] if not b["best"]]
    if empty:
        with pytest.raises(LookupError, match="python -m labkit.search"):
            best_skip_set(tiny, ratio=(empty[0]["lo"] + empty[0]["hi"]) / 2, search_dir=tmp_path / "search")
    with pytest.raises(FileNotFoundError, match="python -m labkit.search"):
        best_skip_set("plain", search_dir=tmp_path / "nothing-here")
    with pytest.raises(ValueError):
        best_skip_set(tiny, ratio=1.5, search_dir=tmp_path / "search")


# -- persistence: kill -9, resume, two workers --------------------------------------------------
def test_resume_after_kill_9(tiny, tmp_path):
    storage, name = db(tmp_path), "killed"
    proc = worker(tiny, storage, name, trials=100_000)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if len(complete(storage, name)) >= 2:
                    break
            except KeyError:                                      # study not created yet
                pass
            assert time.monotonic() < deadline, "worker made no progress"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    before = {t.number: (t.value, t.params) for t in complete(storage, name)}
    assert len(before) >= 2
    res = run_search(tiny, SearchConfig(sampler="random", study_name=name, n_prompts=1, n_tokens=4), trials=3,
                     storage=storage, progress=False)                    # reuses the cost model the study stored
    after = {t.number: (t.value, t.params) for t in complete(storage, name)}
    assert len(after) == len(before) + 3 and res.n_complete == len(after)
    assert all(after[n] == v for n, v in before.items())               # nothing completed was lost or changed


def test_two_workers_share_one_study(tiny, tmp_path):
    storage, name = db(tmp_path), "shared"
    procs = [worker(tiny, storage, name, trials=4, seed=seed) for seed in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    if [p.returncode for p in procs] != [0, 0]:
        pytest.fail("a worker failed:\n"
                    + "\n=====\n".join(f"exit {p.returncode}:\n{o}" for p, o in zip(procs, outputs)))
    trials = complete(storage, name)
    assert len(trials) == 8
    workers = [t.user_attrs["eval"]["worker"] for t in trials]
    assert sorted(workers.count(w) for w in set(workers)) == [4, 4]      # both really worked on the one study
    assert sorted(t.user_attrs.get("warm_start", "") for t in trials if t.user_attrs.get("warm_start")) == sorted(
        warm_start_sets(4))                                             # enqueued once, not once per worker


# -- bad input ---------------------------------------------------------------------------------------
def test_bad_input_errors(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    storage = db(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_search(str(tmp_path / "no-such-model"), trials=1, storage=storage)
    with pytest.raises(OSError, match="could not load model"):
        run_search("no-such-model-anywhere", trials=1, storage=storage)
    with pytest.raises(ValueError, match="trials must be an integer >= 1"):
        run_search(tiny, trials=0, storage=storage)
    with pytest.raises(TypeError, match="trials"):
        run_search(tiny, trials="3", storage=storage)
    with pytest.raises(TypeError, match="config must be a SearchConfig"):
        run_search(tiny, {"objective": "modelled"}, trials=1, storage=storage)
    with pytest.raises(ValueError, match="timeout"):
        run_search(tiny, trials=1, storage=storage, timeout=0)
    with pytest.raises(ValueError, match="no skip set of a 4-layer model"):
        run_search(tiny, SearchConfig(ratio_bucket=(0.01, 0.02)), trials=1, storage=storage)
    for url in ("nosuchdialect://nowhere/x", f"sqlite:///{tmp_path}/missing-dir/x.db",
                f"journal:{tmp_path}/missing/x.log", "results.txt"):
        with pytest.raises(ValueError, match="cannot open Optuna storage"):
            run_search(tiny, trials=1, storage=url)
    with pytest.raises(SystemExit) as exit_:                       # a usage error: argparse's status 2
        main(["--model", tiny, "--trials", "0", "--storage", storage, "--no-progress"])
    assert exit_.value.code == 2


def test_same_study_name_with_other_model_space_or_objective(tiny, tiny3, tmp_path):
    storage = db(tmp_path)
    run_search(tiny, SearchConfig(sampler="random", study_name="s", **FAST), trials=2, storage=storage, **QUIET)
    n = len(complete(storage, "s"))
    with pytest.raises(ValueError, match="model.*search space|search space"):
        run_search(tiny3, SearchConfig(sampler="random", study_name="s", **FAST), trials=2, storage=storage, **QUIET)
    with pytest.raises(ValueError, match="objective"):
        run_search(tiny, SearchConfig(objective="measured", study_name="s", n_prompts=1), trials=2, storage=storage,
                   progress=False)
    with pytest.raises(ValueError, match="ratio bucket"):
        run_search(tiny, SearchConfig(study_name="s", ratio_bucket=(0.5, 0.75), **FAST), trials=2, storage=storage,
                   **QUIET)
    with pytest.raises(ValueError, match="objective settings"):
        run_search(tiny, SearchConfig(sampler="random", study_name="s", n_prompts=2, n_tokens=6), trials=2,
                   storage=storage, **QUIET)
    assert len(complete(storage, "s")) == n                              # untouched
    again = run_search(tiny, SearchConfig(sampler="random", study_name="s", **FAST), trials=2, storage=storage,
                       **QUIET)                                          # resumes
    assert again.n_complete == n + 2 and not again.extra["created"]


def test_journal_storage(tiny, tmp_path):
    config = SearchConfig(sampler="random", **FAST)
    res = run_search(tiny, config, trials=3, storage=f"journal:{tmp_path / 'search.log'}", **QUIET)
    assert res.n_complete == 3
    res = run_search(tiny, config, trials=2, storage=str(tmp_path / "search.log"), **QUIET)
    assert res.n_complete == 5


# -- sampler comparison, rank agreement, figures -------------------------------------------------
def test_compare_rank_and_figures(tiny, tmp_path):
    from labkit.search import compare_samplers, rank_agreement
    from labkit.viz.search import (
        best_so_far_figure,
        optimization_history,
        param_importances,
        rank_scatter,
        skip_mask_heatmap,
    )

    cmp = compare_samplers(tiny, SearchConfig(**FAST), seeds=(0, 1), trials=5, **QUIET)
    for sampler in ("gp", "tpe", "random"):
        assert len(cmp["curves"][sampler]) == 2
        for curve in cmp["curves"][sampler]:
            assert len(curve) == 5 and all(b <= a for a, b in zip(curve, curve[1:]))     # best so far
    summary = cmp["summary"]
    assert summary["best_any_ms_per_token"] == min(min(v) for v in cmp["final"].values())
    assert isinstance(summary["target_gp_within_5pct"], bool) and "target_gp_median_beats_random" in summary

    rank = rank_agreement(tiny, n_sets=4, modelled_settings={"n_prompts": 1, "n_tokens": 6},
                          measured_settings={"n_prompts": 1, "max_new_tokens": 6}, progress=False, cost_model=CM)
    assert rank["n_sets"] == 4 and -1 <= rank["spearman_rho"] <= 1 or rank["spearman_rho"] != rank["spearman_rho"]

    study = run_search(tiny, SearchConfig(sampler="random", **FAST), trials=4, storage=db(tmp_path), **QUIET).study
    figures = [optimization_history(study, baseline_ms=1.0), param_importances(study),
               skip_mask_heatmap(SkipSet(attention=[1]), 4),
               skip_mask_heatmap({"a": SkipSet(), "b": SkipSet.all(4)}, 4),
               best_so_far_figure(cmp["curves"], baseline_ms=1.0), rank_scatter(rank)]
    for fig in figures:
        assert fig.layout.title.text and fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
        if len(fig.data) > 1:
            assert fig.layout.showlegend is not False


def test_check_names_the_missing_study(tmp_path):
    from labkit.search import check_modelled_against_measured

    with pytest.raises(LookupError, match=r"default-modelled.*python -m labkit.search --model default"):
        check_modelled_against_measured("default", storage=str(tmp_path / "empty.db"))


def test_storage_file_names_the_local_file_a_storage_would_create(tmp_path):
    from labkit.search.storage import DEFAULT_STORAGE, storage_file

    assert storage_file(None) == Path(DEFAULT_STORAGE.removeprefix("sqlite:///"))
    assert storage_file("x.db") == Path("x.db") and storage_file(f"sqlite:///{tmp_path}/s.db") == tmp_path / "s.db"
    assert storage_file("journal:runs/a.log") == Path("runs/a.log") == storage_file("runs/a.log")
    assert storage_file("postgresql://u@h/db") is None and storage_file("sqlite:///:memory:") is None
