r"""Estimate-Verify-Release (Dong & Ganesh 2026 [arXiv:2602.09338], App. A) and the bounds it rests on.

Tail bound (Fact 4.2 of Chua et al.): for ``s`` i.i.d. samples in ``[0, 1]`` with mean at least
:math:`\delta`, the empirical mean is at most :math:`\delta' < \delta` with probability at most

.. math::  q(s, \delta', \delta) = \exp(-s\,\mathrm{KL}(\delta' \,\|\, \delta)),

with KL between Bernoulli distributions. A verifier that accepts a candidate when its Monte Carlo
estimate :math:`\hat\delta \le \delta'` (the *base* delta) therefore accepts a mechanism that is not
:math:`(\varepsilon, \delta)`-DP with probability at most ``q``. Alg. 5 over ordered candidates whose top one
is certified without Monte Carlo is then :math:`(\varepsilon, \delta + q (1 - \delta))`-DP (Theorem A.1)
for every :math:`\delta \ge \delta'`; the *overall* delta minimises this over :math:`\delta`.

Both directions of the divergence are verified on the *same* draws (:mod:`mcacct.engine.runner`: chunk ``c``
of a run keyed ``K`` draws ``x`` and ``z`` from ``fold_in(K, c)``, and ``y = Cx + sigma z`` gives the remove
sample, ``y = sigma z`` the add sample, for every ladder candidate), so the two directions' samples are
dependent; the ``s`` samples *within* one direction are i.i.d., which is all Fact 4.2 needs. No independence
between the directions is needed: a mechanism that is not :math:`(\varepsilon,\delta)`-DP violates it in
at least one direction, and that one direction's verifier passes with probability at most ``q`` -- a statement
about its marginal law alone, whatever the dependence on the other direction; requiring both to pass is
contained in that event, so it keeps the same ``q``. Likewise an estimate of both directions splits ``alpha``
by a union bound: each direction's one-sided bound fails with probability at most ``alpha / 2`` marginally, so
both hold with probability at least ``1 - alpha`` however the directions are coupled. The full argument, for every
candidate of the ladder on shared draws, is in ``docs/soundness.md`` ("Shared draws").
"""

from __future__ import annotations

import math

import numpy as np

from mcacct.core.validate import check_int, check_real
from mcacct.core.precision import float64
from mcacct.statistics.gaussian import EPSILON_MAX, SAFETY, gaussian_delta, gaussian_sigma

__all__ = ["EPSILON_MAX", "kl_bernoulli", "tail_bound", "overall_delta", "overall_delta_terms", "base_delta_for_target",
           "min_samples", "sample_budget", "kl_upper_confidence", "kl_lower_confidence", "gaussian_delta",
           "gaussian_sigma"]


@float64
def kl_bernoulli(a: float, b: float) -> float:
    """KL(Bern(a) || Bern(b)) in nats.

    Parameters
    ----------
    a : float
        In ``[0, 1]``.
    b : float
        In ``(0, 1)``; at the ends the divergence is 0 if ``a == b``, else ``inf``.

    Returns
    -------
    float
        ``>= 0``.
    """
    if b <= 0.0 or b >= 1.0:
        return 0.0 if a == b else math.inf
    return max(_kl_terms(a, b)[0], 0.0)


def _kl_terms(a: float, b: float) -> tuple[float, float]:
    """For ``0 < b < 1``: the float KL sum ``a log(a/b) + (1 - a)(log1p(-a) - log1p(-b))`` (before clipping at 0) and
    the magnitude ``a (1 + |log(a/b)|) + (1 - a)(|log1p(-a)| + |log1p(-b)|)`` its round-off scales with, from the
    same logarithms."""
    out = mass = 0.0
    if a > 0.0:
        la = math.log(a / b)
        out += a * la
        mass += a * (1.0 + abs(la))
    if a < 1.0:
        l1, l2 = math.log1p(-a), math.log1p(-b)
        out += (1.0 - a) * (l1 - l2)
        mass += (1.0 - a) * (abs(l1) + abs(l2))
    return out, mass


def _kl_floor(a: float, b: float) -> float:
    """A lower bound on the exact KL(Bern(a) || Bern(b)): :func:`kl_bernoulli` less its float64 round-off.

    Near ``a = b`` the two terms of :func:`kl_bernoulli` cancel, and the absolute round-off, about
    ``6 u (a (1 + |log(a/b)|) + (1 - a)(|log1p(-a)| + |log1p(-b)|))`` with ``u = 2^-53`` (each logarithm's argument
    and result rounded, the products and sums), stays while the divergence shrinks; ``s`` times it moves
    ``exp(-s KL)`` by more than :data:`SAFETY` once ``s a`` exceeds about 1e7 (an audit measured ``q`` 2e-2 low
    at ``s = 1e17``). Subtracting ``8 u`` times that sum keeps every use an upper bound on ``q`` and a confidence
    bound on the right side (docs/soundness.md, "The KL bound in floating point")."""
    if not 0.0 < b < 1.0:
        return kl_bernoulli(a, b)
    out, mass = _kl_terms(a, b)
    if not math.isfinite(out):
        return max(out, 0.0)
    return max(max(out, 0.0) - 8.0 * 2.0 ** -53 * mass, 0.0)


