"""labkit.bo: acquisition formulas, the 1-D loop, the Optuna helpers, the figures and the stepper glue."""
import math

import numpy as np
import pytest

from labkit.search import toy


def _phi(z):   # standard normal pdf, by hand
    return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def _Phi(z):   # standard normal cdf, by hand
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def test_forrester_and_branin_known_minima():
    assert toy.forrester(toy.FORRESTER_X_MIN) == pytest.approx(-6.0207, abs=1e-4)
    assert toy.FORRESTER_X_MIN == pytest.approx(0.7572, abs=1e-4)
    assert toy.forrester(np.linspace(0, 1, 2001)).min() >= toy.FORRESTER_F_MIN - 1e-9
    for x1, x2 in toy.BRANIN_MINIMA:
        assert toy.branin(x1, x2) == pytest.approx(0.397887, abs=1e-6)
    grid = np.meshgrid(np.linspace(-5, 10, 301), np.linspace(0, 15, 301))
    assert toy.branin(*grid).min() >= toy.BRANIN_F_MIN - 1e-9


def test_expected_improvement_matches_hand_computed_values():
    # mu = best, sigma = 1, xi = 0: I = 0, z = 0 -> EI = phi(0) = 0.398942
    assert toy.expected_improvement(0.0, 1.0, best=0.0, xi=0.0) == pytest.approx(0.3989423, abs=1e-6)
    # mu = 1, sigma = 2, best = 0, xi = 0.5: I = -1.5, z = -0.75
    #   EI = -1.5 * Phi(-0.75) + 2 * phi(-0.75) = -1.5 * 0.2266274 + 2 * 0.3011374 = 0.2623337
    assert toy.expected_improvement(1.0, 2.0, best=0.0, xi=0.5) == pytest.approx(0.2623337, abs=1e-6)
    hand = -1.5 * _Phi(-0.75) + 2 * _phi(-0.75)
    assert toy.expected_improvement(1.0, 2.0, best=0.0, xi=0.5) == pytest.approx(hand, rel=1e-12)
    # mu well below best: EI ~ the improvement itself, I = 3 - 0.01
    assert toy.expected_improvement(-3.0, 0.1, best=0.0, xi=0.01) == pytest.approx(2.99, abs=1e-6)


def test_expected_improvement_is_zero_where_certain_and_worse():
    mu = np.array([1.0, 2.0, -1.0, 0.5])
    sigma = np.array([0.0, 0.0, 0.0, 0.3])
    ei = toy.expected_improvement(mu, sigma, best=0.0, xi=0.0)
    assert ei[0] == 0.0 and ei[1] == 0.0              # sigma = 0 and mu > best
    assert ei[2] == pytest.approx(1.0)                # sigma = 0, mu < best: the sure improvement
    assert ei[3] > 0 and np.all(ei >= 0)
    # larger xi never increases EI
    assert np.all(toy.expected_improvement(mu, sigma, 0.0, xi=0.5) <= ei + 1e-12)


def test_lower_confidence_bound_matches_hand_computed_values():
    assert toy.lower_confidence_bound(1.0, 0.5, kappa=2.0) == pytest.approx(0.0)
    assert toy.lower_confidence_bound(-2.0, 3.0, kappa=0.0) == pytest.approx(-2.0)
    np.testing.assert_allclose(toy.lower_confidence_bound([0.0, 1.0], [1.0, 0.1], kappa=3.0), [-3.0, 0.7])


def test_fit_gp_interpolates_observations_and_ard_has_one_length_scale_per_variable():
    x = np.array([0.1, 0.4, 0.6, 0.9])
    gp = toy.fit_gp(x, toy.forrester(x))
    mu, sigma = gp.predict(x[:, None], return_std=True)
    np.testing.assert_allclose(mu, toy.forrester(x), atol=1e-2)
    assert np.all(sigma < 0.05)
    Z = np.random.default_rng(0).integers(0, 2, (20, 5)).astype(float)
    ard = toy.fit_gp(Z, Z @ np.array([5.0, 0.0, 0.0, 0.0, 1.0]), ard=True)
    assert np.atleast_1d(ard.kernel_.k2.length_scale).shape == (5,)


