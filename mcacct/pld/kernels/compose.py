r"""FFT composition of single-step privacy-loss pmfs: the window, the exponential tilt, binary powering with its
round-off bound, the tails outside the window, and the batched compose-and-query programs.

Arrays and numbers in; the single-step pmfs come from :mod:`mcacct.pld.kernels.discretise`, the queries from
:mod:`mcacct.pld.kernels.query`.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from mcacct.pld.constants import CMUL_C, FFT_C, INF_REL, LAMBDAS, LAMBDAS_NEG, U, UNDERFLOW
from mcacct.pld.kernels.query import query_delta, query_epsilon

__all__ = ["tilted_batch", "compose_query_batch", "compose_arrays_batch"]


def _cpow(z: jax.Array, t) -> jax.Array:
    r""":math:`z^t` elementwise by binary powering (square-and-multiply, integer ``t >= 1``).

    Only complex multiplications are used, so the relative error of every entry is at most
    :math:`(1+c_\times u)^{t-1}-1` (by induction over the addition chain, each multiplication
    adds :math:`c_\times u`; see :func:`_compose_core`), whatever the modulus and phase of
    :math:`z`. A Python ``int`` ``t`` is unrolled at trace time (cheaper to compile), a traced
    one runs a ``while_loop``.
    """
    if isinstance(t, int):
        acc, base = None, z
        while t:
            if t & 1:
                acc = base if acc is None else acc * base
            t >>= 1
            if t:
                base = base * base
        return acc

    def body(state):
        acc, base, e = state
        acc = jax.lax.cond((e & 1) == 1, lambda: acc * base, lambda: acc)
        return acc, base * base, e >> 1

    acc, _, _ = jax.lax.while_loop(lambda s: s[2] > 0, body, (jnp.ones_like(z), z, t))
    return acc


def _weight_sum(lam, h: float):
    r"""Bounds on :math:`\sum_{i\ge0}e^{-2\lambda ih}w_i^2` for weights :math:`0\le w_i\le1`.

    Returns ``(plain, short)``: :math:`(1-r)^{-1}`, and for :math:`w_i\le(i+1)h` (the query
    lies within :math:`h` below the first weighted grid point, as :math:`1-e^{\varepsilon-\ell}\le
    \ell-\varepsilon`) :math:`\min\{(1-r)^{-1},h^2(1+r)(1-r)^{-3}\}`, where :math:`r=e^{-2\lambda h}`
    and :math:`\sum(i+1)^2r^i=(1+r)/(1-r)^3`; both ``inf`` for :math:`\lambda=0`.
    """
    one_r = -jnp.expm1(-2.0 * lam * h)
    plain = 1.0 / one_r
    return plain, jnp.minimum(plain, h * h * (2.0 - one_r) / one_r**3)


def _choose_lambda(lm_pos: jax.Array, t: jax.Array, s0: jax.Array, span: float, log_e2: jax.Array,
                   h: float) -> jax.Array:
    r"""Tilt :math:`\lambda\ge0` for a query at loss :math:`s_0` on a window of width ``span`` :math:`=Nh`.

    Minimises an a-priori estimate of the two excesses the tilt trades off (both on the log scale):

    * round-off, :math:`e_2\,M(\lambda)^Te^{-\lambda s_0}G_\lambda^{1/2}` (:func:`_weight_sum`) -- falls while
      the tilted law moves towards :math:`s_0` (it is smallest near the Chernoff tilt, where the
      tilted :math:`T`-fold law has its mean at :math:`s_0`);
    * wrap-around: mass at :math:`s+Nh` above the window lands on :math:`s` amplified by
      :math:`e^{\lambda Nh}`, which adds at most
      :math:`e^{\lambda Nh}\Pr[S\ge s_0+Nh]\le\min_{\mu>\lambda}e^{\lambda Nh+T\log M(\mu)-\mu(s_0+Nh)}`
      to :math:`\delta(s_0)` (pessimistic, never unsound, but it must stay negligible).

    Candidates: :math:`\{0\}\cup` ``LAMBDAS`` (ratio :math:`2^{1/2}`, log-MGF ``lm_pos``
    from the window of :func:`~mcacct.pld.kernels.discretise.single_batch`). Any :math:`\lambda` gives a
    valid bound; this one keeps the reported value tight.
    """
    lam_g = jnp.asarray(LAMBDAS)
    lm_ok = jnp.where(jnp.isfinite(lm_pos), lm_pos, jnp.inf)
    lm0 = 0.0  # log M(0) = log(mass) <= 0; the estimate only steers the choice

    def cost(lam, lmv):
        log_r = log_e2 + t * lmv - lam * s0 + 0.5 * jnp.log(jnp.minimum(span / h, _weight_sum(lam, h)[1]))
        log_a = jnp.min(jnp.where(lam_g > lam, lam * span + t * lm_ok - lam_g * (s0 + span), jnp.inf))
        c = jnp.logaddexp(log_r, log_a)
        return jnp.where(jnp.isnan(c), jnp.inf, c)

    grid = jnp.concatenate([jnp.zeros(1), lam_g])
    f = jax.vmap(cost)(grid, jnp.concatenate([jnp.full(1, lm0), lm_ok]))
    lam = grid[jnp.argmin(f)]
    return jnp.where(jnp.isfinite(lam), lam, 0.0)


def _compose_core(pmf, off, lam, a_start, steps, h, *, N: int, tilt: bool = True):
    r"""Exponentially tilted FFT power: :math:`T`-fold self-convolution on the window ``[a_start, a_start+N)``.

    With :math:`\ell_i=(\mathrm{off}+i)h`, the single-step pmf :math:`x` is tilted and normalised,
    :math:`z_i=x_ie^{\lambda\ell_i}/M(\lambda)`, :math:`M(\lambda)=\sum_ix_ie^{\lambda\ell_i}`
    (``tilt=False``: :math:`z=x` untouched, :math:`M=1`), folded (centred) onto :math:`N` points and
    :math:`y=\mathrm{irfft}(\mathrm{rfft}(z)^T)` is formed. Since :math:`e^{\lambda\sum\ell}=\prod
    e^{\lambda\ell}`, the composed pmf at loss :math:`s` is :math:`M^Te^{-\lambda s}y_s` (plus
    non-negative aliased mass, which is pessimistic).

    Returns ``(y, e2, tlm, theta)``: ``y`` in window order (round-off included, not clamped);
    ``e2`` a rigorous bound on :math:`\|\hat y-y'\|_2` where :math:`y'` is the exact circular
    :math:`T`-fold convolution of the computed :math:`\hat z` (see the module docstring, "FFT
    round-off"); ``tlm`` :math:`=T\log M(\lambda)`; ``theta`` the relative error of :math:`\hat z`.
    """
    K = pmf.shape[0]
    j = jnp.arange(K)
    t = jnp.asarray(steps, jnp.float64)
    if tilt:
        l = (off + j).astype(jnp.float64) * h
        has = pmf > 0
        lref = jnp.max(jnp.where(has, l, -jnp.inf))
        arg = jnp.where(has, lam * (l - lref), -jnp.inf)
        logpmf = jnp.where(has, jnp.log(jnp.where(has, pmf, 1.0)), -jnp.inf)
        lmn = logsumexp(logpmf + arg)  # log M(lam) - lam * lref
        z = pmf * jnp.exp(arg - lmn)
        tlm = t * (lmn + lam * lref)
        # relative error of z (exp of arg - lmn; entries that underflow are covered by UNDERFLOW)
        # plus that of T * (lmn + lam * lref) in the untilt factor, which theta is multiplied by T for
        big = jnp.minimum(jnp.max(jnp.where(has, jnp.abs(arg), 0.0)), 750.0) + 3.0 * jnp.abs(lmn)
        theta = 4 * U * (3.0 + big + jnp.abs(lam * lref))
    else:
        z, tlm, theta = pmf, 0.0, 0.0
    mass = jnp.sum(z)
    c = jnp.round(jnp.sum(j * z) / jnp.maximum(mass, 1e-300)).astype(jnp.int64)
    folded = jnp.zeros(N).at[jnp.mod(j - c, N)].add(z)
    f = jnp.fft.rfft(folded)
    g = _cpow(f, steps)
    circ = jnp.fft.irfft(g, n=N)
    shift = a_start - steps * (off + c)
    y = circ[jnp.mod(shift + jnp.arange(N), N)]
    # --- round-off bound from ||z||_2 and sum(z) of the computed input (inflated for their rounding)
    infl = 1.0 + (max(N, K) + 8) * U
    z2 = jnp.sqrt(jnp.sum((z if K <= N else folded) ** 2)) * infl  # folding is a permutation if K <= N
    lg = math.log2(N) + 1.0
    e_fft = FFT_C * lg * U / (1.0 - FFT_C * lg * U)
    e_pow = jnp.expm1((t - 1.0) * math.log1p(CMUL_C * U))
    e_pow = e_pow / (1.0 - e_pow)
    # (a) normwise: max_k |Z_k| <= sum(z) + ||Z_hat - F z||_2 and
    #     ||P_hat||_2 / sqrt(N) <= (1 + e_pow)(1 + e_fft) rbar^(T-1) ||z||_2
    rbar = mass * infl + e_fft * math.sqrt(N) * z2
    growth = jnp.exp((t - 1.0) * jnp.maximum(jnp.log(rbar), 0.0))
    p2n = (1.0 + e_pow) * (1.0 + e_fft) * growth * z2
    e_norm = (e_fft + e_pow) * p2n + t * growth * e_fft * z2
    # (b) componentwise: |Z_hat_k - Z_k| <= eta = e_fft sum(z), so |Z_hat_k^T - Z_k^T| <= T eta (|Z_hat_k| + eta)^(T-1),
    #     which is tiny wherever the composed characteristic function is (all but the lowest frequencies)
    eta = e_fft * mass * infl
    herm = jnp.full(N // 2 + 1, 2.0).at[0].set(1.0).at[-1].set(1.0)  # full (Hermitian) spectrum weights
    v = jnp.exp(2.0 * (t - 1.0) * jnp.log(jnp.abs(f) * (1.0 + 4 * U) + eta))
    spec = jnp.sqrt(jnp.sum(herm * jnp.stack([v, jnp.abs(g) ** 2]), axis=1)) * infl
    e_comp = ((e_fft + e_pow) * spec[1] + t * eta * spec[0]) / math.sqrt(N)
    e2 = jnp.minimum(e_norm, e_comp) * (1.0 + 1e-6) + UNDERFLOW
    return y, e2, tlm, theta


def _tails(lm, a_start, steps, h, inf1, *, N: int):
    """Chernoff bounds on the T-fold mass above / below the window and the composed truncation mass."""
    nl = len(LAMBDAS)
    t = jnp.asarray(steps, jnp.float64)
    top = (a_start + N).astype(jnp.float64) * h
    bot = (a_start - 1).astype(jnp.float64) * h
    lam_top = jnp.asarray(LAMBDAS) * top
    # exponent rounded up by a bound on its own rounding (a few ulp of its two terms): at lambda * top ~ 1e6 the
    # plain evaluation could be ~1e-10 low, relative; this term is part of the mass at infinity
    upper_arg = t * lm[:nl] - lam_top
    upper_arg = upper_arg + 4 * U * (jnp.abs(t * lm[:nl]) + jnp.abs(lam_top) + 1.0)
    upper = jnp.minimum(jnp.min(jnp.exp(upper_arg)), 1.0)
    lower = jnp.minimum(jnp.min(jnp.exp(t * lm[nl:] + jnp.asarray(LAMBDAS_NEG) * bot)), 1.0)
    inf_t = -jnp.expm1(t * jnp.log1p(-inf1))
    return upper, lower, inf_t


def _compose_one(pmf, off, inf1, lm, a_start, steps, h, *, N: int):
    r"""Untilted T-fold composition on the window, for callers that query the pmf freely.

    ``out`` is the composed pmf (clamped to [0, 1]); the returned mass at infinity includes the
    Chernoff bound on the mass above the window *and* the :math:`\ell_1` round-off bound
    :math:`\sqrt N\,e_2\ge\sum_i|\hat y_i-y'_i|`, so that :math:`\sum_i\mathrm{out}_ig_i+\omega_\infty`
    bounds :math:`\sum_i\omega_ig_i+\omega_\infty` from above for every weight :math:`0\le g\le1`
    (every :math:`\delta(\varepsilon)`, also after further compositions).
    """
    y, e2, _, _ = _compose_core(pmf, off, 0.0, a_start, steps, h, N=N, tilt=False)
    out = jnp.clip(y, 0.0, 1.0)
    upper, lower, inf_t = _tails(lm, a_start, steps, h, inf1, N=N)
    l1 = math.sqrt(N) * e2
    return out, jnp.minimum(inf_t + upper + l1, 1.0), upper, lower, inf_t


def _tilted_one(pmf, off, inf1, lm, a_start, h, s0, *, steps, N: int):
    r"""Composed pmf of one direction, tilted for a query at loss ``s0``, with its round-off bounds.

    Returns ``(out, rb, rho, inf, tail, lam)``: the composed pmf on the window (untilted, clamped
    to [0, 1]); the per-index bound
    :math:`r_k=(1+\rho)\,e_2\,M^Te^{-\lambda\ell_k}\sqrt{\min\{N-k,G\}}` (:math:`G` from
    :func:`_weight_sum`) on the round-off of :math:`\delta(\varepsilon)` for :math:`\varepsilon\in(\ell_{k-1},\ell_k]`;
    the relative part :math:`\rho`; the mass at infinity (truncation + window tail bound); the
    rigorous tail terms; and the tilt.
    """
    nl = len(LAMBDAS)
    t = jnp.asarray(steps, jnp.float64)
    lg = math.log2(N) + 1.0
    log_e2 = jnp.log(t * FFT_C * lg * U)  # a-priori size of e2 (||z||_2 <= 1)
    lam = _choose_lambda(lm[:nl], t, s0, N * h, log_e2, h)
    y, e2, tlm, theta = _compose_core(pmf, off, lam, a_start, steps, h, N=N)
    s = (a_start + jnp.arange(N)).astype(jnp.float64) * h
    expo = tlm - lam * s  # log of the untilt factor M^T e^{-lam s}
    yp = jnp.maximum(y, 0.0)
    small = expo < 700.0  # elsewhere (far below the query) the factor could overflow: 1 is an upper bound
    out = jnp.where(small, jnp.minimum(yp * jnp.exp(jnp.minimum(expo, 700.0)), 1.0), jnp.where(yp > 0, 1.0, 0.0))
    # rounding of expo = tlm - lam * s and of exp(expo); expo is linear in s, so its largest |value|
    # where it is evaluated (< 700) is at an end of the window (the error of tlm itself is in theta)
    rho1 = 8 * U * (jnp.minimum(jnp.maximum(jnp.abs(expo[0]), jnp.abs(expo[-1])), 700.0) + jnp.abs(tlm) + 3.0)
    rho = jnp.expm1(1.01 * t * theta + rho1 + 2 * (N + 8) * U) * 1.01
    plain, short = _weight_sum(lam, h)
    idx = jnp.arange(N)  # for k >= 1 the cell / query point lies within h below l_k
    gk = jnp.minimum(N - idx, jnp.where(idx >= 1, short, plain))
    rb = jnp.exp(jnp.minimum(jnp.log((1.0 + rho) * e2) + expo + 0.5 * jnp.log(gk), 0.0))
    upper, lower, inf_t = _tails(lm, a_start, steps, h, inf1, N=N)
    return out, rb, rho, jnp.minimum(inf_t + upper, 1.0), upper + lower + steps * inf1, lam


def _compose_query_one(pmf, off, inf1, lm, a_start, h, eps_q, delta_q, *, steps: int, N: int, for_delta: bool):
    r"""Tilted composition + one certified query for one direction.

    ``for_delta``: :math:`\delta(\varepsilon_q)`, tilted for :math:`s_0=\varepsilon_q`; else
    :math:`\varepsilon(\delta_q)`, tilted for the Chernoff bound
    :math:`\min_\lambda(T\log M(\lambda)-\log\delta_q)/\lambda\ge\varepsilon(\delta_q)`; both capped
    at the window top (see :func:`_tilted_one`, :func:`query_delta`, :func:`query_epsilon`).
    Returns ``(delta, eps, inf, tail, rb_delta, rb_eps, floor)`` (``nan`` for the other query).
    """
    nl = len(LAMBDAS)
    t = jnp.asarray(steps, jnp.float64)
    top = (a_start + N).astype(jnp.float64) * h
    lam_g = jnp.asarray(LAMBDAS)
    eps_c = jnp.min(jnp.where(jnp.isfinite(lm[:nl]), (t * lm[:nl] - jnp.log(delta_q)) / lam_g, jnp.inf))
    s0 = jnp.minimum(eps_q if for_delta else eps_c, top)
    out, rb, rho, inf, tail, _ = _tilted_one(pmf, off, inf1, lm, a_start, h, s0, steps=steps, N=N)
    nan = jnp.asarray(jnp.nan)
    if for_delta:
        d_eps, rb_d = query_delta(out, inf, a_start, h, eps_q, rb, rho, INF_REL)
        return d_eps, nan, inf, tail, rb_d, nan, nan
    eps, rb_e, floor = query_epsilon(out, inf, a_start, h, delta_q, rb, rho, INF_REL)
    return nan, eps, inf, tail, nan, rb_e, floor


@functools.partial(jax.jit, static_argnames=("N", "steps"))
def tilted_batch(pmfs, offs, infs, lms, a_start, h, s0, *, N: int, steps: int):
    r""":func:`_tilted_one` for both directions of one sigma (leading axis of the inputs).

    Parameters
    ----------
    pmfs : jax.Array
        Single-step pmfs, shape ``(2, K)``.
    offs, infs : jax.Array
        First grid index and mass at :math:`+\infty` per direction, shape ``(2,)``.
    lms : jax.Array
        Log-MGF values per direction, shape ``(2, L)``.
    a_start : jax.Array
        Grid index of the window start per direction, shape ``(2,)``.
    h : float
        Loss grid spacing.
    s0 : float
        Loss at which the tilt aims.
    N : int
        FFT window length (static).
    steps : int
        Number of compositions :math:`T` (static).

    Returns
    -------
    tuple of jax.Array
        ``(out, rb, rho, inf, tail, lam)`` of :func:`_tilted_one`, each with a leading axis of length 2.
    """
    f = functools.partial(_tilted_one, steps=steps, N=N)
    return jax.vmap(f, in_axes=(0, 0, 0, 0, 0, None, None))(pmfs, offs, infs, lms, a_start, h, s0)


@functools.partial(jax.jit, static_argnames=("N", "steps", "for_delta"))
def compose_query_batch(pmfs, offs, infs, lms, a_start, h, eps_q, delta_q, *, N: int, steps: int,
                         for_delta: bool):
    r"""Tilted composition and one certified query, for a batch of noise levels and both directions.

    :func:`_compose_query_one` vectorised over noise levels and directions; compiled once per ``N``, ``steps`` and
    ``for_delta``.

    Parameters
    ----------
    pmfs : jax.Array
        Single-step pmfs, shape ``(S, 2, K)``.
    offs, infs : jax.Array
        First grid index and mass at :math:`+\infty`, shape ``(S, 2)``.
    lms : jax.Array
        Log-MGF values, shape ``(S, 2, L)``.
    a_start : jax.Array
        Grid index of the window start, shape ``(S, 2)``.
    h : float
        Loss grid spacing.
    eps_q, delta_q : float
        The query point (only the one of ``for_delta`` is used).
    N : int
        FFT window length (static).
    steps : int
        Number of compositions :math:`T` (static).
    for_delta : bool
        ``True``: :math:`\delta(\varepsilon_q)`; ``False``: :math:`\varepsilon(\delta_q)` (static).

    Returns
    -------
    tuple of jax.Array
        ``(delta, eps, inf, tail, rb_delta, rb_eps, floor)``, each of shape ``(S, 2)`` (``nan`` for the other query).
    """
    f = functools.partial(_compose_query_one, steps=steps, N=N, for_delta=for_delta)
    ax = (0, 0, 0, 0, 0, None, None, None)
    return jax.vmap(jax.vmap(f, in_axes=ax), in_axes=ax)(  # sigmas x directions
        pmfs, offs, infs, lms, a_start, h, eps_q, delta_q)


@functools.partial(jax.jit, static_argnames=("N",))
def compose_arrays_batch(pmfs, offs, infs, lms, a_start, steps, h, *, N: int):
    r"""Untilted composition on the window, for a batch of noise levels and both directions.

    :func:`_compose_one` vectorised over noise levels and directions, for callers that query the composed pmf
    themselves; compiled once per ``N``.

    Parameters
    ----------
    pmfs : jax.Array
        Single-step pmfs, shape ``(S, 2, K)``.
    offs, infs : jax.Array
        First grid index and mass at :math:`+\infty`, shape ``(S, 2)``.
    lms : jax.Array
        Log-MGF values, shape ``(S, 2, L)``.
    a_start : jax.Array
        Grid index of the window start, shape ``(S, 2)``.
    steps : jax.Array
        Number of compositions :math:`T` (integer scalar).
    h : float
        Loss grid spacing.
    N : int
        FFT window length (static).

    Returns
    -------
    out : jax.Array
        Composed pmfs, shape ``(S, 2, N)``.
    inf : jax.Array
        Mass at :math:`+\infty` (window tail and round-off bounds included), shape ``(S, 2)``.
    upper, lower, inf_t : jax.Array
        Chernoff bounds on the mass above and below the window and the composed truncation mass, shape ``(S, 2)``.
    """
    f = functools.partial(_compose_one, N=N)
    f2 = jax.vmap(f, in_axes=(0, 0, 0, 0, 0, None, None))
    return jax.vmap(f2, in_axes=(0, 0, 0, 0, 0, None, None))(pmfs, offs, infs, lms, a_start, steps, h)
