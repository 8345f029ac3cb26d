r"""Privacy loss ``L(y) = ln P(y)/Q(y)`` of BandMF with b-min-sep subsampling (paper 003, §5).

Write :math:`\ell_i = (\langle c^{(i)}, y_{i:i+b} \rangle - \|c^{(i)}\|^2/2)/\sigma^2` for the log
likelihood ratio of one participation at iteration ``i`` (column ``i`` of ``C``, truncated at row ``n``).
With :math:`f_i` the likelihood ratio of iterations ``i..n`` given that the example is available at ``i``,
Theorem 5.1 gives

.. math::
    f_i = (1 - p)\, f_{i+1} + p\, e^{\ell_i} f_{i+b}, \qquad f_i = 1 \ (i > n),

so ``L = ln f_1`` for the cold start (Alg. 1) and, for the warm start (Alg. 2),

.. math::  L = \ln \frac{f_1 + p \sum_{i=2}^{b} f_i}{1 + (b - 1) p}.

The recursion runs by blocks of ``b`` iterations, each solved in closed form given the next block: in
linear space with a per-block log scale and an exact log-space fallback (``"linear"``, the CPU default),
or in log space (``"blocked"``, the accelerator default); ``"scan"`` is the plain ``n``-step log-space
recursion with a ring buffer of the last ``b`` values. All are ``O(n)`` per sample after the sliding dot
products, which cost ``O(n b)`` directly, ``O(n log n)`` by FFT and ``O(n)`` for constant ``c_col`` by
prefix sums. For ``b = 1`` the recursion
factorises: :math:`L = \sum_i \ln(1 - p + p e^{\ell_i})`.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.schemes import BMinSep
from mcacct.strategy import BandedToeplitz

__all__ = ["privacy_loss", "sliding_dot", "sliding_dot_t", "participation_log_ratios",
           "participation_log_ratios_t", "log_ratio_from_terms", "log_ratio_from_terms_t"]

_DOT_METHODS = ("auto", "direct", "fft", "prefix")


def _choose_dot_method(c_col: tuple[float, ...], method: str) -> str:
    if method not in _DOT_METHODS:
        raise ValueError(f"dot_method must be one of {_DOT_METHODS}; got {method!r}")
    if method != "auto":
        return method
    k = len(c_col)
    if k == 1:
        return "direct"
    if all(v == c_col[0] for v in c_col):
        return "prefix"
    return "direct" if k <= 32 else "fft"


def sliding_dot(y: jax.Array, c_col: tuple[float, ...], method: str = "auto") -> jax.Array:
    r"""Sliding dot products :math:`s_i = \sum_{d < k} c_d\, y_{i+d}` along the last axis (``y`` zero
    beyond ``n``), i.e. :math:`\langle c^{(i)}, y \rangle` with columns truncated at row ``n``.

    ``method``: ``"direct"`` (``k`` shifted multiply-adds), ``"fft"`` (real FFT of length ``>= n + k``),
    ``"prefix"`` (constant ``c_col`` only: block-local prefix sums) or ``"auto"``.
    """
    return jnp.moveaxis(sliding_dot_t(jnp.moveaxis(y, -1, 0), c_col, method), 0, -1)


def sliding_dot_t(y_t: jax.Array, c_col: tuple[float, ...], method: str = "auto") -> jax.Array:
    """:func:`sliding_dot` along axis 0 (time-major arrays, the layout of the engine)."""
    method = _choose_dot_method(c_col, method)
    n, k = y_t.shape[0], len(c_col)
    rest = y_t.shape[1:]
    dtype = y_t.dtype
    pad_rest = [(0, 0)] * len(rest)
    if method == "prefix":
        if any(v != c_col[0] for v in c_col):
            raise ValueError("dot_method='prefix' needs a constant c_col")
        # blocks of k: the window starting at offset j of block q is the tail of block q from j plus the
        # head of block q+1 before j. Prefix sums stay inside a block (short sums: accurate in float32).
        m = -(-n // k)
        blk = jnp.pad(y_t, [(0, (m + 1) * k - n)] + pad_rest).reshape((m + 1, k) + rest)
        if jax.default_backend() == "cpu":  # XLA:CPU runs the small matrix product faster than cumsum
            upper = jnp.asarray(np.triu(np.ones((k, k)), 1), dtype)  # upper[t, j] = 1 if t < j
            excl = jnp.moveaxis(jnp.tensordot(upper, blk, axes=[[0], [1]],
                                              precision=jax.lax.Precision.HIGHEST), 0, 1)
        else:
            excl = jnp.cumsum(blk, axis=1) - blk
        total = jnp.sum(blk, axis=1, keepdims=True)
        win = (total[:m] - excl[:m]) + excl[1:]
        return win.reshape((m * k,) + rest)[:n] * jnp.asarray(c_col[0], dtype)
    if method == "direct":
        yp = jnp.pad(y_t, [(0, k - 1)] + pad_rest)
        out = yp[0:n] * jnp.asarray(c_col[0], dtype)
        for d in range(1, k):
            if c_col[d] != 0.0:
                out = out + yp[d:d + n] * jnp.asarray(c_col[d], dtype)
        return out
    # fft: correlation = convolution with the reversed filter
    size = 1 << int(math.ceil(math.log2(n + k)))
    rev = np.zeros(size)
    rev[0] = c_col[0]
    for d in range(1, k):
        rev[size - d] = c_col[d]
    cf = jnp.fft.rfft(jnp.asarray(rev, dtype)).reshape((-1,) + (1,) * len(rest))
    yf = jnp.fft.rfft(y_t, n=size, axis=0)
    return jnp.fft.irfft(yf * cf, n=size, axis=0)[:n].astype(dtype)


def participation_log_ratios(y: jax.Array, sigma, strategy: BandedToeplitz, method: str = "auto") -> jax.Array:
    r""":math:`\ell_i = (\langle c^{(i)}, y\rangle - \|c^{(i)}\|^2 / 2) / \sigma^2` for every ``i``, shape of ``y``."""
    return jnp.moveaxis(participation_log_ratios_t(jnp.moveaxis(y, -1, 0), sigma, strategy, method), 0, -1)


def participation_log_ratios_t(y_t: jax.Array, sigma, strategy: BandedToeplitz, method: str = "auto") -> jax.Array:
    """:func:`participation_log_ratios` for time-major ``y_t`` of shape ``(n, ...)``."""
    n = y_t.shape[0]
    sq = jnp.asarray(strategy.column_sq_norms(n), y_t.dtype).reshape((n,) + (1,) * (y_t.ndim - 1))
    inv_var = 1.0 / jnp.asarray(sigma, y_t.dtype) ** 2
    return (sliding_dot_t(y_t, strategy.c_col, method) - 0.5 * sq) * inv_var


_RECURSIONS = ("auto", "scan", "blocked", "assoc", "linear")


def _assoc_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> jax.Array:
    r"""``log f_1..log f_b`` by blocks of ``b`` iterations (time-major ``ell_t`` of shape ``(n, ...)``).

    Inside a block the recursion is first order given the next block ``g`` (``f_{i+b}``):
    :math:`x_j = \mathrm{logaddexp}(A + x_{j+1}, B_j)` with :math:`A = \ln(1-p)`,
    :math:`B_j = \ln p + \ell_j + g_j`, :math:`x_b = g_0`. Each step is the map
    :math:`x \mapsto \mathrm{logaddexp}(a + x, c)`; these maps compose associatively,
    :math:`(a_1, c_1)` then :math:`(a_2, c_2)` giving :math:`(a_1 + a_2, \mathrm{logaddexp}(a_2 + c_1, c_2))`,
    so a block costs ``O(b log b)`` work at depth ``log b`` and the scan runs ``ceil(n/b)`` steps.
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


