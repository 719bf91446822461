"""What the trace costs the shipped draft (issue 36, item 5): the shipped draft configuration of ``default`` with the
trace recorded (the default), without it, and with the full (γ + 1) × V softmax computed after every greedy step (what
recording the trace cost before the trace's p was read from the drafted rows only), interleaved with the plain loop
on held-out prompts of the stdlib and of installed packages; greedy, one thread, every row checked token for token.

Prints per source: ms per token (median), speedup over the plain loop (min-max over the repeats) and the ratio of
each traced row's speed to the untraced one's; "within the noise" where their min-max speedup ranges overlap.

    python docs/notes/trace_cost.py              # about 5 minutes on 2 cores
    python docs/notes/trace_cost.py --quick      # a smoke run
"""
from __future__ import annotations

from side_by_side import Size, by_source, parse_size, shipped_model, speedup_cells

from labkit import autoregressive_generate, best_config, speculative_generate
from labkit.core.drafters import Drafter
from labkit.core.request import make_drafter
from labkit.measure.harness import Decoder, Method


class FullSoftmaxDrafter(Drafter):
    """Drafts with ``inner`` and, after every step, computes the verdict's full (γ + 1) × V target distribution:
    the cost every greedy step paid before (the softmax the trace's p was read from)."""

    def __init__(self, inner: Drafter):
        self.inner = inner

    def prepare(self, state, prompt_ids) -> None:
        self.inner.prepare(state, prompt_ids)

    def draft(self, state, budget, policy):
        return self.inner.draft(state, budget, policy)

    def commit(self, state, draft, verdict) -> None:
        verdict.probs()
        self.inner.commit(state, draft, verdict)


def decoders(model, config) -> list[Decoder]:
    def shipped(record_trace: bool, full_softmax: bool = False):
        def run(ids, n):
            kwargs = config.generate_kwargs()
            if full_softmax:
                inner = make_drafter(model, skip=kwargs.pop("skip"), draft_weights=kwargs.pop("draft_weights"))
                kwargs["drafter"] = FullSoftmaxDrafter(inner)
            return speculative_generate(model, ids, max_new_tokens=n, record_trace=record_trace, **kwargs)
        return run

    def plain(ids, n):
        return autoregressive_generate(model, ids, max_new_tokens=n)

    return [Decoder(Method("plain", "plain loop"), plain),
            Decoder(Method("self-spec", "shipped, trace (default)"), shipped(True)),
            Decoder(Method("self-spec", "shipped, no trace"), shipped(False)),
            Decoder(Method("self-spec", "shipped, trace + full softmax (before)"), shipped(True, True))]


def main() -> None:
    size = parse_size(__doc__, quick=Size(1, 32, 2))
    model, tokenizer = shipped_model()
    config = best_config("default")
    print(f"shipped draft: {config.describe(model.config.num_hidden_layers)}\n{size.describe()}")
    for _, ds, _, rows in by_source(tokenizer, size, lambda: decoders(model, config)):
        untraced = rows[2]
        print(f"{'method':40} {'ms/token':>9} {'speedup (min-max)':>20}  against no trace")
        for d, row in zip(ds, rows):
            ratio = row["speedup"] / untraced["speedup"]
            overlap = row["speedup_min"] <= untraced["speedup_max"] and untraced["speedup_min"] <= row["speedup_max"]
            note = "" if d.method.kind == "plain" or row is untraced else (
                f"  {ratio:.3f}" + (" (within the noise)" if overlap else ""))
            print(f"{d.method.label:40} {speedup_cells(row)}{note}")


if __name__ == "__main__":
    main()
