"""Cost model: measured on a tiny random model, and the analytic speedup formulas against hand values."""
import math

import pytest
import torch

from labkit import AdaptiveThreshold, FixedK, SkipSet, speculative_generate
from labkit.measure.costs.analytic import (
    best_gamma,
    expected_tokens_per_step,
    predict,
    predicted_ms_per_token,
    speedup,
    trace_limit,
    trace_speedup,
)
from labkit.measure.costs.costmodel import CostModel, measure_cost_model

from tiny_models import tiny_model


def hand_model() -> CostModel:
    # 2 layers: fixed 1 + attention 1+1 + MLP 2+2 + layer overhead 0.5+0.5 = 8 ms for a full step
    return CostModel(n_layers=2, fixed_ms=1.0, attention_ms=[1.0, 1.0], mlp_ms=[2.0, 2.0], layer_ms=[0.5, 0.5],
                     verify_ms=[8.0 + 0.1 * k for k in range(13)], full_step_ms=8.0)


# -- analytic formulas --------------------------------------------------------------------
def test_expected_tokens_per_step_hand_values():
    assert expected_tokens_per_step(0.0, 5) == 1.0                      # nothing ever accepted
    assert expected_tokens_per_step(1.0, 5) == 6.0                      # the limit alpha -> 1 is gamma + 1
    assert expected_tokens_per_step(0.7, 0) == 1.0                      # gamma = 0: plain decoding
    assert expected_tokens_per_step(0.5, 2) == pytest.approx(1.75)      # 1 + 0.5 + 0.25
    assert expected_tokens_per_step(0.8, 4) == pytest.approx((1 - 0.8 ** 5) / 0.2)
    assert expected_tokens_per_step(1 - 1e-12, 7) == pytest.approx(8.0, rel=1e-9)   # continuous at 1


def test_speedup_hand_values():
    assert speedup(0.8, 4, 0.25) == pytest.approx(((1 - 0.8 ** 5) / 0.2) / 2.0)     # 3.3616 / (4*0.25 + 1)
    assert speedup(0.0, 3, 0.5) == pytest.approx(1 / 2.5)               # alpha = 0: pure overhead
    assert speedup(1.0, 3, 0.0) == 4.0                                   # free, perfect drafts
    assert speedup(0.9, 0, 0.3) == 1.0                                   # gamma = 0 is plain decoding
    assert trace_speedup(2.0, 3.0, 0.5, 1.2) == pytest.approx(3.0 / 2.7)
    assert trace_speedup(0.0, 0.0, 0.5, 1.0) == 1.0


@pytest.mark.parametrize("bad, err", [(1.5, ValueError), (-0.1, ValueError), (float("nan"), TypeError),
                                      (True, TypeError)])
def test_alpha_is_checked(bad, err):
    with pytest.raises(err):
        expected_tokens_per_step(bad, 3)


def test_gamma_and_costs_are_checked():
    with pytest.raises(ValueError):
        expected_tokens_per_step(0.5, -1)
    with pytest.raises(ValueError):
        speedup(0.5, 2, -0.1)
    with pytest.raises(ValueError):
        trace_speedup(1.0, 2.0, 0.5, 0.0)


# -- the cost model ----------------------------------------------------------------------------
def test_draft_cost_adds_blocks_and_layer_overhead():
    cm = hand_model()
    assert cm.draft_ms(SkipSet()) == 8.0
    assert cm.draft_ms(SkipSet(attention=[0])) == 7.0                    # the layer still runs its MLP
    assert cm.draft_ms(SkipSet(attention=[0], mlp=[0])) == 4.5           # whole layer gone: overhead saved too
    assert cm.draft_ms(SkipSet.all(2)) == 1.0
    assert cm.draft_cost_ratio(SkipSet(attention=[0], mlp=[0])) == pytest.approx(4.5 / 8)
    with pytest.raises(ValueError):
        cm.draft_ms(SkipSet(attention=[2]))
    with pytest.raises(ValueError):
        CostModel(n_layers=2, fixed_ms=1, attention_ms=[1], mlp_ms=[1, 1], verify_ms=[1], full_step_ms=1)


def test_predicted_ms_per_token_hand_values():
    cm = hand_model()
    skip = SkipSet(attention=[0], mlp=[0])                                # draft 4.5 ms
    # f = (gamma * draft + verify[gamma]) / E
    assert predicted_ms_per_token(cm, skip, 0.5, gamma=2) == pytest.approx((2 * 4.5 + 8.2) / 1.75)
    assert predicted_ms_per_token(cm, skip, 0.5, FixedK(2)) == pytest.approx((2 * 4.5 + 8.2) / 1.75)
    at_zero = predict(cm, skip, 0.0)                                      # nothing accepted: draft as little as allowed
    assert at_zero.gamma == 1 and at_zero.ms_per_token == pytest.approx(4.5 + 8.1) and at_zero.tokens_per_step == 1
    free = predict(cm, SkipSet.all(2), 1.0)                               # perfect 1 ms drafts: draft the maximum
    assert free.gamma == 12 and free.ms_per_token == pytest.approx((12 * 1.0 + 9.2) / 13)
    assert free.speedup == pytest.approx(8.0 / free.ms_per_token)
    # the chosen gamma is the argmin over 1..12
    for alpha in (0.3, 0.6, 0.9):
        g = best_gamma(cm, skip, alpha)
        assert all(predicted_ms_per_token(cm, skip, alpha, g) <= predicted_ms_per_token(cm, skip, alpha, k) + 1e-12
                   for k in range(1, 13))
    assert predict(cm, skip, 0.99, AdaptiveThreshold(max_draft=3)).gamma <= 3
    # nothing skipped never beats plain decoding
    assert predicted_ms_per_token(cm, SkipSet(), 1.0) >= cm.full_step_ms


