"""Checks on the search itself: GP vs TPE vs random search at equal trials, how well the cheap ``modelled``
objective ranks skip sets against the ``measured`` one (Spearman), and the wall clock of each objective's
best set on prompts neither search saw."""
from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import optuna
from scipy.stats import spearmanr
from tqdm.auto import tqdm

from ..artifacts.prompts import benchmark_prompts
from ..core.checks import check_choice, check_int
from ..core.skip import SkipSet
from .inputs import SearchConfig, SearchModel
from .objectives import MeasuredObjective, build_objective, objective_settings
from .samplers import SAMPLERS, make_sampler, quiet_optuna
from .space import (
    config_from_params,
    param_names,
    params_from_config,
    params_from_skip,
    skip_from_params,
    stratified_sets,
    suggest_config,
    warm_start_configs,
    warm_start_sets,
)
from .storage import LEGACY_PRECISION, default_study_name, feasible_trials, open_storage

__all__ = ["compare_samplers", "rank_agreement", "check_modelled_against_measured"]


def _best_so_far(values: Iterable[float]) -> list[float]:
    out, best = [], math.inf
    for v in values:
        best = min(best, v)
        out.append(best)
    return out


@dataclass(frozen=True)
class _Bench:
    """What every study of a sampler comparison shares: the function minimised, the warm-start parameters by
    label, how a trial's parameters read back as a set (or configuration), the trials per study and whether the
    objective is deterministic (the GP then assumes no noise)."""

    objective_fn: Callable
    starts: dict
    decode: Callable
    trials: int
    deterministic: bool


def _bench(evaluator, n_layers: int, trials: int, warm_start: bool) -> _Bench:
    """The shared :class:`_Bench` of ``evaluator`` (its ``space``: "mask" or "config")."""
    names, whole = param_names(n_layers), evaluator.space == "config"

    def objective_fn(trial) -> float:
        if whole:
            return evaluator.evaluate(suggest_config(trial, n_layers))["value"]
        return evaluator.evaluate(SkipSet.from_mask([bool(trial.suggest_int(n, 0, 1)) for n in names]))["value"]

    starts = {}
    if warm_start:
        starts = ({label: params_from_config(c, n_layers) for label, c in warm_start_configs(n_layers).items()}
                  if whole else
                  {label: params_from_skip(skip, n_layers) for label, skip in warm_start_sets(n_layers).items()})
    decode = config_from_params if whole else skip_from_params
    return _Bench(objective_fn, starts, lambda params: decode(params, n_layers), trials, evaluator.name != "measured")


def _one_study(bench: _Bench, sampler: str, seed: int, bar) -> tuple[list[float], float, dict]:
    """One in-memory study: (best-so-far curve, seconds, best set or, in the config space, configuration)."""
    study = optuna.create_study(direction="minimize", sampler=make_sampler(sampler, seed, bench.deterministic))
    for label, params in bench.starts.items():
        study.enqueue_trial(params, user_attrs={"warm_start": label})
    t0 = time.perf_counter()
    study.optimize(bench.objective_fn, n_trials=bench.trials, gc_after_trial=False,
                   callbacks=[lambda _s, _t: bar.update(1)] if bar is not None else [])
    curve = _best_so_far([t.value for t in study.trials])
    if bar is not None:
        bar.set_postfix_str(f"{sampler} seed {seed}: best {curve[-1]:.3f} ms/token")
    return curve, time.perf_counter() - t0, bench.decode(study.best_trial.params).to_dict()


