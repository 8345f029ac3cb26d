r"""The privacy-loss recursions: ``L(y) = ln P(y)/Q(y)`` from the per-iteration terms ``ell``
(Dong & Ganesh 2026, arXiv:2602.09338, §5 and §6.2).

Every function takes arrays and plain numbers (``min_sep``, ``sampling_prob``, ``warm_start``) and imports
no scheme; the schemes (:mod:`mcacct.schemes`) call them with their fields.

Write :math:`\ell_i = (\langle c^{(i)}, y_{i:i+b} \rangle - \|c^{(i)}\|^2/2)/\sigma^2` for the log
likelihood ratio of one participation at iteration ``i`` (column ``i`` of ``C``, truncated at row ``n``).
With :math:`f_i` the likelihood ratio of iterations ``i..n`` given that the example is available at ``i``,
Theorem 5.1 gives

.. math::
    f_i = (1 - p)\, f_{i+1} + p\, e^{\ell_i} f_{i+b}, \qquad f_i = 1 \ (i > n),

so ``L = ln f_1`` for the cold start (Alg. 1) and, for the warm start (Alg. 2),

.. math::  L = \ln \frac{f_1 + p \sum_{i=2}^{b} f_i}{1 + (b - 1) p}.

The recursion runs by blocks of ``b`` iterations, each solved in closed form given the next block: in
linear space with a per-block log scale and an exact log-space fallback (``"linear"``, the CPU default below 64
samples per call), or in log space (``"blocked"``, the accelerator default); ``"stepwise"`` runs it as written
in linear space, one iteration at a time, with an exact power-of-two rescale per block (the CPU default from 64
samples per call, :mod:`mcacct.kernels.stepwise`); ``"scan"`` is the plain ``n``-step log-space recursion with a ring buffer of the last ``b`` values. All are ``O(n)`` per sample after the sliding dot
products, which cost ``O(n b)`` directly, ``O(n log n)`` by FFT and ``O(n)`` for constant ``c_col`` by
prefix sums. For ``b = 1`` the recursion
factorises: :math:`L = \sum_i \ln(1 - p + p e^{\ell_i})`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.bound import remove_loss_bound_from_sums_t
from mcacct.kernels.control import rare_cond
from mcacct.kernels.prefix import prefix_sums0
from mcacct.kernels.sliding import column_sq_norms, sliding_dot_t
from mcacct.kernels.stepwise import STEPWISE_MIN_LANES, range_floor, stepwise_first_values
from mcacct.core.validate import RECURSIONS, check_bool, check_int, check_prob
from mcacct.core.platform import target_platform

__all__ = ["RECURSIONS", "linear_block_init", "linear_block_step", "linear_block_finish", "start_log_ratio",
           "linear_applicable", "range_floor", "auto_recursion", "recursion_log_ratio", "recursion_log_ratio_t",
           "ladder_losses_t", "ladder_losses_from_sums_t", "shift_mixture_log_ratio",
           "scan_first_values", "blocked_first_values", "linear_first_values", "poisson_log_ratio_linear"]



def _assoc_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> jax.Array:
    r"""``log f_1..log f_b`` by blocks of ``b`` iterations (time-major ``ell_t`` of shape ``(n, ...)``).

    Inside a block the recursion is first order given the next block ``g`` (``f_{i+b}``):
    :math:`x_j = \mathrm{logaddexp}(A + x_{j+1}, B_j)` with :math:`A = \ln(1-p)`,
    :math:`B_j = \ln p + \ell_j + g_j`, :math:`x_b = g_0`. Each step is the map
    :math:`x \mapsto \mathrm{logaddexp}(a + x, c)`; these maps compose associatively,
    :math:`(a_1, c_1)` then :math:`(a_2, c_2)` giving :math:`(a_1 + a_2, \mathrm{logaddexp}(a_2 + c_1, c_2))`,
    so a block costs ``O(b log b)`` work at depth ``log b`` and the scan runs ``ceil(n/b)`` steps.
    Every step is a ``logaddexp`` (no subtraction of sums), so it needs no range guard.
    """
    blocks, pad = _blocks(ell_t, b)
    lead = blocks.shape[2:]

    def combine(acc, e):
        a1, c1 = acc
        a2, c2 = e
        return a1 + a2, jnp.logaddexp(a2 + c1, c2)

    def body(carry, blk):
        g, _ = carry
        c = log_p + blk + g
        a = jnp.full_like(c, log_q)
        a_cum, c_cum = jax.lax.associative_scan(combine, (a, c), reverse=True, axis=0)
        x = jnp.logaddexp(a_cum + g[0], c_cum)
        return (x, g), None

    ones = jnp.zeros((b,) + lead, ell_t.dtype)  # log f = 0 beyond the horizon
    (block0, block1), _ = jax.lax.scan(body, (ones, ones), blocks, reverse=True)
    # real iterations 1..b are block0[pad:] followed by block1[:pad]
    return jnp.concatenate([block0[pad:], block1[:pad]], axis=0)


def _blocks(ell_t: jax.Array, b: int):
    """Pad ``ell_t`` (time-major) in front to a multiple of ``b`` and reshape to ``(m, b, ...)``."""
    n = ell_t.shape[0]
    lead = ell_t.shape[1:]
    m = -(-n // b)
    pad = m * b - n  # dummy iterations in front: they never influence f_1..f_n
    if pad:
        ell_t = jnp.concatenate([jnp.zeros((pad,) + lead, ell_t.dtype), ell_t], axis=0)
    return ell_t.reshape((m, b) + lead), pad


def _p_one_first_values(ell_t: jax.Array, b: int, log_p) -> jax.Array:
    """``log f_1..log f_b`` for ``p = 1``: :math:`f_i = e^{\\ell_i} f_{i+b}` (additions only, exact to
    ``ceil(n/b)`` roundings)."""
    blocks, pad = _blocks(ell_t, b)
    lead = blocks.shape[2:]

    def body(carry, blk):
        g, _ = carry
        return (log_p + blk + g, g), None

    ones = jnp.zeros((b,) + lead, ell_t.dtype)
    (block0, block1), _ = jax.lax.scan(body, (ones, ones), blocks, reverse=True)
    return jnp.concatenate([block0[pad:], block1[:pad]], axis=0)


def blocked_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> tuple[jax.Array, jax.Array]:
    r"""``log f_1..log f_b`` by blocks of ``b`` iterations with two transcendentals per iteration
    (``p < 1``), and ``ok`` per sample.

    Given the next block ``g`` (``f_{i+b}``) the block solves
    :math:`x_j = \mathrm{logaddexp}(A + x_{j+1}, B_j)`, :math:`x_b = g_0`, :math:`A = \ln(1-p)`,
    :math:`B_j = \ln p + \ell_j + g_j`, whose solution is

    .. math::  x_j = -jA + \ln\Big(\sum_{t=j}^{b-1} e^{B_t + tA} + e^{bA + g_0}\Big).

    The sum is a reverse cumulative sum of non-negative terms ``exp(u_t - M)``, ``M`` the block maximum of
    the exponents (per sample), so nothing overflows and no partial sum is formed by a subtraction. A
    suffix sum far below ``M`` may have lost terms to underflow; ``ok`` is false wherever a suffix sum is
    below :func:`range_floor` (so flushing could have changed it by more than one ulp), and callers must
    then fall back to an exact log-space recursion (:func:`recursion_log_ratio_t` does).
    """
    blocks, pad = _blocks(ell_t, b)
    lead = blocks.shape[2:]
    dtype = blocks.dtype
    thr = range_floor(b, dtype)
    shape_t = (b,) + (1,) * len(lead)
    t_a = (jnp.arange(b, dtype=dtype) * log_q).reshape(shape_t)  # t * A
    b_a = jnp.asarray(b, dtype) * log_q

    def body(carry, blk):
        g, _, ok = carry
        u = log_p + blk + g + t_a                  # B_t + t A
        tail = b_a + g[0]                          # b A + g_0
        m = jnp.maximum(jnp.max(u, axis=0), tail)
        sums = _reverse_cumsum0(jnp.exp(u - m)) + jnp.exp(tail - m)
        ok = ok & (jnp.min(sums, axis=0) >= thr)
        x = jnp.log(jnp.maximum(sums, thr)) + m - t_a
        return (x, g, ok), None

    ones = jnp.zeros((b,) + lead, dtype)
    (block0, block1, ok), _ = jax.lax.scan(body, (ones, ones, jnp.ones(lead, bool)), blocks, reverse=True)
    return jnp.concatenate([block0[pad:], block1[:pad]], axis=0), ok


def scan_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> jax.Array:
    """``log f_1..log f_b`` by a reverse ``lax.scan`` over the ``n`` iterations with a ring buffer:
    ``ring[i % b]`` holds ``f_{i+b}`` when step ``i`` reads it and ``f_i`` after it. Every step is one
    ``logaddexp`` of two terms (relative error a few ulps, no range limit): the reference recursion."""
    n = ell_t.shape[0]
    lead = ell_t.shape[1:]
    dtype = ell_t.dtype

    def body(carry, inputs):
        ring, f_next = carry
        i, e = inputs
        slot = i % b
        f_ib = jax.lax.dynamic_index_in_dim(ring, slot, 0, keepdims=False)  # f_{i+b}
        f_i = jnp.logaddexp(log_q + f_next, log_p + e + f_ib)
        ring = jax.lax.dynamic_update_index_in_dim(ring, f_i, slot, 0)
        return (ring, f_i), None

    ring0 = jnp.zeros((b,) + lead, dtype)
    f0 = jnp.zeros(lead, dtype)
    (ring, _), _ = jax.lax.scan(body, (ring0, f0), (jnp.arange(n, dtype=jnp.int32), ell_t), reverse=True)
    return ring  # ring[i] = f_{i+1} (1-based) for i < b; f = 1 beyond n


def _reverse_cumsum0(x: jax.Array) -> jax.Array:
    """Reverse cumulative sum along axis 0 of non-negative terms, every partial sum a sum of non-negative
    terms (no subtraction), so each has relative error at most ``(b + 1)`` ulps.

    Short axes (``<= 32``) by ``cumsum``; longer ones by two levels of 0/1 triangular products
    (:func:`mcacct.kernels.prefix.prefix_sums0`: ~``2 * 16`` multiply-adds per element, where XLA's CPU
    ``cumsum`` is a ``reduce_window`` whose cost grows with the axis). (An earlier two-level form built
    the group offsets as ``inclusive - total``, which cancels catastrophically when a later group dwarfs
    the earlier ones; every output here is a sum of a subset of the terms.)
    """
    if x.shape[0] <= 32:
        return jnp.cumsum(x[::-1], axis=0)[::-1]
    return prefix_sums0(x, reverse=True)


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
    """Whether :func:`linear_first_values` may run: ``(b - 1) |ln(1 - p)|`` within the dtype's span
    (a Python bool for a number ``log_q``, a traced bool for a traced one)."""
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
    subtraction, :func:`_reverse_cumsum0`), so each block sum has relative error at most ``(b + 1)`` ulps
    plus ``(b + 1) tiny / S_j`` from terms flushed to zero or subnormals. The function also returns ``ok``
    (per sample), true only if (i) every block sum and every stored value is at least
    :func:`range_floor` (flushing changed nothing by more than one ulp) and (ii) every block's suffix sums
    pass :func:`_suffix_sums_consistent` (no mass lost by the summation, whatever order the backend used).
    Callers must fall back to a log-space recursion where ``ok`` is false (:func:`recursion_log_ratio_t`
    does, exactly). Requires :func:`linear_applicable` (else ``e^{-jA}`` could overflow).
    """
    blocks, pad = _blocks(ell_t, b)
    init = linear_block_init(b, blocks.shape[2:], blocks.dtype)
    carry, _ = jax.lax.scan(lambda c, blk: (linear_block_step(c, blk, log_p, log_q), None), init, blocks,
                            reverse=True)
    return linear_block_finish(carry, pad)


