"""Notebook 06's lookahead section: a lookahead run whose pool and steps the notebook draws, a sweep of the window W,
and the sentences written from their numbers (counts: tokens per target forward do not depend on the machine); then
the drafters that run no draft forward side by side (:func:`draftless_methods`), read on the speedup formula
(:func:`formula_sentence`, whose timings are this machine's; which is faster, and whether within the noise, is said
by :func:`labkit.lessons.parallel_decoding.speed_sentence`).

A lookahead step is one forward of the target (the window's Jacobi update and the verification of pooled n-grams
together, :mod:`labkit.core.lookahead`), so "tokens per forward" is tokens emitted per step; plain decoding: 1.
"""
from __future__ import annotations

from ..artifacts.models import load_medusa_heads
from ..core.decoding import autoregressive_generate, speculative_generate
from ..core.drafters import LookupDrafter
from ..core.lookahead import LookaheadDrafter, lookahead
from ..core.medusa import HeadsDrafter
from ..core.policies import FixedK, StaticThreshold
from ..core.recycling import rank_template, token_recycling

__all__ = ["lookahead_run", "window_sweep", "pool_sentence", "sweep_sentence", "widest_step", "draftless_methods",
           "formula_lines", "formula_sentence"]


def lookahead_run(model, ids, max_new_tokens: int, W: int = 3, N: int = 4, G: int = 2):
    """(result, drafter, identical): one greedy lookahead run, its drafter (pool and history to inspect) and whether
    it matched plain greedy decoding token for token."""
    drafter = LookaheadDrafter(W, N, G)
    result = speculative_generate(model, ids, drafter=drafter, policy=FixedK(N - 1), max_new_tokens=max_new_tokens)
    plain = autoregressive_generate(model, ids, max_new_tokens)
    return result, drafter, bool(result.sequences.equal(plain.sequences))


def window_sweep(model, prompt_ids: list, max_new_tokens: int, windows=(1, 2, 3, 4, 6), ngram_sizes=(3, 4),
                 G: int = 2) -> list[dict]:
    """For each N and W: tokens per target forward over ``prompt_ids`` (emitted / steps), the tokens each forward
    reads (t₀, the trie, the window: its width) on average, and whether every output matched plain decoding."""
    rows = []
    for N in ngram_sizes:
        for W in windows:
            emitted = steps = width = 0
            identical = True
            for ids in prompt_ids:
                result, drafter, same = lookahead_run(model, ids, max_new_tokens, W, N, G)
                identical &= same
                emitted += len(result.new_tokens)
                steps += len(result.trace.steps)
                width += sum(h["width"] for h in drafter.history) + len(result.trace.steps) - len(drafter.history)
            rows.append({"W": W, "N": N, "G": G, "tokens_per_forward": emitted / steps, "width": width / steps,
                         "identical": identical})
    return rows


def widest_step(drafter: LookaheadDrafter, result) -> tuple[int, list[int], int]:
    """(step index, the trie's parents, window levels) of the step that verified the most trie nodes, for drawing
    its combined mask (the levels read back from the width of that step's forward)."""
    steps = result.trace.steps[:len(drafter.history)]               # the steps whose forward held the window
    best = max(range(len(steps)), key=lambda i: (steps[i].n_drafted, -i))
    parents = list(steps[best].parents or [])
    return best, parents, (drafter.history[best]["width"] - 1 - len(parents)) // drafter.W


def pool_sentence(history: list[dict]) -> str:
    """What the pool held and what came of it, from ``LookaheadDrafter.history``."""
    with_draft = [h for h in history if h["proposed"]]
    kept = [h for h in history if h["accepted"]]
    accepted = sum(len(h["accepted"]) for h in history)
    first = next((i for i, h in enumerate(history) if h["proposed"]), None)
    text = (f"After {len(history)} steps the pool held {history[-1]['pool'] if history else 0} n-grams. "
            f"{len(with_draft)} steps found pooled n-grams starting with the pending token"
            + (f" (the first at step {first})" if first is not None else "")
            + f"; {len(kept)} of them kept at least one drafted token, {accepted} drafted tokens in all")
    return text + (f", so a step emitted {(len(history) + accepted) / len(history):.2f} tokens on average."
                   if history else ".")


