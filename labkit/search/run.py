"""Running (or resuming) one study of the skip-set search.

A new study is warm-started (``enqueue_trial``) with: nothing skipped, every other layer, every other
attention block; a ratio-bucket study only with those inside its bucket, plus the model card's
greedy-elimination sets of its sizes and the 3 best sets inside the bucket that other studies of the same
model and objective in the storage evaluated. In a bucket study, sets outside the bucket are *penalised, not
evaluated*: value = baseline · (2 + blocks outside), worse than any evaluated set and sloping towards the
bucket, marked ``feasible: False`` and never reported as a best set (why not pruning: ``docs/decisions.md``).
"""
from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass, field

import optuna
from tqdm.auto import tqdm

from ..artifacts.models import load_model, model_id
from ..artifacts.results import greedy_path_sets, in_bucket
from ..core.draft_config import DraftConfig
from ..core.skip import SkipSet
from ..measure.analytic import UNIT
from ..measure.costmodel import CostModel, measure_cost_model
from .objectives import OBJECTIVES, build_objective, objective_settings
from .samplers import SAMPLERS, make_sampler, quiet_optuna
from .space import (blocks_outside, check_bucket, config_from_params, param_names, params_from_config,
                    params_from_skip, skip_from_params, suggest_config, warm_start_configs, warm_start_sets)
from .storage import (STUDY_MARKER, check_attrs, default_study_name, expected_attrs, feasible_trials,
                      CALIBRATION_ATTR, known_good_sets, open_storage, open_study, stored_calibration,
                      stored_cost_model, stored_cost_models)

__all__ = ["SearchResult", "run_search", "check_trials", "model_card_sets"]


@dataclass
class SearchResult:
    study: object                     # optuna.Study
    best_skip: SkipSet | None         # best feasible set in the whole study
    best_value: float                 # its ms per generated token
    baseline_ms: float                # plain decoding ms per token (cost model's full step for 'modelled')
    n_complete: int                   # COMPLETE trials in the study now
    n_new: int                        # trials this call ran
    seconds: float
    extra: dict = field(default_factory=dict)
    best_config: DraftConfig | None = None   # the whole best draft configuration (a 'config'-space objective)

    @property
    def best_speedup(self) -> float:
        return self.baseline_ms / self.best_value if self.best_value else float("nan")


def check_trials(trials) -> int:
    if isinstance(trials, bool) or not isinstance(trials, int):
        raise TypeError(f"trials must be an integer >= 1, got {trials!r}")
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    return trials


def model_card_sets(model, bucket, n_layers: int) -> dict[str, SkipSet]:
    """Sets of the model card's greedy-elimination path (its ``robustness.json``) that fall in ``bucket``.

    A short ratio-bucket study starts from them: greedy elimination already found good sets of every
    size, and 25 trials of a 2L-dimensional search rarely do better from scratch. None without a card.
    """
    return {f"model card's greedy elimination, {skip.n_skipped} skipped": skip
            for skip in greedy_path_sets(model, n_layers) if in_bucket(skip.ratio(n_layers), bucket)}


def _warm_starts(model, store, expected: dict, bucket, n_layers: int, space: str) -> dict[str, dict]:
    """The parameters of a new study's first trials, by label (see the module docstring)."""
    if space == "config":
        starts = dict(warm_start_configs(n_layers))
        starts.update({f"{label}, int8 draft weights, static 0.5": DraftConfig(skip, "int8")
                       for label, skip in model_card_sets(model, bucket, n_layers).items()} if bucket else {})
        starts = {k: c for k, c in starts.items() if bucket is None or in_bucket(c.skip.ratio(n_layers), bucket)}
        params = {label: params_from_config(c, n_layers) for label, c in starts.items()}
        skips = {c.skip for c in starts.values()}
    else:
        starts = {label: skip for label, skip in warm_start_sets(n_layers).items()
                  if bucket is None or in_bucket(skip.ratio(n_layers), bucket)}
        if bucket is not None:
            starts.update({label: skip for label, skip in model_card_sets(model, bucket, n_layers).items()
                           if skip not in starts.values()})
        params = {label: params_from_skip(skip, n_layers) for label, skip in starts.items()}
        skips = set(starts.values())
    if bucket is not None:
        params.update(known_good_sets(store, expected, bucket, n_layers, exclude=skips))
    return params


def _cost_record(cost_model) -> tuple[str, dict] | None:
    """(attribute name, JSON) of a study's cost model(s): one CostModel, or {weights: CostModel} (priced)."""
    if cost_model is None:
        return None
    if isinstance(cost_model, dict):
        return "cost_models", {w or "fp32": cm.to_dict() for w, cm in cost_model.items()}
    return "cost_model", cost_model.to_dict()


