"""Argument checks shared by the public API: each raises ``ValueError`` naming the parameter."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: How the sliding sums ``<c^{(i)}, y>`` may be computed (:mod:`mcacct.kernels.sliding`).
DOT_METHODS = ("auto", "direct", "fft", "prefix")
#: The privacy-loss recursions (:mod:`mcacct.kernels.recursion`).
RECURSIONS = ("auto", "scan", "blocked", "assoc", "linear")
#: The two adjacency directions: ``remove`` (y ~ P, loss ln P/Q) and ``add`` (y ~ Q, loss ln Q/P).
DIRECTIONS = ("remove", "add")


def _is_real(x: Any) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return not isinstance(x, bool)


def read_json(path: Any, what: str) -> Any:
    """The JSON content of the file ``path``; ``ValueError`` naming ``what`` (e.g. ``"events file"``) and the path when
    it cannot be read or is not valid JSON."""
    import json
    import os
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as f:
            return json.load(f)
    except OSError as err:
        raise ValueError(f"{what} {name!r} cannot be read: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} {name!r} is not valid JSON: {err}") from None
    except UnicodeDecodeError as err:  # a binary file: JSON is UTF-8 text
        raise ValueError(f"{what} {name!r} is not valid JSON/UTF-8 (byte {err.start}: {err.reason})") from None


def parse_floats(name: str, value: Any) -> tuple[float, ...]:
    """The one list parser: ``"v1,v2,..."``, a sequence, an array or a scalar, as a tuple of floats; ``ValueError``
    naming ``name`` when an item is not a number or is empty (``"0.5,0.5,"``: a stray comma is refused rather than
    guessed at). Range checks are the caller's."""
    if isinstance(value, str):
        parts = value.split(",")
        if any(not v.strip() for v in parts):
            raise ValueError(f"{name} must be a comma-separated list of numbers with no empty item; got {value!r}")
    else:
        parts = list(np.atleast_1d(np.asarray(value, dtype=object)).ravel()) if not np.isscalar(value) else [value]
    try:
        return tuple(float(v) for v in parts)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a comma-separated list of numbers; got {value!r}") from err


def interval(low: float | None = None, high: float | None = None, low_open: bool = False,
             high_open: bool = False) -> str:
    """The interval ``[low, high]`` as written in messages (``(0, 1]``, ``[1, inf)``); ``None``: unbounded."""
    lo_b = "(" if (low_open or low is None) else "["
    hi_b = ")" if (high_open or high is None) else "]"
    return f"{lo_b}{'-inf' if low is None else _num(low)}, {'inf' if high is None else _num(high)}{hi_b}"


