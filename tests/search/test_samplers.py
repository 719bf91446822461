"""labkit.search.samplers: Optuna's samplers by short name (seeded: the same seed proposes the same trials), Optuna's
log quietened and restored, and a quiet in-memory study that minimises."""
import optuna
import pytest

from labkit.search.samplers import SAMPLERS, make_sampler, quiet_optuna, quiet_study


def square(trial) -> float:
    x = trial.suggest_float("x", -2.0, 2.0)
    return (x - 0.5) ** 2


@pytest.mark.parametrize("name, kind", [("gp", optuna.samplers.GPSampler), ("tpe", optuna.samplers.TPESampler),
                                        ("random", optuna.samplers.RandomSampler)])
def test_each_name_makes_its_sampler(name, kind):
    assert name in SAMPLERS and isinstance(make_sampler(name, seed=0), kind)


def test_an_unknown_name_lists_the_samplers():
    with pytest.raises(ValueError, match="unknown sampler 'cmaes'; choose one of gp, tpe, random"):
        make_sampler("cmaes", seed=0)


def test_a_seed_fixes_the_trials_and_the_study_minimises():
    first = quiet_study(make_sampler("random", seed=3), square, n_trials=6)
    again = quiet_study(make_sampler("random", seed=3), square, n_trials=6)
    other = quiet_study(make_sampler("random", seed=4), square, n_trials=6)
    xs = [t.params["x"] for t in first.trials]
    assert xs == [t.params["x"] for t in again.trials] and xs != [t.params["x"] for t in other.trials]
    assert len(first.trials) == 6 and first.direction == optuna.study.StudyDirection.MINIMIZE
    assert first.best_value == min(t.value for t in first.trials)


def test_quiet_optuna_restores_the_log_level_even_after_an_error():
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.INFO)
    try:
        with pytest.raises(RuntimeError), quiet_optuna():
            assert optuna.logging.get_verbosity() == optuna.logging.WARNING
            raise RuntimeError("inside")
        assert optuna.logging.get_verbosity() == optuna.logging.INFO
    finally:
        optuna.logging.set_verbosity(before)
