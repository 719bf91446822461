"""labkit.core.expectation: E(α, γ) = (1 - α^(γ+1)) / (1 - α), for numbers and elementwise for tensors, precise
near α = 1; and the speedup limit (A + 1) / (d c + c_v)."""
import math

import pytest
import torch

from labkit.core.expectation import expected_tokens, speedup_limit


def test_expected_tokens():
    assert expected_tokens(1.0, 4) == 5.0 and expected_tokens(0.0, 4) == 1.0
    assert expected_tokens(0.5, 2) == pytest.approx(1.75)


# -- added with the mirrored layout --------------------------------------------------------------------------
def closed_form(alpha, gamma):
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def test_ends_and_a_known_value():
    for gamma in (0, 1, 3, 12):
        assert expected_tokens(0.0, gamma) == 1.0
        assert expected_tokens(1.0, gamma) == gamma + 1
    assert expected_tokens(0.5, 3) == pytest.approx(1.875, abs=1e-15)             # 1 + 1/2 + 1/4 + 1/8
    assert expected_tokens(0.5, 0) == pytest.approx(1.0)                          # nothing drafted: one token
    for alpha in (0.1, 0.37, 0.8, 0.95):
        for gamma in (1, 4, 9):
            assert expected_tokens(alpha, gamma) == pytest.approx(sum(alpha ** i for i in range(gamma + 1)), rel=1e-12)


def test_tensor_is_elementwise_the_scalar_and_broadcasts():
    alphas = torch.tensor([0.0, 0.1, 0.5, 0.9, 0.999, 1.0])
    out = expected_tokens(alphas, 3)
    assert out.dtype == torch.float64 and out.shape == alphas.shape
    assert out.tolist() == pytest.approx([expected_tokens(float(a), 3) for a in alphas], rel=1e-12)
    grid = expected_tokens(alphas[:, None], torch.arange(5)[None, :])              # (6, 5): α by γ
    assert grid.shape == (6, 5)
    for i, a in enumerate(alphas.tolist()):
        for g in range(5):
            assert float(grid[i, g]) == pytest.approx(expected_tokens(a, g), rel=1e-12)
    by_gamma = expected_tokens(0.5, torch.tensor([0, 1, 3]))                       # a tensor γ alone: a tensor out
    assert isinstance(by_gamma, torch.Tensor) and by_gamma.tolist() == pytest.approx([1.0, 1.5, 1.875])
    assert expected_tokens(torch.tensor([-0.5, 1.5]), 2).tolist() == [1.0, 3.0]    # clamped to [0, 1]


def test_precise_near_one():
    for eps in (1e-6, 1e-9, 1e-12):
        alpha, gamma = 1.0 - eps, 8
        exact = sum(alpha ** i for i in range(gamma + 1))                          # the series: no cancellation
        assert expected_tokens(alpha, gamma) == pytest.approx(exact, rel=1e-13)
        tensor = float(expected_tokens(torch.tensor([alpha], dtype=torch.float64), gamma)[0])
        assert tensor == pytest.approx(exact, rel=1e-13)
    # the naive closed form loses digits to cancellation there (relative error ~4e-9 at α = 1 - 1e-9)
    alpha = 1.0 - 1e-9
    exact = sum(alpha ** i for i in range(9))
    assert closed_form(alpha, 8) != pytest.approx(exact, rel=1e-13)
    assert expected_tokens(1.0 - 1e-15, 4) == pytest.approx(5.0, rel=1e-14)


def test_speedup_limit():
    assert speedup_limit(3.0, 4.0, 0.25, 1.0) == pytest.approx(4.0 / 2.0)
    assert speedup_limit(0.0, 0.0, 0.5, 1.0) == 1.0                                # nothing drafted, verify = one step
    a, d, c, cv = 2.2, 5.0, 0.3, 1.1
    assert speedup_limit(a, d, c, cv) == pytest.approx((a + 1) / (d * c + cv))
    assert speedup_limit(4.0, 4.0, 0.0, 1.0) == 5.0                                # free drafts: E tokens per verify
    assert math.isnan(speedup_limit(1.0, 2.0, 0.3, float("nan")))
    # with independent acceptance α and γ drafted every step, A + 1 = E(α, γ)
    alpha, gamma = 0.7, 4
    mean_accepted = expected_tokens(alpha, gamma) - 1
    assert speedup_limit(mean_accepted, gamma, 0.2, 1.0) == pytest.approx(expected_tokens(alpha, gamma) / 1.8)
