"""Argument checks shared by the public API: each raises ``ValueError`` naming the parameter.

One family, one wording: :func:`check_real`, :func:`check_int` and their shorthands :func:`check_prob` (a
probability in ``(0, 1]``) and :func:`check_count` (an integer ``>= 1``), plus :func:`check_bool` and
:func:`check_choice`. Their messages read ``"NAME must be in RANGE; got VALUE"`` (``"NAME must be a finite real
number in RANGE; got VALUE"`` or ``"NAME must be an integer in RANGE; got VALUE"`` for a value of the wrong kind),
with ranges written by :func:`interval` and values by :func:`shown`. By default a number's text is accepted (the
command line passes ``"0.5"``) and converted; ``strict=True`` accepts numbers only (``int``, ``float``, NumPy
scalars; for :func:`check_int` integers only), for a caller that keeps the value as given (the PLD specs).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

#: How the sliding sums ``<c^{(i)}, y>`` may be computed (:mod:`mcacct.kernels.sliding`).
DOT_METHODS = ("auto", "direct", "fft", "prefix")
#: The privacy-loss recursions (:mod:`mcacct.kernels.recursion`).
RECURSIONS = ("auto", "scan", "blocked", "assoc", "linear", "stepwise")
#: The loss kernels of a problem's ladder (:mod:`mcacct.engine.kernel_choice`).
LOSS_KERNELS = ("auto", "fused", "unfused")
#: The two adjacency directions: ``remove`` (y ~ P, loss ln P/Q) and ``add`` (y ~ Q, loss ln Q/P).
DIRECTIONS = ("remove", "add")


def is_number(x: Any) -> bool:
    """Whether ``x`` is a real number as a Python or NumPy scalar.

    ``int``, ``float``, ``np.integer`` or ``np.floating``; never a bool, text or an array."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def is_real_scalar(x: Any) -> bool:
    """:func:`is_number`, or a 0-d array (NumPy or JAX) of an integer or float dtype.

    Never a bool, text or ``None``."""
    if is_number(x):
        return True
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    try:
        return shape == () and dtype is not None and np.dtype(dtype).kind in "iuf"
    except TypeError:
        return False


def _as_float(x: Any, strict: bool) -> float | None:
    """``float(x)``, or ``None`` when ``x`` is not a real number (a bool, or with ``strict`` anything but
    :func:`is_number`); may be non-finite."""
    if isinstance(x, (bool, np.bool_)) or (strict and not is_number(x)):
        return None
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond the float range
        return None


def _as_int(x: Any, strict: bool) -> int | None:
    """``x`` as an ``int`` when it is one (a Python or NumPy integer; without ``strict`` also an integral float
    or the text of an integer, read exactly), else ``None``."""
    if isinstance(x, (bool, np.bool_)):
        return None
    if isinstance(x, (int, np.integer)):
        return int(x)
    if strict:
        return None
    if isinstance(x, str):
        try:
            return int(x.strip())  # exact: "9223372036854775807" would round through float
        except ValueError:
            pass
    f = _as_float(x, strict=False)
    return int(f) if f is not None and math.isfinite(f) and f.is_integer() else None


def read_json(path: Any, what: str) -> Any:
    """The JSON content of the file ``path``.

    Parameters
    ----------
    path : str or os.PathLike
        The file.
    what : str
        What the file is, for messages (e.g. ``"events file"``).

    Returns
    -------
    object

    Raises
    ------
    ValueError
        Naming ``what`` and the path, when the file cannot be read or is not valid JSON.
    """
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
    except RecursionError:  # e.g. 100,000 nested "[": deeper than the parser's stack
        raise ValueError(f"{what} {name!r} nests arrays or objects deeper than JSON files of mcacct can "
                         "(a few hundred levels)") from None


