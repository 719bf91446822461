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

import argparse
import statistics

import torch

from labkit import SkipSet, autoregressive_generate, best_config, cascade, load_model, speculative_generate
from labkit.artifacts.prompts import benchmark_prompts
from labkit.core.draft_config import DraftConfig
from labkit.measure.harness import Decoder, Method, run_interleaved, summarise
from labkit.measure.machine import machine_info


def aggressive(config: DraftConfig, n_layers: int) -> DraftConfig:
    """The shipped set plus the attention and MLP blocks of two more layers (a quarter of the model left), int8."""
    extra = [layer for layer in range(n_layers) if layer not in config.skip.attention][:2]
    skip = SkipSet(attention=sorted({*config.skip.attention, *extra}), mlp=sorted({*config.skip.mlp, *extra}))
    return DraftConfig(skip, draft_weights="int8")


def cascades(config: DraftConfig, cheap: DraftConfig) -> dict:
    """label -> a function making a fresh drafter (None: the chain), so every run starts from the same estimates."""
    return {
        "chain (shipped)": None,
        "lookup > shipped": lambda: cascade(["lookup", config], gamma=6),
        "aggressive int8 > shipped": lambda: cascade([cheap, config], gamma=3),
        "lookup > aggressive > shipped": lambda: cascade(["lookup", cheap, config], gamma=[6, 3]),
        "same, dynamic": lambda: cascade(["lookup", cheap, config], gamma=[6, 3], controller="dynamic"),
    }


def decoders(model, config, made: dict) -> list[Decoder]:
    out = [Decoder(Method("plain", "plain loop", family="baseline"), lambda x, n: autoregressive_generate(model, x, n))]
    for label, make in made.items():
        def run(x, n, make=make):
            if make is None:
                return speculative_generate(model, x, max_new_tokens=n, **config.generate_kwargs())
            return speculative_generate(model, x, max_new_tokens=n, drafter=make(), policy=config.make_policy())
        out.append(Decoder(Method("cascade" if make else "chain", label, weights=config.weights_label), run))
    return out


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=96)
    args = parser.parse_args()
    torch.set_num_threads(1)
    n_prompts, n_tokens, repeats = (1, 32, 2) if args.quick else (args.prompts, args.tokens, args.repeats)
    model, tokenizer = load_model("default")
    config = best_config("default")
    cheap = aggressive(config, model.config.num_hidden_layers)
    print(machine_info())
    print(f"top: {config.describe(model.config.num_hidden_layers)}\naggressive level: "
          f"{cheap.describe(model.config.num_hidden_layers)}\n{n_prompts} prompts per source, {n_tokens} new tokens, "
          f"{repeats} interleaved repeats")
    made = cascades(config, cheap)
    for source in ("stdlib", "packages"):
        ids = [tokenizer(p.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
               for p in benchmark_prompts(n_prompts, source=source)]
        ds = decoders(model, config, made)
        with torch.inference_mode():
            runs = run_interleaved(ds, ids, max_new_tokens=n_tokens, repeats=repeats, desc=source)
        rows = summarise(runs)
        print(f"\n{source} prompts (median length {statistics.median(x.shape[1] for x in ids):.0f} tokens)")
        print(f"{'method':32} {'ms/token':>9} {'speedup (min-max)':>20} {'tokens/step':>11}")
        for d, row in zip(ds, rows):
            print(f"{d.method.label:32} {row['ms_per_token']:9.2f} {row['speedup']:8.2f}× "
                  f"({row['speedup_min']:.2f}-{row['speedup_max']:.2f}) {row['tokens_per_step']:11.2f}")
            assert row["identical"] in (True, 1.0) or d.method.kind == "plain", f"{d.method.label} changed the output"
            if d.method.kind == "cascade":
                print("\n".join(level_parts(runs.results(d.method))))


if __name__ == "__main__":
    main()
