"""labkit.search.final: the wall-clock final check of a priced study's top configurations, the fastest shipped
(export and best_config), and FinalConfig's checks."""
import json

import pytest

from labkit import DraftConfig
from labkit.artifacts.results import best_config
from labkit.measure.costs.costmodel import CostModel
from labkit.search import SearchConfig, export_results, run_search
from labkit.search.final import FinalConfig, final_check, top_configs

from tiny_search import CM, tiny  # noqa: F401 (fixtures)

# the int8 draft weights' cost model of the 4-layer tiny model: cheaper blocks, the same verifies
CM8 = CostModel(n_layers=4, fixed_ms=0.2, attention_ms=[0.05] * 4, mlp_ms=[0.04] * 4, layer_ms=[0.05] * 4,
                verify_ms=CM.verify_ms, full_step_ms=1.22, draft_weights="int8")
FAST = {"n_prompts": 1, "max_new_tokens": 8, "sources": ["stdlib"]}         # a SearchConfig's settings
PRICES = {None: CM, "int8": CM8}


def test_priced_search_final_check_export_and_best_config(tiny, tmp_path):
    storage = f"sqlite:///{tmp_path / 'search.db'}"
    res = run_search(tiny, SearchConfig(objective="priced", sampler="random", **FAST), trials=8, storage=storage,
                     progress=False, cost_model=PRICES)
    assert isinstance(res.best_config, DraftConfig) and res.best_skip == res.best_config.skip
    starts = [t.user_attrs.get("warm_start") for t in res.study.trials[:4]]
    assert all(s and "draft weights, static 0.5" in s for s in starts)
    assert all("config" in t.user_attrs["eval"] for t in res.study.trials)
    assert res.study.user_attrs["search_space"]["space"] == "config"
    assert set(res.study.user_attrs["cost_models"]) == {"fp32", "int8"}
    calibration = res.study.user_attrs["priced_calibration"]
    assert set(calibration["overhead"]) == {"fp32", "int8"} and calibration["plain_overhead_ms"] >= 0
    # a bucket study of the same model prices in the same currency: its cost models and loop calibration
    bucket = run_search(tiny, SearchConfig(objective="priced", sampler="random", ratio_bucket=(0.5, 0.625), **FAST),
                        trials=2, storage=storage, progress=False)
    assert bucket.study.user_attrs["priced_calibration"] == calibration
    assert bucket.study.user_attrs["cost_models"] == res.study.user_attrs["cost_models"]
    top = top_configs(res.study, 4, 3)
    assert len({c for _, _, c in top}) == len(top) and [v for _, v, _ in top] == sorted(v for _, v, _ in top)
    record = final_check(tiny, study_name=res.extra["study_name"], storage=storage, progress=False,
                         config=FinalConfig(top_k=2, n_prompts=1, max_new_tokens=6, repeats=1))
    assert record["chosen_trial"] in [n for n, _, _ in top[:2]] and record["settings"]["sources"] == ["stdlib"]
    assert all(row["identical"] for row in record["rows"])
    out = export_results(tiny, storage=storage, out_dir=tmp_path / "search" / "tiny4")
    best = json.loads((out / "best.json").read_text())
    assert best["overall"]["chosen_by"] == "wall clock (final check)"
    assert best["overall"]["trial"] == record["chosen_trial"]
    assert best_config(tiny, search_dir=tmp_path / "search") == DraftConfig.from_dict(record["config"])
    run_search(tiny, SearchConfig(sampler="random", n_prompts=1, n_tokens=4, study_name="mask-only"), trials=1,
               storage=storage, progress=False, cost_model=CM)
    with pytest.raises(ValueError, match="needs a 'priced' study"):
        final_check(tiny, study_name="mask-only", storage=storage)


def test_final_config_checks_its_fields():
    assert FinalConfig(sources=["stdlib"]).sources == ("stdlib",)
    with pytest.raises(ValueError, match="top_k must be an integer >= 1"):
        FinalConfig(top_k=0)
    with pytest.raises(TypeError, match="repeats"):
        FinalConfig(repeats=1.5)
    with pytest.raises(TypeError, match="sources"):
        FinalConfig(sources="stdlib")
    with pytest.raises(TypeError, match="config must be a FinalConfig"):
        final_check("default", study_name="x", storage=":memory:", config={"top_k": 2})