def _sampler_summary(curves: dict, seconds: dict, trials: int, baseline_ms: float) -> dict:
    """Median final value per sampler, trials to come within 5 % of the best any method found, and the targets."""
    final = {s: [c[-1] for c in runs] for s, runs in curves.items()}
    best_any = min(min(v) for v in final.values())
    summary = {"best_any_ms_per_token": best_any, "baseline_ms_per_token": baseline_ms}
    for s, runs in curves.items():
        med_curve = [statistics.median(c[i] for c in runs) for i in range(trials)]
        within = next((i + 1 for i, v in enumerate(med_curve) if v <= 1.05 * best_any), None)
        summary[s] = {"median_final": statistics.median(final[s]), "finals": final[s],
                      "median_trials_to_within_5pct": within, "median_seconds": statistics.median(seconds[s])}
    if "gp" in curves:
        summary["target_gp_within_5pct"] = summary["gp"]["median_final"] <= 1.05 * best_any
    if "gp" in curves and "random" in curves:
        summary["target_gp_median_beats_random"] = summary["gp"]["median_final"] < summary["random"]["median_final"]
    return summary


def compare_samplers(model="default", config: SearchConfig | None = None, *, samplers: Sequence[str] = SAMPLERS,
                     seeds: Sequence[int] = (0, 1, 2), trials: int = 100, progress: bool = True,
                     cost_model=None, device=None, dtype=None) -> dict:
    """Every sampler at equal ``trials`` for every seed, on one shared objective (in-memory studies).

    ``config``: the objective, its settings and ``warm_start`` (its sampler, seed, bucket and study name are not
    used: ``samplers`` and ``seeds`` are). ``cost_model``, ``device``, ``dtype``: as
    :func:`~labkit.search.run.run_search`'s (cost model default: measured now). Returns ``{"curves": {sampler:
    [[best-so-far ms/token per trial] per seed]}, "final": ..., "summary": ...}``. The summary checks the README
    targets: GP's median final value within 5 % of the best value any method found, and GP's median final value
    below random search's.
    """
    trials = check_int("trials", trials, 1)
    config = SearchConfig() if config is None else config
    for s in samplers:
        check_choice("samplers", s, SAMPLERS)
    if not seeds:
        raise ValueError("seeds: give at least one seed")
    t_start = time.perf_counter()
    subject = SearchModel.resolve(model, cost_model=cost_model, device=device, dtype=dtype)
    settings = config.settings
    evaluator = build_objective(config.objective, subject.model, subject.tokenizer, settings,
                                subject.cost_model_for(config.objective))
    bench = _bench(evaluator, subject.n_layers, trials, config.warm_start)
    bar = tqdm(total=len(samplers) * len(seeds) * trials, desc="compare samplers", unit="trial",
               dynamic_ncols=True) if progress else None
    with quiet_optuna():
        runs = {s: [_one_study(bench, s, seed, bar) for seed in seeds] for s in samplers}
    if bar is not None:
        bar.close()
    curves = {s: [r[0] for r in runs[s]] for s in samplers}
    seconds = {s: [r[1] for r in runs[s]] for s in samplers}
    return {"model": subject.identity.id, **subject.precision, "objective": config.objective, "trials": trials,
            "seeds": list(seeds),
            "settings": settings, "curves": curves, "final": {s: [c[-1] for c in curves[s]] for s in samplers},
            "best_sets": {s: [r[2] for r in runs[s]] for s in samplers}, "seconds": seconds,
            "summary": _sampler_summary(curves, seconds, trials, evaluator.baseline_ms),
            "total_seconds": time.perf_counter() - t_start}


