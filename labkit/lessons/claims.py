"""Sentences that state a comparison or a trend, written from the numbers they describe.

A notebook must never say "GP beats TPE" above a table in which TPE won. Every such sentence is built
here from the data, so it stays true in FAST mode, in full mode and after any rerun; the tests feed data
that reverses each claim and check that the sentence turns with it. Notation: docs/notation.md.

- :func:`direction` / :func:`trend`: does a quantity rise, fall or stay flat between two values?
- :func:`ranking` / :func:`who_wins`: who is best, and is the lead larger than the noise?
- :func:`peak`: where does a curve peak: inside the range or at an edge?
- :func:`overlaps` / :func:`versus_range`: does a measurement fall inside a reference's range (noise)?
- :func:`compare`: "a is above / below / about equal to b" with a tolerance.
- :func:`difference_se` / :func:`proportions_differ`: are two measured shares (acceptance, agreement) further apart
  than their sampling noise? :func:`drafted_tokens`: the count behind an acceptance in a harness row.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

__all__ = ["num", "is_missing", "direction", "trend", "ranking", "who_wins", "peak", "overlaps", "versus_range",
           "compare", "join", "difference_se", "proportions_differ", "drafted_tokens"]


def is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def num(v, spec: str = ".2f") -> str:
    """A number for a sentence ('n/a' for None / NaN)."""
    return "n/a" if is_missing(v) else format(v, spec)


def join(items: Sequence[str], word: str = "and") -> str:
    """'a', 'a and b', 'a, b and c'."""
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {word} {items[-1]}"


def direction(first: float, last: float, tol: float = 0.02) -> int:
    """-1 falling, +1 rising, 0 flat or unknown (a change within ``tol`` × max(1, |first|) is flat)."""
    if is_missing(first) or is_missing(last) or abs(last - first) <= tol * max(1.0, abs(first)):
        return 0
    return 1 if last > first else -1


def trend(first: float, last: float, what: str, tol: float = 0.02, spec: str = ".2f") -> str:
    """'what falls from a to b' / 'what rises …' / 'what stays at about a'."""
    if is_missing(first) or is_missing(last):
        return f"{what} is not measured at both ends"
    d = direction(first, last, tol)
    if d == 0:
        return f"{what} stays at about {num(first, spec)}"
    return f"{what} {'rises' if d > 0 else 'falls'} from {num(first, spec)} to {num(last, spec)}"


def difference_se(a: float, n_a: float, b: float, n_b: float) -> float:
    """One standard error of the difference of two shares, a of n_a trials and b of n_b (binomial):
    √(a(1 − a)/n_a + b(1 − b)/n_b); NaN when a count or a share is missing or a count is not positive."""
    if any(is_missing(v) for v in (a, n_a, b, n_b)) or n_a <= 0 or n_b <= 0:
        return float("nan")
    return math.sqrt(max(a * (1 - a), 0.0) / n_a + max(b * (1 - b), 0.0) / n_b)


def proportions_differ(a: float, n_a: float, b: float, n_b: float, z: float = 2.0) -> bool:
    """Are the shares a (of n_a trials) and b (of n_b) more than ``z`` standard errors of their difference apart?
    The trials are taken as independent, an approximation: tokens of one text are correlated, which widens the real
    noise of shares measured on different texts; two drafts run on the same prompts share their texts, which
    narrows the noise of their difference. False when the counts are unknown (nothing is called beyond the noise)."""
    se = difference_se(a, n_a, b, n_b)
    return not math.isnan(se) and abs(a - b) > z * se


def drafted_tokens(row) -> float:
    """Drafted tokens behind one repetition's acceptance in a row of the timing harness (a mapping or a pandas row
    with ``new_tokens`` of one repetition, ``tokens_per_step`` and ``drafted_per_step``): new tokens ÷ tokens per
    step × drafted per step. One repetition, because the repetitions of a greedy run repeat the same decisions.
    NaN when a column is missing."""
    values = [row.get(c) for c in ("new_tokens", "tokens_per_step", "drafted_per_step")]
    if any(is_missing(v) for v in values) or not float(values[1]):
        return float("nan")
    new, per_step, drafted = (float(v) for v in values)
    return new / per_step * drafted


def ranking(values: Mapping[str, float], lower_is_better: bool) -> list[str]:
    """Names from best to worst (missing values last)."""
    sign = 1.0 if lower_is_better else -1.0
    return sorted(values, key=lambda k: (is_missing(values[k]), sign * (0.0 if is_missing(values[k]) else values[k])))


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Do the ranges [a0, a1] and [b0, b1] overlap (the noise cannot tell them apart)?"""
    return min(a) <= max(b) and min(b) <= max(a)


