"""Depth against width (issue 38): the draft cost c against the fraction of parameters a drafted token reads, for
depth drafts (the shipped skip set, fp32), width drafts (dynamic: contextual sparsity with fitted predictors;
pruned: a static cut) and both combined, with acceptance and speedup over the plain loop, on outside prompts
("packages", "packages-long"), all through the lab's harness (labkit.measure.harness.run_by_source: interleaved,
order reversed on odd repeats, one thread), every greedy output checked identical to the plain loop's.
First the predictors' recall of the top-contribution neurons per layer on held-out (validation) windows, beside the
static ranking a pruned draft keeps.

Parameters read per drafted token: the kept attention blocks (q, k, v, o), the kept MLP neurons (3·H per neuron),
and the LM head (H·V, always); embeddings are a lookup and not counted; a dynamic draft also reads its predictors
(2r(H + I) per layer), counted in "with predictor".

    PYTHONPATH=. python docs/notes/depth_vs_width.py            # 4 prompts x 48 tokens x 2 repeats per source
    PYTHONPATH=. python docs/notes/depth_vs_width.py --quick    # a smoke run
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from labkit import best_config, load_model
from labkit.artifacts.models import fingerprint, model_key
from labkit.artifacts.paths import RESULTS_DIR
from labkit.artifacts.prompts import benchmark_prompts
from labkit.core.decoding import autoregressive_generate, speculative_generate
from labkit.core.drafters import SelfDrafter
from labkit.core.skip import SkipSet, decoder_layers
from labkit.core.width import WidthSet, width_drafter
from labkit.measure.harness import Decoder, Method, run_by_source, summarise
from labkit.measure.machine import machine_info
from labkit.training.width import WidthFitConfig, load_or_fit, recall, sample_windows

SOURCES = ("packages", "packages-long")


def parameters_read(model, skip: SkipSet | None, width: WidthSet | None, rank: int = 0) -> tuple[float, float]:
    """(fraction of the full model's per-token parameters a drafted token reads, the same with the predictors)."""
    layers = decoder_layers(model)
    attention = sum(p.numel() for p in layers[0].self_attn.parameters() if p.dim() == 2)
    H, I = model.config.hidden_size, model.config.intermediate_size
    head = model.get_output_embeddings().weight.numel()
    skip = skip or SkipSet()
    full = head + len(layers) * (attention + 3 * H * I)
    kept, extra = head, 0
    for i in range(len(layers)):
        kept += 0 if i in skip.attention else attention
        if i not in skip.mlp:
            frac = width.mlp[i] if width else 1.0
            kept += 3 * H * round(frac * I)
            extra += 2 * rank * (H + I) if width and width.kind == "dynamic" and frac < 1 else 0
    return kept / full, (kept + extra) / full


def drafts(model, config) -> dict:
    """label -> (skip set or None, WidthSet or None)."""
    n = model.config.num_hidden_layers
    out = {"depth: shipped set": (config.skip, None)}
    for kept in (0.5, 0.25):
        for kind in ("dynamic", "pruned"):
            out[f"width {kind} {kept:g}"] = (None, WidthSet.uniform(n, kept, kind))
    for kind in ("dynamic", "pruned"):
        out[f"depth + {kind} 0.5"] = (config.skip, WidthSet.uniform(n, 0.5, kind))
    return out


def make_decoders(model, config, predictors, made: dict):
    def run_with(drafter):
        policy = config.make_policy()                      # one per decoder per source: an adaptive rule carries
        return lambda ids, n: speculative_generate(model, ids, drafter=drafter, policy=policy, max_new_tokens=n)

    def make():
        out = [Decoder(Method("plain"), lambda ids, n: autoregressive_generate(model, ids, n))]
        for label, (skip, width) in made.items():
            drafter = width_drafter(model, predictors, width, skip) if width else SelfDrafter(model, skip)
            out.append(Decoder(Method("self-spec", name=label), run_with(drafter)))
        return out
    return make


def print_recall(model, tokenizer, predictors) -> None:
    held = sample_windows(tokenizer, "validation", 16, 128, seed=1)
    print(f"\nrecall of the top-k neurons by contribution, {held.numel()} held-out tokens (validation split): "
          "predictor / static ranking, per layer")
    for kept in (0.1, 0.25, 0.5):
        rows = recall(model, predictors, held, kept)
        cells = "  ".join(f"{r['predictor']:.2f}/{r['static']:.2f}" for r in rows)
        print(f"  kept {kept:<4g} (k = {rows[0]['k']:3d}): {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    prompts, tokens, repeats = (1, 16, 1) if args.quick else (4, 48, 2)
    torch.set_num_threads(1)
    print(machine_info())
    print("CONTENDED unless rerun quiet: other jobs shared these 2 cores during this run")
    model, tokenizer = load_model("default")
    config = dataclasses.replace(best_config("default"), draft_weights=None)
    cfg = WidthFitConfig()
    t0 = time.perf_counter()
    cache = RESULTS_DIR / "width" / f"{model_key('default')}-{fingerprint('default')}.pt"
    predictors = load_or_fit(model, tokenizer, cache, cfg)
    print(f"predictors: rank {cfg.rank}, {predictors.info['tokens']} training tokens, "
          f"{time.perf_counter() - t0:.1f} s (fitted or read from {cache.name})")
    print_recall(model, tokenizer, predictors)
    made = drafts(model, config)
    print(f"\nstop rule for every draft: the shipped one ({config.describe(model.config.num_hidden_layers)}, "
          f"the same for all); {prompts} prompts x {tokens} new tokens x {repeats} interleaved repeats per source")
    ids = {source: [tokenizer(p.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
                    for p in benchmark_prompts(prompts, source=source)] for source in SOURCES}
    runs = run_by_source(make_decoders(model, config, predictors, made), ids, max_new_tokens=tokens,
                         repeats=repeats)
    for source, run in runs.items():
        print(f"\n{source}: {'draft':22} {'params read':>11} {'+pred':>6} {'c':>5} {'accepted/drafted':>16} "
              f"{'speedup (min-max)':>18} identical")
        for row in summarise(run):
            label = row["method"]
            skip, width = made.get(label, (None, None))
            frac, with_pred = parameters_read(model, skip, width, cfg.rank) if label in made else (1.0, 1.0)
            print(f"{'':{len(source) + 2}}{label:22} {frac:11.2f} {with_pred:6.2f} {row['c']:5.2f} "
                  f"{row['acceptance']:16.2f} {row['speedup']:8.2f} ({row['speedup_min']:.2f}-"
                  f"{row['speedup_max']:.2f}) {row['identical']}")


if __name__ == "__main__":
    main()
