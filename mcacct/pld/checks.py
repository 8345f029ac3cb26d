"""The argument checks of the PLD accountant, in the one family of :mod:`mcacct.core.validate` (``"NAME must be in
RANGE; got VALUE"``), with the PLD's ranges named once: a probability, a positive real, an integer ``>= lo``,
``epsilon`` in ``[0, inf)``, ``delta`` in ``(0, 1)``, the value discretisation interval in ``(0, 0.1]`` and the
discretisation method.

All are ``strict`` (:mod:`mcacct.core.validate`): numbers only (``int``, ``float``, NumPy scalars), integers only for
integer parameters, so a spec, which keeps its fields as given, never holds ``"0.5"`` or ``2.0``; messages show
NumPy scalars as plain numbers (``got nan``, never ``got np.float64(nan)``).

The checks of an answer follow: :func:`check_answer` (a result that is not a number is a failure, never a bound),
:func:`check_finite` and :func:`check_certifiable` (the batched runs of :mod:`mcacct.pld.plan`: ``nan``, or a delta
below the round-off floor), and :func:`half_step` (the error estimate's second run).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mcacct.core.validate import check_choice, check_int, check_prob, check_real, is_number

__all__ = ["plain", "check_answer", "check_delta", "check_discretization", "check_epsilon", "check_integer",
           "check_positive", "check_probability", "check_value_interval", "is_real_number", "DISCRETIZATIONS", "half_step",
           "check_finite", "check_certifiable"]

#: The discretisations of a privacy loss distribution (:mod:`mcacct.pld.discrete`).
DISCRETIZATIONS = ("connect_dots", "round_up")

#: Whether a value is a real number (:func:`mcacct.core.validate.is_number`: a Python or NumPy scalar, not a bool).
is_real_number = is_number


def plain(x: Any) -> Any:
    """Convert a NumPy scalar to the matching Python number.

    ``np.float64(0.5)`` becomes ``0.5``; anything that is not a NumPy scalar is returned unchanged.

    Parameters
    ----------
    x : Any
        The value to convert.

    Returns
    -------
    Any
        ``x.item()`` for a NumPy scalar, else ``x`` itself.
    """
    return x.item() if isinstance(x, np.generic) else x


def check_probability(name: str, q: Any) -> float:
    """Check a probability in ``(0, 1]``.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    q : Any
        The value to check (a number; strings and bools are refused).

    Returns
    -------
    float
        ``q`` as a float.

    Raises
    ------
    ValueError
        If ``q`` is not a real number in ``(0, 1]``.
    """
    return check_prob(name, q, strict=True)


def check_positive(name: str, x: Any) -> float:
    """Check a finite real number in ``(0, inf)``.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    x : Any
        The value to check.

    Returns
    -------
    float
        ``x`` as a float.

    Raises
    ------
    ValueError
        If ``x`` is not a finite real number ``> 0``.
    """
    return check_real(name, x, low=0.0, low_open=True, strict=True)


def check_integer(name: str, n: Any, lo: int = 1) -> int:
    """Check an integer in ``[lo, inf)``.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    n : Any
        The value to check (a Python or NumPy integer; ``2.0`` is refused).
    lo : int, default 1
        Smallest allowed value.

    Returns
    -------
    int
        ``n`` as a Python ``int``.

    Raises
    ------
    ValueError
        If ``n`` is not an integer ``>= lo``.
    """
    return check_int(name, n, low=lo, strict=True)


def check_epsilon(epsilon: Any) -> float:
    """Check ``epsilon`` in ``[0, inf)``.

    Parameters
    ----------
    epsilon : Any
        The value to check.

    Returns
    -------
    float
        ``epsilon`` as a float.

    Raises
    ------
    ValueError
        If ``epsilon`` is not a real number ``>= 0``.
    """
    return check_real("epsilon", epsilon, low=0.0, strict=True)


def check_delta(delta: Any) -> float:
    """Check ``delta`` in ``(0, 1)``.

    Parameters
    ----------
    delta : Any
        The value to check.

    Returns
    -------
    float
        ``delta`` as a float.

    Raises
    ------
    ValueError
        If ``delta`` is not a real number in the open interval ``(0, 1)``.
    """
    return check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True, strict=True)


def check_value_interval(h: Any) -> float:
    """Check ``value_discretization_interval`` in ``(0, 0.1]``.

    Parameters
    ----------
    h : Any
        The loss grid spacing to check.

    Returns
    -------
    float
        ``h`` as a float.

    Raises
    ------
    ValueError
        If ``h`` is not a real number in ``(0, 0.1]``.
    """
    return check_real("value_discretization_interval", h, low=0.0, high=0.1, low_open=True, strict=True)


def check_answer(result: Any) -> None:
    """Refuse a result that is not a number.

    Applies to a :class:`~mcacct.pld.specs.PLDResult` or an :class:`~mcacct.pld.events.EventsResult`: ``nan`` in
    ``epsilon`` or ``delta`` or their per-direction values, or an infinite delta, is refused. A numerical failure is
    never a bound, so it is a ``ValueError`` (one ``error:`` line and exit 2 on the command line), never a printed
    ``nan`` (``epsilon = inf`` stays: it is the answer below the mass at infinity).

    Parameters
    ----------
    result : PLDResult or EventsResult
        The result to check.

    Raises
    ------
    ValueError
        If a checked field is ``nan`` or a delta is infinite; the message names the field and the grid spacing.
    """
    h = result.value_discretization_interval
    for name in ("epsilon", "epsilon_remove", "epsilon_add", "delta", "delta_remove", "delta_add"):
        v = float(getattr(result, name))
        if math.isnan(v) or (name.startswith("delta") and math.isinf(v)):
            raise ValueError(
                f"the PLD accountant computed {name} = {v} at value_discretization_interval={h:g}: a numerical "
                "failure, not a bound; try another value_discretization_interval or a larger sigma")


def check_discretization(method: Any) -> str:
    """Check a discretisation method: one of :data:`DISCRETIZATIONS`.

    Parameters
    ----------
    method : Any
        The method name (a NumPy string scalar is converted first).

    Returns
    -------
    str
        ``method``.

    Raises
    ------
    ValueError
        If ``method`` is not one of :data:`DISCRETIZATIONS`.
    """
    return check_choice("discretization", plain(method), DISCRETIZATIONS)


def half_step(rerun, h: float):
    """Run ``rerun()``, the error estimate's second run at ``h / 2``.

    Its refusal names the user's ``h`` and the way out (the first run at ``h`` passed, so only the estimate is out
    of reach).

    Parameters
    ----------
    rerun : callable
        Function of no arguments that repeats the computation at ``h / 2``.
    h : float
        The grid spacing of the first run.

    Returns
    -------
    Any
        What ``rerun()`` returns.

    Raises
    ------
    ValueError
        If ``rerun()`` raises ``ValueError``; the new message says that the estimate, not the run at ``h``, failed and
        suggests ``estimate_error=False`` or a larger ``value_discretization_interval``.
    """
    try:
        return rerun()
    except ValueError as err:
        raise ValueError(f"value_discretization_interval={h:g} works, but the error estimate re-runs at h/2 = "
                         f"{h / 2:g}, which is refused: {err}. Pass estimate_error=False (--no-error-estimate) or a "
                         "larger value_discretization_interval") from None


def check_finite(r: dict[str, np.ndarray], target: str, sigmas: np.ndarray, h: float) -> None:
    """Refuse a result that is not a number.

    A ``nan`` delta or epsilon (or an infinite delta) of the ``target`` query is a numerical failure, never an
    answer, so it becomes a ``ValueError`` naming sigma and the grid (``epsilon = inf`` stays: it is the answer
    below the mass at infinity).

    Parameters
    ----------
    r : dict of str to numpy.ndarray
        The output of :func:`mcacct.pld.plan.run`.
    target : {"delta", "epsilon"}
        The query that was evaluated.
    sigmas : numpy.ndarray
        The noise levels of ``r``.
    h : float
        Loss grid spacing.

    Raises
    ------
    ValueError
        For the first failed noise level and direction.
    """
    key = "delta" if target == "delta" else "epsilon"
    v = r[key]
    bad = np.isnan(v) | (np.isinf(v) if key == "delta" else False) | np.isnan(r["inf"])
    if bad.any():
        i, d = np.argwhere(bad)[0]
        raise ValueError(
            f"the PLD accountant computed no valid {key} at sigma={sigmas[i]:g} with value_discretization_interval="
            f"{h:g} ({('remove', 'add')[d]} direction: {key} {v[i, d]!r}, mass at +infinity {r['inf'][i, d]!r}); "
            "this is a numerical failure, not a bound: try another value_discretization_interval or a larger sigma")


def check_certifiable(r: dict[str, np.ndarray], delta: float, sigmas: np.ndarray) -> None:
    """Refuse an epsilon query whose delta is above the mass at infinity but below the round-off floor.

    Not refused when the other direction's epsilon is infinite anyway, delta being below its mass at infinity:
    then ``inf`` is the answer.

    Parameters
    ----------
    r : dict of str to numpy.ndarray
        The output of :func:`mcacct.pld.plan.run` for ``target="epsilon"``.
    delta : float
        The queried delta.
    sigmas : numpy.ndarray
        The noise levels of ``r``.

    Raises
    ------
    ValueError
        Naming the round-off bound, the mass at infinity and the smallest certifiable delta.
    """
    above = delta >= r["inf"] * (1 + 1e-9)
    legit = np.isinf(r["epsilon"]) & ~above  # epsilon = inf because delta is below the mass at infinity
    bad = np.isinf(r["epsilon"]) & above & ~legit.any(axis=1, keepdims=True)
    if bad.any():
        i, d = np.argwhere(bad)[0]
        raise ValueError(
            f"delta={delta:g} is below what the PLD accountant can certify here (round-off bound "
            f"{r['floor'][i, d] - r['inf'][i, d]:.2g}, mass at +infinity {r['inf'][i, d]:.2g}, smallest "
            f"certifiable delta {r['floor'][i, d]:.2g} at sigma={sigmas[i]:g}); increase delta")
