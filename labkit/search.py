"""Choosing the skip set by Bayesian optimisation (Optuna), and the committed results it leaves.

Search space: 2L binary parameters ``attn_{l}`` and ``mlp_{l}`` (``suggest_int(name, 0, 1)``,
1 = skip that block). ``suggest_categorical`` is deliberately not used: with it the GP sampler took
5-36 s per trial and got stuck proposing "skip all". Samplers: ``gp`` (Optuna's GPSampler, the
default), ``tpe`` and ``random``, all seeded. Every new study is warm-started (``enqueue_trial``)
with: nothing skipped, every other layer (both blocks of the odd layers), every other attention
block (attention of the odd layers); a new ratio-bucket study only with those inside its bucket,
plus the sets of the model card's greedy-elimination path (``robustness.json``) inside the bucket
and the 3 best sets inside the bucket that other studies of the same model and objective in the
storage have evaluated.

Objectives, both in **ms per generated token** (lower is better):

- ``measured``: real greedy :func:`labkit.speculative_generate` runs on a few held-out prompts with
  a fresh draft policy per trial (default :class:`~labkit.AdaptiveThreshold`), wall clock of the
  decode phase (draft + verify + bookkeeping; the prefill, identical for every skip set, is left
  out) divided by the tokens generated. The paper's objective; about a second per trial.
- ``modelled``: teacher-forced agreement alpha(z) of the skip set (:class:`~labkit.agreement.AgreementProbe`)
  turned into predicted ms/token by this machine's :class:`~labkit.costmodel.CostModel` with the
  best draft length for that alpha (:func:`labkit.costmodel.predict`). One batched forward per trial.
  :func:`rank_agreement` reports how well it ranks skip sets against ``measured`` (Spearman).

Skip-ratio buckets (``ratio_bucket=(lo, hi)``, half-open ``lo <= ratio < hi``, ``hi = 1`` inclusive):
sets outside the bucket are **penalised, not evaluated**: their value is
``baseline_ms * (2 + blocks_outside)`` (worse than any evaluated set, and sloping towards the
bucket so the GP is led into it), and they are marked ``feasible: False`` and never reported as
a best set. Pruning was not used because GPSampler learns nothing from pruned trials and would keep
proposing them.

Storage (nothing is lost): an Optuna storage URL, by default ``sqlite:///results/search.db`` (repo
root). SQLite files are opened in WAL mode, every transaction taking the write lock when it begins
(``BEGIN IMMEDIATE``: SQLite has no row locks, and without it two workers could run the same enqueued
trial; 0 failures in 50 two-worker races against 3 in 25 before), with ``synchronous=NORMAL`` (37 ms instead of 0.6 s of
storage per trial here; a committed trial survives a killed process, only an OS crash or power
loss could drop the last commits) with a 60 s busy timeout so several worker processes can share
one study, and with a heartbeat, so a trial left RUNNING by a killed worker is marked FAIL by the
next worker. Also accepted: any other RDB URL (``postgresql://...``), ``journal:<path>`` or a path
ending in ``.log`` (Optuna's JournalStorage on a file; no heartbeat there, a killed worker's trial
stays RUNNING and is ignored), a bare ``.db``/``.sqlite`` path, and ``":memory:"``.
Each study records the model (name or resolved path, plus a fingerprint of its weights), the
objective, its settings, the search space and the ratio bucket as user attributes; re-running with
the same study name resumes it (``--trials`` more trials; the sampler is reseeded with
``seed + trials already run`` so a resumed run does not replay its first proposals), and a mismatch
raises ``ValueError`` without touching the study. Concurrent workers on one study should be given
different ``--seed`` values (same seed, same proposals); every trial records its worker (host:pid).

Committed results (``export``): ``data/search/<model>/best.json`` (overall best skip set and the
best per 0.125-wide skip-ratio bucket), ``trials.csv`` and ``trials.json`` (every evaluated trial);
:func:`best_skip_set` reads them back.

CLI::

    python -m labkit.search --model default --objective modelled --trials 100 --sampler gp --seed 0
    python -m labkit.search --model default --per-bucket --trials 40          # one study per ratio bucket
    python -m labkit.search export --model default
    python -m labkit.search compare --model default --trials 100 --seeds 0 1 2
    python -m labkit.search rank --model default --n-sets 16
"""
from __future__ import annotations

import argparse
import csv
import functools
import hashlib
import json
import math
import os
import random
import socket
import statistics
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import torch

from .skip import SkipSet

__all__ = [
    "run_search", "SearchResult", "export_results", "best_skip_set", "compare_samplers", "rank_agreement",
    "ModelledObjective", "MeasuredObjective", "open_storage", "param_names", "skip_from_params",
    "params_from_skip", "warm_start_sets", "ratio_buckets", "SAMPLERS", "OBJECTIVES", "DEFAULT_STORAGE",
    "SEARCH_DIR", "BUCKET_WIDTH",
]

# labkit/__init__.py imports best_skip_set from here, so `python -m labkit.search` finds this module
# already imported and runpy warns that it runs a second copy as __main__. That is harmless here (the
# module holds constants and a model cache only); silence exactly that warning.
warnings.filterwarnings("ignore", message=r"'labkit\.search' found in sys\.modules", category=RuntimeWarning)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_STORAGE = f"sqlite:///{REPO / 'results' / 'search.db'}"
SEARCH_DIR = REPO / "data" / "search"
SAMPLERS = ("gp", "tpe", "random")
OBJECTIVES = ("modelled", "measured")
BUCKET_WIDTH = 0.125
UNIT = "ms per generated token"
#: Defaults of each objective's settings (prompts are labkit.prompts(n_prompts, seed=prompt_seed)).
DEFAULT_SETTINGS = {
    "modelled": {"n_prompts": 8, "n_tokens": 32, "prompt_seed": 0},
    "measured": {"n_prompts": 3, "max_new_tokens": 32, "prompt_seed": 0, "policy": "adaptive"},
}
_STUDY_MARKER = "labkit_search"


