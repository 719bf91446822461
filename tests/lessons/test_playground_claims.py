"""Notebook 04's sentences: built from synthetic grids, each claim reversed by the data must turn."""

from labkit.lessons import playground_claims as pc

from grid_fixtures import FALLING, HUMP, RISING, S_INT8, S, make_grid

FASTER = {"speedup": lambda i, j: HUMP(i, j) + 0.4, "c": lambda i, j: 0.5 - 0.2 * i}      # int8: cheaper, faster
SLOWER = {"speedup": lambda i, j: HUMP(i, j) - 0.3, "c": lambda i, j: 0.9 - 0.2 * i}      # int8: dearer, slower
TIED = {"speedup": lambda i, j: HUMP(i, j) + 0.01}                                      # ranges overlap


def test_peak_answer_follows_the_curve():
    assert "peaks at skip ratio 0.500" in pc.peak_answer(make_grid(HUMP), S)
    assert "Past 0.500" in pc.peak_answer(make_grid(HUMP), S)
    rising = pc.peak_answer(make_grid(RISING), S)
    assert "peaks at skip ratio 0.750" in rising and "no fall yet" in rising
    falling = pc.peak_answer(make_grid(FALLING), S)
    assert "peaks at skip ratio 0.250" in falling and "no rise" in falling
    assert "accepted / drafted falls" in falling
    assert "accepted / drafted rises" in pc.peak_answer(make_grid(HUMP, acceptance=lambda i, j: 0.5 + 0.2 * i), S)
    # 04's grid: 0.92, 0.89, 0.86, 0.88, 0.91 up to the trained ratio, then a cliff (not "falls from 0.92 to 0.20")
    cliff = pc.peak_answer(make_grid(HUMP, acceptance=lambda i, j: [0.9, 0.88, 0.2][i]), S)
    assert "stays between 0.88 and 0.90 up to 0.500, then falls to 0.20 at 0.750" in cliff


def test_peak_answer_says_when_the_noise_cannot_place_the_peak():
    assert "within the noise" not in pc.peak_answer(make_grid(HUMP, noise=0.02), S)
    wide = pc.peak_answer(make_grid(HUMP, noise=0.2), S)
    assert "overlap that range" in wide and "0.750" in wide
    assert pc.peak_ratios(make_grid(HUMP, noise=0.02), S) == [0.5]
    assert pc.peak_ratios(make_grid(HUMP, noise=0.2), S) == [0.25, 0.5, 0.75]


def test_threshold_answer_separates_fastest_and_most_accepted():
    # accepted / drafted highest at 0.9, speed highest at 0.0: "not where accepted / drafted is highest"
    apart = make_grid(lambda i, j: [1.5, 1.3, 1.1][j], acceptance=lambda i, j: [0.6, 0.8, 0.95][j])
    text = pc.threshold_answer(apart, S)
    assert ("highest at threshold 0 " in text
            and "not where accepted / drafted is highest (0.95 at threshold 0.9" in text)
    # both highest at 0.5: the sentence says so, and what happens above it
    together = make_grid(lambda i, j: [1.1, 1.5, 1.2][j], acceptance=lambda i, j: [0.6, 0.95, 0.94][j])
    text = pc.threshold_answer(together, S)
    assert "Threshold 0.5 is also (within 0.01) where accepted / drafted is highest" in text and "only shortens" in text
    assert "overlaps that range" not in text and "below the peak's beyond the noise" in text
    # full mode of 04: the fastest threshold has a neighbour inside its noise; the answer and the summary name it
    close = make_grid(lambda i, j: [1.48, 1.5, 1.2][j], acceptance=lambda i, j: [0.6, 0.95, 0.94][j], noise=0.05)
    text = pc.threshold_answer(close, S)
    assert "the speedup at threshold 0 overlaps that range, so within the noise it is as fast" in text
    assert "below the peak's beyond the noise" in text
    assert "threshold 0 within its noise" in pc.summary(close, None, S)[1]
    assert "within its noise" not in pc.summary(together, None, S)[1]
    high = make_grid(lambda i, j: [1.1, 1.5, 1.48][j], acceptance=lambda i, j: [0.6, 0.95, 0.94][j], noise=0.05)
    assert "within the noise of the peak" in pc.threshold_answer(high, S)
    # the same ranking inside the noise (ranges overlap): the sentence says the two cannot be told apart
    noisy = make_grid(lambda i, j: [1.5, 1.45, 1.44][j], acceptance=lambda i, j: [0.6, 0.8, 0.95][j], noise=0.05)
    assert pc.threshold_ties(noisy, S) == [1, 2] and pc.threshold_ties(apart, S) == []
    text = pc.threshold_answer(noisy, S)
    assert "within the noise the two are equally fast" in text and "does not pay" not in text
    assert "within the noise of each other" in pc.summary(noisy, None, S)[1]


def test_verify_cost_sentence_reports_the_measured_c_v():
    below = pc.verify_cost_sentence(make_grid(HUMP, c_v=0.9))
    assert "c_v = 0.90–0.90" in below and "below 1 does not mean" in below and "two wall-clock timings" in below
    assert "below 1" not in pc.verify_cost_sentence(make_grid(HUMP, c_v=1.1))


