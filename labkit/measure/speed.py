"""Wall-clock comparisons of whole decoding runs, and tables of what their traces recorded."""
from __future__ import annotations

import copy
import statistics
from typing import Mapping

import pandas as pd

from ..core.decoding import autoregressive_generate, speculative_generate
from ..core.policies import AdaptiveThreshold, DraftPolicy
from ..core.skip import SkipSet

__all__ = ["measure_speedup", "summary_frame"]


def measure_speedup(model, input_ids, skip: SkipSet, *, policies: Mapping | None = None, max_new_tokens: int = 48,
                    repeats: int = 3):
    """Wall clock of greedy plain decoding and of self-speculative decoding with ``skip``, one row each.

    ``policies``: ``{label: draft policy}`` (default: an :class:`~labkit.AdaptiveThreshold`); each run
    gets a fresh copy. Runs are interleaved ``repeats`` times and the medians kept (a burst of background
    load hits every row alike). Returns a pandas DataFrame indexed by 'plain decoding' and the labels, with
    ms_per_token (prefill included, alike for all), speedup, acceptance_rate, tokens_per_step and identical
    (the output equals plain greedy decoding token for token, as greedy speculative decoding guarantees).
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    policies = dict(policies) if policies is not None else {"adaptive threshold": AdaptiveThreshold()}
    if not policies:
        raise ValueError("give at least one policy")
    for label, policy in policies.items():
        if not isinstance(policy, DraftPolicy):
            raise TypeError(f"policy {label!r} is a {type(policy).__name__}, not a labkit draft policy")
    autoregressive_generate(model, input_ids, 4, eos_token_id=[])                       # warm-up
    for policy in policies.values():
        speculative_generate(model, input_ids, skip=skip, policy=copy.deepcopy(policy), max_new_tokens=4,
                             eos_token_id=[])
    times: dict[str, list[float]] = {"plain decoding": [], **{label: [] for label in policies}}
    identical = dict.fromkeys(policies, True)
    summaries = {}
    for _ in range(repeats):
        plain = autoregressive_generate(model, input_ids, max_new_tokens, eos_token_id=[])
        times["plain decoding"].append(plain.ms_per_token)
        for label, policy in policies.items():
            out = speculative_generate(model, input_ids, skip=skip, policy=copy.deepcopy(policy),
                                       max_new_tokens=max_new_tokens, eos_token_id=[])
            times[label].append(out.ms_per_token)
            identical[label] &= out.new_tokens == plain.new_tokens
            summaries[label] = out.trace.summary()
    plain_ms = statistics.median(times["plain decoding"])
    rows = [{"decoding": "plain decoding", "ms_per_token": plain_ms, "speedup": 1.0, "acceptance_rate": float("nan"),
             "tokens_per_step": 1.0, "identical": True}]
    for label in policies:
        ms = statistics.median(times[label])
        rows.append({"decoding": label, "ms_per_token": ms, "speedup": plain_ms / ms,
                     "acceptance_rate": summaries[label]["acceptance_rate"],
                     "tokens_per_step": summaries[label]["tokens_per_step"], "identical": identical[label]})
    return pd.DataFrame(rows).set_index("decoding")


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
