"""Bayesian optimisation of the skip set (Optuna), and the committed results it leaves.

    python -m labkit search --model default --objective modelled --trials 100 --sampler gp --seed 0
    python -m labkit search --model default --per-bucket --trials 40          # one study per ratio bucket
    python -m labkit search --model default --objective priced --trials 100  # the whole draft configuration
    python -m labkit search final --model default --objective priced         # its top 5, timed; ships the fastest
    python -m labkit search export --model default
    python -m labkit search --storage postgresql+psycopg://user@host/db --study-name s   # on each worker machine
    python -m labkit search --model path/to/checkpoint --device cuda --dtype bf16 --objective measured --timeout 600
    python -m labkit search compare --model default --trials 100 --seeds 0 1 2
    python -m labkit search rank --model default --n-sets 16
    python -m labkit search check --model default
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from ..artifacts import arguments
from ..artifacts.models import model_key
from ..artifacts.paths import SEARCH_DIR
from ..artifacts.prompts import BUILTIN_SOURCES
from ..artifacts.results import BUCKET_WIDTH, ratio_buckets
from ..core.draft_config import DraftConfig
from ..core.skip import SkipSet
from ..measure.costs.costmodel import CostModel
from .compare import check_modelled_against_measured, compare_samplers, rank_agreement
from .export import export_results
from .final import FinalConfig, final_check
from .inputs import SearchConfig, SearchModel
from .objectives import DEFAULT_SETTINGS, OBJECTIVES
from .run import run_search
from .samplers import SAMPLERS
from .storage import (
    DEFAULT_STORAGE,
    GRACE_PERIOD_S,
    HEARTBEAT_INTERVAL_S,
    check_heartbeat,
    default_study_name,
    open_storage,
    storage_file,
)

#: the form this command is called by (its usage line)
PROG = "python -m labkit search"


def _parser() -> argparse.ArgumentParser:
    p = arguments.command_parser(__doc__, PROG, raw=True)
    p.add_argument("action", nargs="?", default="run", choices=["run", "export", "compare", "rank", "check", "final"],
                   help="run (default): search; export: write data/search/<model>/; compare: GP vs TPE vs random; "
                        "rank: Spearman of modelled vs measured; final: time a priced study's top configurations")
    p.add_argument("--model", type=arguments.model, default="default",
                   help="shipped model name or model folder (default: default)")
    p.add_argument("--device", type=arguments.device, default=None,
                   help="where the model runs: cpu (default), cuda, cuda:N, mps or auto; "
                   "export: only the studies run on that kind of device")
    p.add_argument("--dtype", type=arguments.dtype, default=None,
                   help="its precision: fp32 (default), bf16 or fp16 (a study records it; "
                   "export: only the studies run in it)")
    p.add_argument("--objective", default=None, choices=OBJECTIVES,
                   help="default: modelled (export: the only objective stored, or measured if both are)")
    p.add_argument("--trials", type=arguments.count, default=100,
                   help="trials to run now (per study / per sampler and seed)")
    p.add_argument("--sampler", default="gp", choices=SAMPLERS)
    p.add_argument("--seed", type=arguments.natural, default=0)
    p.add_argument("--storage", default=None, help=f"Optuna storage URL or path (default {DEFAULT_STORAGE})")
    p.add_argument("--heartbeat-interval", type=arguments.count, default=HEARTBEAT_INTERVAL_S, metavar="S",
                   help=f"run: seconds between a running trial's heartbeats (default {HEARTBEAT_INTERVAL_S})")
    p.add_argument("--grace-period", type=arguments.count, default=GRACE_PERIOD_S, metavar="S",
                   help="run: a RUNNING trial whose heartbeat is older than this (a killed worker's) is marked FAIL "
                        f"when a worker starts a trial (default {GRACE_PERIOD_S})")
    p.add_argument("--study-name", default=None, help="default: <model>-<objective>[-ratio<lo>-<hi>]")
    p.add_argument("--ratio-bucket", type=arguments.fraction, nargs=2, metavar=("LO", "HI"), default=None)
    p.add_argument("--per-bucket", action="store_true", help=f"one study per {BUCKET_WIDTH}-wide skip-ratio bucket")
    p.add_argument("--prompts", type=arguments.count, default=None, help="held-out prompts per evaluation")
    p.add_argument("--tokens", type=arguments.count, default=None,
                   help="modelled: continuation tokens scored per prompt")
    p.add_argument("--max-new-tokens", type=arguments.count, default=None, help="measured: tokens generated per prompt")
    p.add_argument("--policy", default=None, help="measured: 'adaptive' (default) or 'fixed:K'")
    p.add_argument("--sources", nargs="+", choices=BUILTIN_SOURCES, default=None,
                   help="priced: prompt sources whose first --prompts prompts choose (default: stdlib packages)")
    p.add_argument("--top-k", type=arguments.count, default=5, help="final: configurations to time")
    p.add_argument("--repeats", type=arguments.count, default=3, help="final: interleaved repetitions")
    p.add_argument("--cost-model", type=arguments.existing_file, default=None,
                   help="modelled: CostModel JSON to use for a new study "
                   "(default: reuse the storage's newest one for this model, else measure now)")
    p.add_argument("--no-warm-start", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--timeout", type=arguments.positive, default=None,
                   help="stop starting trials after this many seconds")
    p.add_argument("--threads", type=arguments.natural, default=1,
                   help="torch threads (default 1: batch-1 decoding of the lab's models is fastest on one thread, "
                        "and two threads on a busy 2-core machine made a step 3-15x slower and its timing erratic)")
    p.add_argument("--seeds", type=arguments.natural, nargs="+", default=[0, 1, 2], help="compare: seeds")
    p.add_argument("--samplers", nargs="+", choices=SAMPLERS, default=list(SAMPLERS), help="compare: samplers")
    p.add_argument("--n-sets", type=arguments.at_least(2), default=16, help="rank: skip sets to compare")
    p.add_argument("--out", type=arguments.output_path, default=None, help="export: folder; compare/rank: JSON file")
    return p


def _configs(args) -> list[SearchConfig]:
    """The studies ``run`` will run: one, or one per ratio bucket (``--per-bucket``); each checked when built."""
    buckets = ratio_buckets() if args.per_bucket else [tuple(args.ratio_bucket) if args.ratio_bucket else None]
    return [_config(args, args.objective or "modelled", bucket, None if args.per_bucket else args.study_name)
            for bucket in buckets]


#: the actions that only read the studies in the storage (a missing SQLite file is an error, not a new empty one)
READING_ACTIONS = ("export", "final", "check")

#: the options that set an objective's settings, and the setting each one sets
SETTING_FLAGS = {"--prompts": "n_prompts", "--tokens": "n_tokens", "--max-new-tokens": "max_new_tokens",
                 "--policy": "policy", "--sources": "sources"}


def _check_arguments(args) -> None:
    """The checks that read several options at once, before any work (argparse has read each one): a setting the
    study's objective does not read is an error, not silently dropped (``--sources`` is read by ``priced`` only)."""
    check_heartbeat(args.heartbeat_interval, args.grace_period)
    stored = storage_file(args.storage)
    if args.action in READING_ACTIONS and stored is not None and not stored.is_file():
        raise ValueError(f"--storage: no study storage at {stored}; {args.action} reads the studies a run wrote")
    objective = args.objective or "modelled"
    read = set(DEFAULT_SETTINGS[objective]) - ({"sources"} if objective != "priced" else set())
    if args.action in ("run", "compare"):
        for flag, setting in SETTING_FLAGS.items():
            if getattr(args, flag[2:].replace("-", "_")) is not None and setting not in read:
                readers = [o for o in OBJECTIVES if setting in DEFAULT_SETTINGS[o]
                           and (setting != "sources" or o == "priced")]
                raise ValueError(f"{flag} is not read by the {objective} objective (only by "
                                 f"{' and '.join(readers)}: --objective {readers[0]})")
    if args.action == "run":
        _configs(args)
    elif args.action == "compare":
        _config(args, args.objective or "modelled")


