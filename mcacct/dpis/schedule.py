r"""The paper's adaptive noise schedule (Sec. 4.2 of Wei, Bao, Xiao & Yang 2022, arXiv:2210.09634), under RDP.

At the start of epoch :math:`e` DPIS knows the realized :math:`\kappa_e = \tilde K_e/(\tilde NC)` and picks the
smallest :math:`\sigma_{G,e}` whose total fits the budget when

* the past epochs cost what they cost (their realized :math:`\kappa_j, \sigma_{G,j}`),
* epoch :math:`e` costs :math:`T` iterations at :math:`(\kappa_e, \sigma_{G,e})`,
* every *future* epoch costs :math:`T` iterations at :math:`\sigma_{G,e}` and the worst case :math:`\kappa = 1`
  (:math:`\tilde K = \tilde NC`) in phase 1 (the first :math:`a_E E` epochs), or at the current :math:`\kappa_e`
  in phase 2.

One DPIS iteration at :math:`(\kappa, \sigma_G)` has the RDP of the subsampled Gaussian with
:math:`q = b/(\kappa\tilde N)` and multiplier :math:`\sigma_G/\kappa` (eq. 13).

Soundness. The choice depends on released values, so plain RDP composition does not cover it. It is covered
by the Renyi filter (Feldman & Zrnic 2021, arXiv:2008.11193; Lecuyer 2021, arXiv:2103.01379) **at one order
fixed in advance**: if the adaptively chosen per-step RDPs at order :math:`\alpha^*` always sum to at most
:math:`B`, the run is :math:`(\alpha^*, B)`-RDP. With ``fixed_order=True`` (default) the budget is checked at
:math:`\alpha^*` only, the order at which the worst-case plan (every :math:`\kappa = 1`, constant
:math:`\sigma_G`) attains its Lemma 2.5 optimum, with :math:`B = \varepsilon - \mathrm{offset}(\alpha^*)`; every
epoch keeps the realized sum at :math:`\alpha^*` below :math:`B` (the last epoch has no future term), so the run
is :math:`(\varepsilon, \delta)`-DP. With ``fixed_order=False`` the budget is :math:`\min_\alpha` of eq. (2) as in
the paper: the minimising order depends on the run, so this is the paper's ex-post accounting and not a
guarantee.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from mcacct.dpis.calibrate import calibrate_plan
from mcacct.dpis.plan import aux_events, bisect_smallest, check_kappas
from mcacct.dpis.rdp import DEFAULT_ORDERS, check_orders, conversion_offset, rdp_of_events, rdp_poisson_gaussian
from mcacct.core.validate import check_int, check_real
from mcacct.core.precision import float64

__all__ = ["PaperSchedule", "paper_schedule"]


class PaperSchedule(NamedTuple):
    r"""The paper's schedule: ``sigma_g`` per epoch, the phase of every epoch (1 or 2), the RDP order of the
    filter (``None``: minimised per epoch, ex post), the RDP :math:`\varepsilon` of the realized run at that
    order (or minimised), and ``guarantee`` (True only with a fixed order)."""

    sigma_g: tuple
    phases: tuple
    order: int | None
    epsilon: float
    guarantee: bool


@float64
def paper_schedule(kappas: Any, dataset_size: float, batch_size: float, epochs: int, epsilon: float,
                   delta: float, *, iterations_per_epoch: int | None = None, a_e: float = 1.0,
                   sigma_n: float | None = None, sigma_k: float | None = None, p_k: float | None = None,
                   k_star_releases: int = 0, orders: Sequence[int] = DEFAULT_ORDERS,
                   fixed_order: bool = True, order: int | None = None,
                   rejection_k: float | None = None) -> PaperSchedule:
    r"""The paper's :math:`\sigma_{G,e}` for a realized (or anticipated) :math:`\kappa_e` trajectory.

    With :math:`R_\alpha(q, \sigma)` the RDP at order :math:`\alpha` of one Poisson-subsampled Gaussian step, the
    RDP budget :math:`B(\alpha) = \varepsilon - \mathrm{offset}(\alpha)` and :math:`S_e(\alpha)` the RDP spent
    before epoch :math:`e` (the auxiliary releases included), epoch :math:`e` takes the smallest :math:`s` (by
    bisection, relative tolerance ``1e-6``) with

    .. math:: S_e(\alpha) + T R_\alpha\Big(\frac{b}{\kappa_e \tilde N}, \frac{s}{\kappa_e}\Big)
              + (E - e - 1)\, T R_\alpha\Big(\frac{b}{\kappa' \tilde N}, \frac{s}{\kappa'}\Big) \le B(\alpha)

    for some order :math:`\alpha` (just :math:`\alpha^*` with ``fixed_order``), :math:`\kappa' = 1` in phase 1 and
    :math:`\kappa_e` in phase 2 (epochs are counted from :math:`e = 0`). Every rate :math:`b/(\kappa_e\tilde N)` is
    at most 1: a smaller :math:`\kappa_e` (:math:`\tilde K < bC`) would cap the sampling probabilities at 1, and
    the capped mechanism is not the pair of eq. (13), so such a :math:`\kappa_e` is refused.

    Parameters
    ----------
    kappas : float or sequence of float
        :math:`\kappa_e = \tilde K_e/(\tilde NC) \in [b/\tilde N, 1]` per epoch (one value: all epochs); with
        ``rejection_k`` :math:`k`, :math:`\kappa_e \ge kb/\tilde N`.
    dataset_size : float
        :math:`\tilde N` for the rates :math:`b/(\kappa_e\tilde N)` (the public planning size :math:`N` for an
        anticipated trajectory), :math:`\ge b`.
    batch_size : float
        :math:`b > 0`.
    epochs : int
        :math:`E \ge 1`.
    epsilon, delta : float
        The budget.
    iterations_per_epoch : int, optional
        :math:`T`; default :math:`\lfloor\tilde N/b\rfloor`. :math:`T` must be a fixed public constant: pass the
        planned :math:`T` when ``dataset_size`` is the released :math:`\tilde N` (docs/dpis.md).
    a_e : float, default 1
        Phase divider :math:`a_E \in [0, 1]` (Table 2: 1 for FMNIST, 0.8 otherwise).
    sigma_n, sigma_k, p_k, k_star_releases
        Auxiliary releases (:func:`mcacct.dpis.calibrate.aux_events`).
    orders : sequence of int
        RDP orders.
    fixed_order : bool, default True
        Check the budget at one order fixed in advance (a Renyi filter; sound), else at the best order per epoch
        (the paper; ex post).
    order : int, optional
        The filter's order :math:`\alpha^*` (in ``orders``). Default: the Lemma 2.5 optimum of the worst-case plan
        at ``dataset_size``; for a guarantee it must not depend on private data, so pass the order computed from
        the public planning size when ``dataset_size`` is the released :math:`\tilde N`.
    rejection_k : float, optional
        Rejection-sampling multiplier :math:`k \ge 1` (Sec. 3.4): requires :math:`\kappa_e\tilde N \ge kb`
        (:math:`\tilde K \ge kbC`) in every epoch.

    Returns
    -------
    PaperSchedule
        ``sigma_g`` and ``phases`` per epoch (phase 1 for the first :math:`\lfloor a_E E \rfloor` epochs), the
        order (``None`` unless ``fixed_order``), ``epsilon`` :math:`= \max(0, \min_\alpha(S_E(\alpha) - B(\alpha))
        + \varepsilon)` over the orders checked, and ``guarantee = fixed_order``.

    Raises
    ------
    ValueError
        For out-of-range input (``batch_size <= 0``, ``dataset_size < batch_size``, ``epochs < 1``, ``epsilon < 0``,
        ``delta`` not in ``(0, 1)``, ``a_e`` not in ``[0, 1]``, bad ``kappas`` or ``orders``, a ``kappas[e]`` below
        ``batch_size / dataset_size`` (or ``rejection_k * batch_size / dataset_size``), an ``order`` not in
        ``orders``), or when an epoch cannot meet the budget (the filter halts the run).
    """
    b = check_real("batch_size", batch_size, low=0.0, low_open=True)
    n = check_real("dataset_size", dataset_size, low=b)
    e_count = check_int("epochs", epochs, low=1)
    ks = check_kappas(kappas, e_count)
    eps = check_real("epsilon", epsilon, low=0.0)
    dl = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    a_e = check_real("a_e", a_e, low=0.0, high=1.0)
    kr = 1.0 if rejection_k is None else check_real("rejection_k", rejection_k, low=1.0)
    for i, k in enumerate(ks):  # K~ = kappa N~ C must be >= k b C (k = 1: every sampling probability <= 1)
        if k * n < kr * b:
            what = "rejection_k*batch_size/dataset_size" if rejection_k is not None else "batch_size/dataset_size"
            raise ValueError(f"kappas[{i}] must be in [{what} = {kr * b / n!r}, 1] (below it K~ = kappa*N~*C < "
                             f"{'k*' if rejection_k is not None else ''}b*C and the sampling (or filter) "
                             f"probabilities can cap at 1, which eq. (13) does not cover); got {k!r}")
    t = max(int(n // b), 1) if iterations_per_epoch is None else check_int("iterations_per_epoch",
                                                                             iterations_per_epoch, low=1)
    a = check_orders(orders)
    aux = dict(sigma_n=sigma_n, sigma_k=sigma_k, p_k=p_k, k_star_releases=k_star_releases)
    if fixed_order and order is not None:
        if int(order) not in a.tolist():
            raise ValueError(f"order must be one of orders; got {order!r}")
        a = np.array([int(order)], dtype=np.int64)
    elif fixed_order:
        worst = calibrate_plan(max(int(round(n)), 1), b, e_count, eps, dl, iterations_per_epoch=t, kappas=1.0,
                               accountant="rdp", orders=a, **aux)
        a = np.array([worst.order], dtype=np.int64)
    budget = eps - conversion_offset(a, dl)           # per order: the RDP budget B(alpha)
    spent = rdp_of_events(aux_events(max(int(round(n)), 1), b, e_count, **aux), a)
    phase1 = int(np.floor(a_e * e_count + 1e-9))
    cache: dict = {}

    def epoch_rdp(kappa: float, sigma: float) -> np.ndarray:
        key = (kappa, sigma)
        if key not in cache:
            cache[key] = t * rdp_poisson_gaussian(b / (kappa * n), sigma / kappa, a)
        return cache[key]

    sigmas, phases = [], []
    for e, k in enumerate(ks):
        phase = 1 if e < phase1 else 2
        future, k_future = e_count - e - 1, (1.0 if phase == 1 else k)

        def ok(s: float) -> bool:
            total = spent + epoch_rdp(k, s) + (future * epoch_rdp(k_future, s) if future else 0.0)
            return bool(np.any(total <= budget))

        if not np.any(spent < budget):
            raise ValueError(f"epoch {e}: the budget is exhausted (the filter halts the run)")
        s = bisect_smallest(ok, sigmas[-1] if sigmas else 1.0, rtol=1e-6, what=f"sigma_g of epoch {e}")
        sigmas.append(s)
        phases.append(phase)
        spent = spent + epoch_rdp(k, s)
    final = spent - budget + eps                       # epsilon per order of the realized run
    j = int(np.argmin(final))
    return PaperSchedule(tuple(sigmas), tuple(phases), int(a[j]) if fixed_order else None, max(float(final[j]), 0.0),
                         bool(fixed_order))