def test_twin_answer_and_best_found():
    twin = make_grid(lambda i, j: 0.8, acceptance=lambda i, j: 0.4, name="plain")
    text = pc.twin_answer(make_grid(HUMP), twin, S)
    assert "best cell on this slice stays below 1 beyond the noise" in text and "keeps less of its agreement" in text
    good_twin = make_grid(lambda i, j: 1.3, name="plain")
    assert "beats plain decoding beyond the noise" in pc.twin_answer(make_grid(HUMP), good_twin, S)
    near_one = make_grid(lambda i, j: 1.01, name="plain")
    assert "within the noise of plain decoding" in pc.twin_answer(make_grid(HUMP), near_one, S)
    clear = pc.best_found_sentence(make_grid(lambda i, j: 1.0 + 0.1 * i + 0.3 * (i == 2 and j == 2)))
    assert "ahead beyond the noise" in clear
    crowded = pc.best_found_sentence(make_grid(HUMP, noise=0.2))
    assert "read it as one of the best settings, not the best" in crowded


def test_live_sentence_inside_or_outside_the_grid_range():
    cell = {"speedup": 1.3, "speedup_min": 1.25, "speedup_max": 1.35, "plain_ms_per_token": 5.0}
    live = {"speedup": 1.3, "speedup_min": 1.2, "speedup_max": 1.4, "plain_ms_per_token": 6.0}
    text = pc.live_sentence(live, cell)
    assert "agrees with the grid within the noise" in text and "this machine" in text and len(text.split()) <= 50
    slow = dict(live, speedup=1.04, speedup_min=1.0, speedup_max=1.1)
    assert "runs the cell slower, beyond both ranges" in pc.live_sentence(slow, cell)
    fast = dict(live, speedup=1.6, speedup_min=1.5, speedup_max=1.7)
    assert "runs the cell faster" in pc.live_verdict(fast, cell)


def test_a_wide_live_range_says_it_cannot_separate_the_cell():
    """The playground's "1.16x (0.74-1.59)" beside a grid's 1.43x confirms nothing, and says so."""
    cell = {"speedup": 1.43, "speedup_min": 1.38, "speedup_max": 1.47, "plain_ms_per_token": 5.0}
    wide = {"speedup": 1.16, "speedup_min": 0.74, "speedup_max": 1.59, "plain_ms_per_token": 6.0}
    verdict = pc.live_verdict(wide, cell)
    assert "too wide to separate the cell from the grid's value" in verdict and "agrees" not in verdict
    assert "missing" in pc.live_verdict(dict(wide, speedup_min=float("nan")), cell)


def test_summary_follows_the_grid():
    bullets = pc.summary(make_grid(HUMP), make_grid(lambda i, j: 0.9, name="plain"), S)
    assert "peaks at skip ratio 0.500 (between the ends of the axis)" in bullets[0]
    assert len(bullets) == 4 and "`plain` peaks at 0.90×" in bullets[2]
    apart = make_grid(lambda i, j: [1.5, 1.3, 1.1][j], acceptance=lambda i, j: [0.6, 0.8, 0.95][j])
    assert "is not the one with the highest" in pc.summary(apart, None, S)[1]


def test_bench_sentence_names_the_fastest_row_against_the_plain_loop():
    rows = [{"method": "default: HF generate", "family": "baseline", "model": "default", "speedup_vs_generate": 1.0,
             "speedup_vs_plain_loop": 0.92, "ms_per_token": 7.1, "ms_min": 7.0, "ms_max": 7.2},
            {"method": "self-spec, adaptive threshold", "family": "labkit", "model": "default",
             "speedup_vs_generate": 1.3, "speedup_vs_plain_loop": 1.13, "ms_per_token": 5.8, "ms_min": 5.7,
             "ms_max": 5.9},
            {"method": "self-spec adaptive + prompt lookup", "family": "labkit", "model": "default",
             "speedup_vs_generate": 2.7, "speedup_vs_plain_loop": 2.33, "ms_per_token": 2.8, "ms_min": 2.7,
             "ms_max": 2.9}]
    text = pc.bench_sentence(rows)
    assert text.startswith("The fastest row is self-spec adaptive + prompt lookup (2.33x the lab's plain loop);")
    assert "self-spec, adaptive threshold reaches 1.13x" in text and "flatter every row by 9%" in text
    rows[2]["speedup_vs_plain_loop"], rows[2]["ms_min"], rows[2]["ms_max"] = 1.1, 5.6, 6.2     # inside the noise
    text = pc.bench_sentence(rows)
    assert text.startswith("The fastest row is self-spec, adaptive threshold (1.13x")
    assert "level within the noise with self-spec adaptive + prompt lookup" in text


