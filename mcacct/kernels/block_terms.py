r"""Upper bounds of the remove bound's block maxima without the exact path's sliding sums (issue #39).

:mod:`mcacct.kernels.bound` bounds the remove loss from the block maxima :math:`\mu_k` of
:math:`s^m - \|c\|^2/2` and :math:`\zeta_k` of :math:`s^z`. Here both are bounded without forming the float64
sliding sums, so a batch of draws that the skip lets go whole never forms them
(:func:`mcacct.kernels.output.ladder_losses_from_draws_t`): for a constant positive column :math:`c_i = c_0`
(``i < k``) from the participation and the noise's prefix sums (:func:`block_term_maxima_t`); for any other finite
column the mean's from a table of the columns' overlaps (:func:`mean_block_maxima_t`) and the noise's from float32
FFT sums with a certified error (:func:`noise_block_maxima_t`). The proofs are in the functions and
``docs/soundness.md``. Numbers and arrays in; no scheme imported.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.platform import target_platform
from mcacct.kernels.bound import BOUND_BLOCK, block_layout, remove_loss_bound_from_maxima
from mcacct.kernels.fft_size import screen_fft_size
from mcacct.kernels.participation import NO_PARTICIPATION
from mcacct.kernels.prefix import prefix_sums0
from mcacct.kernels.sliding import column_sq_norms, reversed_column

__all__ = ["supports_draws_bound", "sum_error", "block_term_maxima_t", "const_mean_block_maxima_t",
           "remove_loss_bound_from_draws_t", "mean_block_maxima_t", "overlap_window_maxima", "noise_block_maxima_t",
           "noise_screen_error", "FFT_ERROR_PER_LEVEL"]


def supports_draws_bound(c_col: tuple[float, ...]) -> bool:
    """Whether :func:`block_term_maxima_t` applies to ``c_col``: a constant, positive, finite column."""
    return (len(c_col) > 0 and math.isfinite(float(c_col[0])) and float(c_col[0]) > 0.0
            and all(v == c_col[0] for v in c_col))


def sum_error(terms: int) -> float:
    r""":math:`\gamma_N = N u / (1 - N u)` for ``N = terms + 8`` (``u = 2^{-53}``), raised by a relative ``2^{-20}``: a
    float64 sum of at most ``terms`` numbers, added in any order (any tree of additions), is within
    :math:`\gamma_N \sum |x_i|` of the exact sum (Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2)."""
    nu = (int(terms) + 8) * 2.0**-53
    return nu / (1.0 - nu) * (1.0 + 2.0**-20)


def _block_rows(n: int, b: int, block: int) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """``(first, last, s, K, K_pad)``: each end-aligned block's first and last 0-based rows (block 0 cut at row 0)."""
    s, k_blocks, k_pad, _, _ = block_layout(n, b, block)
    start = n - (k_blocks - np.arange(k_blocks)) * s          # each block's first 0-based row (< 0: block 0 padded)
    return np.maximum(start, 0), start + s - 1, s, k_blocks, k_pad


def _nearby_participations(tau: jax.Array, first: np.ndarray, last: np.ndarray, n: int, b: int) -> jax.Array:
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
    :func:`mcacct.kernels.sliding.mean_window_table`: each entry within ``(k + 2) u`` of the exact one relative to
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
    :math:`s^m` itself (:func:`mcacct.kernels.sliding.mean_sliding_from_blocks_t`). ``mu`` adds ``(k + 16) 2^{-51}``
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
    first, last, s, k_blocks, k_pad = _block_rows(n, b, block)
    lead = tau.shape[1:]
    t = _nearby_participations(tau, first, last, n, b)
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


