"""labkit.search.storage: storages that survive kill -9 and two workers on one study (SQLite, the journal file),
the local file a storage names, default study names and the attributes a study is recorded under.
tests/search/test_postgres_storage.py does the same on a PostgreSQL server."""
import json
import os
import signal
import time
from pathlib import Path

import pytest

from labkit.artifacts.models import identify
from labkit.artifacts.paths import SEARCH_DIR
from labkit.search import SearchConfig, SearchModel, run_search, warm_start_sets
from labkit.search.storage import default_study_name, expected_attrs

from tiny_search import FAST, QUIET, complete, db, tiny, worker  # noqa: F401 (fixtures)


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


def test_journal_storage(tiny, tmp_path):
    config = SearchConfig(sampler="random", **FAST)
    res = run_search(tiny, config, trials=3, storage=f"journal:{tmp_path / 'search.log'}", **QUIET)
    assert res.n_complete == 3
    res = run_search(tiny, config, trials=2, storage=str(tmp_path / "search.log"), **QUIET)
    assert res.n_complete == 5


def test_storage_file_names_the_local_file_a_storage_would_create(tmp_path):
    from labkit.search.storage import DEFAULT_STORAGE, storage_file

    assert storage_file(None) == Path(DEFAULT_STORAGE.removeprefix("sqlite:///"))
    assert storage_file("x.db") == Path("x.db") and storage_file(f"sqlite:///{tmp_path}/s.db") == tmp_path / "s.db"
    assert storage_file("journal:runs/a.log") == Path("runs/a.log") == storage_file("runs/a.log")
    assert storage_file("postgresql://u@h/db") is None and storage_file("sqlite:///:memory:") is None


def test_default_names_carry_the_precision_only_where_it_is_not_fp32_on_the_cpu(tiny):
    identity = SearchModel.resolve(tiny).identity
    assert default_study_name(identity, "measured", None) == "tiny4-measured"
    assert default_study_name(identity, "measured", None, {"dtype": "fp32", "device": "cpu"}) == "tiny4-measured"
    assert default_study_name(identity, "priced", (0.5, 0.625), {"dtype": "bf16", "device": "cuda"}) == \
        "tiny4-priced-bf16-cuda-ratio0.5-0.625"
    assert default_study_name(identity, "modelled", None, {"dtype": "fp32", "device": "mps"}) == "tiny4-modelled-mps"


@pytest.mark.parametrize("name", ["default", "plain"])
def test_committed_studies_match_the_identity_they_were_recorded_under(name):
    """A study is resumed only if its attributes match: the committed studies' model, weights and names still do."""
    best = json.loads((SEARCH_DIR / name / "best.json").read_text())
    identity = identify(name)
    assert (identity.id, identity.fingerprint) == (best["model"], best["model_fingerprint"])
    for study in best["studies"]:
        bucket = tuple(study["ratio_bucket"]) if study["ratio_bucket"] else None
        config = SearchConfig(objective=best["objective"], ratio_bucket=bucket, **{
            k: v for k, v in study["settings"].items() if k != "sources"}, sources=study["settings"].get("sources"))
        assert default_study_name(identity, config.objective, config.ratio_bucket) == study["name"]
        attrs = expected_attrs(identity, config.objective, best["n_layers"], config.ratio_bucket, config.settings,
                               config.space)
        assert attrs["settings"] == study["settings"] and attrs["ratio_bucket"] == study["ratio_bucket"]
    with pytest.raises(TypeError, match="identity must be a ModelIdentity"):
        default_study_name(name, "priced", None)