def linear_block_init(b: int, lead: tuple[int, ...], dtype):
    """The state of :func:`linear_block_step` beyond the horizon (``f = 1``): ``(v, s, v_prev, s_prev, ok)``,
    ``v`` the block's scaled values ``(b, *lead)``, ``s`` its float64 log scale, the previous block's pair, and
    the running ``ok`` flags."""
    ones = jnp.ones((b,) + tuple(lead), dtype)
    zero = jnp.zeros(tuple(lead), jnp.float64)
    return ones, zero, ones, zero, jnp.ones(tuple(lead), bool)


def linear_block_step(carry, blk: jax.Array, log_p, log_q):
    """One block of :func:`linear_first_values`: ``blk`` holds the block's terms ``ell`` ``(b, *lead)``, the
    carry the next block (:func:`linear_block_init`); returns the new carry. Pure: the fused kernel
    (:mod:`mcacct.kernels.fused`) runs the same step."""
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
    sums = _reverse_cumsum0(terms) + tail
    v = sums * inv_q_t
    mx = jnp.max(v, axis=0)
    v = v * (1.0 / mx)
    ok = (ok & (jnp.min(sums, axis=0) >= thr) & (jnp.min(v, axis=0) >= thr)
          & _suffix_sums_consistent(terms, sums, tail))
    s_new = s + m.astype(jnp.float64) + jnp.log(mx).astype(jnp.float64)
    return v, s_new, g, s, ok