# ---------------------------------------------------------------------------------------
# search space
# ---------------------------------------------------------------------------------------
def param_names(n_layers: int) -> list[str]:
    """``attn_0 .. attn_{L-1}, mlp_0 .. mlp_{L-1}``: the order of :meth:`SkipSet.to_mask`."""
    return [f"attn_{l}" for l in range(n_layers)] + [f"mlp_{l}" for l in range(n_layers)]


def skip_from_params(params: dict, n_layers: int) -> SkipSet:
    return SkipSet.from_mask([bool(int(params[name])) for name in param_names(n_layers)])


def params_from_skip(skip: SkipSet, n_layers: int) -> dict[str, int]:
    return {name: int(v) for name, v in zip(param_names(n_layers), skip.to_mask(n_layers))}


def warm_start_sets(n_layers: int) -> dict[str, SkipSet]:
    odd = [l for l in range(n_layers) if l % 2 == 1]
    return {
        "no skip": SkipSet(),
        "every other layer": SkipSet(attention=odd, mlp=odd),
        "every other attention block": SkipSet(attention=odd),
    }


def ratio_buckets(width: float = BUCKET_WIDTH) -> list[tuple[float, float]]:
    n = round(1 / width)
    return [(i / n, (i + 1) / n) for i in range(n)]


def _in_bucket(ratio: float, bucket: tuple[float, float]) -> bool:
    lo, hi = bucket
    eps = 1e-12
    return lo - eps <= ratio < hi - eps or (hi >= 1.0 and ratio >= hi - eps)


def _bucket_index(ratio: float, width: float = BUCKET_WIDTH) -> int:
    n = round(1 / width)
    return min(int(ratio * n + 1e-9), n - 1)


def _check_bucket(bucket, n_layers: int | None = None) -> tuple[float, float] | None:
    if bucket is None:
        return None
    try:
        lo, hi = (float(v) for v in bucket)
    except (TypeError, ValueError):
        raise ValueError(f"ratio_bucket must be a pair (lo, hi), got {bucket!r}") from None
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"ratio_bucket must satisfy 0 <= lo < hi <= 1, got ({lo}, {hi})")
    if n_layers is not None and not any(_in_bucket(k / (2 * n_layers), (lo, hi)) for k in range(2 * n_layers + 1)):
        raise ValueError(f"no skip set of a {n_layers}-layer model has a skip ratio in [{lo}, {hi})")
    return lo, hi


def _blocks_outside(n_skipped: int, n_layers: int, bucket: tuple[float, float]) -> int:
    return min(abs(k - n_skipped) for k in range(2 * n_layers + 1) if _in_bucket(k / (2 * n_layers), bucket))


# ---------------------------------------------------------------------------------------
# models and storage
# ---------------------------------------------------------------------------------------
def model_id(name) -> str:
    """What a study records as its model: a shipped name as is, a local folder as its resolved path."""
    from .models import SHIPPED_MODELS

    text = str(name)
    if text in SHIPPED_MODELS:
        return text
    path = Path(text).expanduser()
    return str(path.resolve()) if path.exists() else text


def model_key(name) -> str:
    """Folder name under data/search/ for a model (shipped name, folder name, or hub id with / -> --)."""
    from .models import SHIPPED_MODELS

    text = str(name)
    if text in SHIPPED_MODELS:
        return text
    path = Path(text).expanduser()
    if path.exists() or text.startswith((".", "/", "~")):
        return path.resolve().name
    return text.replace("/", "--")


def _fingerprint(name) -> str:
    """SHA-256 (16 hex) of the model's safetensors weights when it is a local folder, else of its id."""
    from .models import model_folder

    folder = model_folder(name)
    h = hashlib.sha256()
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    if not files:
        h.update(model_id(name).encode())
    for f in files:
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


_LOADED: dict[str, tuple] = {}


def _load(name):
    from .models import load_model

    key = model_id(name)
    if key not in _LOADED:
        _LOADED.clear()                       # keep at most one model in memory
        _LOADED[key] = load_model(name)
    return _LOADED[key]


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
    import optuna

    if isinstance(storage, optuna.storages.BaseStorage):
        return storage
    if storage is None:
        (REPO / "results").mkdir(exist_ok=True)
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


def make_sampler(name: str, seed: int, deterministic: bool = True):
    """An Optuna sampler by short name ('gp', 'tpe', 'random'), seeded."""
    import optuna

    if name == "gp":
        with warnings.catch_warnings():   # deterministic_objective is marked experimental
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.GPSampler(seed=seed, deterministic_objective=deterministic)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise ValueError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}")


@contextmanager
def _quiet_optuna():
    import optuna

    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(level)


# ---------------------------------------------------------------------------------------
# objectives
# ---------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _prompt_texts(n_prompts: int, seed: int) -> tuple[str, ...]:
    from .corpus import prompts                       # scanning the stdlib takes ~1-3 s: once per process

    return tuple(p.text for p in prompts(n_prompts, seed=seed))


def _policy_factory(spec: str) -> Callable:
    from .policies import AdaptiveThreshold, FixedK

    if spec == "adaptive":
        return AdaptiveThreshold
    if spec.startswith("fixed:"):
        k = int(spec.split(":", 1)[1])
        FixedK(k)                                                      # validates k
        return lambda: FixedK(k)
    raise ValueError(f"policy must be 'adaptive' or 'fixed:K', got {spec!r}")


