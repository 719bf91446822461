"""Does gating speculation on the target's confidence pay? A threshold sweep, and what the gate sees.

Notation (as everywhere in labkit): p target, q draft, accepted/drafted (measured acceptance), tokens per step.

:func:`gate_sweep` runs, for each set of prompts (in-distribution stdlib prompts, and text from elsewhere),
plain decoding and one drafter under each draft policy (e.g. the adaptive draft exit, a fixed count) with no
gate and with a :class:`~labkit.core.gate.TargetConfidenceGate` at each threshold, interleaved. It keeps the
ungated runs' traces too: :func:`gate_signal` pairs each step's draft outcome with the target's confidence
in the token just before it (what the gate would have read), so one can see *why* a threshold helps or not:
how many steps it turns plain, and how good the drafts it suppresses would have been.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from ..core.decoding import GenerationResult, autoregressive_generate, speculative_generate
from ..core.drafters import Drafter
from ..core.gate import TargetConfidenceGate
from ..core.policies import AdaptiveThreshold, DraftPolicy, FixedK
from .drafter_comparison import interleaved_runs, run_summary
from .saturation import roc_auc

__all__ = ["GateSweep", "gate_sweep", "gate_signal", "gate_preview"]


@dataclass
class GateSweep:
    table: pd.DataFrame          # one row per (prompt set, policy, threshold); threshold NaN = no gate
    signal: pd.DataFrame         # one row per step of the ungated runs (see gate_signal)


def _policy_label(policy: str, threshold) -> str:
    return f"{policy}, no gate" if threshold is None else f"{policy}, gate {threshold:g}"


def gate_sweep(model, tokenizer, prompt_sets: dict[str, list[str]], make_drafter: Callable[[], Drafter], *,
               thresholds=(0.2, 0.4, 0.6, 0.8), policies: dict[str, Callable[[], DraftPolicy]] | None = None,
               max_new_tokens: int = 64, repeats: int = 2, progress: bool = True) -> GateSweep:
    """Speedup (vs plain, same prompts, interleaved), acceptance, tokens per step and gated fraction for
    every prompt set x policy x gate threshold (and no gate)."""
    policies = policies or {"adaptive draft exit": AdaptiveThreshold, "fixed 4": lambda: FixedK(4)}
    for t in thresholds:
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"gate thresholds must be in [0, 1], got {t!r}")
    rows, signals = [], []
    for set_name, texts in prompt_sets.items():
        prompt_ids = [tokenizer(t, return_tensors="pt")["input_ids"] for t in texts]
        runs = {"plain": lambda ids, n: autoregressive_generate(model, ids, n)}
        configs = {}
        for pname, make_policy in policies.items():
            for t in (None, *thresholds):
                label = _policy_label(pname, t)
                configs[label] = (pname, t)
                policy = make_policy() if t is None else TargetConfidenceGate(make_policy(), t)
                runs[label] = lambda ids, n, p=policy: speculative_generate(model, ids, drafter=make_drafter(),
                                                                            policy=p, max_new_tokens=n)
        results = interleaved_runs(runs, prompt_ids, repeats, max_new_tokens, desc=f"gate sweep: {set_name}",
                                   progress=progress)
        plain = run_summary(results["plain"])
        for label, (pname, t) in configs.items():
            s = run_summary(results[label])
            rows.append({"prompts": set_name, "policy": pname, "threshold": np.nan if t is None else t,
                         "speedup": plain["ms_per_token"] / s["ms_per_token"], **s,
                         "plain_ms_per_token": plain["ms_per_token"]})
            if t is None:
                signal = gate_signal([r for rep in results[label] for r in rep])
                signals.append(signal.assign(prompts=set_name, policy=pname))
    return GateSweep(pd.DataFrame(rows), pd.concat(signals, ignore_index=True))


def gate_signal(results: list[GenerationResult]) -> pd.DataFrame:
    """One row per step that drafted (after the first step of a generation): the target's confidence in the
    token before it (``prev_confidence``, what the gate reads), whether its first drafted token was accepted,
    and accepted / drafted."""
    rows = []
    for r in results:
        steps = r.trace.steps
        for before, step in zip(steps, steps[1:]):
            if step.n_drafted:
                rows.append({"prev_confidence": before.target_confidence, "first_accepted": step.n_accepted > 0,
                             "accepted_fraction": step.n_accepted / step.n_drafted, "n_drafted": step.n_drafted,
                             "n_accepted": step.n_accepted})
    return pd.DataFrame(rows, columns=["prev_confidence", "first_accepted", "accepted_fraction", "n_drafted",
                                       "n_accepted"])


def gate_preview(signal: pd.DataFrame, threshold: float) -> dict:
    """What a gate at ``threshold`` would have done to these ungated steps: the fraction it turns plain, the
    acceptance of the drafts it keeps and of those it suppresses, the accepted tokens it gives up, and how well
    the previous confidence predicts the first drafted token's acceptance (AUC, threshold-free)."""
    if signal.empty:
        raise ValueError("no drafted steps to preview")
    unsure = signal["prev_confidence"] < threshold
    kept, dropped = signal[~unsure], signal[unsure]

    def acceptance(df):
        return float(df["n_accepted"].sum() / df["n_drafted"].sum()) if len(df) and df["n_drafted"].sum() else float("nan")

    labels = signal["first_accepted"].to_numpy()
    auc = roc_auc(signal["prev_confidence"].to_numpy(), labels) if 0 < labels.sum() < len(labels) else float("nan")
    return {"threshold": float(threshold), "gated_fraction": float(unsure.mean()), "acceptance_kept": acceptance(kept),
            "acceptance_gated": acceptance(dropped), "accepted_tokens_lost": float(dropped["n_accepted"].sum() /
                                                                                  max(1, signal["n_accepted"].sum())),
            "auc": auc}
