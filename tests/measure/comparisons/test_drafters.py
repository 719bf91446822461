"""The drafter comparison, the gate sweep and the early-exit profiles on tiny models (their numbers come from
notebook 08 and `python -m labkit.bench`, not from here)."""
import math

import pandas as pd
import pytest
import torch

from labkit import SkipSet, StaticThreshold
from labkit.core.drafters import SelfDrafter
from labkit.measure.comparisons.drafters import (
    compare_drafters,
    kv_floats_per_token,
    n_parameters,
    standard_drafters,
    with_gate,
)
from labkit.measure.signals.early_exit import hf_early_exit_profile, labkit_early_exit_profile
from labkit.measure.signals.gate import gate_preview, gate_signal, gate_sweep

from tiny_models import ToyTokenizer, tiny_model

PROMPTS = ["def add(a, b):\n    return a + b\n\ndef add(", "class Box:\n    def __init__(self):"]


@pytest.fixture(scope="module")
def models():
    return tiny_model("llama", n_layers=4, vocab_size=97), tiny_model("llama", n_layers=1, vocab_size=97, seed=9)


def test_every_drafter_side_by_side(models):
    model, draft = models
    specs = standard_drafters(model, SkipSet(mlp=[2, 3]), exit_layers=[1, 3], draft_model=draft, lookup=3,
                              combo_exit_layer=2)
    specs += [with_gate(specs[0], 0.3)]
    table = compare_drafters(model, ToyTokenizer(), PROMPTS, specs, max_new_tokens=10, repeats=2, progress=False)
    assert list(table.index) == ["plain"] + [s.name for s in specs]
    assert table["identical"].all()                                   # every drafter is lossless
    assert table.loc["plain", "speedup"] == 1.0 and (table["speedup"] > 0).all()
    assert (table["ms_min"] <= table["ms_per_token"]).all() and (table["ms_per_token"] <= table["ms_max"]).all()
    assert table.loc["separate model", "extra_parameters"] == n_parameters(draft)
    assert table.loc["separate model", "extra_kv_per_token"] == kv_floats_per_token(draft) == 2 * 1 * 2 * 8
    assert table.loc["early exit E=3", "extra_parameters"] == 0 and table.loc["early exit E=3", "exit_layer"] == 3
    assert "lookup + early exit E=2" in table.index and "lookup + layer skip (searched)" in table.index
    assert table.loc["layer skip (searched) + gate 0.3", "gate"] == 0.3
    assert 0 <= table.loc["layer skip (searched) + gate 0.3", "gated_fraction"] <= 1
    with pytest.raises(ValueError, match="distinct"):
        compare_drafters(model, ToyTokenizer(), PROMPTS, specs[:1] * 2, max_new_tokens=4, repeats=1, progress=False)


def test_gate_sweep_rows_and_signal(models):
    model, _ = models
    sweep = gate_sweep(model, ToyTokenizer(), {"a": PROMPTS[:1], "b": PROMPTS[1:]},
                       lambda: SelfDrafter(model, SkipSet(mlp=[3])), thresholds=(0.0, 1.0), max_new_tokens=10,
                       repeats=1, progress=False)
    t = sweep.table
    assert len(t) == 2 * 2 * 3 and set(t["prompts"]) == {"a", "b"}
    never = t[t["threshold"] == 0.0]
    always = t[t["threshold"] == 1.0]
    assert (never["gated_fraction"] == 0).all()                        # a gate at 0 never closes
    assert (always["drafted_per_step"] < t[t["threshold"].isna()]["drafted_per_step"].to_numpy()).all()
    assert set(sweep.signal.columns) >= {"prev_confidence", "first_accepted", "prompts", "policy"}
    with pytest.raises(ValueError, match="thresholds"):
        gate_sweep(model, ToyTokenizer(), {"a": PROMPTS}, lambda: SelfDrafter(model, SkipSet()), thresholds=(1.5,))


def test_gate_preview_arithmetic():
    signal = pd.DataFrame({"prev_confidence": [0.1, 0.2, 0.8, 0.9], "first_accepted": [False, False, True, True],
                           "n_drafted": [2, 2, 2, 2], "n_accepted": [0, 0, 2, 1]})
    p = gate_preview(signal, 0.5)
    assert p["gated_fraction"] == 0.5 and p["acceptance_kept"] == 0.75 and p["acceptance_gated"] == 0.0
    assert p["accepted_tokens_lost"] == 0.0 and p["auc"] == 1.0
    p = gate_preview(signal, 0.85)
    assert p["gated_fraction"] == 0.75 and p["accepted_tokens_lost"] == pytest.approx(2 / 3)
    assert math.isnan(gate_preview(signal, 0.0)["acceptance_gated"])


def test_gate_signal_pairs_each_step_with_the_confidence_before_it(models):
    from labkit import FixedK, speculative_generate

    model, _ = models
    out = speculative_generate(model, ToyTokenizer()(PROMPTS[0])["input_ids"], skip=SkipSet(mlp=[3]), policy=FixedK(3),
                               max_new_tokens=12)
    signal = gate_signal([out])
    steps = [s for s in out.trace.steps[1:] if s.n_drafted]
    assert len(signal) == len(steps)
    befores = [out.trace.steps[i - 1].target_confidence for i, s in enumerate(out.trace.steps) if i and s.n_drafted]
    assert signal["prev_confidence"].tolist() == befores


def test_early_exit_profiles_count_what_each_layer_read(models):
    model, _ = models
    ids = torch.tensor([[5, 9, 14, 20, 33, 41]])
    ours = labkit_early_exit_profile(model, ids, 2, 16, StaticThreshold(0.0, 4)).summary()
    theirs = hf_early_exit_profile(model, ids, 2, 16).summary()
    assert ours["new_tokens"] == theirs["new_tokens"] == 16
    assert ours["first_layer_tokens"] == ours["last_layer_tokens"]          # the verify reused the early layers
    # the prefill, then one verify per step: late layers only when the step drafted (the last may not: budget)
    assert ours["late_calls"] + ours["full_calls"] == ours["steps"] + 1 and ours["late_calls"] >= ours["steps"] - 1
    assert theirs["late_calls"] == 0 and theirs["full_calls"] == theirs["steps"]
    # transformers' early layers read the prompt twice (its draft cache) and every verified draft again
    assert theirs["first_layer_tokens"] > theirs["last_layer_tokens"] + ids.shape[1] - 2
    assert all(v >= 0 for k, v in ours.items() if k.endswith("ms_per_token"))