def who_wins(values: Mapping[str, float], *, lower_is_better: bool, what: str, spec: str = ".2f",
             spreads: Mapping[str, tuple[float, float]] | None = None, rel_tol: float = 0.0,
             noise: str = "the noise") -> str:
    """Who is best, by how much, and whether the lead exceeds the noise.

    ``spreads``: a (low, high) range per name (e.g. best and worst seed); the winner is "ahead" only if its
    range does not overlap the runner-up's. Without spreads, a lead within ``rel_tol`` is called a tie.
    ``noise`` names what the ranges are (e.g. "the spread over seeds").
    """
    order = ranking(values, lower_is_better)
    best, rest = order[0], order[1:]
    word = "lowest" if lower_is_better else "highest"
    head = f"{best} has the {word} {what} ({num(values[best], spec)})"
    if not rest:
        return head + "."
    second = rest[0]
    if spreads is not None and best in spreads and second in spreads:
        tied = overlaps(spreads[best], spreads[second])
    else:
        tied = abs(values[best] - values[second]) <= rel_tol * max(abs(values[best]), abs(values[second]), 1e-12)
    others = f"; then {join([f'{k} ({num(values[k], spec)})' for k in rest[1:]])}" if rest[1:] else ""
    if tied:
        return f"{head}, but {second} ({num(values[second], spec)}) is within {noise} of it{others}."
    return f"{head}, ahead of {second} ({num(values[second], spec)}) beyond {noise}{others}."


def peak(xs: Sequence[float], ys: Sequence[float]) -> tuple[int, str]:
    """(index of the highest y, 'between the ends of the axis' | 'at the lowest end of the axis' | 'at the highest …').
    Not 'inside the range': beside a min–max that read as if the value lay inside its own noise range."""
    valid = [i for i, y in enumerate(ys) if not is_missing(y)]
    if not valid:
        raise ValueError("peak needs at least one measured value")
    i = max(valid, key=lambda j: ys[j])
    where = ("between the ends of the axis" if 0 < i < len(xs) - 1 else
             "at the lowest end of the axis" if i == 0 else "at the highest end of the axis")
    return i, where


def versus_range(value: float, low: float, high: float, *, what: str, reference: str, spec: str = ".2f") -> str:
    """'what (v) lies inside reference's range (lo-hi)' / 'is above / below it, at v / mid = r of it'."""
    if any(is_missing(v) for v in (value, low, high)):
        return f"{what} ({num(value, spec)}) cannot be compared with {reference}: a value is missing"
    mid = 0.5 * (low + high)
    if low <= value <= high:
        return f"{what} ({num(value, spec)}) lies inside {reference} ({num(low, spec)}–{num(high, spec)})"
    side = "above" if value > high else "below"
    return (f"{what} ({num(value, spec)}) lies {side} {reference} ({num(low, spec)}–{num(high, spec)}), "
            f"at {num(value / mid if mid else float('nan'))} of its middle")


def compare(a: float, b: float, *, a_name: str, b_name: str, rel_tol: float = 0.02, spec: str = ".2f") -> str:
    """'a_name (a) is above / below / about the same as b_name (b)'."""
    if is_missing(a) or is_missing(b):
        return f"{a_name} ({num(a, spec)}) and {b_name} ({num(b, spec)}) cannot be compared"
    if abs(a - b) <= rel_tol * max(abs(a), abs(b), 1e-12):
        return f"{a_name} ({num(a, spec)}) is about the same as {b_name} ({num(b, spec)})"
    return f"{a_name} ({num(a, spec)}) is {'above' if a > b else 'below'} {b_name} ({num(b, spec)})"