def parse_floats(name: str, value: Any) -> tuple[float, ...]:
    """The one list parser: ``"v1,v2,..."``, a sequence, an array or a scalar, as a tuple of floats.

    Range checks are the caller's.

    Parameters
    ----------
    name : str
        The parameter's name, for messages.
    value : str, sequence, array or scalar

    Returns
    -------
    tuple of float

    Raises
    ------
    ValueError
        Naming ``name`` when an item is not a number or is empty (``"0.5,0.5,"``: a stray comma is refused rather
        than guessed at).
    """
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
               low_open: bool = False, high_open: bool = False, strict: bool = False) -> float:
    """Return ``float(value)`` after checking it is finite and inside the stated interval.

    Messages read ``"{name} must be in RANGE; got VALUE"``.

    Parameters
    ----------
    name : str
        The parameter's name, for messages.
    value : object
    low, high : float or None, optional
        The interval's ends (default ``None``: unbounded); ``low_open``, ``high_open`` exclude them.
    low_open, high_open, strict : bool, optional
        ``strict``: numbers only (module docstring). All default False.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``value`` is not a finite real number in the interval.
    """
    rng = interval(low, high, low_open, high_open)
    v = _as_float(value, strict)
    if v is None or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite real number in {rng}; got {shown(value)}")
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be in {rng}; got {shown(v)}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"{name} must be in {rng}; got {shown(v)}")
    return v


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None,
              strict: bool = False) -> int:
    """Return ``int(value)`` after checking it is an integer inside ``[low, high]``.

    Parameters
    ----------
    name : str
        The parameter's name, for messages.
    value : object
    low, high : int or None, optional
        The interval's ends (default ``None``: unbounded).
    strict : bool, optional
        A Python or NumPy integer only (``2.0`` and ``"2"`` refused); default False.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        If ``value`` is not an integer in ``[low, high]``.
    """
    rng = interval(low, high)
    v = _as_int(value, strict)
    if v is None:  # a float as written (2.0, not 2: refused as a float)
        got = repr(float(value)) if isinstance(value, (float, np.floating)) else shown(value)
        raise ValueError(f"{name} must be an integer in {rng}; got {got}")
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer in {rng}; got {v}")
    return v