def linear_block_finish(carry, pad: int) -> tuple[jax.Array, jax.Array]:
    """``(log f_1..log f_b, ok)`` from the carry after the first block (``pad`` dummy rows in front of it)."""
    v0, s0, v1, s1, ok = carry
    dtype = v0.dtype
    first = jnp.concatenate([jnp.log(v0[pad:]).astype(jnp.float64) + s0,
                             jnp.log(v1[:pad]).astype(jnp.float64) + s1], axis=0)
    return first.astype(dtype), ok


def poisson_log_ratio_linear(ell_t: jax.Array, log_p, p, group: int = 8) -> tuple[jax.Array, jax.Array]:
    r""":math:`\sum_i \ln(1 - p + p e^{\ell_i})` (``b = 1``) as logs of products of ``group`` factors,
    one ``exp`` per iteration and one ``log`` per group. Each factor is a sum of two non-negative terms.
    ``ok`` (per sample) is false where a product left the normal range by less than ``1/eps`` (overflow
    or loss of relative precision); callers fall back."""
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


def _with_fallback(fast, ok, exact, *operands):
    """``fast`` if every sample is ``ok``, else the whole batch recomputed by ``exact(*operands)`` (never mixed;
    :func:`~mcacct.kernels.control.rare_cond`, so that a vmapped batch runs ``exact`` only when needed)."""
    return rare_cond(~jnp.all(ok), lambda fast, *ops: exact(*ops), lambda fast, *ops: fast, fast, *operands)