class ModelledObjective:
    """alpha(z) from teacher-forced agreement -> predicted ms/token from the cost model."""

    name = "modelled"

    def __init__(self, model, tokenizer, cost_model, prompt_texts: list[str], n_tokens: int = 32):
        from .agreement import AgreementProbe

        self.model, self.cost_model = model, cost_model
        self.probe = AgreementProbe.from_prompts(model, tokenizer, prompt_texts, n_tokens)
        self.baseline_ms = cost_model.full_step_ms

    def evaluate(self, skip: SkipSet) -> dict:
        from .costmodel import predict

        alpha = self.probe.agreement(skip)
        pred = predict(self.cost_model, skip, alpha)
        return {"value": pred.ms_per_token, "alpha": alpha, "gamma": pred.gamma,
                "tokens_per_step": pred.tokens_per_step, "speedup": pred.speedup}


class MeasuredObjective:
    """Wall-clock ms per generated token of greedy speculative decoding (prefill excluded)."""

    name = "measured"

    def __init__(self, model, tokenizer, prompt_texts: list[str], max_new_tokens: int = 32, policy: str = "adaptive"):
        self.model, self.max_new_tokens = model, max_new_tokens
        self.policy_factory = _policy_factory(policy)
        self.inputs = [tokenizer(t, return_tensors="pt", add_special_tokens=False)["input_ids"] for t in prompt_texts]
        self.evaluate(SkipSet())                                            # warm-up
        # plain greedy decoding per token, prefill excluded (as for the speculative runs), median of 3
        per_token = [self._plain_ms_per_token() for _ in range(3)]
        self.baseline_ms = statistics.median(per_token)

    @torch.inference_mode()
    def _plain_ms_per_token(self) -> float:
        # Not autoregressive_generate: this loop is timed exactly like the speculative runs below (cache of the
        # prompt minus its last token, then one forward per emitted token), so the ratio is like for like.
        from .cache import new_cache
        from .decoding import forward_tokens

        seconds, tokens = 0.0, 0
        for ids in self.inputs:
            cache = new_cache(self.model)
            if ids.shape[1] > 1:
                forward_tokens(self.model, ids[:, :-1], 0, cache, logits_to_keep=1)
            token, position = int(ids[0, -1]), ids.shape[1] - 1
            t0 = time.perf_counter()
            for _ in range(self.max_new_tokens):
                token = int(forward_tokens(self.model, [token], position, cache, logits_to_keep=1)[-1].argmax())
                position += 1
            seconds += time.perf_counter() - t0
            tokens += self.max_new_tokens
        return 1e3 * seconds / tokens

    def evaluate(self, skip: SkipSet) -> dict:
        from .decoding import speculative_generate

        policy = self.policy_factory()
        seconds, emitted, accepted, drafted, steps = 0.0, 0, 0, 0, 0
        for ids in self.inputs:
            trace = speculative_generate(self.model, ids, skip=skip, policy=policy, max_new_tokens=self.max_new_tokens,
                                         eos_token_id=[]).trace
            seconds += trace.total_s - trace.prefill_s
            emitted, accepted = emitted + trace.n_emitted, accepted + trace.n_accepted
            drafted, steps = drafted + trace.n_drafted, steps + len(trace.steps)
        value = 1e3 * seconds / emitted
        return {"value": value, "acceptance_rate": accepted / drafted if drafted else float("nan"),
                "tokens_per_step": emitted / steps, "drafted_per_step": drafted / steps,
                "speedup": getattr(self, "baseline_ms", float("nan")) / value}


def _settings(objective: str, overrides: dict) -> dict:
    settings = dict(DEFAULT_SETTINGS[objective])
    for k, v in overrides.items():
        if v is not None and k in settings:
            settings[k] = v
    for k in ("n_prompts", "n_tokens", "max_new_tokens"):
        if k in settings and (isinstance(settings[k], bool) or not isinstance(settings[k], int) or settings[k] < 1):
            raise ValueError(f"{k} must be an integer >= 1, got {settings[k]!r}")
    if "policy" in settings:
        _policy_factory(settings["policy"])
    return settings


def _build_objective(objective: str, model, tokenizer, settings: dict, cost_model=None):
    texts = list(_prompt_texts(settings["n_prompts"], settings["prompt_seed"]))
    if objective == "modelled":
        return ModelledObjective(model, tokenizer, cost_model, texts, settings["n_tokens"])
    return MeasuredObjective(model, tokenizer, texts, settings["max_new_tokens"], settings["policy"])


# ---------------------------------------------------------------------------------------
# the study
# ---------------------------------------------------------------------------------------
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

    @property
    def best_speedup(self) -> float:
        return self.baseline_ms / self.best_value if self.best_value else float("nan")


def _feasible_trials(study) -> list:
    import optuna

    return [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if t.value is not None and t.user_attrs.get("eval", {}).get("feasible", True)]


def _default_study_name(model, objective: str, bucket) -> str:
    name = f"{model_key(model)}-{objective}"
    if bucket is not None:
        name += f"-ratio{bucket[0]:g}-{bucket[1]:g}"
    return name


def _expected_attrs(model, objective, n_layers, bucket, settings) -> dict:
    return {
        "model": model_id(model),
        "model_fingerprint": _fingerprint(model),
        "objective": objective,
        "search_space": {"n_layers": n_layers, "params": param_names(n_layers), "low": 0, "high": 1},
        "ratio_bucket": list(bucket) if bucket else None,
        "settings": settings,
    }


def _check_attrs(study_name: str, found: dict, expected: dict) -> None:
    labels = {"model": "model", "model_fingerprint": "model weights", "objective": "objective",
              "search_space": "search space", "ratio_bucket": "ratio bucket", "settings": "objective settings"}
    diff = [k for k in expected if found.get(k) != expected[k]]
    if diff:
        lines = "; ".join(f"{labels[k]}: study has {found.get(k)!r}, asked for {expected[k]!r}" for k in diff)
        raise ValueError(f"study {study_name!r} already exists with a different {', '.join(labels[k] for k in diff)} "
                         f"({lines}). Choose another --study-name (the existing study was left untouched).")


