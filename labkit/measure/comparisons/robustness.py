"""How well a model tolerates skipping: the best agreement found at each skip ratio.

    python -m labkit robustness --model default      # writes data/models/default/robustness.json
                                                      # and refreshes its MODEL_CARD.md
    python -m labkit robustness --prompt-source packages   # on outside prompts:
                                                            # results/robustness/default_packages.json

Search per ratio ("the best set we can find"): greedy backward elimination from the full
model (each round skips the one further block whose removal keeps agreement highest),
which passes through every ratio, refined by a few hundred random sets per ratio and, for a
model trained with a fixed draft path (``draft_skip`` in its training.json), that path too.
Agreement is teacher-forced on held-out prompts (see :mod:`labkit.measure.agreement`).
"""
from __future__ import annotations

import json
import platform
import random
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ...artifacts import arguments
from ...artifacts.models import load_model, model_folder, model_key
from ...artifacts.paths import RESULTS_DIR
from ...artifacts.prompts import prompts, source_info, source_label
from ...artifacts.results import trained_draft_path
from ...core.skip import SkipSet
from ..agreement import AgreementProbe
from ..costs.analytic import check_path
from ..harness import Stopwatch

__all__ = ["greedy_elimination", "random_sets", "robustness_report", "elimination_frame", "agreement_at_ratio",
           "write_report"]


def greedy_elimination(probe: AgreementProbe, n_layers: int, forbid: frozenset[int] = frozenset(),
                       progress: bool = True) -> list[tuple[SkipSet, float]]:
    """Path of nested skip sets: entry i skips i + 1 blocks, each the best single addition.

    ``forbid`` holds mask indices (0..2L-1; attention blocks first) never skipped.
    """
    mask = [False] * (2 * n_layers)
    path = []
    rounds = tqdm(range(2 * n_layers - len(forbid)), desc="greedy elimination", disable=not progress)
    for _ in rounds:
        best = None
        for b in range(2 * n_layers):
            if mask[b] or b in forbid:
                continue
            mask[b] = True
            a = probe.agreement(SkipSet.from_mask(mask))
            mask[b] = False
            if best is None or a > best[1]:
                best = (b, a)
        mask[best[0]] = True
        path.append((SkipSet.from_mask(mask), best[1]))
        rounds.set_postfix(skipped=len(path), agreement=f"{best[1]:.3f}")
    return path


def random_sets(n_layers: int, n_skipped: int, count: int, rng: random.Random) -> list[SkipSet]:
    out = []
    for _ in range(count):
        chosen = rng.sample(range(2 * n_layers), n_skipped)
        mask = [i in chosen for i in range(2 * n_layers)]
        out.append(SkipSet.from_mask(mask))
    return out


def robustness_report(model_name: str = "default", n_prompts: int = 12, n_tokens: int = 48,
                      n_random: int = 100, seed: int = 0, ratios=(0.25, 0.375, 0.5, 0.625),
                      known_sets: dict[str, SkipSet] | None = None, prompt_source="stdlib") -> dict:
    """Best agreement per ratio; ``known_sets`` ({label: set}) join the candidates at their own ratio.
    ``prompt_source``: where the prompts come from (stdlib, packages or a file; see labkit.prompts)."""
    model, tokenizer = load_model(model_name)
    n_layers = model.config.num_hidden_layers
    clock = Stopwatch()
    texts = [p.text for p in prompts(2 * n_prompts, seed=seed, source=prompt_source)]
    probe = AgreementProbe.from_prompts(model, tokenizer, texts[:n_prompts], n_tokens)          # chooses the sets
    fresh = AgreementProbe.from_prompts(model, tokenizer, texts[n_prompts:], n_tokens)          # reports them
    path = greedy_elimination(probe, n_layers)
    rng = random.Random(seed)
    rows = []
    for ratio in ratios:
        k = int(round(ratio * 2 * n_layers))
        greedy_set, greedy_a = path[k - 1]
        candidates = [(greedy_set, greedy_a, "greedy elimination")]
        candidates += [(s, probe.agreement(s), label) for label, s in (known_sets or {}).items() if s.n_skipped == k]
        randoms = random_sets(n_layers, k, n_random, rng)
        for s in tqdm(randoms, desc=f"random sets, {k} skipped", leave=False):
            candidates.append((s, probe.agreement(s), "random"))
        best_set, best_a, found_by = max(candidates, key=lambda c: c[1])
        random_best = max(probe.agreement(s) for s in randoms)
        rows.append({"skipped": k, "ratio": k / (2 * n_layers), "agreement": fresh.agreement(best_set),
                     "agreement_on_selection_prompts": best_a, "skip": str(best_set),
                     "skip_set": best_set.to_dict(), "found_by": found_by,
                     "greedy_agreement": greedy_a, "best_random_agreement": random_best})
    return {
        "model": model_name,
        "command": f"python -m labkit robustness --model {model_name}",
        "n_prompts": n_prompts, "n_tokens": n_tokens, "n_positions": fresh.n_positions, "n_blocks": 2 * n_layers,
        "prompt_source": source_info(prompt_source),
        "n_random_per_ratio": n_random, "seconds": round(clock.seconds, 1),
        "hardware": f"{platform.machine()}, {torch.get_num_threads()} thread(s)",
        "method": (f"Sets chosen on {n_prompts} held-out prompts (best of greedy backward elimination and "
                   f"{n_random} random sets per ratio), agreement reported on {n_prompts} *other* held-out prompts "
                   f"(teacher-forced on the full model's greedy continuation, {n_tokens} tokens each), so the "
                   "choice does not flatter the figure."),
        "n_positions_selection": probe.n_positions,
        "by_ratio": rows,
        "greedy_path": [{"skipped": i + 1, "agreement_on_selection_prompts": a, "agreement": fresh.agreement(s),
                         "skip_set": s.to_dict()} for i, (s, a) in enumerate(path)],
    }