def _config(args, objective: str, bucket=None, study_name: str | None = None) -> SearchConfig:
    """The SearchConfig of the command line's settings (``--sources`` only for ``priced``)."""
    return SearchConfig(objective=objective, sampler=args.sampler, seed=args.seed, ratio_bucket=bucket,
                        study_name=study_name, warm_start=not args.no_warm_start, n_prompts=args.prompts,
                        n_tokens=args.tokens, max_new_tokens=args.max_new_tokens, policy=args.policy,
                        sources=args.sources if objective == "priced" else None)


def _export(args) -> int:
    out = export_results(args.model, storage=args.storage, objective=args.objective, out_dir=args.out,
                         dtype=args.dtype, device=args.device)
    data = json.loads((out / "best.json").read_text())
    print(f"wrote {out}/best.json, trials.csv, trials.json ({data['n_trials']} trials, objective "
          f"{data['objective']}); best {data['overall']['value_ms_per_token']:.3f} ms/token: "
          f"{SkipSet.from_dict(data['overall']['skip'])}")
    return 0


def _final(args) -> int:
    subject = SearchModel.resolve(args.model, device=args.device, dtype=args.dtype)
    name = args.study_name or default_study_name(subject.identity, args.objective or "priced", None,
                                                 subject.precision)
    record = final_check(subject, study_name=name, storage=args.storage, progress=not args.no_progress,
                         config=FinalConfig(top_k=args.top_k, repeats=args.repeats))
    print(f"{name}: trial #{record['chosen_trial']} at {record['geomean_speedup']:.2f}x the plain loop "
          f"(geometric mean over sources, {record['seconds']:.0f} s): {DraftConfig.from_dict(record['config'])}")
    return 0