@float64
def tail_bound(num_samples: int, base_delta: float, delta: float) -> float:
    r"""``q = exp(-s KL(base_delta || delta))`` for ``delta > base_delta`` (1 otherwise).

    Parameters
    ----------
    num_samples : int
        ``s``, ``>= 1``.
    base_delta : float
        :math:`\delta'`, the base delta.
    delta : float
        :math:`\delta`.

    Returns
    -------
    float
        ``q`` in ``[0, 1]``.
    """
    if delta <= base_delta:
        return 1.0
    if delta >= 1.0:
        return 0.0
    return min(1.0, math.exp(-num_samples * _kl_floor(base_delta, delta)) * SAFETY)


def _overall_at(s: int, base: float, delta: float) -> float:
    return delta + tail_bound(s, base, delta) * (1.0 - delta)


@float64
def overall_delta_terms(num_samples: int, base_delta: float) -> tuple[float, float]:
    r"""The two terms of :func:`overall_delta`: the chosen :math:`\delta \ge \delta'` and its failure probability.

    :math:`q(s, \delta', \delta)` is the failure probability of Alg. 5 (a mechanism that is not
    :math:`(\varepsilon, \delta)`-DP passes verification with probability at most :math:`q`), so that the overall
    delta is :math:`\min(1, \delta + q(1 - \delta))`.

    The minimiser is located on a log grid and refined by golden-section search; the terms returned are those
    of the point chosen, so the overall delta they give is a valid bound whatever the search finds.

    Parameters
    ----------
    num_samples : int
        ``s``, ``>= 1``.
    base_delta : float
        :math:`\delta'` in ``(0, 1)``.

    Returns
    -------
    delta : float
        The chosen :math:`\delta`.
    q : float
        :math:`q(s, \delta', \delta)`.

    Raises
    ------
    ValueError
        If ``num_samples`` or ``base_delta`` is out of range.
    """
    s = check_int("num_samples", num_samples, low=1)
    base = check_real("base_delta", base_delta, low=0.0, high=1.0, low_open=True, high_open=True)
    grid = base * np.exp(np.linspace(0.0, math.log(1.0 / base), 400)[1:])
    vals = [_overall_at(s, base, float(d)) for d in grid]
    j = int(np.argmin(vals))
    lo = math.log(grid[max(j - 1, 0)]) if j > 0 else math.log(base)
    hi = math.log(grid[min(j + 1, len(grid) - 1)])
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    for _ in range(80):
        c1, c2 = b - g * (b - a), a + g * (b - a)
        if _overall_at(s, base, math.exp(c1)) < _overall_at(s, base, math.exp(c2)):
            b = c2
        else:
            a = c1
    mid = math.exp((a + b) / 2)
    d = float(grid[j]) if vals[j] <= _overall_at(s, base, mid) else mid
    return d, tail_bound(s, base, d)


@float64
def overall_delta(num_samples: int, base_delta: float) -> float:
    r"""The overall :math:`\delta_o = \min_{\delta \ge \delta'} \delta + q(s, \delta', \delta)(1 - \delta)`.

    :func:`overall_delta_terms` gives the two terms.

    Parameters
    ----------
    num_samples : int
        ``s``, ``>= 1``.
    base_delta : float
        :math:`\delta'` in ``(0, 1)``.

    Returns
    -------
    float
        :math:`\delta_o`, at most 1.
    """
    d, q = overall_delta_terms(num_samples, base_delta)
    return min(d + q * (1.0 - d), 1.0)


@float64
def base_delta_for_target(num_samples: int, target_delta: float) -> float:
    """The largest base delta whose overall delta with ``num_samples`` samples is ``<= target_delta``.

    Parameters
    ----------
    num_samples : int
        ``s``, ``>= 1``.
    target_delta : float
        In ``(0, 1)``.

    Returns
    -------
    float
        The base delta, found by bisection in log space on ``[target_delta e^-60, target_delta]``.

    Raises
    ------
    ValueError
        When no base delta works (too few samples; see :func:`min_samples`), or an argument is out of range.
    """
    s = check_int("num_samples", num_samples, low=1)
    t = check_real("target_delta", target_delta, low=0.0, high=1.0, low_open=True, high_open=True)
    lo, hi = math.log(t) - 60.0, math.log(t)
    if overall_delta(s, math.exp(lo)) > t:
        need = min_samples(t, t / 2)
        raise ValueError(f"num_samples={s} is too few to certify delta={t:g}; "
                         f"at least {need} samples are needed (with base_delta = delta/2)")
    for _ in range(100):
        mid = (lo + hi) / 2
        if overall_delta(s, math.exp(mid)) <= t:
            lo = mid
        else:
            hi = mid
    return math.exp(lo)


