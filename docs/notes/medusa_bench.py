"""Medusa heads against the shipped self-draft, side by side: the plain loop, ``default``'s shipped self-draft
(``best_config('default')``) and its Medusa heads (``python -m labkit train-heads``) drafting the top-1 chain (every
head, FixedK(K); or stopped at the first head whose top-1 q is below 0.3) and Medusa's tree
(:data:`~labkit.core.tree_shapes.MEDUSA_CHOICES`, when K = 4), interleaved on held-out prompts of the stdlib and of
installed packages (outside prompts); greedy, one thread.

Prints per source: ms per token (median, min-max over repeats), speedup over the plain loop (min-max), acceptance
(accepted / drafted), tokens per step (accepted + 1) and drafted tokens per step; every row's output is checked
token-identical to the plain loop's.

    python docs/notes/medusa_bench.py                  # about 10 minutes on a quiet 2-core machine
    python docs/notes/medusa_bench.py --quick          # a smoke run (indicative numbers only)
"""
from __future__ import annotations

from side_by_side import Size, by_source, parse_size, shipped_model, speedup_cells

from labkit import autoregressive_generate, best_config, speculative_generate
from labkit.artifacts.models import load_medusa_heads
from labkit.core.medusa import HeadsDrafter
from labkit.core.policies import FixedK, StaticThreshold
from labkit.core.tree_shapes import MEDUSA_CHOICES
from labkit.measure.harness import Decoder, Method


def decoders(model, config, heads) -> list[Decoder]:
    """The plain loop, the shipped self-draft, the heads' chain and (K = 4) the heads' Medusa tree."""
    def plain(x, n):
        return autoregressive_generate(model, x, n)

    def self_draft(x, n):
        return speculative_generate(model, x, max_new_tokens=n, **config.generate_kwargs())

    def heads_run(choices, threshold=None):
        drafter = HeadsDrafter(model, heads, choices)          # made once: checking the heads hashes the LM head

        def run(x, n):
            policy = (FixedK(heads.n_heads) if threshold is None
                      else StaticThreshold(threshold=threshold, max_draft=heads.n_heads))
            return speculative_generate(model, x, max_new_tokens=n, drafter=drafter, policy=policy)
        return run

    out = [Decoder(Method("plain", "plain loop", family="baseline"), plain),
           Decoder(Method("self-spec", "shipped self-draft", weights=config.weights_label), self_draft),
           Decoder(Method("medusa", f"Medusa heads, chain (K={heads.n_heads})"), heads_run(None)),
           Decoder(Method("medusa", "Medusa heads, chain, stop q < 0.3"), heads_run(None, 0.3))]
    if heads.n_heads >= 4:
        out.append(Decoder(Method("medusa", "Medusa heads, tree (10 nodes)"), heads_run(MEDUSA_CHOICES)))
    return out


def main() -> None:
    size = parse_size(__doc__, quick=Size(2, 32, 2))
    model, tokenizer = shipped_model()
    config, heads = best_config("default"), load_medusa_heads("default", model)
    print(f"self-draft: {config.describe(model.config.num_hidden_layers)}; {heads.n_heads} Medusa heads "
          f"(held-out top-1 agreement {', '.join(f'{a:.2f}' for a in heads.info['held_out_agreement']['fitted'])})")
    print(size.describe())
    for _, ds, _, rows in by_source(tokenizer, size, lambda: decoders(model, config, heads)):
        print(f"{'method':32} {'ms/token':>9} {'speedup (min-max)':>20} {'acceptance':>10} {'tokens/step':>11} "
              f"{'drafted/step':>12}")
        for d, row in zip(ds, rows):
            print(f"{d.method.label:32} {speedup_cells(row)} {row['acceptance']:10.2f} "
                  f"{row['tokens_per_step']:11.2f} {row['drafted_per_step']:12.2f}")


if __name__ == "__main__":
    main()
