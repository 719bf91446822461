"""Trees against the chain, side by side: the shipped draft configuration of ``default`` drafting one continuation
(the chain) and the same draft growing trees (static, confidence, dynamic), interleaved with the plain loop on
held-out prompts of the stdlib and of installed packages (outside prompts); greedy, one thread.

Prints per source: ms per token (median, min-max over repeats), speedup over the plain loop (min-max), tokens per
step (accepted + 1) and nodes per verify; the best tree over the best chain; and the tree bookkeeping (building
masks and positions, keeping the accepted path's cache) as a share of the trees' decode time.

    python docs/notes/tree_bench.py                  # about 10 minutes on 2 cores
    python docs/notes/tree_bench.py --quick          # a smoke run
"""
from __future__ import annotations

import statistics
import time

from side_by_side import Size, by_source, parse_size, shipped_model, speedup_cells

import labkit.core.tree as tree_module
import labkit.core.tree_shapes as shapes_module
from labkit import autoregressive_generate, best_config, draft_tree, speculative_generate
from labkit.measure.harness import Decoder, Method

TREES = {
    "chain": None,
    "static (Medusa 10 nodes)": ("static", {}),
    "confidence (below 0.6, 2 siblings)": ("confidence", {"below": 0.6, "siblings": 2}),
    "confidence (below 0.8, 3 siblings)": ("confidence", {"below": 0.8, "siblings": 3}),
    "dynamic (top 2, 8 nodes)": ("dynamic", {"top_k": 2, "nodes": 8}),
    "dynamic (top 3, 16 nodes)": ("dynamic", {"top_k": 3, "nodes": 16}),
}


class Bookkeeping:
    """Wall time inside the tree's own bookkeeping (masks, ancestry, positions, keeping the path, pruning)."""

    NAMES = ((tree_module, "ancestry"), (tree_module, "tree_mask"), (tree_module, "keep_path"),
             (tree_module, "depths"), (shapes_module.GrowingTree, "_path"), (shapes_module.GrowingTree, "keep_best"))

    def __init__(self):
        self.seconds = 0.0
        for owner, name in self.NAMES:
            setattr(owner, name, self._timed(getattr(owner, name)))

    def _timed(self, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
        return wrapper


def decoders(model, config, book: Bookkeeping, tree_seconds: dict) -> list[Decoder]:
    out = [Decoder(Method("plain", "plain loop", family="baseline"), lambda x, n: autoregressive_generate(model, x, n))]
    for label, spec in TREES.items():
        def run(x, n, spec=spec, label=label):
            before, t0 = book.seconds, time.perf_counter()
            result = speculative_generate(model, x, max_new_tokens=n, tree=draft_tree(spec[0], **spec[1]) if spec
                                          else None, **config.generate_kwargs())
            if spec:
                tree_seconds.setdefault(label, [0.0, 0.0])
                tree_seconds[label][0] += book.seconds - before
                tree_seconds[label][1] += time.perf_counter() - t0
            return result
        out.append(Decoder(Method("tree" if spec else "chain", label, weights=config.weights_label), run))
    return out


def nodes_per_verify(runs, method) -> float:
    steps = [s for r in runs.results(method) for s in r.trace.steps]
    return statistics.fmean(len(s.drafted) for s in steps) if steps else float("nan")


def main() -> None:
    size = parse_size(__doc__, quick=Size(1, 24, 1))
    model, tokenizer = shipped_model()
    config = best_config("default")
    print(f"draft: {config.describe(model.config.num_hidden_layers)}; {size.describe()}")
    book, tree_seconds = Bookkeeping(), {}
    for _, ds, runs, rows in by_source(tokenizer, size, lambda: decoders(model, config, book, tree_seconds)):
        print(f"{'method':38} {'ms/token':>9} {'speedup (min-max)':>20} {'tokens/step':>11} {'nodes/verify':>12}")
        for d, row in zip(ds, rows):
            nodes = nodes_per_verify(runs, d.method) if d.method.kind != "plain" else float("nan")
            print(f"{d.method.label:38} {speedup_cells(row)} {row['tokens_per_step']:11.2f} {nodes:12.1f}")
        by_label = {d.method.label: row for d, row in zip(ds, rows)}
        chain = by_label["chain"]
        best = max((label for label in TREES if label != "chain"), key=lambda k: by_label[k]["speedup"])
        b = by_label[best]
        overlap = b["speedup_min"] <= chain["speedup_max"]
        print(f"best tree: {best}, {b['speedup'] / chain['speedup']:.2f}× the chain "
              f"({'within the noise: the min-max ranges overlap' if overlap else 'ranges apart'}); "
              f"{b['speedup']:.2f}× the plain loop")
        share = {k: v[0] / v[1] for k, v in tree_seconds.items() if v[1]}
        print("tree bookkeeping / decode time: " + ", ".join(f"{k} {v:.1%}" for k, v in share.items()))
        tree_seconds.clear()


if __name__ == "__main__":
    main()
