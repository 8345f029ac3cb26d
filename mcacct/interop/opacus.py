r"""Opacus' argument names for :func:`mcacct.get_noise_multiplier` (issue #41, a drop-in for Opacus users).

Opacus (``opacus.accountants.utils.get_noise_multiplier``) is called as::

    get_noise_multiplier(target_epsilon=..., target_delta=..., sample_rate=..., steps=None, epochs=None,
                         accountant="rdp", epsilon_tolerance=0.01)

and returns a float. This module translates those arguments into mcacct's own (``sampling_prob``, ``steps``) and
checks the ones mcacct accepts but does not use:

* ``sample_rate`` is Opacus' *rate*: the expected fraction of the data in a step (batch size over dataset size).
  For Poisson sampling it is mcacct's ``sampling_prob``. For b-min-sep (``min_sep = b > 1``) it is the stationary
  participation rate :math:`r = 1/(1/p + b - 1)` of the sampling probability :math:`p` of an *available* example,
  inverted exactly by :func:`mcacct.core.rates.sampling_prob_from_rate` (:math:`p > r` for :math:`b > 1`; taking
  :math:`r` for :math:`p` would certify a smaller participation than the training has: the unsound direction).
  Feasible rates are :math:`0 < r \le 1/b`.
* ``epochs``: ``steps = ceil(epochs / rate)``, rounded up (so the steps cover at least ``epochs`` passes).
* ``accountant``: ``"pld"`` or ``"prv"`` (Opacus' PRV accountant; mcacct's PLD accountant is its analogue) for
  Poisson DP-SGD; ``"rdp"`` and ``"gdp"`` are refused.
* ``epsilon_tolerance``: checked (a positive real) and otherwise unused.

Only public names of :mod:`mcacct.core.rates` and :mod:`mcacct.core.validate` are used; nothing here imports Opacus.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Iterable

from mcacct.core.rates import sampling_prob_from_rate
from mcacct.core.validate import check_count, check_real, shown

__all__ = ["OPACUS_KEYWORDS", "PLD_ACCOUNTANTS", "sampling_prob_from_sample_rate", "steps_from_epochs",
           "check_accountant", "check_epsilon_tolerance", "check_keywords", "opacus_sampling_and_steps"]

#: The keywords of Opacus' ``get_noise_multiplier`` that mcacct's accepts.
OPACUS_KEYWORDS = ("target_epsilon", "target_delta", "sample_rate", "steps", "epochs", "accountant",
                   "epsilon_tolerance")
#: The accountant values accepted for Poisson DP-SGD: mcacct's PLD accountant (Opacus' ``"prv"`` is its analogue).
PLD_ACCOUNTANTS = ("pld", "prv")

# a quotient epochs / rate this close (relative) to an integer is that integer, not the next one up: 3 / 0.1 is
# 30.000000000000004 in floating point
_STEPS_RTOL = 1e-9


def sampling_prob_from_sample_rate(sample_rate: Any, min_sep: Any = None) -> float:
    r"""mcacct's sampling probability :math:`p` for Opacus' ``sample_rate`` :math:`r` (the expected fraction of
    the data per step).

    Poisson sampling (``min_sep`` ``None`` or 1): :math:`p = r`. b-min-sep (``min_sep = b``): the exact inverse
    of the stationary participation rate :math:`r = 1/(1/p + b - 1)`, i.e. :math:`p = r / (1 - r (b - 1))`
    (:func:`mcacct.core.rates.sampling_prob_from_rate`); :math:`p > r` for :math:`b > 1`.

    Parameters
    ----------
    sample_rate : float
        :math:`r \in (0, 1/b]` (``(0, 1]`` for Poisson).
    min_sep : int, optional
        b-min-sep's minimum separation :math:`b \ge 1` (``None``: Poisson).

    Returns
    -------
    float
        :math:`p \in (0, 1]`.

    Raises
    ------
    ValueError
        If ``sample_rate`` is not in ``(0, 1/min_sep]`` (no :math:`p \in (0, 1]` has that rate) or ``min_sep``
        is not an integer ``>= 1``.
    """
    b = 1 if min_sep is None else check_count("min_sep", min_sep)
    r = check_real("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)
    if r > 1.0 / b:
        raise ValueError(f"sample_rate must be in (0, 1/min_sep] = (0, {shown(1.0 / b)}] with min_sep={b}; got "
                         f"{shown(r)}: sample_rate is the expected fraction of the data per step, and b-min-sep "
                         "keeps an example out of the b - 1 batches after one it joins, so no sampling "
                         "probability p in (0, 1] gives a larger rate")
    return sampling_prob_from_rate(r, b)


def steps_from_epochs(epochs: Any, rate: Any, rate_name: str = "sample_rate") -> int:
    r"""The steps of ``epochs`` passes at ``rate`` (the expected fraction of the data per step):
    :math:`\lceil \text{epochs} / \text{rate} \rceil`, rounded up, at least 1.

    A quotient within a relative :math:`10^{-9}` of an integer counts as that integer (``epochs=3,
    sample_rate=0.1`` is 30 steps, not 31 from floating-point rounding).

    Parameters
    ----------
    epochs : float
        Passes over the data, ``> 0``.
    rate : float
        The rate in ``(0, 1]``.
    rate_name : str, default "sample_rate"
        The name of the rate in error messages.

    Returns
    -------
    int
        The steps, ``>= 1``.

    Raises
    ------
    ValueError
        If ``epochs <= 0``, the rate is not in ``(0, 1]``, or the quotient is not a finite number.
    """
    e = check_real("epochs", epochs, low=0.0, low_open=True)
    r = check_real(rate_name, rate, low=0.0, high=1.0, low_open=True)
    q = e / r
    if not math.isfinite(q):
        raise ValueError(f"epochs / {rate_name} must be a finite number of steps; got {shown(e)} / {shown(r)}")
    k = round(q)
    return max(1, k if abs(q - k) <= _STEPS_RTOL * q else math.ceil(q))


def check_accountant(accountant: Any, monte_carlo_route: str | None = None) -> None:
    """Refuse an ``accountant`` mcacct does not use (``None``, ``"pld"`` and ``"prv"`` pass for Poisson DP-SGD).

    Parameters
    ----------
    accountant : str or None
        Opacus' accountant name.
    monte_carlo_route : str, optional
        What makes the call a Monte Carlo calibration (``"min_sep"``, ``"problem"``, ``"batch_selection"``);
        there every accountant but ``None`` is refused.

    Raises
    ------
    ValueError
        Naming ``accountant`` and the values allowed.
    """
    if accountant is None:
        return
    if monte_carlo_route is not None:
        raise ValueError(f"accountant={accountant!r} applies to Poisson DP-SGD only: with {monte_carlo_route} "
                         "mcacct certifies the noise multiplier by Monte Carlo (Estimate-Verify-Release), not by "
                         "an accountant; leave accountant out")
    if isinstance(accountant, str) and accountant in PLD_ACCOUNTANTS:
        return
    if isinstance(accountant, str) and accountant in ("rdp", "gdp"):
        raise ValueError(f"accountant={accountant!r} is not offered: mcacct certifies Poisson DP-SGD with its PLD "
                         "accountant, which is tighter than RDP and sound, unlike the GDP (central limit) "
                         "approximation; pass accountant='pld' (Opacus' 'prv' is taken as the same) or leave "
                         "accountant out")
    raise ValueError(f"accountant must be None, 'pld' or 'prv'; got {accountant!r}")


def check_epsilon_tolerance(epsilon_tolerance: Any) -> float | None:
    """``epsilon_tolerance`` (Opacus' search tolerance) checked: ``None`` or a positive real; mcacct does not use
    it (its result is the smallest sigma it certifies on its own grid).

    Parameters
    ----------
    epsilon_tolerance : float or None
        The tolerance as given.

    Returns
    -------
    float or None
        ``None`` when not given, else the tolerance as a float.

    Raises
    ------
    ValueError
        Naming ``epsilon_tolerance`` if it is not a finite real number ``> 0`` (a string is refused).
    """
    if epsilon_tolerance is None:
        return None
    return check_real("epsilon_tolerance", epsilon_tolerance, low=0.0, low_open=True, strict=True)


def check_keywords(given: Iterable[str], accepted: Iterable[str], function: str = "get_noise_multiplier") -> None:
    """Refuse keyword names not in ``accepted``, each with the closest accepted name (``difflib``) when there is one.

    Parameters
    ----------
    given : iterable of str
        The keyword names of the call.
    accepted : iterable of str
        The names the function takes (listed, sorted, in the message).
    function : str
        The function's name, for the message.

    Raises
    ------
    ValueError
        ``"get_noise_multiplier got an unknown keyword argument 'sample_rat' (did you mean 'sample_rate'?)"``.
    """
    names = sorted(set(accepted))
    unknown = sorted(set(given) - set(names))
    if not unknown:
        return
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, names, n=1)
        parts.append(f"{name!r} (did you mean {close[0]!r}?)" if close else repr(name))
    s = "s" if len(unknown) > 1 else ""
    raise ValueError(f"{function} got {'an ' if not s else ''}unknown keyword argument{s} {', '.join(parts)}; it "
                     f"takes {', '.join(names)}")


def opacus_sampling_and_steps(*, sample_rate: Any, epochs: Any, sampling_prob: Any, steps: Any, batch_size: Any,
                              dataset_size: Any, min_sep: Any, truncated: bool = False,
                              fixed_by: str | None = None) -> tuple[Any, Any]:
    r"""mcacct's ``(sampling_prob, steps)`` from the call's arguments, Opacus' ``sample_rate`` and ``epochs``
    translated (:func:`sampling_prob_from_sample_rate`, :func:`steps_from_epochs`); the rest is passed through
    unchanged (checked later by :func:`mcacct.get_noise_multiplier`).

    ``epochs`` takes its rate from ``sample_rate``, else ``batch_size / dataset_size``, else (Poisson only)
    ``sampling_prob``. ``fixed_by`` (``"problem"`` or ``"batch_selection"``) fixes the sampling and the steps:
    ``sample_rate`` and ``epochs`` are refused.

    Parameters
    ----------
    sample_rate, epochs : Any
        Opacus' arguments, ``None`` when not given.
    sampling_prob, steps, batch_size, dataset_size, min_sep : Any
        mcacct's arguments, ``None`` when not given.
    truncated : bool
        The scheme is truncated b-min-sep, where ``dataset_size`` may come with ``sample_rate``.
    fixed_by : str or None
        What fixes the sampling and the steps, if anything; then the two values are returned unchanged.

    Returns
    -------
    tuple
        ``(sampling_prob, steps)``: :math:`p` from ``sample_rate`` when given, and
        :math:`\lceil \mathrm{epochs} / \mathrm{rate} \rceil` when ``epochs`` is given.

    Raises
    ------
    ValueError
        Naming the parameter: both ``sample_rate`` and ``sampling_prob`` (or ``batch_size``), ``dataset_size``
        with ``sample_rate`` (unless ``truncated``), both ``steps`` and ``epochs``, ``epochs`` without a rate,
        ``sample_rate`` or ``epochs`` with ``fixed_by``, or a value out of range.
    """
    if fixed_by is not None:
        for name, v in (("sample_rate", sample_rate), ("epochs", epochs)):
            if v is not None:
                raise ValueError(f"{name} comes from {fixed_by}; do not give it as well")
        return sampling_prob, steps
    rate = None
    if sample_rate is not None:
        for name, v in (("sampling_prob", sampling_prob), ("batch_size", batch_size)):
            if v is not None:
                raise ValueError(f"give sample_rate (Opacus' name: the expected fraction of the data per step) or "
                                 f"{name}, not both")
        if dataset_size is not None and not truncated:
            raise ValueError("dataset_size does not apply with sample_rate (it goes with batch_size, or with "
                             "max_batch_size for truncated b-min-sep)")
        sampling_prob = sampling_prob_from_sample_rate(sample_rate, min_sep)
        rate, rate_name = sample_rate, "sample_rate"
    if epochs is None:
        return sampling_prob, steps
    if steps is not None:
        raise ValueError("give steps or epochs, not both")
    if rate is None and batch_size is not None and dataset_size is not None:
        bs = check_real("batch_size", batch_size, low=0.0, low_open=True)
        rate, rate_name = bs / check_count("dataset_size", dataset_size), "batch_size / dataset_size"
    elif rate is None and sampling_prob is not None and min_sep is None:
        rate, rate_name = sampling_prob, "sampling_prob"  # Poisson: the probability is the rate
    elif rate is None:
        raise ValueError("epochs needs the expected fraction of the data per step: give sample_rate (or batch_size "
                         "with dataset_size; with min_sep, sampling_prob is not that fraction), or give steps")
    return sampling_prob, steps_from_epochs(epochs, rate, rate_name)
