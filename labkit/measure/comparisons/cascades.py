"""Cascades (CAS-Spec) against the chain on this machine: the same shipped draft drafting alone and as the top of a
cascade, interleaved with the plain loop through :func:`labkit.measure.harness.run_interleaved`, and what each level
of a cascade did per step.

- :func:`aggressive_level`: a cheaper model level under the shipped draft: its skip set plus the attention and MLP
  blocks of two more layers, int8 weights (as ``docs/notes/cascade_bench.py``).
- :func:`cascade_makers` / :func:`cascade_decoders` / :func:`compare_cascades`: the decoders and the interleaved
  comparison per prompt source; the harness's rows with ``source`` added.
- :func:`level_parts`: per level of a cascade, from ``StepRecord.levels``: the share of steps it drafted in, the
  tokens it proposed per step, the share of them the level above (the top: the target) kept, the tokens it drafted
  itself per step, and ms per forward (lookup: per call, no forward of the model).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from ...core.cascade import cascade
from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.draft_config import DraftConfig
from ...core.skip import SkipSet
from ..harness import Decoder, Method, run_by_source, summarise

__all__ = ["aggressive_level", "cascade_makers", "cascade_decoders", "compare_cascades", "level_parts", "CHAIN"]

CHAIN = "chain (shipped)"


def aggressive_level(config: DraftConfig, n_layers: int, extra: int = 2) -> DraftConfig:
    """The shipped set plus the attention and MLP blocks of the first ``extra`` layers whose attention it keeps,
    with int8 draft weights: a cheaper, much less faithful model level."""
    more = [layer for layer in range(n_layers) if layer not in config.skip.attention][:extra]
    skip = SkipSet(attention=sorted({*config.skip.attention, *more}), mlp=sorted({*config.skip.mlp, *more}))
    return DraftConfig(skip, draft_weights="int8")


def cascade_makers(config: DraftConfig, cheap: DraftConfig) -> dict:
    """label -> a function making a fresh drafter (None: the chain), so every call starts from the same estimates:
    the chain, lookup under the shipped draft, the aggressive level under it, and the dynamic controller over both."""
    return {
        CHAIN: None,
        "lookup > shipped": lambda: cascade(["lookup", config], gamma=6),
        "aggressive int8 > shipped": lambda: cascade([cheap, config], gamma=3),
        "lookup > aggressive > shipped, dynamic": lambda: cascade(["lookup", cheap, config], gamma=[6, 3],
                                                                  controller="dynamic"),
    }


def cascade_decoders(model, config: DraftConfig, makers: Mapping) -> list[Decoder]:
    """The plain loop, then one decoder per entry of ``makers`` (None: the chain with ``config``; else a cascade
    with ``config``'s stop rule)."""
    out = [Decoder(Method("plain", "plain loop", family="baseline"),
                   lambda x, n: autoregressive_generate(model, x, n))]
    for label, make in makers.items():
        def run(x, n, make=make):
            if make is None:
                return speculative_generate(model, x, max_new_tokens=n, **config.generate_kwargs())
            return speculative_generate(model, x, max_new_tokens=n, drafter=make(), policy=config.make_policy())
        out.append(Decoder(Method("cascade" if make else "chain", label, weights=config.weights_label), run))
    return out


def compare_cascades(model, config: DraftConfig, makers: Mapping, prompt_ids: Mapping[str, Sequence[torch.Tensor]],
                     *, max_new_tokens: int, repeats: int = 3, progress: bool = False) -> tuple[list[dict], dict]:
    """Each cascade beside the chain and the plain loop on each prompt source (``prompt_ids``: {source: [ids]}),
    interleaved. Returns (the harness's rows with ``source`` added, {source: :class:`~labkit.measure.harness.Runs`})."""
    runs_by_source = run_by_source(lambda: cascade_decoders(model, config, makers), prompt_ids,
                                   max_new_tokens=max_new_tokens, repeats=repeats, progress=progress)
    rows = [{**row, "source": source} for source, runs in runs_by_source.items() for row in summarise(runs)]
    return rows, runs_by_source


def level_parts(results, cascade_label: str = "") -> list[dict]:
    """One dict per level (cheapest first) of the cascade steps in ``results`` (GenerationResults): ``level``,
    ``used`` (share of steps), ``proposed``, ``accepted`` and ``own`` (per step), ``kept`` (accepted ÷ proposed),
    ``ms_per_forward`` (lookup: per call), ``steps``, ``is_top`` and ``cascade`` (the label given)."""
    steps = [s for r in results for s in r.trace.steps if s.levels is not None]
    if not steps:
        return []
    out, n = [], len(steps)
    names = [level["level"] for level in steps[0].levels]
    for k, name in enumerate(names):
        parts = [s.levels[k] for s in steps]
        proposed, accepted = sum(p["proposed"] for p in parts), sum(p["accepted"] for p in parts)
        forwards, seconds = sum(p["forwards"] for p in parts), sum(p["seconds"] for p in parts)
        out.append({"cascade": cascade_label, "level": name, "is_top": k == len(names) - 1,
                    "used": sum(bool(p["used"]) for p in parts) / n, "proposed": proposed / n,
                    "accepted": accepted / n, "own": sum(p["own"] for p in parts) / n,
                    "kept": accepted / proposed if proposed else float("nan"),
                    "ms_per_forward": 1e3 * seconds / forwards if forwards else float("nan"), "steps": n})
    return out
