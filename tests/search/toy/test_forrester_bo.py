"""labkit.search.toy.forrester_bo: the acquisition formulas by hand, the GP fit, the 1-D BO loop and its comparisons."""
import math

import numpy as np
import pytest

from labkit.search.toy import forrester_bo as bo


def _phi(z):   # standard normal pdf, by hand
    return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)


def _Phi(z):   # standard normal cdf, by hand
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def test_forrester_known_minimum():
    assert bo.forrester(bo.FORRESTER_X_MIN) == pytest.approx(-6.0207, abs=1e-4)
    assert bo.FORRESTER_X_MIN == pytest.approx(0.7572, abs=1e-4)
    assert bo.forrester(np.linspace(0, 1, 2001)).min() >= bo.FORRESTER_F_MIN - 1e-9


def test_expected_improvement_matches_hand_computed_values():
    # mu = best, sigma = 1, xi = 0: I = 0, z = 0 -> EI = phi(0) = 0.398942
    assert bo.expected_improvement(0.0, 1.0, best=0.0, xi=0.0) == pytest.approx(0.3989423, abs=1e-6)
    # mu = 1, sigma = 2, best = 0, xi = 0.5: I = -1.5, z = -0.75
    #   EI = -1.5 * Phi(-0.75) + 2 * phi(-0.75) = -1.5 * 0.2266274 + 2 * 0.3011374 = 0.2623337
    assert bo.expected_improvement(1.0, 2.0, best=0.0, xi=0.5) == pytest.approx(0.2623337, abs=1e-6)
    hand = -1.5 * _Phi(-0.75) + 2 * _phi(-0.75)
    assert bo.expected_improvement(1.0, 2.0, best=0.0, xi=0.5) == pytest.approx(hand, rel=1e-12)
    # mu well below best: EI ~ the improvement itself, I = 3 - 0.01
    assert bo.expected_improvement(-3.0, 0.1, best=0.0, xi=0.01) == pytest.approx(2.99, abs=1e-6)


def test_expected_improvement_is_zero_where_certain_and_worse():
    mu = np.array([1.0, 2.0, -1.0, 0.5])
    sigma = np.array([0.0, 0.0, 0.0, 0.3])
    ei = bo.expected_improvement(mu, sigma, best=0.0, xi=0.0)
    assert ei[0] == 0.0 and ei[1] == 0.0              # sigma = 0 and mu > best
    assert ei[2] == pytest.approx(1.0)                # sigma = 0, mu < best: the sure improvement
    assert ei[3] > 0 and np.all(ei >= 0)
    # larger xi never increases EI
    assert np.all(bo.expected_improvement(mu, sigma, 0.0, xi=0.5) <= ei + 1e-12)


def test_lower_confidence_bound_matches_hand_computed_values():
    assert bo.lower_confidence_bound(1.0, 0.5, kappa=2.0) == pytest.approx(0.0)
    assert bo.lower_confidence_bound(-2.0, 3.0, kappa=0.0) == pytest.approx(-2.0)
    np.testing.assert_allclose(bo.lower_confidence_bound([0.0, 1.0], [1.0, 0.1], kappa=3.0), [-3.0, 0.7])


def test_fit_gp_interpolates_observations_and_ard_has_one_length_scale_per_variable():
    x = np.array([0.1, 0.4, 0.6, 0.9])
    gp = bo.fit_gp(x, bo.forrester(x))
    mu, sigma = gp.predict(x[:, None], return_std=True)
    np.testing.assert_allclose(mu, bo.forrester(x), atol=1e-2)
    assert np.all(sigma < 0.05)
    Z = np.random.default_rng(0).integers(0, 2, (20, 5)).astype(float)
    ard = bo.fit_gp(Z, Z @ np.array([5.0, 0.0, 0.0, 0.0, 1.0]), ard=True)
    assert np.atleast_1d(ard.kernel_.k2.length_scale).shape == (5,)


def test_run_bo_1d_history_shapes_and_bookkeeping():
    h = bo.run_bo_1d("EI", n_iter=4, seed=0, n_init=3, grid_size=101)
    assert h.mean.shape == h.std.shape == h.acquisition_values.shape == (4, 101)
    assert len(h.x_observed) == len(h.y_observed) == 7 and h.n_iter == 4
    np.testing.assert_allclose(h.x_observed[3:], h.next_x)      # the chosen point is evaluated next
    np.testing.assert_allclose(h.y_observed, bo.forrester(h.x_observed))
    assert np.all(np.diff(h.best_so_far) <= 0) and h.gap >= -1e-9
    assert h.next_x[0] == h.grid[np.argmax(h.acquisition_values[0])]
    assert "mean" not in repr(h)                               # arrays stay out of the repr
    with pytest.raises(ValueError):
        bo.run_bo_1d("PI", n_iter=1)


def test_bo_on_forrester_gets_within_005_of_the_minimum():
    gaps = []
    for seed in (0, 1, 2):
        gaps.append(bo.run_bo_1d("EI", n_iter=15, seed=seed).gap)
        if gaps[-1] < 0.05:
            break
    assert min(gaps) < 0.05, gaps


def test_lcb_chooses_argmin_and_random_baseline_shares_the_initial_design():
    h = bo.run_bo_1d("LCB", n_iter=2, kappa=2.0, seed=3, grid_size=101)
    assert h.next_x[0] == h.grid[np.argmin(h.acquisition_values[0])]
    np.testing.assert_allclose(h.acquisition_values[0], h.mean[0] - 2.0 * h.std[0])
    random = bo.best_so_far_1d("random", n_iter=2, seed=3)
    assert random[2] == pytest.approx(h.best_so_far[2])        # same 3 initial points


@pytest.mark.parametrize("kwargs, error, message", [
    ({"n_iter": 0}, ValueError, "n_iter must be an integer >= 1"),
    ({"n_init": 1.5}, TypeError, "n_init must be an integer"),
    ({"grid_size": 1}, ValueError, "grid_size must be an integer >= 2"),
    ({"xi": -0.1}, ValueError, "xi must be a number >= 0"),
    ({"kappa": float("nan")}, TypeError, "kappa must be a number"),
])
def test_run_bo_1d_names_the_bad_argument(kwargs, error, message):
    with pytest.raises(error, match=message):
        bo.run_bo_1d("EI", **kwargs)


def test_acquisition_comparison_and_exploration_table_share_the_initial_design():
    curves = bo.acquisition_comparison(("EI", "random"), n_iter=2, seeds=(0, 1))
    assert set(curves) == {"EI", "random"} and curves["EI"].shape == curves["random"].shape == (2, 5)
    np.testing.assert_allclose(curves["EI"][:, 2], curves["random"][:, 2])    # the same 3 initial points per seed
    table = bo.exploration_table(n_iter=2, xis=(0.0,), kappas=(2.0,))
    assert list(table["setting"]) == ["ξ = 0", "κ = 2"] and (table["gap to minimum"] >= -1e-9).all()
