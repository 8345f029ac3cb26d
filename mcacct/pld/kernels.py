"""The jitted kernels of the PLD accountant: discretisation of a dominating pair into a privacy-loss pmf, the
composition window from log-MGF bounds, the exponential tilt, FFT composition by binary powering with its round-off
bound, and the delta/epsilon queries. Arrays and numbers in; no spec class is imported."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp, ndtr

from mcacct.pld.constants import (CMUL_C, FFT_C, INF_REL, LAMBDAS, LAMBDAS_NEG, LAMBDA_SUB, TAIL_TRUNCATION, U,
                                  UNDERFLOW)


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
    from :func:`_window`). Any :math:`\lambda` gives a valid bound; this one keeps the
    reported value tight.
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


def _query_delta(out, inf, a_start, h, eps_q, rb=None, rho=0.0, rho_inf=None):
    r""":math:`\delta(\varepsilon_q)=\sum_j\omega_j(1-e^{\varepsilon_q-\ell_j})_++\omega_\infty` (grid :math:`(A+i)h`).

    With ``rb`` / ``rho`` (see :func:`_query_epsilon`) the certified value
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


def _query_epsilon(out, inf, a_start, h, delta_q, rb=None, rho=0.0, rho_inf=None):
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
    :math:`(1+\rho)(S_0-e^{\varepsilon-\ell_k}T)+(1+\rho_\infty)\omega_\infty+r_k` (as :func:`_query_delta`). The
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
    :func:`_query_epsilon` (suffix sums inflated, the solution rounded up); without it, plain values.

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
        return _query_delta(out, inf, a_start, h, eps_q)[0], _query_epsilon(out, inf, a_start, h, delta_q)[0]
    rb = jnp.zeros(out.shape[0])
    return (_query_delta(out, inf, a_start, h, eps_q, rb, rho)[0],
            _query_epsilon(out, inf, a_start, h, delta_q, rb, rho)[0])


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
    at the window top (see :func:`_tilted_one`, :func:`_query_delta`, :func:`_query_epsilon`).
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
        d_eps, rb_d = _query_delta(out, inf, a_start, h, eps_q, rb, rho, INF_REL)
        return d_eps, nan, inf, tail, rb_d, nan, nan
    eps, rb_e, floor = _query_epsilon(out, inf, a_start, h, delta_q, rb, rho, INF_REL)
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