def _create_study(store, study_name: str, expected: dict, cost_model, starts: dict[str, dict]):
    """A new study with its attributes and warm starts; None when another worker created it first."""
    try:
        study = optuna.create_study(study_name=study_name, storage=store, direction="minimize")
    except optuna.exceptions.DuplicatedStudyError:
        return None
    for key, value in expected.items():
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


def _cost_model_for(attrs: dict | None, given, store, expected: dict, model_obj, model) -> CostModel:
    """A resumed study's own cost model, else the given one, else the newest one the storage holds for this
    model (one currency of milliseconds across its studies), else measured now."""
    if attrs and attrs.get("cost_model"):
        return CostModel.from_dict(attrs["cost_model"])
    if given is not None:
        return given
    return stored_cost_model(store, expected) or measure_cost_model(model_obj, model_name=model_id(model))


def _cost_models_for(attrs: dict | None, given, store, expected: dict, model_obj, model) -> dict:
    """The ``priced`` objective's {draft weights: CostModel}, found in the same order as :func:`_cost_model_for`
    (measured now: the model's own weights and int8 draft weights, a few seconds each)."""
    if attrs and attrs.get("cost_models"):
        return {None if w == "fp32" else w: CostModel.from_dict(d) for w, d in attrs["cost_models"].items()}
    if given is not None:
        return given
    return stored_cost_models(store, expected) or {
        w: measure_cost_model(model_obj, model_name=model_id(model), draft_weights=w) for w in (None, "int8")}


def _study_cost_model(objective: str, attrs, given, store, expected: dict, model_obj, model, n_layers: int):
    """The cost model(s) an objective prices with (None for ``measured``), checked against the model's depth."""
    if objective == "measured":
        return given
    find = _cost_model_for if objective == "modelled" else _cost_models_for
    found = find(attrs, given, store, expected, model_obj, model)
    for cm in (found.values() if isinstance(found, dict) else [found]):
        if cm.n_layers != n_layers:
            raise ValueError(f"cost_model is for {cm.n_layers} layers, the model has {n_layers}")
    return found


def _open_or_create(store, study_name: str, expected: dict, objective: str, cost_model, model, model_obj,
                    warm_start: bool, bucket, n_layers: int):
    """(study, created, cost_model) for ``study_name``: the existing study (checked against ``expected``), or a
    new one, or, if another worker created it meanwhile, theirs."""
    study, attrs = open_study(store, study_name, None)
    if study is not None:
        check_attrs(study_name, attrs, expected)
    cost_model = _study_cost_model(objective, attrs, cost_model, store, expected, model_obj, model, n_layers)
    if study is not None:
        return study, False, cost_model
    space = expected["search_space"].get("space", "mask")
    starts = _warm_starts(model, store, expected, bucket, n_layers, space) if warm_start else {}
    study = _create_study(store, study_name, expected, cost_model, starts)
    if study is not None:
        return study, True, cost_model
    study, attrs = open_study(store, study_name, None)                 # another worker was faster
    check_attrs(study_name, attrs, expected)
    return study, False, _study_cost_model(objective, attrs, None, store, expected, model_obj, model, n_layers)


def _evaluator(objective: str, study, store, expected: dict, model_obj, tokenizer, settings: dict, cost_model):
    """The study's evaluator; a ``priced`` one reuses the study's (else the model's newest) stored loop calibration,
    or calibrates now and stores it with the study."""
    if objective != "priced":
        return build_objective(objective, model_obj, tokenizer, settings, cost_model)
    calibration = study.user_attrs.get(CALIBRATION_ATTR) or stored_calibration(store, expected)
    evaluator = build_objective(objective, model_obj, tokenizer, settings, cost_model, calibration)
    if not study.user_attrs.get(CALIBRATION_ATTR):
        study.set_user_attr(CALIBRATION_ATTR, evaluator.calibration)
    return evaluator


def _objective_fn(evaluator, n_layers: int, bucket, baseline: float):
    """The function Optuna minimises: suggest a mask (or a whole draft configuration, for an objective whose
    ``space`` is "config"), penalise it outside the bucket, else evaluate it."""
    names, worker = param_names(n_layers), f"{socket.gethostname()}:{os.getpid()}"
    whole = getattr(evaluator, "space", "mask") == "config"

    def objective_fn(trial) -> float:
        if whole:
            draft = suggest_config(trial, n_layers)
            skip = draft.skip
        else:
            draft = skip = SkipSet.from_mask([bool(trial.suggest_int(name, 0, 1)) for name in names])
        record = {"ratio": skip.ratio(n_layers), "n_skipped": skip.n_skipped, "feasible": True, "worker": worker}
        if whole:
            record["config"] = draft.to_dict()
        if bucket is not None and not in_bucket(record["ratio"], bucket):
            d = blocks_outside(skip.n_skipped, n_layers, bucket)
            record.update(feasible=False, blocks_outside=d)
            trial.set_user_attr("eval", record)
            return baseline * (2 + d)
        result = evaluator.evaluate(draft)
        value = result.pop("value")
        record.update({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.items()})
        trial.set_user_attr("eval", record)
        return value
    return objective_fn


