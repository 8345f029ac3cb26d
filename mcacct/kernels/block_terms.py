r"""Upper bounds of the remove bound's block maxima without the exact path's sliding sums (issue #39).

:mod:`mcacct.kernels.bound` bounds the remove loss from the block maxima :math:`\mu_k` of
:math:`s^m - \|c\|^2/2` and :math:`\zeta_k` of :math:`s^z`. Here both are bounded without forming the float64
sliding sums, so a batch of draws that the skip lets go whole never forms them
(:func:`mcacct.kernels.output.ladder_losses_from_draws_t`): for a constant positive column :math:`c_i = c_0`
(``i < k``) from the participation and the noise's prefix sums (:mod:`mcacct.kernels.const_column`); for any
other finite column the mean's from a table of the columns' overlaps (:func:`mean_block_maxima_t`) and the noise's
from float32 FFT sums with a certified error (:func:`noise_block_maxima_t`). The proofs are in the functions and
``docs/soundness.md``. Numbers and arrays in; no scheme imported.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.platform import target_platform
from mcacct.kernels.bound import BOUND_BLOCK, block_layout
from mcacct.kernels.fft_size import screen_fft_size
from mcacct.kernels.participation import NO_PARTICIPATION
from mcacct.kernels.sliding import column_sq_norms, reversed_column

__all__ = ["sum_error", "block_rows", "nearby_participations", "mean_block_maxima_t", "overlap_window_maxima",
           "noise_block_maxima_t", "noise_screen_error", "FFT_ERROR_PER_LEVEL"]


def sum_error(terms: int) -> float:
    r""":math:`\gamma_N = N u / (1 - N u)` for ``N = terms + 8`` (``u = 2^{-53}``), raised by a relative ``2^{-20}``: a
    float64 sum of at most ``terms`` numbers, added in any order (any tree of additions), is within
    :math:`\gamma_N \sum |x_i|` of the exact sum (Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2)."""
    nu = (int(terms) + 8) * 2.0**-53
    return nu / (1.0 - nu) * (1.0 + 2.0**-20)


def block_rows(n: int, b: int, block: int) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """``(first, last, s, K, K_pad)``: each end-aligned block's first and last 0-based rows (block 0 cut at row 0),
    the rows per block, the blocks and the padded count (:func:`~mcacct.kernels.bound.block_layout`)."""
    s, k_blocks, k_pad, _, _ = block_layout(n, b, block)
    start = n - (k_blocks - np.arange(k_blocks)) * s          # each block's first 0-based row (< 0: block 0 padded)
    return np.maximum(start, 0), start + s - 1, s, k_blocks, k_pad


def nearby_participations(tau: jax.Array, first: np.ndarray, last: np.ndarray, n: int, b: int) -> jax.Array:
    """``(K, 4, ...)``: per block of rows ``[first, last]``, the participations (``NO_PARTICIPATION`` for none) of
    the blocks of ``b`` rows that can reach a row's window (``len(c_col) <= b``): those of its first and last rows
    and their neighbours, at most four."""
    nblk = tau.shape[0]
    pad_b = nblk * b - n
    q_lo, q_hi = (first + pad_b) // b - 1, (last + pad_b) // b + 1
    cand = q_lo[:, None] + np.arange(4)[None, :]
    cand = np.where((cand >= 0) & (cand < nblk) & (cand <= q_hi[:, None]), cand, nblk)     # nblk: none
    tau_ext = jnp.concatenate([tau, jnp.full_like(tau[:1], NO_PARTICIPATION)], axis=0)
    return tau_ext[cand]


@functools.lru_cache(maxsize=32)
def overlap_window_maxima(c_col: tuple[float, ...], block: int) -> np.ndarray:
    r"""``W[j + k - 1] = max_{j - s < d <= j} G(d)`` for ``-k < j < k + s - 1``, and a last entry ``0``, with
    :math:`G(d) = \sum_i |c_i|\,|c_{i-d}|` (``0`` for :math:`|d| \ge k`) the overlap of two columns ``d`` rows
    apart, in absolute values, untruncated.

    Computed on the host with ``np.longdouble`` partial sums and rounded once, as
    :func:`mcacct.kernels.mean_shift.mean_window_table`: each entry within ``(k + 2) u`` of the exact one relative to
    itself (non-negative terms).

    Parameters
    ----------
    c_col : tuple of float
        The strategy's column, ``k`` finite taps.
    block : int
        ``s``, the rows of a block.

    Returns
    -------
    numpy.ndarray
        float64 ``(2k + s - 1,)``.
    """
    c = np.abs(np.asarray(c_col, np.longdouble))
    k, s = len(c), int(block)
    g = np.zeros(2 * k - 1 + 2 * (s - 1), np.longdouble)           # G(d) at d + k - 1 + (s - 1), zeros around it
    for d in range(1 - k, k):
        lo, hi = max(0, d), k + min(0, d)
        g[d + k - 1 + s - 1] = np.sum(c[lo:hi] * c[lo - d:hi - d])
    out = np.zeros(2 * k + s - 1, np.longdouble)
    for j in range(1 - k, k + s - 1):
        at = j + k - 1 + s - 1
        out[j + k - 1] = g[at - s + 1:at + 1].max()
    return out.astype(np.float64)


def mean_block_maxima_t(tau: jax.Array, iterations: int, min_sep: int, c_col: tuple[float, ...],
                        block: int = BOUND_BLOCK) -> jax.Array:
    r"""Upper bounds of the block maxima :math:`\mu_k` of :math:`s^m - \|c^{(i)}\|^2/2` (:mod:`mcacct.kernels.bound`)
    from the participation alone, for any finite column of at most ``b`` taps.

    A participation at row :math:`\tau` adds :math:`\sum_{r < n} c_{r-i} c_{r-\tau}` to :math:`s^m_i`, at most
    :math:`G(\tau - i)` (:func:`overlap_window_maxima`: absolute values, untruncated), so over the rows of a block
    (within ``[a, a + s - 1]``) at most :math:`W(\tau - a) = \max_{\tau - a - s < d \le \tau - a} G(d)`. Only the
    participations of the blocks of ``b`` rows beside the block's rows reach it (:func:`block_term_maxima_t`), and
    the sum of their maxima bounds the maximum of the sum: :math:`\mu_k \le \sum_\tau W(\tau - a) - \min_R
    \|c^{(i)}\|^2/2`. One table read per block and nearby participation, against two per row for
    :math:`s^m` itself (:func:`mcacct.kernels.mean_shift.mean_sliding_from_blocks_t`). ``mu`` adds ``(k + 16) 2^{-51}``
    of the sum and the norm for the rounding of the table (``(k + 2) u``), of the column norms (a float sum of ``k``
    squares), of the sum of at most four entries and of the difference. A bound of the exact block maxima of the
    draws, with ``c`` as given.

    Parameters
    ----------
    tau : jax.Array
        int32 ``(ceil(n/b), ...)``: the participation per block of ``b`` rows.
    iterations, min_sep : int
        ``n`` and ``b`` (``b >= len(c_col)``).
    c_col : tuple of float
        The strategy's column (finite).
    block : int, optional
        Rounds per block, ``s = min(block, b)`` (default :data:`~mcacct.kernels.bound.BOUND_BLOCK`).

    Returns
    -------
    jax.Array
        float64 ``(K_pad, ...)``, padded in front with ``-inf`` as :func:`mcacct.kernels.bound.block_maxima_t` pads.

    Raises
    ------
    ValueError
        If ``c_col`` is longer than ``min_sep`` or not finite.
    """
    n, b, k = int(iterations), int(min_sep), len(c_col)
    if k > b:
        raise ValueError(f"len(c_col) must be at most min_sep; got {k} > {b}")
    c = _finite_column(c_col)
    first, last, s, k_blocks, k_pad = block_rows(n, b, block)
    lead = tau.shape[1:]
    t = nearby_participations(tau, first, last, n, b)
    table = overlap_window_maxima(c, s)
    a = (last - s + 1).reshape((-1, 1) + (1,) * len(lead))
    j = t - jnp.asarray(a, jnp.int32) + (k - 1)
    j = jnp.where((t != NO_PARTICIPATION) & (j >= 0) & (j < table.shape[0] - 1), j, table.shape[0] - 1)
    total = jnp.sum(jnp.take(jnp.asarray(table), j), axis=1)
    half = 0.5 * column_sq_norms(c, n)
    h = jnp.asarray(np.array([half[f:e + 1].min() for f, e in zip(first, last)]),
                    jnp.float64)[(slice(None),) + (None,) * len(lead)]
    mu = (total - h) + ((k + 16) * 2.0**-51) * (total + h)
    front = jnp.full((k_pad - k_blocks,) + lead, -jnp.inf, jnp.float64)
    return jnp.concatenate([front, mu], axis=0)


#: the float32 transforms' normwise error, per unit round-off and ``log2 N + 1`` (assumption (A1) of
#: docs/pld.md, "FFT round-off", for the real transforms of XLA, of the lengths of
#: :func:`~mcacct.kernels.fft_size.screen_fft_size`; tests/kernels/test_settle.py measures it)
FFT_ERROR_PER_LEVEL = 8.0


@functools.lru_cache(maxsize=32)
def _screen_filter(c_col: tuple[float, ...], size: int) -> np.ndarray:
    """The reversed column's real transform of length ``size``, float64 on the host, rounded to complex64."""
    return np.fft.rfft(reversed_column(c_col, size)).astype(np.complex64)


