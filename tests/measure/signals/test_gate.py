"""The gate's random control (labkit.measure.signals.gate): it turns as large a fraction of its steps plain as the
gate it controls for, within sampling noise, on short generations too (where counting per step instead of per chance to
close would set its probability too low by (n - 1) / n)."""
import math

import pytest
import torch

from labkit import FixedK, SkipSet, TargetConfidenceGate, speculative_generate
from labkit.core.drafters import SelfDrafter
from labkit.measure.harness import record_of
from labkit.measure.signals.gate import RandomGate, measured_gated_fraction

from tiny_models import tiny_model

VOCAB = 97
N_NEW = 8          # short generations: a few steps each, where the first (always drafting) step weighs most


@pytest.fixture(scope="module")
def setting():
    model = tiny_model("llama", n_layers=4, vocab_size=VOCAB)
    prompts = [torch.randint(0, VOCAB, (1, 4 + i % 5), generator=torch.Generator().manual_seed(i)) for i in range(24)]

    def make_drafter():
        return SelfDrafter(model, SkipSet(mlp=[2, 3]))

    return model, prompts, make_drafter


def gated_and_steps(model, prompts, make_drafter, policy, repeats=1):
    """(gated steps, steps, chances to close) summed over the runs, gated counted as the harness counts it."""
    gated = steps = chances = 0
    for _ in range(repeats):
        for ids in prompts:
            out = speculative_generate(model, ids, drafter=make_drafter(), policy=policy, max_new_tokens=N_NEW)
            rec = record_of(out, 0.0, ids.shape[1])
            gated, steps, chances = gated + rec.gated, steps + rec.steps, chances + rec.steps - 1
    return gated, steps, chances


def median_confidence(model, prompts, make_drafter):
    confidences = sorted(st.target_confidence for ids in prompts for st in speculative_generate(
        model, ids, drafter=make_drafter(), policy=FixedK(3), max_new_tokens=N_NEW).trace.steps)
    return confidences[len(confidences) // 2]


def test_random_gate_closes_at_its_probability_per_chance(setting):
    model, prompts, make_drafter = setting
    for fraction in (0.3, 0.7):
        gated, _, chances = gated_and_steps(model, prompts, make_drafter, RandomGate(FixedK(3), fraction, seed=1),
                                            repeats=4)
        assert abs(gated / chances - fraction) < 3 * math.sqrt(fraction * (1 - fraction) / chances)


def test_the_random_control_turns_as_many_steps_plain_as_the_gate(setting):
    model, prompts, make_drafter = setting
    threshold = median_confidence(model, prompts, make_drafter)
    target = measured_gated_fraction(model, prompts, make_drafter, lambda: FixedK(3), threshold, N_NEW)
    g_gate, s_gate, c_gate = gated_and_steps(model, prompts, make_drafter, TargetConfidenceGate(FixedK(3), threshold))
    assert 0.2 < g_gate / s_gate < 0.8 and target == pytest.approx(g_gate / c_gate)     # per chance to close
    # the gate's count is fixed by the prompts; the control's is a sum of coin flips: its binomial noise
    g, s, _ = gated_and_steps(model, prompts, make_drafter, RandomGate(FixedK(3), target, seed=0), repeats=8)
    band = 3 * math.sqrt(target * (1 - target) / s)
    assert abs(g / s - g_gate / s_gate) < band, (g / s, g_gate / s_gate, band)
    # the old measure (gated / steps, per step) set the control's probability too low: outside that band
    g_old, s_old, _ = gated_and_steps(model, prompts, make_drafter, RandomGate(FixedK(3), g_gate / s_gate, seed=0),
                                      repeats=8)
    assert g_gate / s_gate - g_old / s_old > band
