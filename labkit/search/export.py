"""Exporting a model's studies as the committed results ``data/search/<model>/``: ``best.json`` (the best
skip set, and for a ``priced`` search the whole draft configuration, overall and per 0.125-wide skip-ratio
bucket), ``trials.csv`` and ``trials.json`` (every evaluated, feasible trial).
:func:`labkit.artifacts.results.best_skip_set` and :func:`~labkit.artifacts.results.best_config` read them back.
Where a study holds a wall-clock final check (:mod:`labkit.search.final`), its pick is the overall best."""
from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import optuna
import torch

from ..artifacts.models import ModelIdentity
from ..artifacts.paths import SEARCH_DIR
from ..artifacts.results import BUCKET_WIDTH, bucket_index, ratio_buckets, search_hint
from ..core.devices import dtype_name
from ..measure.costs.analytic import UNIT
from .final import FINAL_ATTR
from .inputs import model_identity
from .space import skip_from_params
from .storage import DEFAULT_STORAGE, STUDY_MARKER, open_storage, recorded_precision

__all__ = ["export_results", "trial_rows"]


def trial_rows(study, n_layers: int) -> list[dict]:
    rows = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        ev = t.user_attrs.get("eval", {})
        if not ev.get("feasible", True) or t.value is None:
            continue
        skip = skip_from_params(t.params, n_layers)
        rows.append({
            "study": study.study_name, "trial": t.number, "value_ms_per_token": t.value,
            "ratio": skip.ratio(n_layers), "n_skipped": skip.n_skipped,
            "attention": skip.attention, "mlp": skip.mlp,
            "mask": "".join("1" if m else "0" for m in skip.to_mask(n_layers)),
            "speedup": ev.get("speedup"), "alpha": ev.get("alpha"), "gamma": ev.get("gamma"),
            "acceptance_rate": ev.get("acceptance_rate"), "tokens_per_step": ev.get("tokens_per_step"),
            "config": ev.get("config"),
            "warm_start": t.user_attrs.get("warm_start", ""),
            "completed_at": t.datetime_complete.isoformat(timespec="seconds") if t.datetime_complete else "",
            "duration_s": t.duration.total_seconds() if t.duration else None,
        })
    return rows


def _best_entry(row: dict) -> dict:
    return {"skip": {"attention": list(row["attention"]), "mlp": list(row["mlp"])},
            "value_ms_per_token": row["value_ms_per_token"], "ratio": row["ratio"], "n_skipped": row["n_skipped"],
            "speedup": row["speedup"], "study": row["study"],
            "trial": row["trial"], **({"config": row["config"]} if row.get("config") else {})}


def _overall(rows: list[dict], finals: dict) -> dict:
    """The overall best: a study's wall-clock final pick where one exists (the first study's, by name), else the
    row with the lowest objective value."""
    for study, final in sorted(finals.items()):
        picked = [r for r in rows if r["study"] == study and r["trial"] == final["chosen_trial"]]
        if picked:
            return {**_best_entry(picked[0]), "chosen_by": "wall clock (final check)",
                    "final_geomean_speedup": final["geomean_speedup"]}
    return {**_best_entry(min(rows, key=lambda r: r["value_ms_per_token"])), "chosen_by": "objective"}


def _precision_filter(dtype, device) -> dict:
    """The precision an export asks for ({"dtype": "bf16", "device": "cuda"}, either left out: any); names as
    ``--dtype`` and ``--device`` take them (a device's index is not recorded)."""
    wanted = {}
    if dtype is not None:
        wanted["dtype"] = dtype_name(dtype)
    if device is not None:
        try:
            wanted["device"] = torch.device(str(device).strip().lower()).type
        except RuntimeError as error:
            raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {device!r}") from error
    return wanted


