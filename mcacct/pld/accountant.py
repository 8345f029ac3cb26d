"""The public API of the PLD accountant: :func:`pld_delta`, :func:`pld_epsilon`, :func:`deltas_for_sigmas`,
:func:`epsilons_for_sigmas` and :func:`pld_calibrate` (pessimistic: every reported delta is an upper bound, every
epsilon and sigma rounded up)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from mcacct.core.platform import ensure_compilation_cache
from mcacct.pld.constants import DEFAULT_H, Discretization
from mcacct.pld.checks import check_certifiable
from mcacct.pld.plan import result, run
from mcacct.pld.search import crossing, guided_ladder
from mcacct.pld.specs import Canonical, MechanismOrFactory, MechanismSpec, PLDResult, SPEC_TYPES, canonical
from mcacct.pld.checks import (check_delta, check_discretization, check_epsilon, check_integer, check_positive,
                                check_value_interval, is_real_number, plain)
from mcacct.core.precision import float64


@float64
def pld_delta(mechanism: MechanismSpec, epsilon: float, *,
              value_discretization_interval: float = DEFAULT_H,
              discretization: Discretization = "connect_dots",
              estimate_error: bool = True) -> PLDResult:
    r"""Upper bound on :math:`\delta(\varepsilon)` of a composed mechanism.

    .. math::

        \delta(\varepsilon)=\max_{\mathrm{add},\mathrm{remove}}
        \Big[\sum_j \max\{0, 1-e^{\varepsilon-\ell_j}\}\,\omega^{*T}_j
        + \omega^{*T}_{\infty}\Big],

    where :math:`\omega^{*T}` is the :math:`T`-fold FFT self-convolution of the
    pessimistically discretised single-step PLD :math:`\omega`, computed on the
    exponentially tilted pmf; the reported value is
    :math:`(1+\rho)(\cdot)+r_k` with the rigorous FFT round-off bound
    :math:`r_k=(1+\rho)e_2M(\lambda)^Te^{-\lambda\ell_k}\sqrt{\min\{N-k,G_\lambda\}}`
    (module docstring, "FFT round-off"; reported as ``roundoff_bound``).

    Parameters
    ----------
    mechanism : MechanismSpec
        One of the ``*Spec`` dataclasses of this module.
    epsilon : float
        :math:`\varepsilon\ge0`.
    value_discretization_interval : float, default 1e-4
        Loss grid spacing :math:`h\in(0, 0.1]`.
    discretization : {"connect_dots", "round_up"}
        Pessimistic discretisation rule (see module docstring).
    estimate_error : bool, default True
        Also run with :math:`h/2` and report :math:`2|\delta_h-\delta_{h/2}|`.

    Returns
    -------
    PLDResult

    Raises
    ------
    ValueError
        For an unknown mechanism, ``epsilon < 0`` or a bad grid spacing, and, before anything is allocated,
        when the composition would need more working memory than ``MEMORY_BUDGET_BYTES`` of
        :mod:`mcacct.pld.constants` (4 GiB; ``$MCACCT_PLD_MEMORY_BUDGET`` overrides it).
    """
    canon = canonical(mechanism)
    eps = check_epsilon(epsilon)
    h = check_value_interval(value_discretization_interval)
    method = check_discretization(discretization)
    return result(canon, float(mechanism.sigma), h, method, eps, 0.5, estimate_error, "delta")


@float64
def pld_epsilon(mechanism: MechanismSpec, delta: float, *,
                value_discretization_interval: float = DEFAULT_H,
                discretization: Discretization = "connect_dots",
                estimate_error: bool = True) -> PLDResult:
    r"""Upper bound on :math:`\varepsilon(\delta)` of a composed mechanism.

    :math:`\varepsilon(\delta)=\min\{\varepsilon\ge0:\delta(\varepsilon)\le\delta\}`,
    found by a search over the loss grid: on
    :math:`(\ell_{k-1},\ell_k]` the discrete curve is
    :math:`\delta(\varepsilon)=S_0(k)-e^{\varepsilon}S_1(k)+\omega_\infty` with
    :math:`S_0(k)=\sum_{j\ge k}\omega_j`, :math:`S_1(k)=\sum_{j\ge k}\omega_j e^{-\ell_j}`,
    so the crossing is solved exactly -- in loss differences, :math:`e^{\varepsilon-\ell_k}` against
    :math:`\sum_{j\ge k}\omega_je^{-(\ell_j-\ell_k)}`, so losses beyond 700 neither overflow nor underflow
    (:func:`mcacct.pld.kernels.query.query_epsilon`). Returns ``inf`` when
    :math:`\delta` is below the mass at infinity.

    Parameters
    ----------
    mechanism : MechanismSpec
        One of the ``*Spec`` dataclasses of this module.
    delta : float
        :math:`\delta\in(0,1)`.
    value_discretization_interval, discretization, estimate_error
        As in :func:`pld_delta` (the error estimate is :math:`2|\varepsilon_h-\varepsilon_{h/2}|`).

    Returns
    -------
    PLDResult

    Raises
    ------
    ValueError
        For an unknown mechanism, ``delta`` outside (0, 1) or a bad grid spacing, and when
        ``delta`` is above the mass at infinity but below the smallest delta the accountant
        can certify (FFT round-off bound); a ``delta`` below the mass at infinity gives
        ``epsilon = inf``. Above the memory budget: as :func:`pld_delta`.
    """
    canon = canonical(mechanism)
    dl = check_delta(delta)
    h = check_value_interval(value_discretization_interval)
    method = check_discretization(discretization)
    return result(canon, float(mechanism.sigma), h, method, 0.0, dl, estimate_error, "epsilon")


def _ladder_canonical(mechanism: MechanismOrFactory) -> tuple[Canonical, Callable[[float], object]]:
    if isinstance(mechanism, SPEC_TYPES):
        def factory(sg: float, _m=mechanism):
            return dataclasses.replace(_m, sigma=float(sg))
        return canonical(mechanism), factory
    if callable(mechanism):
        c1 = canonical(mechanism(1.0))
        c2 = canonical(mechanism(2.0))
        if c1.key != c2.key:
            raise ValueError(
                "mechanism factory must only change sigma (its sensitivities, probabilities "
                "and number of compositions must not depend on sigma)"
            )
        return c1, mechanism
    raise ValueError(f"mechanism must be a *Spec instance or a callable sigma -> spec, got {mechanism!r}")


def _listed(x) -> str:
    """``x`` for a message: a list of plain numbers when it is array-like, else its plain repr."""
    try:
        return repr(np.asarray(x, dtype=float).tolist())
    except (TypeError, ValueError):
        return repr(plain(x))


def _check_sigmas(sigmas: Sequence[float]) -> np.ndarray:
    try:
        arr = np.atleast_1d(np.asarray(sigmas, dtype=float))
    except (TypeError, ValueError):
        raise ValueError(f"sigmas must be a non-empty 1-D sequence of finite numbers > 0, got {sigmas!r}") from None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"sigmas must be a non-empty 1-D sequence of finite numbers > 0, got {_listed(sigmas)}")
    return arr


@float64
def deltas_for_sigmas(mechanism: MechanismOrFactory, sigmas: Sequence[float], epsilon: float, *,
                      value_discretization_interval: float = DEFAULT_H,
                      discretization: Discretization = "connect_dots") -> np.ndarray:
    r"""Vectorised :math:`\delta(\varepsilon)` for a ladder of noise levels.

    All sigmas are evaluated together: the discretisation and the FFT
    composition are ``jax.vmap``-ed over :math:`\sigma` (in memory-bounded
    chunks of equal static shape).

    Parameters
    ----------
    mechanism : MechanismSpec or callable
        A spec (its ``sigma`` is replaced) or a factory ``sigma -> spec``.
    sigmas : sequence of float
        Noise levels (> 0).
    epsilon : float
        :math:`\varepsilon\ge0`.

    Returns
    -------
    numpy.ndarray
        :math:`\max_{\mathrm{add,remove}}\delta(\varepsilon)` per sigma.
    """
    canon, _ = _ladder_canonical(mechanism)
    arr = _check_sigmas(sigmas)
    eps = check_epsilon(epsilon)
    h = check_value_interval(value_discretization_interval)
    method = check_discretization(discretization)
    return run(canon, arr, h, method, eps, 0.5, "delta")["delta"].max(axis=1)


@float64
def epsilons_for_sigmas(mechanism: MechanismOrFactory, sigmas: Sequence[float], delta: float, *,
                        value_discretization_interval: float = DEFAULT_H,
                        discretization: Discretization = "connect_dots") -> np.ndarray:
    r"""Vectorised :math:`\varepsilon(\delta)` for a ladder of noise levels.

    See :func:`deltas_for_sigmas` (same batching over sigma).

    Parameters
    ----------
    mechanism : MechanismSpec or callable
        A spec (its ``sigma`` is replaced) or a factory ``sigma -> spec``.
    sigmas : sequence of float
        Noise levels (> 0).
    delta : float
        :math:`\delta\in(0,1)`.
    value_discretization_interval, discretization
        As in :func:`pld_delta`.

    Returns
    -------
    numpy.ndarray
        :math:`\max_{\mathrm{add,remove}}\varepsilon(\delta)` per sigma.

    Raises
    ------
    ValueError
        For an invalid argument, or when ``delta`` is above the mass at infinity but below the smallest delta the
        accountant can certify for some sigma.
    """
    canon, _ = _ladder_canonical(mechanism)
    arr = _check_sigmas(sigmas)
    dl = check_delta(delta)
    h = check_value_interval(value_discretization_interval)
    method = check_discretization(discretization)
    r = run(canon, arr, h, method, 0.0, dl, "epsilon")
    check_certifiable(r, dl, arr)
    return r["epsilon"].max(axis=1)


def _log_phi(x: float) -> float:
    """log of the standard normal CDF; the asymptotic series far in the left tail (no underflow)."""
    if x > -30.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    x2 = x * x
    return -0.5 * x2 - math.log(-x) - 0.5 * math.log(2 * math.pi) + math.log1p(-1 / x2 + 3 / (x2 * x2))


def _gaussian_delta(mu: float, eps: float) -> float:
    """Exact delta(eps) of the Gaussian PLD N(mu^2/2, mu^2) (mu = Delta/sigma); e^eps Phi(.) in log space, so a
    large eps does not overflow."""
    def phi(x: float) -> float:
        return 0.5 * math.erfc(-x / math.sqrt(2.0))
    return phi(-eps / mu + mu / 2) - math.exp(min(eps + _log_phi(-eps / mu - mu / 2), 700.0))


def _gaussian_mu(eps: float, delta: float) -> float:
    """Largest mu with delta_mu(eps) <= delta for the mu-Gaussian (mu-GDP) curve."""
    lo, hi = 1e-8, 1.0
    while _gaussian_delta(hi, eps) < delta and hi < 1e6:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if _gaussian_delta(mid, eps) < delta:
            lo = mid
        else:
            hi = mid
    return lo


def _clt_sigma_estimate(canon: Canonical, mu: float, sigma_hi: float) -> float:
    r"""Heuristic start for calibration: solve :math:`T\chi^2(P_\sigma\|Q_\sigma)=\mu^2`.

    For a scalar MoG, :math:`1+\chi^2=\sum_{i,j}p_ip_je^{c_ic_j/\sigma^2}`; the
    CLT makes the composition approximately :math:`\mu`-GDP with
    :math:`\mu^2=T\chi^2` (only used to centre the first ladder).
    """
    logpp = np.log(canon.p)[:, None] + np.log(canon.p)[None, :]
    cc = canon.c[:, None] * canon.c[None, :]
    target = math.log1p(mu * mu / canon.steps)

    def log1p_chi2(sg: float) -> float:
        z = logpp + cc / (sg * sg)
        m = z.max()
        return float(m + math.log(np.exp(z - m).sum()))

    lo, hi = 1e-3 * sigma_hi, sigma_hi
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if log1p_chi2(mid) > target:
            lo = mid
        else:
            hi = mid
    return hi


def _round_up_sig(x: float, digits: int = 6) -> float:
    if x <= 0:
        return x
    e = math.floor(math.log10(x)) - (digits - 1)
    m = math.ceil(x / 10.0 ** e - 1e-9)
    return float(f"{m}e{e}")


@float64
def pld_calibrate(mechanism: MechanismOrFactory, epsilon: float, delta: float, *,
                  ladder_size: int = 8, rtol: float = 1e-4,
                  sigma_bounds: tuple[float, float] | None = None,
                  value_discretization_interval: float = DEFAULT_H,
                  discretization: Discretization = "connect_dots") -> float:
    r"""Smallest certified noise :math:`\sigma` meeting a target :math:`(\varepsilon,\delta)`.

    Solves :math:`\min\{\sigma: \delta_\sigma(\varepsilon)\le\delta\}` by
    ladder bisection: each round evaluates ``ladder_size`` sigmas at once with
    :func:`deltas_for_sigmas` (vmapped over sigma). The first ladder is centred
    on a CLT estimate and moved (with growing span) until it brackets the
    crossing. The next ladder's rungs sit ``0.9 rtol`` apart around the
    crossing interpolated from the bracketing ladder's deltas
    (:func:`mcacct.pld.search.guided_ladder`), so that two ladders usually
    suffice; while the bracket :math:`[\sigma_{\rm fail}, \sigma_{\rm pass}]`
    is wider than ``rtol`` it is then re-laddered uniformly. The
    :math:`T`-fold Gaussian mechanism with the largest sensitivity dominates
    every supported mixture, so its analytic calibration caps the search. The
    returned value is the smallest rung whose pessimistic PLD :math:`\delta`
    was checked to be :math:`\le\delta`, rounded *up* to 6 significant digits;
    as :math:`\delta_\sigma(\varepsilon)` is non-increasing in :math:`\sigma`
    (post-processing), the result is certified.

    Parameters
    ----------
    mechanism : MechanismSpec or callable
        A spec (its ``sigma`` is ignored) or a factory ``sigma -> spec``.
    epsilon : float
        Target :math:`\varepsilon\ge0`.
    delta : float
        Target :math:`\delta\in(0,1)`.
    ladder_size : int, default 8
        Rungs per ladder (>= 2).
    rtol : float, default 1e-4
        Relative bracket width at which to stop, in [1e-12, 0.5).
    sigma_bounds : (float, float), optional
        Search range ``(lo, hi)``; by default ``(c_max/12, Gaussian bound)``.
    value_discretization_interval, discretization
        As in :func:`pld_delta`.

    Returns
    -------
    float
        Certified sigma.

    Raises
    ------
    ValueError
        For invalid inputs or when the target cannot be met inside the search
        range; when ``delta`` is below the mass at infinity plus the FFT round-off
        bound at the top of the range, the message says so ("is below what the PLD
        accountant can certify here").
    """
    ensure_compilation_cache()  # the Python API's persistent cache (a no-op where the application set its own)
    canon, _ = _ladder_canonical(mechanism)
    eps = check_epsilon(epsilon)
    dl = check_delta(delta)
    h = check_value_interval(value_discretization_interval)
    method = check_discretization(discretization)
    n = check_integer("ladder_size", ladder_size, 2)
    if not is_real_number(rtol) or not 1e-12 <= rtol < 0.5:  # below, adjacent floats: the bisection would not end
        raise ValueError(f"rtol must be in [1e-12, 0.5), got {plain(rtol)!r}")

    last: dict = {}
    batches: dict = {}  # one record per search: later passes reuse the batch sizes compiled by earlier ones

    def passes(sig: np.ndarray) -> np.ndarray:
        last.update(run(canon, sig, h, method, eps, 0.5, "delta", batches))
        return last["delta"].max(axis=1) <= dl

    cmax = float(canon.c.max())
    mu = _gaussian_mu(eps, dl)
    sigma_gauss = math.sqrt(canon.steps) * cmax / mu
    if sigma_bounds is not None:
        if not isinstance(sigma_bounds, (tuple, list)) or len(sigma_bounds) != 2:
            raise ValueError(f"sigma_bounds must be a pair (lo, hi), got {_listed(sigma_bounds)}")
        floor = check_positive("sigma_bounds[0]", sigma_bounds[0])
        cap = check_positive("sigma_bounds[1]", sigma_bounds[1])
        if not floor < cap:
            raise ValueError(f"sigma_bounds must satisfy 0 < lo < hi, got {_listed(sigma_bounds)}")
    else:
        floor = cmax / 12.0
        cap = max(1.02 * sigma_gauss, 2.0 * floor)
    start = min(max(_clt_sigma_estimate(canon, mu, sigma_gauss), floor), cap)
    lo, hi = None, None  # lo: known failing rung, hi: known passing rung
    span = 1.25
    a, b = max(start / span, floor), min(start * span, cap)
    for _ in range(60):
        ladder = np.geomspace(a, b, n)
        ok = passes(ladder)
        if ok.any():
            i = int(np.argmax(ok))
            hi = float(ladder[i])
            if i > 0:
                lo = float(ladder[i - 1])
        else:
            lo = float(ladder[-1])
        if lo is not None and hi is not None:
            break
        span = span * span
        if hi is None:  # all failed: move up
            if lo >= cap * (1 - 1e-12):
                inf_c, rb_c = float(last["inf"][-1].max()), float(last["rb_delta"][-1].max())
                if dl < 2.0 * (inf_c + rb_c):
                    raise ValueError(
                        f"delta={dl:g} is below what the PLD accountant can certify here (round-off "
                        f"bound {rb_c:.2g}, mass at +infinity incl. the window tail bound {inf_c:.2g} "
                        f"at epsilon={eps:g}, sigma={cap:g}); increase delta")
                raise ValueError(
                    f"target (epsilon={eps:g}, delta={dl:g}) not met at sigma={cap:g}; "
                    "the target is too small for this search range"
                )
            a, b = lo, min(lo * span, cap)
        else:  # lowest rung passed: move down
            if hi <= floor * (1 + 1e-12):
                raise ValueError(
                    f"target (epsilon={eps:g}, delta={dl:g}) is met even at sigma={floor:g}, the "
                    "lower end of the search range; pass sigma_bounds (small sigma needs a finer "
                    "loss grid and a larger value_discretization_interval may be required)"
                )
            a, b = max(hi / span, floor), hi
    else:  # pragma: no cover - defensive
        raise ValueError("calibration failed to bracket the target")
    # the bracketing ladder's deltas place the next rungs around the crossing (mcacct/pld/search.py); any rungs do
    guess = crossing(ladder, last["delta"].max(axis=1), dl, lo, hi) if (hi - lo) > rtol * hi else None
    guided = None if guess is None else guided_ladder(guess, lo, hi, n, rtol)
    while (hi - lo) > rtol * hi:
        ladder = np.linspace(lo, hi, n + 2)[1:-1] if guided is None else guided
        guided = None
        ok = passes(ladder)
        if ok.any():
            i = int(np.argmax(ok))
            hi = float(ladder[i])
            lo = float(ladder[i - 1]) if i > 0 else lo
        else:
            lo = float(ladder[-1])
    return _round_up_sig(hi)
