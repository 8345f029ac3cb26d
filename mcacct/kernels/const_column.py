r"""A constant column's remove bound straight from the draws (issue #39).

For a constant positive column :math:`c_i = c_0` (``i < k``) the block maxima that :mod:`mcacct.kernels.bound` needs
are bounded from the participation and the noise's prefix sums (:func:`block_term_maxima_t`), without the sliding
sums: the noise's from its running sums per block, the mean's from the participations near each block
(:func:`const_mean_block_maxima_t`). The GPU's fused pass (:mod:`mcacct.kernels.fused_bound`) reads the
mean's half from here. The proofs are in the functions and ``docs/soundness.md``. Numbers and arrays in; no scheme
imported.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.block_terms import block_rows, nearby_participations, sum_error
from mcacct.kernels.bound import BOUND_BLOCK, remove_loss_bound_from_maxima
from mcacct.kernels.participation import NO_PARTICIPATION
from mcacct.kernels.prefix import prefix_sums0
from mcacct.kernels.sliding import column_sq_norms

__all__ = ["supports_draws_bound", "block_term_maxima_t", "const_mean_block_maxima_t",
           "remove_loss_bound_from_draws_t"]


def supports_draws_bound(c_col: tuple[float, ...]) -> bool:
    """Whether :func:`block_term_maxima_t` applies to ``c_col``: a constant, positive, finite column."""
    return (len(c_col) > 0 and math.isfinite(float(c_col[0])) and float(c_col[0]) > 0.0
            and all(v == c_col[0] for v in c_col))


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
    first, last, s, k_blocks, k_pad = block_rows(n, b, block)
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
    first, last, _, k_blocks, k_pad = block_rows(n, b, block)
    lead = tau.shape[1:]
    c0 = float(c_col[0])
    # each nearby participation's largest overlap with a row's window in the block
    t = nearby_participations(tau, first, last, n, b)         # (K, 4, ...)
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
