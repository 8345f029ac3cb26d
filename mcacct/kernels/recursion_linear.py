r"""The linear-space evaluation of the privacy-loss recursion (:mod:`mcacct.kernels.recursion` states it), by
blocks of ``b`` iterations with a per-block log scale and a subtraction-free guard (an exact log-space fallback
where it fails: the CPU default below 64 samples per call), its blocks for the fused kernel, and the product
form of ``b = 1`` (Poisson sampling)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.stepwise import range_floor
from mcacct.kernels.recursion_log import reverse_cumsum0, split_blocks

__all__ = ["linear_applicable", "linear_first_values", "linear_block_init", "linear_block_step",
           "linear_block_finish", "poisson_log_ratio_linear"]


def _suffix_sums_consistent(terms: jax.Array, sums: jax.Array, tail: jax.Array) -> jax.Array:
    r"""A-posteriori check of a reverse cumulative sum ``S_j = t_j + S_{j+1}``, ``S_b = tail`` of
    non-negative terms, whatever order the backend summed in: with
    :math:`d_j = S_j - S_{j+1} - t_j` (and :math:`d_{b-1} = S_{b-1} - t_{b-1} - tail`), true for every
    sample where :math:`|d_j| \le (2b + 4)\,\epsilon\, S_j` for all ``j``. Then the error of each
    :math:`S_j` is at most :math:`\sum_{i \ge j} |d_i| \le (2b+4)\,b\,\epsilon\, S_j` (suffix sums of
    non-negative terms decrease), so no mass can have been lost unnoticed, e.g. by cancellation."""
    b = terms.shape[0]
    eps = float(jnp.finfo(terms.dtype).eps)
    nxt = jnp.concatenate([sums[1:], tail[None]], axis=0)
    d = jnp.abs(sums - nxt - terms)
    return jnp.all(d <= (2 * b + 4) * eps * sums, axis=0)


# largest (b - 1) |ln(1 - p)| for which the linear recursion's in-block factors (1 - p)^{-j} stay finite
_LINEAR_MAX_SPAN = {np.dtype(np.float64): 300.0, np.dtype(np.float32): 20.0}


def linear_applicable(b: int, log_q, dtype):
    r"""Whether :func:`linear_first_values` may run: ``(b - 1) |ln(1 - p)|`` within the dtype's span.

    The span (300 for float64, 20 for float32) keeps the in-block factors ``(1 - p)^{-j}`` finite.

    Parameters
    ----------
    b : int
        ``min_sep``.
    log_q : float or jax.Array
        :math:`\ln(1 - p)`.
    dtype : dtype
        float64 or float32.

    Returns
    -------
    bool or jax.Array
        A Python bool for a number ``log_q``, a traced bool for a traced one.
    """
    span = _LINEAR_MAX_SPAN[np.dtype(dtype)]
    if isinstance(log_q, (int, float)):
        return (b - 1) * abs(log_q) <= span
    return (b - 1) * jnp.abs(log_q) <= span


def linear_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> tuple[jax.Array, jax.Array]:
    r"""``log f_1..log f_b`` in linear space by blocks of ``b`` iterations, one ``exp`` per iteration.

    Each block stores its values as :math:`f = e^{s} \hat f` with a per-sample log scale ``s`` (float64)
    and :math:`\max_j \hat f_j = 1`. Given the next block :math:`\hat g` (scale ``s``), the block solves
    :math:`f_j = (1 - p) f_{j+1} + p e^{\ell_j} f_{j+b}`, :math:`f_b = g_0`, in closed form,

    .. math::
        \hat f_j \propto e^{-jA} S_j, \qquad
        S_j = \sum_{t=j}^{b-1} e^{u_t - M} \hat g_t + e^{bA - M} \hat g_0,

    with :math:`A = \ln(1-p)`, :math:`u_t = \ln p + \ell_t + tA` and :math:`M = \max(\max_t u_t, bA)`, so
    every term is at most 1 and the reverse cumulative sum cannot overflow; the new scale is
    :math:`s + M + \ln \max_j e^{-jA} S_j`. That is one ``exp`` per iteration and one ``log`` per block
    and sample, against two transcendentals per iteration in log space (float64 ``log`` is ~4x the cost
    of ``exp`` on CPU).

    Soundness of the arithmetic: all terms are non-negative and every partial sum is a sum of them (no
    subtraction, :func:`reverse_cumsum0`), so each block sum has relative error at most ``(b + 1)`` ulps
    plus ``(b + 1) tiny / S_j`` from terms flushed to zero or subnormals. The function also returns ``ok``
    (per sample), true only if (i) every block sum and every stored value is at least
    :func:`range_floor` (flushing changed nothing by more than one ulp) and (ii) every block's suffix sums
    pass :func:`_suffix_sums_consistent` (no mass lost by the summation, whatever order the backend used).
    Callers must fall back to a log-space recursion where ``ok`` is false (:func:`recursion_log_ratio_t`
    does, exactly). Requires :func:`linear_applicable` (else ``e^{-jA}`` could overflow).

    Parameters
    ----------
    ell_t : jax.Array
        The terms :math:`\ell_i`, time-major ``(n, ...)``.
    b : int
        ``min_sep``, ``>= 1``.
    log_p, log_q : float or jax.Array
        :math:`\ln p` and :math:`\ln(1 - p)` (``p < 1``).

    Returns
    -------
    first : jax.Array
        ``(b, ...)``: :math:`\ln f_1, \dots, \ln f_b`, the dtype of ``ell_t``.
    ok : jax.Array
        bool ``(...)``: whether the sample's arithmetic is certified.
    """
    blocks, pad = split_blocks(ell_t, b)
    init = linear_block_init(b, blocks.shape[2:], blocks.dtype)
    carry, _ = jax.lax.scan(lambda c, blk: (linear_block_step(c, blk, log_p, log_q), None), init, blocks,
                            reverse=True)
    return linear_block_finish(carry, pad)


def linear_block_init(b: int, lead: tuple[int, ...], dtype):
    """The state of :func:`linear_block_step` beyond the horizon (``f = 1``).

    Parameters
    ----------
    b : int
        ``min_sep``.
    lead : tuple of int
        The batch shape.
    dtype : dtype
        dtype of the scaled values.

    Returns
    -------
    tuple
        ``(v, s, v_prev, s_prev, ok)``: ``v`` the block's scaled values ``(b, *lead)``, ``s`` its float64 log scale
        ``lead``, the previous block's pair, and the running ``ok`` flags (bool ``lead``).
    """
    ones = jnp.ones((b,) + tuple(lead), dtype)
    zero = jnp.zeros(tuple(lead), jnp.float64)
    return ones, zero, ones, zero, jnp.ones(tuple(lead), bool)


def linear_block_step(carry, blk: jax.Array, log_p, log_q):
    r"""One block of :func:`linear_first_values`.

    Pure: the fused kernel (:mod:`mcacct.kernels.fused`) runs the same step.

    Parameters
    ----------
    carry : tuple
        The next block's state (:func:`linear_block_init`).
    blk : jax.Array
        The block's terms ``ell``, ``(b, *lead)``.
    log_p, log_q : float or jax.Array
        :math:`\ln p` and :math:`\ln(1 - p)`.

    Returns
    -------
    tuple
        The new carry ``(v, s, v_prev, s_prev, ok)`` (:func:`linear_block_init`).
    """
    g, s, _, _, ok = carry
    b = blk.shape[0]
    lead = blk.shape[1:]
    dtype = blk.dtype
    thr = range_floor(b, dtype)
    shape_t = (b,) + (1,) * len(lead)
    tt = jnp.arange(b, dtype=jnp.float64)
    lq = jnp.asarray(log_q, jnp.float64)
    t_a = (tt * lq).astype(dtype).reshape(shape_t)               # t A
    inv_q_t = jnp.exp(-tt * lq).astype(dtype).reshape(shape_t)   # e^{-t A}
    b_a = (b * lq).astype(dtype)
    u = log_p + blk + t_a
    m = jnp.maximum(jnp.max(u, axis=0), b_a)
    terms = jnp.exp(u - m) * g
    tail = jnp.exp(b_a - m) * g[0]
    sums = reverse_cumsum0(terms) + tail
    v = sums * inv_q_t
    mx = jnp.max(v, axis=0)
    v = v * (1.0 / mx)
    ok = (ok & (jnp.min(sums, axis=0) >= thr) & (jnp.min(v, axis=0) >= thr)
          & _suffix_sums_consistent(terms, sums, tail))
    s_new = s + m.astype(jnp.float64) + jnp.log(mx).astype(jnp.float64)
    return v, s_new, g, s, ok


def linear_block_finish(carry, pad: int) -> tuple[jax.Array, jax.Array]:
    r"""``(log f_1..log f_b, ok)`` from the carry after the first block.

    Parameters
    ----------
    carry : tuple
        The state after the first block (:func:`linear_block_step`).
    pad : int
        Dummy rows in front of the first block, ``0 <= pad < b``.

    Returns
    -------
    first : jax.Array
        ``(b, ...)``: :math:`\ln f_1, \dots, \ln f_b`.
    ok : jax.Array
        bool ``(...)``: the running ``ok`` flags.
    """
    v0, s0, v1, s1, ok = carry
    dtype = v0.dtype
    first = jnp.concatenate([jnp.log(v0[pad:]).astype(jnp.float64) + s0,
                             jnp.log(v1[:pad]).astype(jnp.float64) + s1], axis=0)
    return first.astype(dtype), ok


def poisson_log_ratio_linear(ell_t: jax.Array, log_p, p, group: int = 8) -> tuple[jax.Array, jax.Array]:
    r""":math:`\sum_i \ln(1 - p + p e^{\ell_i})` (``b = 1``) as logs of products of ``group`` factors.

    One ``exp`` per iteration and one ``log`` per group. Each factor is a sum of two non-negative terms.

    Parameters
    ----------
    ell_t : jax.Array
        The terms :math:`\ell_i`, time-major ``(n, ...)``.
    log_p : float or jax.Array
        :math:`\ln p`.
    p : float or jax.Array
        ``p`` in ``(0, 1]``.
    group : int, optional
        Factors per product (default 8).

    Returns
    -------
    loss : jax.Array
        ``(...)``: the sum.
    ok : jax.Array
        bool ``(...)``: false where a product left the normal range by less than ``1/eps`` (overflow or loss of
        relative precision); callers fall back.
    """
    n = ell_t.shape[0]
    lead = ell_t.shape[1:]
    m = -(-n // group)
    pad = m * group - n
    if pad:  # ell = 0 gives the factor 1
        ell_t = jnp.concatenate([ell_t, jnp.zeros((pad,) + lead, ell_t.dtype)], axis=0)
    finfo = jnp.finfo(ell_t.dtype)
    factors = (1.0 - jnp.asarray(p, ell_t.dtype)) + jnp.exp(log_p + ell_t)
    prods = jnp.prod(factors.reshape((m, group) + lead), axis=1)
    ok = jnp.all(jnp.isfinite(prods) & (prods >= float(finfo.tiny) / float(finfo.eps))
                 & (prods <= float(finfo.max) * float(finfo.eps)), axis=0)
    return jnp.sum(jnp.log(prods), axis=0), ok


