"""Argument checks of one shape: a clear error that names the argument, raised before anything is changed.

A value of the wrong type raises ``TypeError``, a value out of range ``ValueError``; both say what was expected
and what was given. ``bool`` is never accepted as a number (``True`` is an ``int`` in Python).
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import fields

__all__ = ["check_int", "check_number", "check_probability", "check_choice", "check_folder_name", "record_from",
           "take_options", "with_defaults"]


def _range_text(low, high) -> str:
    if low is not None and high is not None:
        return f" in [{low}, {high}]"
    if low is not None:
        return f" >= {low}"
    return f" <= {high}" if high is not None else ""


def check_int(name: str, value, low: int | None = None, high: int | None = None) -> int:
    """``value`` if it is an integer in [low, high] (either bound may be None)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer{_range_text(low, high)}, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer{_range_text(low, high)}, got {value!r}")
    return value


def check_number(name: str, value, low: float | None = None, high: float | None = None, *,
                 strict_low: bool = False) -> float:
    """``value`` as a float if it is a real number (not NaN) in [low, high] (``strict_low``: > low)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise TypeError(f"{name} must be a number{_range_text(low, high)}, got {value!r}")
    below = low is not None and (value <= low if strict_low else value < low)
    if below or (high is not None and value > high):
        bound = f" > {low}" if strict_low and high is None else _range_text(low, high)
        raise ValueError(f"{name} must be a number{bound}, got {value!r}")
    return float(value)


def check_probability(name: str, value) -> float:
    """``value`` as a float if it is a number in [0, 1]."""
    return check_number(name, value, 0.0, 1.0)


def check_choice(name: str, value, choices: Iterable):
    """``value`` if it is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


def check_folder_name(name: str, value) -> str:
    """``value`` if it names one folder (letters, digits, ``_``, ``.``, ``-``; not empty, no ``/``, not ``..``):
    a model's name becomes ``data/models/<name>``, and an empty one would be ``data/models`` itself."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value):
        raise ValueError(f"{name} must be a folder name (letters, digits, '_', '.', '-'; not empty, no '/'), "
                         f"got {value!r}")
    return value


def record_from(name: str, record, cls: type, options: dict):
    """``record`` (a ``cls``), or a ``cls`` built from ``options``, its fields by name (the keyword form a function
    kept when its settings became one record). Both given: a ValueError naming them; a name that is no field of
    ``cls``: a TypeError naming it; ``record`` of another type: a TypeError naming ``name``."""
    if record is None:
        known = {f.name for f in fields(cls)}
        for key in options:
            if key not in known:
                raise TypeError(f"unexpected keyword argument {key!r} (neither a parameter nor a field of "
                                f"{cls.__name__})")
        return cls(**options)
    if not isinstance(record, cls):
        raise TypeError(f"{name} must be a {cls.__name__}, got {type(record).__name__}")
    if options:
        raise ValueError(f"give {name} or {' / '.join(options)}, not both")
    return record


def take_options(where: str, options: dict, allowed: tuple[str, ...]) -> dict:
    """``options`` checked against the keyword names ``allowed`` (a TypeError naming the first unknown one, as
    Python's own); returns them unchanged. ``where``: the function's name, for the message."""
    for name in options:
        if name not in allowed:
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}")
    return options


def with_defaults(where: str, options: dict, defaults: dict) -> dict:
    """``defaults`` updated by ``options``, each checked to be one of its names (:func:`take_options`)."""
    return {**defaults, **take_options(where, options, tuple(defaults))}