def auto_recursion(lead: tuple[int, ...]) -> str:
    """What ``"auto"`` resolves to for a batch of shape ``lead`` (static): on CPU ``"stepwise"`` from
    :data:`mcacct.kernels.stepwise.STEPWISE_MIN_LANES` samples on, else ``"linear"``; ``"blocked"`` elsewhere."""
    if target_platform() != "cpu":
        return "blocked"
    return "stepwise" if math.prod(lead) >= STEPWISE_MIN_LANES else "linear"


def recursion_log_ratio_t(ell_t: jax.Array, min_sep: int, sampling_prob, warm_start: bool,
                          recursion: str = "auto") -> jax.Array:
    r"""The kernel of Theorem 5.1: ``ln P(y)/Q(y)`` from the per-iteration terms ``ell_t`` (time-major,
    shape ``(n, ...)``) for b-min-sep sampling with ``min_sep`` (static) and ``sampling_prob`` ``p``.

    ``sampling_prob`` may be a Python number or a traced scalar in ``(0, 1]`` (one compilation serves every
    ``p``); ``p = 1`` is handled exactly. ``recursion`` as in :func:`recursion_log_ratio`. Every fast path
    (``"linear"``, ``"blocked"``) certifies its own arithmetic per sample and recomputes the whole batch with
    the exact log-space scan where it cannot, so the result is never silently wrong.
    """
    if recursion not in RECURSIONS:
        raise ValueError(f"recursion must be one of {RECURSIONS}; got {recursion!r}")
    b = int(min_sep)
    dtype = ell_t.dtype
    static_p = isinstance(sampling_prob, (int, float))
    p64 = jnp.asarray(sampling_prob, jnp.float64)
    log_p = jnp.log(p64).astype(dtype)
    log_q64 = math.log1p(-sampling_prob) if static_p and sampling_prob < 1.0 else (
        -math.inf if static_p else jnp.log1p(-p64))
    log_q = jnp.asarray(log_q64, dtype)
    lead = ell_t.shape[1:]
    if recursion == "auto":
        recursion = auto_recursion(lead)
    if b == 1:
        exact = lambda e, lp, lq: jnp.sum(jnp.logaddexp(lq, lp + e), axis=0)  # noqa: E731
        if recursion in ("linear", "stepwise") and dtype == jnp.float64:  # at b = 1 both are this product form
            fast, ok = poisson_log_ratio_linear(ell_t, log_p, p64)
            return _with_fallback(fast, ok, exact, ell_t, log_p, log_q)
        return exact(ell_t, log_p, log_q)
    exact_scan = lambda e, lp, lq: scan_first_values(e, b, lp, lq)  # noqa: E731
    scan = lambda: exact_scan(ell_t, log_p, log_q)  # noqa: E731

    def general():  # p < 1
        if recursion == "linear":
            applicable = linear_applicable(b, log_q64, dtype)
            if applicable is False:
                return scan()

            def linear():
                lq = log_q64 if static_p else jnp.where(applicable, log_q64, 0.0)
                fast, ok = linear_first_values(ell_t, b, log_p, lq)
                return _with_fallback(fast, ok, exact_scan, ell_t, log_p, log_q)
            return linear() if applicable is True else jax.lax.cond(applicable, linear, scan)
        if recursion == "stepwise":
            fast, ok = stepwise_first_values(ell_t, b, log_p, log_q)
            return _with_fallback(fast, ok, exact_scan, ell_t, log_p, log_q)
        if recursion == "blocked":
            fast, ok = blocked_first_values(ell_t, b, log_p, log_q)
            return _with_fallback(fast, ok, exact_scan, ell_t, log_p, log_q)
        if recursion == "assoc":
            return _assoc_first_values(ell_t, b, log_p, log_q)
        return scan()

    if recursion == "scan" or recursion == "assoc":
        f_first = general()  # both are exact at p = 1 (log(1 - p) = -inf is handled by logaddexp)
    elif static_p:
        f_first = _p_one_first_values(ell_t, b, log_p) if sampling_prob >= 1.0 else general()
    else:
        f_first = jax.lax.cond(p64 >= 1.0, lambda: _p_one_first_values(ell_t, b, log_p), general)
    return start_log_ratio(f_first, sampling_prob, warm_start)


