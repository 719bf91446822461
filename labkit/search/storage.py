"""Where studies live, so that nothing is lost: an Optuna storage that survives ``kill -9`` and can be
shared by several worker processes, and the attributes that tie a study to one model, objective and space.

Accepted: an RDB URL (default ``sqlite:///results/search.db``; SQLite in WAL mode, every transaction taking
the write lock when it begins, a 60 s busy timeout and a heartbeat that marks a killed worker's trial FAIL),
``journal:<path>`` or a ``.log`` path (Optuna's JournalStorage), a bare ``.db``/``.sqlite`` path, and
``":memory:"``. Each study records the model (name or path, and a fingerprint of its weights), the objective,
its settings, the search space and the ratio bucket; reopening it with different ones raises ValueError
without touching it. Why these SQLite settings: ``docs/decisions.md`` (search storage).
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import optuna

from ..artifacts.models import ModelIdentity
from ..artifacts.paths import RESULTS_DIR
from ..artifacts.results import in_bucket
from ..measure.costmodel import CostModel
from .space import skip_from_params, space_param_names

__all__ = ["DEFAULT_STORAGE", "STUDY_MARKER", "CALIBRATION_ATTR", "open_storage", "feasible_trials",
           "default_study_name", "expected_attrs", "check_attrs", "open_study", "stored_cost_model",
           "stored_cost_models", "stored_calibration", "known_good_sets"]

DEFAULT_STORAGE = f"sqlite:///{RESULTS_DIR / 'search.db'}"
STUDY_MARKER = "labkit_search"
CALIBRATION_ATTR = "priced_calibration"


def _sqlite_tuning(storage) -> None:
    from sqlalchemy import event

    engine = storage.engine

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection, _record):                      # noqa: ANN001
        dbapi_connection.isolation_level = None                    # transactions begin below, not in pysqlite
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection):                              # noqa: ANN001
        # SQLite ignores SELECT ... FOR UPDATE, so two workers could both read a WAITING (enqueued) trial
        # and both run it. Taking the write lock when a transaction begins makes Optuna's read-then-update
        # atomic; the 60 s busy timeout lets the other worker wait instead of failing.
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()                                               # later connections get the pragmas


def open_storage(storage=None):
    """An Optuna storage from a URL or path (see module docstring); ValueError if it cannot be opened."""
    if isinstance(storage, optuna.storages.BaseStorage):
        return storage
    if storage is None:
        RESULTS_DIR.mkdir(exist_ok=True)
        storage = DEFAULT_STORAGE
    text = str(storage)
    try:
        if text in (":memory:", "memory"):
            return optuna.storages.InMemoryStorage()
        if text.startswith("journal:") or ("://" not in text and text.endswith(".log")):
            path = Path(text[len("journal:"):] if text.startswith("journal:") else text).expanduser()
            if not path.parent.is_dir():
                raise FileNotFoundError(f"folder {path.parent} does not exist")
            from optuna.storages.journal import JournalFileBackend

            return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
        if "://" not in text:
            if not text.endswith((".db", ".sqlite", ".sqlite3")):
                raise ValueError("not a URL (dialect://...), a journal:<path>, a .log, or a .db/.sqlite file path")
            text = f"sqlite:///{Path(text).expanduser().resolve()}"
        kwargs = {}
        if text.startswith("sqlite:"):
            db = text.split(":///", 1)[1] if ":///" in text else ""
            if db and db != ":memory:" and not Path(db).expanduser().parent.is_dir():
                raise FileNotFoundError(f"folder {Path(db).parent} does not exist")
            kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}
        for attempt in range(5):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")                # heartbeat_interval is 'experimental'
                    rdb = optuna.storages.RDBStorage(text, heartbeat_interval=10, grace_period=30, **kwargs)
                break
            except Exception as err:  # noqa: BLE001
                # two workers creating the tables of a new database at once: the loser retries
                transient = ("already exists", "database is locked", "UNIQUE constraint")
                if attempt == 4 or not any(m in str(err) for m in transient):
                    raise
                time.sleep(0.2 * (attempt + 1))
        if text.startswith("sqlite:"):
            _sqlite_tuning(rdb)
        return rdb
    except Exception as err:  # noqa: BLE001 - any failure to open is the caller's bad URL
        raise ValueError(f"cannot open Optuna storage {str(storage)!r}: {type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''}") from err


def feasible_trials(study) -> list:
    return [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if t.value is not None and t.user_attrs.get("eval", {}).get("feasible", True)]


def _check_identity(identity) -> ModelIdentity:
    if not isinstance(identity, ModelIdentity):
        raise TypeError("identity must be a ModelIdentity (labkit.artifacts.models.identify(name)), got "
                        f"{type(identity).__name__}")
    return identity


def default_study_name(identity: ModelIdentity, objective: str, bucket) -> str:
    """``<model key>-<objective>[-ratio<lo>-<hi>]``: the name a study gets unless it is given one."""
    name = f"{_check_identity(identity).key}-{objective}"
    if bucket is not None:
        name += f"-ratio{bucket[0]:g}-{bucket[1]:g}"
    return name


def expected_attrs(identity: ModelIdentity, objective, n_layers, bucket, settings, space: str = "mask") -> dict:
    """The attributes that tie a study to one model (its id and weights), objective, settings, space and bucket."""
    params = space_param_names(space, n_layers)
    search_space = {"n_layers": n_layers, "params": params, "low": 0, "high": 1}
    if space != "mask":
        search_space["space"] = space
    return {
        "model": _check_identity(identity).id,
        "model_fingerprint": identity.fingerprint,
        "objective": objective,
        "search_space": search_space,
        "ratio_bucket": list(bucket) if bucket else None,
        "settings": settings,
    }


def check_attrs(study_name: str, found: dict, expected: dict) -> None:
    labels = {"model": "model", "model_fingerprint": "model weights", "objective": "objective",
              "search_space": "search space", "ratio_bucket": "ratio bucket", "settings": "objective settings"}
    diff = [k for k in expected if found.get(k) != expected[k]]
    if diff:
        lines = "; ".join(f"{labels[k]}: study has {found.get(k)!r}, asked for {expected[k]!r}" for k in diff)
        raise ValueError(f"study {study_name!r} already exists with a different {', '.join(labels[k] for k in diff)} "
                         f"({lines}). Choose another --study-name (the existing study was left untouched).")


def wait_for_attrs(study, timeout_s: float = 30.0) -> dict:
    """A study another worker just created may not have its attributes yet: wait for the marker."""
    deadline = time.monotonic() + timeout_s
    while True:
        attrs = study.user_attrs
        if attrs.get(STUDY_MARKER):
            return attrs
        if study.get_trials(deepcopy=False) or time.monotonic() > deadline:
            raise ValueError(f"study {study.study_name!r} exists but was not created by labkit.search "
                             "(no labkit attributes); choose another --study-name")
        time.sleep(0.2)


def open_study(storage, study_name: str, sampler):
    """(study, attrs) of an existing study, or (None, None)."""
    try:
        study = optuna.load_study(study_name=study_name, storage=storage, sampler=sampler)
    except KeyError:
        return None, None
    return study, wait_for_attrs(study)


def _newest_attr(storage, expected: dict, key: str, stamp) -> dict | None:
    found = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        attrs = s.user_attrs
        if (attrs.get(STUDY_MARKER) and attrs.get(key) and attrs.get("model") == expected["model"]
                and attrs.get("model_fingerprint") == expected["model_fingerprint"]):
            found.append(attrs[key])
    return max(found, key=stamp) if found else None


def stored_cost_model(storage, expected: dict):
    """The newest cost model another study of the same model (same weights) in this storage recorded.

    Reusing it keeps every study of a model (all ratio buckets) in one currency of milliseconds.
    """
    found = _newest_attr(storage, expected, "cost_model", lambda d: d.get("measured_at", ""))
    return CostModel.from_dict(found) if found else None


def stored_calibration(storage, expected: dict) -> dict | None:
    """The newest ``priced`` loop calibration (:meth:`~labkit.search.objectives.PricedObjective.calibrate`) another
    study of the same model recorded: with the cost models, the currency every study of a model prices in."""
    return _newest_attr(storage, expected, CALIBRATION_ATTR, lambda d: d.get("measured_at", ""))


def stored_cost_models(storage, expected: dict) -> dict | None:
    """The newest {draft weights: cost model} pair (the ``priced`` objective's) of the same model, as
    :func:`stored_cost_model` (key None: the model's own weights)."""
    found = _newest_attr(storage, expected, "cost_models", lambda d: d["fp32"].get("measured_at", ""))
    return {None if w == "fp32" else w: CostModel.from_dict(d) for w, d in found.items()} if found else None


def known_good_sets(storage, expected: dict, bucket, n_layers: int, k: int = 3, exclude=()) -> dict[str, dict]:
    """The parameters of the ``k`` best trials inside ``bucket`` that other studies of the same model, objective
    and space evaluated (one per skip set, sets in ``exclude`` left out), by label.

    A new ratio-bucket study is warm-started with them, so it starts from what the storage knows.
    """
    same = ("model", "model_fingerprint", "objective", "settings", "search_space")
    scored = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        if not s.user_attrs.get(STUDY_MARKER) or any(s.user_attrs.get(key) != expected[key] for key in same):
            continue
        for t in feasible_trials(optuna.load_study(study_name=s.study_name, storage=storage)):
            skip = skip_from_params(t.params, n_layers)
            if in_bucket(skip.ratio(n_layers), bucket):
                scored.append((t.value, skip, f"best known in the bucket ({s.study_name} #{t.number})", t.params))
    out, seen = {}, set(exclude)
    for _, skip, label, params in sorted(scored, key=lambda x: x[0]):
        if skip not in seen and len(out) < k:
            seen.add(skip)
            out[label] = dict(params)
    return out
