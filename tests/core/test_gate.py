"""The target-confidence gate: drafts nothing after an unsure target token, otherwise the wrapped policy rules."""
import math
import random

import pytest
import torch

from labkit import (
    AdaptiveThreshold,
    FixedK,
    SkipSet,
    StaticThreshold,
    TargetConfidenceGate,
    autoregressive_generate,
    speculative_generate,
)

from tiny_models import ARCHITECTURES, tiny_model

VOCAB = 97


def test_gate_state_machine():
    inner = AdaptiveThreshold(max_draft=7)
    gate = TargetConfidenceGate(inner, 0.5)
    assert gate.max_draft == 7 and gate.open and gate.threshold == inner.threshold
    gate.observe_target(0.2)
    assert gate.max_draft == 0 and not gate.open
    assert gate.state()["gate_open"] is False and gate.state()["gate_last_confidence"] == 0.2
    assert gate.state()["threshold"] == inner.threshold              # the wrapped policy's state is kept visible
    gate.observe_target(0.5)                                          # at the threshold: open
    assert gate.max_draft == 7 and gate.state()["gate_closed_fraction"] == 0.5
    gate.observe_target(float("nan"))                                 # unknown: never closes
    assert gate.open
    gate.update(4, 1)                                                 # forwarded: the inner policy learns
    assert inner.n_updates == 1
    gate.observe_target(0.1)
    gate.reset()
    assert gate.open and inner.n_updates == 0 and math.isnan(gate.last_confidence)


def test_gate_zero_never_closes_and_one_always_closes():
    gate = TargetConfidenceGate(FixedK(3), 0.0)
    for c in (0.0, 0.3, 1.0):
        gate.observe_target(c)
        assert gate.max_draft == 3
    gate = TargetConfidenceGate(FixedK(3), 1.0)
    gate.observe_target(0.999)
    assert gate.max_draft == 0


@pytest.mark.parametrize("bad, error", [(1.5, ValueError), (-0.1, ValueError), ("0.5", TypeError),
                                        (float("nan"), TypeError)])
def test_gate_arguments_are_checked(bad, error):
    with pytest.raises(error, match="min_confidence"):
        TargetConfidenceGate(FixedK(2), bad)
    with pytest.raises(TypeError, match="policy"):
        TargetConfidenceGate("FixedK", 0.5)


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_gated_decoding_is_lossless_and_plain_after_unsure_tokens(arch):
    model = tiny_model(arch, n_layers=4, vocab_size=VOCAB)
    rng = random.Random(0)
    n_gated = 0
    for seed in range(3):
        ids = torch.randint(0, VOCAB, (1, 3 + 4 * seed), generator=torch.Generator().manual_seed(seed))
        expected = autoregressive_generate(model, ids, 25).sequences
        for inner in (FixedK(4), StaticThreshold(0.2, 6), AdaptiveThreshold(initial_threshold=0.1)):
            threshold = rng.choice([0.3, 0.5, 0.7])
            gate = TargetConfidenceGate(inner, threshold)
            out = speculative_generate(model, ids, skip=SkipSet(mlp=[2, 3]), policy=gate, max_new_tokens=25)
            assert torch.equal(out.sequences, expected)
            steps = out.trace.steps
            # a step drafts nothing exactly when the previous step's target token was below the threshold
            for before, step in zip(steps, steps[1:]):
                budget_left = step.position < ids.shape[1] + 25 - 1
                if before.target_confidence < threshold:
                    assert step.n_drafted == 0
                    n_gated += 1
                elif budget_left:
                    assert step.n_drafted >= 1
    assert n_gated > 0                                                 # the gate really closed sometimes


def test_a_closed_gate_on_every_step_is_plain_decoding():
    model = tiny_model("llama", n_layers=4, vocab_size=VOCAB)
    ids = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(1))
    gate = TargetConfidenceGate(FixedK(4), 1.0)
    out = speculative_generate(model, ids, skip=SkipSet(mlp=[3]), policy=gate, max_new_tokens=12)
    assert torch.equal(out.sequences, autoregressive_generate(model, ids, 12).sequences)
    first, *rest = out.trace.steps
    assert first.n_drafted >= 1                                          # only the first step (gate open) drafts
    assert [s.n_drafted for s in rest] == [0] * (12 - first.n_emitted)   # then one plain step per token


def test_the_gate_reopens_at_every_generation_but_the_inner_policy_keeps_learning():
    model = tiny_model("llama", n_layers=4, vocab_size=VOCAB)
    ids = torch.randint(0, VOCAB, (1, 5), generator=torch.Generator().manual_seed(1))
    inner = AdaptiveThreshold(initial_threshold=0.0)
    gate = TargetConfidenceGate(inner, 1.0)                       # closes after every step
    first = speculative_generate(model, ids, skip=SkipSet(mlp=[3]), policy=gate, max_new_tokens=6)
    assert not gate.open and inner.n_updates >= 1
    updates = inner.n_updates
    second = speculative_generate(model, ids, skip=SkipSet(mlp=[3]), policy=gate, max_new_tokens=6)
    assert second.trace.steps[0].n_drafted >= 1                   # reopened for the new text
    assert inner.n_updates > updates                               # the adaptive state was not reset
    assert torch.equal(first.sequences, second.sequences)