def start_log_ratio(f_first: jax.Array, sampling_prob, warm_start: bool) -> jax.Array:
    r"""``L`` from ``log f_1..log f_b`` (axis 0): :math:`\ln f_1` for the cold start, and for the warm start
    (Alg. 2) :math:`\ln\big((f_1 + p \sum_{i=2}^{b} f_i) / (1 + (b - 1) p)\big)`."""
    if not warm_start:
        return f_first[0]
    b = f_first.shape[0]
    dtype = f_first.dtype
    p64 = jnp.asarray(sampling_prob, jnp.float64)
    shape_t = (b,) + (1,) * (f_first.ndim - 1)
    w = jnp.where(jnp.arange(b) == 0, 0.0, jnp.log(p64)).astype(dtype).reshape(shape_t)
    norm = jnp.log1p((b - 1) * p64).astype(dtype)
    return jax.scipy.special.logsumexp(f_first + w, axis=0) - norm


def recursion_log_ratio(ell: jax.Array, min_sep: int, sampling_prob, warm_start: bool,
                        recursion: str = "auto") -> jax.Array:
    r"""The recursion of Theorem 5.1 on the per-iteration terms ``ell`` (shape ``(..., n)``, batch-first):
    :func:`recursion_log_ratio_t` along the last axis.

    ``recursion``:

    - ``"linear"``: blocks of ``b`` iterations in linear space with a per-block log scale, one ``exp``
      per iteration (:func:`linear_first_values`); wherever its arithmetic could have lost precision
      (a block sum or value within ``1/eps`` of the smallest normal number, or a suffix sum that fails the
      a-posteriori consistency check) the whole batch is recomputed by ``"scan"``, so the result is never
      silently wrong. The CPU default.
    - ``"scan"``: ``n`` sequential log-space steps (``logaddexp``), no range caveat.
    - ``"blocked"``: ``ceil(n/b)`` sequential log-space block steps, two transcendentals per iteration;
      recomputed by ``"scan"`` wherever a suffix sum underflowed. The accelerator default.
    - ``"assoc"``: blocks by an associative log-space scan, ``O(b log b)`` per block.
    - ``"stepwise"``: ``n`` linear-space steps (one ``exp`` and three flops per iteration) with an exact
      power-of-two rescale per block (:func:`mcacct.kernels.stepwise.stepwise_first_values`); recomputed by
      ``"scan"`` wherever a value left the range. The CPU default from 64 samples per call.
    - At ``b = 1`` (:math:`f_1 = \prod_i (1 - p + p e^{\ell_i})`) ``"linear"`` and ``"stepwise"`` take the product
      form in float64 (:func:`poisson_log_ratio_linear`; CPU: ~2.3 against ~10 ns per term for ``logaddexp``).
    - ``"auto"``: :func:`auto_recursion`: ``"stepwise"`` on CPU from 64 samples per call, ``"linear"`` below,
      ``"blocked"`` elsewhere.

    Returns ``ln P(y)/Q(y)`` with the leading shape of ``ell``.
    """
    if recursion not in RECURSIONS:
        raise ValueError(f"recursion must be one of {RECURSIONS}; got {recursion!r}")
    return recursion_log_ratio_t(jnp.moveaxis(ell, -1, 0), min_sep, sampling_prob, warm_start, recursion)