def check_bool(name: str, value: Any) -> bool:
    """Return ``bool(value)`` after checking it is a boolean."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a bool; got {value!r}")
    return bool(value)


def check_prob(name: str, value: Any, *, strict: bool = False) -> float:
    """A probability in ``(0, 1]``."""
    return check_real(name, value, low=0.0, high=1.0, low_open=True, strict=strict)


def check_count(name: str, value: Any, *, strict: bool = False) -> int:
    """An integer ``>= 1``."""
    return check_int(name, value, low=1, strict=strict)


def check_fields(obj: Any, **checkers) -> None:
    """Validate and normalise fields of a frozen dataclass in ``__post_init__``.

    ``check_fields(self, sampling_prob=check_prob, iterations=check_count, ...)``."""
    for name, checker in checkers.items():
        object.__setattr__(obj, name, checker(name, getattr(obj, name)))


# -- arguments of the schemes' public methods (sampling, losses) ---------------------------------------------
KERNEL_DTYPES = ("float64", "float32")


def is_traced(value: Any) -> bool:
    """Whether ``value`` is a JAX tracer (an abstract value inside ``jit``/``vmap``).

    Its *shape* is known, its *values* are not, so value checks are skipped for it (they ran on the concrete
    caller's side)."""
    import jax
    return isinstance(value, jax.core.Tracer)


def check_counts(name: str, value: Any, shape: tuple, upper: int):
    """``value``: an integer array of ``shape`` with entries in ``[0, upper]``.

    The counts of other examples drawn per iteration, e.g. truncated b-min-sep's ``r``; values checked unless
    traced. Returns it as an array."""
    import jax.numpy as jnp
    if not is_traced(value):
        try:
            value = jnp.asarray(value)
        except Exception as err:  # noqa: BLE001
            raise ValueError(f"{name} must be an integer array of shape {tuple(shape)}; got {value!r}") from err
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{name} must have the shape of y, {tuple(shape)}; got {tuple(value.shape)}")
    if np.dtype(value.dtype).kind not in "iu":
        raise ValueError(f"{name} must be an integer array (counts of other examples); got dtype {value.dtype}")
    if not is_traced(value) and value.size:
        lo, hi = int(jnp.min(value)), int(jnp.max(value))
        if lo < 0 or hi > upper:
            raise ValueError(f"{name} (other examples drawn per iteration) must be in [0, dataset_size - 1] = "
                             f"[0, {upper}]; got values in [{lo}, {hi}]")
    return value


def check_choice(name: str, value: Any, choices: tuple) -> Any:
    """``value`` if it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}; got {value!r}")
    return value


def check_sigma(name: str, value: Any) -> Any:
    """A noise multiplier: finite and in ``(0, inf)`` (every entry, for an array).

    Returned unchanged (so jit caches keep seeing the caller's type); a traced value passes (its shape only is
    checked: scalar or an array of noise multipliers)."""
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
    """Mechanism outputs ``y`` of shape ``(..., iterations)`` as a floating JAX array.

    Integer input is converted to float64: an integer array would round ``c_col`` in the sliding dot products."""
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
               num_samples: Any = _UNSET, dtype: Any = _UNSET, dot_method: Any = _UNSET,
               recursion: Any = _UNSET):
    """Validate the arguments of a scheme's public sampling / loss method (only those given).

    Parameters
    ----------
    scheme : Scheme
        Its ``check_strategy(strategy)`` checks ``strategy``; ``y`` must have shape ``(..., scheme.iterations)``.
    strategy, sigma, y, num_samples, dtype, dot_method, recursion : optional
        ``sigma`` finite ``> 0``, ``num_samples >= 1``, ``dtype`` float64/float32, ``dot_method`` and
        ``recursion`` among the known methods.

    Returns
    -------
    jax.Array or None
        ``y`` as a floating array (``None`` when not given).

    Raises
    ------
    ValueError
        If an argument fails its check.
    """
    if strategy is not _UNSET:
        scheme.check_strategy(strategy)  # every scheme checks the strategy's type first
    if sigma is not _UNSET:
        check_sigma("sigma", sigma)
    if num_samples is not _UNSET:
        check_count("num_samples", num_samples)
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


#: The noise multipliers the engine accepts, ``[SIGMA_MIN, SIGMA_MAX]``: the privacy loss and its error bound grow
#: like ``1/sigma^2`` and the outputs like ``sigma``, so ``sigma^2`` and ``1/sigma^2`` (and the products of them with
#: ``n``, the bands and the output bound) must stay finite float64 numbers with ample room: beyond ``1e-154`` /
#: ``1e154`` they overflow, and a loss of order ``1e200`` already leaves float64's ``exp``/``log`` arithmetic with no
#: meaning. With ``||c||`` of order 1 (mcacct's strategies have ``||c|| = 1``) every delta is 1 to float64 precision
#: below ``SIGMA_MIN`` and 0 above ``SIGMA_MAX``, so the range excludes no informative query.
SIGMA_MIN = 1e-100
SIGMA_MAX = 1e100


def check_sigma_range(name: str, value: Any) -> float:
    """A noise multiplier the engine accepts: ``value`` as a float, in ``[SIGMA_MIN, SIGMA_MAX]``.

    Parameters
    ----------
    name : str
        The parameter's name, for messages.
    value : object
        A real number: text such as ``"1"`` is refused, not converted.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        Naming ``name`` and the range, if ``value`` is not in it.
    """
    if not is_real_scalar(value):
        raise TypeError(f"{name} must be a real number (int or float) in [{SIGMA_MIN:g}, {SIGMA_MAX:g}]; got "
                        f"{type(value).__name__} {value!r}")
    v = check_real(name, value, low=0.0, low_open=True)  # nan, inf, <= 0: the usual wording
    if not SIGMA_MIN <= v <= SIGMA_MAX:
        raise ValueError(f"{name} must be in [{SIGMA_MIN:g}, {SIGMA_MAX:g}]; got {v:g} (the privacy loss grows "
                         "like 1/sigma^2 and float64 cannot hold it outside this range; with ||c|| of order 1, delta "
                         "is 1 below it and 0 above it)")
    return v
