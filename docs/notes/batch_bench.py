"""Batched self-speculative decoding against the batched plain loop at batch sizes 1, 4 and 16, on outside prompts
("packages": installed packages' source, held out), greedy, one thread: throughput and per-row latency, every
row's output checked token-identical to the batched plain loop's (and, at batch 1, the one-sequence call timed
beside the batch-of-one call); the three ways of handling ragged acceptance (masked holes, re-padding, the shortest
row); the batch's drafting cut when half its rows stopped, or drafting on to the last row; and the load policy
built from c and c_v measured per batch size (:mod:`labkit.measure.costs.batch_costs`) against always-on and always-off,
with the speedup it predicts beside the measured one.

Every timing goes through :func:`labkit.measure.harness.interleaved_ms` (all methods of one batch size interleaved,
odd rounds reversed); ratios are the median of per-round ratios with their min-max.

    python docs/notes/batch_bench.py                 # 16 prompts x 96 tokens x 3 repeats, a few minutes quiet
    python docs/notes/batch_bench.py --quick         # a smoke run (indicative numbers only)
"""
from __future__ import annotations

import statistics

import torch
from side_by_side import Size, parse_size, shipped_model

from labkit import FixedK, autoregressive_generate, best_config, speculative_generate
from labkit.artifacts.prompts import benchmark_prompts
from labkit.core.batch import BatchConfig
from labkit.measure.costs.batch_costs import (
    alpha_from_acceptance,
    load_policy,
    measure_batch_costs,
    predicted_speedup,
    predicted_tokens_per_s,
)
from labkit.measure.harness import interleaved_ms, ratio_spread

BATCH_SIZES = (1, 4, 16)


def methods(model, config, prompts, n, policy):
    """{name: a callable decoding the batch ``prompts``}; every call leaves its BatchResult in ``outputs``."""
    kwargs = {k: v for k, v in config.generate_kwargs().items() if k != "policy"}
    outputs = {}

    def spec(name, **extra):
        def run():
            outputs[name] = speculative_generate(model, prompts, max_new_tokens=n, policy=config.make_policy(),
                                                 **kwargs, **extra)
        return run

    def plain():
        outputs["plain loop"] = autoregressive_generate(model, prompts, n)

    calls = {"plain loop": plain, "always on (mask)": spec("always on (mask)"),
             "always on (repad)": spec("always on (repad)", batch=BatchConfig("repad")),
             "always on (shortest)": spec("always on (shortest)", batch=BatchConfig("shortest")),
             "always on (every row)": spec("always on (every row)", batch=BatchConfig(draft_while=0.0)),
             "load policy": spec("load policy", load=policy)}
    if len(prompts) == 1:
        def one():
            outputs["one-sequence call"] = speculative_generate(model, torch.tensor(prompts), max_new_tokens=n,
                                                                policy=config.make_policy(), **kwargs)
        calls["one-sequence call"] = one
    return calls, outputs


def tokens_of(out) -> list[list[int]]:
    return out.new_tokens if hasattr(out, "sequences") and isinstance(out.sequences, list) else [out.new_tokens]


def report(batch: int, samples: dict, outputs: dict, prediction: dict) -> dict:
    """Print one batch size's rows; return {name: median batch tokens per second}."""
    reference = tokens_of(outputs["plain loop"])
    new = sum(len(t) for t in reference)
    print(f"\nbatch {batch}: {new} new tokens per call")
    print(f"{'method':24} {'ms/call':>8} {'tokens/s':>9} {'ms/token/row':>12} {'vs plain (min-max)':>22} "
          f"{'acceptance':>10} identical  predicted")
    rates = {}
    for name, ms in samples.items():
        out, median = outputs[name], statistics.median(ms)
        ratio, low, high = ratio_spread(samples["plain loop"], ms)
        drafted = sum(getattr(out, "drafted", []) or [0])
        acceptance = sum(out.accepted) / drafted if drafted else float("nan")
        rates[name] = 1e3 * new / median
        print(f"{name:24} {median:8.1f} {rates[name]:9.0f} {median / (new / batch):12.2f} "
              f"{ratio:8.2f}x ({low:.2f}-{high:.2f}) {acceptance:10.2f} {str(tokens_of(out) == reference):9} "
              f"{prediction.get(name, '')}")
    return rates


def main() -> None:
    size = parse_size(__doc__, quick=Size(16, 32, 2))
    model, tokenizer = shipped_model()
    config = best_config("default")
    print(f"draft: {config.describe(model.config.num_hidden_layers)}; batches of the first 1, 4 and 16 of 16 outside "
          f"prompts, {size.tokens} new tokens, {size.repeats} interleaved repeats")
    texts = [p.text for p in benchmark_prompts(max(size.prompts, max(BATCH_SIZES)), source="packages")]
    prompts = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    costs = measure_batch_costs(model, config.skip, (1, 2, 4, 8, 16), (1, 2, 3, 4, 6, 8),
                                context=int(statistics.median(map(len, prompts))),
                                draft_weights=config.draft_weights, repeats=size.repeats + 2)
    print("batch sizes", costs.batch_sizes, "plain ms", [round(t, 2) for t in costs.plain_ms],
          "c", [round(c, 2) for c in costs.c], "c_v(4)", [round(c, 2) for c in costs.c_v[4]])
    one = speculative_generate(model, prompts[:4], max_new_tokens=size.tokens, policy=FixedK(4),
                               **{k: v for k, v in config.generate_kwargs().items() if k != "policy"})
    alpha = alpha_from_acceptance(sum(one.accepted) / max(1, sum(one.drafted)), 4)
    policy = load_policy(costs, alpha)
    print(f"alpha {alpha:.2f} (from FixedK(4) on 4 prompts); load policy: gamma cap {policy.max_draft} at batch "
          f"sizes {policy.batch_sizes}")
    for i, b in enumerate(costs.batch_sizes):
        best = max(costs.gammas, key=lambda g, i=i: predicted_speedup(costs, alpha, i, g))
        print(f"  predicted at batch {b}: plain {predicted_tokens_per_s(costs, alpha, i, 0):.0f} tokens/s, "
              f"speculative (gamma {best}) {predicted_tokens_per_s(costs, alpha, i, best):.0f} tokens/s, "
              f"S = {predicted_speedup(costs, alpha, i, best):.2f}")
    for batch in BATCH_SIZES:
        calls, outputs = methods(model, config, prompts[:batch], size.tokens, policy)
        samples = interleaved_ms(calls, repeats=size.repeats)
        index = costs.batch_sizes.index(batch)
        best = max(costs.gammas, key=lambda g: predicted_speedup(costs, alpha, index, g))
        report(batch, samples, outputs, {"always on (mask)": f"{predicted_speedup(costs, alpha, index, best):.2f}x"})


if __name__ == "__main__":
    main()
