r"""Building blocks of DPIS noise plans (:mod:`mcacct.dpis.calibrate`): the events of a plan, their epsilon by
either accountant, and a monotone bisection.

A plan fixes, per epoch :math:`e`, the fraction :math:`\kappa_e` (the floor of :math:`\tilde K_e/(NC)`) and the
effective noise multiplier :math:`s_e`; its gradient releases are ``PoissonGaussianSpec(b / (kappa_e N), s_e)``
(:func:`mcacct.dpis.pairs.iteration_spec` at :math:`\tilde K = \kappa_e NC`, :math:`\tilde N = N`), next to the
auxiliary releases of Wei, Bao, Xiao & Yang 2022 (arXiv:2210.09634, eqs. 10-11 and Alg. 1 line 35).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from mcacct import pld
from mcacct.dpis.pairs import count_spec, norm_sum_spec, norm_sum_star_spec
from mcacct.dpis.rdp import DEFAULT_ORDERS, rdp_of_events, rdp_to_epsilon
from mcacct.pld.vocabulary import merge_events
from mcacct.core.validate import check_choice, check_int, check_real, parse_floats
from mcacct.core.precision import float64

__all__ = ["ACCOUNTANTS", "check_kappas", "aux_events", "plan_events", "plan_epsilon", "bisect_smallest"]

ACCOUNTANTS = ("pld", "rdp")


def check_kappas(kappas: Any, epochs: int) -> tuple[float, ...]:
    """Check ``kappas`` and expand it to one value per epoch.

    Parameters
    ----------
    kappas : float, str or sequence of float
        A number, a comma-separated string or a sequence of length 1 or ``epochs``.
    epochs : int
        Number of epochs.

    Returns
    -------
    tuple of float
        ``epochs`` values in :math:`(0, 1]`.

    Raises
    ------
    ValueError
        If the number of values is neither 1 nor ``epochs``, or a value is outside :math:`(0, 1]`.
    """
    vals = parse_floats("kappas", kappas)
    if len(vals) == 1:
        vals = vals * epochs
    if len(vals) != epochs:
        raise ValueError(f"kappas must hold 1 or epochs = {epochs} values; got {len(vals)}")
    for i, v in enumerate(vals):
        check_real(f"kappas[{i}]", v, low=0.0, high=1.0, low_open=True)
    return tuple(float(v) for v in vals)


@float64
def aux_events(dataset_size: int, batch_size: float, epochs: int, *, sigma_n: float | None = None,
               sigma_k: float | None = None, p_k: float | None = None, k_star_releases: int = 0) -> list:
    r"""The auxiliary events of a plan.

    :math:`\tilde N` (``sigma_n``), one :math:`K'` per epoch (``sigma_k``, rate ``p_k``, default :math:`b/N`) and
    ``k_star_releases`` :math:`\tilde K^*` (``sigma_k``).

    Parameters
    ----------
    dataset_size : int
        Public planning size :math:`N \ge 1`.
    batch_size : float
        Expected batch size :math:`b > 0`.
    epochs : int
        Number of epochs (``>= 1``), the count of :math:`K'` releases.
    sigma_n : float, optional
        Noise of :math:`\tilde N`; ``None``: no release.
    sigma_k : float, optional
        :math:`\sigma_K` of :math:`K'` and :math:`\tilde K^*`; ``None``: no such release.
    p_k : float, optional
        Sampling rate of :math:`K'`; default :math:`\min(b/N, 1)`.
    k_star_releases : int, default 0
        Number of :math:`\tilde K^*` releases (needs ``sigma_k``).

    Returns
    -------
    list of mcacct.pld.Event
        The auxiliary events (possibly empty).

    Raises
    ------
    ValueError
        If an argument is out of range, or ``k_star_releases`` is given without ``sigma_k``.
    """
    n = check_int("dataset_size", dataset_size, low=1)
    b = check_real("batch_size", batch_size, low=0.0, low_open=True)
    out = []
    if sigma_n is not None:
        out.append(pld.Event(count_spec(sigma_n), 1))
    if sigma_k is not None:
        out.append(pld.Event(norm_sum_spec(min(b / n, 1.0) if p_k is None else p_k, sigma_k),
                             check_int("epochs", epochs, low=1)))
        if k_star_releases:
            out.append(pld.Event(norm_sum_star_spec(sigma_k), k_star_releases))
    elif k_star_releases:
        raise ValueError("k_star_releases needs sigma_k")
    return out


@float64
def plan_events(dataset_size: int, batch_size: float, iterations_per_epoch: int, kappas: Sequence[float],
                multipliers: Sequence[float], *, sigma_n: float | None = None, sigma_k: float | None = None,
                p_k: float | None = None, k_star_releases: int = 0) -> list:
    r"""The events of a plan, equal events merged.

    :func:`aux_events` and per epoch :math:`T\times` ``PoissonGaussianSpec(b / (kappa_e N), s_e)``.

    Parameters
    ----------
    dataset_size : int
        Public planning size :math:`N \ge 1`.
    batch_size : float
        Expected batch size :math:`b > 0`.
    iterations_per_epoch : int
        :math:`T \ge 1`.
    kappas : sequence of float
        :math:`\kappa_e` per epoch, each ``>= batch_size / dataset_size`` (sampling rate at most 1).
    multipliers : sequence of float
        :math:`s_e > 0` per epoch, as many as ``kappas``.
    sigma_n, sigma_k, p_k, k_star_releases
        As in :func:`aux_events`.

    Returns
    -------
    list of mcacct.pld.Event
        The plan's events.

    Raises
    ------
    ValueError
        If an argument is out of range, or ``kappas`` and ``multipliers`` are empty or differ in length.
    """
    n = check_int("dataset_size", dataset_size, low=1)
    b = check_real("batch_size", batch_size, low=0.0, low_open=True)
    t = check_int("iterations_per_epoch", iterations_per_epoch, low=1)
    if len(kappas) != len(multipliers) or not kappas:
        raise ValueError("kappas and multipliers must be non-empty and of equal length")
    out = aux_events(n, b, len(kappas), sigma_n=sigma_n, sigma_k=sigma_k, p_k=p_k, k_star_releases=k_star_releases)
    for i, (k, s) in enumerate(zip(kappas, multipliers)):
        q = b / (k * n)
        if q > 1.0:
            raise ValueError(f"kappas[{i}] must be >= batch_size/dataset_size = {b / n!r} (sampling rate <= 1); "
                             f"got {k!r}")
        out.append(pld.Event(pld.PoissonGaussianSpec(q, check_real("multiplier", s, low=0.0, low_open=True)), t))
    return merge_events(out)


@float64
def plan_epsilon(events: list, delta: float, accountant: str = "pld", *, value_discretization_interval: float =
                 1e-3, orders: Sequence[int] = DEFAULT_ORDERS) -> tuple[float, int | None]:
    r"""``(epsilon, order)`` of ``events`` at ``delta``.

    PLD (max over add/remove, ``order`` None) or RDP with Lemma 2.5 (the minimising order).

    Parameters
    ----------
    events : list of mcacct.pld.Event
        The events.
    delta : float
        :math:`\delta\in(0, 1)`.
    accountant : {"pld", "rdp"}, default "pld"
        The accountant.
    value_discretization_interval : float, default 1e-3
        Loss grid spacing of the PLD accountant.
    orders : sequence of int
        RDP orders (``>= 2``) of the RDP accountant.

    Returns
    -------
    epsilon : float
        The epsilon at ``delta``.
    order : int or None
        The minimising RDP order; ``None`` for PLD.

    Raises
    ------
    ValueError
        For an unknown accountant or an invalid argument.
    """
    check_choice("accountant", accountant, ACCOUNTANTS)
    if accountant == "pld":
        r = pld.events_epsilon(events, delta, value_discretization_interval=value_discretization_interval,
                               estimate_error=False)
        return float(r.epsilon), None
    r = rdp_to_epsilon(rdp_of_events(events, orders), orders, delta)
    return r.epsilon, r.order


@float64
def bisect_smallest(ok: Callable[[float], bool], guess: float, rtol: float = 1e-3, what: str = "sigma",
                    step: float = 1.5) -> float:
    """The smallest :math:`x > 0` (to relative width ``rtol``) with ``ok(x)``, for ``ok`` monotone.

    ``ok`` is false below a threshold and true above; the returned value is one where ``ok`` was checked true.
    Geometric bracket from ``guess`` (growing/shrinking by ``step``, at most 60 times), then geometric bisection.

    Parameters
    ----------
    ok : callable
        ``ok(x) -> bool``, monotone in ``x``.
    guess : float
        Starting point, ``> 0``.
    rtol : float, default 1e-3
        Relative width of the final bracket, in ``(0, 0.5)``.
    what : str, default "sigma"
        Name of ``x`` in messages.
    step : float, default 1.5
        Bracketing factor, ``> 1``.

    Returns
    -------
    float
        The upper end of the final bracket.

    Raises
    ------
    ValueError
        If an argument is out of range, or no bracket is found within 60 steps (no ``x`` up to the largest tried
        meets the target, or every ``x`` down to the smallest tried does).
    """
    hi = check_real("guess", guess, low=0.0, low_open=True)
    rtol = check_real("rtol", rtol, low=0.0, high=0.5, low_open=True, high_open=True)
    step = check_real("step", step, low=1.0, low_open=True)
    for _ in range(60):
        if ok(hi):
            break
        hi *= step
    else:
        raise ValueError(f"no {what} up to {hi:.4g} meets the target")
    lo = hi / step
    for _ in range(60):
        if not ok(lo):
            break
        hi, lo = lo, lo / step
    else:
        raise ValueError(f"every {what} down to {lo:.4g} meets the target (is the target trivial?)")
    while hi / lo > 1.0 + rtol:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi
