r"""Sliding sums of a banded Toeplitz column: the linear algebra of ``y = C x + sigma z``.

``C`` is lower-triangular banded Toeplitz with first-column non-zeros ``c_col = (c_0, ..., c_{k-1})``
(Dong & Ganesh 2026, arXiv:2602.09338, §2). Every function here takes plain numbers,
tuples and arrays, imports no scheme and is pure (jit-traceable):

* :func:`sliding_dot` / :func:`sliding_dot_t`: :math:`s_i = \langle c^{(i)}, y \rangle`, the column-``i``
  correlation that every privacy loss starts from;
* :func:`column_sq_norms`: :math:`\|c^{(i)}\|^2`, columns truncated at row ``n``;
* :func:`participation_log_ratios`: the per-iteration terms
  :math:`\ell_i = (\langle c^{(i)}, y\rangle - \|c^{(i)}\|^2/2)/\sigma^2`;
* :func:`reversed_column`: ``c`` reversed and zero-padded, the FFT's filter.

The output mean ``C x`` of separated participation patterns and its sliding sums are in
:mod:`mcacct.kernels.mean_shift`.

Functions with the suffix ``_t`` work along axis 0 (time-major ``(n, ...)``, the engine's layout).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.fft_size import sliding_fft_size
from mcacct.kernels.prefix import prefix_sums0
from mcacct.core.validate import DOT_METHODS
from mcacct.core.precision import float64
from mcacct.core.platform import target_platform

__all__ = ["DOT_METHODS", "choose_dot_method", "sliding_dot", "sliding_dot_t", "column_sq_norms",
           "participation_log_ratios", "participation_log_ratios_t", "reversed_column"]


def choose_dot_method(c_col: tuple[float, ...], method: str) -> str:
    """The sliding-sum method that ``method`` resolves to for ``c_col`` (``"auto"``: by the taps; else as given).

    Parameters
    ----------
    c_col : tuple of float
        The strategy's column.
    method : {'auto', 'direct', 'fft', 'prefix'}

    Returns
    -------
    str
        ``"direct"``, ``"fft"`` or ``"prefix"``.

    Raises
    ------
    ValueError
        If ``method`` is not one of ``DOT_METHODS``.
    """
    if method not in DOT_METHODS:
        raise ValueError(f"dot_method must be one of {DOT_METHODS}; got {method!r}")
    if method != "auto":
        return method
    k = len(c_col)
    if k == 1:
        return "direct"
    if all(v == c_col[0] for v in c_col):
        return "prefix"
    return "direct" if k <= 32 else "fft"


@float64
def sliding_dot(y: jax.Array, c_col: tuple[float, ...], method: str = "auto") -> jax.Array:
    r"""Sliding dot products :math:`s_i = \sum_{d < k} c_d\, y_{i+d}` along the last axis.

    ``y`` is zero beyond ``n``, i.e. :math:`\langle c^{(i)}, y \rangle` with columns truncated at row ``n``.

    Parameters
    ----------
    y : jax.Array
        Outputs, shape ``(..., n)``.
    c_col : tuple of float
        The strategy's column ``(c_0, ..., c_{k-1})``.
    method : str, optional
        ``"direct"`` (``k`` shifted multiply-adds), ``"fft"`` (real FFT of length ``>= n + k``), ``"prefix"``
        (constant ``c_col`` only: block-local prefix sums) or ``"auto"`` (default; :func:`choose_dot_method`).

    Returns
    -------
    jax.Array
        ``s``, the shape and dtype of ``y``.
    """
    return jnp.moveaxis(sliding_dot_t(jnp.moveaxis(y, -1, 0), c_col, method), 0, -1)


def sliding_dot_t(y_t: jax.Array, c_col: tuple[float, ...], method: str = "auto") -> jax.Array:
    """:func:`sliding_dot` along axis 0 (time-major arrays, the layout of the engine)."""
    method = choose_dot_method(c_col, method)
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
        if target_platform() == "cpu":  # XLA:CPU: two-level 0/1 products beat cumsum (reduce_window)
            excl = prefix_sums0(blk, exclusive=True, axis=1)
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
    size = sliding_fft_size(n, k)
    cf = jnp.fft.rfft(jnp.asarray(reversed_column(c_col, size), dtype))
    # transformed along the last axis: faster on XLA:CPU than along axis 0 of the time-major block, the same
    # values bit for bit (benchmarks/results/design_choices.md)
    yf = jnp.fft.rfft(jnp.moveaxis(y_t, 0, -1), n=size, axis=-1)
    return jnp.moveaxis(jnp.fft.irfft(yf * cf, n=size, axis=-1)[..., :n], -1, 0).astype(dtype)


def reversed_column(c_col: tuple[float, ...], size: int) -> np.ndarray:
    """float64 ``(size,)``: ``c_0`` at 0 and ``c_d`` at ``size - d``, the filter whose circular convolution of length
    ``size >= n + k - 1`` is the sliding dot product of :func:`sliding_dot_t` on its first ``n`` rows."""
    rev = np.zeros(size)
    rev[0] = c_col[0]
    rev[size - len(c_col) + 1:] = np.asarray(c_col[1:], np.float64)[::-1]
    return rev


def column_sq_norms(c_col: tuple[float, ...], iterations: int) -> np.ndarray:
    r"""Squared norms :math:`\|c^{(t)}\|^2` of the ``n = iterations`` columns, truncated at row ``n``.

    float64, NumPy: a constant of the traced program.

    Parameters
    ----------
    c_col : tuple of float
        The strategy's column.
    iterations : int
        ``n``.

    Returns
    -------
    numpy.ndarray
        float64, shape ``(n,)``.
    """
    n = int(iterations)
    c2 = np.asarray(c_col, dtype=np.float64) ** 2
    # column t (0-based) keeps rows t..min(n, t+k)-1, i.e. the first min(k, n-t) entries
    cums = np.concatenate([[0.0], np.cumsum(c2)])
    lengths = np.minimum(len(c_col), n - np.arange(n))
    return cums[lengths]


def participation_log_ratios(y: jax.Array, sigma, c_col: tuple[float, ...], method: str = "auto") -> jax.Array:
    r""":math:`\ell_i = (\langle c^{(i)}, y\rangle - \|c^{(i)}\|^2 / 2) / \sigma^2` for every ``i``, shape of ``y``.

    Parameters
    ----------
    y : jax.Array
        Outputs, shape ``(..., n)``.
    sigma : float or jax.Array
        Noise multiplier, ``> 0``.
    c_col : tuple of float
        The strategy's column.
    method : str, optional
        Sliding-sum method (:func:`sliding_dot`; default ``"auto"``).

    Returns
    -------
    jax.Array
        The terms, the shape and dtype of ``y``.
    """
    return jnp.moveaxis(participation_log_ratios_t(jnp.moveaxis(y, -1, 0), sigma, c_col, method), 0, -1)


def participation_log_ratios_t(y_t: jax.Array, sigma, c_col: tuple[float, ...], method: str = "auto") -> jax.Array:
    """:func:`participation_log_ratios` for time-major ``y_t`` of shape ``(n, ...)``."""
    n = y_t.shape[0]
    sq = jnp.asarray(column_sq_norms(c_col, n), y_t.dtype).reshape((n,) + (1,) * (y_t.ndim - 1))
    inv_var = 1.0 / jnp.asarray(sigma, y_t.dtype) ** 2
    return (sliding_dot_t(y_t, c_col, method) - 0.5 * sq) * inv_var