def _blocked_first_values(ell_t: jax.Array, b: int, log_p, log_q, p_is_one: bool) -> jax.Array:
    r"""``log f_1..log f_b`` by blocks of ``b`` iterations with two transcendentals per iteration.

    Given the next block ``g`` (``f_{i+b}``) the block solves
    :math:`x_j = \mathrm{logaddexp}(A + x_{j+1}, B_j)`, :math:`x_b = g_0`, :math:`A = \ln(1-p)`,
    :math:`B_j = \ln p + \ell_j + g_j`, whose solution is

    .. math::  x_j = -jA + \ln\Big(\sum_{t=j}^{b-1} e^{B_t + tA} + e^{bA + g_0}\Big).

    The sum is a reverse cumulative sum of ``exp(u_t - M)`` with ``M`` the block maximum of the exponents
    (per sample), so nothing overflows; terms more than ~700 (float64) or ~87 (float32) nats below ``M``
    underflow, which changes the sum by a relative ``< b e^{-87}``. If a whole suffix underflows the
    result would be wrong, so it is returned as NaN and the estimator refuses the chunk (never silently).
    ``p = 1`` (``A = -inf``) reduces to :math:`x_j = B_j`.
    """
    blocks, pad = _blocks(ell_t, b)
    lead = blocks.shape[2:]
    dtype = blocks.dtype
    if p_is_one:  # f_i = e^{ell_i} f_{i+b}
        def body_p1(carry, blk):
            g, _ = carry
            return (log_p + blk + g, g), None
        ones = jnp.zeros((b,) + lead, dtype)
        (block0, block1), _ = jax.lax.scan(body_p1, (ones, ones), blocks, reverse=True)
        return jnp.concatenate([block0[pad:], block1[:pad]], axis=0)
    shape_t = (b,) + (1,) * len(lead)
    t_a = (jnp.arange(b, dtype=dtype) * log_q).reshape(shape_t)  # t * A
    b_a = jnp.asarray(b, dtype) * log_q

    def body(carry, blk):
        g, _ = carry
        u = log_p + blk + g + t_a                  # B_t + t A
        tail = b_a + g[0]                          # b A + g_0
        m = jnp.maximum(jnp.max(u, axis=0), tail)
        w = jnp.exp(u - m)
        sums = jnp.cumsum(w[::-1], axis=0)[::-1] + jnp.exp(tail - m)
        x = jnp.where(sums > 0, jnp.log(sums), jnp.nan) + m - t_a
        return (x, g), None

    ones = jnp.zeros((b,) + lead, dtype)
    (block0, block1), _ = jax.lax.scan(body, (ones, ones), blocks, reverse=True)
    return jnp.concatenate([block0[pad:], block1[:pad]], axis=0)


