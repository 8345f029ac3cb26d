r"""Discretisation of a dominating pair into single-step privacy-loss pmfs on the grid :math:`\ell_j = jh`, and the
Chernoff window of their :math:`T`-fold composition (from log-MGF bounds).

A mixture-of-Gaussians pair :math:`P=\sum_c p_c\,\mathcal N(s_c,1)` against :math:`Q=\mathcal N(0,1)` is cut at the
loss grid by inverting the (convex, increasing) loss :math:`L(u)`; each interval's masses go to its end points by
``round_up`` or ``connect_dots`` (Doroshenko, Ghazi, Kamath, Kumar and Manurangsi, 2022, arXiv:2207.04380), so the
result dominates the continuous pair. Arrays and numbers in; no spec class is imported.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp, ndtr

from mcacct.pld.constants import LAMBDAS, LAMBDAS_NEG, LAMBDA_SUB, TAIL_TRUNCATION

__all__ = ["single_batch"]


def _interval_probs(x: jax.Array) -> jax.Array:
    """P(x_i < Z <= x_{i+1}) along axis 0 for sorted points, Z ~ N(0,1); CDFs evaluated once."""
    lower = ndtr(x)  # accurate left tail
    upper = ndtr(-x)  # accurate right tail
    right = upper[:-1] - upper[1:]
    left = lower[1:] - lower[:-1]
    return jnp.maximum(jnp.where(x[:-1] > 0, right, left), 0.0)


def _inverse_loss(l: jax.Array, s: jax.Array, logp: jax.Array, solver: str) -> jax.Array:
    r"""Solve :math:`L(u)=\ell` for the convex increasing :math:`L`; ``-inf`` below its range."""
    s2h = 0.5 * s * s
    if solver == "gauss":  # single component s>0
        return (l + s2h[0]) / s[0]
    if solver == "poisson":  # components (0, s1)
        logp0, logq, s1 = logp[0], logp[1], s[1]
        valid = l > logp0
        d = jnp.where(valid, logp0 - l, -1.0)
        u = (l + jnp.log(-jnp.expm1(d)) - logq + 0.5 * s1 * s1) / s1
        return jnp.where(valid, u, -jnp.inf)
    # general mixture: Newton from the right (monotone for convex increasing L)
    pos = s > 0
    u0 = jnp.min(jnp.where(pos[None, :], (l[:, None] - logp[None, :] + s2h[None, :]) / jnp.where(pos, s, 1.0)[None, :], jnp.inf), axis=1)
    has_zero = jnp.any(~pos)
    logp0 = jnp.where(has_zero, jnp.max(jnp.where(pos, -jnp.inf, logp)), -jnp.inf)
    # without a zero component L maps onto the whole real line (and -inf + inf would make every l invalid)
    valid = jnp.where(has_zero, l > logp0 + 1e-15 * jnp.maximum(1.0, jnp.abs(jnp.where(has_zero, logp0, 0.0))),
                      True)

    def body(state):
        u, it, _ = state
        z = logp[None, :] + s[None, :] * u[:, None] - s2h[None, :]
        lu = logsumexp(z, axis=1)
        w = jnp.exp(z - lu[:, None])
        du = jnp.sum(w * s[None, :], axis=1)
        step = jnp.where(valid, (lu - l) / du, 0.0)
        step = jnp.where(jnp.isfinite(step), step, 0.0)
        unew = u - step
        err = jnp.max(jnp.abs(step) / (1.0 + jnp.abs(unew)))
        return unew, it + 1, err

    def cond(state):
        _, it, err = state
        return jnp.logical_and(it < 200, err > 1e-13)

    u, _, _ = jax.lax.while_loop(cond, body, (jnp.where(valid, u0, 0.0), 0, jnp.inf))
    return jnp.where(valid, u, -jnp.inf)


def _log_mgf(pmf: jax.Array, l: jax.Array, sign: float, lams: np.ndarray, sub: int) -> jax.Array:
    r""":math:`\log\sum_j p_j e^{\lambda \ell_j}` for :math:`\lambda =` ``sign * lams``.

    The grid is ``sub`` interleaved doubling sequences, so after one
    ``exp`` per sequence every further value comes from squaring
    :math:`v=e^{\lambda(\ell-\ell_{\rm ref})}\le1` (``ell_ref`` = extreme loss
    with mass); a sum that underflows to 0 is reported as ``+inf`` (no bound
    from that :math:`\lambda`).
    """
    has = pmf > 0
    x = sign * l
    ref = jnp.max(jnp.where(has, x, -jnp.inf))
    lam0 = jnp.asarray(lams[:sub])
    v0 = jnp.where(has[None, :], jnp.exp(lam0[:, None] * (x - ref)[None, :]), 0.0)

    def step(v, lam):
        tot = v @ pmf
        out = jnp.where(tot > 0, lam * ref + jnp.log(jnp.where(tot > 0, tot, 1.0)), jnp.inf)
        return v * v, out

    _, res = jax.lax.scan(step, v0, jnp.asarray(lams).reshape(-1, sub))
    return res.reshape(-1)


def _window(pmf: jax.Array, l: jax.Array, steps: jax.Array):
    r"""Chernoff window :math:`[x_{lo}, x_{hi}]` holding all but ``TAIL_TRUNCATION`` of the T-fold sum.

    Uses :math:`\Pr[S\ge x]\le M(\lambda)^T e^{-\lambda x}` and
    :math:`\Pr[S\le x]\le M(-\lambda)^T e^{\lambda x}` with the discretised
    single-step (sub-probability) PLD; also returns :math:`\log M(\pm\lambda)`.
    """
    log_tau = math.log(TAIL_TRUNCATION / 2)
    t = steps.astype(jnp.float64)
    lm_pos = _log_mgf(pmf, l, 1.0, LAMBDAS, LAMBDA_SUB)
    lm_neg = _log_mgf(pmf, l, -1.0, LAMBDAS_NEG, 1)
    lmax = jnp.max(jnp.where(pmf > 0, l, -jnp.inf))
    lmin = jnp.min(jnp.where(pmf > 0, l, jnp.inf))
    x_hi = jnp.minimum(jnp.min((t * lm_pos - log_tau) / jnp.asarray(LAMBDAS)), t * lmax)
    x_lo = jnp.maximum(jnp.max(-(t * lm_neg - log_tau) / jnp.asarray(LAMBDAS_NEG)), t * lmin)
    return x_lo, x_hi, jnp.concatenate([lm_pos, lm_neg])


def _scaled(x: jax.Array, log_factor: jax.Array) -> jax.Array:
    r""":math:`x\,e^{f}` for :math:`x\ge0`, formed as :math:`e^{\log x+f}` (:math:`0` where :math:`x=0`).

    The plain product overflows to ``inf`` once :math:`f>709.78` even where the result is tiny (and
    ``inf * 0`` is ``nan``); in log space the exponent is the logarithm of the result itself, so it
    overflows only if the result does. The relative error is that of ``exp`` at an argument of size
    :math:`|\log x|+|f|`, the same order as the plain product's :math:`|f|u` from ``exp(f)``.
    """
    pos = x > 0
    return jnp.where(pos, jnp.exp(jnp.log(jnp.where(pos, x, 1.0)) + log_factor), 0.0)


def _connect_dots_split(ai: jax.Array, bi: jax.Array, lj: jax.Array, lj1: jax.Array, h) -> tuple[jax.Array, jax.Array]:
    r"""Masses moved to the *upper* end point of each loss interval by ``connect_dots``.

    On :math:`I_j=(\ell_j,\ell_{j+1}]` with :math:`a_j=P(L\in I_j)`, :math:`b_j=Q(L\in I_j)`:

    .. math::

        \beta_j=\frac{a_j-e^{\ell_j}b_j}{1-e^{-h}}\ \text{(remove, at }\ell_{j+1}),\qquad
        \beta'_j=\frac{b_j-e^{-\ell_{j+1}}a_j}{1-e^{-h}}\ \text{(add, at }-\ell_j),

    each clipped to :math:`[0,a_j]` resp. :math:`[0,b_j]`. Since :math:`dQ=e^{-L}dP`,
    :math:`e^{-\ell_{j+1}}a_j\le b_j\le e^{-\ell_j}a_j`, so both products are at most
    :math:`a_j` resp. :math:`b_j` -- but :math:`e^{\ell_j}` alone overflows for
    :math:`\ell_j>709.78`, which the power-of-two padding of the loss grid reaches for small
    :math:`\sigma` (e.g. :math:`\sigma=0.06`, :math:`h=10^{-3}`: the grid runs to 743), and
    ``inf * 0`` (a :math:`b_j` that underflowed) was ``nan``, poisoning the whole PLD. The products
    are therefore formed in log space (:func:`_scaled`). Where :math:`b_j` (or :math:`a_j`) has
    underflowed to 0 the product is 0, which moves *more* mass to the upper end point, i.e.
    towards ``round_up``: still a dominating pair, so every bound stays an upper bound.
    """
    denom = -jnp.expm1(-h)
    up_r = jnp.clip((ai - _scaled(bi, lj)) / denom, 0.0, ai)
    up_a = jnp.clip((bi - _scaled(ai, -lj1)) / denom, 0.0, bi)
    return up_r, up_a


def _single_one(s, logp, p, n_lo, steps, h, *, K: int, method: str, solver: str):
    """Discretised single-step PLDs (remove, add) + composition windows."""
    idx = n_lo + jnp.arange(K)
    l = idx.astype(jnp.float64) * h
    u = _inverse_loss(l, s, logp, solver)
    ue = jnp.concatenate([jnp.array([-jnp.inf]), u, jnp.array([jnp.inf])])
    # K+1 intervals: (-inf,u0], (u_j,u_{j+1}], (u_{K-1},inf)
    a = jnp.sum(p[None, :] * _interval_probs(ue[:, None] - s[None, :]), axis=1)
    b = _interval_probs(ue)
    ai, bi = a[1:K], b[1:K]  # inner intervals j = 0..K-2 between l_j and l_{j+1}
    lj, lj1 = l[:-1], l[1:]
    if method == "round_up":
        up_r, up_a = ai, bi
    else:
        up_r, up_a = _connect_dots_split(ai, bi, lj, lj1, h)
    zero1 = jnp.zeros(1)
    # REMOVE: index j <-> loss l_j
    rem = jnp.concatenate([zero1, up_r]) + jnp.concatenate([ai - up_r, zero1])
    rem = rem.at[0].add(a[0])
    inf_rem = a[K]
    # ADD (in remove order): index j <-> loss -l_j; the upper end of interval j is index j
    add = jnp.concatenate([up_a, zero1]) + jnp.concatenate([zero1, bi - up_a])
    add = add.at[K - 1].add(b[K])
    inf_add = b[0]
    add = add[::-1]  # ascending losses: index i <-> -(n_lo + K-1) + i
    l_add = -l[::-1]
    lo_r, hi_r, lm_r = _window(rem, l, steps)
    lo_a, hi_a, lm_a = _window(add, l_add, steps)
    pmfs = jnp.stack([rem, add])
    infs = jnp.stack([inf_rem, inf_add])
    offs = jnp.stack([n_lo, -(n_lo + K - 1)])
    return pmfs, infs, offs, jnp.stack([lo_r, lo_a]), jnp.stack([hi_r, hi_a]), jnp.stack([lm_r, lm_a])


@functools.partial(jax.jit, static_argnames=("K", "method", "solver"))
def single_batch(s, logp, p, n_lo, steps, h, *, K: int, method: str, solver: str):
    r"""Discretised single-step PLDs (remove, add) and their composition windows, for a batch of noise levels.

    Vectorised (``jax.vmap``) over the rows of ``s`` and ``n_lo``; compiled once per ``K``, ``method`` and
    ``solver``.

    Parameters
    ----------
    s : jax.Array
        Sensitivities divided by sigma, shape ``(S, C)`` (one row per noise level, ``C`` mixture components).
    logp : jax.Array
        Log-probabilities of the components, shape ``(C,)``.
    p : jax.Array
        Probabilities of the components, shape ``(C,)``.
    n_lo : jax.Array
        Index of the lowest grid loss per noise level, shape ``(S,)``.
    steps : jax.Array
        Number of compositions :math:`T` (integer scalar), for the windows.
    h : float
        Loss grid spacing.
    K : int
        Number of grid points of the single-step PLD (static).
    method : {"connect_dots", "round_up"}
        Discretisation rule (static).
    solver : {"gauss", "poisson", "newton"}
        Inverse of the loss function (static; :func:`mcacct.pld.plan.solver_for`).

    Returns
    -------
    pmfs : jax.Array
        Shape ``(S, 2, K)``; direction 0 is remove, 1 is add, each in ascending losses.
    infs : jax.Array
        Mass at :math:`+\infty` per direction, shape ``(S, 2)``.
    offs : jax.Array
        Grid index of the first pmf entry (loss ``offs * h``), shape ``(S, 2)``.
    x_lo, x_hi : jax.Array
        Chernoff window of the :math:`T`-fold sum per direction, shape ``(S, 2)``.
    lms : jax.Array
        Log-MGF values :math:`\log M(\pm\lambda)` per direction, shape ``(S, 2, L)``.
    """
    f = functools.partial(_single_one, K=K, method=method, solver=solver)
    return jax.vmap(f, in_axes=(0, None, None, 0, None, None))(s, logp, p, n_lo, steps, h)

