"""The parallel-decoding record (labkit.core.jacobi_trace), built by hand: what an iteration changed and matched,
the summary's counts and rates, and one frame row per (iteration, slot)."""
import math

from labkit.core.jacobi_trace import JacobiIteration, JacobiTrace


def two_iterations() -> JacobiTrace:
    trace = JacobiTrace(prompt_length=3, method="jacobi", init="pad", block_size=3, total_s=0.5)
    trace.iterations += [
        JacobiIteration(position=3, guess=[7, 0, 0], output=[7, 8, 9], n_fixed=2, n_emitted=2, n_initialised=2,
                        forward_s=0.1, init_s=0.02),
        JacobiIteration(position=5, guess=[9, 4, 0], output=[9, 4, 5], n_fixed=3, n_emitted=3, n_initialised=1,
                        forward_s=0.1),
    ]
    return trace


def test_an_iteration_knows_what_it_changed_and_matched():
    first = two_iterations().iterations[0]
    assert first.width == 3 and first.changed == [False, True, True] and first.n_matched == 1


def test_summary_counts_iterations_tokens_guesses_and_time():
    s = two_iterations().summary()
    assert (s["iterations"], s["tokens"], s["guessed"], s["matched"]) == (2, 5, 4, 3)
    assert math.isclose(s["iterations_per_token"], 2 / 5) and math.isclose(s["match_rate"], 3 / 4)
    assert math.isclose(s["changed_per_iteration"], (2 + 1) / 2)
    assert math.isclose(s["ms_per_token"], 1e3 * 0.22 / 5) and math.isclose(s["ms_per_token_with_prefill"], 100.0)
    empty = JacobiTrace(prompt_length=1, method="jacobi", init="pad", block_size=2).summary()
    assert empty["iterations"] == 0 and math.isnan(empty["iterations_per_token"])


def test_frame_has_one_row_per_slot_with_fixed_and_initialised_marks():
    frame = two_iterations().to_frame()
    assert len(frame) == 6 and list(frame["position"][:3]) == [3, 4, 5]
    assert list(frame["fixed"]) == [True, True, False, True, True, True]
    assert list(frame["initialised"]) == [False, True, True, False, False, True]
