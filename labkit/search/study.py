"""Opening one study of the search: the existing one (checked against what it must record) or a new one with its
attributes, the cost model(s) it prices with, and its warm starts; and the evaluator that scores its trials.

A new study is warm-started (``enqueue_trial``) with: nothing skipped, every other layer, every other
attention block; a ratio-bucket study only with those inside its bucket, plus the model card's
greedy-elimination sets of its sizes and the 3 best sets inside the bucket that other studies of the same
model, precision and objective in the storage evaluated. Its cost model is, in this order: a resumed study's own,
the one given, the newest the storage holds for this model in this precision on this kind of device (one currency
of milliseconds across its studies), else measured now.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import optuna

from ..artifacts.results import greedy_path_sets, in_bucket
from ..core.draft_config import DraftConfig
from ..core.skip import SkipSet
from ..measure.costs.analytic import UNIT
from ..measure.costs.costmodel import CostModel
from .inputs import SearchConfig, SearchModel
from .objectives import build_objective
from .space import params_from_config, params_from_skip, warm_start_configs, warm_start_sets
from .storage import (
    CALIBRATION_ATTR,
    STUDY_MARKER,
    check_attrs,
    default_study_name,
    expected_attrs,
    known_good_sets,
    open_study,
    stored_calibration,
    stored_cost_model,
    stored_cost_models,
)

__all__ = ["StudyTarget", "model_card_sets", "open_or_create", "study_evaluator"]


@dataclass(frozen=True)
class StudyTarget:
    """Where a study lives and what it must record: the storage, the study's name and its expected attributes
    (:func:`~labkit.search.storage.expected_attrs`)."""

    store: object
    name: str
    expected: dict

    @classmethod
    def of(cls, store, subject: SearchModel, config: SearchConfig) -> StudyTarget:
        """The study ``config`` asks for, of ``subject``, in ``store``."""
        name = config.study_name or default_study_name(subject.identity, config.objective, config.ratio_bucket,
                                                       subject.precision)
        expected = expected_attrs(subject.identity, config.objective, subject.n_layers, config.ratio_bucket,
                                  config.settings, config.space, subject.precision)
        return cls(store, name, expected)


def model_card_sets(model, bucket, n_layers: int) -> dict[str, SkipSet]:
    """Sets of the model card's greedy-elimination path (its ``robustness.json``) that fall in ``bucket``;
    ``model``: a shipped name or the model's folder.

    A short ratio-bucket study starts from them: greedy elimination already found good sets of every
    size, and 25 trials of a 2L-dimensional search rarely do better from scratch. None without a card.
    """
    return {f"model card's greedy elimination, {skip.n_skipped} skipped": skip
            for skip in greedy_path_sets(model, n_layers) if in_bucket(skip.ratio(n_layers), bucket)}


def _config_starts(folder, bucket, n_layers: int) -> dict[str, DraftConfig]:
    """A ``priced`` study's warm-start configurations (see the module docstring), inside ``bucket``."""
    starts = dict(warm_start_configs(n_layers))
    if bucket is not None:
        starts.update({f"{label}, int8 draft weights, static 0.5": DraftConfig(skip, "int8")
                       for label, skip in model_card_sets(folder, bucket, n_layers).items()})
    return {k: c for k, c in starts.items() if bucket is None or in_bucket(c.skip.ratio(n_layers), bucket)}


def _mask_starts(folder, bucket, n_layers: int) -> dict[str, SkipSet]:
    """A mask study's warm-start skip sets (see the module docstring), inside ``bucket``."""
    starts = {label: skip for label, skip in warm_start_sets(n_layers).items()
              if bucket is None or in_bucket(skip.ratio(n_layers), bucket)}
    if bucket is not None:
        starts.update({label: skip for label, skip in model_card_sets(folder, bucket, n_layers).items()
                       if skip not in starts.values()})
    return starts


def _warm_starts(target: StudyTarget, subject: SearchModel, config: SearchConfig) -> dict[str, dict]:
    """The parameters of a new study's first trials, by label (see the module docstring)."""
    folder, bucket, n_layers = subject.identity.folder, config.ratio_bucket, subject.n_layers
    if config.space == "config":
        configs = _config_starts(folder, bucket, n_layers)
        params = {label: params_from_config(c, n_layers) for label, c in configs.items()}
        skips = {c.skip for c in configs.values()}
    else:
        sets = _mask_starts(folder, bucket, n_layers)
        params = {label: params_from_skip(skip, n_layers) for label, skip in sets.items()}
        skips = set(sets.values())
    if bucket is not None:
        params.update(known_good_sets(target.store, target.expected, bucket, n_layers, exclude=skips))
    return params