@float64
def sample_budget(statistical_delta: float, num_samples: int | None = None) -> tuple[int, float]:
    r"""``(num_samples, base_delta)`` of a verification with statistical overall delta ``<= statistical_delta``.

    The given ``num_samples`` with the largest base delta that works (:func:`base_delta_for_target`), or, without
    it, base delta = ``statistical_delta / 2`` and the fewest samples that work (:func:`min_samples`; the choice of
    Dong & Ganesh 2026, arXiv:2602.09338, App. A).

    Parameters
    ----------
    statistical_delta : float
        The statistical overall delta, in ``(0, 1)``.
    num_samples : int or None, optional
        A fixed sample count, ``>= 1``; ``None`` (default): the fewest that work.

    Returns
    -------
    num_samples : int
        The sample count.
    base_delta : float
        The base delta :math:`\delta'` to verify against.

    Raises
    ------
    ValueError
        If ``num_samples`` is too few for ``statistical_delta`` (the message gives the number needed), or an
        argument is out of range.
    """
    if num_samples is None:
        base = statistical_delta / 2
        return min_samples(statistical_delta, base), base
    s = check_int("num_samples", num_samples, low=1)
    return s, base_delta_for_target(s, statistical_delta)  # raises with the number needed when too few


@float64
def min_samples(target_delta: float, base_delta: float) -> int:
    """The smallest ``s`` with ``overall_delta(s, base_delta) <= target_delta``.

    Parameters
    ----------
    target_delta : float
        In ``(0, 1)``.
    base_delta : float
        In ``(0, target_delta)``.

    Returns
    -------
    int
        ``s >= 1``.

    Raises
    ------
    ValueError
        If an argument is out of range, or no sample size up to ``2^62`` reaches the target.
    """
    t = check_real("target_delta", target_delta, low=0.0, high=1.0, low_open=True, high_open=True)
    base = check_real("base_delta", base_delta, low=0.0, high=t, low_open=True, high_open=True)
    hi = 1
    while overall_delta(hi, base) > t:
        hi *= 2
        if hi > 2**62:
            raise ValueError("no sample size reaches the target delta")
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if overall_delta(mid, base) <= t:
            hi = mid
        else:
            lo = mid
    return hi


@float64
def kl_upper_confidence(mean: float, num_samples: int, alpha: float) -> float:
    """Largest ``d`` with ``exp(-s KL(mean || d)) >= alpha``: a (1 - alpha) upper confidence bound.

    On the mean of ``[0, 1]``-valued i.i.d. samples (Chernoff; valid for any distribution on [0, 1]).

    Parameters
    ----------
    mean : float
        The empirical mean (clipped to ``[0, 1]``).
    num_samples : int
        ``s``; ``<= 0`` gives 1.
    alpha : float
        In ``(0, 1)``.

    Returns
    -------
    float
        The bound in ``[mean, 1]``, raised by a relative safety factor.
    """
    if num_samples <= 0:
        return 1.0
    m = min(max(mean, 0.0), 1.0)
    target = math.log(1.0 / alpha) / num_samples
    lo, hi = m, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _kl_floor(m, mid) <= target:
            lo = mid
        else:
            hi = mid
    return min(1.0, hi * SAFETY)


@float64
def kl_lower_confidence(mean: float, num_samples: int, alpha: float) -> float:
    """Smallest ``d`` with ``exp(-s KL(mean || d)) >= alpha``: a (1 - alpha) lower confidence bound.

    Parameters
    ----------
    mean : float
        The empirical mean (clipped to ``[0, 1]``).
    num_samples : int
        ``s``; ``<= 0`` gives 0.
    alpha : float
        In ``(0, 1)``.

    Returns
    -------
    float
        The bound in ``[0, mean]``, lowered by a relative safety factor.
    """
    if num_samples <= 0:
        return 0.0
    m = min(max(mean, 0.0), 1.0)
    if m == 0.0:
        return 0.0
    target = math.log(1.0 / alpha) / num_samples
    lo, hi = 0.0, m
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid > 0 and _kl_floor(m, mid) <= target:
            hi = mid
        else:
            lo = mid
    return max(0.0, lo / SAFETY)