def _write_json(path: Path, record: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    return path


def _compare(args) -> int:
    objective = args.objective or "modelled"
    res = compare_samplers(args.model, _config(args, objective), samplers=args.samplers, seeds=args.seeds,
                           trials=args.trials, progress=not args.no_progress, cost_model=_cost_model(args),
                           device=args.device, dtype=args.dtype)
    out = _write_json(Path(args.out) if args.out else SEARCH_DIR / model_key(args.model) /
                      f"compare-{objective}.json", res)
    print(json.dumps(res["summary"], indent=2))
    print(f"wrote {out} ({res['total_seconds']:.0f} s)")
    return 0


def _check(args) -> int:
    print(json.dumps(check_modelled_against_measured(args.model, storage=args.storage, device=args.device,
                                                     dtype=args.dtype), indent=2))
    return 0


def _rank(args) -> int:
    given = {"n_prompts": args.prompts, "n_tokens": args.tokens, "max_new_tokens": args.max_new_tokens,
             "policy": args.policy}
    settings = {k: v for k, v in given.items() if v is not None}
    res = rank_agreement(args.model, n_sets=args.n_sets, seed=args.seed, progress=not args.no_progress,
                         cost_model=_cost_model(args), modelled_settings=settings, measured_settings=settings,
                         device=args.device, dtype=args.dtype)
    out = _write_json(Path(args.out) if args.out else SEARCH_DIR / model_key(args.model) / "rank_agreement.json", res)
    print(f"Spearman rho {res['spearman_rho']:.3f} (p {res['p_value']:.2g}) over {res['n_sets']} skip sets; "
          f"wrote {out}")
    return 0


def _run(args) -> int:
    """One study, or one per ratio bucket (``--per-bucket``), all of one model loaded and identified once."""
    configs = _configs(args)                                            # every config checked before any work
    subject = SearchModel.resolve(args.model, cost_model=_cost_model(args), device=args.device, dtype=args.dtype)
    store = open_storage(args.storage, heartbeat_interval=args.heartbeat_interval, grace_period=args.grace_period)
    for config in configs:
        res = run_search(subject, config, trials=args.trials, storage=store, progress=not args.no_progress,
                         timeout=args.timeout)
        print(f"study {res.extra['study_name']}: {res.n_new} new trials, {res.n_complete} complete, "
              f"{res.seconds:.1f} s; best {res.best_value:.3f} ms/token ({res.best_speedup:.2f}x vs "
              f"{res.baseline_ms:.3f} ms/token plain): {res.best_config or res.best_skip}")
    return 0


def _cost_model(args) -> CostModel | None:
    return CostModel.load(args.cost_model) if args.cost_model else None


ACTIONS = {"run": _run, "export": _export, "final": _final, "compare": _compare, "check": _check, "rank": _rank}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m labkit search [action] ...``: exit status 0; a bad argument ends in its parser (one line, exit
    status 2) before any work. A failure while working, or Ctrl-C, is the command line's to report (``labkit.cli``:
    one line; completed trials are saved and the same command resumes)."""
    parser = _parser()
    args = parser.parse_args(argv)
    arguments.checked(parser, _check_arguments, args)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return ACTIONS[args.action](args)


if __name__ == "__main__":
    sys.exit(main())
