r"""The log-space evaluations of the privacy-loss recursion (:mod:`mcacct.kernels.recursion` states it):
``"scan"`` (the plain ``n``-step recursion with a ring buffer of the last ``b`` values), ``"blocked"`` (by blocks of
``b`` iterations, each solved in closed form given the next: the accelerator default) and the associative form
for ``p = 1``. Each returns the first values ``log f_1 .. log f_b`` from the time-major terms ``ell_t``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mcacct.kernels.prefix import prefix_sums0
from mcacct.kernels.stepwise import range_floor

__all__ = ["scan_first_values", "blocked_first_values", "assoc_first_values", "p_one_first_values", "split_blocks",
           "reverse_cumsum0"]


def assoc_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> jax.Array:
    r"""``log f_1..log f_b`` by blocks of ``b`` iterations (time-major ``ell_t`` of shape ``(n, ...)``).

    Inside a block the recursion is first order given the next block ``g`` (``f_{i+b}``):
    :math:`x_j = \mathrm{logaddexp}(A + x_{j+1}, B_j)` with :math:`A = \ln(1-p)`,
    :math:`B_j = \ln p + \ell_j + g_j`, :math:`x_b = g_0`. Each step is the map
    :math:`x \mapsto \mathrm{logaddexp}(a + x, c)`; these maps compose associatively,
    :math:`(a_1, c_1)` then :math:`(a_2, c_2)` giving :math:`(a_1 + a_2, \mathrm{logaddexp}(a_2 + c_1, c_2))`,
    so a block costs ``O(b log b)`` work at depth ``log b`` and the scan runs ``ceil(n/b)`` steps.
    Every step is a ``logaddexp`` (no subtraction of sums), so it needs no range guard.

    Parameters
    ----------
    ell_t : jax.Array
        The terms :math:`\ell_i`, time-major ``(n, ...)``.
    b : int
        ``min_sep``, ``>= 1``.
    log_p, log_q : float or jax.Array
        :math:`\ln p` and :math:`\ln(1 - p)`.

    Returns
    -------
    jax.Array
        ``(b, ...)``: :math:`\ln f_1, \dots, \ln f_b`.
    """
    blocks, pad = split_blocks(ell_t, b)
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


def split_blocks(ell_t: jax.Array, b: int):
    r"""Pad ``ell_t`` (time-major) in front to a multiple of ``b`` and reshape to ``(m, b, ...)``.

    The dummy iterations in front are 0 and never influence ``f_1..f_n``.

    Parameters
    ----------
    ell_t : jax.Array
        The terms :math:`\ell_i`, time-major ``(n, ...)``.
    b : int
        ``min_sep``, ``>= 1``.

    Returns
    -------
    blocks : jax.Array
        ``(m, b, ...)``, ``m = ceil(n/b)``.
    pad : int
        Dummy iterations in front, ``m b - n``.
    """
    n = ell_t.shape[0]
    lead = ell_t.shape[1:]
    m = -(-n // b)
    pad = m * b - n  # dummy iterations in front: they never influence f_1..f_n
    if pad:
        ell_t = jnp.concatenate([jnp.zeros((pad,) + lead, ell_t.dtype), ell_t], axis=0)
    return ell_t.reshape((m, b) + lead), pad


def p_one_first_values(ell_t: jax.Array, b: int, log_p) -> jax.Array:
    r"""``log f_1..log f_b`` for ``p = 1``: :math:`f_i = e^{\ell_i} f_{i+b}`.

    Additions only, exact to ``ceil(n/b)`` roundings.

    Parameters
    ----------
    ell_t : jax.Array
        The terms :math:`\ell_i`, time-major ``(n, ...)``.
    b : int
        ``min_sep``, ``>= 1``.
    log_p : float or jax.Array
        :math:`\ln p` (0 at ``p = 1``).

    Returns
    -------
    jax.Array
        ``(b, ...)``: :math:`\ln f_1, \dots, \ln f_b`.
    """
    blocks, pad = split_blocks(ell_t, b)
    lead = blocks.shape[2:]

    def body(carry, blk):
        g, _ = carry
        return (log_p + blk + g, g), None

    ones = jnp.zeros((b,) + lead, ell_t.dtype)
    (block0, block1), _ = jax.lax.scan(body, (ones, ones), blocks, reverse=True)
    return jnp.concatenate([block0[pad:], block1[:pad]], axis=0)


def blocked_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> tuple[jax.Array, jax.Array]:
    r"""``log f_1..log f_b`` by blocks of ``b`` iterations with two transcendentals per iteration (``p < 1``).

    Given the next block ``g`` (``f_{i+b}``) the block solves
    :math:`x_j = \mathrm{logaddexp}(A + x_{j+1}, B_j)`, :math:`x_b = g_0`, :math:`A = \ln(1-p)`,
    :math:`B_j = \ln p + \ell_j + g_j`, whose solution is

    .. math::  x_j = -jA + \ln\Big(\sum_{t=j}^{b-1} e^{B_t + tA} + e^{bA + g_0}\Big).

    The sum is a reverse cumulative sum of non-negative terms ``exp(u_t - M)``, ``M`` the block maximum of
    the exponents (per sample), so nothing overflows and no partial sum is formed by a subtraction. A
    suffix sum far below ``M`` may have lost terms to underflow; ``ok`` is false wherever a suffix sum is
    below :func:`range_floor` (so flushing could have changed it by more than one ulp), and callers must
    then fall back to an exact log-space recursion (:func:`recursion_log_ratio_t` does).

    Parameters
    ----------
    ell_t : jax.Array
        The terms :math:`\ell_i`, time-major ``(n, ...)``.
    b : int
        ``min_sep``, ``>= 1``.
    log_p, log_q : float or jax.Array
        :math:`\ln p` and :math:`\ln(1 - p)`.

    Returns
    -------
    first : jax.Array
        ``(b, ...)``: :math:`\ln f_1, \dots, \ln f_b`.
    ok : jax.Array
        bool ``(...)``, per sample.
    """
    blocks, pad = split_blocks(ell_t, b)
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
        sums = reverse_cumsum0(jnp.exp(u - m)) + jnp.exp(tail - m)
        ok = ok & (jnp.min(sums, axis=0) >= thr)
        x = jnp.log(jnp.maximum(sums, thr)) + m - t_a
        return (x, g, ok), None

    ones = jnp.zeros((b,) + lead, dtype)
    (block0, block1, ok), _ = jax.lax.scan(body, (ones, ones, jnp.ones(lead, bool)), blocks, reverse=True)
    return jnp.concatenate([block0[pad:], block1[:pad]], axis=0), ok


def scan_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> jax.Array:
    r"""``log f_1..log f_b`` by a reverse ``lax.scan`` over the ``n`` iterations with a ring buffer.

    ``ring[i % b]`` holds ``f_{i+b}`` when step ``i`` reads it and ``f_i`` after it. Every step is one
    ``logaddexp`` of two terms (relative error a few ulps, no range limit): the reference recursion.

    Parameters
    ----------
    ell_t : jax.Array
        The terms :math:`\ell_i`, time-major ``(n, ...)``.
    b : int
        ``min_sep``, ``>= 1``.
    log_p, log_q : float or jax.Array
        :math:`\ln p` and :math:`\ln(1 - p)` (``-inf`` for ``p = 1``).

    Returns
    -------
    jax.Array
        ``(b, ...)``: :math:`\ln f_1, \dots, \ln f_b` (``0``, i.e. ``f = 1``, beyond ``n``).
    """
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


def reverse_cumsum0(x: jax.Array) -> jax.Array:
    """Reverse cumulative sum along axis 0 of non-negative terms, with no subtraction.

    Every partial sum is a sum of non-negative terms, so each has relative error at most ``(b + 1)`` ulps.
    Short axes (``<= 32``) by ``cumsum``; longer ones by two levels of 0/1 triangular products
    (:func:`mcacct.kernels.prefix.prefix_sums0`: ~``2 * 16`` multiply-adds per element, where XLA's CPU
    ``cumsum`` is a ``reduce_window`` whose cost grows with the axis). (An earlier two-level form built
    the group offsets as ``inclusive - total``, which cancels catastrophically when a later group dwarfs
    the earlier ones; every output here is a sum of a subset of the terms.)

    Parameters
    ----------
    x : jax.Array
        Non-negative terms, shape ``(b, ...)``.

    Returns
    -------
    jax.Array
        ``out[j] = sum_{t >= j} x[t]``, the shape and dtype of ``x``.
    """
    if x.shape[0] <= 32:
        return jnp.cumsum(x[::-1], axis=0)[::-1]
    return prefix_sums0(x, reverse=True)
