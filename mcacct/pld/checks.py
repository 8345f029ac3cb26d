"""The argument checks of the PLD accountant: those of :mod:`mcacct.validate`, with NumPy scalars turned into
Python numbers first, so that a message reads ``got nan`` or ``got 2.0``, never ``got np.float64(nan)``."""

from __future__ import annotations

from typing import Any

import numpy as np

from mcacct import validate

__all__ = ["plain", "check_delta", "check_discretization", "check_epsilon", "check_integer", "check_positive",
           "check_probability", "check_value_interval", "is_real_number"]

is_real_number = validate.is_real_number


def plain(x: Any) -> Any:
    """``x`` as a Python number if it is a NumPy scalar (``np.float64(0.5)`` -> ``0.5``), else unchanged."""
    return x.item() if isinstance(x, np.generic) else x


def check_probability(name: str, q: Any) -> float:
    return validate.check_probability(name, plain(q))


def check_positive(name: str, x: Any) -> float:
    return validate.check_positive(name, plain(x))


def check_integer(name: str, n: Any, lo: int = 1) -> int:
    return validate.check_integer(name, plain(n), lo)


def check_epsilon(epsilon: Any) -> float:
    return validate.check_epsilon(plain(epsilon))


def check_delta(delta: Any) -> float:
    return validate.check_delta(plain(delta))


def check_value_interval(h: Any) -> float:
    return validate.check_value_interval(plain(h))


def check_discretization(method: Any) -> str:
    return validate.check_discretization(plain(method))
