"""Notebook 04's sentences: built from synthetic grids, each claim reversed by the data must turn."""
import pytest

from labkit.lessons import playground_claims as pc
from labkit.measure.grid import FORMAT, PlaygroundGrid, Setting

RATIOS, THRESHOLDS = (0.25, 0.5, 0.75), (0.0, 0.5, 0.9)


def make_grid(speedup, acceptance=None, drafted=None, c=None, noise=0.02, name="default", c_v=1.05):
    """A grid of 3 ratios x 3 thresholds x max draft 4 x both policies; each quantity a function (ratio i,
    threshold j) on the adaptive slice (the static one is 0.5x slower, out of every comparison)."""
    acceptance = acceptance or (lambda i, j: 0.9 - 0.2 * i + 0.03 * j)
    drafted = drafted or (lambda i, j: 3.0 - j)
    c = c or (lambda i, j: 0.8 - 0.25 * i)
    cells = []
    for i, r in enumerate(RATIOS):
        for j, t in enumerate(THRESHOLDS):
            for policy in ("static", "adaptive"):
                sp, n = speedup(i, j) - (0.5 if policy == "static" else 0.0), noise   # static: far behind
                d, a = drafted(i, j), acceptance(i, j)
                cells.append({"ratio": r, "threshold": t, "max_draft": 4, "policy": policy, "acceptance_rate": a,
                              "tokens_per_step": 1 + a * d, "drafted_per_step": d, "speedup": sp,
                              "speedup_min": sp - n, "speedup_max": sp + n, "speedup_repeats": [sp - n, sp, sp + n],
                              "analytic_speedup": sp * 1.05, "c": c(i, j), "c_v": c_v, "c_v_forward": 1.1,
                              "ms_per_token": 5 / sp, "plain_ms_per_token": 5.0})
    data = {"format": FORMAT, "model": name, "n_layers": 4, "ratios": [{"ratio": r, "skip": {}} for r in RATIOS],
            "cells": cells, "noise": {"median_relative_spread": 0.04}, "command": "python -m labkit.playground"}
    return PlaygroundGrid(data, name=name)


S = Setting(0.5, 0.5, 4, "adaptive")
HUMP = lambda i, j: [1.1, 1.4, 1.2][i] + 0.01 * j            # noqa: E731  peak at 0.5
RISING = lambda i, j: [1.1, 1.2, 1.4][i]                      # noqa: E731  peak at the highest ratio
FALLING = lambda i, j: [1.4, 1.2, 1.1][i]                     # noqa: E731


def test_peak_answer_follows_the_curve():
    assert "peaks at skip ratio 0.500" in pc.peak_answer(make_grid(HUMP), S)
    assert "Past 0.500" in pc.peak_answer(make_grid(HUMP), S)
    rising = pc.peak_answer(make_grid(RISING), S)
    assert "peaks at skip ratio 0.750" in rising and "no fall yet" in rising
    falling = pc.peak_answer(make_grid(FALLING), S)
    assert "peaks at skip ratio 0.250" in falling and "no rise" in falling
    assert "accepted / drafted falls" in falling
    assert "accepted / drafted rises" in pc.peak_answer(make_grid(HUMP, acceptance=lambda i, j: 0.5 + 0.2 * i), S)


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
    assert "highest at threshold 0 " in text and "not where accepted / drafted is highest (0.95 at threshold 0.9" in text
    # both highest at 0.5: the sentence says so, and what happens above it
    together = make_grid(lambda i, j: [1.1, 1.5, 1.2][j], acceptance=lambda i, j: [0.6, 0.95, 0.94][j])
    text = pc.threshold_answer(together, S)
    assert "which is also (within 0.01) where accepted / drafted is highest" in text and "only shortens" in text


def test_verify_cost_sentence_reports_the_measured_c_v():
    below = pc.verify_cost_sentence(make_grid(HUMP, c_v=0.9))
    assert "c_v = 0.90–0.90" in below and "below 1 does not mean" in below
    assert "below 1" not in pc.verify_cost_sentence(make_grid(HUMP, c_v=1.1))


def test_twin_answer_and_best_found():
    twin = make_grid(lambda i, j: 0.8, acceptance=lambda i, j: 0.4, name="plain")
    text = pc.twin_answer(make_grid(HUMP), twin, S)
    assert "stays below 1 beyond the noise" in text and "keeps less of its agreement" in text
    good_twin = make_grid(lambda i, j: 1.3, name="plain")
    assert "beats plain decoding beyond the noise" in pc.twin_answer(make_grid(HUMP), good_twin, S)
    near_one = make_grid(lambda i, j: 1.01, name="plain")
    assert "within the noise of plain decoding" in pc.twin_answer(make_grid(HUMP), near_one, S)
    clear = pc.best_found_sentence(make_grid(lambda i, j: 1.0 + 0.1 * i + 0.3 * (i == 2 and j == 2)))
    assert "ahead beyond the noise" in clear
    crowded = pc.best_found_sentence(make_grid(HUMP, noise=0.2))
    assert "cannot rank it above them" in crowded


def test_live_sentence_inside_or_outside_the_grid_range():
    cell = {"speedup": 1.3, "speedup_min": 1.25, "speedup_max": 1.35, "plain_ms_per_token": 5.0}
    live = {"speedup": 1.3, "speedup_min": 1.2, "speedup_max": 1.4, "plain_ms_per_token": 6.0}
    assert "lies inside" in pc.live_sentence(live, cell) and "behaves here as it did" in pc.live_sentence(live, cell)
    slow = dict(live, speedup=1.04)
    assert "lies below" in pc.live_sentence(slow, cell) and "0.80 of its middle" in pc.live_sentence(slow, cell)


def test_summary_follows_the_grid():
    bullets = pc.summary(make_grid(HUMP), make_grid(lambda i, j: 0.9, name="plain"), S)
    assert "peaks at skip ratio 0.500 (inside the range)" in bullets[0]
    assert len(bullets) == 4 and "`plain` peaks at 0.90×" in bullets[2]
    apart = make_grid(lambda i, j: [1.5, 1.3, 1.1][j], acceptance=lambda i, j: [0.6, 0.8, 0.95][j])
    assert "is not the one with the highest" in pc.summary(apart, None, S)[1]