def ladder_losses_t(m_t: jax.Array, z_t: jax.Array, sigmas: jax.Array, min_sep: int, sampling_prob,
                    warm_start: bool, c_col: tuple[float, ...], dot_method: str = "auto",
                    recursion: str = "auto") -> jax.Array:
    r"""Privacy losses of both directions for every noise multiplier of a ladder on one set of draws:
    :func:`ladder_losses_from_sums_t` of the sliding sums :math:`s^m = \langle c, m \rangle`,
    :math:`s^z = \langle c, z\rangle` of ``m_t`` (output mean ``C x``) and ``z_t`` (standard normal noise),
    time-major ``(n, B)``."""
    return ladder_losses_from_sums_t(sliding_dot_t(m_t, c_col, dot_method), sliding_dot_t(z_t, c_col, dot_method),
                                     sigmas, min_sep, sampling_prob, warm_start, c_col, recursion)


def ladder_losses_from_sums_t(s_m: jax.Array, s_z: jax.Array, sigmas: jax.Array, min_sep: int, sampling_prob,
                              warm_start: bool, c_col: tuple[float, ...], recursion: str = "auto",
                              add_bound: float | None = None, remove_skip=None) -> jax.Array:
    r"""Privacy losses of both directions for every noise multiplier of a ladder from the sliding sums of one set
    of draws, :math:`s^m_i = \langle c^{(i)}, m \rangle` (the output mean ``C x``) and
    :math:`s^z_i = \langle c^{(i)}, z\rangle` (standard normal noise), time-major ``(n, B)``. By linearity, for
    each :math:`\sigma_j`

    .. math::
        \ell^{rem}_i = (s^m_i + \sigma_j s^z_i - \|c^{(i)}\|^2/2)/\sigma_j^2, \qquad
        \ell^{add}_i = (\sigma_j s^z_i - \|c^{(i)}\|^2/2)/\sigma_j^2,

    the terms of ``y = m + sigma_j z`` (``y ~ P``) and ``y = sigma_j z`` (``y ~ Q``); only the recursion runs
    per candidate (``lax.map`` over the ladder, so each candidate keeps its exact fallback). Returns
    ``(J, 2, B)``: ``[:, 0]`` is ``ln P/Q`` of the remove outputs, ``[:, 1]`` is ``ln Q/P`` of the add outputs.

    The two skips of provably zero contributions (:mod:`mcacct.kernels.shortcuts`): with ``add_bound`` (static;
    :func:`~mcacct.kernels.shortcuts.add_skip_bound`) the add recursions do not run and every add loss is that
    bound. With ``remove_skip`` (a :class:`~mcacct.kernels.shortcuts.RemoveSkip` of per-candidate arrays,
    float64, ``B`` a single axis) every sample's remove loss is first bounded, :math:`U \ge L`
    (:func:`mcacct.kernels.bound.remove_loss_bound_from_sums_t`); a sample whose ``U`` is at most every
    candidate's threshold keeps ``U`` (its contribution is provably 0); where any sample of the batch does not,
    the exact recursions run for the batch (the same program and bits as without the skip) and those samples
    take their exact losses.
    """
    n = s_z.shape[0]
    dtype = s_z.dtype
    half_sq = jnp.asarray(0.5 * column_sq_norms(c_col, n), dtype).reshape((n,) + (1,) * (s_z.ndim - 1))

    def rem_one(s_m, s_z, sig):
        sig = sig.astype(dtype)
        return recursion_log_ratio_t((s_m + (sig * s_z - half_sq)) * (1.0 / sig**2), min_sep, sampling_prob,
                                     warm_start, recursion)

    def add_one(s_z, sig):
        sig = sig.astype(dtype)
        return -recursion_log_ratio_t((sig * s_z - half_sq) * (1.0 / sig**2), min_sep, sampling_prob, warm_start,
                                      recursion)

    sigmas = jnp.asarray(sigmas)
    if remove_skip is None or s_z.ndim != 2 or dtype != jnp.float64:
        def one(sig):
            rem = rem_one(s_m, s_z, sig)
            return jnp.stack([rem, jnp.full_like(rem, add_bound) if add_bound is not None else add_one(s_z, sig)])

        return jax.lax.map(one, sigmas)
    rem = _remove_with_skip(s_m, s_z, half_sq, sigmas, remove_skip, min_sep, float(sampling_prob), warm_start,
                            lambda sm, sz: jax.lax.map(lambda sig: rem_one(sm, sz, sig), sigmas))
    add = (jnp.full_like(rem, add_bound) if add_bound is not None
           else jax.lax.map(lambda sig: add_one(s_z, sig), sigmas))
    return jnp.stack([rem, add], axis=1)


