"""Notebook 03's sentences turn with the data (fake traces and tables that reverse each claim)."""
import pandas as pd

from labkit.core.policies import AdaptiveThreshold
from labkit.core.trace import StepRecord, Trace
from labkit.lessons import timeline as tl


def trace(steps, conf=0.5, ms_per_token=5.0, threshold=0.25, sampling=False):
    """steps: [(n_drafted, n_accepted)]; every step emits n_accepted + 1 tokens."""
    t = Trace(prompt_length=3, sampling=sampling)
    for i, (d, a) in enumerate(steps):
        t.steps.append(StepRecord(position=3 + i, drafted=[1] * d, q=[0.5] * d, confidence=[conf] * d, p=[0.5] * d,
                                  n_accepted=a, next_token=2, next_kind="replacement", threshold=threshold + 0.001 * i,
                                  draft_s=0.001, verify_s=0.002, n_emitted=a + 1))
    t.total_s = ms_per_token * t.n_emitted / 1e3
    return t


def test_confidence_band_sentence():
    assert "100% had a top-1 probability between 0.2 and 0.6" in tl.confidence_band_sentence(trace([(3, 2)], conf=0.4))
    assert "100% at least 0.6" in tl.confidence_band_sentence(trace([(3, 2)], conf=0.9))
    assert "decides how long drafts run" in tl.confidence_band_sentence(trace([(3, 2)], conf=0.9))


def rows_of(ms: dict) -> pd.DataFrame:
    """measure_once-like rows: {label: (median, min, max) ms per token}; speedups against 'plain loop'."""
    base = ms["plain loop"][0]
    return pd.DataFrame({k: {"ms_per_token": m, "ms_min": lo, "ms_max": hi, "speedup": base / m,
                             "speedup_min": ms["plain loop"][1] / hi, "speedup_max": ms["plain loop"][2] / lo}
                         for k, (m, lo, hi) in ms.items()}).T


def test_sampling_sentence_explains_the_slowdown_or_not():
    greedy = trace([(4, 3)] * 5, ms_per_token=5.0)
    slow = trace([(10, 1)] * 5, ms_per_token=18.0, sampling=True)
    text = tl.sampling_sentence(greedy, slow, AdaptiveThreshold())
    assert "wasted drafts per emitted token" in text and "min(1, p/q)" in text and "ms/token" not in text
    assert "(1 − β₂)·ε = 0.001" in text
    assert all(len(sentence.split()) <= 50 for sentence in text.split(". "))
    fine = trace([(4, 3)] * 5, ms_per_token=5.0, sampling=True)
    assert "did not waste more drafts" in tl.sampling_sentence(greedy, fine)
    assert "Accepted / drafted fell from 75% (greedy) to 10% and d rose from 4.0 to 10.0" in text   # each its own verb
    longer = trace([(2, 2)] * 5, ms_per_token=5.0, sampling=True)
    assert "Accepted / drafted rose from 75% (greedy) to 100% and d fell from 4.0 to 2.0" in tl.sampling_sentence(
        greedy, longer)


def test_sampling_speed_is_against_plain_sampling_and_beside_the_reference():
    """03 once measured speculative sampling against the plain *greedy* loop (0.750x): the line names plain
    sampling, says "this machine", and with a reference row agrees or not within the noise (never ranks)."""
    from labkit.measure.reference.loader import Spread

    rows = rows_of({"plain loop": (5, 4.9, 5.1), "sampled": (6, 5.8, 6.2), "plain sampling T=0.7": (7.2, 7.0, 7.4)})
    rows.loc["sampled", ["speedup", "speedup_min", "speedup_max"]] = [1.2, 1.13, 1.28]   # measure_once's swap
    line = tl.sampling_speed_line(rows, "sampled", "plain sampling T=0.7")
    assert line.startswith("On this machine sampled ran at 1.20x plain sampling") and "7.2 ms/token" in line
    inside = tl.sampling_speed_line(rows, "sampled", "plain sampling T=0.7", Spread(1.25, 1.2, 1.3))
    assert "this machine agrees within the noise" in inside and "1.25x (1.20" in inside
    outside = tl.sampling_speed_line(rows, "sampled", "plain sampling T=0.7", Spread(1.6, 1.5, 1.7))
    assert "this machine gains less than the reference, beyond the noise" in outside