def sweep_sentence(rows: list[dict]) -> str:
    """Which window gave the most tokens per forward, and what that forward had to read."""
    best = max(rows, key=lambda r: r["tokens_per_forward"])
    same_n = [r for r in rows if r["N"] == best["N"]]
    narrowest = min(same_n, key=lambda r: r["W"])
    text = (f"The most tokens per forward, {best['tokens_per_forward']:.2f}, came with W = {best['W']} and "
            f"N = {best['N']}, each forward reading {best['width']:.1f} tokens on average; with the narrowest window "
            f"(W = {narrowest['W']}) it was {narrowest['tokens_per_forward']:.2f} at {narrowest['width']:.1f} tokens.")
    return text + (" Every output was plain greedy decoding's, token for token." if all(r["identical"] for r in rows)
                   else " Some output differed from plain greedy decoding: a bug to report.")


def draftless_methods(model, model_name: str, lookup: int = 6) -> dict:
    """{label: run(ids, n)}: the plain loop (the reference) and the drafters that run no draft forward of their
    own: prompt lookup, lookahead decoding, token recycling and, when the model has them, its Medusa heads (top-1
    chain, stop q < 0.3); fresh drafters per call, so pools and tables start empty on every prompt."""
    methods = {"plain loop": lambda ids, n: autoregressive_generate(model, ids, n),
               f"prompt lookup ({lookup})": lambda ids, n: speculative_generate(
                   model, ids, drafter=LookupDrafter(lookup), policy=FixedK(lookup), max_new_tokens=n),
               "lookahead": lambda ids, n: speculative_generate(
                   model, ids, drafter=lookahead(), policy=FixedK(lookahead().N - 1), max_new_tokens=n),
               "token recycling": lambda ids, n: speculative_generate(
                   model, ids, drafter=token_recycling(), policy=FixedK(max(map(len, rank_template()))),
                   max_new_tokens=n)}
    try:
        heads = load_medusa_heads(model_name, model)
    except (FileNotFoundError, ValueError):
        return methods
    drafter = HeadsDrafter(model, heads)
    methods["Medusa heads"] = lambda ids, n: speculative_generate(
        model, ids, drafter=drafter, policy=StaticThreshold(0.3, heads.n_heads), max_new_tokens=n)
    return methods


def formula_lines(frame) -> list[str]:
    """Each drafter's reading of the speedup formula (A + 1)/(d·c + c_v), one line per drafter, from a
    :func:`labkit.measure.parallel.compare_decoders` frame: tokens per verify, c_v, c, what the formula allows and
    what this machine measured; then which drafter emitted the most per verify and which verified cheapest.
    Counts do not depend on the machine; c, c_v and the speedup do, so every line says "this machine"."""
    rows = list(frame.index[1:])
    lines = [f"{m}: {frame.loc[m, 'tokens_per_step']:.2f} tokens per verify at c_v {frame.loc[m, 'c_v']:.2f} and "
             f"c {frame.loc[m, 'c']:.3f} on this machine, so the formula allows {frame.loc[m, 'limit']:.2f}× and "
             f"this machine measured {frame.loc[m, 'speedup']:.2f}×." for m in rows]
    most = max(rows, key=lambda m: frame.loc[m, "tokens_per_step"])
    cheapest = min(rows, key=lambda m: frame.loc[m, "c_v"])
    return lines + [f"The most tokens per verify: {most}. The cheapest verify on this machine: {cheapest}"
                    + (" (the same drafter)." if most == cheapest else ".")]


def formula_sentence(frame) -> str:
    """:func:`formula_lines` joined into one paragraph."""
    return " ".join(formula_lines(frame))
