"""Drafting from the model's own past (issue 37): lookahead decoding and token recycling beside the plain loop, prompt
lookup, Medusa heads and the shipped self-draft, interleaved on every prompt source (stdlib, packages and their long
variants), greedy, one thread, through labkit.measure.harness.

Rows: the plain loop; prompt lookup alone (up to 6 copied tokens, a plain step when the context has no match);
``default``'s Medusa heads (top-1 chain, stop q < 0.3: the lab's best heads row); the shipped self-draft
(``best_config('default')``) alone and with prompt lookup in front (lookup=6, the lab's best combination);
lookahead decoding (W, N, G) alone and in front of the shipped self-draft (the self-draft drafts when the pool has
nothing for the pending token), and behind prompt lookup in front of it; token recycling (k, nodes) alone and
behind prompt lookup.

Prints per source: ms per token (median, min-max over repeats), speedup over the plain loop (min-max), tokens per
verify (emitted per step), drafted tokens per step, c and c_v (x a plain step) and the analytic limit
(A + 1)/(d·c + c_v) of the speedup formula; every row's output is checked token-identical to the plain loop's.
Then the issue's targets, each said met or not with its numbers ("within the noise" when min-max ranges overlap).

    python docs/notes/lookahead_bench.py                 # 4 prompts x 96 tokens x 3 repeats per source
    python docs/notes/lookahead_bench.py --quick         # a smoke run (indicative numbers only)
"""
from __future__ import annotations

import statistics

import torch
from side_by_side import Size, parse_size, shipped_model, speedup_cells

from labkit import autoregressive_generate, best_config, lookahead, speculative_generate, token_recycling
from labkit.artifacts.prompts import BUILTIN_SOURCES, benchmark_prompts
from labkit.core.drafters import LookupDrafter
from labkit.core.medusa import HeadsDrafter
from labkit.core.policies import FixedK, StaticThreshold
from labkit.core.recycling import rank_template
from labkit.core.request import make_drafter
from labkit.measure.harness import Decoder, Method, run_by_source, summarise
from labkit.training.medusa import load_heads

LOOKUP, WNG, K, NODES = 6, (3, 4, 2), 3, 12


def decoders(model, config, heads) -> list[Decoder]:
    """Every row of the module docstring; drafters made fresh per call (pools and tables start empty)."""
    template = rank_template(NODES, K)
    depth = max(map(len, template))

    def self_draft():
        return make_drafter(model, skip=config.skip, draft_weights=config.draft_weights)

    def row(kind, label, make_drafter_, make_policy):
        return Decoder(Method(kind, label), lambda x, n: speculative_generate(
            model, x, max_new_tokens=n, drafter=make_drafter_(), policy=make_policy()))

    heads_drafter = HeadsDrafter(model, heads)           # made once: checking the heads hashes the LM head
    la = f"lookahead (W {WNG[0]}, N {WNG[1]}, G {WNG[2]})"
    tr = f"token recycling (k {K}, {NODES} nodes)"
    return [
        Decoder(Method("plain", "plain loop", family="baseline"), lambda x, n: autoregressive_generate(model, x, n)),
        row("prompt lookup", f"prompt lookup ({LOOKUP})", lambda: LookupDrafter(LOOKUP), lambda: FixedK(LOOKUP)),
        row("medusa", "Medusa heads, chain, stop q < 0.3", lambda: heads_drafter,
            lambda: StaticThreshold(0.3, heads.n_heads)),
        row("self-spec", "shipped self-draft", self_draft, config.make_policy),
        row("self-spec", "shipped draft + lookup in front", lambda: LookupDrafter(LOOKUP, self_draft()),
            config.make_policy),
        row("lookahead", la, lambda: lookahead(*WNG), lambda: FixedK(WNG[1] - 1)),
        row("lookahead", f"shipped draft, {la} in front", lambda: lookahead(*WNG, fallback=self_draft()),
            config.make_policy),
        row("lookahead", f"shipped draft, lookup then {la}",
            lambda: LookupDrafter(LOOKUP, lookahead(*WNG, fallback=self_draft())), config.make_policy),
        row("recycling", tr, lambda: token_recycling(K, template), lambda: FixedK(depth)),
        row("recycling", f"lookup then {tr}", lambda: LookupDrafter(LOOKUP, token_recycling(K, template)),
            lambda: FixedK(max(depth, LOOKUP))),
    ]