def test_row_speed_sentence_says_within_the_noise():
    rows = rows_of({"plain loop": (8, 7.5, 8.5), "fast": (6, 5.9, 6.1), "tie": (8.1, 7.0, 9.0), "slow": (12, 11, 13)})
    assert "faster than the plain loop" in tl.row_speed_sentence(rows, "fast", 3)
    assert "level with the plain loop within the noise" in tl.row_speed_sentence(rows, "tie", 3)
    assert "slower than the plain loop" in tl.row_speed_sentence(rows, "slow", 3)
    assert "over 3 interleaved repetitions" in tl.row_speed_sentence(rows, "fast", 3)
    assert tl.row_speed_sentence(rows, "fast", 3).endswith("on this machine.")


def test_starting_threshold_reads_the_grid():
    from grid_fixtures import HUMP, S, make_grid

    grid = make_grid(HUMP)
    start, text = tl.starting_threshold(grid, S.ratio)
    setting = grid.nearest(ratio=S.ratio, policy="adaptive", draft_weights="fp32")
    speeds = grid.vs_threshold("speedup", setting)
    assert start == grid.thresholds[int(speeds.argmax())] and f"starting at {start:g}" in text
    assert text.endswith("This notebook starts there.")


def test_carry_sentence_and_the_threshold_step():
    policy = AdaptiveThreshold(initial_threshold=0.6)
    assert abs(tl.threshold_step(policy) - 0.001) < 1e-12
    falling = trace([(4, 4)] * 30, threshold=0.6)
    for i, st in enumerate(falling.steps):
        st.threshold, st.policy_state = 0.6 - 0.001 * i, {"acceptance_rate": 0.97}
    text = tl.carry_sentence({"carried": [falling, falling]}, policy)
    assert "Carried across 2 prompts (60 steps)" in text and "fell" in text and "at least 100 steps" in text
    assert "AR was above the target at every one of the 29 updates" in tl.carry_sentence({"carried": [falling]}, policy)
    # full mode's carry-over: a net fall made of moves both ways must not read "AR stayed above the target"
    mixed, t = trace([(4, 3)] * 30, threshold=0.6), 0.6
    for i, st in enumerate(mixed.steps):
        st.threshold, st.policy_state = t, {"acceptance_rate": 0.95}
        t += 0.001 if i % 3 == 0 else -0.001
    text = tl.carry_sentence({"carried": [mixed]}, policy)
    assert "fell: AR was above the target at 19 of the 29 updates and below it at 10, so on balance" in text
    assert "every one" not in text and "stayed above" not in text
    for st in falling.steps:
        st.threshold, st.policy_state = 0.6, {"acceptance_rate": 0.9}
    assert "stayed where it started" in tl.carry_sentence({"carried": [falling]}, policy)


def test_verify_and_drafters_sentences():
    assert "c_v = 0.60" in tl.verify_cost_sentence(trace([(3, 2)]), plain_ms_per_token=2.0 / 0.6)
    runs = {"self": trace([(4, 3)], ms_per_token=4.0), "separate": trace([(4, 3)], ms_per_token=6.0)}
    assert "the self was faster" in tl.drafters_sentence(runs)
    runs["self"] = trace([(4, 3)], ms_per_token=9.0)
    assert "the separate was faster" in tl.drafters_sentence(runs)
    rows = rows_of({"plain loop": (8, 7.9, 8.1), "self": (9, 8.5, 9.5), "separate": (6, 5.8, 6.2)})
    assert ("On this machine the separate against the self on this prompt: 6.0 ms/token against 9.0"
            in tl.drafters_sentence(runs, rows))
    assert "): faster." in tl.drafters_sentence(runs, rows)


def contrast(loop_off, loop_on, novel_off, novel_on, loop_share=0.5, novel_share=0.02):
    rows = []
    for label, share, (off, on) in (("first held-out prompt", loop_share, (loop_off, loop_on)),
                                    ("showcase prompt", novel_share, (novel_off, novel_on))):
        for n, tps in ((0, off), (6, on)):
            rows.append({"text": label, "prompt lookup": n, "tokens per step": tps, "accepted / drafted": 0.5,
                         "copied share of drafts": 0.0 if n == 0 else 0.3, "repeated share": share})
    return pd.DataFrame(rows).set_index(["text", "prompt lookup"])


