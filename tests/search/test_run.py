"""labkit.search.run: run_search with both timing objectives (trials, warm starts, the study's attributes) and
its errors on bad input, before any work."""
from pathlib import Path

import pytest

from labkit.search import SearchConfig, param_names, run_search, skip_from_params

from tiny_search import CM, db, tiny  # noqa: F401 (fixtures)


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