def block_term_maxima_t(tau: jax.Array, z: jax.Array, iterations: int, min_sep: int, c_col: tuple[float, ...],
                        block: int = BOUND_BLOCK, noise_error: float | None = None) -> tuple[jax.Array, jax.Array]:
    r"""Upper bounds of the block maxima :math:`\mu_k` and :math:`\zeta_k` (:mod:`mcacct.kernels.bound`) straight from
    the draws, for a constant column :math:`c_i = c_0 > 0` (``i < k``), without forming the sliding sums.

    **Noise.** With the prefix sums :math:`P_j = \sum_{t<j} z_t` (0-based rows), :math:`s^z_i = c_0 (P_{\min(i+k,
    n)} - P_i)`, so over the rows ``R`` of a block

    .. math::
        \max_{i \in R} s^z_i \le c_0 \big(\max_{i \in R} P_{\min(i+k, n)} - \min_{i \in R} P_i\big).

    Per block: its total, the running partial sums (a chain over its ``s`` rows) and their minimum and maximum; the
    blocks' offsets are the prefix sums of the totals. The shifted indices :math:`\min(i+k, n)` of a block lie in
    at most two consecutive blocks (or at :math:`P_n`). Every computed :math:`P_j` is a float sum of the ``j``
    draws by additions only, so within :math:`\gamma_n \sum_t |z_t|` of the exact one (:func:`sum_error`), and
    the computed difference and product round by a few ulps: ``zeta`` adds :math:`2 c_0 \gamma_n \sum|z|`
    (raised by a thousandth) and :math:`2^{-44}|\zeta|`. The front padding of block 0 (zeros) only repeats
    :math:`P_0`. With ``noise_error`` :math:`\alpha`, ``z`` is float32 :math:`\hat z` with :math:`|\hat z - z| \le
    \alpha` elementwise against the draws (:mod:`mcacct.kernels.normal_table`): the sums start from :math:`\hat z`
    (exact in float64), and each window's :math:`|c_0 \sum (\hat z - z)| \le c_0 k \alpha` (raised by
    :math:`10^{-9}`) is added.

    **Mean.** For a constant column, one participation at row :math:`\tau` adds
    :math:`c_0^2 \max(0, \min(i+k, n, \tau+k) - \max(i, \tau))` (the overlap of the window of row ``i`` with the
    participation's column) to :math:`s^m_i`: rising in ``i`` up to :math:`\tau`, falling after, so its maximum over
    a block's rows ``[a, e]`` is at :math:`\mathrm{clip}(\tau, a, e)`. The participations that can reach the block
    lie in the blocks of ``b`` rows of ``a`` and ``e`` or next to them; the sum of their maxima bounds the
    maximum of the sum, and :math:`\max_R (s^m_i - \|c^{(i)}\|^2/2) \le c_0^2 O - \min_R \|c^{(i)}\|^2/2`. ``mu``
    adds :math:`(k + 16) 2^{-51}` of :math:`c_0^2 O + \min_R\|c^{(i)}\|^2/2` for the rounding of :math:`c_0^2`, of
    the column norms (a float sum of ``k`` squares) and of the difference.

    Both are bounds of the *exact* block maxima of the draws (the float draws as exact numbers and ``c_0`` as
    given), not of the computed sums.

    Parameters
    ----------
    tau : jax.Array
        int32 ``(ceil(n/b), ...)``: the participation per block of ``b`` rows
        (:func:`~mcacct.kernels.participation.participation_blocks_t`).
    z : jax.Array
        float64 standard noise, time-major ``(n, ...)``.
    iterations, min_sep : int
        ``n`` and ``b`` (``b >= len(c_col)``).
    c_col : tuple of float
        The strategy's column, constant and positive (:func:`supports_draws_bound`).
    block : int, optional
        Rounds per block, ``s = min(block, b)`` (default :data:`~mcacct.kernels.bound.BOUND_BLOCK`).
    noise_error : float, optional
        :math:`\alpha \ge 0`: ``z`` is float32 within it of the draws (default ``None``: ``z`` is the float64 draws).

    Returns
    -------
    mu, zeta : jax.Array
        float64 ``(K_pad, ...)``, padded in front with ``-inf`` as :func:`mcacct.kernels.bound.block_maxima_t` pads.

    Raises
    ------
    ValueError
        If ``c_col`` is not constant and positive, is longer than ``min_sep``, ``z`` is not float64 (float32 with
        ``noise_error``) ``(n, ...)``, or ``noise_error`` is negative or not finite.
    """
    n, b, k = int(iterations), int(min_sep), len(c_col)
    if not supports_draws_bound(c_col):
        raise ValueError("block_term_maxima_t needs a constant, positive c_col")
    if k > b:
        raise ValueError(f"len(c_col) must be at most min_sep; got {k} > {b}")
    want = jnp.float64 if noise_error is None else jnp.float32
    if z.dtype != want or z.shape[0] != n:
        raise ValueError(f"z must be {jnp.dtype(want).name} of shape ({n}, ...); got {z.dtype} {z.shape}")
    if noise_error is not None and not (math.isfinite(noise_error) and noise_error >= 0.0):
        raise ValueError(f"noise_error must be a finite float >= 0; got {noise_error!r}")
    z = z.astype(jnp.float64)                     # float32 values are exact in float64
    first, last, s, k_blocks, k_pad = _block_rows(n, b, block)
    lead = z.shape[1:]
    c0 = float(c_col[0])

    # noise: the running sums before each row of a block, their extremes, the blocks' totals and offsets (the
    # recursion forms its exponents from mu and zeta inside its loop, so XLA:CPU computes these once, not per
    # candidate inside the recursion's exp)
    zb = jnp.pad(z, [(k_blocks * s - n, 0)] + [(0, 0)] * len(lead)).reshape((k_blocks, s) + lead)
    runs = [jnp.zeros((k_blocks,) + lead, jnp.float64)]
    for m in range(s - 1):
        runs.append(runs[-1] + zb[:, m])
    run = jnp.stack(runs, axis=1)
    lo, hi = jnp.min(run, axis=1), jnp.max(run, axis=1)
    acc, mass = jnp.sum(zb, axis=1), jnp.sum(jnp.abs(zb), axis=1)
    offset = prefix_sums0(acc, exclusive=True)
    p_min = offset + lo
    p_ext = jnp.concatenate([offset + hi, (offset[-1] + acc[-1])[None]], axis=0)   # row k_blocks: P_n
    shifted_lo, shifted_hi = np.minimum(first + k, n), np.minimum(last + k, n)

    def block_of(j):                                           # the block of prefix index j; n: the P_n row
        return np.where(j >= n, k_blocks, k_blocks - 1 - (n - 1 - np.minimum(j, n - 1)) // s)

    p_max = jnp.maximum(p_ext[block_of(shifted_lo)], p_ext[block_of(shifted_hi)])
    zeta = c0 * (p_max - p_min)
    err = (2.0 * c0 * sum_error(n + s + k_blocks) * 1.001) * jnp.sum(mass, axis=0)
    if noise_error is not None:          # the table normals' distance from the draws, per window of k rows
        err = err + c0 * k * float(noise_error) * (1.0 + 1e-9)
    zeta = zeta + (2.0**-44 * jnp.abs(zeta) + err[None])

    front = jnp.full((k_pad - k_blocks,) + lead, -jnp.inf, jnp.float64)
    return const_mean_block_maxima_t(tau, n, b, c_col, block), jnp.concatenate([front, zeta], axis=0)


def const_mean_block_maxima_t(tau: jax.Array, iterations: int, min_sep: int, c_col: tuple[float, ...],
                              block: int = BOUND_BLOCK) -> jax.Array:
    r"""The mean half of :func:`block_term_maxima_t`: upper bounds of the block maxima :math:`\mu_k` of
    :math:`s^m - \|c^{(i)}\|^2/2` for a constant positive column, from the participation alone (the proof is
    there, "Mean"; :mod:`mcacct.kernels.fused_bound` reads it too).

    Parameters
    ----------
    tau : jax.Array
        int32 ``(ceil(n/b), ...)``: the participation per block of ``b`` rows.
    iterations, min_sep, c_col, block
        As in :func:`block_term_maxima_t`.

    Returns
    -------
    jax.Array
        float64 ``(K_pad, ...)``, padded in front with ``-inf``.
    """
    n, b, k = int(iterations), int(min_sep), len(c_col)
    first, last, _, k_blocks, k_pad = _block_rows(n, b, block)
    lead = tau.shape[1:]
    c0 = float(c_col[0])
    # each nearby participation's largest overlap with a row's window in the block
    t = _nearby_participations(tau, first, last, n, b)         # (K, 4, ...)
    a_row = jnp.asarray(first.reshape((-1, 1) + (1,) * len(lead)), jnp.int32)
    e_row = jnp.asarray(last.reshape((-1, 1) + (1,) * len(lead)), jnp.int32)
    i_star = jnp.clip(t, a_row, e_row)
    overlap = jnp.minimum(jnp.minimum(i_star + k, n), t + k) - jnp.maximum(i_star, t)
    overlap = jnp.sum(jnp.where(t != NO_PARTICIPATION, jnp.maximum(overlap, 0), 0), axis=1)
    half = 0.5 * column_sq_norms(tuple(c_col), n)
    half_min = np.array([half[f:e + 1].min() for f, e in zip(first, last)])
    s_m = (c0 * c0) * overlap.astype(jnp.float64)
    h = jnp.asarray(half_min, jnp.float64)[(slice(None),) + (None,) * len(lead)]
    mu = (s_m - h) + ((k + 16) * 2.0**-51) * (s_m + h)
    front = jnp.full((k_pad - k_blocks,) + lead, -jnp.inf, jnp.float64)
    return jnp.concatenate([front, mu], axis=0)


def remove_loss_bound_from_draws_t(tau: jax.Array, z: jax.Array, sigmas: jax.Array, term_errors: jax.Array,
                                   iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                                   c_col: tuple[float, ...], block: int = BOUND_BLOCK,
                                   noise_error: float | None = None) -> jax.Array:
    r"""``U`` for every candidate from the draws (participation ``tau``, standard noise ``z``) of a constant column:
    :func:`block_term_maxima_t` then :func:`~mcacct.kernels.bound.remove_loss_bound_from_maxima`. The ladder's sliding
    sums are not formed, so a batch whose draws are all skipped costs the noise, one pass over it and the block
    recursion.

    Parameters
    ----------
    tau, z, noise_error
        As in :func:`block_term_maxima_t`.
    sigmas, term_errors : array_like
        As in :func:`~mcacct.kernels.bound.remove_loss_bound_from_maxima`.
    iterations, min_sep, sampling_prob, warm_start, block
        As in :func:`~mcacct.kernels.bound.remove_loss_bound_from_maxima`.
    c_col : tuple of float
        The strategy's column (:func:`supports_draws_bound`).

    Returns
    -------
    jax.Array
        float64 ``(J, ...)``: ``U`` per candidate and sample.
    """
    mu, zeta = block_term_maxima_t(tau, z, iterations, min_sep, c_col, block, noise_error)
    return remove_loss_bound_from_maxima(mu, zeta, sigmas, term_errors, iterations, min_sep, sampling_prob,
                                         warm_start, block)
