"""One cell of the playground grid (:mod:`labkit.measure.grid.run`): its runs' sums over the prompts of one repetition,
its timing against the plain runs around it, and its row over the repetitions.

Notation (docs/notation.md): A accepted and d drafted per step; c and c_v the draft cost per drafted token and
the verify cost per step relative to the plain loop's ms per token (:func:`labkit.measure.harness.phase_costs`);
the analytic limit (A + 1)/(d·c + c_v) is :func:`labkit.core.expectation.speedup_limit`.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import torch

from ...core.expectation import speedup_limit
from ..harness import phase_costs
from .results import Setting

__all__ = ["CellStats", "cell_timing", "cell_row"]


class CellStats:
    """Running sums of one cell in one repetition, over the prompts (token counts are the same in every
    repetition: greedy decoding, a fresh policy per repetition)."""

    def __init__(self) -> None:
        self.seconds_by_prompt: list[float] = []
        self.tokens_by_prompt: list[int] = []
        self.plain_ms_by_prompt: list[float] = []    # the plain runs around this run's chunk (mean ms per token)
        self.steps = self.drafted = self.accepted = self.emitted = 0
        self.draft_s = self.verify_s = 0.0
        self.verify_model_ms = 0.0          # sum over steps of the cost model's verify cost
        self.identical: list[bool] = []
        self.thresholds: list[float] = []
        self.final_threshold = float("nan")

    @property
    def new_tokens(self) -> int:
        return sum(self.tokens_by_prompt)

    def add(self, result, plain_sequence, cost_model, plain_ms: float = float("nan")) -> None:
        trace = result.trace
        self.plain_ms_by_prompt.append(plain_ms)
        self.seconds_by_prompt.append(result.elapsed_s)
        self.tokens_by_prompt.append(result.sequences.shape[1] - result.prompt_length)
        self.steps += len(trace.steps)
        self.drafted += trace.n_drafted
        self.accepted += trace.n_accepted
        self.emitted += trace.n_emitted
        self.draft_s += sum(s.draft_s for s in trace.steps)
        self.verify_s += sum(s.verify_s for s in trace.steps)
        if cost_model is not None:
            self.verify_model_ms += sum(cost_model.verify_step_ms(min(s.n_drafted, cost_model.max_draft))
                                        for s in trace.steps)
        self.thresholds.extend(s.threshold for s in trace.steps if s.threshold is not None)
        if trace.steps and trace.steps[-1].policy_state.get("threshold") is not None:
            self.final_threshold = float(trace.steps[-1].policy_state["threshold"])
        if plain_sequence is not None:
            self.identical.append(bool(torch.equal(result.sequences, plain_sequence)))

    def token_counts(self) -> tuple:
        return (self.tokens_by_prompt, self.steps, self.drafted, self.accepted, self.emitted)


def cell_timing(st: CellStats, baseline_ms: Sequence[float] | None = None) -> dict:
    """One repetition's timing against its plain baseline (ms per token, per prompt; default: the plain runs
    around each run's chunk): the plain loop's time for the same tokens ÷ the speculative time; c and c_v
    relative to the plain ms per token."""
    nan = float("nan")
    baseline_ms = st.plain_ms_by_prompt if baseline_ms is None else baseline_ms
    plain_ms = sum(b * n for b, n in zip(baseline_ms, st.tokens_by_prompt))     # plain loop, same tokens
    spec_ms = 1e3 * sum(st.seconds_by_prompt)
    base = plain_ms / st.new_tokens if st.new_tokens else nan                  # pooled plain ms per token
    A = st.accepted / st.steps if st.steps else nan
    d = st.drafted / st.steps if st.steps else nan
    c, c_v = phase_costs(st.draft_s, st.drafted, st.verify_s, st.steps, base)
    c = c if st.steps else 0.0
    return {"ms_per_token": spec_ms / st.new_tokens if st.new_tokens else nan, "plain_ms_per_token": base,
            "speedup": plain_ms / spec_ms if spec_ms > 0 else nan, "c": c, "c_v": c_v,
            "analytic_speedup": speedup_limit(A, d, c, c_v) if st.steps and c_v > 0 else nan}


def _median(values) -> float:
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else float("nan")


def cell_row(setting: Setting, rounds: Sequence[CellStats], c_forward: float | None, cost_model) -> dict:
    """A cell over its repetitions: token statistics (identical in every repetition), the median timing
    and the speedup's min-max over repetitions, each repetition against the plain runs around its chunk.
    ``cost_model`` (and ``c_forward`` from it) must be the one measured with the setting's draft weights."""
    nan = float("nan")
    st = rounds[0]
    timings = [cell_timing(r) for r in rounds]
    speedups = [t["speedup"] for t in timings]
    A = st.accepted / st.steps if st.steps else nan
    d = st.drafted / st.steps if st.steps else nan
    c_v_forward = analytic_forward = nan
    if cost_model is not None and st.steps:            # forward passes only, relative to the full one-token forward
        c_v_forward = st.verify_model_ms / st.steps / cost_model.full_step_ms
        analytic_forward = speedup_limit(A, d, c_forward, c_v_forward)
    return {
        "ratio": setting.ratio, "threshold": setting.threshold, "max_draft": setting.max_draft,
        "policy": setting.policy, "draft_weights": setting.draft_weights,
        "acceptance_rate": st.accepted / st.drafted if st.drafted else nan,
        "tokens_per_step": st.emitted / st.steps if st.steps else nan,
        "drafted_per_step": d, "accepted_per_step": A,
        **{k: _median(t[k] for t in timings) for k in ("ms_per_token", "plain_ms_per_token", "speedup", "c", "c_v",
                                                       "analytic_speedup")},
        "speedup_min": min(speedups), "speedup_max": max(speedups), "speedup_repeats": speedups,
        "c_forward": nan if c_forward is None else c_forward, "c_v_forward": c_v_forward,
        "analytic_speedup_forward": analytic_forward,
        "mean_threshold": statistics.fmean(st.thresholds) if st.thresholds else nan,
        "final_threshold": st.final_threshold,
        "steps": st.steps, "drafted": st.drafted, "accepted": st.accepted, "new_tokens": st.new_tokens,
        "identical_to_plain": all(all(r.identical) for r in rounds) if st.identical else None,
        "repeats_agree": all(r.token_counts() == st.token_counts() for r in rounds),
    }
