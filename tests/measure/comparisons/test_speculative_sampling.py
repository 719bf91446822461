"""The speculative-sampling lesson's measurements: the closed forms, the Monte-Carlo and its chi-square test, and
recording real decisions (the notebook's own sample size is checked in tests/lessons)."""
import math

import pytest
import torch

from labkit import SkipSet
from labkit.measure.comparisons import speculative_sampling as ss

from tiny_models import tiny_model


def pair(seed: int, V: int = 300, sharp: float = 2.0, closeness: float = 0.5):
    g = torch.Generator().manual_seed(seed)
    logits_p = sharp * torch.randn(V, generator=g)
    logits_q = closeness * logits_p + sharp * torch.randn(V, generator=g) * (1 - closeness)
    return torch.softmax(logits_p, 0), torch.softmax(logits_q, 0)


def test_alpha_is_one_minus_total_variation():
    for seed in range(5):
        p, q = pair(seed)
        a = ss.alpha(p, q)
        assert 0 < a < 1
        assert a == pytest.approx(1 - ss.total_variation(p, q), abs=1e-6)
        assert a == pytest.approx(float((q * ss.acceptance_probability(p, q)).sum()), abs=1e-6)
    p, _ = pair(9)
    assert ss.alpha(p, p) == pytest.approx(1.0, abs=1e-6)


def test_closed_forms():
    p, q = pair(1)
    assert torch.allclose(ss.rule_distribution(p, q, "speculative"), p, atol=1e-6)     # lossless
    for rule in ss.RULES:
        assert float(ss.rule_distribution(p, q, rule).sum()) == pytest.approx(1.0, abs=1e-5)
    wrong = ss.rule_distribution(p, q, "resample from p")
    assert torch.allclose(wrong, torch.minimum(p, q) + (1 - ss.alpha(p, q)) * p, atol=1e-6)
    assert ss.total_variation(wrong, p) > 0.01
    x = int(q.argmax())
    greedy = ss.rule_distribution(p, q, "greedy draft")
    assert float(greedy[x]) >= min(1.0, float(p[x] / q[x])) - 1e-6
    with pytest.raises(ValueError, match="rule"):
        ss.rule_distribution(p, q, "accept all")


@pytest.mark.parametrize("seed", range(3))
def test_simulation_matches_the_closed_form(seed):
    p, q = pair(seed, V=40)
    for rule in ss.RULES:
        counts = ss.simulate_rule(p, q, rule, 200_000, torch.Generator().manual_seed(seed))
        assert int(counts.sum()) == 200_000
        exact = ss.rule_distribution(p, q, rule)
        assert ss.total_variation(counts.float() / 200_000, exact) < 0.01, rule


def test_distribution_test_bins_and_power():
    p = torch.tensor([0.5, 0.3, 0.15, 0.04, 0.01])
    counts = torch.tensor([500, 300, 150, 40, 10])
    test = ss.distribution_test(counts, p)
    assert test.statistic == pytest.approx(0.0, abs=1e-9) and test.p_value == pytest.approx(1.0) and test.df == 4
    test = ss.distribution_test(torch.tensor([50, 30, 15, 4, 1]), p)      # 4 and 1 expected: pooled, then merged
    assert test.df == 2
    assert ss.distribution_test(torch.tensor([700, 200, 70, 20, 10]), p).p_value < 1e-6
    assert ss.distribution_test(torch.tensor([10, 0, 0]), torch.tensor([1.0, 0.0, 0.0])).p_value != \
        ss.distribution_test(torch.tensor([10, 0, 0]), torch.tensor([1.0, 0.0, 0.0])).p_value     # nan: untestable
    assert ss.chi_square_power(p, p, 1000) == pytest.approx(0.01, abs=1e-6)
    assert ss.chi_square_power(p, torch.tensor([0.6, 0.2, 0.15, 0.04, 0.01]), 1000) > 0.99


def test_recorded_positions_are_the_decisions_of_the_run():
    model = tiny_model("llama", n_layers=4, vocab_size=97)
    ids = torch.tensor([[4, 8, 15, 16, 23]])
    result, positions = ss.record_positions(model, ids, skip=SkipSet(mlp=[1, 2], attention=[3]), temperature=0.8,
                                            max_new_tokens=40, seed=3)
    trace = result.trace
    assert len(positions) == sum(min(s.n_accepted + 1, s.n_drafted) for s in trace.steps)
    assert sum(p.accepted for p in positions) == trace.n_accepted
    by_step = {}
    for pos in positions:
        step = trace.steps[pos.step]
        assert pos.token == step.drafted[pos.slot] and pos.position == step.position + pos.slot
        assert float(pos.q[pos.token]) == pytest.approx(step.q[pos.slot], rel=1e-5)
        assert float(pos.p[pos.token]) == pytest.approx(step.p[pos.slot], rel=1e-5)
        assert float(pos.p.sum()) == pytest.approx(1.0, abs=1e-4)
        by_step.setdefault(pos.step, []).append(pos.accepted)
    p_same, q_same = positions[0].at(0.8)
    assert torch.allclose(p_same, positions[0].p, atol=1e-5) and torch.allclose(q_same, positions[0].q, atol=1e-5)
    p_hot, _ = positions[0].at(100.0)
    assert float(p_hot.max()) < float(positions[0].p.max())                 # a higher temperature flattens p
    curve = ss.alpha_curve(positions, [0.8, 100.0])
    assert curve[0] == pytest.approx(sum(p.alpha for p in positions) / len(positions), rel=1e-5)
    assert curve[1] > 0.9                                                   # both flatten towards uniform


def test_temperature_sweep_rows():
    model = tiny_model("qwen2", n_layers=4, vocab_size=97)
    prompts = [torch.tensor([[1, 2, 3, 4]]), torch.tensor([[7, 7, 9]])]
    frame = ss.temperature_sweep(model, prompts, skip=SkipSet(mlp=[2, 3]), temperatures=[0.5, 1.0], gamma=3,
                                 max_new_tokens=20, progress=False)
    assert list(frame["temperature"]) == [0.5, 1.0]
    for row in frame.to_dict("records"):
        assert 0 <= row["measured_alpha"] <= 1 and 0 <= row["predicted_alpha"] <= 1
        assert 1 <= row["tokens_per_step"] <= 4 and 1 <= row["expected_tokens_per_step"] <= 4
        assert row["measured_speedup"] > 0 and row["c"] > 0 and row["c_v"] > 0
        assert math.isclose(row["expected_tokens_per_step"],
                            (1 - row["predicted_alpha"] ** 4) / (1 - row["predicted_alpha"]), rel_tol=1e-9)
    with pytest.raises(ValueError, match="temperatures"):
        ss.temperature_sweep(model, prompts, skip=SkipSet(), temperatures=[0.0])
