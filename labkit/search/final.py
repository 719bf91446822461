"""The last word of a search goes to the wall clock: the top configurations by the search's objective, timed.

A search's objective is a model of decode speed (``priced``: real decoding priced by a cost model), so the
configurations it ranks first can sit within its modelling error of one another. :func:`final_check` takes the
``top_k`` distinct configurations of a study, times them interleaved with the plain loop on the *choosing* prompts
of every source (never the benchmark's held-out ones), ``repeats`` times, and picks the one with the highest
geometric-mean speedup over the sources. The study keeps the result (user attribute ``final``), and
:func:`~labkit.search.export.export_results` ships that pick as the overall best.
"""
from __future__ import annotations

import statistics
import time

import optuna

from ..artifacts.models import load_model
from ..core.draft_config import DraftConfig
from ..measure.adaptive import compare_configs
from .space import config_from_params
from .storage import feasible_trials, open_storage

__all__ = ["FINAL_ATTR", "top_configs", "final_check"]

FINAL_ATTR = "final"


def top_configs(study, n_layers: int, k: int) -> list[tuple[int, float, DraftConfig]]:
    """(trial number, value, config) of the ``k`` best distinct configurations of a ``priced`` study."""
    out, seen = [], set()
    for t in sorted(feasible_trials(study), key=lambda t: t.value):
        config = config_from_params(t.params, n_layers)
        if config not in seen:
            seen.add(config)
            out.append((t.number, t.value, config))
        if len(out) == k:
            break
    return out


def final_check(model="default", *, study_name: str, storage=None, top_k: int = 5, sources=None,
                n_prompts: int = 4, max_new_tokens: int = 64, repeats: int = 3, loaded: tuple | None = None,
                progress: bool = True) -> dict:
    """Time the ``top_k`` configurations of ``study_name`` (a ``priced`` study of ``model``) and record the
    fastest in the study (see the module docstring); returns that record. ``sources``: default, the study's own."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}")
    store = open_storage(storage)
    study = optuna.load_study(study_name=study_name, storage=store)
    space = study.user_attrs.get("search_space", {})
    if space.get("space") != "config":
        raise ValueError(f"study {study_name!r} did not search whole draft configurations (objective "
                         f"{study.user_attrs.get('objective')!r}); final_check needs a 'priced' study")
    sources = list(sources or study.user_attrs.get("settings", {}).get("sources") or ["stdlib", "packages"])
    t0 = time.perf_counter()
    model_obj, tokenizer = loaded or load_model(model)
    top = top_configs(study, space["n_layers"], top_k)
    labels = {f"#{number}": config for number, _, config in top}
    comparison = compare_configs(model_obj, tokenizer, labels, sources=sources, n_prompts=n_prompts,
                                 max_new_tokens=max_new_tokens, repeats=repeats, held_out=False, progress=progress)
    frame = comparison.frame[comparison.frame["method"] != "plain loop"]
    score = {m: statistics.geometric_mean(g["speedup"]) for m, g in frame.groupby("method")}
    chosen = max(score, key=score.get)
    record = {
        "chosen_trial": int(chosen[1:]), "config": labels[chosen].to_dict(), "geomean_speedup": score[chosen],
        "candidates": [{"trial": n, "value_ms_per_token": v, "config": c.to_dict(),
                        "geomean_speedup": score[f"#{n}"]} for n, v, c in top],
        "rows": frame[["source", "method", "speedup", "speedup_min", "speedup_max", "acceptance",
                       "identical"]].to_dict("records"),
        "settings": {"top_k": top_k, "sources": list(sources), "n_prompts": n_prompts,
                     "max_new_tokens": max_new_tokens, "repeats": repeats, "prompts": "choosing (held_out=False)"},
        "seconds": time.perf_counter() - t0, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    study.set_user_attr(FINAL_ATTR, record)
    return record