def _finite_column(c_col) -> tuple[float, ...]:
    """``c_col`` as a tuple of floats; a ``ValueError`` if an entry is not finite."""
    c = tuple(float(v) for v in c_col)
    if not all(math.isfinite(v) for v in c):
        raise ValueError("c_col must be finite")
    return c


def noise_screen_error(c_col: tuple[float, ...], size: int) -> float:
    r"""``e`` with :math:`|\hat s_i - s^z_i| \le e\, \|z\|_2` for every row of :func:`noise_block_maxima_t`'s float32
    sums (docs/soundness.md, "Terms for any column").

    With :math:`u = 2^{-24}`, :math:`\epsilon_F = 8 (\log_2 N + 1) u` (each transform's normwise relative error),
    :math:`\rho = u + 10^{-13}` (the filter's transform, float64 rounded to complex64), :math:`2.5u` (a complex
    product) and :math:`Q = (2.5u (1 + \rho) + \rho)(1 + \epsilon_F) + \epsilon_F` (the half spectrum's error, relative
    to :math:`\|c\|_1 \sqrt N \|v\|_2`; its Hermitian extension at most doubles its squared norm):
    :math:`e = 1.01\,[(1 + u)\|c\|_1 (\epsilon_F (1 + \sqrt 2 Q) + \sqrt 2 Q) + u \|c\|_2]`.

    Parameters
    ----------
    c_col : tuple of float
        The strategy's column.
    size : int
        ``N``, the transforms' length.

    Returns
    -------
    float
    """
    u = 2.0**-24
    eps_f = FFT_ERROR_PER_LEVEL * (math.log2(size) + 1.0) * u
    rho = u + 1e-13
    l1 = math.fsum(abs(float(v)) for v in c_col)
    l2 = math.sqrt(math.fsum(float(v) ** 2 for v in c_col))
    q = (2.5 * u * (1 + rho) + rho) * (1 + eps_f) + eps_f
    rel = eps_f * (1 + math.sqrt(2.0) * q) + math.sqrt(2.0) * q
    return 1.01 * ((1 + u) * l1 * rel + u * l2)


