"""Where studies live, so that nothing is lost: an Optuna storage that survives ``kill -9`` and can be
shared by several worker processes, on one machine or many, and the attributes that tie a study to one model,
objective and space.

Accepted: an RDB URL (default ``sqlite:///results/search.db``), ``journal:<path>`` or a ``.log`` path (Optuna's
JournalStorage), a bare ``.db``/``.sqlite`` path, and ``":memory:"``.

- SQLite (one machine): WAL mode, every transaction taking the write lock when it begins, a 60 s busy timeout.
- A database server (many machines): ``postgresql+psycopg://user[:password]@host[:port]/db`` (``postgresql://`` and
  ``postgres://`` get the psycopg driver, installed with labkit; Optuna takes ``mysql+pymysql://...`` the same way,
  untested here, with its driver installed). The database must exist; Optuna creates its tables. Connections
  time out after ``CONNECT_TIMEOUT_S`` (5 s) and are checked before use: a bad or unreachable URL is a fast
  ValueError.
- Every RDB storage runs Optuna's heartbeat: a worker records one every ``heartbeat_interval`` seconds (default
  10) for its running trial, and a worker starting a trial marks FAIL any RUNNING trial whose heartbeat is older
  than ``grace_period`` seconds (default 30): a killed worker's trial, not a slow one. The database's clock decides,
  so machines' clocks need not agree.

Each study records the model (name or path, and a fingerprint of its weights), the precision and the kind of device
it ran in (``dtype``: fp32, bf16 or fp16; ``device``: cpu, cuda or mps: a trial's milliseconds and a reduced
precision's argmax depend on both), the objective, its settings, the search space and the ratio bucket; reopening it
with different ones raises ValueError without touching it. A study from before precisions were recorded ran in fp32
on the CPU (:data:`LEGACY_PRECISION`): it reopens as one. Why these settings: ``docs/decisions.md`` (search storage;
a search many workers share).
"""
from __future__ import annotations

import re
import time
import warnings
from pathlib import Path

import optuna

from ..artifacts.models import ModelIdentity
from ..artifacts.paths import RESULTS_DIR
from ..artifacts.results import in_bucket
from ..core.checks import check_int
from ..measure.costs.costmodel import CostModel
from .space import skip_from_params, space_param_names

__all__ = ["DEFAULT_STORAGE", "STUDY_MARKER", "CALIBRATION_ATTR", "HEARTBEAT_INTERVAL_S", "GRACE_PERIOD_S",
           "CONNECT_TIMEOUT_S", "LEGACY_PRECISION", "open_storage", "feasible_trials", "recorded_precision",
           "default_study_name", "expected_attrs", "check_attrs", "open_study", "stored_cost_model",
           "stored_cost_models", "stored_calibration", "known_good_sets", "check_heartbeat",
           "storage_file"]

DEFAULT_STORAGE = f"sqlite:///{RESULTS_DIR / 'search.db'}"
STUDY_MARKER = "labkit_search"
CALIBRATION_ATTR = "priced_calibration"
HEARTBEAT_INTERVAL_S = 10      # seconds between a running trial's heartbeats
GRACE_PERIOD_S = 30            # a RUNNING trial whose last heartbeat is older than this is a dead worker's: FAIL
CONNECT_TIMEOUT_S = 5          # a database server that does not answer: ValueError after this many seconds
_DRIVERS = {"postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg"}
#: what a study that records no precision ran in: every study before precisions were recorded was fp32 on the CPU
LEGACY_PRECISION = {"dtype": "fp32", "device": "cpu"}
# two workers creating the tables of a new database at once: the loser retries
_TRANSIENT = ("already exists", "database is locked", "UNIQUE constraint", "duplicate key value")


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


def _rdb_url(text: str) -> str:
    """``text`` as an RDB URL: a bare SQLite file path made one, ``postgresql://`` given the psycopg driver."""
    if "://" not in text:
        if not text.endswith((".db", ".sqlite", ".sqlite3")):
            raise ValueError("not a URL (dialect://...), a journal:<path>, a .log, or a .db/.sqlite file path")
        return f"sqlite:///{Path(text).expanduser().resolve()}"
    scheme, rest = text.split("://", 1)
    return f"{_DRIVERS.get(scheme, scheme)}://{rest}"