def _scan_first_values(ell_t: jax.Array, b: int, log_p, log_q) -> jax.Array:
    """``log f_1..log f_b`` by a reverse ``lax.scan`` over the ``n`` iterations with a ring buffer:
    ``ring[i % b]`` holds ``f_{i+b}`` when step ``i`` reads it and ``f_i`` after it."""
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
    """Reverse cumulative sum along axis 0. Long axes (``> 32``) go in two levels of 16 (XLA's CPU
    ``cumsum`` is a ``reduce_window`` whose cost grows with the window; two short windows are ~2x faster
    at ``b = 256``). The sum of positive terms is the same up to rounding order."""
    b = x.shape[0]
    if b <= 32:
        return jnp.cumsum(x[::-1], axis=0)[::-1]
    k = 16
    m = -(-b // k)
    pad = m * k - b
    xr = x[::-1]
    if pad:
        xr = jnp.concatenate([xr, jnp.zeros((pad,) + x.shape[1:], x.dtype)], axis=0)
    xr = xr.reshape((m, k) + x.shape[1:])
    inner = jnp.cumsum(xr, axis=1)
    tot = inner[:, -1]
    offsets = jnp.cumsum(tot, axis=0) - tot
    out = (inner + offsets[:, None]).reshape((m * k,) + x.shape[1:])[:b]
    return out[::-1]


# largest (b - 1) |ln(1 - p)| for which the linear recursion's in-block factors (1 - p)^{-j} stay finite
_LINEAR_MAX_SPAN = {np.dtype(np.float64): 300.0, np.dtype(np.float32): 20.0}


def _linear_applicable(b: int, log_q: float, dtype) -> bool:
    """Whether :func:`_linear_first_values` may run: ``(b - 1) |ln(1 - p)|`` within the dtype's span."""
    return (b - 1) * abs(log_q) <= _LINEAR_MAX_SPAN[np.dtype(dtype)]


def _linear_first_values(ell_t: jax.Array, b: int, log_p, log_q: float) -> tuple[jax.Array, jax.Array]:
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

    Soundness of the arithmetic: all terms are positive, so each block sum has relative error at most
    ``(b + 1)`` ulps plus ``(b + 1) tiny / S_j`` from terms flushed to zero or subnormals. The function
    also returns ``ok`` (per sample): every block sum and every stored value is at least
    ``(b + 1) tiny / eps``, i.e. flushing changed nothing by more than one ulp. Callers must fall back to
    a log-space recursion where ``ok`` is false (:func:`log_ratio_from_terms_t` does, exactly).
    Requires :func:`_linear_applicable` (else ``e^{-jA}`` could overflow).
    """
    blocks, pad = _blocks(ell_t, b)
    lead = blocks.shape[2:]
    dtype = blocks.dtype
    finfo = jnp.finfo(dtype)
    thr = (b + 1) * float(finfo.tiny) / float(finfo.eps)
    shape_t = (b,) + (1,) * len(lead)
    t_a = jnp.asarray(np.arange(b) * log_q, dtype).reshape(shape_t)          # t A
    inv_q_t = jnp.asarray(np.exp(-np.arange(b) * log_q), dtype).reshape(shape_t)  # e^{-t A}
    b_a = b * log_q

    def body(carry, blk):
        g, s, _, _, ok = carry
        u = log_p + blk + t_a
        m = jnp.maximum(jnp.max(u, axis=0), jnp.asarray(b_a, dtype))
        terms = jnp.exp(u - m) * g
        sums = _reverse_cumsum0(terms) + jnp.exp(b_a - m) * g[0]
        v = sums * inv_q_t
        mx = jnp.max(v, axis=0)
        v = v * (1.0 / mx)
        ok = ok & (jnp.min(sums, axis=0) >= thr) & (jnp.min(v, axis=0) >= thr)
        s_new = s + m.astype(jnp.float64) + jnp.log(mx).astype(jnp.float64)
        return (v, s_new, g, s, ok), None

    ones = jnp.ones((b,) + lead, dtype)
    zero = jnp.zeros(lead, jnp.float64)
    init = (ones, zero, ones, zero, jnp.ones(lead, bool))
    (v0, s0, v1, s1, ok), _ = jax.lax.scan(body, init, blocks, reverse=True)
    first = jnp.concatenate([jnp.log(v0[pad:]).astype(jnp.float64) + s0,
                             jnp.log(v1[:pad]).astype(jnp.float64) + s1], axis=0)
    return first.astype(dtype), ok


def _poisson_log_ratio_linear(ell_t: jax.Array, log_p, p: float, group: int = 8) -> tuple[jax.Array, jax.Array]:
    r""":math:`\sum_i \ln(1 - p + p e^{\ell_i})` (``b = 1``) as logs of products of ``group`` factors,
    one ``exp`` per iteration and one ``log`` per group. ``ok`` (per sample) is false where a product left
    the normal range by less than ``1/eps`` (overflow or loss of relative precision); callers fall back."""
    n = ell_t.shape[0]
    lead = ell_t.shape[1:]
    m = -(-n // group)
    pad = m * group - n
    if pad:  # ell = 0 gives the factor 1
        ell_t = jnp.concatenate([ell_t, jnp.zeros((pad,) + lead, ell_t.dtype)], axis=0)
    finfo = jnp.finfo(ell_t.dtype)
    factors = (1.0 - p) + jnp.exp(log_p + ell_t)
    prods = jnp.prod(factors.reshape((m, group) + lead), axis=1)
    ok = jnp.all(jnp.isfinite(prods) & (prods >= float(finfo.tiny) / float(finfo.eps))
                 & (prods <= float(finfo.max) * float(finfo.eps)), axis=0)
    return jnp.sum(jnp.log(prods), axis=0), ok


def log_ratio_from_terms(ell: jax.Array, scheme: BMinSep, recursion: str = "auto") -> jax.Array:
    """Run the recursion of Theorem 5.1 on the per-iteration terms ``ell`` (shape ``(..., n)``).

    ``recursion``:

    - ``"linear"``: blocks of ``b`` iterations in linear space with a per-block log scale, one ``exp``
      per iteration (:func:`_linear_first_values`); wherever its arithmetic could have lost precision
      (a block sum or value within ``1/eps`` of the smallest normal number) the whole batch is recomputed
      by ``"scan"``, so the result is never silently wrong. The CPU default.
    - ``"scan"``: ``n`` sequential log-space steps (``logaddexp``), no range caveat.
    - ``"blocked"``: ``ceil(n/b)`` sequential log-space block steps, two transcendentals per iteration;
      NaN (refused by the estimator) if a block underflows entirely. The accelerator default.
    - ``"assoc"``: blocks by an associative log-space scan, ``O(b log b)`` per block.
    - ``"auto"``: ``"linear"`` on CPU, ``"blocked"`` elsewhere.

    Returns ``ln P(y)/Q(y)`` with the leading shape of ``ell``.
    """
    if recursion not in _RECURSIONS:
        raise ValueError(f"recursion must be one of {_RECURSIONS}; got {recursion!r}")
    return log_ratio_from_terms_t(jnp.moveaxis(ell, -1, 0), scheme, recursion)


def log_ratio_from_terms_t(ell_t: jax.Array, scheme: BMinSep, recursion: str = "auto") -> jax.Array:
    """:func:`log_ratio_from_terms` for time-major terms ``ell_t`` of shape ``(n, ...)``."""
    if recursion not in _RECURSIONS:
        raise ValueError(f"recursion must be one of {_RECURSIONS}; got {recursion!r}")
    b, p = scheme.min_sep, scheme.sampling_prob
    dtype = ell_t.dtype
    log_p = jnp.asarray(math.log(p), dtype)
    log_q_f = math.log1p(-p) if p < 1.0 else -math.inf
    log_q = jnp.asarray(log_q_f, dtype)
    if recursion == "auto":
        recursion = "linear" if jax.default_backend() == "cpu" else "blocked"
    if b == 1:
        exact = lambda: jnp.sum(jnp.logaddexp(log_q, log_p + ell_t), axis=0)  # noqa: E731
        if recursion == "linear" and dtype == jnp.float64 and p < 1.0:
            fast, ok = _poisson_log_ratio_linear(ell_t, log_p, p)
            return jax.lax.cond(jnp.all(ok), lambda: fast, exact)
        return exact()
    lead = ell_t.shape[1:]
    if p >= 1.0 and recursion in ("blocked", "linear"):
        f_first = _blocked_first_values(ell_t, b, log_p, log_q, True)  # additions only
    elif recursion == "linear" and _linear_applicable(b, log_q_f, dtype):
        fast, ok = _linear_first_values(ell_t, b, log_p, log_q_f)
        f_first = jax.lax.cond(jnp.all(ok), lambda: fast, lambda: _scan_first_values(ell_t, b, log_p, log_q))
    elif recursion == "blocked":
        f_first = _blocked_first_values(ell_t, b, log_p, log_q, False)
    elif recursion == "assoc":
        f_first = _assoc_first_values(ell_t, b, log_p, log_q)
    else:  # "scan", or "linear" outside its range
        f_first = _scan_first_values(ell_t, b, log_p, log_q)
    if not scheme.warm_start:
        return f_first[0]
    weights = np.full(b, math.log(p))
    weights[0] = 0.0
    norm = math.log1p((b - 1) * p)
    w = jnp.asarray(weights, dtype).reshape((b,) + (1,) * len(lead))
    return jax.scipy.special.logsumexp(f_first + w, axis=0) - norm


@partial(jax.jit, static_argnames=("scheme", "c_col", "dot_method", "recursion"))
def _privacy_loss(y, sigma, scheme, c_col, dot_method, recursion):
    strategy = BandedToeplitz(c_col)
    ell = participation_log_ratios(y, sigma, strategy, dot_method)
    return log_ratio_from_terms(ell, scheme, recursion)


def privacy_loss(scheme: BMinSep, y: jax.Array, sigma: float | jax.Array, c_col=(1.0,),
                 dot_method: str = "auto", recursion: str = "auto") -> jax.Array:
    r"""Privacy loss :math:`\ln P(y)/Q(y)` for each row of ``y``.

    Parameters
    ----------
    scheme: the b-min-sep scheme (``iterations`` must equal ``y.shape[-1]``).
    y: outputs of shape ``(num_samples, n)`` (or ``(n,)``); float64 or float32.
    sigma: noise multiplier, ``> 0``.
    c_col: non-zeros of the first column of ``C`` (``len(c_col) <= min_sep``).
    dot_method: how the sliding dot products are computed (see :func:`sliding_dot`).
    recursion: ``"linear"``, ``"scan"``, ``"blocked"``, ``"assoc"`` or ``"auto"`` (see
        :func:`log_ratio_from_terms`).

    Returns
    -------
    Array of shape ``y.shape[:-1]``.
    """
    strategy = c_col if isinstance(c_col, BandedToeplitz) else BandedToeplitz(c_col)
    strategy.check_min_sep(scheme.min_sep)
    y = jnp.asarray(y)
    if y.shape[-1] != scheme.iterations:
        raise ValueError(f"y must have {scheme.iterations} columns (scheme.iterations); got shape {y.shape}")
    if not jnp.issubdtype(y.dtype, jnp.floating):
        y = y.astype(jnp.float64)
    _check_sigma(sigma)
    return _privacy_loss(y, sigma, scheme, strategy.c_col, dot_method, recursion)


def _check_sigma(sigma) -> None:
    s = np.asarray(sigma)
    if s.ndim == 0 and not (np.isfinite(s) and s > 0):
        raise ValueError(f"sigma must be a finite number in (0, inf); got {float(s)!r}")
