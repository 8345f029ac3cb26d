r"""The b-min-sep recursion step by step in linear space, with an exact power-of-two rescale per block of ``b``.

Theorem 5.1 of Dong & Ganesh 2026 (arXiv:2602.09338) gives, for the likelihood ratio ``f_i`` of iterations
``i..n`` given that the example is available at ``i``,

.. math::
    f_i = q\, f_{i+1} + w_i\, f_{i+b}, \qquad q = 1 - p, \quad w_i = p\, e^{\ell_i}, \qquad f_i = 1\ (i > n).

This module runs it as written, one iteration at a time (a reverse ``lax.scan`` over the ``b`` iterations of a
block, inside a reverse scan over the blocks), with the ``b`` values of the next block as the block's input.
Each step is two multiplications and one addition of non-negative numbers, after one ``exp`` per iteration
(vectorised over the whole block before the steps), so the cost per iteration and sample is one ``exp`` and
three flops, against the ``~2 * 16`` multiply-adds of the block prefix sums of the closed-form linear
recursion (:func:`mcacct.kernels.recursion.linear_first_values`). The steps vectorise over samples, so the scan
pays off from about 64 samples per call (measured on CPU; ``"auto"`` picks it there).

Range. After each block the values are multiplied by ``2^{-e}`` with ``e`` the binary exponent of their
per-sample maximum (exact: a product by a power of two is exact unless it leaves the normal range, which the
check below excludes), and the integer ``e`` is added to a per-sample exponent, so the state's maximum is in
``[1/2, 1)`` at every block boundary.

Arithmetic (the bound of :func:`mcacct.engine.systematic.loss_error_bound`). Every term is non-negative and no
value is formed by a subtraction. A step's rounding multiplies the relative error by at most
``1 + u (3 + |ln w_i| + 1)`` (the products, the sum, and ``exp`` of a rounded argument), within the bound's
``1 + u (8 + 4 Xi)`` per step; the rescales are exact; ``log f = ln v + e ln 2`` at the end adds the log-scale
term. Terms flushed to zero or to subnormals lose less than ``tiny`` each (every stored value is at most 1), so
wherever every value is at least :func:`range_floor` each such loss is below one ulp
relative. ``ok`` (per sample) is false unless every value of every block, before and after its rescale, is at
least that floor and finite; callers recompute the whole batch with the exact log-space scan where any sample
is not ``ok`` (:func:`mcacct.kernels.recursion.recursion_log_ratio_t` does). Plain numbers and arrays in; no
scheme is imported.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = ["stepwise_first_values", "range_floor", "STEPWISE_MIN_LANES"]

#: the fewest samples per call for which ``"auto"`` picks the stepwise recursion on CPU (below, the per-step cost
#: of the scan dominates; benchmarks/results/design_choices.md)
STEPWISE_MIN_LANES = 64


def range_floor(b: int, dtype) -> float:
    """``(b + 1) tiny / eps`` of ``dtype``: the smallest sum of ``b + 1`` terms the range checks accept.

    A sum of ``b + 1`` non-negative terms that is at least this large lost at most one ulp (relative) to terms
    flushed to zero or to subnormals (each loses less than ``tiny`` absolute).

    Parameters
    ----------
    b : int
        ``min_sep``.
    dtype : dtype
        A float dtype.

    Returns
    -------
    float
    """
    finfo = jnp.finfo(dtype)
    return (b + 1) * float(finfo.tiny) / float(finfo.eps)


def stepwise_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> tuple[jax.Array, jax.Array]:
    r"""``(log f_1..log f_b, ok)`` of the b-min-sep recursion from time-major terms ``ell_t`` ``(n, ...)``.

    Parameters
    ----------
    ell_t : array ``(n, ...)``
        The per-iteration terms :math:`\ell_i` (float64 or float32).
    b : int
        The minimum separation (static).
    log_p, log_q : float or scalar array
        :math:`\ln p` and :math:`\ln(1 - p)` (``-inf`` for ``p = 1``).

    Returns
    -------
    first : array ``(b, ...)``
        :math:`\ln f_1, \dots, \ln f_b` (rows past ``n`` are ``0``, i.e. ``f = 1``).
    ok : bool array ``(...)``
        Whether the sample's arithmetic stayed in range (module docstring); callers fall back where not.
    """
    n = ell_t.shape[0]
    lead = ell_t.shape[1:]
    dtype = ell_t.dtype
    m = -(-n // b)
    pad = m * b - n  # dummy iterations in front (ell = 0): they never influence f_1..f_n
    if pad:
        ell_t = jnp.concatenate([jnp.zeros((pad,) + lead, dtype), ell_t], axis=0)
    w = jnp.exp(jnp.asarray(log_p, dtype) + ell_t).reshape((m, b) + lead)
    q = jnp.exp(jnp.asarray(log_q, dtype))
    thr = range_floor(b, dtype)

    def step(f_next, x):
        wi, gi = x
        fi = q * f_next + wi * gi
        return fi, fi

    def block(carry, wb):
        g, e, _, _, ok = carry
        _, vals = jax.lax.scan(step, g[0], (wb, g), reverse=True)
        mx = jnp.max(vals, axis=0)
        _, ex = jnp.frexp(mx)                                  # mx = frac 2^ex, frac in [1/2, 1)
        scale = jnp.ldexp(jnp.ones_like(mx), -ex)              # 2^-ex, exact
        v = vals * scale
        ok = ok & jnp.isfinite(mx) & (jnp.min(vals, axis=0) >= thr) & (jnp.min(v, axis=0) >= thr)
        return (v, e + ex.astype(jnp.int32), g, e, ok), None

    ones = jnp.ones((b,) + lead, dtype)
    zero = jnp.zeros(lead, jnp.int32)
    init = (ones, zero, ones, zero, jnp.ones(lead, bool))
    (v0, e0, v1, e1, ok), _ = jax.lax.scan(block, init, w, reverse=True)
    ln2 = math.log(2.0)
    first = jnp.concatenate([jnp.log(v0[pad:]) + e0.astype(dtype) * ln2,
                             jnp.log(v1[:pad]) + e1.astype(dtype) * ln2], axis=0)
    return first, ok
