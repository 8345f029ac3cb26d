"""Argument checks shared by the public API: each raises ``ValueError`` naming the parameter."""

from __future__ import annotations

import math
from typing import Any


def _is_real(x: Any) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return not isinstance(x, bool)


def check_real(name: str, value: Any, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``float(value)`` after checking it is finite and inside the stated interval."""
    lo_b = "(" if low_open else "["
    hi_b = ")" if (high_open or high is None) else "]"
    rng = f"{lo_b}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi_b}"
    if not _is_real(value) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite real number in {rng}; got {value!r}")
    v = float(value)
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must lie in {rng}; got {v!r}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"{name} must lie in {rng}; got {v!r}")
    return v


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``int(value)`` after checking it is an integer inside ``[low, high]``."""
    rng = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
    if isinstance(value, bool) or not _is_real(value) or float(value) != int(float(value)):
        raise ValueError(f"{name} must be an integer in {rng}; got {value!r}")
    v = int(float(value))
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer in {rng}; got {v!r}")
    return v


def check_bool(name: str, value: Any) -> bool:
    """Return ``bool(value)`` after checking it is a boolean."""
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise ValueError(f"{name} must be a bool; got {value!r}")
    return bool(value)


def check_prob(name: str, value: Any) -> float:
    """A probability in ``(0, 1]``."""
    return check_real(name, value, low=0.0, high=1.0, low_open=True)


def check_count(name: str, value: Any) -> int:
    """An integer ``>= 1``."""
    return check_int(name, value, low=1)


def check_fields(obj: Any, **checkers) -> None:
    """Validate and normalise fields of a frozen dataclass in ``__post_init__``:
    ``check_fields(self, sampling_prob=check_prob, iterations=check_count, ...)``."""
    for name, checker in checkers.items():
        object.__setattr__(obj, name, checker(name, getattr(obj, name)))