def _wait_for_attrs(study, timeout_s: float = 30.0) -> dict:
    """A study another worker just created may not have its attributes yet: wait for the marker."""
    deadline = time.monotonic() + timeout_s
    while True:
        attrs = study.user_attrs
        if attrs.get(_STUDY_MARKER):
            return attrs
        if study.get_trials(deepcopy=False) or time.monotonic() > deadline:
            raise ValueError(f"study {study.study_name!r} exists but was not created by labkit.search "
                             "(no labkit attributes); choose another --study-name")
        time.sleep(0.2)


def _open_study(storage, study_name: str, sampler):
    """(study, attrs) of an existing study, or (None, None)."""
    import optuna

    try:
        study = optuna.load_study(study_name=study_name, storage=storage, sampler=sampler)
    except KeyError:
        return None, None
    return study, _wait_for_attrs(study)


def _stored_cost_model(storage, expected: dict):
    """The newest cost model another study of the same model (same weights) in this storage recorded.

    Reusing it keeps every study of a model (all ratio buckets) in one currency of milliseconds.
    """
    import optuna

    from .costmodel import CostModel

    found = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        attrs = s.user_attrs
        if (attrs.get(_STUDY_MARKER) and attrs.get("cost_model") and attrs.get("model") == expected["model"]
                and attrs.get("model_fingerprint") == expected["model_fingerprint"]):
            found.append(attrs["cost_model"])
    if not found:
        return None
    return CostModel.from_dict(max(found, key=lambda d: d.get("measured_at", "")))


def _model_card_sets(model, bucket, n_layers: int) -> dict[str, SkipSet]:
    """Sets of the model card's greedy-elimination path (its ``robustness.json``) that fall in ``bucket``.

    A short ratio-bucket study starts from them: greedy elimination already found good sets of every
    size, and 25 trials of a 2L-dimensional search rarely do better from scratch. None without a card.
    """
    from .robustness import greedy_path_sets

    return {f"model card's greedy elimination, {skip.n_skipped} skipped": skip
            for skip in greedy_path_sets(model, n_layers) if _in_bucket(skip.ratio(n_layers), bucket)}


def _known_good_sets(storage, expected: dict, bucket, n_layers: int, k: int = 3, exclude=()) -> dict[str, SkipSet]:
    """The ``k`` best sets inside ``bucket`` that other studies of the same model and objective evaluated.

    A new ratio-bucket study is warm-started with them, so it starts from what the storage knows.
    """
    import optuna

    same = ("model", "model_fingerprint", "objective", "settings", "search_space")
    scored = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        if not s.user_attrs.get(_STUDY_MARKER) or any(s.user_attrs.get(key) != expected[key] for key in same):
            continue
        for t in _feasible_trials(optuna.load_study(study_name=s.study_name, storage=storage)):
            skip = skip_from_params(t.params, n_layers)
            if _in_bucket(skip.ratio(n_layers), bucket):
                scored.append((t.value, skip, f"best known in the bucket ({s.study_name} #{t.number})"))
    out, seen = {}, set(exclude)
    for _, skip, label in sorted(scored, key=lambda x: x[0]):
        if skip not in seen and len(out) < k:
            seen.add(skip)
            out[label] = skip
    return out


def _check_trials(trials) -> int:
    if isinstance(trials, bool) or not isinstance(trials, int):
        raise TypeError(f"trials must be an integer >= 1, got {trials!r}")
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    return trials


