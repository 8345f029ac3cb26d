"""Group privacy by the black-box conversion of a single-example PLD (Ganesh 2024, arXiv:2401.10294, Lemma 1.1):
:func:`group_privacy_conversion_epsilon`."""

from __future__ import annotations


import jax.numpy as jnp
import numpy as np

from mcacct.pld.constants import DEFAULT_H, Discretization, GROUP_TILTS, U
from mcacct.pld.kernels import single_batch, tilted_batch
from mcacct.pld.plan import bucket, check_grid, plan, solver_for
from mcacct.pld.specs import MechanismSpec, canonical
from mcacct.pld.checks import (check_delta, check_discretization, check_integer, check_value_interval, is_real_number,
                                plain)
from mcacct.core.precision import float64


@float64
def group_privacy_conversion_epsilon(mechanism: MechanismSpec, group_size: int, delta: float, *,
                                     delta_floor: float = 1e-15,
                                     value_discretization_interval: float = DEFAULT_H,
                                     discretization: Discretization = "connect_dots") -> float:
    r"""Group-level :math:`\varepsilon` via the black-box conversion (Ganesh 2024 [arXiv:2401.10294], Lemma 1.1).

    An example-level :math:`(\varepsilon_1,\delta_1)` guarantee implies
    :math:`(k\varepsilon_1,\ \delta_1\sum_{i=0}^{k-1}e^{i\varepsilon_1})` for groups
    of size :math:`k`. This returns
    :math:`\min\{k\varepsilon_1 : \delta(\varepsilon_1)\sum_{i<k}e^{i\varepsilon_1}\le\delta\}`,
    with :math:`\delta(\cdot)` the example-level PLD curve of ``mechanism``
    (searched over the loss grid). This is the baseline the mixture-of-Gaussians
    accounting of :class:`GroupPoissonSpec` improves on.

    Example-level values :math:`\delta(\varepsilon_1)` below ``delta_floor`` are
    replaced by ``delta_floor``: below about ``1e-15`` the composition-window
    truncation (``1e-15``) dominates, so such tiny :math:`\delta_1` -- which
    Lemma 1.1 demands for large :math:`k` -- cannot be certified (the numerical
    problem described in Ganesh 2024 [arXiv:2401.10294]). The FFT round-off is bounded rigorously: the
    curve is the pointwise minimum over ``GROUP_TILTS`` exponentially tilted
    compositions (targets spread over the window), each with its round-off bound
    (see "FFT round-off" in the module docstring).

    Parameters
    ----------
    mechanism : MechanismSpec
        Example-level mechanism.
    group_size : int
        :math:`k\ge1`.
    delta : float
        Group-level target :math:`\delta\in(0,1)`.
    delta_floor : float, default 1e-15
        Smallest example-level :math:`\delta_1` trusted (>= 0).

    Returns
    -------
    float
        Group-level epsilon (``inf`` if no :math:`\varepsilon_1` works).
    """
    canon = canonical(mechanism)
    k = check_integer("group_size", group_size)
    dl = check_delta(delta)
    h = check_value_interval(value_discretization_interval)
    method = check_discretization(discretization)
    if not is_real_number(delta_floor) or not 0.0 <= delta_floor < 1.0:
        raise ValueError(f"delta_floor must be in [0, 1), got {plain(delta_floor)!r}")
    floor = float(delta_floor)
    sigma = float(mechanism.sigma)
    n_lo, kk = plan(canon, sigma, h)
    k_stat = bucket(kk)
    s_mat = jnp.asarray(canon.c[None, :] / sigma)
    pmfs, infs, offs, x_lo, x_hi, lms = single_batch(
        s_mat, jnp.asarray(np.log(canon.p)), jnp.asarray(canon.p), jnp.asarray([n_lo]),
        jnp.asarray(canon.steps), h, K=k_stat, method=method, solver=solver_for(canon.c))
    x_lo, x_hi = np.asarray(x_lo), np.asarray(x_hi)
    a_start = np.floor(x_lo / h).astype(np.int64) - 1
    n_fft = bucket(int(np.max(np.ceil(x_hi / h).astype(np.int64) - a_start + 2)))
    check_grid(n_fft, h, sigma=sigma)  # before the compositions are allocated
    # delta(eps1) on a fine eps1 grid: per direction the minimum over several tilted
    # compositions of (1 + rho) (discrete delta + mass at infinity) + round-off bound,
    # then the max over directions (an upper bound on the discrete PLD curve)
    eps_grid = np.arange(0.0, 60.0, h)
    top = float(np.max(a_start + n_fft)) * h
    best = np.full((2, eps_grid.size), np.inf)
    slack = 1.0 + 3.0 * (n_fft + 4) * U
    for s_target in np.linspace(0.0, top, GROUP_TILTS):
        out, rb, rho, inf, _, _ = (np.asarray(v) for v in tilted_batch(
            pmfs[0], offs[0], infs[0], lms[0], jnp.asarray(a_start[0]), h, float(s_target), N=n_fft,
            steps=canon.steps))
        for d in range(2):
            l = (a_start[0, d] + np.arange(n_fft)) * h
            keep = l > 0
            lv, mv = l[keep], out[d][keep]
            s0 = np.append(np.cumsum(mv[::-1])[::-1] * slack, 0.0)
            s1 = np.append(np.cumsum((mv * np.exp(-lv))[::-1])[::-1], 0.0)
            rbv = np.append(rb[d][keep], 0.0)
            idx = np.searchsorted(lv, eps_grid, side="right")  # first loss > eps1
            dd = (1.0 + rho[d]) * (np.maximum(s0[idx] - np.exp(eps_grid) * s1[idx], 0.0) + inf[d]) + rbv[idx]
            best[d] = np.minimum(best[d], dd)
    worst = best.max(axis=0)
    factor = np.where(eps_grid > 0, np.expm1(k * eps_grid) / np.expm1(np.maximum(eps_grid, 1e-300)), float(k))
    ok = np.maximum(worst, floor) * factor <= dl
    if not ok.any():
        return float("inf")
    return float(k * eps_grid[int(np.argmax(ok))])
