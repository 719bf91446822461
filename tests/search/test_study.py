"""labkit.search.study: opening one study: warm starts inside a ratio bucket (the best sets other studies found,
a model card's greedy path), an existing study checked against what is asked (model, space, objective, settings,
precision), a study from before precisions were recorded, cost models per precision."""
import json

import optuna
import pytest

from labkit import SkipSet
from labkit.search import (
    SearchConfig,
    SearchModel,
    export_results,
    open_storage,
    run_search,
    skip_from_params,
    warm_start_sets,
)
from labkit.search.storage import LEGACY_PRECISION, STUDY_MARKER, expected_attrs

from tiny_search import CM, FAST, QUIET, complete, db, tiny, tiny3  # noqa: F401 (fixtures)

SETTINGS = {"modelled": {"n_prompts": 1, "n_tokens": 4}, "measured": {"n_prompts": 1, "max_new_tokens": 6},
            "priced": {"n_prompts": 1, "max_new_tokens": 6, "sources": ["stdlib"]}}


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
