"""Running (or resuming) one study of the skip-set search: :func:`run_search`.

Opening the study (its attributes, cost model and warm starts) is :mod:`labkit.search.study`'s; here trials run.
In a bucket study, sets outside the bucket are *penalised, not evaluated*: value = baseline · (2 + blocks
outside), worse than any evaluated set and sloping towards the bucket, marked ``feasible: False`` and never
reported as a best set (why not pruning: ``docs/decisions.md``).
"""
from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass, field

import optuna
from tqdm.auto import tqdm

from ..artifacts.results import in_bucket
from ..core.checks import check_int, check_number
from ..core.draft_config import DraftConfig
from ..core.skip import SkipSet
from .inputs import SearchConfig, SearchModel
from .samplers import make_sampler, quiet_optuna
from .space import blocks_outside, check_bucket, config_from_params, param_names, skip_from_params, suggest_config
from .storage import feasible_trials, open_storage
from .study import StudyTarget, open_or_create, study_evaluator

__all__ = ["SearchResult", "run_search"]


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


def _objective_fn(evaluator, n_layers: int, bucket, baseline: float):
    """The function Optuna minimises: suggest a mask (or a whole draft configuration, for an objective whose
    ``space`` is "config"), penalise it outside the bucket, else evaluate it."""
    names, worker = param_names(n_layers), f"{socket.gethostname()}:{os.getpid()}"
    whole = getattr(evaluator, "space", "mask") == "config"

    def objective_fn(trial) -> float:
        trial.set_user_attr("worker", worker)          # a RUNNING trial names who runs it (a dead worker's: FAIL)
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


def _check_run(config, trials, timeout) -> SearchConfig:
    """``config`` (None: the defaults) after checking it and this call's ``trials`` and ``timeout``."""
    check_int("trials", trials, 1)
    if timeout is not None:
        check_number("timeout", timeout, 0.0, strict_low=True)
    if config is None:
        return SearchConfig()
    if not isinstance(config, SearchConfig):
        raise TypeError(f"config must be a SearchConfig, got {type(config).__name__}")
    return config


def _best(study, config: SearchConfig, n_layers: int) -> dict:
    """The fields of a :class:`SearchResult` that describe ``study``'s best feasible trial, and its trial count."""
    feasible = feasible_trials(study)
    top = min(feasible, key=lambda t: t.value) if feasible else None
    return {"best_skip": skip_from_params(top.params, n_layers) if top else None,
            "best_value": top.value if top else math.inf,
            "best_config": config_from_params(top.params, n_layers) if top and config.space == "config" else None,
            "n_complete": sum(1 for t in study.get_trials(deepcopy=False)
                              if t.state == optuna.trial.TrialState.COMPLETE)}


def run_search(model="default", config: SearchConfig | None = None, *, trials: int = 100, storage=None,
               cost_model=None, progress: bool = True, timeout: float | None = None, device=None,
               dtype=None) -> SearchResult:
    """Run (or resume) ``trials`` more trials of the study ``config`` describes (None: the defaults, a
    ``modelled`` GP search) of ``model``: a shipped name, a folder, or a :class:`~labkit.search.inputs.SearchModel`
    (loaded and identified once, e.g. for several studies).

    ``device``, ``dtype``: where and in what precision a named model is loaded (None: the CPU, fp32; e.g.
    ``"cuda"``, ``"bf16"``), checked against a SearchModel's. The study records the precision and the kind of
    device, and its default name carries them where they are not fp32 on the CPU (``tiny4-measured-bf16-cuda``).

    ``storage``: Optuna URL/path (default ``sqlite:///results/search.db``; ``postgresql+psycopg://user@host/db``
    for workers on several machines) or a storage :func:`~labkit.search.storage.open_storage` opened (e.g. with
    another heartbeat interval and grace period). ``cost_model``: for a new ``modelled``
    study a CostModel, for a ``priced`` one {draft weights: CostModel} (default: the newest the storage holds for
    this model, else measured now); a resumed study reuses its own. ``timeout``: seconds after which no trial
    starts. A resumed study's sampler is reseeded with ``seed + trials already run``, so it does not replay its start.
    """
    t_start = time.perf_counter()
    config = _check_run(config, trials, timeout)
    store = open_storage(storage)
    subject = SearchModel.resolve(model, cost_model=cost_model, device=device, dtype=dtype)
    L = subject.n_layers
    check_bucket(config.ratio_bucket, L)
    target = StudyTarget.of(store, subject, config)
    with quiet_optuna():
        study, created, cost_model = open_or_create(target, subject, config)
        evaluator = study_evaluator(target, study, subject, cost_model)
        n_before = sum(1 for t in study.get_trials(deepcopy=False) if t.state != optuna.trial.TrialState.WAITING)
        study.sampler = make_sampler(config.sampler, config.seed + n_before, config.objective != "measured")
        ran = _optimize(study, _objective_fn(evaluator, L, config.ratio_bucket, evaluator.baseline_ms), trials,
                        timeout, evaluator.baseline_ms, f"{target.name} ({config.sampler})" if progress else None)
    return SearchResult(study=study, baseline_ms=evaluator.baseline_ms, n_new=ran,
                        seconds=time.perf_counter() - t_start, **_best(study, config, L),
                        extra={"study_name": target.name, "created": created, "cost_model": cost_model})