def rank_agreement(model="default", *, n_sets: int = 16, seed: int = 0, skips: Sequence[SkipSet] | None = None,
                   modelled_settings: dict | None = None, measured_settings: dict | None = None, cost_model=None,
                   progress: bool = True, device=None, dtype=None) -> dict:
    """Spearman rank correlation between the modelled and the measured objective over skip sets of ``model`` (a
    name, a folder or a :class:`~labkit.search.inputs.SearchModel`; ``device``, ``dtype``: as
    :func:`~labkit.search.run.run_search`'s).

    Sets: ``skips`` or ``n_sets`` random sets with skip ratios spread over 0..0.75. Measured runs
    go in a shuffled order so drift in machine load does not line up with the skip ratio.
    """
    subject = SearchModel.resolve(model, cost_model=cost_model, device=device, dtype=dtype)
    model_obj, tokenizer, L = subject.model, subject.tokenizer, subject.n_layers
    skips = list(skips) if skips is not None else stratified_sets(L, n_sets, seed)
    if len(skips) < 3:
        raise ValueError(f"skips: rank agreement needs at least 3 skip sets, got {len(skips)}")
    cost_model = subject.cost_model_for("modelled")
    modelled = build_objective("modelled", model_obj, tokenizer,
                               objective_settings("modelled", modelled_settings or {}), cost_model)
    measured = build_objective("measured", model_obj, tokenizer,
                               objective_settings("measured", measured_settings or {}))
    order = list(range(len(skips)))
    random.Random(seed + 1).shuffle(order)
    rows = [None] * len(skips)
    iterator = order
    if progress:
        iterator = tqdm(order, desc="modelled vs measured", unit="set")
    for i in iterator:
        m, r = modelled.evaluate(skips[i]), measured.evaluate(skips[i])
        rows[i] = {"skip": skips[i].to_dict(), "ratio": skips[i].ratio(L), "modelled_ms": m["value"],
                   "alpha": m["alpha"], "gamma": m["gamma"], "measured_ms": r["value"],
                   "acceptance_rate": r["acceptance_rate"]}
    rho, p = spearmanr([r["modelled_ms"] for r in rows], [r["measured_ms"] for r in rows])
    return {"spearman_rho": float(rho), "p_value": float(p), "n_sets": len(rows), **subject.precision, "rows": rows,
            "baseline_measured_ms": measured.baseline_ms, "full_step_ms": cost_model.full_step_ms}


def _best_set(store, subject: SearchModel, objective: str) -> SkipSet:
    """The best feasible set of ``subject``'s default study of ``objective``; LookupError saying how to run it."""
    identity = subject.identity
    name = default_study_name(identity, objective, None, subject.precision)
    try:
        study = optuna.load_study(study_name=name, storage=store)
    except KeyError:
        flags = "".join(f" --{k} {v}" for k, v in subject.precision.items() if v != LEGACY_PRECISION[k])
        raise LookupError(f"check needs both studies of {identity.id!r}; study {name!r} is missing from the "
                          f"storage: run `python -m labkit search --model {identity.name} --objective {objective} "
                          f"--trials {40 if objective == 'measured' else 100}{flags}` first") from None
    return skip_from_params(min(feasible_trials(study), key=lambda t: t.value).params, subject.n_layers)


def check_modelled_against_measured(model="default", *, storage=None, rounds: int = 5, n_prompts: int = 6,
                                    max_new_tokens: int = 64, device=None, dtype=None) -> dict:
    """Wall-clock of the best ``modelled`` set vs the best ``measured`` set of a model's two studies.

    Both sets run interleaved for ``rounds`` rounds on held-out prompts that neither search saw
    (the benchmark's prompts); the ratio of median ms/token says what the cheap objective gives up. ``device``,
    ``dtype``: as :func:`~labkit.search.run.run_search`'s (the studies of that precision are compared).
    """
    store = open_storage(storage)
    subject = SearchModel.resolve(model, device=device, dtype=dtype)
    best = {objective: _best_set(store, subject, objective) for objective in ("modelled", "measured")}
    texts = [p.text for p in benchmark_prompts(n_prompts)]
    measured = MeasuredObjective(subject.model, subject.tokenizer, texts, max_new_tokens=max_new_tokens)
    times = {objective: [] for objective in best}
    for _ in range(rounds):
        for objective, skip in best.items():
            times[objective].append(measured.evaluate(skip)["value"])
    med = {objective: statistics.median(v) for objective, v in times.items()}
    return {"model": subject.identity.id, **subject.precision, "best_sets": {k: str(v) for k, v in best.items()},
            "ms_per_token": med,
            "plain_ms_per_token": measured.baseline_ms, "rounds": rounds,
            "modelled_over_measured": med["modelled"] / med["measured"]}