def _num(x: Any) -> str:
    """A number as users write it: ``0.5``, ``1``, ``1e-05`` (never ``np.float64(...)``)."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        v = float(x)
        return str(int(v)) if v.is_integer() and abs(v) < 1e16 else repr(v)
    return repr(x)


def shown(value: Any) -> str:
    """``value`` for an error message: plain numbers (``nan``, ``0.5``), never a NumPy repr."""
    return _num(value)


def check_real(name: str, value: Any, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``float(value)`` after checking it is finite and inside the stated interval. Messages read
    ``"{name} must be in RANGE; got VALUE"``."""
    rng = interval(low, high, low_open, high_open)
    if not _is_real(value) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite real number in {rng}; got {shown(value)}")
    v = float(value)
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be in {rng}; got {shown(v)}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"{name} must be in {rng}; got {shown(v)}")
    return v


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``int(value)`` after checking it is an integer inside ``[low, high]``."""
    rng = interval(low, high)
    if (isinstance(value, bool) or not _is_real(value) or not math.isfinite(float(value))
            or float(value) != int(float(value))):
        raise ValueError(f"{name} must be an integer in {rng}; got {shown(value)}")
    v = int(value) if isinstance(value, (int, np.integer)) else int(float(value))
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer in {rng}; got {v}")
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


# -- arguments of the schemes' public methods (sampling, losses) ---------------------------------------------
KERNEL_DTYPES = ("float64", "float32")


def is_traced(value: Any) -> bool:
    """Whether ``value`` is a JAX tracer (an abstract value inside ``jit``/``vmap``): its *shape* is known,
    its *values* are not, so value checks are skipped for it (they ran on the concrete caller's side)."""
    import jax
    return isinstance(value, jax.core.Tracer)


def check_choice(name: str, value: Any, choices: tuple) -> Any:
    """``value`` if it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}; got {value!r}")
    return value


def check_sigma(name: str, value: Any) -> Any:
    """A noise multiplier: finite and in ``(0, inf)`` (every entry, for an array). Returned unchanged
    (so jit caches keep seeing the caller's type); a traced value passes (its shape only is checked: scalar
    or an array of noise multipliers)."""
    if is_traced(value):
        return value
    try:
        arr = np.asarray(value)
    except Exception as err:  # noqa: BLE001 - anything that is not array-like
        raise ValueError(f"{name} must be a finite real number in (0, inf); got {value!r}") from err
    if arr.dtype.kind not in "fiu" or arr.size == 0:
        raise ValueError(f"{name} must be a finite real number in (0, inf); got {value!r}")
    a = arr.astype(np.float64)
    if not np.all(np.isfinite(a) & (a > 0)):
        shown = float(a) if a.ndim == 0 else a[~(np.isfinite(a) & (a > 0))][:3].tolist()
        raise ValueError(f"{name} must be a finite real number in (0, inf); got {shown!r}")
    return value


def check_outputs(name: str, y: Any, iterations: int):
    """Mechanism outputs ``y`` of shape ``(..., iterations)`` as a floating JAX array (integer input is
    converted to float64: an integer array would round ``c_col`` in the sliding dot products)."""
    import jax.numpy as jnp
    if not is_traced(y):
        try:
            y = jnp.asarray(y)
        except Exception as err:  # noqa: BLE001
            raise ValueError(f"{name} must be a real array of shape (..., {iterations}); got {y!r}") from err
    if y.ndim < 1 or y.shape[-1] != iterations:
        raise ValueError(f"{name} must have shape (..., {iterations}) (last axis = iterations = {iterations}); "
                         f"got shape {tuple(y.shape)}")
    kind = np.dtype(y.dtype).kind
    if kind in "iub":
        y = y.astype(jnp.float64)
    elif kind != "f":
        raise ValueError(f"{name} must be a real (floating) array; got dtype {y.dtype}")
    return y


def check_kernel_dtype(name: str, dtype: Any):
    """A kernel precision: float64 or float32 (as a ``numpy.dtype``)."""
    try:
        dt = np.dtype(dtype)
    except TypeError as err:
        raise ValueError(f"{name} must be one of {KERNEL_DTYPES}; got {dtype!r}") from err
    if dt.name not in KERNEL_DTYPES:
        raise ValueError(f"{name} must be one of {KERNEL_DTYPES}; got {dt.name!r}")
    return dt


_UNSET = object()


def check_call(scheme: Any, *, strategy: Any = _UNSET, sigma: Any = _UNSET, y: Any = _UNSET,
               num_samples: Any = _UNSET, positive: Any = _UNSET, dtype: Any = _UNSET, dot_method: Any = _UNSET,
               recursion: Any = _UNSET):
    """Validate the arguments of a scheme's public sampling / loss method (only those given):
    ``scheme.check_strategy(strategy)``, ``sigma`` finite ``> 0``, ``y`` of shape ``(..., iterations)``,
    ``num_samples >= 1``, ``positive`` a bool, ``dtype`` float64/float32, ``dot_method`` and ``recursion``
    among the known methods. Returns ``y`` as a floating array (``None`` when not given)."""
    if strategy is not _UNSET:
        scheme.check_strategy(strategy)  # every scheme checks the strategy's type first
    if sigma is not _UNSET:
        check_sigma("sigma", sigma)
    if num_samples is not _UNSET:
        check_count("num_samples", num_samples)
    if positive is not _UNSET:
        check_bool("positive", positive)
    if dtype is not _UNSET:
        check_kernel_dtype("dtype", dtype)
    if dot_method is not _UNSET or recursion is not _UNSET:
        if dot_method is not _UNSET:
            check_choice("dot_method", dot_method, DOT_METHODS)
        if recursion is not _UNSET:
            check_choice("recursion", recursion, RECURSIONS)
    if y is not _UNSET:
        return check_outputs("y", y, scheme.iterations)
    return None


# -- PLD accountant (mcacct.pld) --------------------------------------------------------------------------
def is_real_number(x: object) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def check_probability(name: str, q: float) -> float:
    if not is_real_number(q) or not math.isfinite(q) or not 0.0 < q <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {q!r}")
    return float(q)


def check_positive(name: str, x: float) -> float:
    if not is_real_number(x) or not math.isfinite(x) or x <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {x!r}")
    return float(x)


def check_integer(name: str, n: int, lo: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {n!r}")
    return int(n)


def check_epsilon(epsilon: float) -> float:
    if not is_real_number(epsilon) or not math.isfinite(epsilon) or epsilon < 0:
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    return float(epsilon)


def check_delta(delta: float) -> float:
    if not is_real_number(delta) or not math.isfinite(delta) or not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return float(delta)


def check_value_interval(h: float) -> float:
    if not is_real_number(h) or not math.isfinite(h) or not 0.0 < h <= 0.1:
        raise ValueError(f"value_discretization_interval must be in (0, 0.1], got {h!r}")
    return float(h)


def check_discretization(method: str) -> str:
    if method not in ("connect_dots", "round_up"):
        raise ValueError(
            f"discretization must be 'connect_dots' or 'round_up', got {method!r}"
        )
    return method