def _cost_record(cost_model) -> tuple[str, dict] | None:
    """(attribute name, JSON) of a study's cost model(s): one CostModel, or {weights: CostModel} (priced)."""
    if cost_model is None:
        return None
    if isinstance(cost_model, dict):
        return "cost_models", {w or "fp32": cm.to_dict() for w, cm in cost_model.items()}
    return "cost_model", cost_model.to_dict()


def _create_study(target: StudyTarget, cost_model, starts: dict[str, dict]):
    """A new study with its attributes and warm starts; None when another worker created it first."""
    try:
        study = optuna.create_study(study_name=target.name, storage=target.store, direction="minimize")
    except optuna.exceptions.DuplicatedStudyError:
        return None
    for key, value in target.expected.items():
        study.set_user_attr(key, value)
    study.set_user_attr("unit", UNIT)
    record = _cost_record(cost_model)
    if record:
        study.set_user_attr(*record)
    # the marker goes last among the attributes (other workers wait for it) but before the warm-start
    # trials, so a worker that sees trials without a marker knows it is no labkit study
    study.set_user_attr(STUDY_MARKER, {"version": 1, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
    for label, params in starts.items():
        study.enqueue_trial(params, user_attrs={"warm_start": label})
    return study


def _found_cost_model(objective: str, attrs: dict | None, target: StudyTarget, subject: SearchModel):
    """The cost model(s) ``objective`` prices with, in the order of the module docstring (not yet checked)."""
    if objective == "modelled" and attrs and attrs.get("cost_model"):
        return CostModel.from_dict(attrs["cost_model"])
    if objective == "priced" and attrs and attrs.get("cost_models"):
        return {None if w == "fp32" else w: CostModel.from_dict(d) for w, d in attrs["cost_models"].items()}
    given = subject.given_cost_model(objective)
    if given is not None:
        return given
    stored = (stored_cost_model if objective == "modelled" else stored_cost_models)(target.store, target.expected)
    return stored or subject.measure_cost_model(objective)


def _study_cost_model(objective: str, attrs: dict | None, target: StudyTarget, subject: SearchModel):
    """The cost model(s) an objective prices with (None for ``measured``), checked against the model's depth."""
    if objective == "measured":
        return None
    found = _found_cost_model(objective, attrs, target, subject)
    for cm in (found.values() if isinstance(found, dict) else [found]):
        if cm.n_layers != subject.n_layers:
            raise ValueError(f"cost_model is for {cm.n_layers} layers, the model has {subject.n_layers}")
    return found


def open_or_create(target: StudyTarget, subject: SearchModel, config: SearchConfig):
    """(study, created, cost model(s)) of ``target``: the existing study (checked against its expected attributes),
    or a new one, or, if another worker created it meanwhile, theirs."""
    study, attrs = open_study(target.store, target.name, None)
    if study is not None:
        check_attrs(target.name, attrs, target.expected)
    cost_model = _study_cost_model(config.objective, attrs, target, subject)
    if study is not None:
        return study, False, cost_model
    starts = _warm_starts(target, subject, config) if config.warm_start else {}
    study = _create_study(target, cost_model, starts)
    if study is not None:
        return study, True, cost_model
    study, attrs = open_study(target.store, target.name, None)                 # another worker was faster
    check_attrs(target.name, attrs, target.expected)
    return study, False, _study_cost_model(config.objective, attrs, target, subject)


def study_evaluator(target: StudyTarget, study, subject: SearchModel, cost_model):
    """The study's evaluator; a ``priced`` one reuses the study's (else the model's newest) stored loop calibration,
    or calibrates now and stores it with the study."""
    objective, settings = target.expected["objective"], target.expected["settings"]
    if objective != "priced":
        return build_objective(objective, subject.model, subject.tokenizer, settings, cost_model)
    calibration = study.user_attrs.get(CALIBRATION_ATTR) or stored_calibration(target.store, target.expected)
    evaluator = build_objective(objective, subject.model, subject.tokenizer, settings, cost_model, calibration)
    if not study.user_attrs.get(CALIBRATION_ATTR):
        study.set_user_attr(CALIBRATION_ATTR, evaluator.calibration)
    return evaluator