def storage_file(storage=None) -> Path | None:
    """The local file a storage URL or path names (a SQLite database or a journal), None for a server or memory:
    the commands that only read a storage check that it is there before opening it (opening creates it)."""
    text = DEFAULT_STORAGE if storage is None else str(storage)
    if text.startswith("journal:") or ("://" not in text and text.endswith(".log")):
        return Path(text.removeprefix("journal:")).expanduser()
    if text.startswith("sqlite:///") and text != "sqlite:///:memory:":
        return Path(text[len("sqlite:///"):]).expanduser()
    if "://" not in text and text.endswith((".db", ".sqlite", ".sqlite3")):
        return Path(text).expanduser()
    return None


def _engine_kwargs(url: str) -> dict:
    """SQLite: its folder must exist, a 60 s busy timeout. A server: a connect timeout, connections checked."""
    if url.startswith("sqlite:"):
        db = url.split(":///", 1)[1] if ":///" in url else ""
        if db and db != ":memory:" and not Path(db).expanduser().parent.is_dir():
            raise FileNotFoundError(f"folder {Path(db).parent} does not exist")
        return {"connect_args": {"timeout": 60}}
    if url.startswith(("postgresql", "mysql")):
        return {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}, "pool_pre_ping": True}
    return {}


def _journal(text: str):
    path = Path(text[len("journal:"):] if text.startswith("journal:") else text).expanduser()
    if not path.parent.is_dir():
        raise FileNotFoundError(f"folder {path.parent} does not exist")
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(str(path)))


def _rdb(url: str, heartbeat_interval: int, grace_period: int):
    for attempt in range(5):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")                    # heartbeat_interval is 'experimental'
                rdb = optuna.storages.RDBStorage(url, engine_kwargs=_engine_kwargs(url), grace_period=grace_period,
                                                 heartbeat_interval=heartbeat_interval)
            break
        except Exception as err:  # noqa: BLE001
            if attempt == 4 or not any(m in str(err) for m in _TRANSIENT):
                raise
            time.sleep(0.2 * (attempt + 1))
    if url.startswith("sqlite:"):
        _sqlite_tuning(rdb)
    return rdb


def check_heartbeat(heartbeat_interval, grace_period) -> None:
    """ValueError unless both are whole seconds >= 1 and the grace period outlasts a heartbeat."""
    check_int("heartbeat_interval", heartbeat_interval, 1)
    check_int("grace_period", grace_period, 1)
    if grace_period <= heartbeat_interval:
        raise ValueError(f"grace_period ({grace_period} s) must be longer than heartbeat_interval "
                         f"({heartbeat_interval} s), or a live worker's trial is failed between two heartbeats")