def test_run_bo_1d_history_shapes_and_bookkeeping():
    h = toy.run_bo_1d("EI", n_iter=4, seed=0, n_init=3, grid_size=101)
    assert h.mean.shape == h.std.shape == h.acquisition_values.shape == (4, 101)
    assert len(h.x_observed) == len(h.y_observed) == 7 and h.n_iter == 4
    np.testing.assert_allclose(h.x_observed[3:], h.next_x)      # the chosen point is evaluated next
    np.testing.assert_allclose(h.y_observed, toy.forrester(h.x_observed))
    assert np.all(np.diff(h.best_so_far) <= 0) and h.gap >= -1e-9
    assert h.next_x[0] == h.grid[np.argmax(h.acquisition_values[0])]
    assert "mean" not in repr(h)                               # arrays stay out of the repr
    with pytest.raises(ValueError):
        toy.run_bo_1d("PI", n_iter=1)


def test_bo_on_forrester_gets_within_005_of_the_minimum():
    gaps = []
    for seed in (0, 1, 2):
        gaps.append(toy.run_bo_1d("EI", n_iter=15, seed=seed).gap)
        if gaps[-1] < 0.05:
            break
    assert min(gaps) < 0.05, gaps


def test_lcb_chooses_argmin_and_random_baseline_shares_the_initial_design():
    h = toy.run_bo_1d("LCB", n_iter=2, kappa=2.0, seed=3, grid_size=101)
    assert h.next_x[0] == h.grid[np.argmin(h.acquisition_values[0])]
    np.testing.assert_allclose(h.acquisition_values[0], h.mean[0] - 2.0 * h.std[0])
    random = toy.best_so_far_1d("random", n_iter=2, seed=3)
    assert random[2] == pytest.approx(h.best_so_far[2])        # same 3 initial points


@pytest.mark.parametrize("sampler", ["RandomSampler", "TPESampler", "GPSampler"])
def test_optuna_best_so_far_is_monotone_with_the_right_length(sampler):
    n_trials = 12 if sampler == "GPSampler" else 15
    curve = toy.optuna_best_so_far(sampler, n_trials=n_trials, seed=0)
    assert curve.shape == (n_trials,)
    assert np.all(np.diff(curve) <= 0) and curve[-1] >= toy.BRANIN_F_MIN - 1e-9
    with pytest.raises(ValueError):
        toy.optuna_best_so_far("CmaEsSamplr", 1, 0)


def test_suggest_skip_mask_uses_integers_in_skipset_order():
    import optuna

    trial = optuna.trial.FixedTrial({"attn_0": 1, "attn_1": 0, "mlp_0": 0, "mlp_1": 1})
    assert toy.suggest_skip_mask(trial, 2) == [True, False, False, True]
    from labkit.core.skip import SkipSet
    assert SkipSet.from_mask(toy.suggest_skip_mask(trial, 2)) == SkipSet(attention=[0], mlp=[1])


def test_toy_skip_problem_ends_are_slower_than_plain_decoding_and_the_middle_is_faster():
    problem = toy.make_toy_skip_problem(n_layers=4, seed=0)
    full_ms = problem.fixed_ms + problem.block_ms.sum()
    assert problem.full_ms == pytest.approx(full_ms) and problem.fixed_ms > 0 and problem.verify_token_ms > 0
    assert problem.ms_per_token(np.zeros(8)) > full_ms      # α = 1, but γ full drafts and a longer verify
    assert problem.ms_per_token(np.ones(8)) > full_ms       # α ≈ 0: the fixed cost of γ drafts and a verify
    best, mask = problem.brute_force_minimum()
    assert best < full_ms and mask.shape == (8,)
    assert problem.block_names[0] == "attn 0" and problem.block_names[4] == "mlp 0"
    free = toy.make_toy_skip_problem(n_layers=4, seed=0, fixed_ms=0.0, verify_token_ms=0.0)   # no overheads:
    assert free.ms_per_token(np.zeros(8)) == pytest.approx(free.full_ms)                       # both ends plain
    assert free.ms_per_token(np.ones(8)) == pytest.approx(free.full_ms, rel=1e-3)
    with pytest.raises(ValueError):
        toy.make_toy_skip_problem(n_layers=3)


def test_ard_hit_rate_counts_important_blocks_among_the_shortest_length_scales():
    damage = np.array([2.0, 0.0, 1.5, 0.01])
    assert toy.ard_hit_rate({"length_scale": np.array([0.1, 50.0, 0.2, 9.0]), "damage": damage}) == 1.0
    assert toy.ard_hit_rate({"length_scale": np.array([0.1, 0.05, 9.0, 50.0]), "damage": damage}) == 0.5