def _synthetic(costs_att, costs_mlp, costs_layer, fixed, noise, seed):
    import random

    from labkit.measure.costs.costmodel import random_skip_sets

    L = len(costs_att)
    rng = random.Random(seed)
    X, y = [], []
    for skip in random_skip_sets(L, 4 * L + 8, rng):
        mask = skip.to_mask(L)
        ka, km = [0.0 if m else 1.0 for m in mask[:L]], [0.0 if m else 1.0 for m in mask[L:]]
        kl = [max(a, m) for a, m in zip(ka, km)]
        X.append([1.0] + ka + km + kl)
        y.append(fixed + sum(c * k for c, k in zip(costs_att + costs_mlp + costs_layer, ka + km + kl))
                 + rng.gauss(0, noise))
    return X, y


def test_block_cost_fit_pools_noise_but_keeps_real_differences():
    from labkit.measure.costs.costmodel import fit_block_costs

    L = 6
    # real per-layer differences (e.g. local vs global attention), no noise: partial pooling keeps them
    att = [0.2, 0.8] * 3
    X, y = _synthetic(att, [0.5] * L, [0.1] * L, 1.0, 0.0, seed=0)
    coef, info = fit_block_costs(X, y, L, "partial")
    assert coef[1: L + 1] == pytest.approx(att, abs=1e-3) and coef[0] == pytest.approx(1.0, abs=1e-3)
    full, _ = fit_block_costs(X, y, L, "full")
    assert max(full[1: L + 1]) - min(full[1: L + 1]) < 1e-3               # one cost per block type
    # identical layers under heavy noise: pooling beats the unpooled fit at recovering them
    errors = {"partial": 0.0, "none": 0.0}
    for seed in range(5):
        X, y = _synthetic([0.3] * L, [0.5] * L, [0.1] * L, 1.0, 0.4, seed=seed)
        for pooling in errors:
            coef, _ = fit_block_costs(X, y, L, pooling)
            errors[pooling] += sum((c - t) ** 2 for c, t in zip(coef[1:], [0.3] * L + [0.5] * L + [0.1] * L))
    assert errors["partial"] < errors["none"]
    with pytest.raises(ValueError):
        fit_block_costs(X, y, L, "some")


def test_json_roundtrip(tmp_path):
    cm = hand_model()
    path = cm.save(tmp_path / "cm" / "tiny.json")
    again = CostModel.load(path)
    assert again == cm and again.draft_ms(SkipSet(mlp=[1])) == cm.draft_ms(SkipSet(mlp=[1]))
    with pytest.raises(FileNotFoundError, match="python -m labkit.costmodel"):
        CostModel.load(tmp_path / "missing.json")


def test_measure_on_a_tiny_model():
    model = tiny_model("llama", n_layers=3, vocab_size=97)
    cm = measure_cost_model(model, context=32, repeats=3, warmup=1, max_draft=6, model_name="tiny")
    assert cm.n_layers == 3 and len(cm.attention_ms) == len(cm.mlp_ms) == len(cm.layer_ms) == 3
    assert len(cm.verify_ms) == 7 and cm.max_draft == 6
    assert cm.full_step_ms > 0 and cm.fixed_ms >= 0
    assert min(cm.attention_ms + cm.mlp_ms + cm.layer_ms) >= 0
    assert cm.draft_ms(SkipSet()) == pytest.approx(cm.full_step_ms)       # scaled to the directly timed step
    assert cm.draft_ms(SkipSet.all(3)) < cm.full_step_ms
    assert all(b >= a for a, b in zip(cm.verify_ms, cm.verify_ms[1:]))    # more tokens never cheaper
    assert cm.verify_ms[0] >= cm.full_step_ms
    assert cm.fit["n_sets"] == 4 * 3 + 8 + 2 and not math.isnan(cm.fit["r2"])
    assert CostModel.from_json(cm.to_json()) == cm


def test_trace_limit_sits_beside_the_measurement():
    model = tiny_model("llama", n_layers=3, vocab_size=97)
    ids = torch.randint(0, 97, (1, 6), generator=torch.Generator().manual_seed(0))
    skip = SkipSet(attention=[1])
    trace = speculative_generate(model, ids, skip=skip, policy=FixedK(3), max_new_tokens=20).trace
    s = trace.summary()
    own = trace_limit(trace, full_step_ms=1.0)
    # from the trace's own timings the formula reproduces the measurement (no EOS, so every step emits A + 1)
    assert own["limit_speedup"] == pytest.approx(own["measured_speedup"], rel=1e-9)
    assert own["tokens_per_step"] == pytest.approx(s["tokens_per_step"])
    cm = CostModel(n_layers=3, fixed_ms=1, attention_ms=[1] * 3, mlp_ms=[1] * 3, verify_ms=[7, 7.5, 8, 8.5],
                   full_step_ms=7)
    modelled = trace_limit(trace, full_step_ms=7.0, cost_model=cm, skip=skip)
    assert modelled["c"] == pytest.approx(6 / 7) and modelled["cost_source"] == "cost model"
    expected = (s["mean_accepted_per_step"] + 1) / (s["drafted_per_step"] * 6 / 7 + modelled["c_v"])
    assert modelled["limit_speedup"] == pytest.approx(expected)
    assert modelled["free_draft_speedup"] >= modelled["limit_speedup"]
