"""Checks of a number a user, a flag or a file gave: one rule each, and one wording of its error.

    positive_int(name, value)         1, 2, ...   "NAME must be a positive integer, got VALUE"
    non_negative_int(name, value)     0, 1, ...   "NAME must be a non-negative integer, got VALUE"
    positive_number(name, value)      > 0         "NAME must be positive, got VALUE"
    non_negative_number(name, value)  >= 0        "NAME must be >= 0, got VALUE"

An integer is a Python `int`, never a bool, an integral float or a numpy integer (a value kept in a
config is written to JSON, which numpy's integers are not); a number is an int or a float, never a
bool nor NaN (infinity passes). `name` is the message's whole subject, so a caller
that reads a file names it there ("config.json: num_hidden_layers"). Each returns the value, so a
caller checks and keeps it in one line; a number comes back as a float.
"""

from __future__ import annotations

import math


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def positive_int(name: str, value, *, allow_none: bool = False):
    """`value` if it is an integer >= 1 (or None, with `allow_none`); else ValueError."""
    if value is None and allow_none:
        return None
    if not _is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def non_negative_int(name: str, value):
    """`value` if it is an integer >= 0; else ValueError."""
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def positive_number(name: str, value) -> float:
    """float(`value`) if it is a number > 0; else ValueError."""
    if not _is_number(value) or value <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return float(value)


def non_negative_number(name: str, value) -> float:
    """float(`value`) if it is a number >= 0; else ValueError."""
    if not _is_number(value) or value < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return float(value)
