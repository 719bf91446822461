"""Notebook 01's sentences turn with the data (fake results that reverse each claim)."""
import numpy as np
import pandas as pd

from labkit.lessons import bayesian_optimization as bc
from labkit.search.toy import forrester_bo, skip_problem


def curves(**finals):
    """Best-so-far curves per sampler, 3 seeds, ending at the given (low, mid, high) values."""
    out = {}
    for name, (lo, mid, hi) in finals.items():
        out[name] = np.array([[10.0, lo], [10.0, mid], [10.0, hi]])
        out[name + " s/trial"] = 0.01
    return out


def test_sampler_sentence_names_the_real_winner():
    gp = bc.sampler_sentence(curves(gp=(0.40, 0.40, 0.41), tpe=(0.5, 0.6, 0.9)), 50)
    assert gp.startswith("GP (GPSampler) has the lowest") and "beyond the spread over seeds" in gp
    assert "ms" not in gp and "this machine" not in gp                  # the ranking does not depend on timings
    trial = bc.per_trial_line(curves(gp=(0.40, 0.40, 0.41), tpe=(0.5, 0.6, 0.9)))
    assert trial == "On this machine one trial cost: GP (GPSampler) 10.0 ms and TPE 10.0 ms."
    tpe = bc.sampler_sentence(curves(gp=(1.0, 2.0, 3.0), tpe=(1.5, 1.74, 2.5)), 20)
    assert tpe.startswith("TPE has the lowest") and "within the spread over seeds" in tpe
    assert "10 proposals" in tpe and "may not have separated" in tpe and "may not" not in gp


def test_acquisition_sentence_counts_trapped_seeds():
    f_min = -6.0
    trapped = {"EI": np.array([[0, -6.0], [0, -6.0], [0, -1.0]]), "random": np.array([[0, -5.0]] * 3)}
    text = bc.acquisition_sentence(trapped, f_min, 3e-4)
    assert "EI on 1 of 3 seeds" in text
    clean = {"EI": np.array([[0, -6.0]] * 3), "random": np.array([[0, -5.9]] * 3)}
    assert "Every seed ends in the global basin" in bc.acquisition_sentence(clean, f_min, 3e-4)


def test_acquisition_sentence_calls_a_tie_within_the_grid_floor():
    f_min, floor = -6.0, 3e-4
    tied = {"EI": np.array([[0, -6.0 + floor]] * 3), "LCB": np.array([[0, -6.0 + floor]] * 3),
            "random": np.array([[0, -5.6]] * 3)}
    text = bc.acquisition_sentence(tied, f_min, floor)
    assert text.startswith("EI (0.0003) and LCB (0.0003) tie for the lowest") and "then random (0.4)" in text
    assert "has the lowest" not in text
    tied["EI"] = np.array([[0, -6.0 + 10 * floor]] * 3)                 # LCB now lower by more than the floor
    text = bc.acquisition_sentence(tied, f_min, floor)
    assert text.startswith("LCB has the lowest median final gap (0.0003)") and "tie" not in text


def test_exploration_sentences_follow_the_table():
    table = pd.DataFrame({"acquisition": ["EI", "LCB"], "setting": ["ξ = 0", "κ = 4"],
                          "found the global basin": [False, True], "gap to minimum": [5.0, 0.0003],
                          "first BO step in the global basin": [None, 4]})
    text = bc.exploration_sentences(table)
    assert "Trapped in the local basin near 0.14: EI ξ = 0" in text and "LCB κ = 4 at step 4" in text
    table["found the global basin"] = [True, True]
    table["first BO step in the global basin"] = [9, 4]
    assert "Trapped" not in bc.exploration_sentences(table) and "EI ξ = 0 at step 9" in bc.exploration_sentences(table)


def test_exploration_view_says_never_instead_of_nan():
    table = pd.DataFrame({"acquisition": ["EI", "LCB"], "first BO step in the global basin": [16.0, float("nan")]})
    view = bc.exploration_view(table)
    assert list(view["first BO step in the global basin"]) == ["16", "never"] and "NaN" not in view.to_string()
    assert np.isnan(table["first BO step in the global basin"][1])     # the numeric table is left as it was


def test_toy_ends_sentence_follows_the_costs():
    real = bc.toy_ends_sentence(skip_problem.make_toy_skip_problem())
    assert "skipping nothing costs" in real and real.count("slower than plain decoding") == 2
    free = bc.toy_ends_sentence(skip_problem.make_toy_skip_problem(fixed_ms=0.0, verify_token_ms=0.0))
    assert free.count("as fast as plain decoding") == 2 and "fixed part" not in free


def test_ard_and_step_sentences():
    relevance = {"damage": np.array([1.0, 1.0, 0.0, 0.0]), "length_scale": np.array([0.1, 0.2, 1000.0, 5.0])}
    assert "100% of the 2 blocks" in bc.ard_sentence(relevance, 1.0) and "1 of the 4" in bc.ard_sentence(relevance, 1.0)
    assert "only partly" in bc.ard_sentence(relevance, 0.5)
    history = forrester_bo.run_bo_1d("EI", n_iter=8, seed=0)
    assert "EI pointing at x =" in bc.first_step_sentence(history)
    assert "of the last 5 points lie in the global basin" in bc.last_step_sentence(history)
