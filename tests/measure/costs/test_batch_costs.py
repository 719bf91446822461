"""Costs per batch size and the load policy: measured ratios are positive and ordered as forwards are, the policy
turns speculation off where the model predicts no gain, α is recovered from an acceptance rate."""
import pytest

from labkit.core.expectation import expected_tokens
from labkit.core.skip import SkipSet
from labkit.measure.costs.batch_costs import (
    BatchCosts,
    alpha_from_acceptance,
    best_gamma,
    costs_from_dict,
    crossing_batch,
    load_policy,
    measure_batch_costs,
    policy_rows,
    predicted_crossover,
    predicted_speedup,
    predicted_tokens_per_s,
)

from tiny_models import tiny_model


def test_measured_costs_have_every_batch_size_and_gamma():
    model = tiny_model("llama")
    costs = measure_batch_costs(model, SkipSet(mlp=[1, 2], attention=[3]), (1, 3), (1, 4), context=8, repeats=2,
                                inner=1)
    assert costs.batch_sizes == [1, 3] and len(costs.c) == 2 and set(costs.c_v) == {1, 4}
    assert all(t > 0 for t in costs.plain_ms) and all(c > 0 for c in costs.c)
    assert costs.to_dict()["c_v"]["4"] == costs.c_v[4]


def test_the_policy_drafts_where_it_pays_and_stops_where_it_does_not():
    costs = BatchCosts([1, 4, 16], [1, 2, 4], 64, plain_ms=[3.0, 4.0, 8.0], c=[0.5, 0.7, 1.0],
                       c_v={1: [1.1, 1.5, 2.0], 2: [1.1, 2.0, 3.0], 4: [1.2, 3.0, 5.0]})
    policy = load_policy(costs, alpha=0.8)
    assert policy.max_draft[0] == 2 and policy.max_draft[-1] == 0      # S(1, γ): 1.16, 1.16, 1.05
    assert predicted_speedup(costs, 0.8, 0, 4) == pytest.approx(expected_tokens(0.8, 4) / (4 * 0.5 + 1.2))
    assert predicted_tokens_per_s(costs, 0.8, 2, 0) == pytest.approx(16 / 8.0 * 1e3)


@pytest.mark.parametrize("alpha", [0.2, 0.7, 0.95])
def test_alpha_is_recovered_from_an_acceptance_rate(alpha):
    acceptance = (expected_tokens(alpha, 4) - 1) / 4
    assert alpha_from_acceptance(acceptance, 4) == pytest.approx(alpha, abs=1e-6)


def synthetic(c_v_growth: float) -> BatchCosts:
    """Costs whose verify grows with batch size like a compute-bound GPU's: c_v(B, γ) = 1 + growth·B·γ."""
    sizes, gammas = [1, 2, 4, 8, 16, 32], [1, 2, 3, 4, 6, 8]
    return BatchCosts(sizes, gammas, 64, plain_ms=[2.0 + 0.1 * b for b in sizes], c=[0.2] * len(sizes),
                      c_v={g: [1.0 + c_v_growth * b * g for b in sizes] for g in gammas})


def test_the_policy_shortens_gamma_then_turns_speculation_off_as_the_batch_grows():
    costs = synthetic(0.02)
    rows = policy_rows(costs, alpha=0.8)
    caps = [r["policy_gamma"] for r in rows]
    assert caps[0] >= 3 and caps[-1] == 0
    assert all(a >= b for a, b in zip(caps, caps[1:]))                     # never longer as the batch grows
    for r in rows:                                                         # never predicted below off or on
        assert r["policy_tokens_per_s"] >= max(r["plain_tokens_per_s"], r["speculative_tokens_per_s"]) * (1 - 1e-9)
        assert r["policy_gamma"] in (0, r["best_gamma"])
    assert best_gamma(costs, 0.8, 0) == rows[0]["best_gamma"]


def test_the_crossover_is_where_the_best_speedup_falls_to_one():
    costs = synthetic(0.02)
    crossover = predicted_crossover(costs, 0.8)
    best = [r["speedup"] for r in policy_rows(costs, 0.8)]
    last_gain = max(b for b, s in zip(costs.batch_sizes, best) if s > 1)
    first_loss = min(b for b, s in zip(costs.batch_sizes, best) if s <= 1)
    assert last_gain < crossover <= first_loss
    assert predicted_crossover(synthetic(0.0), 0.8) is None                 # gains at every measured size
    assert predicted_crossover(synthetic(1.0), 0.8) == 1.0                  # no gain even alone


def test_the_policy_names_a_bad_alpha():
    with pytest.raises(ValueError, match="alpha"):
        load_policy(synthetic(0.02), alpha=1.5)


def test_costs_come_back_from_their_record():
    costs = synthetic(0.02)
    assert costs_from_dict(costs.to_dict()) == costs
    with pytest.raises(ValueError, match="data"):
        costs_from_dict({"gammas": [1]})


def test_a_measured_speedup_crosses_one_where_it_falls_below():
    assert crossing_batch([1, 4, 16], [1.3, 1.1, 0.8]) == pytest.approx(4 * 4 ** (1 / 3))
    assert crossing_batch([1, 4], [1.2, 1.1]) is None and crossing_batch([2, 4], [0.9, 0.8]) == 2.0
