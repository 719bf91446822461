"""Costs per batch size and the load policy: measured ratios are positive and ordered as forwards are, the policy
turns speculation off where the model predicts no gain, α is recovered from an acceptance rate."""
import pytest

from labkit.core.expectation import expected_tokens
from labkit.core.skip import SkipSet
from labkit.measure.costs.batch_costs import (
    BatchCosts,
    alpha_from_acceptance,
    load_policy,
    measure_batch_costs,
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
