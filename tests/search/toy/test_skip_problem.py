"""labkit.search.toy.skip_problem: the toy skip-set objective, the ARD length-scales, declaring the variables."""
import numpy as np
import optuna
import pytest

from labkit.core.skip import SkipSet
from labkit.search import toy
from labkit.search.toy import branin_samplers, forrester_bo, skip_problem


def test_suggest_skip_mask_uses_integers_in_skipset_order():
    trial = optuna.trial.FixedTrial({"attn_0": 1, "attn_1": 0, "mlp_0": 0, "mlp_1": 1})
    assert skip_problem.suggest_skip_mask(trial, 2) == [True, False, False, True]
    assert SkipSet.from_mask(skip_problem.suggest_skip_mask(trial, 2)) == SkipSet(attention=[0], mlp=[1])


def test_toy_skip_problem_ends_are_slower_than_plain_decoding_and_the_middle_is_faster():
    problem = skip_problem.make_toy_skip_problem(n_layers=4, seed=0)
    full_ms = problem.fixed_ms + problem.block_ms.sum()
    assert problem.full_ms == pytest.approx(full_ms) and problem.fixed_ms > 0 and problem.verify_token_ms > 0
    assert problem.ms_per_token(np.zeros(8)) > full_ms      # α = 1, but γ full drafts and a longer verify
    assert problem.ms_per_token(np.ones(8)) > full_ms       # α ≈ 0: the fixed cost of γ drafts and a verify
    best, mask = problem.brute_force_minimum()
    assert best < full_ms and mask.shape == (8,)
    assert problem.block_names[0] == "attn 0" and problem.block_names[4] == "mlp 0"
    free = skip_problem.make_toy_skip_problem(n_layers=4, seed=0, fixed_ms=0.0, verify_token_ms=0.0)  # no overheads:
    assert free.ms_per_token(np.zeros(8)) == pytest.approx(free.full_ms)                      # both ends plain
    assert free.ms_per_token(np.ones(8)) == pytest.approx(free.full_ms, rel=1e-3)
    with pytest.raises(ValueError, match="n_layers must be an integer >= 4"):
        skip_problem.make_toy_skip_problem(n_layers=3)
    with pytest.raises(ValueError, match="n_draft must be an integer >= 1"):
        skip_problem.make_toy_skip_problem(n_draft=0)


def test_ard_hit_rate_counts_important_blocks_among_the_shortest_length_scales():
    damage = np.array([2.0, 0.0, 1.5, 0.01])
    assert skip_problem.ard_hit_rate({"length_scale": np.array([0.1, 50.0, 0.2, 9.0]), "damage": damage}) == 1.0
    assert skip_problem.ard_hit_rate({"length_scale": np.array([0.1, 0.05, 9.0, 50.0]), "damage": damage}) == 0.5


def test_ard_relevance_fits_one_length_scale_per_block_and_checks_its_arguments():
    problem = skip_problem.make_toy_skip_problem(n_layers=4, seed=0)
    relevance = skip_problem.ard_relevance(problem, n_samples=30, seed=0)
    assert relevance["length_scale"].shape == (8,) and relevance["damage"] is problem.damage
    with pytest.raises(ValueError, match="skip_probability must be a number in"):
        skip_problem.ard_relevance(problem, skip_probability=1.5)
    with pytest.raises(ValueError, match="n_samples must be an integer >= 2"):
        skip_problem.ard_relevance(problem, n_samples=1)


def test_declaration_comparison_runs_both_declarations_with_the_gp():
    out = skip_problem.declaration_comparison(skip_problem.make_toy_skip_problem(n_layers=4), n_trials=3, seeds=(0,))
    assert set(out) == {"int", "categorical"}
    assert all(len(v["best"]) == 1 and v["s_per_trial"] > 0 for v in out.values())


def test_the_toy_package_still_offers_every_name():
    """Notebook 01 reads everything as ``toy.<name>``: the package re-exports its modules' public names."""
    for module in (forrester_bo, branin_samplers, skip_problem):
        assert all(getattr(toy, name) is getattr(module, name) for name in module.__all__)
    assert sorted(toy.__all__) == sorted({*forrester_bo.__all__, *branin_samplers.__all__, *skip_problem.__all__})
