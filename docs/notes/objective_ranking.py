"""How well does each search objective rank the *top* of a pool of drafts against measured decode speed?

A search returns its best configuration, so what matters is not an objective's rank correlation over a whole pool
but whether the configurations it puts first are the ones that decode fastest on text it never chose on. This
script takes a pool of skip sets: random sets stratified over the skip ratio, the model's trained draft path, and the
sets searches return (the previous modelled search's shipped best, the 5 best sets of a 100-trial modelled search run
here, the 5 best distinct sets of the shipped priced search), since an objective's error matters where a search
pushes it;
drafts each with the lab's default stop rule (static threshold 0.5, at most 12) and the model's own weights (the
``modelled`` objective knows no other), and scores every set with the three objectives of ``labkit.search``:

- ``modelled``: teacher-forced agreement turned into ms per token by the cost model (the previous default);
- ``measured``: wall clock of real decoding on the choosing prompts, one run, against the plain loop just before;
- ``priced``: real decoding of the choosing prompts, priced by the cost model (the objective the lab now ships);

then measures every set on *held-out* prompts of both sources (``benchmark_prompts``), interleaved with the plain
loop, ``--repeats`` times. Printed: each objective's Spearman rho against the held-out speedup, the held-out speedup
of its top 5 and of its best, and its regret (the pool's best held-out speedup minus that of the objective's pick),
with the held-out speedups' spread over repeats so a difference can be read against the noise.

    python docs/notes/objective_ranking.py --model default          # about 8 minutes on 2 cores
"""
import argparse
import json
import math
import statistics
import time

import torch
from scipy.stats import spearmanr

import labkit
from labkit.artifacts.paths import SEARCH_DIR
from labkit.artifacts.results import trained_draft_path
from labkit.core.draft_config import DraftConfig
from labkit.core.skip import SkipSet, parse_skip_set
from labkit.measure.comparisons.adaptive import compare_configs
from labkit.measure.costs.costmodel import measure_cost_model
from labkit.measure.machine import machine_info
from labkit.search import SearchConfig, run_search
from labkit.search.objectives import build_objective, objective_settings
from labkit.search.space import skip_from_params, stratified_sets

SOURCES = ("stdlib", "packages", "stdlib-long", "packages-long")
OLD_SKIP = "attention=1,4,5,6,7;mlp=1,2,3,5,6"      # default's shipped best before issue 26 (modelled objective)


def searched_sets(model_name: str, cost_model) -> dict[str, SkipSet]:
    """The sets searches return: a live 100-trial modelled search's top 5, the shipped priced search's top 5."""
    study = run_search(model_name, SearchConfig(objective="modelled"), trials=100, storage=":memory:",
                       cost_model=cost_model, progress=False).study
    n_layers = cost_model.n_layers
    out, seen = {}, set()
    for t in sorted(study.trials, key=lambda t: t.value):
        skip = skip_from_params(t.params, n_layers)
        if skip and skip not in seen and len(seen) < 5:
            seen.add(skip)
            out[f"modelled search #{t.number}"] = skip
    rows = json.loads((SEARCH_DIR / model_name / "trials.json").read_text())
    for row in sorted(rows, key=lambda r: r["value_ms_per_token"]):
        skip = SkipSet(attention=row["attention"], mlp=row["mlp"])
        if skip and skip not in out.values() and sum(l.startswith("priced") for l in out) < 5:
            out[f"priced search {row['study']} #{row['trial']}"] = skip
    return out


def pool(model_name: str, n_layers: int, n_random: int, cost_model) -> dict[str, DraftConfig]:
    sets = {f"random {i}": s for i, s in enumerate(stratified_sets(n_layers, n_random, seed=7, max_ratio=0.875))}
    sets.update(trained_draft_path(model_name))
    if model_name == "default":
        sets["modelled search before issue 26"] = parse_skip_set(OLD_SKIP)
    for label, skip in searched_sets(model_name, cost_model).items():
        if skip not in sets.values():
            sets[label] = skip
    return {label: DraftConfig(skip, None, "static", 0.5, 12) for label, skip in sets.items() if skip}