def noise_block_maxima_t(z: jax.Array, iterations: int, min_sep: int, c_col: tuple[float, ...],
                         block: int = BOUND_BLOCK, lanes: bool = False, noise_error: float | None = None) -> jax.Array:
    r"""Upper bounds of the block maxima :math:`\zeta_k` of :math:`s^z_i = \sum_d c_d z_{i+d}`
    (:mod:`mcacct.kernels.bound`) from float32 sums with a certified error, for any finite column.

    The noise is rounded to float32 and correlated with the column by real FFTs of length :math:`N \ge n + k - 1`
    (:func:`~mcacct.kernels.fft_size.screen_fft_size`) along its rows, lane-major: about half the time of the
    float64 sums of the exact path, which also transposes back. Under the normwise model of every transform
    (assumption (A1) of docs/pld.md, "FFT round-off", here in float32; a complex product within :math:`2.5u`) the
    computed sums :math:`\hat s` satisfy :math:`\|\hat s - s^z\|_2 \le e \|z\|_2` (:func:`noise_screen_error`: the
    transforms, the filter's rounding and the noise's), which bounds every row, so
    :math:`\zeta_k = \max_{i \in k} \hat s_i + e \|z\|_2`, the norm and the sum rounded up. A bound of the exact
    block maxima of the float64 draws, with ``c`` as given. Lane-major noise (``lanes``,
    :func:`mcacct.kernels.normal.standard_normal_lanes`) spares the transposing copy; the sums are the same, the norm
    is summed in another order (within its rounding allowance either way). With ``noise_error`` :math:`\alpha`, ``z``
    is float32 :math:`\hat z` with :math:`|\hat z - z| \le \alpha` elementwise against the draws
    (:mod:`mcacct.kernels.normal_table`): the transforms start from :math:`\hat z`, :math:`e \|\hat z\|_2` bounds
    their error, and :math:`\|c\|_1 \alpha` (raised by :math:`10^{-12}`) the distance of :math:`\hat z`'s sums from
    the draws'.

    Parameters
    ----------
    z : jax.Array
        float64 standard noise, time-major ``(n, B)``, or lane-major ``(B, n)`` with ``lanes``.
    iterations, min_sep, c_col, block
        As in :func:`mean_block_maxima_t`.
    lanes : bool, optional
        Whether ``z`` is lane-major (default ``False``).
    noise_error : float, optional
        :math:`\alpha \ge 0`: ``z`` is float32 within it of the draws (default ``None``: ``z`` is the float64 draws).

    Returns
    -------
    jax.Array
        As :func:`mean_block_maxima_t` returns, ``(K_pad, B)``.

    Raises
    ------
    ValueError
        If ``z`` is not float64 (float32 with ``noise_error``) of shape ``(n, B)`` (``(B, n)`` with ``lanes``),
        ``noise_error`` is negative or not finite, or ``c_col`` is not finite.
    """
    n, b, k = int(iterations), int(min_sep), len(c_col)
    want = jnp.float64 if noise_error is None else jnp.float32
    if z.dtype != want or z.ndim != 2 or z.shape[1 if lanes else 0] != n:
        raise ValueError(f"z must be {jnp.dtype(want).name} of shape {('(B, %d)' if lanes else '(%d, B)') % n}; got "
                         f"{z.dtype} {z.shape}")
    if noise_error is not None and not (math.isfinite(noise_error) and noise_error >= 0.0):
        raise ValueError(f"noise_error must be a finite float >= 0; got {noise_error!r}")
    c = _finite_column(c_col)
    s, k_blocks, k_pad, _, _ = block_layout(n, b, block)
    size = screen_fft_size(n, k, radix2=target_platform() != "cpu")   # (A1) measured for XLA:CPU's lengths only
    filt = _screen_filter(c, size)
    v = (z if lanes else jnp.moveaxis(z, 0, 1)).astype(jnp.float32)        # (B, n), lane-major
    sums = jnp.fft.irfft(jnp.fft.rfft(v, n=size, axis=1) * jnp.asarray(filt), n=size, axis=1)[:, :n]
    top = jax.lax.reduce_window(sums, -jnp.inf, jax.lax.max, (1, s), (1, s), ((0, 0), (k_pad * s - n, 0)))
    z64 = z.astype(jnp.float64)                   # float32 squares are exact in float64
    norm = jnp.sqrt(jnp.sum(z64 * z64, axis=1 if lanes else 0)) * (1.0 + 2.0**-40)  # n squares: relative n u, far below
    err = noise_screen_error(c, size) * norm
    if noise_error is not None:
        err = err + float(np.sum(np.abs(c))) * float(noise_error) * (1.0 + 1e-12)
    top = top.T.astype(jnp.float64)
    zeta = top + err[None, :]
    return jnp.where(top == -jnp.inf, -jnp.inf, zeta + 2.0**-50 * (jnp.abs(zeta) + err[None, :]))   # front: -inf