def _remove_with_skip(s_m, s_z, half_sq, sigmas, remove_skip, min_sep, p, warm_start, exact):
    """``(J, B)`` remove losses: ``U`` where every candidate's ``U`` is at most its threshold, else ``exact``
    (:func:`ladder_losses_from_sums_t`), which runs for the whole batch, at its full width, when any sample needs it
    (the same program as without the skip, so the same bits: XLA's CPU code for a narrower, compacted batch
    rounds some products differently, its multiply-adds fused or not)."""
    u = remove_loss_bound_from_sums_t(s_m, s_z, half_sq, sigmas, remove_skip.term_errors, min_sep, p, warm_start)
    need = jnp.any(~(u <= jnp.asarray(remove_skip.thresholds, u.dtype)[:, None]), axis=0)
    return rare_cond(jnp.any(need), lambda need, u, s_m, s_z: jnp.where(need, exact(s_m, s_z), u),
                     lambda need, u, s_m, s_z: u, need, u, s_m, s_z)


def shift_mixture_log_ratio(ell: jax.Array, period: int, sampling_prob: float, random_phase: bool) -> jax.Array:
    r"""``ln P/Q`` of a shift mixture from the per-iteration terms ``ell`` (shape ``(..., n)``).

    Opportunity ``t`` contributes :math:`g_t = \ln(1 - q + q e^{\ell_t})` (:math:`g_t = \ell_t` for
    ``q = 1``); class ``s`` sums :math:`g_t` over ``t = s (mod period)``; the result is the log-mean-exp over
    the classes (``random_phase``) or the class-0 sum.
    """
    period = check_int("period", period, low=1)
    sampling_prob = check_prob("sampling_prob", sampling_prob)
    random_phase = check_bool("random_phase", random_phase)
    if getattr(ell, "ndim", 1) < 1:
        raise ValueError(f"ell must have shape (..., n); got a scalar {ell!r}")
    n = ell.shape[-1]
    dtype = ell.dtype
    q = float(sampling_prob)
    if q >= 1.0:
        g = ell
    else:
        g = jnp.logaddexp(jnp.asarray(math.log1p(-q), dtype), jnp.asarray(math.log(q), dtype) + ell)
    m = -(-n // period)
    pad = [(0, 0)] * (ell.ndim - 1) + [(0, m * period - n)]
    g = jnp.pad(g, pad).reshape(ell.shape[:-1] + (m, period))  # padded slots are "no opportunity": 0
    per_class = jnp.sum(g, axis=-2)
    if not random_phase:
        return per_class[..., 0]
    return jax.scipy.special.logsumexp(per_class, axis=-1) - jnp.asarray(math.log(period), dtype)
