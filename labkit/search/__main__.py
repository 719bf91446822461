"""Bayesian optimisation of the skip set (Optuna), and the committed results it leaves.

    python -m labkit.search --model default --objective modelled --trials 100 --sampler gp --seed 0
    python -m labkit.search --model default --per-bucket --trials 40          # one study per ratio bucket
    python -m labkit.search --model default --objective priced --trials 100  # the whole draft configuration
    python -m labkit.search final --model default --objective priced         # its top 5, timed; ships the fastest
    python -m labkit.search export --model default
    python -m labkit.search compare --model default --trials 100 --seeds 0 1 2
    python -m labkit.search rank --model default --n-sets 16
    python -m labkit.search check --model default
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

import torch

from ..artifacts.models import load_model, model_key
from ..artifacts.paths import SEARCH_DIR
from ..artifacts.results import BUCKET_WIDTH, ratio_buckets
from ..core.draft_config import DraftConfig
from ..core.skip import SkipSet
from ..measure.costmodel import CostModel
from .compare import check_modelled_against_measured, compare_samplers, rank_agreement
from .export import export_results
from .objectives import OBJECTIVES
from .final import final_check
from .run import run_search
from .storage import default_study_name
from .samplers import SAMPLERS
from .storage import DEFAULT_STORAGE


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m labkit.search", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", default="run", choices=["run", "export", "compare", "rank", "check", "final"],
                   help="run (default): search; export: write data/search/<model>/; compare: GP vs TPE vs random; "
                        "rank: Spearman of modelled vs measured; final: time a priced study's top configurations")
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
    p.add_argument("--sources", nargs="+", default=None,
                   help="priced: prompt sources whose first --prompts prompts choose (default: stdlib packages)")
    p.add_argument("--top-k", type=int, default=5, help="final: configurations to time")
    p.add_argument("--repeats", type=int, default=3, help="final: interleaved repetitions")
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
        if args.action == "final":
            name = args.study_name or default_study_name(args.model, args.objective or "priced", None)
            record = final_check(args.model, study_name=name, storage=args.storage, top_k=args.top_k,
                                 repeats=args.repeats, progress=not args.no_progress)
            print(f"{name}: trial #{record['chosen_trial']} at {record['geomean_speedup']:.2f}x the plain loop "
                  f"(geometric mean over sources, {record['seconds']:.0f} s): {DraftConfig.from_dict(record['config'])}")
            return 0
        if objective == "priced":
            settings["sources"] = args.sources
        cost_model = CostModel.load(args.cost_model) if args.cost_model else None
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
        loaded = load_model(args.model)
        for bucket in buckets:
            res = run_search(args.model, objective=objective, trials=args.trials, sampler=args.sampler, seed=args.seed,
                             storage=args.storage, study_name=None if args.per_bucket else args.study_name,
                             ratio_bucket=bucket, warm_start=not args.no_warm_start, progress=not args.no_progress,
                             timeout=args.timeout, cost_model=cost_model, loaded=loaded, **settings)
            print(f"study {res.extra['study_name']}: {res.n_new} new trials, {res.n_complete} complete, "
                  f"{res.seconds:.1f} s; best {res.best_value:.3f} ms/token ({res.best_speedup:.2f}x vs "
                  f"{res.baseline_ms:.3f} ms/token plain): {res.best_config or res.best_skip}")
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted: completed trials are saved; run the same command again to resume", file=sys.stderr)
        return 130
    except (ValueError, TypeError, LookupError, FileNotFoundError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2



if __name__ == "__main__":
    sys.exit(main())