def _model_studies(store, identity: ModelIdentity, objective: str | None, storage,
                   precision: dict | None = None) -> tuple[list, str]:
    """The summaries of every labkit study of the model on its current weights with ``objective`` (default: the
    only objective present, or 'measured' if both are) in ``precision`` (:func:`_precision_filter`; empty: any),
    and that objective; ValueError naming what is missing."""
    mid, model = identity.id, identity.name
    summaries = [s for s in optuna.get_all_study_summaries(store, include_best_trial=False)
                 if s.user_attrs.get(STUDY_MARKER) and s.user_attrs.get("model") == mid]
    if summaries and precision:
        found = summaries
        summaries = [s for s in found if all(recorded_precision(s.user_attrs)[k] == v for k, v in precision.items())]
        if not summaries:
            raise ValueError(f"no study of model {mid!r} in {precision} (found: "
                             f"{sorted({tuple(recorded_precision(s.user_attrs).values()) for s in found})})")
    if not summaries:
        raise ValueError(f"storage {str(storage or DEFAULT_STORAGE)!r} holds no labkit search study of model {mid!r}; "
                         f"run {search_hint(model)}")
    current = [s for s in summaries if s.user_attrs.get("model_fingerprint") == identity.fingerprint]
    if not current:
        raise ValueError(f"the studies of model {mid!r} in this storage were run on other weights than the model "
                         f"has now ({', '.join(sorted(s.study_name for s in summaries))}); run "
                         f"{search_hint(model)} with a new --study-name")
    present = sorted({s.user_attrs["objective"] for s in current})
    objective = objective or (present[0] if len(present) == 1 else "measured")
    if objective not in present:
        raise ValueError(f"no {objective!r} study of model {mid!r} in the storage (found: {', '.join(present)})")
    return [s for s in current if s.user_attrs["objective"] == objective], objective


def _best_payload(identity: ModelIdentity, summaries: list, objective: str, rows: list[dict], n_layers: int) -> dict:
    """best.json: the overall best and the best of every skip-ratio bucket, with the studies they came from."""
    finals = {s.study_name: s.user_attrs[FINAL_ATTR] for s in summaries if s.user_attrs.get(FINAL_ATTR)}
    buckets = []
    for i, (lo, hi) in enumerate(ratio_buckets()):
        inside = [r for r in rows if bucket_index(r["ratio"]) == i]
        best = min(inside, key=lambda r: r["value_ms_per_token"]) if inside else None
        buckets.append({"lo": lo, "hi": hi, "n_trials": len(inside), "best": _best_entry(best) if best else None})
    return {
        "model": identity.id, "model_fingerprint": summaries[0].user_attrs.get("model_fingerprint"),
        "objective": objective, "unit": UNIT, "n_layers": n_layers, "bucket_width": BUCKET_WIDTH,
        "buckets_note": "bucket i holds skip ratios in [lo, hi); the last also holds ratio 1",
        "studies": [{"name": s.study_name, "ratio_bucket": s.user_attrs.get("ratio_bucket"),
                     "settings": s.user_attrs.get("settings"), **recorded_precision(s.user_attrs),
                     "n_trials": s.n_trials} for s in summaries],
        "n_trials": len(rows), "overall": _overall(rows, finals), "buckets": buckets,
        "final_checks": finals,
        "full_step_ms": {s.study_name: (s.user_attrs.get("cost_model") or s.user_attrs["cost_models"]["fp32"]).get(
            "full_step_ms") for s in summaries if s.user_attrs.get("cost_model") or s.user_attrs.get("cost_models")},
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "regenerate": search_hint(identity.name),
    }


def export_results(model="default", *, storage=None, objective: str | None = None, out_dir=None, dtype=None,
                   device=None) -> Path:
    """Write best.json, trials.csv and trials.json for ``model`` (a name, a folder, a ModelIdentity or a
    SearchModel) under data/search/<model key>/; returns the folder.

    Gathers every labkit study of that model (all ratio buckets) with ``objective`` (default: the
    only objective present, or 'measured' if both are); ``dtype``, ``device``: only the studies that ran in that
    precision, on that kind of device (None: any; best.json names each study's).
    """
    store = open_storage(storage)
    identity = model_identity(model)
    summaries, objective = _model_studies(store, identity, objective, storage, _precision_filter(dtype, device))
    n_layers = summaries[0].user_attrs["search_space"]["n_layers"]
    rows = []
    for s in sorted(summaries, key=lambda s: s.study_name):
        rows.extend(trial_rows(optuna.load_study(study_name=s.study_name, storage=store), n_layers))
    if not rows:
        raise ValueError(f"the studies of model {identity.id!r} hold no completed trial yet; run "
                         f"{search_hint(identity.name)}")
    out = Path(out_dir) if out_dir else SEARCH_DIR / identity.key
    out.mkdir(parents=True, exist_ok=True)
    (out / "best.json").write_text(json.dumps(_best_payload(identity, summaries, objective, rows, n_layers), indent=2))
    (out / "trials.json").write_text(json.dumps(rows, indent=1))
    with open(out / "trials.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "attention": " ".join(map(str, r["attention"])), "mlp": " ".join(map(str, r["mlp"])),
                             "config": json.dumps(r["config"]) if r.get("config") else ""})
    return out
