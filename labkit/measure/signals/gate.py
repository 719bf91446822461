"""Does gating speculation on the target's confidence pay? A threshold sweep, and what the gate sees.

Notation (as everywhere in labkit): p target, q draft, accepted/drafted (measured acceptance), tokens per step.

:func:`gate_sweep` runs, for each set of prompts (in-distribution stdlib prompts, and text from elsewhere),
plain decoding and one drafter under each draft policy (e.g. the adaptive draft exit, a fixed count) with no
gate and with a :class:`~labkit.core.gate.TargetConfidenceGate` at each threshold, interleaved. It keeps the
ungated runs' traces too: :func:`gate_signal` pairs each step's draft outcome with the target's confidence
in the token just before it (what the gate would have read), so one can see *why* a threshold helps or not:
how many steps it turns plain, and how good the drafts it suppresses would have been.

:func:`gate_control` asks whether the gate's *choice* of steps matters, or only how many it turns plain: beside
no gate and the gate, a :class:`RandomGate` turns steps plain at random with the probability the gate closed at
(per chance to close, measured in an untimed pass: :func:`measured_gated_fraction`), so the control turns as large a
fraction of its steps plain as the gate does (a control arm), all interleaved. A gate that picks the right steps beats
its random control.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...core.checks import record_from
from ...core.decoding import GenerationResult, autoregressive_generate, speculative_generate
from ...core.drafters import Drafter
from ...core.gate import TargetConfidenceGate
from ...core.policies import AdaptiveThreshold, DraftPolicy, FixedK
from ..harness import Decoder, Method, run_interleaved, summarise
from .saturation import roc_auc

__all__ = ["GateRun", "GateSweep", "gate_sweep", "gate_signal", "gate_preview", "RandomGate", "gate_control",
           "measured_gated_fraction"]


@dataclass
class GateSweep:
    table: pd.DataFrame          # one row per (prompt set, policy, threshold); threshold NaN = no gate
    signal: pd.DataFrame         # one row per step of the ungated runs (see gate_signal)


def _policy_label(policy: str, threshold) -> str:
    return f"{policy}, no gate" if threshold is None else f"{policy}, gate {threshold:g}"


def _check_thresholds(thresholds) -> None:
    for t in thresholds:
        if not 0.0 <= t <= 1.0:
            raise ValueError(f"gate thresholds must be in [0, 1], got {t!r}")


def _plain_arm(model) -> tuple:
    return (Decoder(Method("plain", "plain", family="baseline"), lambda ids, n: autoregressive_generate(model, ids, n)),
            {}, None)


def _spec(model, make_drafter: Callable[[], Drafter], policy: DraftPolicy):
    return lambda ids, n: speculative_generate(model, ids, drafter=make_drafter(), policy=policy, max_new_tokens=n)


@dataclass(frozen=True)
class GateRun:
    """How :func:`gate_sweep` and :func:`gate_control` run their arms: ``max_new_tokens`` per prompt, interleaved
    ``repeats`` times (None: 2 for the sweep, 3 for the control), ``seed`` of the random control."""

    max_new_tokens: int = 64
    repeats: int | None = None
    seed: int = 0
    progress: bool = True


def _per_prompt_set(tokenizer, prompt_sets: dict[str, list[str]], arms_for: Callable[[list], list], *, label: str,
                    run: GateRun, repeats: int) -> GateSweep:
    """What :func:`gate_sweep` and :func:`gate_control` share: for each prompt set the arms ``arms_for(prompt ids)``
    gives ([(decoder, its columns, the signal's policy label or None)], the plain loop first) run interleaved, one row
    per arm but the plain one (the harness's columns, then ``prompts``, the arm's columns and the plain loop's ms per
    token), and the steps of each arm with a signal label as :func:`gate_signal` gives them."""
    rows, signals = [], []
    for set_name, texts in prompt_sets.items():
        prompt_ids = [tokenizer(t, return_tensors="pt")["input_ids"] for t in texts]
        arms = arms_for(prompt_ids)
        runs = run_interleaved([a[0] for a in arms], prompt_ids, max_new_tokens=run.max_new_tokens,
                               repeats=run.repeats or repeats, warmup_tokens=4, desc=f"{label}: {set_name}",
                               progress=run.progress)
        summary = summarise(runs)
        for (d, columns, signal_policy), row in zip(arms[1:], summary[1:]):
            rows.append({**row, "prompts": set_name, **columns, "plain_ms_per_token": summary[0]["ms_per_token"]})
            if signal_policy is not None:
                signal = gate_signal([r.result for rep in runs.records[d.method] for r in rep])
                signals.append(signal.assign(prompts=set_name, policy=signal_policy))
    return GateSweep(pd.DataFrame(rows), pd.concat(signals, ignore_index=True))


def gate_sweep(model, tokenizer, prompt_sets: dict[str, list[str]], make_drafter: Callable[[], Drafter], *,
               thresholds=(0.2, 0.4, 0.6, 0.8), policies: dict[str, Callable[[], DraftPolicy]] | None = None,
               run: GateRun | None = None, **options) -> GateSweep:
    """Speedup (vs plain, same prompts, interleaved), acceptance, tokens per step and gated fraction for
    every prompt set x policy x gate threshold (and no gate). ``run``: a :class:`GateRun`, or its fields by name."""
    run = record_from("run", run, GateRun, options)
    policies = policies or {"adaptive draft exit": AdaptiveThreshold, "fixed 4": lambda: FixedK(4)}
    _check_thresholds(thresholds)

    def arms(prompt_ids) -> list:
        out = [_plain_arm(model)]
        for pname, make_policy in policies.items():
            for t in (None, *thresholds):
                policy = make_policy() if t is None else TargetConfidenceGate(make_policy(), t)
                out.append((Decoder(Method("self-spec", _policy_label(pname, t), policy=pname, gate=t),
                                    _spec(model, make_drafter, policy)),
                            {"threshold": np.nan if t is None else t}, pname if t is None else None))
        return out

    return _per_prompt_set(tokenizer, prompt_sets, arms, label="gate sweep", run=run, repeats=2)


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
        return (float(df["n_accepted"].sum() / df["n_drafted"].sum()) if len(df) and df["n_drafted"].sum()
                else float("nan"))

    labels = signal["first_accepted"].to_numpy()
    auc = roc_auc(signal["prev_confidence"].to_numpy(), labels) if 0 < labels.sum() < len(labels) else float("nan")
    return {"threshold": float(threshold), "gated_fraction": float(unsure.mean()), "acceptance_kept": acceptance(kept),
            "acceptance_gated": acceptance(dropped), "accepted_tokens_lost": float(dropped["n_accepted"].sum() /
                                                                                  max(1, signal["n_accepted"].sum())),
            "auc": auc}


class RandomGate(TargetConfidenceGate):
    """The control arm of a gate: after every verification, the next step is decoded plainly with probability
    ``fraction`` whatever the target's confidence (its own seeded ``random.Random``: no global state). Same
    bookkeeping as the gate (``gate_open`` in ``state()``), so the harness counts its gated steps alike."""

    def __init__(self, policy: DraftPolicy, fraction: float, seed: int = 0):
        super().__init__(policy, 0.0)
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"fraction must be in [0, 1], got {fraction!r}")
        self.fraction, self.rng = float(fraction), random.Random(seed)

    def observe_target(self, confidence: float) -> None:
        self.policy.observe_target(confidence)
        self.last_confidence = float(confidence)
        self.open = self.rng.random() >= self.fraction
        self.n_observed += 1
        self.n_closed += not self.open

    def __repr__(self) -> str:
        return f"RandomGate({self.policy!r}, fraction={self.fraction:.3f})"


def measured_gated_fraction(model, prompt_ids, make_drafter: Callable[[], Drafter],
                            make_policy: Callable[[], DraftPolicy], threshold: float, max_new_tokens: int) -> float:
    """How often a gate at ``threshold`` closed on these prompts, per chance it had to close (one untimed pass: the
    random control's probability, measured rather than guessed).

    Per chance, not per step: a generation of n steps gives the gate n - 1 chances (after every step but the last;
    its first step always drafts, ``begin`` opens the gate), and the harness counts its gated fraction as
    gated / n. Dividing by n here would set the control's probability too low by (n - 1) / n, and then the control
    would turn fewer of its steps plain than the gate did (most on short generations)."""
    policy = TargetConfidenceGate(make_policy(), threshold)
    gated = chances = 0
    for ids in prompt_ids:
        out = speculative_generate(model, ids, drafter=make_drafter(), policy=policy, max_new_tokens=max_new_tokens)
        gated += sum(1 for st in out.trace.steps[:-1] if st.policy_state.get("gate_open") is False)
        chances += max(0, len(out.trace.steps) - 1)
    return gated / chances if chances else 0.0


def _control_arms(model, prompt_ids, make_drafter, make_policy, thresholds, max_new_tokens, seed) -> list:
    """Plain, no gate, and per threshold the gate and its random control (at the gate's measured gated fraction),
    as :func:`_per_prompt_set` takes them."""
    def arm(name: str, t, f) -> dict:
        return {"arm": name, "policy": "draft policy", "threshold": np.nan if t is None else t, "target_fraction": f}

    arms = [_plain_arm(model),
            (Decoder(Method("self-spec", "no gate", policy="no gate"), _spec(model, make_drafter, make_policy())),
             arm("no gate", None, np.nan), "draft policy")]
    for t in thresholds:
        f = measured_gated_fraction(model, prompt_ids, make_drafter, make_policy, t, max_new_tokens)
        arms.append((Decoder(Method("self-spec", f"gate {t:g}", policy="gate", gate=t),
                             _spec(model, make_drafter, TargetConfidenceGate(make_policy(), t))),
                     arm("gate", t, np.nan), None))
        arms.append((Decoder(Method("self-spec", f"random control {t:g}", policy="random control", gate=t),
                             _spec(model, make_drafter, RandomGate(make_policy(), f, seed=seed))),
                     arm("random control", t, f), None))
    return arms


def gate_control(model, tokenizer, prompt_sets: dict[str, list[str]], make_drafter: Callable[[], Drafter],
                 make_policy: Callable[[], DraftPolicy], *, thresholds=(0.4,), run: GateRun | None = None,
                 **options) -> GateSweep:
    """For each prompt set: plain decoding, the drafter with no gate, and per threshold the gate and a
    :class:`RandomGate` at the gate's measured gated fraction, interleaved ``repeats`` times (the harness's
    protocol). One row per (prompt set, arm, threshold) with the harness's columns (speedup and its min-max over
    repetitions, acceptance, gated fraction, ...); ``arm`` is 'no gate', 'gate' or 'random control', ``target
    fraction`` the control's probability. ``signal``: the ungated runs' steps, as :func:`gate_signal` gives.
    ``run``: a :class:`GateRun`, or its fields by name."""
    run = record_from("run", run, GateRun, options)
    _check_thresholds(thresholds)
    return _per_prompt_set(
        tokenizer, prompt_sets,
        lambda ids: _control_arms(model, ids, make_drafter, make_policy, thresholds, run.max_new_tokens, run.seed),
        label="gate control", run=run, repeats=3)