def run_search(model="default", *, objective: str = "modelled", trials: int = 100, sampler: str = "gp", seed: int = 0,
               storage=None, study_name: str | None = None, ratio_bucket=None, n_prompts: int | None = None,
               n_tokens: int | None = None, max_new_tokens: int | None = None, policy: str | None = None,
               prompt_seed: int | None = None, cost_model=None, warm_start: bool = True, progress: bool = True,
               timeout: float | None = None) -> SearchResult:
    """Run (or resume) ``trials`` more trials of the skip-set search; see the module docstring.

    ``model``: a shipped name or a model folder. ``storage``: Optuna URL/path (default
    ``sqlite:///results/search.db``). ``cost_model``: a :class:`~labkit.costmodel.CostModel` to use
    for a new ``modelled`` study (default: the newest one another study of the same model in this
    storage recorded, else measured now); a resumed study always reuses the one it stored.
    """
    import optuna

    t_start = time.perf_counter()
    trials = _check_trials(trials)
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if sampler not in SAMPLERS:
        raise ValueError(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}")
    bucket = _check_bucket(ratio_bucket)
    settings = _settings(objective, {"n_prompts": n_prompts, "n_tokens": n_tokens, "max_new_tokens": max_new_tokens,
                                     "policy": policy, "prompt_seed": prompt_seed})
    store = open_storage(storage)
    model_obj, tokenizer = _load(model)
    L = int(model_obj.config.num_hidden_layers)
    _check_bucket(bucket, L)
    study_name = study_name or _default_study_name(model, objective, bucket)
    expected = _expected_attrs(model, objective, L, bucket, settings)
    names = param_names(L)

    with _quiet_optuna():
        study, attrs = _open_study(store, study_name, None)
        created = False
        if study is not None:
            _check_attrs(study_name, attrs, expected)
        if objective == "modelled":
            from .costmodel import CostModel, measure_cost_model

            if study is not None and attrs.get("cost_model"):
                cost_model = CostModel.from_dict(attrs["cost_model"])
            elif cost_model is None:
                cost_model = (_stored_cost_model(store, expected)
                              or measure_cost_model(model_obj, model_name=model_id(model)))
            if cost_model.n_layers != L:
                raise ValueError(f"cost_model is for {cost_model.n_layers} layers, the model has {L}")
        if study is None:
            try:
                study = optuna.create_study(study_name=study_name, storage=store, direction="minimize")
                created = True
            except optuna.exceptions.DuplicatedStudyError:       # another worker was faster
                study, attrs = _open_study(store, study_name, None)
                _check_attrs(study_name, attrs, expected)
                if objective == "modelled" and attrs.get("cost_model"):
                    cost_model = CostModel.from_dict(attrs["cost_model"])
        if created:
            for key, value in expected.items():
                study.set_user_attr(key, value)
            study.set_user_attr("unit", UNIT)
            if cost_model is not None:
                study.set_user_attr("cost_model", cost_model.to_dict())
            # the marker goes last among the attributes (other workers wait for it) but before the
            # warm-start trials, so a worker that sees trials without a marker knows it is no labkit study
            study.set_user_attr(_STUDY_MARKER, {"version": 1, "created_at": time.strftime("%Y-%m-%dT%H:%M:%S")})
            if warm_start:
                starts = {label: skip for label, skip in warm_start_sets(L).items()
                          if bucket is None or _in_bucket(skip.ratio(L), bucket)}
                if bucket is not None:
                    starts.update({label: skip for label, skip in _model_card_sets(model, bucket, L).items()
                                   if skip not in starts.values()})
                    starts.update(_known_good_sets(store, expected, bucket, L, exclude=set(starts.values())))
                for label, skip in starts.items():
                    study.enqueue_trial(params_from_skip(skip, L), user_attrs={"warm_start": label})

        evaluator = _build_objective(objective, model_obj, tokenizer, settings, cost_model)
        baseline = evaluator.baseline_ms
        n_before = sum(1 for t in study.get_trials(deepcopy=False) if t.state != optuna.trial.TrialState.WAITING)
        # a resumed study gets a different (still deterministic) seed, so it does not replay its first run
        study.sampler = make_sampler(sampler, seed + n_before, deterministic=objective == "modelled")

        worker = f"{socket.gethostname()}:{os.getpid()}"

        def objective_fn(trial) -> float:
            mask = [bool(trial.suggest_int(name, 0, 1)) for name in names]
            skip = SkipSet.from_mask(mask)
            record = {"ratio": skip.ratio(L), "n_skipped": skip.n_skipped, "feasible": True, "worker": worker}
            if bucket is not None and not _in_bucket(record["ratio"], bucket):
                d = _blocks_outside(skip.n_skipped, L, bucket)
                record.update(feasible=False, blocks_outside=d)
                trial.set_user_attr("eval", record)
                return baseline * (2 + d)
            result = evaluator.evaluate(skip)
            value = result.pop("value")
            record.update({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.items()})
            trial.set_user_attr("eval", record)
            return value

        best = [min((t.value for t in _feasible_trials(study)), default=math.inf)]
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=trials, desc=f"{study_name} ({sampler})", unit="trial", dynamic_ncols=True)
            if math.isfinite(best[0]):
                bar.set_postfix_str(f"best {best[0]:.3f} ms/token")

        ran = [0]

        def callback(_study, trial) -> None:
            ran[0] += 1
            feasible = trial.user_attrs.get("eval", {}).get("feasible", True)
            if trial.state == optuna.trial.TrialState.COMPLETE and feasible:
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

    feasible = _feasible_trials(study)
    top = min(feasible, key=lambda t: t.value) if feasible else None
    return SearchResult(
        study=study, best_skip=skip_from_params(top.params, L) if top else None,
        best_value=top.value if top else math.inf, baseline_ms=baseline,
        n_complete=sum(1 for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE),
        n_new=ran[0], seconds=time.perf_counter() - t_start,
        extra={"study_name": study_name, "created": created, "cost_model": cost_model},
    )


# ---------------------------------------------------------------------------------------
# export and read-back
# ---------------------------------------------------------------------------------------
def _regenerate_hint(model) -> str:
    m = str(model)
    return (f"`python -m labkit.search --model {m} --objective modelled --trials 100` (add `--per-bucket` for every "
            f"skip-ratio bucket), then `python -m labkit.search export --model {m}`")


def _trial_rows(study, n_layers: int) -> list[dict]:
    import optuna

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
            "warm_start": t.user_attrs.get("warm_start", ""),
            "completed_at": t.datetime_complete.isoformat(timespec="seconds") if t.datetime_complete else "",
            "duration_s": t.duration.total_seconds() if t.duration else None,
        })
    return rows


def _best_entry(row: dict) -> dict:
    return {"skip": {"attention": list(row["attention"]), "mlp": list(row["mlp"])},
            "value_ms_per_token": row["value_ms_per_token"], "ratio": row["ratio"], "n_skipped": row["n_skipped"],
            "speedup": row["speedup"], "study": row["study"],
            "trial": row["trial"]}