def _shown(text: str) -> str:
    """``text`` with a URL's password hidden: errors must not print it."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", text)


def open_storage(storage=None, *, heartbeat_interval: int = HEARTBEAT_INTERVAL_S,
                 grace_period: int = GRACE_PERIOD_S):
    """An Optuna storage from a URL or path (see module docstring); ValueError if it cannot be opened.

    ``heartbeat_interval`` and ``grace_period`` (whole seconds) apply to an RDB storage; a storage object is
    returned as it is.
    """
    if isinstance(storage, optuna.storages.BaseStorage):
        return storage
    check_heartbeat(heartbeat_interval, grace_period)
    if storage is None:
        RESULTS_DIR.mkdir(exist_ok=True)
        storage = DEFAULT_STORAGE
    text = str(storage)
    try:
        if text in (":memory:", "memory"):
            return optuna.storages.InMemoryStorage()
        if text.startswith("journal:") or ("://" not in text and text.endswith(".log")):
            return _journal(text)
        return _rdb(_rdb_url(text), heartbeat_interval, grace_period)
    except Exception as err:  # noqa: BLE001 - any failure to open is the caller's bad URL
        first = str(err).splitlines()[0] if str(err) else ""
        raise ValueError(f"cannot open Optuna storage {_shown(text)!r}: {type(err).__name__}: {_shown(first)}") from err


def feasible_trials(study) -> list:
    return [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if t.value is not None and t.user_attrs.get("eval", {}).get("feasible", True)]


def _check_identity(identity) -> ModelIdentity:
    if not isinstance(identity, ModelIdentity):
        raise TypeError("identity must be a ModelIdentity (labkit.artifacts.models.identify(name)), got "
                        f"{type(identity).__name__}")
    return identity


def _precision(precision) -> dict:
    """``precision`` ({"dtype": ..., "device": ...}; None: fp32 on the CPU) with both keys, checked."""
    if precision is None:
        return dict(LEGACY_PRECISION)
    if not isinstance(precision, dict) or set(precision) != set(LEGACY_PRECISION):
        raise TypeError(f"precision must be a dict with keys 'dtype' and 'device', got {precision!r}")
    return dict(precision)


def recorded_precision(attrs: dict) -> dict:
    """The precision a study's attributes record ({"dtype": ..., "device": ...}); fp32 on the CPU for a study from
    before precisions were recorded."""
    return {k: attrs.get(k, v) for k, v in LEGACY_PRECISION.items()}


def default_study_name(identity: ModelIdentity, objective: str, bucket, precision: dict | None = None) -> str:
    """``<model key>-<objective>[-<dtype>][-<device>][-ratio<lo>-<hi>]``: the name a study gets unless it is given
    one; the dtype and device only where they are not fp32 and the CPU (so earlier studies keep their names)."""
    name = f"{_check_identity(identity).key}-{objective}"
    name += "".join(f"-{v}" for k, v in _precision(precision).items() if v != LEGACY_PRECISION[k])
    if bucket is not None:
        name += f"-ratio{bucket[0]:g}-{bucket[1]:g}"
    return name


def expected_attrs(identity: ModelIdentity, objective, n_layers, bucket, settings, space: str = "mask",
                   precision: dict | None = None) -> dict:
    """The attributes that tie a study to one model (its id and weights), precision and kind of device
    (``precision``: {"dtype": "bf16", "device": "cuda"}; None: fp32 on the CPU), objective, settings, space and
    bucket."""
    params = space_param_names(space, n_layers)
    search_space = {"n_layers": n_layers, "params": params, "low": 0, "high": 1}
    if space != "mask":
        search_space["space"] = space
    return {
        "model": _check_identity(identity).id,
        "model_fingerprint": identity.fingerprint,
        **_precision(precision),
        "objective": objective,
        "search_space": search_space,
        "ratio_bucket": list(bucket) if bucket else None,
        "settings": settings,
    }


def check_attrs(study_name: str, found: dict, expected: dict) -> None:
    labels = {"model": "model", "model_fingerprint": "model weights", "dtype": "precision", "device": "device",
              "objective": "objective", "search_space": "search space", "ratio_bucket": "ratio bucket",
              "settings": "objective settings"}
    found = {**found, **recorded_precision(found)}                 # an earlier study: fp32 on the CPU
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
                and attrs.get("model_fingerprint") == expected["model_fingerprint"]
                and recorded_precision(attrs) == recorded_precision(expected)):
            found.append(attrs[key])
    return max(found, key=stamp) if found else None


def stored_cost_model(storage, expected: dict):
    """The newest cost model another study of the same model (same weights, precision and kind of device) in this
    storage recorded.

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
    """The parameters of the ``k`` best trials inside ``bucket`` that other studies of the same model, precision,
    objective and space evaluated (one per skip set, sets in ``exclude`` left out), by label.

    A new ratio-bucket study is warm-started with them, so it starts from what the storage knows.
    """
    same = ("model", "model_fingerprint", "objective", "settings", "search_space")
    scored = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        if (not s.user_attrs.get(STUDY_MARKER) or any(s.user_attrs.get(key) != expected[key] for key in same)
                or recorded_precision(s.user_attrs) != recorded_precision(expected)):
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
