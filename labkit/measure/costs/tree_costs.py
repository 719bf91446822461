"""What a tree draft costs and buys on this machine: c_v against the number of tree nodes, and the tree shapes
side by side with the chain and the plain loop.

Notation (docs/notation.md): c_v is the cost of one verify forward over the pending token t_0 and N drafted nodes,
divided by the cost of one plain decoding step (one token) at the same context. A tree verify is one forward of
the target over t_0 + N nodes behind the cached prefix, with the tree's attention mask
(:func:`labkit.core.tree.tree_forward`): a causal model on a CPU pays little for a few extra rows, a lot for many.

- :func:`verify_width_costs`: one verify forward over t_0 + N nodes for each N, and one plain step, interleaved
  over repetitions (odd repetitions in reverse order), each sample the mean of ``inner`` forwards; c_v(N) per
  repetition against the same repetition's plain step, reported as the median and its min–max.
- :func:`compare_shapes`: the plain loop, the chain and each tree shape, interleaved on each prompt source through
  :func:`labkit.measure.harness.run_interleaved`; the harness's rows plus nodes per verify.

Timing goes through :func:`labkit.measure.harness.interleaved_ms` (the harness owns the clock and the protocol).
"""
from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

import torch

from ...core.cache import crop_to, new_cache
from ...core.checks import check_int
from ...core.decoding import autoregressive_generate, decode_one_token, prefill, speculative_generate
from ...core.tree import ancestry, depths, tree_forward
from ...core.tree_shapes import draft_tree
from ..harness import Decoder, Method, interleaved_ms, ratio_spread, run_by_source, summarise

__all__ = ["bushy_parents", "verify_width_costs", "nodes_per_verify", "shape_decoders", "compare_shapes", "WIDTHS"]

WIDTHS = (1, 2, 4, 8, 16, 32)


def bushy_parents(n: int, branching: int = 3) -> list[int]:
    """A tree of ``n`` nodes filled level by level, ``branching`` children per node (node i's parent: i // b - 1;
    the root t_0 has the first ``branching``): the kind of tree a top-k drafter grows."""
    check_int("n", n, 1)
    check_int("branching", branching, 1)
    return [i // branching - 1 for i in range(n)]


@torch.inference_mode()
def verify_width_costs(model, input_ids: torch.Tensor, widths: Sequence[int] = WIDTHS, *, repeats: int = 5,
                       inner: int = 5, branching: int = 3) -> list[dict]:
    """c_v of a tree verify over t_0 + N nodes for each N in ``widths`` (a :func:`bushy_parents` tree), against one
    plain decoding step, behind the prompt ``input_ids`` (1, T) in the cache. One row per N: ``nodes``,
    ``verify_ms`` (median), ``plain_ms`` (median), ``c_v`` (median of the per-repetition ratios), ``c_v_min``,
    ``c_v_max``. Every forward sees the same prefix (the cache is cropped back after each)."""
    check_int("repeats", repeats, 1)
    check_int("inner", inner, 1)
    widths = [check_int("a width", n, 1) for n in widths]
    ids = input_ids[0].tolist()
    cache, prefix = new_cache(model), len(ids) - 1
    prefill(model, input_ids[:, :-1], cache)                        # the prefix; the last prompt token is t_0
    token = ids[-1]

    def plain_step():
        decode_one_token(model, token, prefix, cache)
        crop_to(cache, prefix)

    def tree_step(n: int):
        parents = bushy_parents(n, branching)
        positions = [prefix] + [prefix + d for d in depths(parents)]
        tokens = [token] + [ids[i % len(ids)] for i in range(n)]
        visible = ancestry(parents)

        def run():
            tree_forward(model, cache, tokens, positions, visible, prefix)
            crop_to(cache, prefix)
        return run

    calls = {"plain": plain_step, **{n: tree_step(n) for n in widths}}
    samples = interleaved_ms(calls, repeats=repeats, inner=inner, warmup=1)    # the harness's protocol
    plain = samples["plain"]
    rows = []
    for n in widths:
        c_v, lo, hi = ratio_spread(samples[n], plain)
        rows.append({"nodes": n, "verify_ms": statistics.median(samples[n]), "plain_ms": statistics.median(plain),
                     "c_v": c_v, "c_v_min": lo, "c_v_max": hi})
    return rows


def nodes_per_verify(results) -> float:
    """Mean drafted nodes per verify forward over GenerationResults (a chain's nodes are its tokens)."""
    steps = [s for r in results for s in r.trace.steps]
    return statistics.fmean(len(s.drafted) for s in steps) if steps else float("nan")


def shape_decoders(model, config, shapes: Mapping[str, tuple[str, dict] | None]) -> list[Decoder]:
    """The plain loop, then one decoder per shape: ``shapes`` maps a label to (``draft_tree`` name, options) or None
    for the chain; every one drafts with ``config`` (a :class:`~labkit.core.draft_config.DraftConfig`)."""
    out = [Decoder(Method("plain", "plain loop", family="baseline"),
                   lambda x, n: autoregressive_generate(model, x, n))]
    for label, spec in shapes.items():
        def run(x, n, spec=spec):
            tree = draft_tree(spec[0], **spec[1]) if spec else None
            return speculative_generate(model, x, max_new_tokens=n, tree=tree, **config.generate_kwargs())
        out.append(Decoder(Method("tree" if spec else "chain", label, skip=spec[0] if spec else "chain"), run))
    return out


def compare_shapes(model, config, shapes: Mapping[str, tuple[str, dict] | None],
                   prompt_ids: Mapping[str, Sequence[torch.Tensor]], *, max_new_tokens: int, repeats: int = 3,
                   progress: bool = False) -> tuple[list[dict], dict]:
    """Each shape beside the chain and the plain loop on each prompt source (``prompt_ids``: {source: [ids]}),
    interleaved. Returns (rows: the harness's row per method and source with ``source`` and ``nodes_per_verify``
    added, {source: the :class:`~labkit.measure.harness.Runs`}) ."""
    runs_by_source = run_by_source(lambda: shape_decoders(model, config, shapes), prompt_ids,
                                   max_new_tokens=max_new_tokens, repeats=repeats, progress=progress)
    rows = []
    for source, runs in runs_by_source.items():
        for method, row in zip(runs.methods, summarise(runs)):
            nodes = nodes_per_verify(runs.results(method)) if method.kind != "plain" else float("nan")
            rows.append({**row, "source": source, "nodes_per_verify": nodes})
    return rows, runs_by_source