def export_results(model="default", *, storage=None, objective: str | None = None, out_dir=None) -> Path:
    """Write best.json, trials.csv and trials.json for ``model`` under data/search/<model>/; returns the folder.

    Gathers every labkit study of that model (all ratio buckets) with ``objective`` (default: the
    only objective present, or 'measured' if both are).
    """
    import optuna

    store = open_storage(storage)
    mid = model_id(model)
    summaries = [s for s in optuna.get_all_study_summaries(store, include_best_trial=False)
                 if s.user_attrs.get(_STUDY_MARKER) and s.user_attrs.get("model") == mid]
    if not summaries:
        raise ValueError(f"storage {str(storage or DEFAULT_STORAGE)!r} holds no labkit search study of model {mid!r}; "
                         f"run {_regenerate_hint(model)}")
    fingerprint = _fingerprint(model)
    current = [s for s in summaries if s.user_attrs.get("model_fingerprint") == fingerprint]
    if not current:
        raise ValueError(f"the studies of model {mid!r} in this storage were run on other weights than the model "
                         f"has now ({', '.join(sorted(s.study_name for s in summaries))}); run "
                         f"{_regenerate_hint(model)} with a new --study-name")
    summaries = current
    present = sorted({s.user_attrs["objective"] for s in summaries})
    if objective is None:
        objective = present[0] if len(present) == 1 else "measured"
    if objective not in present:
        raise ValueError(f"no {objective!r} study of model {mid!r} in the storage (found: {', '.join(present)})")
    summaries = [s for s in summaries if s.user_attrs["objective"] == objective]
    n_layers = summaries[0].user_attrs["search_space"]["n_layers"]
    rows = []
    for s in sorted(summaries, key=lambda s: s.study_name):
        rows.extend(_trial_rows(optuna.load_study(study_name=s.study_name, storage=store), n_layers))
    if not rows:
        raise ValueError(f"the studies of model {mid!r} hold no completed trial yet; run {_regenerate_hint(model)}")
    overall = min(rows, key=lambda r: r["value_ms_per_token"])
    buckets = []
    for i, (lo, hi) in enumerate(ratio_buckets()):
        inside = [r for r in rows if _bucket_index(r["ratio"]) == i]
        best = min(inside, key=lambda r: r["value_ms_per_token"]) if inside else None
        buckets.append({"lo": lo, "hi": hi, "n_trials": len(inside), "best": _best_entry(best) if best else None})
    out = Path(out_dir) if out_dir else SEARCH_DIR / model_key(model)
    out.mkdir(parents=True, exist_ok=True)
    baselines = {}
    for s in summaries:
        cm = s.user_attrs.get("cost_model")
        if cm:
            baselines[s.study_name] = cm.get("full_step_ms")
    payload = {
        "model": mid, "model_fingerprint": summaries[0].user_attrs.get("model_fingerprint"), "objective": objective,
        "unit": UNIT, "n_layers": n_layers, "bucket_width": BUCKET_WIDTH,
        "buckets_note": "bucket i holds skip ratios in [lo, hi); the last also holds ratio 1",
        "studies": [{"name": s.study_name, "ratio_bucket": s.user_attrs.get("ratio_bucket"),
                     "settings": s.user_attrs.get("settings"), "n_trials": s.n_trials} for s in summaries],
        "n_trials": len(rows), "overall": _best_entry(overall), "buckets": buckets,
        "full_step_ms": baselines, "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "regenerate": _regenerate_hint(model),
    }
    (out / "best.json").write_text(json.dumps(payload, indent=2))
    (out / "trials.json").write_text(json.dumps(rows, indent=1))
    with open(out / "trials.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for r in rows:
            writer.writerow({**r, "attention": " ".join(map(str, r["attention"])), "mlp": " ".join(map(str, r["mlp"]))})
    return out


def best_skip_set(model: str = "default", ratio: float | None = None, *, search_dir=None,
                  skipping_something: bool = False) -> SkipSet:
    """The committed best skip set of ``model`` (overall, or in the 0.125-wide skip-ratio bucket holding ``ratio``).

    ``skipping_something=True`` (overall only): a set that drafts with fewer blocks than the full model:
    the overall best, or, where that is to skip nothing, the fastest per-bucket best that skips a block.
    """
    folder = Path(search_dir) if search_dir else SEARCH_DIR
    path = folder / model_key(model) / "best.json"
    if not path.exists():
        raise FileNotFoundError(f"no search results for model {str(model)!r} at {path}; regenerate them with "
                                f"{_regenerate_hint(model)}")
    data = json.loads(path.read_text())
    if ratio is None and skipping_something and not SkipSet.from_dict(data["overall"]["skip"]):
        found = [b["best"] for b in data["buckets"] if b["best"] and b["best"]["n_skipped"] > 0]
        if not found:
            raise LookupError(f"no searched skip set of model {str(model)!r} skips anything")
        return SkipSet.from_dict(min(found, key=lambda f: f["value_ms_per_token"])["skip"])
    if ratio is None:
        return SkipSet.from_dict(data["overall"]["skip"])
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or math.isnan(ratio):
        raise TypeError(f"ratio must be a number in [0, 1] or None, got {ratio!r}")
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must be in [0, 1], got {ratio}")
    width = data.get("bucket_width", BUCKET_WIDTH)
    bucket = data["buckets"][_bucket_index(float(ratio), width)]
    if bucket["best"] is None:
        have = [f"[{b['lo']:g}, {b['hi']:g})" for b in data["buckets"] if b["best"]]
        raise LookupError(
            f"no searched skip set of model {str(model)!r} has a skip ratio in [{bucket['lo']:g}, {bucket['hi']:g}) "
            f"(buckets with results: {', '.join(have) or 'none'}); run `python -m labkit.search --model {model} "
            f"--ratio-bucket {bucket['lo']:g} {bucket['hi']:g} --trials 40`, then `python -m labkit.search export "
            f"--model {model}`")
    return SkipSet.from_dict(bucket["best"]["skip"])


# ---------------------------------------------------------------------------------------
# sampler comparison and rank agreement
# ---------------------------------------------------------------------------------------
def _best_so_far(values: Iterable[float]) -> list[float]:
    out, best = [], math.inf
    for v in values:
        best = min(best, v)
        out.append(best)
    return out


def compare_samplers(model="default", *, objective: str = "modelled", samplers: Sequence[str] = SAMPLERS,
                     seeds: Sequence[int] = (0, 1, 2), trials: int = 100, warm_start: bool = True,
                     progress: bool = True, cost_model=None, **settings) -> dict:
    """Every sampler at equal ``trials`` for every seed, on one shared objective (in-memory studies).

    Returns ``{"curves": {sampler: [[best-so-far ms/token per trial] per seed]}, "final": ..., "summary": ...}``.
    The summary checks the README targets: GP's median final value within 5 % of the best value
    any method found, and GP's median final value below random search's.
    """
    import optuna

    trials = _check_trials(trials)
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    for s in samplers:
        if s not in SAMPLERS:
            raise ValueError(f"unknown sampler {s!r}; choose one of {', '.join(SAMPLERS)}")
    if not seeds:
        raise ValueError("give at least one seed")
    t_start = time.perf_counter()
    model_obj, tokenizer = _load(model)
    L = int(model_obj.config.num_hidden_layers)
    settings = _settings(objective, settings)
    if objective == "modelled" and cost_model is None:
        from .costmodel import measure_cost_model

        cost_model = measure_cost_model(model_obj, model_name=model_id(model))
    evaluator = _build_objective(objective, model_obj, tokenizer, settings, cost_model)
    names = param_names(L)

    def objective_fn(trial) -> float:
        skip = SkipSet.from_mask([bool(trial.suggest_int(n, 0, 1)) for n in names])
        return evaluator.evaluate(skip)["value"]

    curves: dict[str, list[list[float]]] = {s: [] for s in samplers}
    seconds: dict[str, list[float]] = {s: [] for s in samplers}
    best_sets: dict[str, list[dict]] = {s: [] for s in samplers}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(samplers) * len(seeds) * trials, desc="compare samplers", unit="trial", dynamic_ncols=True)
    with _quiet_optuna():
        for s in samplers:
            for seed in seeds:
                sampler = make_sampler(s, seed, objective == "modelled")
                study = optuna.create_study(direction="minimize", sampler=sampler)
                if warm_start:
                    for label, skip in warm_start_sets(L).items():
                        study.enqueue_trial(params_from_skip(skip, L), user_attrs={"warm_start": label})
                t0 = time.perf_counter()
                cb = [lambda _s, _t: bar.update(1)] if bar is not None else []
                study.optimize(objective_fn, n_trials=trials, callbacks=cb, gc_after_trial=False)
                seconds[s].append(time.perf_counter() - t0)
                values = [t.value for t in study.trials]
                curves[s].append(_best_so_far(values))
                best_sets[s].append(skip_from_params(study.best_trial.params, L).to_dict())
                if bar is not None:
                    bar.set_postfix_str(f"{s} seed {seed}: best {curves[s][-1][-1]:.3f} ms/token")
    if bar is not None:
        bar.close()
    final = {s: [c[-1] for c in curves[s]] for s in samplers}
    best_any = min(min(v) for v in final.values())
    summary = {"best_any_ms_per_token": best_any, "baseline_ms_per_token": evaluator.baseline_ms}
    for s in samplers:
        med_curve = [statistics.median(c[i] for c in curves[s]) for i in range(trials)]
        within = next((i + 1 for i, v in enumerate(med_curve) if v <= 1.05 * best_any), None)
        summary[s] = {"median_final": statistics.median(final[s]), "finals": final[s],
                      "median_trials_to_within_5pct": within, "median_seconds": statistics.median(seconds[s])}
    if "gp" in samplers:
        summary["target_gp_within_5pct"] = summary["gp"]["median_final"] <= 1.05 * best_any
    if "gp" in samplers and "random" in samplers:
        summary["target_gp_median_beats_random"] = summary["gp"]["median_final"] < summary["random"]["median_final"]
    return {"model": model_id(model), "objective": objective, "trials": trials, "seeds": list(seeds),
            "settings": settings, "curves": curves, "final": final, "best_sets": best_sets, "seconds": seconds,
            "summary": summary, "total_seconds": time.perf_counter() - t_start}


