"""How well a model tolerates skipping: the best agreement found at each skip ratio.

    python -m labkit.robustness --model default      # writes data/models/default/robustness.json
                                                      # and refreshes its MODEL_CARD.md

Search per ratio ("the best set we can find"): greedy backward elimination from the full
model (each round skips the one further block whose removal keeps agreement highest),
which passes through every ratio, refined by a few hundred random sets per ratio and, for a
model trained with a fixed draft path (``draft_skip`` in its training.json), that path too.
Agreement is teacher-forced on held-out prompts (see :mod:`labkit.agreement`).
"""
from __future__ import annotations

import argparse
import json
import platform
import random
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from .agreement import AgreementProbe
from .corpus import prompts
from .models import load_model, model_folder
from .skip import SkipSet

__all__ = ["greedy_elimination", "robustness_report", "trained_draft_path", "greedy_path_sets"]


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
                      known_sets: dict[str, SkipSet] | None = None) -> dict:
    """Best agreement per ratio; ``known_sets`` ({label: set}) join the candidates at their own ratio."""
    model, tokenizer = load_model(model_name)
    n_layers = model.config.num_hidden_layers
    t0 = time.perf_counter()
    texts = [p.text for p in prompts(2 * n_prompts, seed=seed)]
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
        "command": f"python -m labkit.robustness --model {model_name}",
        "n_prompts": n_prompts, "n_tokens": n_tokens, "n_positions": fresh.n_positions, "n_blocks": 2 * n_layers,
        "n_random_per_ratio": n_random, "seconds": round(time.perf_counter() - t0, 1),
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


def trained_draft_path(model: str | Path) -> dict[str, SkipSet]:
    """{"trained draft path": set} when ``model`` (a shipped name or a folder) was trained with a fixed draft path, else {}."""
    record = model_folder(model) / "training.json"
    if not record.exists():
        return {}
    recipe = json.loads(record.read_text()).get("recipe", {})
    if recipe.get("recipe") != "skip_robust" or not recipe.get("draft_skip") or not recipe.get("draft_skip_prob"):
        return {}
    from .train import parse_skip_set
    return {"trained draft path": parse_skip_set(recipe["draft_skip"])}


def greedy_path_sets(model: str | Path, n_layers: int) -> list[SkipSet]:
    """The greedy-elimination path stored in ``model``'s robustness.json (entry i skips i + 1 blocks).

    Empty when the model has no such file, or when its sets do not fit ``n_layers`` (a file of another shape).
    """
    path = model_folder(model) / "robustness.json"
    if not path.exists():
        return []
    sets = [SkipSet.from_dict(row["skip_set"]) for row in json.loads(path.read_text()).get("greedy_path", [])]
    try:
        for skip in sets:
            skip.validate(n_layers)
    except ValueError:
        return []
    return sets


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="default")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--random", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    folder = model_folder(args.model)
    report = robustness_report(args.model, args.prompts, args.tokens, args.random, known_sets=trained_draft_path(folder))
    for row in report["by_ratio"]:
        print(f"{row['skipped']:>3}/{report['n_blocks']} skipped ({row['ratio']:.1%}): agreement {row['agreement']:.3f} "
              f"on fresh prompts, {row['agreement_on_selection_prompts']:.3f} on the choosing ones "
              f"({row['found_by']}; best random {row['best_random_agreement']:.3f})  {row['skip']}")
    (folder / "robustness.json").write_text(json.dumps(report, indent=2))
    if (folder / "training.json").exists():
        from .modelcard import write_model_card
        write_model_card(folder)
    print(f"written to {folder / 'robustness.json'}")


if __name__ == "__main__":
    main()
