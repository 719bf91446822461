"""labkit.search.toy.branin_samplers: Branin's known minima; Optuna's samplers on it, named as the search names them."""
import numpy as np
import pytest

from labkit.search import samplers
from labkit.search.toy import branin_samplers as bs


def test_branin_known_minima():
    for x1, x2 in bs.BRANIN_MINIMA:
        assert bs.branin(x1, x2) == pytest.approx(0.397887, abs=1e-6)
    grid = np.meshgrid(np.linspace(-5, 10, 301), np.linspace(0, 15, 301))
    assert bs.branin(*grid).min() >= bs.BRANIN_F_MIN - 1e-9


@pytest.mark.parametrize("sampler", ["random", "tpe", "gp"])
def test_optuna_best_so_far_is_monotone_with_the_right_length(sampler):
    n_trials = 12 if sampler == "gp" else 15
    curve = bs.optuna_best_so_far(sampler, n_trials=n_trials, seed=0)
    assert curve.shape == (n_trials,)
    assert np.all(np.diff(curve) <= 0) and curve[-1] >= bs.BRANIN_F_MIN - 1e-9
    with pytest.raises(ValueError, match="unknown sampler 'GPSampler'"):
        bs.optuna_best_so_far("GPSampler", 1, 0)            # the search's names, not Optuna's class names


def test_sampler_comparison_is_keyed_by_the_searchs_sampler_names():
    assert bs.SAMPLERS == samplers.SAMPLERS == ("gp", "tpe", "random")
    curves = bs.sampler_comparison(("tpe", "random"), n_trials=4, seeds=(0, 1))
    assert set(curves) == {"tpe", "tpe s/trial", "random", "random s/trial"}
    assert curves["tpe"].shape == (2, 4) and curves["random s/trial"] > 0
    with pytest.raises(ValueError, match="samplers must be one of 'gp', 'tpe', 'random'; got 'RandomSampler'"):
        bs.sampler_comparison(("RandomSampler",), n_trials=1, seeds=(0,))
    with pytest.raises(ValueError, match="n_trials must be an integer >= 1"):
        bs.optuna_best_so_far("random", 0, 0)
