"""labkit.lessons.claims: every sentence turns when the data reverses."""
import math

import pytest

from labkit.lessons import claims


def test_trend_and_direction_follow_the_numbers():
    assert claims.trend(1.0, 0.5, "c") == "c falls from 1.00 to 0.50"
    assert claims.trend(0.5, 1.0, "c") == "c rises from 0.50 to 1.00"
    assert claims.trend(1.0, 1.01, "c") == "c stays at about 1.00"
    assert claims.direction(1.0, 0.5) == -1 and claims.direction(0.5, 1.0) == 1 and claims.direction(1, math.nan) == 0
    assert "not measured" in claims.trend(None, 1.0, "c")


def test_who_wins_names_the_winner_and_turns_when_the_numbers_do():
    gp_wins = {"GPSampler": 0.40, "TPESampler": 1.74, "RandomSampler": 7.5}
    tpe_wins = {"GPSampler": 2.00, "TPESampler": 1.74, "RandomSampler": 7.5}
    assert claims.who_wins(gp_wins, lower_is_better=True, what="median best").startswith("GPSampler has the lowest")
    assert claims.who_wins(tpe_wins, lower_is_better=True, what="median best").startswith("TPESampler has the lowest")
    assert claims.who_wins(tpe_wins, lower_is_better=False, what="x").startswith("RandomSampler has the highest")
    # overlapping spreads: the winner is not "ahead"
    tied = claims.who_wins(tpe_wins, lower_is_better=True, what="median best",
                           spreads={"GPSampler": (1.0, 3.0), "TPESampler": (1.5, 2.5), "RandomSampler": (6, 9)})
    assert "GPSampler (2.00) is within the noise of it; then RandomSampler (7.50)" in tied and "ahead" not in tied
    apart = claims.who_wins(tpe_wins, lower_is_better=True, what="median best",
                            spreads={"GPSampler": (1.9, 3.0), "TPESampler": (1.5, 1.8), "RandomSampler": (6, 9)})
    assert "ahead of GPSampler (2.00) beyond the noise" in apart
    assert "within the noise" in claims.who_wins({"a": 1.0, "b": 1.01}, lower_is_better=True, what="v", rel_tol=0.02)


def test_peak_inside_or_at_an_edge():
    assert claims.peak([0, 1, 2], [1.0, 2.0, 1.5]) == (1, "between the ends of the axis")
    assert claims.peak([0, 1, 2], [3.0, 2.0, 1.5]) == (0, "at the lowest end of the axis")
    assert claims.peak([0, 1, 2], [1.0, 2.0, 2.5]) == (2, "at the highest end of the axis")
    assert claims.peak([0, 1, 2], [math.nan, 2.0, 1.0])[0] == 1
    with pytest.raises(ValueError):
        claims.peak([0], [math.nan])


def test_ranges_and_comparisons():
    assert claims.overlaps((1, 2), (1.5, 3)) and not claims.overlaps((1, 2), (2.1, 3))
    inside = claims.versus_range(1.25, 1.2, 1.3, what="live", reference="the grid's range")
    below = claims.versus_range(1.0, 1.2, 1.3, what="live", reference="the grid's range")
    above = claims.versus_range(1.5, 1.2, 1.3, what="live", reference="the grid's range")
    assert "lies inside" in inside and "lies below" in below and "lies above" in above
    assert claims.compare(1.0, 2.0, a_name="a", b_name="b") == "a (1.00) is below b (2.00)"
    assert claims.compare(2.0, 1.0, a_name="a", b_name="b") == "a (2.00) is above b (1.00)"
    assert "about the same" in claims.compare(1.0, 1.01, a_name="a", b_name="b")
    assert claims.join(["a", "b", "c"]) == "a, b and c" and claims.join(["a"]) == "a"


def test_proportions_differ_reads_the_sampling_noise():
    se = claims.difference_se(0.889, 323, 0.904, 323)                 # 07's acceptance by source, full mode
    assert se == pytest.approx(math.sqrt(0.889 * 0.111 / 323 + 0.904 * 0.096 / 323))
    assert not claims.proportions_differ(0.889, 323, 0.904, 323)      # 1.5 points, one SE 2.4: within the noise
    assert claims.proportions_differ(0.74, 3000, 0.70, 3000)          # the same gap on ten times the tokens is not
    assert not claims.proportions_differ(0.9, None, 0.5, 100)         # no count: nothing beyond the noise
    assert math.isnan(claims.difference_se(0.9, 0, 0.5, 100))
