"""Does the cheaper int8 draft want another draft policy or another set? Measured on the *choosing* prompts (the
first prompts of each source, which `benchmark_prompts` skips), never the benchmark's (docs/decisions.md,
"Cheaper drafts"): the trained draft path with static thresholds 0.3-0.7, fp32 and int8 drafts, and the adaptive
threshold with int8; then the 8 sets that keep one more block of the path, int8 drafts, threshold 0.5. Speed over
the plain loop, every method interleaved per prompt, greedy, one thread.

    python docs/notes/int8_choosing_prompts.py
"""
import time

import torch

import labkit
from labkit import SkipSet
from labkit.artifacts.results import trained_draft_path
from labkit.core.decoding import autoregressive_generate, speculative_generate
from labkit.core.policies import AdaptiveThreshold, StaticThreshold


def speedups(model, ids, runs: dict, repeats: int) -> dict:
    """{name: plain-loop time / its time}, each run interleaved with the others on every prompt."""
    runs = {"plain": lambda x: autoregressive_generate(model, x, 128), **runs}
    total = dict.fromkeys(runs, 0.0)
    for _ in range(repeats):
        for x in ids:
            for name, run in runs.items():
                t0 = time.perf_counter()
                run(x)
                total[name] += time.perf_counter() - t0
    return {name: total["plain"] / t for name, t in total.items() if name != "plain"}


def policy_runs(model, path) -> dict:
    runs = {}
    for threshold in (0.3, 0.4, 0.5, 0.6, 0.7):
        for weights in (None, "int8"):
            runs[f"{threshold} {weights or 'fp32'}"] = (
                lambda x, t=threshold, w=weights: speculative_generate(
                    model, x, skip=path, policy=StaticThreshold(t, 12), max_new_tokens=128, draft_weights=w))
    runs["adaptive int8"] = lambda x: speculative_generate(model, x, skip=path, policy=AdaptiveThreshold(),
                                                           max_new_tokens=128, draft_weights="int8")
    return runs


def one_more_block_runs(model, path) -> dict:
    sets = {"path": path}
    sets.update({f"keep attention {a}": SkipSet(attention=[x for x in path.attention if x != a], mlp=path.mlp)
                 for a in path.attention})
    sets.update({f"keep MLP {m}": SkipSet(attention=path.attention, mlp=[x for x in path.mlp if x != m])
                 for m in path.mlp})
    return {name: (lambda x, s=skip: speculative_generate(model, x, skip=s, policy=StaticThreshold(0.5, 12),
                                                          max_new_tokens=128, draft_weights="int8"))
            for name, skip in sets.items()}


if __name__ == "__main__":
    torch.set_num_threads(1)
    model, tokenizer = labkit.load_model("default")
    path = trained_draft_path("default")["trained draft path"]
    for source in ("stdlib", "packages"):
        ids = [tokenizer(p.text, return_tensors="pt")["input_ids"] for p in labkit.prompts(12, source=source)]
        for label, runs, repeats in (("policies", policy_runs(model, path), 2),
                                     ("one more block kept, int8", one_more_block_runs(model, path), 1)):
            ratios = speedups(model, ids, runs, repeats)
            print(f"{source}, {label}: " + ", ".join(f"{k} {v:.3f}x" for k, v in ratios.items()), flush=True)