def _stratified_sets(n_layers: int, n_sets: int, seed: int, max_ratio: float = 0.75) -> list[SkipSet]:
    rng = random.Random(seed)
    blocks = 2 * n_layers
    sets, seen = [], set()
    tries = 0
    while len(sets) < n_sets and tries < 100 * n_sets:
        tries += 1
        k = round(max_ratio * blocks * (len(sets) + rng.random()) / n_sets)
        skip = SkipSet.from_mask([i in set(rng.sample(range(blocks), k)) for i in range(blocks)])
        if skip not in seen:
            seen.add(skip)
            sets.append(skip)
    return sets


def rank_agreement(model="default", *, n_sets: int = 16, seed: int = 0, skips: Sequence[SkipSet] | None = None,
                   modelled_settings: dict | None = None, measured_settings: dict | None = None, cost_model=None,
                   progress: bool = True) -> dict:
    """Spearman rank correlation between the modelled and the measured objective over skip sets.

    Sets: ``skips`` or ``n_sets`` random sets with skip ratios spread over 0..0.75. Measured runs
    go in a shuffled order so drift in machine load does not line up with the skip ratio.
    """
    from scipy.stats import spearmanr

    model_obj, tokenizer = _load(model)
    L = int(model_obj.config.num_hidden_layers)
    skips = list(skips) if skips is not None else _stratified_sets(L, n_sets, seed)
    if len(skips) < 3:
        raise ValueError("rank agreement needs at least 3 skip sets")
    if cost_model is None:
        from .costmodel import measure_cost_model

        cost_model = measure_cost_model(model_obj, model_name=model_id(model))
    modelled = _build_objective("modelled", model_obj, tokenizer, _settings("modelled", modelled_settings or {}),
                                cost_model)
    measured = _build_objective("measured", model_obj, tokenizer, _settings("measured", measured_settings or {}))
    order = list(range(len(skips)))
    random.Random(seed + 1).shuffle(order)
    rows = [None] * len(skips)
    iterator = order
    if progress:
        from tqdm.auto import tqdm

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
    import optuna

    from .bench import benchmark_prompts

    store = open_storage(storage)
    model_obj, tokenizer = _load(model)
    L = int(model_obj.config.num_hidden_layers)
    best = {}
    for objective in OBJECTIVES:
        name = _default_study_name(model, objective, None)
        try:
            study = optuna.load_study(study_name=name, storage=store)
        except KeyError:
            raise LookupError(f"check needs both studies of {model_id(model)!r}; study {name!r} is missing from the "
                              f"storage: run `python -m labkit.search --model {model} --objective {objective} "
                              f"--trials {40 if objective == 'measured' else 100}` first") from None
        trial = min(_feasible_trials(study), key=lambda t: t.value)
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


