"""Checks on the search itself: GP vs TPE vs random search at equal trials, how well the cheap ``modelled``
objective ranks skip sets against the ``measured`` one (Spearman), and the wall clock of each objective's
best set on prompts neither search saw."""
from __future__ import annotations

import math
import random
import statistics
import time
from typing import Iterable, Sequence

import optuna
from scipy.stats import spearmanr
from tqdm.auto import tqdm

from ..artifacts.models import load_model, model_id
from ..artifacts.prompts import benchmark_prompts
from ..core.skip import SkipSet
from ..measure.costmodel import measure_cost_model
from .objectives import OBJECTIVES, MeasuredObjective, build_objective, objective_settings
from .run import check_trials
from .samplers import SAMPLERS, make_sampler, quiet_optuna
from .space import (config_from_params, param_names, params_from_config, params_from_skip, skip_from_params,
                    stratified_sets, suggest_config, warm_start_configs, warm_start_sets)
from .storage import default_study_name, feasible_trials, open_storage

__all__ = ["compare_samplers", "rank_agreement", "check_modelled_against_measured"]


def _best_so_far(values: Iterable[float]) -> list[float]:
    out, best = [], math.inf
    for v in values:
        best = min(best, v)
        out.append(best)
    return out


def _one_study(sampler: str, seed: int, objective_fn, n_layers: int, trials: int, warm_start: bool,
               deterministic: bool, bar, space: str = "mask") -> tuple[list[float], float, dict]:
    """One in-memory study: (best-so-far curve, seconds, best set or, in the config space, configuration)."""
    study = optuna.create_study(direction="minimize", sampler=make_sampler(sampler, seed, deterministic))
    if warm_start:
        starts = ({label: params_from_config(c, n_layers) for label, c in warm_start_configs(n_layers).items()}
                  if space == "config" else
                  {label: params_from_skip(skip, n_layers) for label, skip in warm_start_sets(n_layers).items()})
        for label, params in starts.items():
            study.enqueue_trial(params, user_attrs={"warm_start": label})
    t0 = time.perf_counter()
    study.optimize(objective_fn, n_trials=trials, gc_after_trial=False,
                   callbacks=[lambda _s, _t: bar.update(1)] if bar is not None else [])
    curve = _best_so_far([t.value for t in study.trials])
    if bar is not None:
        bar.set_postfix_str(f"{sampler} seed {seed}: best {curve[-1]:.3f} ms/token")
    best = (config_from_params if space == "config" else skip_from_params)(study.best_trial.params, n_layers)
    return curve, time.perf_counter() - t0, best.to_dict()


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


def compare_samplers(model="default", *, objective: str = "modelled", samplers: Sequence[str] = SAMPLERS,
                     seeds: Sequence[int] = (0, 1, 2), trials: int = 100, warm_start: bool = True,
                     progress: bool = True, cost_model=None, **settings) -> dict:
    """Every sampler at equal ``trials`` for every seed, on one shared objective (in-memory studies).

    Returns ``{"curves": {sampler: [[best-so-far ms/token per trial] per seed]}, "final": ..., "summary": ...}``.
    The summary checks the README targets: GP's median final value within 5 % of the best value
    any method found, and GP's median final value below random search's.
    """
    trials = check_trials(trials)
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    for s in samplers:
        if s not in SAMPLERS:
            raise ValueError(f"unknown sampler {s!r}; choose one of {', '.join(SAMPLERS)}")
    if not seeds:
        raise ValueError("give at least one seed")
    t_start = time.perf_counter()
    model_obj, tokenizer = load_model(model)
    L = int(model_obj.config.num_hidden_layers)
    settings = objective_settings(objective, settings)
    if objective == "modelled" and cost_model is None:
        cost_model = measure_cost_model(model_obj, model_name=model_id(model))
    if objective == "priced" and cost_model is None:
        cost_model = {w: measure_cost_model(model_obj, model_name=model_id(model), draft_weights=w)
                      for w in (None, "int8")}
    evaluator = build_objective(objective, model_obj, tokenizer, settings, cost_model)
    names, space = param_names(L), evaluator.space

    def objective_fn(trial) -> float:
        if space == "config":
            return evaluator.evaluate(suggest_config(trial, L))["value"]
        return evaluator.evaluate(SkipSet.from_mask([bool(trial.suggest_int(n, 0, 1)) for n in names]))["value"]

    bar = tqdm(total=len(samplers) * len(seeds) * trials, desc="compare samplers", unit="trial",
               dynamic_ncols=True) if progress else None
    runs = {}
    with quiet_optuna():
        for s in samplers:
            runs[s] = [_one_study(s, seed, objective_fn, L, trials, warm_start, objective != "measured", bar, space)
                       for seed in seeds]
    if bar is not None:
        bar.close()
    curves = {s: [r[0] for r in runs[s]] for s in samplers}
    seconds = {s: [r[1] for r in runs[s]] for s in samplers}
    return {"model": model_id(model), "objective": objective, "trials": trials, "seeds": list(seeds),
            "settings": settings, "curves": curves, "final": {s: [c[-1] for c in curves[s]] for s in samplers},
            "best_sets": {s: [r[2] for r in runs[s]] for s in samplers}, "seconds": seconds,
            "summary": _sampler_summary(curves, seconds, trials, evaluator.baseline_ms),
            "total_seconds": time.perf_counter() - t_start}


