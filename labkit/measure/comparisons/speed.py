"""Wall-clock comparisons of whole decoding runs, and tables of what their traces recorded."""
from __future__ import annotations

import copy
from collections.abc import Mapping

import pandas as pd

from ...core.checks import check_int
from ...core.decoding import autoregressive_generate, speculative_generate
from ...core.policies import AdaptiveThreshold, DraftPolicy
from ...core.skip import SkipSet
from ..harness import Decoder, Method, frame, run_interleaved, summarise

__all__ = ["measure_speedup", "summary_frame"]


def measure_speedup(model, input_ids, skip: SkipSet, *, policies: Mapping | None = None, max_new_tokens: int = 48,
                    repeats: int = 3):
    """Wall clock of greedy plain decoding and of self-speculative decoding with ``skip``, one row each.

    ``policies``: ``{label: draft policy}`` (default: an :class:`~labkit.AdaptiveThreshold`); each run
    gets a fresh copy. Runs are interleaved ``repeats`` times by :func:`labkit.measure.harness.run_interleaved`
    (a burst of background load hits every row alike). Returns a pandas DataFrame indexed by 'plain decoding' and
    the labels with the harness's columns: ms_per_token (prefill included, alike for all) and its spread, speedup,
    acceptance, tokens_per_step, c, c_v, limit and identical (the output equals plain greedy decoding token for
    token, as greedy speculative decoding guarantees).
    """
    check_int("repeats", repeats, 1)
    policies = dict(policies) if policies is not None else {"adaptive threshold": AdaptiveThreshold()}
    if not policies:
        raise ValueError("give at least one policy")
    for label, policy in policies.items():
        if not isinstance(policy, DraftPolicy):
            raise TypeError(f"policy {label!r} is a {type(policy).__name__}, not a labkit draft policy")
    decoders = [Decoder(Method("plain", "plain decoding", family="baseline"),
                        lambda ids, n: autoregressive_generate(model, ids, n, eos_token_id=[]))]
    for label, policy in policies.items():
        decoders.append(Decoder(Method("self-spec", label, policy=type(policy).__name__, skip=str(skip)),
                                lambda ids, n, p=policy: speculative_generate(
                                    model, ids, skip=skip, policy=copy.deepcopy(p), max_new_tokens=n,
                                    eos_token_id=[])))
    runs = run_interleaved(decoders, [input_ids], max_new_tokens=max_new_tokens, repeats=repeats, warmup_tokens=4,
                           desc="speedup", progress=False)
    return frame(summarise(runs)).rename_axis("decoding")


def summary_frame(runs: dict):
    """One row per run ({label: GenerationResult or Trace}): acceptance, tokens per step, time per token."""
    rows = []
    for label, run in runs.items():
        s = getattr(run, "trace", run).summary()
        rows.append({"run": label, "steps": s["steps"], "tokens": s["emitted"], "drafted": s["drafted"],
                     "accepted": s["accepted"], "acceptance_rate": s["acceptance_rate"],
                     "tokens_per_step": s["tokens_per_step"], "drafted_per_step": s["drafted_per_step"],
                     "ms_per_token": s["ms_per_token_with_prefill"]})
    return pd.DataFrame(rows).set_index("run")