# ---------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m labkit.search", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", default="run", choices=["run", "export", "compare", "rank", "check"],
                   help="run (default): search; export: write data/search/<model>/; compare: GP vs TPE vs random; "
                        "rank: Spearman of modelled vs measured")
    p.add_argument("--model", default="default", help="shipped model name or model folder (default: default)")
    p.add_argument("--objective", default=None, choices=OBJECTIVES,
                   help="default: modelled (export: the only objective stored, or measured if both are)")
    p.add_argument("--trials", type=int, default=100, help="trials to run now (per study / per sampler and seed)")
    p.add_argument("--sampler", default="gp", choices=SAMPLERS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--storage", default=None, help=f"Optuna storage URL or path (default {DEFAULT_STORAGE})")
    p.add_argument("--study-name", default=None, help="default: <model>-<objective>[-ratio<lo>-<hi>]")
    p.add_argument("--ratio-bucket", type=float, nargs=2, metavar=("LO", "HI"), default=None)
    p.add_argument("--per-bucket", action="store_true", help=f"one study per {BUCKET_WIDTH}-wide skip-ratio bucket")
    p.add_argument("--prompts", type=int, default=None, help="held-out prompts per evaluation")
    p.add_argument("--tokens", type=int, default=None, help="modelled: continuation tokens scored per prompt")
    p.add_argument("--max-new-tokens", type=int, default=None, help="measured: tokens generated per prompt")
    p.add_argument("--policy", default=None, help="measured: 'adaptive' (default) or 'fixed:K'")
    p.add_argument("--cost-model", default=None, help="modelled: CostModel JSON to use for a new study "
                   "(default: reuse the storage's newest one for this model, else measure now)")
    p.add_argument("--no-warm-start", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--timeout", type=float, default=None, help="stop starting trials after this many seconds")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: batch-1 decoding of the lab's models is fastest on one thread, "
                        "and two threads on a busy 2-core machine made a step 3-15x slower and its timing erratic)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="compare: seeds")
    p.add_argument("--samplers", nargs="+", default=list(SAMPLERS), help="compare: samplers")
    p.add_argument("--n-sets", type=int, default=16, help="rank: skip sets to compare")
    p.add_argument("--out", default=None, help="export: folder; compare/rank: JSON file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    key = model_key(args.model)
    try:
        if args.action == "export":
            out = export_results(args.model, storage=args.storage, objective=args.objective, out_dir=args.out)
            data = json.loads((out / "best.json").read_text())
            print(f"wrote {out}/best.json, trials.csv, trials.json ({data['n_trials']} trials, objective "
                  f"{data['objective']}); best {data['overall']['value_ms_per_token']:.3f} ms/token: "
                  f"{SkipSet.from_dict(data['overall']['skip'])}")
            return 0
        settings = {"n_prompts": args.prompts, "n_tokens": args.tokens, "max_new_tokens": args.max_new_tokens,
                    "policy": args.policy}
        objective = args.objective or "modelled"
        cost_model = None
        if args.cost_model:
            from .costmodel import CostModel

            cost_model = CostModel.load(args.cost_model)
        if args.action == "compare":
            res = compare_samplers(args.model, objective=objective, samplers=args.samplers, seeds=args.seeds,
                                   trials=args.trials, warm_start=not args.no_warm_start,
                                   progress=not args.no_progress, cost_model=cost_model, **settings)
            out = Path(args.out) if args.out else SEARCH_DIR / key / f"compare-{objective}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(res, indent=1))
            print(json.dumps(res["summary"], indent=2))
            print(f"wrote {out} ({res['total_seconds']:.0f} s)")
            return 0
        if args.action == "check":
            result = check_modelled_against_measured(args.model, storage=args.storage)
            print(json.dumps(result, indent=2))
            return 0
        if args.action == "rank":
            res = rank_agreement(args.model, n_sets=args.n_sets, seed=args.seed, progress=not args.no_progress,
                                 cost_model=cost_model,
                                 modelled_settings={k: v for k, v in settings.items() if v is not None},
                                 measured_settings={k: v for k, v in settings.items() if v is not None})
            out = Path(args.out) if args.out else SEARCH_DIR / key / "rank_agreement.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(res, indent=1))
            print(f"Spearman rho {res['spearman_rho']:.3f} (p {res['p_value']:.2g}) over {res['n_sets']} skip sets; "
                  f"wrote {out}")
            return 0
        buckets = ratio_buckets() if args.per_bucket else [tuple(args.ratio_bucket) if args.ratio_bucket else None]
        for bucket in buckets:
            res = run_search(args.model, objective=objective, trials=args.trials, sampler=args.sampler, seed=args.seed,
                             storage=args.storage, study_name=None if args.per_bucket else args.study_name,
                             ratio_bucket=bucket, warm_start=not args.no_warm_start, progress=not args.no_progress,
                             timeout=args.timeout, cost_model=cost_model, **settings)
            print(f"study {res.extra['study_name']}: {res.n_new} new trials, {res.n_complete} complete, "
                  f"{res.seconds:.1f} s; best {res.best_value:.3f} ms/token ({res.best_speedup:.2f}x vs "
                  f"{res.baseline_ms:.3f} ms/token plain): {res.best_skip}")
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted: completed trials are saved; run the same command again to resume", file=sys.stderr)
        return 130
    except (ValueError, TypeError, LookupError, FileNotFoundError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
