"""labkit.measure.costs.analytic applies the formulas of labkit.core.expectation (it does not restate them): E(α, γ)
and the speedup limit agree with core's, inputs are checked by name, and predict picks the γ that minimises f."""
import math

import pytest
import torch

from labkit import AdaptiveThreshold, speculative_generate
from labkit.core.expectation import expected_tokens, speedup_limit
from labkit.core.policies import FixedK
from labkit.core.skip import SkipSet
from labkit.measure.costs import analytic as ana
from labkit.measure.costs.analytic import (
    best_gamma,
    expected_tokens_per_step,
    predict,
    predicted_ms_per_token,
    speedup,
    trace_limit,
    trace_speedup,
)
from labkit.measure.costs.costmodel import CostModel

from tiny_models import tiny_model
from tiny_probes import hand_cost_model


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.9, 0.999999, 1.0])
@pytest.mark.parametrize("gamma", [0, 1, 4, 12])
def test_expected_tokens_and_speedup_are_core_formulas(alpha, gamma):
    e = ana.expected_tokens_per_step(alpha, gamma)
    assert e == expected_tokens(alpha, gamma)
    assert math.isclose(ana.speedup(alpha, gamma, 0.3), e / (gamma * 0.3 + 1.0))
    assert ana.speedup(alpha, gamma, 0.3) == speedup_limit(e - 1.0, gamma, 0.3, 1.0)
    assert ana.trace_speedup(2.0, 3.0, 0.2, 1.1) == speedup_limit(2.0, 3.0, 0.2, 1.1)


@pytest.mark.parametrize("call, words", [
    (lambda: ana.expected_tokens_per_step(1.5, 2), "alpha"),
    (lambda: ana.expected_tokens_per_step(0.5, -1), "gamma"),
    (lambda: ana.speedup(0.5, 2, -0.1), "c must be"),
    (lambda: ana.trace_speedup(1.0, 2.0, 0.1, 0.0), "c_v > 0"),
])
def test_bad_inputs_are_named(call, words):
    with pytest.raises((ValueError, TypeError), match=words):
        call()


class Costs:
    """A stand-in cost model: drafting costs 1 ms a token, a verify 10 ms plus 0.5 ms per drafted token."""
    full_step_ms, max_draft, n_layers = 10.0, 12, 4

    def draft_ms(self, skip):
        return 1.0

    def verify_step_ms(self, gamma):
        return 10.0 + 0.5 * gamma


def test_predict_minimises_f_over_gamma_and_honours_a_fixed_k():
    best = ana.predict(Costs(), SkipSet(), 0.8)
    f = {g: (g * 1.0 + 10.0 + 0.5 * g) / expected_tokens(0.8, g) for g in range(1, 13)}
    assert best.gamma == min(f, key=f.get) and math.isclose(best.ms_per_token, min(f.values()))
    assert math.isclose(best.speedup, 10.0 / best.ms_per_token)
    assert ana.predict(Costs(), SkipSet(), 0.8, FixedK(3)).gamma == 3
    assert ana.best_gamma(Costs(), SkipSet(), 0.8, max_gamma=2) in (1, 2)


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


def test_predicted_ms_per_token_hand_values():
    cm = hand_cost_model()
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


def test_interpolate_cv_and_the_limit():
    rows = [{"tokens": 1, "c_v": 1.0}, {"tokens": 3, "c_v": 1.2}, {"tokens": 9, "c_v": 2.4}]
    assert ana.interpolate_cv(rows, 1) == 1.0 and ana.interpolate_cv(rows, 0) == 1.0
    assert ana.interpolate_cv(rows, 2) == pytest.approx(1.1)
    assert ana.interpolate_cv(rows, 5) == pytest.approx(1.6)
    assert ana.interpolate_cv(rows, 12) == pytest.approx(3.0)                # the last slope, extended
    best = ana.best_limit(0.0, 0.5, rows, range(1, 5))
    assert best["gamma"] == 1 and best["limit"] == pytest.approx(1 / (0.5 + 1.1))
    best = ana.best_limit(0.9, 0.2, rows, [2])
    assert best["limit"] == pytest.approx((1 - 0.9 ** 3) / 0.1 / (0.4 + 1.2))
    curve = ana.limit_curve([{"label": "kept 0.50", "kept": 0.5, "c": 0.5}], rows, [0.5, 0.9])
    assert [r["alpha"] for r in curve] == [0.5, 0.9] and curve[1]["limit"] > curve[0]["limit"]