def test_repetition_sentence_follows_the_table():
    text = tl.repetition_sentence(contrast(6.9, 6.0, 2.4, 2.1))
    assert text.startswith("The first held-out prompt's text repeats itself (50%")
    assert "tokens per step fell (6.90 → 6.00" in text and "at most 6 tokens long" in text
    helped = tl.repetition_sentence(contrast(2.0, 4.0, 2.4, 2.4))
    assert "tokens per step rose (2.00 → 4.00" in helped and "at most 6 tokens" not in helped and "stayed" in helped
    swapped = tl.repetition_sentence(contrast(2.4, 2.4, 6.9, 6.9, loop_share=0.02, novel_share=0.5))
    assert swapped.startswith("The showcase prompt's text repeats itself")


def test_speed_sentence():
    from types import SimpleNamespace as R
    assert "slower than plain decoding (0.63x" in tl.speed_sentence(R(ms_per_token=6.2), R(ms_per_token=3.9))
    assert "faster than plain decoding (1.59x" in tl.speed_sentence(R(ms_per_token=3.9), R(ms_per_token=6.2))
    assert "as fast as" in tl.speed_sentence(R(ms_per_token=4.0), R(ms_per_token=4.05))


def test_median_run_is_the_repetition_whose_ms_per_token_the_rows_report():
    """The figures of notebook 03 show this run, the sentences the rows' median: they must be the same repetition."""
    import torch

    from labkit.measure.harness import Method, RunRecord, Runs

    method = Method("self-spec", "self-draft")
    seconds = [0.30, 0.10, 0.20]                     # the last repetition is not the median one
    runs = Runs([method], {method: [[RunRecord(s, 10, torch.zeros(1, 1), result=f"rep{i}")]
                                    for i, s in enumerate(seconds)]})
    assert tl.median_run(runs, method) == "rep2"          # 20 ms/token: the median of 30, 10, 20
    runs.records[method].append([RunRecord(0.40, 10, torch.zeros(1, 1), result="rep3")])
    assert tl.median_run(runs, method) == "rep2"          # even count: the lower middle (20 of 10, 20, 30, 40)


def test_stop_sentence_counts_the_ringed_stops_the_target_accepted():
    accepted = trace([(3, 3), (2, 2), (2, 1)], conf=0.3, threshold=0.6)       # every step stopped below 0.6
    text = tl.stop_sentence(accepted)
    assert "3 drafts stopped on a token below the threshold, and the target accepted that token 2 times" in text
    assert "a lower threshold would have let those drafts run on" in text and len(text.split()) <= 50
    rejected = trace([(3, 1), (2, 0), (2, 2)], conf=0.3, threshold=0.6)
    assert "most stops were on tokens the target rejected" in tl.stop_sentence(rejected)
    assert "accepted that token 1 time:" in tl.stop_sentence(rejected, steps=(0, 2))
    assert "no draft stopped" in tl.stop_sentence(trace([(3, 3)], conf=0.9, threshold=0.6))
    assert "2 drafts stopped" in tl.stop_sentence(accepted, steps=(1, 2))             # the figure's window only


def test_median_run_carries_the_harness_timing_into_its_trace():
    """A figure of the median run must print the table's ms/token: the harness's seconds, not the decoder's clock."""
    import torch

    from labkit.core.decoding import GenerationResult
    from labkit.measure.harness import Method, RunRecord, Runs

    method = Method("self-spec", "self-draft")
    t = trace([(3, 2)] * 4, ms_per_token=5.0)                     # 12 tokens, the decoder's clock: 60 ms
    result = GenerationResult(torch.zeros(1, 15, dtype=torch.long), t, 3, t.total_s)
    runs = Runs([method], {method: [[RunRecord(0.066, 12, result.sequences, result=result)]]})
    shown = tl.median_run(runs, method)
    assert shown.trace.summary()["ms_per_token_with_prefill"] == 5.5 and shown.elapsed_s == 0.066
    assert t.total_s == 0.06                                      # the recorded run itself is left as it was