def objective_scores(model, tokenizer, configs: dict, cost_models: dict) -> dict[str, dict[str, float]]:
    """{objective: {label: predicted speedup over the plain loop}} (higher is better for all three)."""
    scores = {}
    for name in ("modelled", "measured", "priced"):
        overrides = {"sources": list(SOURCES), "n_prompts": 2, "max_new_tokens": 48} if name != "modelled" else {}
        settings = objective_settings(name, overrides)
        given = cost_models[None] if name == "modelled" else cost_models if name == "priced" else None
        evaluator = build_objective(name, model, tokenizer, settings, given)
        scores[name] = {}
        for label, config in configs.items():
            draft = config.skip if name == "modelled" else config
            scores[name][label] = evaluator.baseline_ms / evaluator.evaluate(draft)["value"]
    return scores


def held_out(model, tokenizer, configs: dict, repeats: int) -> dict[str, dict]:
    """{label: {"speedup": geometric mean over sources, "min"/"max": the same of the per-repeat extremes}}."""
    frame = compare_configs(model, tokenizer, configs, sources=SOURCES, n_prompts=2, max_new_tokens=64,
                            repeats=repeats).frame
    frame = frame[frame["method"] != "plain loop"]
    assert frame["identical"].all(), "a draft changed the output"

    def geo(xs):
        return math.exp(statistics.fmean(math.log(x) for x in xs))

    return {m: {"speedup": geo(g["speedup"]), "min": geo(g["speedup_min"]), "max": geo(g["speedup_max"]),
                "acceptance": float(g["acceptance"].mean())} for m, g in frame.groupby("method")}


def report(scores: dict, truth: dict) -> dict:
    labels = sorted(truth)
    best_true = max(truth[l]["speedup"] for l in labels)
    out = {}
    for name, score in scores.items():
        ranked = sorted(labels, key=lambda l: -score[l])
        rho = spearmanr([score[l] for l in labels], [truth[l]["speedup"] for l in labels]).statistic
        optimism = {l: score[l] - truth[l]["speedup"] for l in labels}      # predicted minus held-out speedup
        out[name] = {"spearman_rho": rho, "top5_held_out": statistics.fmean(truth[l]["speedup"] for l in ranked[:5]),
                     "optimism_top5": statistics.fmean(optimism[l] for l in ranked[:5]),
                     "optimism_pool": statistics.fmean(optimism.values()),
                     "pick": ranked[0], "pick_predicted": score[ranked[0]],
                     "pick_held_out": truth[ranked[0]]["speedup"],
                     "regret": best_true - truth[ranked[0]]["speedup"]}
        print(f"{name:9s} rho {rho:+.2f} | top-5 held-out {out[name]['top5_held_out']:.2f}x | pick {ranked[0]!r}: "
              f"predicted {score[ranked[0]]:.2f}x, held-out {truth[ranked[0]]['speedup']:.2f}x "
              f"({truth[ranked[0]]['min']:.2f}-{truth[ranked[0]]['max']:.2f}) | regret {out[name]['regret']:.2f} | "
              f"predicted minus held-out: {out[name]['optimism_top5']:+.2f} on its top 5, "
              f"{out[name]['optimism_pool']:+.2f} over the pool")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default")
    parser.add_argument("--n-random", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="JSON of every score (default: print only)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    model, tokenizer = labkit.load_model(args.model)
    cost_models = {w: measure_cost_model(model, draft_weights=w) for w in (None, "int8")}
    configs = pool(args.model, model.config.num_hidden_layers, args.n_random, cost_models[None])
    scores = objective_scores(model, tokenizer, configs, cost_models)
    truth = held_out(model, tokenizer, configs, args.repeats)
    info = machine_info()
    print(f"{len(configs)} drafts (fp32 weights, static 0.5), model {args.model}, {info.get('cpu_model')}; held-out: "
          f"2 prompts of each of {', '.join(SOURCES)}, 64 tokens, {args.repeats} interleaved repeats")
    best = max(truth, key=lambda l: truth[l]["speedup"])
    print(f"best held-out in the pool: {best!r} {truth[best]['speedup']:.2f}x "
          f"({truth[best]['min']:.2f}-{truth[best]['max']:.2f})")
    summary = report(scores, truth)
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"scores": scores, "held_out": truth, "summary": summary, "machine": info,
                       "configs": {l: c.to_dict() for l, c in configs.items()}}, fh, indent=1)


if __name__ == "__main__":
    main()
