"""labkit.measure.signals.early_exit: model calls profiled by the layers they ran. A profile's summary adds up its
calls by kind; labkit's early exit, profiled, emits what the plain loop emits, and its calls split into early (draft)
and late (verify) ones."""
import math

import torch

from labkit import AdaptiveThreshold, autoregressive_generate
from labkit.measure.signals.early_exit import CallProfile, labkit_early_exit_profile

from tiny_models import tiny_model


def test_summary_adds_up_calls_by_kind():
    profile = CallProfile(calls=[("early", 1, 1, 0.01), ("early", 1, 1, 0.01), ("late", 3, 3, 0.02),
                                 ("full", 5, 5, 0.04)], total_s=0.1, new_tokens=10, drafted=4, accepted=3, steps=2)
    s = profile.summary()
    assert (s["early_calls"], s["late_calls"], s["full_calls"]) == (2, 1, 1)
    assert math.isclose(s["ms_per_token"], 10.0) and math.isclose(s["early_ms_per_token"], 2.0)
    assert math.isclose(s["outside_ms_per_token"], 1e3 * (0.1 - 0.08) / 10)
    assert (s["first_layer_tokens"], s["last_layer_tokens"]) == (10, 10)
    assert s["acceptance"] == 0.75 and s["tokens_per_step"] == 5.0
    assert math.isnan(CallProfile().summary()["ms_per_token"])


@torch.inference_mode()
def test_labkit_early_exit_profile_counts_its_draft_and_verify_calls():
    model = tiny_model("llama", n_layers=4, vocab_size=97)
    ids = torch.tensor([[1, 5, 9, 2]])
    profile = labkit_early_exit_profile(model, ids, exit_layer=2, max_new_tokens=12, policy=AdaptiveThreshold())
    s = profile.summary()
    assert profile.new_tokens == len(autoregressive_generate(model, ids, 12).new_tokens) == 12
    assert s["steps"] == profile.steps >= 1 and s["early_calls"] >= 1 and s["late_calls"] + s["full_calls"] >= 1
    assert profile.accepted <= profile.drafted
