r"""A cheap certified upper bound :math:`U \ge L = \ln P/Q` of the b-min-sep remove loss (issue #39, shortcut 1).

Dong & Ganesh 2026 (arXiv:2602.09338, Thm. 5.1) give the loss of an output through the recursion

.. math::
    f_i = (1 - p) f_{i+1} + p\, a_i f_{i+b}, \qquad a_i = e^{\ell_i}, \qquad f_i = 1 \ (i > n),

with :math:`L = \ln f_1` (cold start) or :math:`\ln\big((f_1 + p\sum_{i=2}^{b} f_i)/(1 + (b-1)p)\big)` (warm start).
Every coefficient is non-negative, so every :math:`f_i` is non-decreasing in every :math:`a_j`, in
:math:`f_{i+1}` and in :math:`f_{i+b}`. The bound runs the recursion over blocks of ``s <= b`` rounds instead of
rounds (``n/s`` steps of a few flops, against ``n`` steps of an ``exp`` each).

**Blocks.** Cut ``1..n`` into ``K = ceil(n/s)`` blocks aligned to the end: block ``k`` is
:math:`[lo_k, hi_k]` with :math:`hi_k = n - (K-1-k)s` (block 0 may be shorter). Write
:math:`A_k \ge \max_{i \in k} a_i`, :math:`F^{lo}_k \ge f_{lo_k}`, :math:`F^{max}_k \ge \max_{i\in k} f_i`, and
:math:`F^{lo}_K = F^{max}_{k} = 1` for :math:`k \ge K` (past the horizon). With ``b = q s + r`` the jump targets
:math:`i + b` of block ``k`` lie in block ``k + q`` and, if ``r > 0``, the first ``r`` rounds of block
``k + q + 1`` (blocks end-aligned, so every block from ``K`` on lies past ``n``), hence
:math:`f_{i+b} \le G_k = \max(F^{max}_{k+q}, F^{max}_{k+q+1})` (the second only if ``r > 0``), and ``q >= 1``
because ``s <= b``: ``G_k`` only reads later blocks.

**One block.** Unrolling the recursion from :math:`f_{hi_k+1} = f_{lo_{k+1}}` to round ``j`` of block ``k``
(``t = hi_k - j + 1`` steps) and bounding every :math:`a_i f_{i+b}` by :math:`x_k = A_k G_k`:

.. math::
    f_j \le (1-p)^t f_{lo_{k+1}} + \sum_{i=j}^{hi_k} (1-p)^{i-j} p\, x_k
        = c_t F^{lo}_{k+1} + (1 - c_t)\, x_k, \qquad c_t = (1-p)^t,

a convex combination of :math:`F^{lo}_{k+1}` and :math:`x_k` whose weight moves monotonically with ``t``. Its
maximum over ``t in [1, s]`` is at an end, so

.. math::
    F^{lo}_k = c_s F^{lo}_{k+1} + (1 - c_s) x_k, \qquad
    F^{max}_k = \max\big(F^{lo}_k,\ (1-p) F^{lo}_{k+1} + p\, x_k\big).

For the short block 0 the maximum over ``t in [1, len_0]`` is at most that over ``[1, s]``, so the same
formulas bound it. By induction from the end (each right-hand side is non-decreasing in its bounds),
:math:`f_1 \le F^{max}_0`, every :math:`f_i \le F^{max}_{k(i)}`, and

.. math::
    U = \ln F^{max}_0 \ \text{(cold)}, \qquad
    U = \ln \frac{F^{max}_0 + p \sum_{i=2}^{b} F^{max}_{k(i)}}{1 + (b-1)p} \ \text{(warm; 1 for } i > n).

**Terms.** :math:`\ell_i = (s^m_i - \|c^{(i)}\|^2/2)/\sigma^2 + s^z_i/\sigma` (the ladder's sliding sums of the
output mean and the standard noise, :func:`mcacct.kernels.recursion.ladder_losses_from_sums_t`), so with
:math:`\mu_k = \max_{i\in k}(s^m_i - \|c^{(i)}\|^2/2)` and :math:`\zeta_k = \max_{i\in k} s^z_i` (one pass for
every candidate) :math:`\max_{i \in k} \ell_i \le \mu_k/\sigma^2 + \zeta_k/\sigma`. ``term_error`` bounds the float
error of the computed terms against the exact ones (:func:`mcacct.engine.systematic.term_error_bound`), so
:math:`A_k = \exp(\mu_k/\sigma^2 + \zeta_k/\sigma + \text{term\_error})` bounds the *exact* terms and ``U`` the
exact loss.

**Terms from the draws** (:mod:`mcacct.kernels.const_column`, :mod:`mcacct.kernels.block_terms`): :math:`\mu_k` and
:math:`\zeta_k` bounded without the exact path's sliding sums, for a constant positive column from the participation
and the noise's prefix sums per block, for any other from a table of the columns' overlaps and float32 sums of the
noise, so a batch whose draws are all skipped never forms the float64 sums
(:func:`mcacct.kernels.output.ladder_losses_from_draws_t`).

**Rounding, outward.** The constants :math:`c_t, 1 - c_t, p, 1-p` are computed in float64 (``expm1``/``log1p``,
relative error below ``1e-15``) and raised by a relative ``1e-13``: larger coefficients of non-negative numbers
only raise the bound. Every step's products and sums of non-negative numbers carry a relative error of a few
ulps and the ``exp`` of ``A_k`` a few more; every step multiplies its results by :math:`1 + 2^{-40}` (far above)
and adds :math:`2^{-1000}` (above anything lost to underflow). The final ``log`` adds
:math:`2^{-40}(1 + |U|)`. An overflow gives ``inf`` (or ``nan``): such a draw is never skipped. float64 only.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np


__all__ = ["BOUND_BLOCK", "block_layout", "block_maxima_t", "remove_loss_bound_t", "remove_loss_bound_from_sums_t",
           "remove_loss_bound_from_maxima"]

#: rounds per block (``s = min(BOUND_BLOCK, b)``)
BOUND_BLOCK = 16
_GROW = 1.0 + 2.0**-40       # per-step relative allowance
_FLOOR = 2.0**-1000          # per-step absolute allowance (underflow)
_CONST_UP = 1.0 + 1e-13      # constants raised


def block_layout(n: int, b: int, block: int) -> tuple[int, int, int, int, int]:
    """``(s, K, K_pad, q, r)``: block length, blocks, blocks padded in front to a multiple of ``q`` (super-blocks of
    ``q`` blocks, ``b = q s + r``)."""
    s = max(1, min(int(block), int(b)))
    k_blocks = -(-n // s)
    q, r = divmod(int(b), s)
    k_pad = -(-k_blocks // q) * q
    return s, k_blocks, k_pad, q, r


def block_maxima_t(x_t: jax.Array, block: int, k_pad: int) -> jax.Array:
    """Maxima of time-major ``x_t`` over end-aligned blocks of ``block`` rounds.

    The blocks are padded in front with ``-inf``: block ``k_pad - K`` (``K = ceil(n / block)``) holds rounds
    ``1..n - (K-1) block``.

    Parameters
    ----------
    x_t : jax.Array
        Time-major values, shape ``(n, ...)``.
    block : int
        Rounds per block, ``>= 1``.
    k_pad : int
        Blocks in the result, ``>= K``.

    Returns
    -------
    jax.Array
        Shape ``(k_pad, ...)``, the dtype of ``x_t``; its first ``k_pad - K`` rows are ``-inf``.
    """
    n, lead = x_t.shape[0], x_t.shape[1:]
    front = k_pad * block - n
    # one reduce_window pass, the front padding its -inf init (cheaper on XLA:CPU than slices or a reshape and
    # reduce: benchmarks/results/design_choices.md)
    return jax.lax.reduce_window(x_t, -jnp.inf, jax.lax.max, (block,) + (1,) * len(lead),
                                 (block,) + (1,) * len(lead), ((front, 0),) + ((0, 0),) * len(lead))


def _bound_from_exponents(m, n: int, b: int, p: float, warm_start: bool, block: int, exponents=None) -> jax.Array:
    """``U`` from ``m`` ``(K_pad, ...)``, upper bounds of the block maxima of the exact terms (module docstring).

    With ``exponents``, ``m`` is a pytree of arrays with ``K_pad`` leading rows and ``exponents(rows)`` gives the
    bounds of those rows (inside the recursion's loop, a super-block at a time: what XLA:CPU would otherwise fuse
    into the ``exp``, per candidate, is formed once)."""
    s, k_blocks, k_pad, q, r = block_layout(n, b, block)
    if exponents is None:
        exponents = lambda rows: rows  # noqa: E731
    rows = jax.tree_util.tree_leaves(m)
    if any(x.shape[0] != k_pad for x in rows):
        raise ValueError(f"expected {k_pad} padded blocks; got {[x.shape[0] for x in rows]}")
    lead = jax.eval_shape(exponents, jax.tree_util.tree_map(lambda x: x[:q], m)).shape[1:]
    dtype = rows[0].dtype
    log_q = math.log1p(-p) if p < 1.0 else -math.inf
    c_s = math.exp(s * log_q) * _CONST_UP
    w_s = (-math.expm1(s * log_q) if p < 1.0 else 1.0) * _CONST_UP
    c_1 = (1.0 - p) * _CONST_UP
    p_up = p * _CONST_UP
    # A_k (raised to e^-700 at least: a smaller exponent only loses the bound's relative rounding guarantee)
    xs = jax.tree_util.tree_map(lambda x: x.reshape((k_pad // q, q) + x.shape[1:]), m)
    # inside a super-block F^lo is linear in x: F^lo_j = c_s^(q-j) u + sum_{i >= j} c_s^(i-j) w_s x_i
    jj = np.arange(q)
    tri = np.where(jj[None, :] >= jj[:, None], np.power(c_s, np.maximum(jj[None, :] - jj[:, None], 0)) * w_s, 0.0)
    tri = jnp.asarray(tri * _CONST_UP, dtype)
    tail = jnp.asarray(np.power(c_s, q - jj) * _CONST_UP, dtype).reshape((q,) + (1,) * len(lead))

    def super_block(carry, x_sb):
        a_sb = jnp.exp(jnp.maximum(exponents(x_sb), -700.0))
        u, nxt, nn0 = carry  # F^lo of the next block; F^max of the next super-block's blocks; of the one after's first
        g = jnp.maximum(nxt, jnp.concatenate([nxt[1:], nn0[None]], axis=0)) if r else nxt
        x = a_sb * g
        f_lo = (jnp.tensordot(tri, x, axes=1) + tail * u) * _GROW + _FLOOR
        after = jnp.concatenate([f_lo[1:], u[None]], axis=0)          # F^lo of the block after each one
        mx = jnp.maximum(f_lo, (c_1 * after + p_up * x) * _GROW + _FLOOR)
        return (f_lo[0], mx, nxt[0]), mx

    ones = jnp.ones(lead, dtype)
    init = (ones, jnp.ones((q,) + lead, dtype), ones)
    _, f_max = jax.lax.scan(super_block, init, xs, reverse=True)
    f_max = f_max.reshape((k_pad,) + lead)
    first = k_pad - k_blocks                                   # block 0 (holds round 1)
    total = f_max[first]
    if warm_start and b > 1:
        counts = np.zeros(k_pad)
        for i in range(2, min(b, n) + 1):
            counts[first + (k_blocks - 1 - (n - i) // s)] += 1
        nz = np.nonzero(counts)[0]
        weights = jnp.asarray(p_up * counts[nz] * _CONST_UP, dtype).reshape((-1,) + (1,) * len(lead))
        total = total + jnp.sum(weights * f_max[nz], axis=0) + p_up * max(0, b - n)
        total = (total * _GROW + _FLOOR) * ((1.0 / (1.0 + (b - 1) * p)) * _CONST_UP)
    u_log = jnp.log(total * _GROW)
    u_log = u_log + 2.0**-40 * (1.0 + jnp.abs(u_log))
    return jnp.where(jnp.isnan(u_log), jnp.inf, u_log)  # an overflow (inf * 0 at p = 1) is never skipped


def remove_loss_bound_t(ell_t: jax.Array, min_sep: int, sampling_prob: float, warm_start: bool,
                        term_error=0.0, block: int = BOUND_BLOCK) -> jax.Array:
    r"""``U >= ln P/Q`` from time-major terms ``ell_t`` whose float error is at most ``term_error`` (module docstring).

    Parameters
    ----------
    ell_t : jax.Array
        float64, time-major ``(n, ...)``: the per-iteration terms :math:`\ell_i`.
    min_sep : int
        ``b``, ``>= 1``.
    sampling_prob : float
        ``p`` in ``(0, 1]``, a Python number.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).
    term_error : float or jax.Array, optional
        Bound on the float error of the computed terms against the exact ones (default 0).
    block : int, optional
        Rounds per block, ``s = min(block, b)`` (default :data:`BOUND_BLOCK`).

    Returns
    -------
    jax.Array
        float64 ``(...)``: ``U`` per sample; ``inf`` on overflow (never ``nan``).

    Raises
    ------
    ValueError
        If ``ell_t`` is not float64.
    """
    if ell_t.dtype != jnp.float64:
        raise ValueError(f"the remove-loss bound needs float64 terms; got {ell_t.dtype}")
    n, b = ell_t.shape[0], int(min_sep)
    s, _, k_pad, _, _ = block_layout(n, b, block)
    m = block_maxima_t(ell_t, s, k_pad) + jnp.asarray(term_error, ell_t.dtype)
    return _bound_from_exponents(m, n, b, float(sampling_prob), warm_start, block)


def remove_loss_bound_from_sums_t(s_m: jax.Array, s_z: jax.Array, half_sq: jax.Array, sigmas: jax.Array,
                                  term_errors: jax.Array, min_sep: int, sampling_prob: float, warm_start: bool,
                                  block: int = BOUND_BLOCK) -> jax.Array:
    r"""``U`` for every candidate ``sigmas[j]`` from the ladder's sliding sums ``s_m``, ``s_z``.

    Block maxima of :math:`s^m - \|c\|^2/2` and of :math:`s^z` are taken once, then per candidate
    :math:`A_k = \exp(\mu_k/\sigma^2 + \zeta_k/\sigma + e_j)` with ``e_j = term_errors[j]`` (module docstring);
    the candidates run side by side as lanes of one recursion.

    Parameters
    ----------
    s_m, s_z : jax.Array
        float64, time-major ``(n, ...)``: sliding sums of the output mean and of the standard noise.
    half_sq : jax.Array
        The halved squared column norms :math:`\|c^{(i)}\|^2/2`, shape ``(n, 1...)``.
    sigmas : array_like
        ``(J,)`` noise multipliers, ``> 0``.
    term_errors : array_like
        ``(J,)`` bounds on the float error of each candidate's terms.
    min_sep : int
        ``b``, ``>= 1``.
    sampling_prob : float
        ``p`` in ``(0, 1]``, a Python number.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).
    block : int, optional
        Rounds per block, ``s = min(block, b)`` (default :data:`BOUND_BLOCK`).

    Returns
    -------
    jax.Array
        float64 ``(J, ...)``: ``U`` per candidate and sample; ``inf`` where not finite (never ``nan``).

    Raises
    ------
    ValueError
        If ``s_z`` is not float64.
    """
    if s_z.dtype != jnp.float64:
        raise ValueError(f"the remove-loss bound needs float64 sums; got {s_z.dtype}")
    n, b = s_z.shape[0], int(min_sep)
    s, _, k_pad, _, _ = block_layout(n, b, block)
    mu = block_maxima_t(s_m - half_sq, s, k_pad)
    zeta = block_maxima_t(s_z, s, k_pad)
    return remove_loss_bound_from_maxima(mu, zeta, sigmas, term_errors, n, b, sampling_prob, warm_start, block)


def remove_loss_bound_from_maxima(mu: jax.Array, zeta: jax.Array, sigmas: jax.Array, term_errors: jax.Array,
                                  iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                                  block: int = BOUND_BLOCK) -> jax.Array:
    r"""``U`` for every candidate ``sigmas[j]`` from upper bounds of the block maxima :math:`\mu_k` (of
    :math:`s^m - \|c\|^2/2`) and :math:`\zeta_k` (of :math:`s^z`), padded in front with ``-inf`` as
    :func:`block_maxima_t` pads (:func:`remove_loss_bound_from_sums_t` and
    :func:`mcacct.kernels.const_column.remove_loss_bound_from_draws_t` give them).

    Parameters
    ----------
    mu, zeta : jax.Array
        float64 ``(K_pad, ...)``.
    sigmas, term_errors : array_like
        ``(J,)`` noise multipliers ``> 0`` and the bounds added to each candidate's block exponents.
    iterations, min_sep : int
        ``n`` and ``b``.
    sampling_prob, warm_start, block
        As in :func:`remove_loss_bound_from_sums_t`.

    Returns
    -------
    jax.Array
        As :func:`remove_loss_bound_from_sums_t` returns.
    """
    n, b = int(iterations), int(min_sep)
    _, _, k_pad, _, _ = block_layout(n, b, block)
    if mu.shape[0] != k_pad or zeta.shape != mu.shape:
        raise ValueError(f"mu and zeta must have shape ({k_pad}, ...) alike; got {mu.shape} and {zeta.shape}")
    sig = jnp.asarray(sigmas, jnp.float64)
    # (rows, J, B): the candidates side by side as lanes of one recursion, formed in that layout a super-block at a
    # time inside it
    inv = (1.0 / sig).reshape(1, -1, 1)
    errors = jnp.asarray(term_errors, jnp.float64).reshape(1, -1, 1)
    j = sig.shape[0]

    def exponents(rows):
        mu_r, zeta_r = rows
        a, z = mu_r[:, None] * (inv * inv), zeta_r[:, None] * inv
        # the two products and the sum round by a few ulps of |a| + |z|: raised by 2^-45 of that
        m = a + z + errors
        m = jnp.where(jnp.isfinite(m), m + 2.0**-45 * (jnp.abs(a) + jnp.abs(z)), m)  # -inf: the padding in front
        return jnp.where(jnp.isnan(m), jnp.inf, m)                                     # never skip a nan

    flat = (mu.reshape((k_pad, -1)), zeta.reshape((k_pad, -1)))
    u = _bound_from_exponents(flat, n, b, float(sampling_prob), warm_start, block, exponents)
    return u.reshape((j,) + mu.shape[1:])
