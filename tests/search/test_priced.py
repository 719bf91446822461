"""The priced objective (real decoding priced by cost models), whole draft configurations as the search space,
the wall-clock final check and the shipped best configuration."""
import json

import pytest
import torch

from labkit import DraftConfig, SkipSet
from labkit.artifacts.results import best_config
from labkit.measure.costs.costmodel import CostModel, measure_cost_model
from labkit.search import SearchConfig, export_results, run_search
from labkit.search.final import FinalConfig, final_check, top_configs
from labkit.search.objectives import PricedObjective, _decode_all
from labkit.search.space import (
    CONFIG_MAX_DRAFTS,
    CONFIG_THRESHOLDS,
    config_from_params,
    config_param_names,
    params_from_config,
    warm_start_configs,
)

from tiny_models import save_tiny_model_folder, tiny_model

# hand-made cost models of the 4-layer tiny model: int8 drafts cost less per block, verifies are the model's own
CM = CostModel(n_layers=4, fixed_ms=0.3, attention_ms=[0.1] * 4, mlp_ms=[0.08] * 4, layer_ms=[0.05] * 4,
               verify_ms=[1.25 + 0.01 * k for k in range(13)], full_step_ms=1.22)
CM8 = CostModel(n_layers=4, fixed_ms=0.2, attention_ms=[0.05] * 4, mlp_ms=[0.04] * 4, layer_ms=[0.05] * 4,
                verify_ms=CM.verify_ms, full_step_ms=1.22, draft_weights="int8")
FAST = {"n_prompts": 1, "max_new_tokens": 8, "sources": ["stdlib"]}         # a SearchConfig's settings
PRICES = {None: CM, "int8": CM8}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(save_tiny_model_folder(tmp_path_factory.mktemp("models") / "tiny4", n_layers=4))


def test_config_space_round_trip():
    names = config_param_names(4)
    assert names[:8] == ["attn_0", "attn_1", "attn_2", "attn_3", "mlp_0", "mlp_1", "mlp_2", "mlp_3"]
    assert names[8:] == ["int8", "adaptive", "threshold_i", "max_draft_i"]
    config = DraftConfig(SkipSet(attention=[1], mlp=[3]), "int8", "adaptive", CONFIG_THRESHOLDS[2],
                         CONFIG_MAX_DRAFTS[1])
    assert config_from_params(params_from_config(config, 4), 4) == config
    snapped = params_from_config(DraftConfig(threshold=0.33, max_draft=10), 4)            # nearest values
    assert CONFIG_THRESHOLDS[snapped["threshold_i"]] == 0.3 and CONFIG_MAX_DRAFTS[snapped["max_draft_i"]] == 8
    starts = warm_start_configs(4)
    assert len(starts) == 4 and {c.draft_weights for c in starts.values()} == {None, "int8"}


def test_priced_objective_is_deterministic_and_prices_every_step():
    model = tiny_model("llama", n_layers=4, seed=1)

    def tok(text, **_):
        return {"input_ids": torch.tensor([[1 + ord(c) % 90 for c in text]])}

    objective = PricedObjective(model, tok, ["def f(x):\n    return x", "class A:\n    pass"], {None: CM, "int8": CM8},
                                max_new_tokens=10)
    assert objective.baseline_ms >= CM.full_step_ms and set(objective.overhead) == {None, "int8"}
    config = DraftConfig(SkipSet(attention=[1, 3]), "int8", "static", 0.3, 4)
    first, second = objective.evaluate(config), objective.evaluate(config)
    assert first == second                                                # greedy tokens, fixed prices: no noise
    assert first["speedup"] == pytest.approx(objective.baseline_ms / first["value"])
    # the price by hand: every step's k drafts at the int8 model's cost of the set, its verify of k + 1 tokens, the
    # loop's calibrated per-token and per-step work
    traces = _decode_all(model, objective.inputs, config, None, 10)
    o = objective.overhead["int8"]
    by_hand = sum(s.n_drafted * (CM8.draft_ms(config.skip) + o["draft_ms"]) + CM.verify_ms[s.n_drafted] + o["step_ms"]
                  for t in traces for s in t.steps) / sum(t.n_emitted for t in traces)
    assert first["value"] == pytest.approx(by_hand)
    assert CM8.draft_ms(config.skip) < CM.draft_ms(config.skip)
    with pytest.raises(TypeError, match="DraftConfig"):
        objective.evaluate(SkipSet())


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


def test_cost_model_with_int8_draft_weights():
    model = tiny_model("llama", n_layers=2, seed=0)
    cm = measure_cost_model(model, context=16, n_sets=6, repeats=1, warmup=0, max_draft=3, draft_weights="int8")
    assert cm.draft_weights == "int8" and cm.full_step_ms > 0 and len(cm.verify_ms) == 4
    assert CostModel.from_dict(cm.to_dict()).draft_weights == "int8"
