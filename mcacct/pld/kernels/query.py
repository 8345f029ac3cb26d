r"""Queries of a discrete privacy-loss pmf: :math:`\delta(\varepsilon)` and :math:`\varepsilon(\delta)`, plain or
certified (the pmf's round-off bound inflates the suffix sums and the solution is rounded up).

Arrays and numbers in; the composed pmfs come from :mod:`mcacct.pld.kernels.compose`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mcacct.pld.constants import U, UNDERFLOW

__all__ = ["query_delta", "query_epsilon", "query_one", "query_one_jit"]


def query_delta(out, inf, a_start, h, eps_q, rb=None, rho=0.0, rho_inf=None):
    r""":math:`\delta(\varepsilon_q)=\sum_j\omega_j(1-e^{\varepsilon_q-\ell_j})_++\omega_\infty` (grid :math:`(A+i)h`).

    With ``rb`` / ``rho`` (see :func:`query_epsilon`) the certified value
    :math:`\min\{1,(1+\rho)\sum_j(\cdot)+(1+\rho_\infty)\,\omega_\infty+r_k\}`, :math:`k` the first index
    with :math:`\ell_k>\varepsilon_q`, and that :math:`r_k`; else ``(value, 0)``. ``rho_inf`` is
    :math:`\rho_\infty` (``None``: :math:`\rho`, i.e. :math:`(1+\rho)(\sum_j(\cdot)+\omega_\infty)`).

    Any finite :math:`\varepsilon_q` is accepted: beyond the window top every weight
    :math:`(1-e^{\varepsilon_q-\ell_j})_+` is 0 and :math:`k=N` (no round-off term), so the value is the
    limit :math:`(1+\rho_\infty)\,\omega_\infty` of :math:`\delta(\varepsilon)` as :math:`\varepsilon\to\infty`
    (the mass at infinity, window tail bound included). :math:`k` is found in floating point and
    clipped to :math:`[0,N]` before it is cast to an integer, so an :math:`\varepsilon_q/h` beyond
    :math:`2^{63}` cannot wrap around.
    """
    N = out.shape[0]
    l = (a_start + jnp.arange(N)).astype(jnp.float64) * h
    terms = jnp.where(l > eps_q, out * -jnp.expm1(eps_q - l), 0.0)
    if rb is None:
        return jnp.sum(terms) + inf, 0.0  # (rho covers the summation error, any order: (N - 1) u)
    # first l > eps_q, clipped in floating point *before* the integer cast: eps_q / h beyond 2^63 (eps_q = 1e15 at
    # h = 1e-4) wrapped around int64 and picked the round-off bound of the window's bottom cell (up to 1)
    kqf = jnp.floor(eps_q / h) + 1.0 - a_start.astype(jnp.float64)
    kq = jnp.clip(kqf, 0.0, float(N)).astype(jnp.int64)
    kq = jnp.where((kq > 0) & (l[jnp.maximum(kq - 1, 0)] > eps_q), kq - 1, kq)  # guard rounding
    rb_d = jnp.concatenate([rb, jnp.zeros(1)])[kq]  # rb is non-increasing: a smaller kq is safe
    if rho_inf is None:
        return jnp.minimum((1.0 + rho) * (jnp.sum(terms) + inf) + rb_d, 1.0), rb_d
    return jnp.minimum((1.0 + rho) * jnp.sum(terms) + (1.0 + rho_inf) * inf + rb_d, 1.0), rb_d


def _decayed_suffix(w: jax.Array, r: jax.Array) -> jax.Array:
    r""":math:`T(k)=\sum_{j\ge k}w_jr^{j-k}` for all :math:`k` (``w >= 0``, ``0 < r < 1``), by an associative scan
    of the affine maps :math:`x\mapsto w_k+rx` (segment ``(r^{len}, sum)``; no reference point, so nothing
    overflows whatever the losses: a far term whose factor underflows only makes :math:`T` smaller).

    Every operation multiplies or adds non-negative numbers, so each term carries at most one rounding per
    combine level (product and sum, at most :math:`2N`) plus those of its factor :math:`r^{j-k}` (at most
    :math:`N`): the computed :math:`T` is within a relative :math:`\gamma_{3N}` of the exact sums with the same
    ``r`` (up to underflow, :data:`~mcacct.pld.constants.UNDERFLOW` per entry)."""
    def combine(hi, lo):  # reverse scan: ``hi`` covers the larger indices, ``lo`` the segment just below
        return hi[0] * lo[0], lo[1] + lo[0] * hi[1]

    _, t = jax.lax.associative_scan(combine, (jnp.full_like(w, r), w), reverse=True)
    return t


def query_epsilon(out, inf, a_start, h, delta_q, rb=None, rho=0.0, rho_inf=None):
    r""":math:`\varepsilon(\delta_q)` of a discrete PLD (grid :math:`\ell_j=(A+j)h`, mass ``inf`` at :math:`+\infty`).

    With :math:`S_0(k)=\sum_{j\ge k}\omega_j` and the *decayed* suffix sums
    :math:`T(k)=\sum_{j\ge k}\omega_je^{-(\ell_j-\ell_k)}` (over :math:`\ell_j>0`;
    :func:`_decayed_suffix`), :math:`D_k=\delta(\ell_k)=S_0(k+1)-e^{-h}T(k+1)+\omega_\infty`
    is non-increasing; the first :math:`k` with :math:`D_k\le\delta` is searched and
    :math:`\delta(\varepsilon)=S_0(k)-e^{\varepsilon-\ell_k}T(k)+\omega_\infty` is solved exactly on
    :math:`(\ell_{k-1},\ell_k]`. Only loss *differences* enter an exponential (the solve is in
    :math:`\varepsilon-\ell_k\in(-h,0]`), so nothing over- or underflows at large losses (the former suffix sums
    of :math:`\omega_je^{-\ell_j}` underflowed from :math:`\ell\approx650` and :math:`e^{\ell}` overflowed
    beyond 709).

    ``rb[k]`` (optional) bounds the round-off of :math:`\delta(\varepsilon)` for
    :math:`\varepsilon\in(\ell_{k-1},\ell_k]` (weights on :math:`j\ge k` only) and ``rho`` its
    relative part: every value becomes :math:`(1+\rho)(\cdot)+r_k`, or, with ``rho_inf`` :math:`=\rho_\infty`,
    :math:`(1+\rho)(S_0-e^{\varepsilon-\ell_k}T)+(1+\rho_\infty)\omega_\infty+r_k` (as :func:`query_delta`). The
    factor :math:`e^{-h}` is rounded *down* (a smaller :math:`T` only raises every :math:`\delta`), and :math:`S_0`
    is inflated by
    :math:`4(N+4)u` plus :data:`~mcacct.pld.constants.UNDERFLOW`: the sum of :math:`S_0` (:math:`\gamma_N`),
    that of :math:`T` (:math:`\gamma_{3N}`, :func:`_decayed_suffix`) and the final products and difference,
    all relative to :math:`S_0`, because :math:`e^{\varepsilon-\ell_k}T(k)\le S_0(k)`. The reported
    :math:`\varepsilon` solves the inflated equation (rounded up), so it is certified. Returns
    ``(eps, rb_at_eps, floor)``, ``floor`` a certifiable delta at the top of the window
    (without ``rb``: ``(eps, 0, 0)``).
    """
    N = out.shape[0]
    l = (a_start + jnp.arange(N)).astype(jnp.float64) * h
    rigorous = rb is not None
    rbv = rb if rigorous else jnp.zeros(N)
    g1 = 1.0 + rho
    sl = 4.0 * (N + 4) * U if rigorous else 0.0
    floor0 = UNDERFLOW if rigorous else 0.0
    down = 1.0 - 4 * U if rigorous else 1.0  # exp within 3 ulp, rounded down
    pos = l > 0
    w = jnp.where(pos, out, 0.0)
    s0 = jax.lax.cumsum(w, reverse=True) * (1.0 + sl) + floor0
    r = jnp.exp(-h) * down
    t = _decayed_suffix(w, r)
    zero1 = jnp.zeros(1)
    s0n = jnp.concatenate([s0[1:], jnp.full(1, floor0)])
    vn = r * jnp.concatenate([t[1:], zero1])  # sum_{j>k} w_j e^{-(l_j - l_k)}
    # the mass at infinity, inflated by (1 + rho) with the sums or by its own (1 + rho_inf)
    def curve(x):
        return g1 * (x + inf) if rho_inf is None else g1 * x + (1.0 + rho_inf) * inf

    # its share in units of the sums (rounded up: a larger numerator below only raises epsilon)
    inf_g = inf if rho_inf is None else (1.0 + rho_inf) * inf / g1 * (1.0 + 4 * U)
    d_grid = curve(jnp.maximum(s0n - vn, 0.0)) + rbv
    k1 = jnp.clip(1 - a_start, 0, N)  # first index with l > 0
    rb0 = jnp.concatenate([rbv, zero1])[k1]
    l1 = (a_start + k1).astype(jnp.float64) * h
    v0 = jnp.exp(-l1) * down * jnp.concatenate([t, zero1])[k1]  # sum_j w_j e^{-l_j}
    d0 = curve(jnp.maximum(s0[0] - v0, 0.0)) + rb0
    k0 = jnp.clip(-a_start, 0, N - 1)  # first index with l >= 0
    cond = (l >= 0) & (d_grid <= delta_q)
    k = jnp.argmax(cond)
    found = cond[k]
    num = s0[k] + inf_g - (delta_q - rbv[k]) / g1
    den = t[k]
    # (l_{k-1}, l_k] if l_{k-1} >= 0 is a grid point of the window, else (0, l_k]
    lo_e = jnp.where(k > k0, jnp.maximum(l[k] - h, 0.0), 0.0)
    hi_e = jnp.maximum(l[k], 0.0)
    ok = (num > 0) & (den > 0)
    # e^{eps - l_k} = num / den; the ratio is in (e^{-h}, 1] where the solution lies in the cell, and an
    # overflowing ratio (den underflowed) gives +inf, clipped to l_k (D_k <= delta was checked)
    x = jnp.log(jnp.where(ok, num, 1.0) / jnp.where(ok, den, 1.0))
    x = jnp.clip(x, lo_e - l[k] - h, h)  # keeps +-inf (and inf - inf) out; the cell clip below decides
    eps = jnp.where(ok, l[k] + x, lo_e)
    if rigorous:  # round the solution up (its own rounding error is a few ulp)
        eps = eps + 8 * U * (1.0 + jnp.abs(eps))
    eps = jnp.clip(eps, lo_e, hi_e)
    eps = jnp.where(found, eps, jnp.inf)
    eps = jnp.where(d0 <= delta_q, 0.0, eps)
    if not rigorous:
        return eps, 0.0, 0.0
    rb_e = jnp.where(d0 <= delta_q, rb0, jnp.where(found, rbv[k], jnp.nan))
    return eps, rb_e, jnp.minimum(d0, d_grid[-1])


def query_one(out, inf, a_start, h, eps_q, delta_q, rho=None):
    r"""``(delta(eps_q), eps(delta_q))`` of a discrete PLD (used by :mod:`mcacct.pld.discrete`).

    With ``rho`` (the relative round-off of the pmf's own evaluation) both are certified as in
    :func:`query_epsilon` (suffix sums inflated, the solution rounded up); without it, plain values.

    Parameters
    ----------
    out : jax.Array
        The pmf on the grid :math:`(A+i)h`, shape ``(N,)``.
    inf : float or jax.Array
        Mass at :math:`+\infty`.
    a_start : int or jax.Array
        Grid index :math:`A` of ``out[0]``.
    h : float
        Loss grid spacing.
    eps_q : float
        Epsilon at which delta is queried.
    delta_q : float
        Delta at which epsilon is queried.
    rho : float, optional
        Relative round-off; ``None`` gives plain values.

    Returns
    -------
    delta : jax.Array
        :math:`\delta(\varepsilon_q)` (scalar).
    epsilon : jax.Array
        :math:`\varepsilon(\delta_q)` (scalar; ``inf`` if none).
    """
    if rho is None:
        return query_delta(out, inf, a_start, h, eps_q)[0], query_epsilon(out, inf, a_start, h, delta_q)[0]
    rb = jnp.zeros(out.shape[0])
    return (query_delta(out, inf, a_start, h, eps_q, rb, rho)[0],
            query_epsilon(out, inf, a_start, h, delta_q, rb, rho)[0])


_query_plain = jax.jit(lambda out, inf, a_start, h, eps_q, delta_q: query_one(out, inf, a_start, h, eps_q, delta_q))
_query_certified = jax.jit(query_one)


def query_one_jit(out, inf, a_start, h, eps_q, delta_q, rho=None):
    """:func:`query_one` as one compiled program per pmf length.

    Run eagerly, its dozens of operations would compile one by one for every new length
    (benchmarks/results/design_choices.md); the values are the same.

    Parameters
    ----------
    out, inf, a_start, h, eps_q, delta_q, rho
        As in :func:`query_one`.

    Returns
    -------
    tuple of jax.Array
        ``(delta, epsilon)`` as :func:`query_one`.
    """
    if rho is None:
        return _query_plain(out, inf, a_start, h, eps_q, delta_q)
    return _query_certified(out, inf, a_start, h, eps_q, delta_q, rho)
