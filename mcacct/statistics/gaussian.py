r"""The Gaussian mechanism's exact privacy profile (Balle & Wang 2018, "Improving the Gaussian Mechanism for
Differential Privacy", arXiv:1805.06530, Thm. 8) and the smallest noise multiplier meeting a target with it.

It certifies the top candidate of every calibration without Monte Carlo (:func:`mcacct.evr.budget.top_sigma`: the
Gaussian mechanism at the strategy's worst-case sensitivity). Both directions of the divergence give the same
delta. Values are upper bounds: the delta is raised by a relative safety factor and the cancellation's error, and
sigma is rounded up. :mod:`mcacct.statistics.confidence` and :mod:`mcacct.evr` re-export both functions.
"""

from __future__ import annotations

import math

from mcacct.core.precision import float64
from mcacct.core.validate import check_real

__all__ = ["EPSILON_MAX", "SAFETY", "gaussian_delta", "gaussian_sigma"]

#: The largest epsilon of the Gaussian mechanism's exact delta (:func:`gaussian_delta`, :func:`gaussian_sigma`: the
#: certified top of every calibration): the formula multiplies by ``e^epsilon``, a finite float64 number only up to
#: ``epsilon ~ 709.78``.
EPSILON_MAX = 700.0

#: Relative safety factor applied to quantities that must be upper bounds (covers float64 rounding); also
#: :mod:`mcacct.statistics.confidence`'s.
SAFETY = 1.0 + 1e-9


def _log_ndtr(x: float) -> float:
    """log Phi(x), accurate in both tails."""
    if x > -5.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    # asymptotic-free form via erfcx-like scaling: Phi(x) = erfc(-x/sqrt2)/2, use log of erfc directly
    t = -x / math.sqrt(2.0)
    # math.erfc underflows near t ~ 27; use the continued-fraction free bound-tight expansion
    if t < 26.0:
        return math.log(0.5 * math.erfc(t))
    # log(erfc(t)) ~ -t^2 - log(t sqrt(pi)) + log(1 - 1/(2t^2) + 3/(4t^4))
    try:
        corr = math.log1p(-0.5 / t**2 + 0.75 / t**4)
    except OverflowError:  # t**4 beyond float64 (t > ~1e77): both terms are 0 to float64 precision
        corr = 0.0
    return -t * t - math.log(t * math.sqrt(math.pi)) + corr - math.log(2.0)  # -inf beyond t ~ 1.3e154 (Phi = 0)


@float64
def gaussian_delta(sensitivity: float, sigma: float, epsilon: float) -> float:
    r"""Exact :math:`\delta(\varepsilon)` of the Gaussian mechanism (Balle & Wang 2018, Thm. 8).

    .. math::  \delta = \Phi\!\left(\tfrac{\Delta}{2\sigma} - \tfrac{\varepsilon\sigma}{\Delta}\right)
               - e^{\varepsilon}\,\Phi\!\left(-\tfrac{\Delta}{2\sigma} - \tfrac{\varepsilon\sigma}{\Delta}\right),

    symmetric in the two adjacency directions. Returned with a relative safety margin (an upper bound).

    Parameters
    ----------
    sensitivity : float
        :math:`\Delta`, ``> 0``.
    sigma : float
        :math:`\sigma`, ``> 0``.
    epsilon : float
        In ``[0, EPSILON_MAX]`` (``e^epsilon`` must be a float64 number).

    Returns
    -------
    float
        An upper bound on :math:`\delta`, in ``[0, 1]``.

    Raises
    ------
    ValueError
        If an argument is out of range.
    """
    d = check_real("sensitivity", sensitivity, low=0.0, low_open=True)
    s = check_real("sigma", sigma, low=0.0, low_open=True)
    e = check_real("epsilon", epsilon, low=0.0, high=EPSILON_MAX)
    a, b = d / (2 * s), e * s / d
    l1, l2 = _log_ndtr(a - b), _log_ndtr(-a - b)
    first = math.exp(l1)
    second = math.exp(e + l2)
    val = first - second
    # the round-off of both terms (relative: u times the magnitude of their exponents, erfc's few ulps, and the
    # asymptotic branch of _log_ndtr, which overestimates log Phi by at most 6e-9 relative), kept whole through
    # the cancellation: at epsilon near 600 `second` is close to `first`, and 4e-16 * first alone was short
    u = 2.0 ** -53
    err = u * first * (abs(l1) + 8.0) + second * (u * (e + 2.0 * abs(l2) + 8.0) + (1e-8 if a + b > 36.0 else 0.0))
    return min(1.0, max(val, 0.0) * SAFETY + 4e-16 * first + err)


@float64
def gaussian_sigma(sensitivity: float, epsilon: float, delta: float) -> float:
    """Smallest noise multiplier (rounded up) with ``gaussian_delta(sensitivity, sigma, epsilon) <= delta``.

    Parameters
    ----------
    sensitivity : float
        ``> 0``.
    epsilon : float
        In ``[0, EPSILON_MAX]``.
    delta : float
        In ``(0, 1)``.

    Returns
    -------
    float
        ``sigma``, found by geometric bisection (to a relative ``1e-12``).

    Raises
    ------
    ValueError
        If an argument is out of range.
    """
    d = check_real("sensitivity", sensitivity, low=0.0, low_open=True)
    e = check_real("epsilon", epsilon, low=0.0, high=EPSILON_MAX)
    t = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    lo, hi = 1e-6 * d, d
    while gaussian_delta(d, hi, e) > t:
        if hi > 1e150 * d:  # the certified delta has a floor (its round-off terms): no sigma reaches t
            raise ValueError(f"delta must be above the smallest delta the Gaussian mechanism certifies at epsilon "
                             f"{e!r} (about {gaussian_delta(d, hi, e):.3g}, the floor of its round-off terms); "
                             f"got {t!r}")
        hi *= 2.0
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if gaussian_delta(d, mid, e) <= t:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1 + 1e-12:
            break
    return hi
