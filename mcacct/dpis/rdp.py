r"""The RDP accountant of DPIS (Wei, Bao, Xiao & Yang 2022, arXiv:2210.09634), for comparison with the PLD one.

Renyi DP of integer order :math:`\alpha \ge 2` of the Poisson-subsampled Gaussian with rate :math:`q` and noise
multiplier :math:`s` (Mironov, Talwar & Zhang 2019, arXiv:1908.10530; the paper's eq. 6 and Lemma 2.7):

.. math:: \tau(\alpha) = \frac{1}{\alpha-1}\log\sum_{m=0}^{\alpha}\binom{\alpha}{m}(1-q)^{\alpha-m}q^m
          \exp\Big(\frac{m^2-m}{2s^2}\Big),

evaluated in log space as :math:`\log(1 + x)` with :math:`x = \sum_{m\ge2}\binom{\alpha}{m}(1-q)^{\alpha-m}q^m
(e^{(m^2-m)/(2s^2)} - 1) > 0` (``logsumexp`` of its positive terms, exact binomials; the :math:`m = 0, 1` terms
sum with the rest of the binomial expansion to exactly 1), so no logarithm of a sum near 1 loses :math:`x`, and
rounded up by a relative ``1e-12``. One DPIS iteration (Lemma 3.1, eq. 13) is the case
:math:`q = bC/\tilde K`, :math:`s = \sigma_G\tilde NC/\tilde K`; the Gaussian releases (eq. 18, and
:math:`\tilde K^*`) have :math:`\tau(\alpha) = \alpha/(2s^2)`. Per-step RDPs add up (Mironov 2017,
arXiv:1702.07476) and the total converts to :math:`(\varepsilon, \delta)`-DP by Lemma 2.5 (eq. 2; Canonne,
Kamath & Steinke 2020, arXiv:2004.00010):

.. math:: \varepsilon = \min_\alpha\;\tau(\alpha) + \frac{\log(1/\delta) + (\alpha-1)\log(1-1/\alpha)
          - \log\alpha}{\alpha-1}.

The order grid is the integers :math:`2..256` (the paper's Lemma 3.1 is stated for integer orders).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mcacct import pld
from mcacct.dpis.events import DPISRun, dpis_events
from mcacct.core.validate import check_real
from mcacct.core.precision import float64

__all__ = ["DEFAULT_ORDERS", "RDPResult", "check_orders", "rdp_gaussian", "rdp_poisson_gaussian",
           "rdp_dpis_iteration", "rdp_of_events", "conversion_offset", "rdp_to_epsilon", "dpis_rdp_epsilon"]

#: integer Renyi orders 2..256
DEFAULT_ORDERS = tuple(range(2, 257))
#: relative round-up of every RDP value, above the float error of its evaluation (a few ulp per term)
_RDP_UP = 1.0 + 1e-12


@functools.lru_cache(maxsize=1024)
def _log_binomials(order: int) -> np.ndarray:
    """``log C(order, m)`` for ``m = 0..order``, from exact integers (read-only)."""
    half = [math.log(math.comb(order, j)) for j in range(order // 2 + 1)]
    out = np.array(half + half[:(order + 1) // 2][::-1])
    out.setflags(write=False)
    return out


class RDPResult(NamedTuple):
    """An RDP-converted guarantee: ``epsilon`` at ``delta``, attained at ``order``; ``rdp`` per order."""

    epsilon: float
    delta: float
    order: int
    rdp: tuple


def check_orders(orders: Any) -> np.ndarray:
    """Check RDP orders.

    Parameters
    ----------
    orders : Any
        Integers ``>= 2`` (a sequence or a single value).

    Returns
    -------
    numpy.ndarray
        ``orders`` as an int64 array (non-empty, 1-D).

    Raises
    ------
    ValueError
        If ``orders`` is empty or holds a value that is not an integer ``>= 2``.
    """
    try:
        arr = np.atleast_1d(np.asarray(orders, dtype=np.float64))
    except (TypeError, ValueError):
        raise ValueError(f"orders must be integers >= 2; got {orders!r}") from None
    if arr.size == 0 or arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr < 2) or np.any(
            arr != np.round(arr)):
        raise ValueError(f"orders must be a non-empty list of integers >= 2; got {orders!r}")
    return arr.astype(np.int64)


@float64
def rdp_gaussian(sigma: float, orders: Sequence[int] = DEFAULT_ORDERS, sensitivity: float = 1.0) -> np.ndarray:
    r""":math:`\tau(\alpha) = \alpha\Delta^2/(2\sigma^2)` of the Gaussian mechanism (eq. 18), rounded up by 1e-12
    relative.

    Parameters
    ----------
    sigma : float
        Noise standard deviation :math:`> 0`.
    orders : sequence of int
        Orders :math:`\alpha \ge 2`.
    sensitivity : float, default 1
        :math:`\Delta > 0`.

    Returns
    -------
    numpy.ndarray
        :math:`\tau(\alpha)` per order.

    Raises
    ------
    ValueError
        If an argument is out of range.
    """
    s = check_real("sigma", sigma, low=0.0, low_open=True)
    d = check_real("sensitivity", sensitivity, low=0.0, low_open=True)
    return check_orders(orders) * d * d / (2.0 * s * s) * _RDP_UP


@float64
def rdp_poisson_gaussian(q: float, sigma: float, orders: Sequence[int] = DEFAULT_ORDERS,
                         sensitivity: float = 1.0) -> np.ndarray:
    r"""RDP of the Poisson-subsampled Gaussian for integer orders (module docstring; eq. 6 of the paper).

    Parameters
    ----------
    q : float
        Sampling rate in :math:`(0, 1]` (``1``: the Gaussian mechanism).
    sigma : float
        Noise standard deviation :math:`> 0`.
    orders : sequence of int
        Orders :math:`\alpha \ge 2`.
    sensitivity : float, default 1
        :math:`\Delta > 0`; the effective multiplier is :math:`s = \sigma/\Delta`.

    Returns
    -------
    numpy.ndarray
        :math:`\tau(\alpha)` per order (float64), an upper bound: computed as ``log1p`` of the sum minus 1 (module
        docstring) and rounded up by 1e-12 relative.
    """
    q = check_real("q", q, low=0.0, high=1.0, low_open=True)
    s = check_real("sigma", sigma, low=0.0, low_open=True) / check_real("sensitivity", sensitivity, low=0.0,
                                                                         low_open=True)
    a = check_orders(orders)
    if q == 1.0:
        return a / (2.0 * s * s) * _RDP_UP
    top = int(a.max())
    m = np.arange(top + 1, dtype=np.float64)[None, :]
    al = a.astype(np.float64)[:, None]
    valid = (m >= 2) & (m <= al)
    y = (m * m - m) / (2.0 * s * s)
    with np.errstate(divide="ignore"):  # log(expm1(y)) for y > 0, stable for small and large y; -inf at y = 0
        log_em1 = np.where(m >= 2, y + np.log(-np.expm1(-np.where(m >= 2, y, 1.0))), -np.inf)
    logb = np.zeros((a.size, top + 1))
    for i, order in enumerate(a.tolist()):
        logb[i, :order + 1] = _log_binomials(order)
    terms = np.where(valid, logb + (al - m) * math.log1p(-q) + m * math.log(q) + log_em1, -np.inf)
    peak = terms.max(axis=1, keepdims=True)
    safe = np.where(np.isfinite(peak), peak, 0.0)
    log_x = np.where(np.isfinite(peak[:, 0]), safe[:, 0] + np.log(np.exp(terms - safe).sum(axis=1)), -np.inf)
    out = np.logaddexp(0.0, log_x) / (al[:, 0] - 1.0)     # log(1 + x), x = sum - 1 > 0 (no log of a sum near 1)
    return np.maximum(out, 0.0) * _RDP_UP


@float64
def rdp_dpis_iteration(k_tilde: float, n_tilde: float, batch_size: float, clip: float, sigma_g: float,
                       orders: Sequence[int] = DEFAULT_ORDERS) -> np.ndarray:
    r"""Eq. (13) of the paper, one DPIS iteration:

    .. math:: \tau = \frac{1}{\alpha-1}\log\sum_{m=0}^{\alpha}\binom{\alpha}{m}\Big(1-\frac{bC}{\tilde K}
              \Big)^{\alpha-m}\Big(\frac{bC}{\tilde K}\Big)^m\exp\Big(\frac{(m^2-m)\tilde K^2}{2\tilde N^2
              \sigma_G^2C^2}\Big),

    i.e. :func:`rdp_poisson_gaussian` with :math:`q = bC/\tilde K` and sensitivity :math:`\tilde K/\tilde N`
    against noise :math:`\sigma_G C`. Requires :math:`\tilde K \ge bC`.

    Parameters
    ----------
    k_tilde : float
        :math:`\tilde K \ge bC`.
    n_tilde : float
        :math:`\tilde N > 0`.
    batch_size : float
        Expected batch size :math:`b > 0`.
    clip : float
        Clip bound :math:`C > 0`.
    sigma_g : float
        Noise multiplier :math:`\sigma_G > 0`.
    orders : sequence of int
        Orders :math:`\alpha \ge 2`.

    Returns
    -------
    numpy.ndarray
        :math:`\tau(\alpha)` per order.

    Raises
    ------
    ValueError
        If an argument is out of range or :math:`\tilde K < bC`.
    """
    kt = check_real("k_tilde", k_tilde, low=0.0, low_open=True)
    nt = check_real("n_tilde", n_tilde, low=0.0, low_open=True)
    b = check_real("batch_size", batch_size, low=0.0, low_open=True)
    c = check_real("clip", clip, low=0.0, low_open=True)
    sg = check_real("sigma_g", sigma_g, low=0.0, low_open=True)
    if kt < b * c:
        raise ValueError(f"k_tilde must be >= batch_size*clip = {b * c!r}; got {kt!r}")
    return rdp_poisson_gaussian(b * c / kt, sg * c, orders, sensitivity=kt / nt)


def _spec_rdp(spec: Any, orders: np.ndarray) -> np.ndarray:
    if isinstance(spec, pld.GaussianSpec):
        return spec.steps * rdp_gaussian(spec.sigma, orders, spec.sensitivity)
    if isinstance(spec, pld.PoissonGaussianSpec):
        return spec.steps * rdp_poisson_gaussian(spec.sampling_prob, spec.sigma, orders, spec.sensitivity)
    raise ValueError(f"the RDP accountant supports GaussianSpec and PoissonGaussianSpec events; got "
                     f"{type(spec).__name__}")


@float64
def rdp_of_events(events: Sequence[pld.Event], orders: Sequence[int] = DEFAULT_ORDERS) -> np.ndarray:
    r"""Total RDP :math:`\sum_e \mathrm{count}_e\,\tau_e(\alpha)` of a list of :class:`mcacct.pld.Event`, per order.

    Parameters
    ----------
    events : sequence of mcacct.pld.Event
        Events of Gaussian and Poisson-Gaussian specs.
    orders : sequence of int
        Orders :math:`\alpha \ge 2`.

    Returns
    -------
    numpy.ndarray
        The total RDP per order.

    Raises
    ------
    ValueError
        For an entry that is not an :class:`mcacct.pld.Event`, or of another spec.
    """
    a = check_orders(orders)
    total = np.zeros(a.size)
    cache: dict = {}
    for e in events:
        if not isinstance(e, pld.Event):
            raise ValueError(f"events must be mcacct.pld.Event objects; got {type(e).__name__}")
        if e.spec not in cache:
            cache[e.spec] = _spec_rdp(e.spec, a)
        total = total + e.count * cache[e.spec]
    return total


@float64
def conversion_offset(orders: Sequence[int], delta: float) -> np.ndarray:
    r"""The second term of Lemma 2.5 (eq. 2), per order.

    :math:`(\log(1/\delta) + (\alpha-1)\log(1-1/\alpha) - \log\alpha)/(\alpha-1)`.

    Parameters
    ----------
    orders : sequence of int
        Orders :math:`\alpha \ge 2`.
    delta : float
        :math:`\delta\in(0, 1)`.

    Returns
    -------
    numpy.ndarray
        The offset per order.

    Raises
    ------
    ValueError
        If an argument is out of range.
    """
    a = check_orders(orders).astype(np.float64)
    dl = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    return (math.log(1.0 / dl) + (a - 1.0) * np.log1p(-1.0 / a) - np.log(a)) / (a - 1.0)


@float64
def rdp_to_epsilon(rdp: Any, orders: Sequence[int], delta: float) -> RDPResult:
    r"""Lemma 2.5 (eq. 2), minimised over the orders.

    :math:`\varepsilon = \min_\alpha \tau(\alpha) + \mathrm{offset}(\alpha)` (clipped at 0).

    Parameters
    ----------
    rdp : array_like
        :math:`\tau(\alpha) \ge 0`, one value per order.
    orders : sequence of int
        Orders :math:`\alpha \ge 2`.
    delta : float
        :math:`\delta\in(0, 1)`.

    Returns
    -------
    RDPResult
        ``epsilon``, ``delta``, the minimising ``order`` and ``rdp``.

    Raises
    ------
    ValueError
        If ``rdp`` does not hold one value ``>= 0`` per order, or an argument is out of range.
    """
    a = check_orders(orders)
    tau = np.asarray(rdp, dtype=np.float64)
    if tau.shape != a.shape or not np.all(tau >= 0):
        raise ValueError(f"rdp must hold one value >= 0 per order ({a.size}); got shape {tau.shape}")
    eps = tau + conversion_offset(a, delta)
    j = int(np.argmin(eps))
    return RDPResult(max(float(eps[j]), 0.0), float(delta), int(a[j]), tuple(tau.tolist()))


@float64
def dpis_rdp_epsilon(run: DPISRun, delta: float, orders: Sequence[int] = DEFAULT_ORDERS) -> RDPResult:
    r"""The paper's accounting of a run.

    RDP of every release (:func:`mcacct.dpis.events.dpis_events`, i.e. eq. 10/18, eq. 11 with sensitivity
    :math:`C/p_K`, eq. 13), summed, converted by Lemma 2.5.

    Parameters
    ----------
    run : DPISRun
        The run.
    delta : float
        :math:`\delta\in(0, 1)`.
    orders : sequence of int
        Orders :math:`\alpha \ge 2`.

    Returns
    -------
    RDPResult
        The converted guarantee.

    Raises
    ------
    ValueError
        If an argument is out of range.
    """
    return rdp_to_epsilon(rdp_of_events(dpis_events(run), orders), orders, delta)
