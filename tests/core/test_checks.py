"""labkit.core.checks: one shape for argument errors. Wrong type: TypeError; out of range: ValueError; both name
the argument and show the value; bool is never a number; NaN is never a number; bounds are inclusive unless
``strict_low``."""
import math
from dataclasses import dataclass

import pytest

from labkit.core.checks import (
    check_choice,
    check_int,
    check_number,
    check_probability,
    record_from,
    take_options,
    with_defaults,
)


def test_check_int():
    assert check_int("n", 3) == 3 and check_int("n", 0, 0) == 0 and check_int("n", 5, 0, 5) == 5   # inclusive
    assert check_int("n", -7) == -7                                                              # no bounds
    for bad in (True, False, 2.0, "3", None):
        with pytest.raises(TypeError, match=r"^n must be an integer"):
            check_int("n", bad, 0)
    with pytest.raises(ValueError, match=r"^budget must be an integer >= 1, got 0$"):
        check_int("budget", 0, 1)
    with pytest.raises(ValueError, match=r"^layer must be an integer in \[0, 3\], got 4$"):
        check_int("layer", 4, 0, 3)
    with pytest.raises(ValueError, match=r"^k must be an integer <= 2, got 3$"):
        check_int("k", 3, None, 2)


def test_check_number():
    assert check_number("x", 1) == 1.0 and isinstance(check_number("x", 1), float)
    assert check_number("x", 0.0, 0.0, 1.0) == 0.0 and check_number("x", 1.0, 0.0, 1.0) == 1.0    # inclusive
    assert check_number("x", -math.inf) == -math.inf                                            # no bounds
    for bad in (True, "0.5", None, float("nan"), [1.0]):
        with pytest.raises(TypeError, match=r"^rate must be a number"):
            check_number("rate", bad, 0.0)
    with pytest.raises(ValueError, match=r"^rate must be a number in \[0.0, 1.0\], got 1.5$"):
        check_number("rate", 1.5, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"^rate must be a number >= 0, got -0.1$"):
        check_number("rate", -0.1, 0)
    with pytest.raises(ValueError, match=r"^cap must be a number <= 2, got 3$"):
        check_number("cap", 3, None, 2)


def test_check_number_strict_low():
    assert check_number("t", 1e-9, 0.0, strict_low=True) == 1e-9
    with pytest.raises(ValueError, match=r"^t must be a number > 0.0, got 0.0$"):
        check_number("t", 0.0, 0.0, strict_low=True)
    assert check_number("t", 0.0, 0.0) == 0.0                                       # not strict: 0 is allowed
    with pytest.raises(ValueError, match=r"^t must be a number"):
        check_number("t", 0.0, 0.0, 1.0, strict_low=True)                           # strict with a high bound too
    assert check_number("t", 1.0, 0.0, 1.0, strict_low=True) == 1.0                 # the high bound stays inclusive


def test_check_probability():
    assert check_probability("p", 0) == 0.0 and check_probability("p", 1) == 1.0 and check_probability("p", 0.3) == 0.3
    for bad in (-1e-9, 1.0 + 1e-9, math.inf):
        with pytest.raises(ValueError, match=r"^p must be a number in \[0.0, 1.0\]"):
            check_probability("p", bad)
    for bad in (True, float("nan"), "0.5"):
        with pytest.raises(TypeError, match=r"^p must be a number"):
            check_probability("p", bad)


def test_check_choice():
    assert check_choice("mode", "a", ("a", "b")) == "a"
    assert check_choice("mode", 2, iter([1, 2])) == 2                               # any iterable, read once
    with pytest.raises(ValueError, match=r"^mode must be one of 'a', 'b'; got 'c'$"):
        check_choice("mode", "c", ["a", "b"])
    with pytest.raises(ValueError, match="mode must be one of"):
        check_choice("mode", "A", ["a", "b"])                                       # no case folding


@dataclass(frozen=True)
class Plan:
    n: int = 1
    name: str = ""


def test_options_by_name():
    assert take_options("f", {"a": 1}, ("a", "b")) == {"a": 1}
    with pytest.raises(TypeError, match=r"f\(\) got an unexpected keyword argument 'c'"):
        take_options("f", {"c": 1}, ("a", "b"))
    assert list(with_defaults("f", {"b": 5}, {"a": 1, "b": 2}).items()) == [("a", 1), ("b", 5)]    # the table's order
    assert record_from("plan", None, Plan, {"n": 3}) == Plan(3)
    assert record_from("plan", Plan(2), Plan, {}) == Plan(2)
    with pytest.raises(ValueError, match="give plan or n, not both"):
        record_from("plan", Plan(2), Plan, {"n": 3})
    with pytest.raises(TypeError, match="'m'"):
        record_from("plan", None, Plan, {"m": 3})
    with pytest.raises(TypeError, match="plan must be a Plan"):
        record_from("plan", {"n": 3}, Plan, {})