def block_name(index: int, n_layers: int) -> str:
    """Mask index 0..2L-1 -> 'attention 3' / 'MLP 3'."""
    return f"attention {index}" if index < n_layers else f"MLP {index - n_layers}"


def elimination_frame(paths: Mapping[str, Sequence], n_layers: int):
    """One row per model and number of skipped blocks (0 = the full model, agreement 1): a pandas DataFrame
    with columns model, n_skipped, ratio, agreement, added (the block this round removed), skip."""
    import pandas as pd

    rows = []
    for name, path in paths.items():
        path = check_path(path, n_layers)
        rows.append({"model": name, "n_skipped": 0, "ratio": 0.0, "agreement": 1.0, "added": "",
                     "skip": str(SkipSet())})
        previous = [False] * (2 * n_layers)
        for skip, a in path:
            mask = skip.to_mask(n_layers)
            added = [i for i, (m, p) in enumerate(zip(mask, previous)) if m and not p]
            rows.append({"model": name, "n_skipped": skip.n_skipped, "ratio": skip.ratio(n_layers),
                         "agreement": float(a), "added": ", ".join(block_name(i, n_layers) for i in added),
                         "skip": str(skip)})
            previous = mask
    return pd.DataFrame(rows)


def agreement_at_ratio(path: Sequence, n_layers: int, ratio: float = 0.5) -> float:
    """Agreement of the path's set with round(ratio * 2L) blocks skipped (1.0 at 0 skipped)."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"ratio must be in [0, 1], got {ratio!r}")
    path = check_path(path, n_layers)
    k = int(round(ratio * 2 * n_layers))
    if k == 0:
        return 1.0
    for skip, a in path:
        if skip.n_skipped == k:
            return float(a)
    raise ValueError(f"the path has no set with {k} blocks skipped (it covers "
                     f"{path[0][0].n_skipped}..{path[-1][0].n_skipped})")


def write_report(model: str, report: dict) -> Path:
    """Write ``report`` to the model's folder as robustness.json (read back by labkit.artifacts.results)."""
    path = model_folder(model) / "robustness.json"
    path.write_text(json.dumps(report, indent=2))
    return path


def main(argv: list[str] | None = None) -> Path:
    parser = arguments.command_parser(__doc__, raw=True)
    parser.add_argument("--model", type=arguments.model, default="default")
    parser.add_argument("--prompts", type=arguments.count, default=12)
    parser.add_argument("--tokens", type=arguments.count, default=48)
    parser.add_argument("--random", type=arguments.natural, default=100)
    parser.add_argument("--threads", type=arguments.count, default=1)
    parser.add_argument("--prompt-source", type=arguments.prompt_source, default="stdlib",
                        help="stdlib (default: writes the model's robustness.json), packages, stdlib-long, "
                             "packages-long or a .txt/.jsonl file "
                             "(written to results/robustness/, the model card untouched)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    report = robustness_report(args.model, args.prompts, args.tokens, args.random,
                               known_sets=trained_draft_path(args.model), prompt_source=args.prompt_source)
    for row in report["by_ratio"]:
        print(f"{row['skipped']:>3}/{report['n_blocks']} skipped ({row['ratio']:.1%}): "
              f"agreement {row['agreement']:.3f} on fresh prompts, "
              f"{row['agreement_on_selection_prompts']:.3f} on the choosing ones "
              f"({row['found_by']}; best random {row['best_random_agreement']:.3f})  {row['skip']}")
    if args.prompt_source == "stdlib":
        path = write_report(args.model, report)
    else:
        path = RESULTS_DIR / "robustness" / f"{model_key(args.model)}_{source_label(args.prompt_source)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2))
    print(f"written to {path}")
    return path
