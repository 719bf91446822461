"""Which draft stop threshold goes with `default`'s draft head? Measured on the *choosing* prompts (the first
prompts of each source, which `benchmark_prompts` skips), never the benchmark's: the trained draft path with int8
drafts, without the head at the lab's threshold 0.5 and with the head at static thresholds 0.2-0.5; speed over the
plain loop (every method interleaved per prompt, greedy, one thread), acceptance, drafted tokens per step.

Why a threshold of its own: the head is fitted to make the draft's q match the target p, and p is less sure of its
top token than the path's sharpened draft was, so at 0.5 a draft with the head stops sooner than it should.

    python docs/notes/draft_head_threshold.py
"""
import time

import torch

import labkit
from labkit.core.decoding import autoregressive_generate, speculative_generate
from labkit.core.policies import StaticThreshold

THRESHOLDS = (0.2, 0.3, 0.4, 0.5)


def runs(model, head) -> dict:
    out = {"no head, 0.5": lambda x: speculative_generate(model, x, skip=head.skip, policy=StaticThreshold(0.5, 12),
                                                          max_new_tokens=128, draft_weights="int8")}
    for threshold in THRESHOLDS:
        out[f"head, {threshold}"] = lambda x, t=threshold: speculative_generate(
            model, x, skip=head.skip, policy=StaticThreshold(t, 12), max_new_tokens=128, draft_weights="int8",
            draft_head=head)
    return out


def measure(model, ids, methods: dict) -> dict:
    """{name: (plain-loop time / its time, acceptance, drafted per step)}, interleaved on every prompt."""
    methods = {"plain": lambda x: autoregressive_generate(model, x, 128), **methods}
    seconds, drafted, accepted, steps = (dict.fromkeys(methods, 0.0) for _ in range(4))
    for x in ids:
        for name, run in methods.items():
            t0 = time.perf_counter()
            out = run(x)
            seconds[name] += time.perf_counter() - t0
            if name != "plain":
                drafted[name] += out.trace.n_drafted
                accepted[name] += out.trace.n_accepted
                steps[name] += len(out.trace.steps)
    return {name: (seconds["plain"] / seconds[name], accepted[name] / drafted[name], drafted[name] / steps[name])
            for name in methods if name != "plain"}


if __name__ == "__main__":
    torch.set_num_threads(1)
    model, tokenizer = labkit.load_model("default")
    head = labkit.load_draft_head("default")
    for source in ("stdlib", "packages"):
        ids = [tokenizer(p.text, return_tensors="pt")["input_ids"] for p in labkit.prompts(12, source=source)]
        for name, (speedup, alpha, per_step) in measure(model, ids, runs(model, head)).items():
            print(f"{source:>8}  {name:<13} {speedup:.3f}x  acceptance {alpha:.3f}  drafted/step {per_step:.2f}",
                  flush=True)