def print_source(source: str, ids: list, ds: list[Decoder], rows: list[dict]) -> None:
    print(f"\n{source} prompts (median length {statistics.median(x.shape[1] for x in ids):.0f} tokens)")
    print(f"{'method':48} {'ms/token':>9} {'speedup (min-max)':>20} {'tok/verify':>10} {'drafted':>8} "
          f"{'c':>6} {'c_v':>5} {'limit':>6}")
    for d, r in zip(ds, rows):
        print(f"{d.method.label:48} {speedup_cells(r)} {r['tokens_per_step']:10.2f} {r['drafted_per_step']:8.2f} "
              f"{r['c']:6.3f} {r['c_v']:5.2f} {r['limit']:6.2f}")


def compare(a: dict, b: dict) -> str:
    """'a ≥ b', 'a < b' or 'within the noise' from the speedups and their min-max ranges."""
    overlap = a["speedup_min"] <= b["speedup_max"] and b["speedup_min"] <= a["speedup_max"]
    verdict = "within the noise" if overlap else ("faster" if a["speedup"] > b["speedup"] else "slower")
    return f"{a['speedup']:.2f}× vs {b['speedup']:.2f}× ({verdict})"


def print_targets(by_source: dict[str, dict[str, dict]]) -> None:
    """The issue's speed targets, each with its numbers from this run."""
    print("\nTargets (this machine, this run):")
    for source, rows in by_source.items():
        la, tr = (next(r for label, r in rows.items() if label.startswith(p)) for p in ("lookahead", "token rec"))
        best = max((la, tr), key=lambda r: r["speedup"])
        lookup = next(r for label, r in rows.items() if label.startswith("prompt lookup"))
        shipped_lookup = rows["shipped draft + lookup in front"]
        combined = max((r for label, r in rows.items() if label.startswith("shipped draft, ")),
                       key=lambda r: r["speedup"])
        print(f"  {source}: better of lookahead / recycling ({best['method']}) {best['speedup']:.2f}× "
              f"({'meets' if best['speedup'] >= 1.3 else 'misses'} 1.3×); against prompt lookup: "
              f"{compare(best, lookup)}; best combination with the shipped draft ({combined['method']}) against "
              f"the shipped draft with lookup in front: {compare(combined, shipped_lookup)}")


def main() -> None:
    size = parse_size(__doc__, quick=Size(2, 32, 2))
    model, tokenizer = shipped_model()
    config, heads = best_config("default"), load_heads("default", model)
    print(f"self-draft: {config.describe(model.config.num_hidden_layers)}; {heads.n_heads} Medusa heads")
    print(size.describe())
    prompt_ids = {source: [tokenizer(p.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
                           for p in benchmark_prompts(size.prompts, source=source)] for source in BUILTIN_SOURCES}
    runs = run_by_source(lambda: decoders(model, config, heads), prompt_ids, max_new_tokens=size.tokens,
                         repeats=size.repeats, progress=True)
    by_source = {}
    for source, source_runs in runs.items():
        rows = summarise(source_runs)
        ds = [Decoder(m, None) for m in source_runs.methods]
        for d, r in zip(ds, rows):
            assert r["identical"] in (True, 1.0) or d.method.kind == "plain", f"{d.method.label} changed the output"
        print_source(source, prompt_ids[source], ds, rows)
        by_source[source] = {d.method.label: {**r, "method": d.method.label} for d, r in zip(ds, rows)}
    print_targets(by_source)


if __name__ == "__main__":
    with torch.inference_mode():
        main()
