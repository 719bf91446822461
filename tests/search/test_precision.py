"""A search on a device in a precision: the model loaded there, every objective run on it, the study recording the
precision and the kind of device (its default name too, where they are not fp32 on the CPU), and a study from
before precisions were recorded reopening as the fp32 CPU study it was."""
import json

import optuna
import pytest
import torch

from labkit.measure.costs.costmodel import CostModel
from labkit.search import SearchConfig, SearchModel, export_results, run_search
from labkit.search.__main__ import main
from labkit.search.storage import (
    LEGACY_PRECISION,
    STUDY_MARKER,
    default_study_name,
    expected_attrs,
    open_storage,
    recorded_precision,
)

from tiny_models import save_tiny_model_folder

CM = CostModel(n_layers=4, fixed_ms=0.3, attention_ms=[0.1] * 4, mlp_ms=[0.08] * 4, layer_ms=[0.05] * 4,
               verify_ms=[1.25 + 0.01 * k for k in range(13)], full_step_ms=1.22)
SETTINGS = {"modelled": {"n_prompts": 1, "n_tokens": 4}, "measured": {"n_prompts": 1, "max_new_tokens": 6},
            "priced": {"n_prompts": 1, "max_new_tokens": 6, "sources": ["stdlib"]}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return str(save_tiny_model_folder(tmp_path_factory.mktemp("models") / "tiny4", n_layers=4))


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


@pytest.mark.parametrize("objective", ["modelled", "measured", "priced"])
def test_every_objective_searches_a_bf16_model_within_a_time_budget(tiny, objective):
    config = SearchConfig(objective=objective, sampler="random", **SETTINGS[objective])
    res = run_search(tiny, config, trials=10 ** 6, timeout=1.0, storage=":memory:", progress=False, dtype="bf16")
    assert 1 <= res.n_new < 10 ** 6                                               # the time budget stopped it
    assert res.best_value > 0 and res.baseline_ms > 0
    assert recorded_precision(res.study.user_attrs) == {"dtype": "bf16", "device": "cpu"}
    assert res.extra["study_name"] == f"tiny4-{objective}-bf16"


def test_default_names_carry_the_precision_only_where_it_is_not_fp32_on_the_cpu(tiny):
    identity = SearchModel.resolve(tiny).identity
    assert default_study_name(identity, "measured", None) == "tiny4-measured"
    assert default_study_name(identity, "measured", None, {"dtype": "fp32", "device": "cpu"}) == "tiny4-measured"
    assert default_study_name(identity, "priced", (0.5, 0.625), {"dtype": "bf16", "device": "cuda"}) == \
        "tiny4-priced-bf16-cuda-ratio0.5-0.625"
    assert default_study_name(identity, "modelled", None, {"dtype": "fp32", "device": "mps"}) == "tiny4-modelled-mps"


def _old_study(storage, tiny, name: str) -> None:
    """A study as labkit wrote it before precisions were recorded: no dtype, no device."""
    subject = SearchModel.resolve(tiny)
    config = SearchConfig(sampler="random", **SETTINGS["modelled"])
    attrs = expected_attrs(subject.identity, config.objective, subject.n_layers, None, config.settings, config.space)
    study = optuna.create_study(study_name=name, storage=storage, direction="minimize")
    for key, value in attrs.items():
        if key not in LEGACY_PRECISION:
            study.set_user_attr(key, value)
    study.set_user_attr("cost_model", CM.to_dict())
    study.set_user_attr(STUDY_MARKER, {"version": 1, "created_at": "2026-01-01T00:00:00"})


def test_a_study_from_before_precisions_were_recorded_resumes_as_fp32_on_the_cpu(tiny, tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path / 'old.db'}")
    _old_study(storage, tiny, "old")
    config = SearchConfig(sampler="random", study_name="old", **SETTINGS["modelled"])
    res = run_search(tiny, config, trials=2, storage=storage, progress=False)
    assert res.n_complete == 2 and not res.extra["created"]
    assert "dtype" not in res.study.user_attrs                                   # left as it was
    with pytest.raises(ValueError, match=r"different precision \(precision: study has 'fp32', asked for 'bf16'\)"):
        run_search(tiny, config, trials=1, storage=storage, progress=False, dtype="bf16")


def test_studies_of_another_precision_share_no_cost_model_and_export_apart(tiny, tmp_path):
    storage = f"sqlite:///{tmp_path / 'both.db'}"
    base = SearchConfig(sampler="random", **SETTINGS["modelled"])
    fp32 = run_search(tiny, base, trials=2, storage=storage, progress=False, cost_model=CM)
    bf16 = run_search(tiny, base, trials=2, storage=storage, progress=False, dtype="bf16")
    assert fp32.extra["study_name"] != bf16.extra["study_name"]
    assert bf16.extra["cost_model"].measured_at and bf16.extra["cost_model"] != CM   # measured in bf16, not reused
    out = export_results(tiny, storage=storage, objective="modelled", out_dir=tmp_path / "bf16", dtype="bf16")
    studies = json.loads((out / "best.json").read_text())["studies"]
    assert [(s["name"], s["dtype"], s["device"]) for s in studies] == [("tiny4-modelled-bf16", "bf16", "cpu")]
    with pytest.raises(ValueError, match="no study of model .* in {'dtype': 'fp16'}"):
        export_results(tiny, storage=storage, objective="modelled", out_dir=tmp_path / "x", dtype="fp16")


def test_the_command_line_takes_device_and_dtype(tiny, tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 'cli.db'}"
    assert main(["--model", tiny, "--objective", "measured", "--trials", "2", "--sampler", "random", "--storage",
                 storage, "--prompts", "1", "--max-new-tokens", "6", "--no-progress", "--threads", "0",
                 "--device", "cpu", "--dtype", "bf16"]) == 0
    assert "study tiny4-measured-bf16: 2 new trials" in capsys.readouterr().out
    study = optuna.load_study(study_name="tiny4-measured-bf16", storage=open_storage(storage))
    assert recorded_precision(study.user_attrs) == {"dtype": "bf16", "device": "cpu"}
    with pytest.raises(SystemExit) as exit_:
        main(["--model", tiny, "--trials", "1", "--storage", storage, "--dtype", "int4", "--no-progress"])
    assert exit_.value.code == 2 and "argument --dtype: dtype must be one of" in capsys.readouterr().err