def _optimize(study, objective_fn, trials: int, timeout, baseline: float, desc: str | None) -> int:
    """Run ``trials`` trials with a progress bar (``desc`` None: none) showing the best feasible value; returns
    how many ran."""
    best, ran = [min((t.value for t in feasible_trials(study)), default=math.inf)], [0]
    bar = None
    if desc is not None:
        bar = tqdm(total=trials, desc=desc, unit="trial", dynamic_ncols=True)

    def callback(_study, trial) -> None:
        ran[0] += 1
        if trial.state == optuna.trial.TrialState.COMPLETE and trial.user_attrs.get("eval", {}).get("feasible", True):
            best[0] = min(best[0], trial.value)
        if bar is not None:
            bar.update(1)
            if math.isfinite(best[0]):
                bar.set_postfix_str(f"best {best[0]:.3f} ms/token ({baseline / best[0]:.2f}x)")

    try:
        study.optimize(objective_fn, n_trials=trials, timeout=timeout, callbacks=[callback], gc_after_trial=False)
    finally:
        if bar is not None:
            bar.close()
    return ran[0]


def run_search(model="default", *, objective: str = "modelled", trials: int = 100, sampler: str = "gp", seed: int = 0,
               storage=None, study_name: str | None = None, ratio_bucket=None, n_prompts: int | None = None,
               n_tokens: int | None = None, max_new_tokens: int | None = None, policy: str | None = None,
               prompt_seed: int | None = None, cost_model=None, warm_start: bool = True, progress: bool = True,
               timeout: float | None = None, loaded: tuple | None = None, sources=None) -> SearchResult:
    """Run (or resume) ``trials`` more trials of the skip-set search of ``model`` (a shipped name or a folder).

    ``objective="priced"`` searches the whole draft configuration (blocks, draft weights, stop rule) on the first
    ``n_prompts`` prompts of each of ``sources``. ``storage``: Optuna URL/path (default
    ``sqlite:///results/search.db``). ``cost_model``: for a new ``modelled`` study a CostModel, for a ``priced``
    one {draft weights: CostModel} (default: the newest the storage holds for this model, else measured now); a
    resumed study reuses its own. ``loaded``: ``(model, tokenizer)`` already in memory (else loaded here).
    A resumed study's sampler is reseeded with ``seed + trials already run``, so it does not replay its start.
    """
    t_start = time.perf_counter()
    trials = check_trials(trials)
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
    bucket = check_bucket(ratio_bucket)
    settings = objective_settings(objective, {"n_prompts": n_prompts, "n_tokens": n_tokens, "policy": policy,
                                              "max_new_tokens": max_new_tokens, "prompt_seed": prompt_seed,
                                              "sources": sources})
    store = open_storage(storage)
    model_obj, tokenizer = loaded or load_model(model)
    L = int(model_obj.config.num_hidden_layers)
    check_bucket(bucket, L)
    study_name = study_name or default_study_name(model, objective, bucket)
    expected = expected_attrs(model, objective, L, bucket, settings, "config" if objective == "priced" else "mask")
    with quiet_optuna():
        study, created, cost_model = _open_or_create(store, study_name, expected, objective, cost_model, model,
                                                     model_obj, warm_start, bucket, L)
        evaluator = _evaluator(objective, study, store, expected, model_obj, tokenizer, settings, cost_model)
        n_before = sum(1 for t in study.get_trials(deepcopy=False) if t.state != optuna.trial.TrialState.WAITING)
        study.sampler = make_sampler(sampler, seed + n_before, deterministic=objective != "measured")
        ran = _optimize(study, _objective_fn(evaluator, L, bucket, evaluator.baseline_ms), trials, timeout,
                        evaluator.baseline_ms, f"{study_name} ({sampler})" if progress else None)
    feasible = feasible_trials(study)
    top = min(feasible, key=lambda t: t.value) if feasible else None
    return SearchResult(
        study=study, best_skip=skip_from_params(top.params, L) if top else None,
        best_value=top.value if top else math.inf, baseline_ms=evaluator.baseline_ms,
        n_complete=sum(1 for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE),
        n_new=ran, seconds=time.perf_counter() - t_start,
        extra={"study_name": study_name, "created": created, "cost_model": cost_model},
        best_config=config_from_params(top.params, L) if top and objective == "priced" else None,
    )
