r"""The output mean ``C x`` of separated participation patterns, and its sliding sums.

``C`` is lower-triangular banded Toeplitz with first-column non-zeros ``c_col = (c_0, ..., c_{k-1})``
(Dong & Ganesh 2026, arXiv:2602.09338, §2), and a participation pattern ``x`` has its participations at least
``k`` apart (min-sep sampling), so each row of ``C x`` is reached by at most one participation. Every function
here takes plain numbers, tuples and arrays, imports no scheme and is pure (jit-traceable):

* :func:`mean_shift`, :func:`mean_shift_t`, :func:`mean_shift_amplitudes`: the output mean ``C x``, in ``O(n)``;
* :func:`block_mean`, :func:`mean_shift_from_blocks_t`: the same from the per-block participation, without the mask;
* :func:`mean_sliding_from_blocks_t`: the sliding sums of that mean, :math:`\langle c^{(i)}, C x\rangle`, read from
  a table of the autocorrelations of ``c`` (:func:`mean_window_table`) instead of summed.

Functions with the suffix ``_t`` work along axis 0 (time-major ``(n, ...)``, the engine's layout). The sliding sums
of the noise are in :mod:`mcacct.kernels.sliding`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.participation import NO_PARTICIPATION
from mcacct.kernels.sliding import sliding_dot_t

__all__ = ["mean_shift", "mean_shift_t", "mean_shift_amplitudes", "shift_down", "block_mean",
           "mean_shift_from_blocks_t", "mean_window_table", "mean_sliding_from_blocks_t", "MEAN_TABLE_MAX_TAPS"]


def mean_shift(x: jax.Array, c_col: tuple[float, ...], dtype=jnp.float64) -> jax.Array:
    r"""``C x`` for min-sep-separated ``x`` of shape ``(..., n)``.

    ``(Cx)_j = c_{j - t}`` where ``t`` is the last participation at or before ``j`` (at most one participation is
    within ``len(c_col)`` of ``j``).

    Parameters
    ----------
    x : jax.Array
        bool participation vectors ``(..., n)``, participations at least ``len(c_col)`` apart.
    c_col : tuple of float
        The strategy's column.
    dtype : dtype, optional
        Result dtype (default float64).

    Returns
    -------
    jax.Array
        ``C x``, shape ``(..., n)``.
    """
    n = x.shape[-1]
    idx = jnp.arange(n, dtype=jnp.int32)
    last = jax.lax.cummax(jnp.where(x, idx, -(2**30)), axis=x.ndim - 1)
    lag = idx - last
    c = jnp.asarray(c_col, dtype)
    return jnp.where(lag < len(c_col), c[jnp.clip(lag, 0, len(c_col) - 1)], jnp.zeros((), dtype))


def shift_down(a: jax.Array, s: int, fill) -> jax.Array:
    """``a`` moved ``s`` rows down along axis 0 (row ``j`` gets row ``j - s``), ``fill`` above."""
    pad = jnp.full((s,) + a.shape[1:], fill, a.dtype)
    return jnp.concatenate([pad, a[:a.shape[0] - s]], axis=0)


def mean_shift_t(x_t: jax.Array, c_col: tuple[float, ...], dtype) -> jax.Array:
    """:func:`mean_shift` along axis 0.

    The last participation within the column's reach is found by ``ceil(log2 len(c_col))`` doubling steps of a
    running max (a window of ``2^k >= len(c_col)`` rows: an older participation in it has lag ``>= len(c_col)`` and
    contributes nothing), not a full ``cummax``."""
    n = x_t.shape[0]
    L = len(c_col)
    if L == 1:
        return jnp.where(x_t, jnp.asarray(c_col[0], dtype), jnp.zeros((), dtype))
    idx = jnp.arange(n, dtype=jnp.int32).reshape((n,) + (1,) * (x_t.ndim - 1))
    last = jnp.where(x_t, idx, -(2**30))
    s = 1
    while s < L and s < n:
        last = jnp.maximum(last, shift_down(last, s, -(2**30)))
        s *= 2
    lag = idx - last
    c = jnp.asarray(c_col, dtype)
    return jnp.where(lag < L, c[jnp.clip(lag, 0, L - 1)], jnp.zeros((), dtype))


def mean_shift_amplitudes(a: jax.Array, c_col: tuple[float, ...]) -> jax.Array:
    r"""``C a`` for a real amplitude vector ``a`` whose non-zeros are at least ``len(c_col)`` apart.

    :math:`(Ca)_j = c_{j-t}\, a_t` with ``t`` the last non-zero at or before ``j``. ``O(n)`` per row (running
    maxima of indices and a gather) instead of ``O(n k)``. A row whose non-zeros are closer than ``len(c_col)``
    would get a wrong mean (only the last one is seen), so it is returned as ``nan``: its losses are then
    non-finite, and the engine refuses them instead of reporting a delta that is too low.

    Parameters
    ----------
    a : jax.Array
        Real amplitudes, shape ``(..., n)``.
    c_col : tuple of float
        The strategy's column.

    Returns
    -------
    jax.Array
        ``C a``, the shape and dtype of ``a``; a whole row of ``nan`` where its non-zeros are too close.
    """
    n = a.shape[-1]
    dtype = a.dtype
    idx = jnp.arange(n, dtype=jnp.int32)
    nz = a != 0
    last = jax.lax.cummax(jnp.where(nz, idx, -(2**30)), axis=a.ndim - 1)
    lag = idx - last
    amp = jnp.take_along_axis(a, jnp.clip(last, 0, n - 1), axis=-1)
    c = jnp.asarray(c_col, dtype)
    k = len(c_col)
    out = jnp.where(lag < k, c[jnp.clip(lag, 0, k - 1)] * amp, jnp.zeros((), dtype))
    if k == 1:
        return out
    before = jnp.concatenate([jnp.full(last.shape[:-1] + (1,), -(2**30), last.dtype), last[..., :-1]], axis=-1)
    too_close = jnp.any(nz & (idx - before < k), axis=-1, keepdims=True)  # the non-zero before is within reach
    return jnp.where(too_close, jnp.asarray(jnp.nan, dtype), out)


def block_mean(tau_in: jax.Array, tau_prev: jax.Array, rows: jax.Array, c: jax.Array) -> jax.Array:
    """``C x`` on the rows of a block of ``b >= len(c)`` iterations.

    ``c[t - tau]`` for the participation ``tau`` in the block at or before row ``t``, else the one in the previous
    block, when the lag is below ``len(c)`` (``NO_PARTICIPATION``: none).

    Parameters
    ----------
    tau_in, tau_prev : jax.Array
        The participation in the block and in the previous one, broadcast against ``rows``.
    rows : jax.Array
        Real 0-based rows.
    c : jax.Array
        The strategy's column as an array.

    Returns
    -------
    jax.Array
        The mean on ``rows`` (0 out of reach), the broadcast shape, the dtype of ``c``.
    """
    k = c.shape[0]
    lag_in = rows - tau_in
    lag = jnp.where((lag_in >= 0) & (tau_in != NO_PARTICIPATION), lag_in, rows - tau_prev)
    return jnp.where((lag >= 0) & (lag < k), c[jnp.clip(lag, 0, k - 1)], jnp.zeros((), c.dtype))


def mean_shift_from_blocks_t(tau: jax.Array, iterations: int, min_sep: int, c_col: tuple[float, ...],
                             dtype) -> jax.Array:
    """:func:`mean_shift_t` from the per-block participation ``tau``, without forming the mask.

    Only the participation in a row's block and the one in the block before can reach it. Equal to
    ``mean_shift_t`` of the mask, value for value.

    Parameters
    ----------
    tau : jax.Array
        int32 ``(ceil(n/b), B)`` (:func:`mcacct.kernels.participation.block_participation`; gaps
        ``>= min_sep >= len(c_col)``).
    iterations, min_sep : int
        ``n`` and ``b`` (``b >= len(c_col)``).
    c_col : tuple of float
        The strategy's column.
    dtype : dtype

    Returns
    -------
    jax.Array
        ``C x``, time-major ``(n, B)``.
    """
    rows, prev, _, unblock = _block_layout(tau, iterations, min_sep, len(c_col))
    return unblock(block_mean(tau[:, None, :], prev[:, None, :], rows, jnp.asarray(c_col, dtype)))


def _block_layout(tau: jax.Array, n: int, b: int, k: int):
    """The rows of the per-block participation ``tau`` (``(nblk, B)``, blocks of ``b`` rows with ``nblk b - n``
    dummy rows in front): ``rows`` ``(nblk, b, 1)`` the real 0-based rows, ``prev`` / ``nxt`` the previous / next
    block's participation (``NO_PARTICIPATION`` past the ends), and ``unblock`` mapping ``(nblk, b, B)`` values to
    time-major ``(n, B)``. Checks ``k = len(c_col) <= b``."""
    if k > b:
        raise ValueError(f"len(c_col) must be at most min_sep; got {k} > {b}")
    nblk = tau.shape[0]
    pad = nblk * b - n
    none = jnp.full_like(tau[:1], NO_PARTICIPATION)
    rows = (jnp.arange(nblk)[:, None] * b - pad + jnp.arange(b)[None, :])[:, :, None]
    return (rows, jnp.concatenate([none, tau[:-1]], axis=0), jnp.concatenate([tau[1:], none], axis=0),
            lambda v: v.reshape((nblk * b,) + tau.shape[1:])[pad:])


#: the longest ``c_col`` whose window table (:func:`mean_window_table`, ``k (2k - 1)`` float64 values: 8 MiB at
#: 1024 taps) :func:`mean_sliding_from_blocks_t` builds; longer columns take the sliding sums of the mean
MEAN_TABLE_MAX_TAPS = 1024


@functools.lru_cache(maxsize=32)
def mean_window_table(c_col: tuple[float, ...]) -> np.ndarray:
    r"""The window table of :func:`mean_sliding_from_blocks_t`: sliding sums of one participation's mean.

    ``T[L - 1, k - 1 + \delta]`` is the sliding sum at row ``i`` of the mean of one participation at
    ``tau = i + delta``, for ``|delta| < k`` and ``L = min(n - i, k)`` rows left in the window,

    .. math::  T_{L, \delta} = \sum_{d = \max(0, \delta)}^{\min(k, k + \delta, L) - 1} c_d\, c_{d - \delta}

    (the mean is :math:`c_{t - \tau}` on rows ``tau .. tau + k - 1``; row ``L = k`` is the autocorrelation of
    ``c``). Computed on the host with ``np.longdouble`` partial sums (64-bit significands on x86) and rounded once;
    where ``longdouble`` is ``double`` each entry is still a sum of at most ``k`` products with error at most
    ``k u`` times the sum of their magnitudes (``docs/soundness.md``).

    Parameters
    ----------
    c_col : tuple of float
        The strategy's column, ``k`` taps (hashable: results are cached).

    Returns
    -------
    numpy.ndarray
        float64, shape ``(k, 2k - 1)``.
    """
    c = np.asarray(c_col, np.longdouble)
    k = len(c)
    out = np.zeros((k, 2 * k - 1), np.longdouble)
    lengths = np.arange(1, k + 1)
    for delta in range(1 - k, k):
        d0, d1 = max(0, delta), k + min(0, delta)
        partial = np.concatenate([np.zeros(1, np.longdouble), np.cumsum(c[d0:d1] * c[d0 - delta:d1 - delta])])
        out[:, k - 1 + delta] = partial[np.clip(lengths - d0, 0, d1 - d0)]
    return out.astype(np.float64)


def mean_sliding_from_blocks_t(tau: jax.Array, iterations: int, min_sep: int, c_col: tuple[float, ...],
                               dtype) -> jax.Array:
    r""":math:`s^m_i = \langle c^{(i)}, C x\rangle`, time-major, from the per-block participation ``tau``.

    Equal to ``sliding_dot_t(mean_shift_from_blocks_t(tau, ...), c_col)`` up to rounding, without forming the mean
    or summing windows. A participation at ``tau`` reaches the windows of rows ``tau - k < i < tau + k``; with gaps
    ``>= min_sep >= k`` at most one of them is at or before row ``i`` and one after it, each from block ``q - 1``,
    ``q`` or ``q + 1`` for a row of block ``q``, and each adds one entry of :func:`mean_window_table`: two table
    reads per value instead of the ``k``-term sums (prefix sums or an FFT) of the mean. For a constant ``c`` the
    entry is :math:`c_0^2` times the overlap count, computed (two roundings: the square and the product). Columns
    longer than :data:`MEAN_TABLE_MAX_TAPS` take the sums.

    Parameters
    ----------
    tau : jax.Array
        int32 ``(ceil(n/b), B)``, as in :func:`mean_shift_from_blocks_t`.
    iterations, min_sep : int
        ``n`` and ``b`` (``b >= len(c_col)``).
    c_col : tuple of float
        The strategy's column.
    dtype : dtype

    Returns
    -------
    jax.Array
        ``s^m``, time-major ``(n, B)``.
    """
    n, b, k = int(iterations), int(min_sep), len(c_col)
    rows, prev, nxt, unblock = _block_layout(tau, n, b, k)
    if k > MEAN_TABLE_MAX_TAPS:
        return sliding_dot_t(mean_shift_from_blocks_t(tau, n, b, c_col, dtype), c_col)
    here = tau[:, None, :]
    # at most one participation at or before row i reaches it (two would be closer than k <= b), and at most one
    # after it: the block's own or the previous / next block's
    before = jnp.where((here != NO_PARTICIPATION) & (here <= rows), here, prev[:, None, :])
    after = jnp.where(here > rows, here, nxt[:, None, :])
    length = jnp.clip(n - rows, 1, k)                  # rows left in the window (cut at row n)
    constant = all(v == c_col[0] for v in c_col)
    if not constant:
        table = jnp.asarray(mean_window_table(tuple(float(v) for v in c_col)).reshape(-1))
    out = None
    for t in (before, after):
        delta = t - rows
        reach = (t != NO_PARTICIPATION) & (jnp.abs(delta) < k)
        delta = jnp.clip(delta, 1 - k, k - 1)
        if constant:  # the table is c_0^2 times the overlap count: computed, not read
            overlap = jnp.minimum(jnp.minimum(k, k + delta), length) - jnp.maximum(0, delta)
            val = jnp.asarray(c_col[0] * c_col[0], jnp.float64) * overlap.astype(jnp.float64)
        else:
            val = jnp.take(table, (length - 1) * (2 * k - 1) + (k - 1) + delta, mode="clip")
        term = jnp.where(reach, val, 0.0)
        out = term if out is None else out + term
    return unblock(out).astype(dtype)
