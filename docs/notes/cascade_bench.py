"""Cascades against the chain, side by side: the shipped draft configuration of ``default`` drafting alone (the chain)
and the same draft as the top of cascades (CAS-Spec): prompt lookup under it, an aggressive int8 skip set under it,
both, and both with the dynamic controller; interleaved with the plain loop on held-out prompts of the stdlib and of
installed packages (outside prompts); greedy, one thread.

Prints per source: ms per token (median, min-max over repeats), speedup over the plain loop (min-max), tokens per
step, and each level's part (last repeat, all prompts): the share of steps it drafted in, tokens it proposed per
step, the share of them the level above (or the target) accepted, tokens it drafted itself per step, ms per forward.

    python docs/notes/cascade_bench.py                  # about 10 minutes on 2 cores
    python docs/notes/cascade_bench.py --quick          # a smoke run
"""
from __future__ import annotations

from side_by_side import Size, by_source, parse_size, shipped_model, speedup_cells

from labkit import best_config, cascade
from labkit.core.draft_config import DraftConfig
from labkit.measure.comparisons.cascades import aggressive_level, cascade_decoders


def cascades(config: DraftConfig, cheap: DraftConfig) -> dict:
    """label -> a function making a fresh drafter (None: the chain), so every run starts from the same estimates."""
    return {
        "chain (shipped)": None,
        "lookup > shipped": lambda: cascade(["lookup", config], gamma=6),
        "aggressive int8 > shipped": lambda: cascade([cheap, config], gamma=3),
        "lookup > aggressive > shipped": lambda: cascade(["lookup", cheap, config], gamma=[6, 3]),
        "same, dynamic": lambda: cascade(["lookup", cheap, config], gamma=[6, 3], controller="dynamic"),
    }


def level_parts(results) -> list[str]:
    """One line per level of a cascade's traces: what it drafted and what was kept."""
    steps = [s for r in results for s in r.trace.steps if s.levels is not None]
    if not steps:
        return []
    lines = []
    for k, name in enumerate(level["level"] for level in steps[0].levels):
        parts = [s.levels[k] for s in steps]
        proposed, accepted = sum(p["proposed"] for p in parts), sum(p["accepted"] for p in parts)
        forwards, seconds = sum(p["forwards"] for p in parts), sum(p["seconds"] for p in parts)
        kept = accepted / proposed if proposed else float("nan")
        lines.append(f"    {name:18} in {sum(p['used'] for p in parts) / len(steps):4.0%} of steps, proposed "
                     f"{proposed / len(steps):5.2f}/step, kept {kept:4.0%}, "
                     f"own {sum(p['own'] for p in parts) / len(steps):5.2f}/step, "
                     f"{1e3 * seconds / forwards if forwards else float('nan'):5.2f} ms/forward")
    return lines


def main() -> None:
    size = parse_size(__doc__, quick=Size(1, 32, 2))
    model, tokenizer = shipped_model()
    config = best_config("default")
    cheap = aggressive_level(config, model.config.num_hidden_layers)
    print(f"top: {config.describe(model.config.num_hidden_layers)}\naggressive level: "
          f"{cheap.describe(model.config.num_hidden_layers)}\n{size.describe()}")
    made = cascades(config, cheap)
    for _, ds, runs, rows in by_source(tokenizer, size, lambda: cascade_decoders(model, config, made)):
        print(f"{'method':32} {'ms/token':>9} {'speedup (min-max)':>20} {'tokens/step':>11}")
        for d, row in zip(ds, rows):
            print(f"{d.method.label:32} {speedup_cells(row)} {row['tokens_per_step']:11.2f}")
            if d.method.kind == "cascade":
                print("\n".join(level_parts(runs.results(d.method))))


if __name__ == "__main__":
    main()