def rank_agreement(model="default", *, n_sets: int = 16, seed: int = 0, skips: Sequence[SkipSet] | None = None,
                   modelled_settings: dict | None = None, measured_settings: dict | None = None, cost_model=None,
                   progress: bool = True) -> dict:
    """Spearman rank correlation between the modelled and the measured objective over skip sets.

    Sets: ``skips`` or ``n_sets`` random sets with skip ratios spread over 0..0.75. Measured runs
    go in a shuffled order so drift in machine load does not line up with the skip ratio.
    """
    model_obj, tokenizer = load_model(model)
    L = int(model_obj.config.num_hidden_layers)
    skips = list(skips) if skips is not None else stratified_sets(L, n_sets, seed)
    if len(skips) < 3:
        raise ValueError("rank agreement needs at least 3 skip sets")
    if cost_model is None:
        cost_model = measure_cost_model(model_obj, model_name=model_id(model))
    modelled = build_objective("modelled", model_obj, tokenizer, objective_settings("modelled", modelled_settings or {}),
                                cost_model)
    measured = build_objective("measured", model_obj, tokenizer, objective_settings("measured", measured_settings or {}))
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
    return {"spearman_rho": float(rho), "p_value": float(p), "n_sets": len(rows), "rows": rows,
            "baseline_measured_ms": measured.baseline_ms, "full_step_ms": cost_model.full_step_ms}


def check_modelled_against_measured(model="default", *, storage=None, rounds: int = 5, n_prompts: int = 6,
                                    max_new_tokens: int = 64) -> dict:
    """Wall-clock of the best ``modelled`` set vs the best ``measured`` set of a model's two studies.

    Both sets run interleaved for ``rounds`` rounds on held-out prompts that neither search saw
    (the benchmark's prompts); the ratio of median ms/token says what the cheap objective gives up.
    """
    store = open_storage(storage)
    model_obj, tokenizer = load_model(model)
    L = int(model_obj.config.num_hidden_layers)
    best = {}
    for objective in OBJECTIVES:
        name = default_study_name(model, objective, None)
        try:
            study = optuna.load_study(study_name=name, storage=store)
        except KeyError:
            raise LookupError(f"check needs both studies of {model_id(model)!r}; study {name!r} is missing from the "
                              f"storage: run `python -m labkit.search --model {model} --objective {objective} "
                              f"--trials {40 if objective == 'measured' else 100}` first") from None
        trial = min(feasible_trials(study), key=lambda t: t.value)
        best[objective] = skip_from_params(trial.params, L)
    texts = [p.text for p in benchmark_prompts(n_prompts)]
    measured = MeasuredObjective(model_obj, tokenizer, texts, max_new_tokens=max_new_tokens)
    times = {objective: [] for objective in best}
    for _ in range(rounds):
        for objective, skip in best.items():
            times[objective].append(measured.evaluate(skip)["value"])
    med = {objective: statistics.median(v) for objective, v in times.items()}
    return {"model": model_id(model), "best_sets": {k: str(v) for k, v in best.items()}, "ms_per_token": med,
            "plain_ms_per_token": measured.baseline_ms, "rounds": rounds,
            "modelled_over_measured": med["modelled"] / med["measured"]}
