"""labkit.search.inputs: what a search is given: the model resolved once (SearchModel), on the device and in the
precision asked for, and the study's settings (SearchConfig)."""
import dataclasses
from pathlib import Path

import pytest
import torch

import labkit.artifacts.models as models
from labkit.artifacts.models import fingerprint
from labkit.measure.costs.costmodel import CostModel
from labkit.search import SearchConfig, SearchModel, run_search
from labkit.search.objectives import DEFAULT_SETTINGS
from labkit.search.storage import LEGACY_PRECISION

from tiny_models import save_tiny_model_folder

CM = CostModel(n_layers=4, fixed_ms=0.3, attention_ms=[0.1] * 4, mlp_ms=[0.08] * 4, layer_ms=[0.05] * 4,
               verify_ms=[1.25 + 0.01 * k for k in range(13)], full_step_ms=1.22)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(save_tiny_model_folder(tmp_path_factory.mktemp("models") / "tiny4", n_layers=4))


# -- SearchConfig ---------------------------------------------------------------------------------
def test_search_config_fills_in_the_objectives_defaults():
    config = SearchConfig()
    assert (config.objective, config.sampler, config.seed, config.warm_start) == ("modelled", "gp", 0, True)
    assert config.settings == DEFAULT_SETTINGS["modelled"] and config.space == "mask"
    priced = SearchConfig(objective="priced", n_prompts=1, sources=["stdlib"], n_tokens=99, ratio_bucket=[0, 0.5])
    assert priced.settings == {**DEFAULT_SETTINGS["priced"], "n_prompts": 1, "sources": ["stdlib"]}  # n_tokens unused
    assert priced.space == "config" and priced.ratio_bucket == (0.0, 0.5) and priced.sources == ("stdlib",)
    assert hash(priced) == hash(SearchConfig(objective="priced", n_prompts=1, sources=("stdlib",), n_tokens=99,
                                             ratio_bucket=(0.0, 0.5)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.objective = "priced"


@pytest.mark.parametrize("field, value, error, message", [
    ("objective", "vibes", ValueError, "objective must be one of 'modelled', 'measured', 'priced'"),
    ("sampler", "cmaes", ValueError, "sampler must be one of 'gp', 'tpe', 'random'"),
    ("seed", -1, ValueError, "seed must be an integer >= 0"),
    ("seed", 1.0, TypeError, "seed must be an integer"),
    ("ratio_bucket", (0.6, 0.4), ValueError, "ratio_bucket must satisfy"),
    ("study_name", "", ValueError, "study_name must be a non-empty string"),
    ("warm_start", "yes", TypeError, "warm_start must be True or False"),
    ("n_prompts", 0, ValueError, "n_prompts must be an integer >= 1"),
    ("prompt_seed", "0", TypeError, "prompt_seed must be an integer"),
])
def test_search_config_names_the_bad_field(field, value, error, message):
    with pytest.raises(error, match=message):
        SearchConfig(**{field: value})


def test_search_config_checks_the_objectives_own_settings():
    with pytest.raises(ValueError, match="policy must be 'adaptive' or 'fixed:K'"):
        SearchConfig(objective="measured", policy="sometimes")
    with pytest.raises(ValueError, match="sources must be among"):
        SearchConfig(objective="priced", sources=["nowhere"])
    with pytest.raises(TypeError, match="sources must be a sequence"):
        SearchConfig(objective="priced", sources="stdlib")


# -- SearchModel --------------------------------------------------------------------------------
def test_search_model_carries_the_identity(tiny):
    subject = SearchModel.resolve(tiny)
    identity = subject.identity
    assert identity.name == tiny and identity.id == str(Path(tiny).resolve()) and identity.key == "tiny4"
    assert identity.folder == Path(tiny) and identity.fingerprint == fingerprint(tiny)
    assert subject.n_layers == 4 and subject.cost_model is None
    assert SearchModel.resolve(subject) is subject                        # already resolved: as is
    priced = SearchModel.resolve(subject, cost_model={None: CM})
    assert priced.model is subject.model and priced.given_cost_model("priced") == {None: CM}
    assert priced.given_cost_model("modelled") is CM and priced.given_cost_model("measured") is None
    with pytest.raises(TypeError, match="a priced search needs"):
        SearchModel.resolve(subject, cost_model=CM).given_cost_model("priced")
    with pytest.raises(TypeError, match="cost_model must be a CostModel"):
        SearchModel.resolve(subject, cost_model=[CM])
    with pytest.raises(ValueError, match="loaded: model is already a SearchModel"):
        SearchModel.resolve(subject, loaded=(subject.model, subject.tokenizer))
    with pytest.raises(TypeError, match="loaded must be a"):
        SearchModel.resolve(tiny, loaded=subject.model)


def test_a_search_resolves_its_model_once(tiny, tmp_path, monkeypatch):
    """One identify (one hash of the weights) and one load per run_search; none for a SearchModel."""
    calls = {"hash": 0, "load": 0}
    real_hash, real_load = models._weights_hash, models.load_model

    def counted_hash(*args):
        calls["hash"] += 1
        return real_hash(*args)

    def counted_load(*args, **kwargs):
        calls["load"] += 1
        return real_load(*args, **kwargs)

    monkeypatch.setattr(models, "_weights_hash", counted_hash)
    monkeypatch.setattr("labkit.search.inputs.load_model", counted_load)
    config = SearchConfig(sampler="random", n_prompts=1, n_tokens=4, ratio_bucket=(0.5, 0.625))
    run_search(tiny, config, trials=2, storage=":memory:", progress=False, cost_model=CM)
    assert calls == {"hash": 1, "load": 1}
    subject = SearchModel.resolve(tiny, cost_model=CM)
    calls.update(hash=0, load=0)
    res = run_search(subject, config, trials=2, storage=":memory:", progress=False)
    assert calls == {"hash": 0, "load": 0} and res.study.user_attrs["model_fingerprint"] == subject.identity.fingerprint


def test_a_search_model_is_loaded_on_the_device_in_the_dtype_asked_for(tiny):
    subject = SearchModel.resolve(tiny, dtype="bf16", device="cpu")
    assert next(subject.model.parameters()).dtype == torch.bfloat16
    assert subject.precision == {"dtype": "bf16", "device": "cpu"}
    assert SearchModel.resolve(subject, dtype="bf16") is subject                 # checked, and it matches
    with pytest.raises(ValueError, match="dtype='fp16': the model given is in bf16"):
        SearchModel.resolve(subject, dtype="fp16")
    with pytest.raises(ValueError, match="dtype='fp32': the model given is in bf16"):
        SearchModel.resolve(tiny, loaded=(subject.model, subject.tokenizer), dtype="fp32")
    with pytest.raises(ValueError, match="dtype must be one of"):
        SearchModel.resolve(tiny, dtype="int4")
    assert SearchModel.resolve(tiny).precision == LEGACY_PRECISION               # the default: fp32 on the CPU