def test_weights_sentence_names_the_faster_weights_or_the_noise():
    faster = pc.weights_sentence(make_grid(HUMP, int8=FASTER))
    assert faster.startswith("The fastest cell reads int8 draft weights: 1.82× (min–max 1.80–1.84; skip ratio 0.500")
    assert "vs 1.42× with fp32 (min–max 1.40–1.44), beyond the noise" in faster
    assert "cut the draft cost c from 0.55 to 0.30 of a plain step" in faster and "matrix products only" in faster
    assert "streaming" not in faster and "quarter of the bytes" not in faster
    assert "Accepted / drafted stays about the same (" in faster and "token-identical" in faster
    assert "with fp32, " in faster and "with int8)" in faster     # both values: the table shows the int8 one
    slower = pc.weights_sentence(make_grid(HUMP, int8=SLOWER))
    assert slower.startswith("The fastest cell reads fp32 draft weights: 1.42×") and "vs 1.12× with int8" in slower
    assert "raise the draft cost c from 0.55 to 0.70" in slower and "matrix products" not in slower
    tied = pc.weights_sentence(make_grid(HUMP, int8=TIED))
    assert "within the noise of each other" in tied and "reads" not in tied.split(".")[0]
    assert "leave the draft cost c at about 0.55" in tied
    worse = make_grid(HUMP, int8=dict(FASTER, acceptance=lambda i, j: 0.7 - 0.2 * i))
    assert "Accepted / drafted falls from 0.76 to 0.50" in pc.weights_sentence(worse)
    assert "holds fp32 draft weights only" in pc.weights_sentence(make_grid(HUMP))


def test_weights_answer_compares_the_two_weights_at_the_setting():
    answer = pc.weights_answer(make_grid(HUMP, int8=FASTER), S)
    assert answer.startswith("At skip ratio 0.500, adaptive policy, threshold 0.5 and max draft 4, int8 draft "
                             "weights cut the draft cost c from 0.55 to 0.30")
    assert "The speedup is 1.81× with int8 against 1.41× with fp32: int8 is faster beyond the noise" in answer
    assert "fp32 is faster beyond the noise" in pc.weights_answer(make_grid(HUMP, int8=SLOWER), S)
    assert "with fp32: within the noise" in pc.weights_answer(make_grid(HUMP, int8=TIED), S)
    assert pc.weights_answer(make_grid(HUMP, int8=FASTER), S_INT8) == answer        # the same knobs, either toggle


def test_answers_follow_the_selected_draft_weights():
    grid = make_grid(HUMP, int8={"speedup": RISING})          # fp32 peaks at 0.5, int8 at the highest ratio
    assert "peaks at skip ratio 0.500" in pc.guiding_answers(grid, None, S)[0]["answer"]
    assert "peaks at skip ratio 0.750" in pc.guiding_answers(grid, None, S_INT8)[0]["answer"]
    assert "this grid's int8 cells" in pc.guiding_answers(grid, None, S_INT8)[1]["answer"]
    answers = pc.guiding_answers(grid, make_grid(lambda i, j: 0.9, name="plain"), S_INT8)
    assert len(answers) == 4 and "plain" in answers[2]["question"] and "int8" in answers[3]["question"]
    assert answers[3]["answer"] == pc.weights_answer(grid, S_INT8)
    assert len(pc.guiding_answers(make_grid(HUMP), None, S)) == 2           # fp32 only: no draft-weights question


def test_best_found_and_summary_compare_the_draft_weights():
    assert "draft weights" not in pc.best_found_sentence(make_grid(HUMP)).split(": ", 1)[1].split(")")[1]
    both = pc.best_found_sentence(make_grid(HUMP, int8=FASTER))
    assert "int8 draft weights. It ran at 1.82×" in both and "The fastest cell reads int8 draft weights" in both
    assert "The fastest cell reads fp32" in pc.best_found_sentence(make_grid(HUMP, int8=SLOWER))
    bullets = pc.summary(make_grid(HUMP, int8=TIED), make_grid(lambda i, j: 0.9, name="plain"), S)
    assert len(bullets) == 5 and "within the noise of each other" in bullets[3] and "never the output" in bullets[3]
    assert "reads int8" in pc.summary(make_grid(HUMP, int8=FASTER), None, S)[2]


def test_break_even_sentence_reads_the_speedup_against_its_noise():
    cell = {"acceptance_rate": 0.91, "c": 0.57, "c_v": 1.2, "speedup": 1.11, "speedup_min": 1.10, "speedup_max": 1.15}
    text = pc.break_even_sentence(cell, 0.62, 2)
    assert "breaks even at α = 0.62" in text and "0.91, above it" in text and "faster than the plain loop" in text
    inside = pc.break_even_sentence({**cell, "speedup": 1.01, "speedup_min": 0.97, "speedup_max": 1.04}, 0.62, 2)
    assert "level with the plain loop within the noise" in inside
    below = pc.break_even_sentence({**cell, "acceptance_rate": 0.5, "speedup_min": 0.8, "speedup_max": 0.9}, 0.62, 2)
    assert "0.50, below it" in below and "slower than the plain loop" in below
    assert "no α pays" in pc.break_even_sentence(cell, float("nan"), 2)
