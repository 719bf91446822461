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
from dataclasses import dataclass

import optuna

from ..core.checks import check_int
from ..core.draft_config import DraftConfig
from ..measure.comparisons.adaptive import compare_configs
from .inputs import SearchModel
from .space import config_from_params
from .storage import feasible_trials, open_storage, recorded_precision

__all__ = ["FINAL_ATTR", "FinalConfig", "top_configs", "final_check"]

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


@dataclass(frozen=True)
class FinalConfig:
    """How a final check times: the ``top_k`` distinct configurations, on the first ``n_prompts`` choosing prompts of
    each of ``sources`` (None: the study's own), ``max_new_tokens`` each, ``repeats`` interleaved repetitions.
    Checked when built."""

    top_k: int = 5
    sources: tuple[str, ...] | None = None
    n_prompts: int = 4
    max_new_tokens: int = 64
    repeats: int = 3

    def __post_init__(self):
        for name in ("top_k", "n_prompts", "max_new_tokens", "repeats"):
            check_int(name, getattr(self, name), 1)
        if isinstance(self.sources, str):
            raise TypeError(f"sources must be a sequence of source names, got the string {self.sources!r}")
        object.__setattr__(self, "sources", None if self.sources is None else tuple(self.sources))


def _config_study(store, study_name: str):
    """The ``priced`` study ``study_name`` and its search space; ValueError when it searched masks only."""
    study = optuna.load_study(study_name=study_name, storage=store)
    space = study.user_attrs.get("search_space", {})
    if space.get("space") != "config":
        raise ValueError(f"study {study_name!r} did not search whole draft configurations (objective "
                         f"{study.user_attrs.get('objective')!r}); final_check needs a 'priced' study")
    return study, space


def final_check(model="default", *, study_name: str, storage=None, config: FinalConfig | None = None,
                progress: bool = True, device=None, dtype=None) -> dict:
    """Time the top configurations of ``study_name`` (a ``priced`` study of ``model``: a name, a folder or a
    :class:`~labkit.search.inputs.SearchModel`) as ``config`` says (None: the defaults), and record the fastest in
    the study (see the module docstring); returns that record. ``device``, ``dtype``: where and in what precision a
    named model is loaded (None: the CPU, fp32); ValueError where the study ran in another precision or on another
    kind of device."""
    config = FinalConfig() if config is None else config
    if not isinstance(config, FinalConfig):
        raise TypeError(f"config must be a FinalConfig, got {type(config).__name__}")
    study, space = _config_study(open_storage(storage), study_name)
    sources = list(config.sources or study.user_attrs.get("settings", {}).get("sources") or ["stdlib", "packages"])
    t0 = time.perf_counter()
    subject = SearchModel.resolve(model, device=device, dtype=dtype)
    if recorded_precision(study.user_attrs) != subject.precision:
        raise ValueError(f"study {study_name!r} ran in {recorded_precision(study.user_attrs)}, the model is loaded in "
                         f"{subject.precision}: time it where it was searched (--dtype, --device)")
    top = top_configs(study, space["n_layers"], config.top_k)
    labels = {f"#{number}": draft for number, _, draft in top}
    comparison = compare_configs(subject.model, subject.tokenizer, labels, sources=sources, n_prompts=config.n_prompts,
                                 max_new_tokens=config.max_new_tokens, repeats=config.repeats, held_out=False,
                                 progress=progress)
    frame = comparison.frame[comparison.frame["method"] != "plain loop"]
    score = {m: statistics.geometric_mean(g["speedup"]) for m, g in frame.groupby("method")}
    chosen = max(score, key=score.get)
    record = {
        "chosen_trial": int(chosen[1:]), "config": labels[chosen].to_dict(), "geomean_speedup": score[chosen],
        "candidates": [{"trial": n, "value_ms_per_token": v, "config": c.to_dict(),
                        "geomean_speedup": score[f"#{n}"]} for n, v, c in top],
        "rows": frame[["source", "method", "speedup", "speedup_min", "speedup_max", "acceptance",
                       "identical"]].to_dict("records"),
        "settings": {"top_k": config.top_k, "sources": list(sources), "n_prompts": config.n_prompts,
                     "max_new_tokens": config.max_new_tokens, "repeats": config.repeats,
                     "prompts": "choosing (held_out=False)"},
        "seconds": time.perf_counter() - t0, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    study.set_user_attr(FINAL_ATTR, record)
    return record
