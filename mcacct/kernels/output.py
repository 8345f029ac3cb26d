r"""Mechanism outputs under the dominating pair: ``y = C x + sigma z`` (``P``, the example present) and
``y = sigma z`` (``Q``, absent), ``z ~ N(0, I)`` (Dong & Ganesh 2026, arXiv:2602.09338, §5).

:func:`gaussian_output` is the one place where every sampler of mcacct combines a mean with noise;
:func:`standardised_draws_t` returns the common random numbers ``(C x, z)`` of a block for b-min-sep
participation, from which ``m + sigma_j z`` and ``sigma_j z`` are the outputs for every noise multiplier of a
ladder (the same key split as :func:`gaussian_output`, so the draws coincide exactly); :func:`standardised_sums_t`
returns their sliding sums, which is all a ladder needs, and :func:`ladder_losses_from_draws_t` the ladder's losses
from ``(tau, z)``, forming the sums only where the remove skip leaves a draw (:func:`ladder_noise_lanes` says when
it reads the noise lane-major: the same draws in the layout its screen reads). Plain numbers in, arrays out; no
scheme is imported.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mcacct.kernels.block_terms import mean_block_maxima_t, noise_block_maxima_t
from mcacct.kernels.const_column import remove_loss_bound_from_draws_t, supports_draws_bound
from mcacct.kernels.bound import BOUND_BLOCK, block_layout, block_maxima_t, remove_loss_bound_from_maxima
from mcacct.kernels.fused_bound import fused_bound_applies, fused_bound_tile, fused_remove_bound_from_key
from mcacct.kernels.normal import (columns_supported, standard_normal, standard_normal_columns,
                                  standard_normal_lanes)
from mcacct.kernels.normal_table import (normal_table, table_normals_from_bits, table_normals_lanes,
                                         table_screen_applies)
from mcacct.kernels.participation import participation_blocks_t, participation_cap
from mcacct.kernels.recursion import ladder_losses_from_sums_t
from mcacct.kernels.shortcuts import remove_losses_with_skip
from mcacct.kernels.mean_shift import mean_shift_from_blocks_t, mean_sliding_from_blocks_t
from mcacct.kernels.sliding import choose_dot_method, sliding_dot_t

__all__ = ["gaussian_output", "standardised_blocks_t", "standardised_draws_t", "standardised_sums_t", "ladder_sums_t",
           "ladder_noise_lanes", "ladder_losses_from_draws_t", "ladder_fused_bound", "ladder_table_screen",
           "ladder_by_key", "ladder_losses_of_block_t", "ladder_losses_from_key_t"]


def gaussian_output(key: jax.Array, shape: tuple[int, ...], sigma, dtype, positive: bool, mean_of_key) -> jax.Array:
    """``y = z`` (``Q``) or ``y = m + z`` (``P``) with ``z ~ N(0, sigma^2)`` of ``shape``.

    The key is split into a participation key, passed to ``mean_of_key`` (which returns the mean ``m = C x``), and
    a noise key. Every sampler of mcacct draws its outputs through this one function.

    Parameters
    ----------
    key : jax.Array
        PRNG key of the draw.
    shape : tuple of int
        Shape of the noise.
    sigma : float or jax.Array
        Noise multiplier, ``> 0``.
    dtype : dtype
        dtype of the noise.
    positive : bool
        ``True``: ``y ~ P`` (the example present, the mean added); ``False``: ``y ~ Q``.
    mean_of_key : callable
        ``mean_of_key(key) -> m``, the mean ``C x``, broadcastable to ``shape``; called only if ``positive``.

    Returns
    -------
    jax.Array
        The outputs ``y``, shape ``shape``.
    """
    kx, kz = jax.random.split(key)
    z = standard_normal(kz, shape, dtype) * jnp.asarray(sigma, dtype)
    return z + mean_of_key(kx) if positive else z


def standardised_blocks_t(key: jax.Array, iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                          participation_rate: float, num_samples: int, dtype=jnp.float64,
                          lanes: bool = False) -> tuple[jax.Array, jax.Array]:
    """``(tau, z)``: the per-block participation (int32 ``(ceil(n/b), B)``) and the standard noise (time-major
    ``(n, B)``, ``dtype``; its transpose, the same bits, with ``lanes``: :func:`~mcacct.kernels.normal.
    standard_normal_lanes`) of one block, split from ``key`` as in :func:`gaussian_output`; the arguments as in
    :func:`standardised_draws_t`."""
    kx, kz = jax.random.split(key)
    shape = (iterations, num_samples)
    z = standard_normal_lanes(kz, shape, dtype) if lanes else standard_normal(kz, shape, dtype)
    cap = participation_cap(iterations, min_sep, participation_rate)
    return participation_blocks_t(kx, iterations, min_sep, sampling_prob, warm_start, num_samples, cap), z


def standardised_draws_t(key: jax.Array, iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                         participation_rate: float, c_col: tuple[float, ...], num_samples: int,
                         dtype=jnp.float64) -> tuple[jax.Array, jax.Array]:
    """The common random numbers of one block of b-min-sep outputs, time-major ``(n, num_samples)``.

    The output mean ``m = C x`` and the standard normal noise ``z``, split from ``key`` as in
    :func:`gaussian_output`, so ``m + sigma z`` (remove) and ``sigma z`` (add) are exactly the time-major outputs
    of the same key for any ``sigma``.

    Parameters
    ----------
    key : jax.Array
        PRNG key of the block.
    iterations : int
        ``n``.
    min_sep : int
        ``b``, ``>= len(c_col)``.
    sampling_prob : float
        ``p`` in ``(0, 1]``.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).
    participation_rate : float
        Expected participations per iteration (how many gaps are drawn up front:
        :func:`~mcacct.kernels.participation.participation_cap`).
    c_col : tuple of float
        The strategy's column ``(c_0, ..., c_{k-1})``.
    num_samples : int
        Samples ``B`` in the block.
    dtype : dtype, optional
        dtype of both arrays (default float64).

    Returns
    -------
    m : jax.Array
        ``(n, B)``: the output mean ``C x``.
    z : jax.Array
        ``(n, B)``: the standard normal noise.
    """
    tau, z = standardised_blocks_t(key, iterations, min_sep, sampling_prob, warm_start, participation_rate,
                                   num_samples, dtype)
    return mean_shift_from_blocks_t(tau, iterations, min_sep, c_col, dtype), z


def standardised_sums_t(key: jax.Array, iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                        participation_rate: float, c_col: tuple[float, ...], num_samples: int, dtype=jnp.float64,
                        dot_method: str = "auto") -> tuple[jax.Array, jax.Array]:
    r"""The sliding sums ``(s^m, s^z)`` of :func:`standardised_draws_t`'s ``(m, z)`` for the same key, time-major.

    ``s^m`` from the participation by :func:`~mcacct.kernels.mean_shift.mean_sliding_from_blocks_t` (table reads),
    ``s^z`` by :func:`~mcacct.kernels.sliding.sliding_dot_t` with ``dot_method``.

    Parameters
    ----------
    key : jax.Array
        PRNG key of the block.
    iterations : int
        ``n``.
    min_sep : int
        ``b``, ``>= len(c_col)``.
    sampling_prob : float
        ``p`` in ``(0, 1]``.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).
    participation_rate : float
        Expected participations per iteration (how many gaps are drawn up front:
        :func:`~mcacct.kernels.participation.participation_cap`).
    c_col : tuple of float
        The strategy's column ``(c_0, ..., c_{k-1})``.
    num_samples : int
        Samples ``B`` in the block.
    dtype : dtype, optional
        dtype of the sums (default float64; the noise is drawn in float64).
    dot_method : str, optional
        How ``s^z`` is computed (default ``"auto"``).

    Returns
    -------
    s_m : jax.Array
        ``(n, B)``: :math:`\langle c^{(i)}, m \rangle`.
    s_z : jax.Array
        ``(n, B)``: :math:`\langle c^{(i)}, z \rangle`.
    """
    tau, z = standardised_blocks_t(key, iterations, min_sep, sampling_prob, warm_start, participation_rate,
                                   num_samples, jnp.float64)
    return ladder_sums_t(tau, z, iterations, min_sep, c_col, dtype, dot_method)


def ladder_sums_t(tau: jax.Array, z: jax.Array, iterations: int, min_sep: int, c_col: tuple[float, ...], dtype,
                  dot_method: str = "auto") -> tuple[jax.Array, jax.Array]:
    r"""``(s^m, s^z)`` in ``dtype`` from the per-block participation ``tau`` and the standard noise ``z``.

    What every shared-draw ladder needs (:func:`mcacct.kernels.recursion.ladder_losses_from_sums_t`).

    Parameters
    ----------
    tau : jax.Array
        int32 ``(ceil(n/b), B)``: the participation per block
        (:func:`~mcacct.kernels.participation.block_participation`).
    z : jax.Array
        Standard normal noise, time-major ``(n, B)``.
    iterations : int
        ``n``.
    min_sep : int
        ``b``, ``>= len(c_col)``.
    c_col : tuple of float
        The strategy's column.
    dtype : dtype
        dtype of the sums.
    dot_method : str, optional
        How ``s^z`` is computed (:func:`~mcacct.kernels.sliding.sliding_dot_t`; default ``"auto"``).

    Returns
    -------
    s_m : jax.Array
        ``(n, B)``: :math:`\langle c^{(i)}, C x \rangle`
        (:func:`~mcacct.kernels.mean_shift.mean_sliding_from_blocks_t`).
    s_z : jax.Array
        ``(n, B)``: :math:`\langle c^{(i)}, z \rangle`.
    """
    return (mean_sliding_from_blocks_t(tau, iterations, min_sep, c_col, dtype),
            sliding_dot_t(z.astype(dtype), c_col, dot_method))


def ladder_noise_lanes(c_col: tuple[float, ...], dtype, dot_method: str = "auto", add_bound: float | None = None,
                       remove_skip=None) -> bool:
    """Whether :func:`ladder_losses_from_draws_t` reads the noise lane-major: with both skips on, in float64, for a
    column whose screen is the float32 transforms (:func:`~mcacct.kernels.block_terms.noise_block_maxima_t`). A
    draws producer then draws it so (:func:`~mcacct.kernels.normal.standard_normal_lanes`: the same bits); the exact
    path transposes only the batch it settles.

    Parameters
    ----------
    c_col, dtype, dot_method, add_bound, remove_skip
        As in :func:`ladder_losses_from_draws_t`.

    Returns
    -------
    bool
    """
    return (_skips_in_float64(dtype, add_bound, remove_skip) and not supports_draws_bound(c_col)
            and choose_dot_method(c_col, dot_method) == "fft")


def _skips_in_float64(dtype, add_bound: float | None, remove_skip) -> bool:
    """Both skips on and a float64 ladder: what every cheaper path of the ladder needs."""
    return add_bound is not None and remove_skip is not None and jnp.dtype(dtype) == jnp.float64


def ladder_losses_from_draws_t(tau: jax.Array, z: jax.Array, iterations: int, sigmas: jax.Array, min_sep: int,
                               sampling_prob: float, warm_start: bool, c_col: tuple[float, ...], dtype,
                               dot_method: str = "auto", recursion: str = "auto", add_bound: float | None = None,
                               remove_skip=None, lanes: bool = False) -> jax.Array:
    r"""``(J, 2, B)`` ladder losses from the draws: :func:`ladder_sums_t` then
    :func:`~mcacct.kernels.recursion.ladder_losses_from_sums_t`; with both skips on (``add_bound`` and
    ``remove_skip``, float64), the sliding sums only for a batch in which some draw is not skipped (every computed
    loss the same bits, a skipped draw's bound another valid ``U``).

    There the remove bound ``U`` comes from block maxima of the terms bounded without the exact path's sums: for a
    constant column from the draws' prefix sums (:func:`~mcacct.kernels.const_column.
    remove_loss_bound_from_draws_t`), for any other from a table of the columns' overlaps
    (:func:`~mcacct.kernels.block_terms.mean_block_maxima_t`) and float32 sums of the noise with their certified
    error (:func:`~mcacct.kernels.block_terms.noise_block_maxima_t`; short columns: the float64 sums). A draw whose
    ``U`` is at most every candidate's threshold keeps ``U``; a few that do not are settled on a narrower batch
    (:func:`~mcacct.kernels.shortcuts.settle_remove_losses`), and otherwise the batch's sums and exact recursions run
    as without the skip and those draws take their exact losses. Every add loss is ``add_bound``.

    Parameters
    ----------
    tau, z : jax.Array
        The participation per block of ``b`` rows and the standard noise, time-major ``(n, B)``
        (:func:`standardised_blocks_t`), or lane-major ``(B, n)`` with ``lanes``.
    iterations : int
        ``n``.
    sigmas : array_like
        ``(J,)`` noise multipliers.
    min_sep, sampling_prob, warm_start, c_col, recursion, add_bound, remove_skip
        As in :func:`~mcacct.kernels.recursion.ladder_losses_from_sums_t`.
    dtype, dot_method
        As in :func:`ladder_sums_t`.
    lanes : bool, optional
        Whether ``z`` is lane-major (default ``False``; :func:`ladder_noise_lanes` says when it pays). Every loss is
        the same bits either way; a skipped draw's ``U`` may move in its last bits (the norm's summation order).

    Returns
    -------
    jax.Array
        ``(J, 2, B)``: ``[:, 0]`` remove, ``[:, 1]`` add losses.
    """
    direct = _skips_in_float64(dtype, add_bound, remove_skip) and z.ndim == 2 and z.dtype == jnp.float64
    if lanes and not (direct and ladder_noise_lanes(c_col, dtype, dot_method, add_bound, remove_skip)):
        z, lanes = z.T, False              # only the float32 screen reads the lanes; elsewhere the time-major draws
    if not direct:
        s_m, s_z = ladder_sums_t(tau, z, iterations, min_sep, c_col, dtype, dot_method)
        return ladder_losses_from_sums_t(s_m, s_z, sigmas, min_sep, sampling_prob, warm_start, c_col, recursion,
                                         add_bound, remove_skip)
    sigmas = jnp.asarray(sigmas)
    n, b, p = int(iterations), int(min_sep), float(sampling_prob)
    if supports_draws_bound(c_col):      # a constant column: both block maxima from the draws' prefix sums
        u = remove_loss_bound_from_draws_t(tau, z, sigmas, remove_skip.term_errors, n, b, p, warm_start, c_col)
    else:    # the mean's from a table; the noise's from float32 FFT sums and their error, or short sums as computed
        method = choose_dot_method(c_col, dot_method)
        s, _, k_pad, _, _ = block_layout(n, b, BOUND_BLOCK)
        zeta = (noise_block_maxima_t(z, n, b, c_col, lanes=lanes) if method == "fft"
                else block_maxima_t(sliding_dot_t(z, c_col, method), s, k_pad))
        u = remove_loss_bound_from_maxima(mean_block_maxima_t(tau, n, b, c_col), zeta, sigmas,
                                          remove_skip.term_errors, n, b, p, warm_start)

    def exact(tau, z, sigmas):
        return _exact_remove(tau, z.T if lanes else z, sigmas, n, b, p, warm_start, c_col, dtype, dot_method,
                             recursion, add_bound)

    rem = remove_losses_with_skip(u, remove_skip, exact, (tau, z), (sigmas,), axes=(1, 0 if lanes else 1))
    return jnp.stack([rem, jnp.full_like(rem, add_bound)], axis=1)


def _exact_remove(tau, z, sigmas, n, b, p, warm_start, c_col, dtype, dot_method, recursion, add_bound):
    """The remove losses of the full computation (the sums, then every candidate's recursion): what a draw that
    the skip does not let go takes."""
    s_m, s_z = ladder_sums_t(tau, z, n, b, c_col, dtype, dot_method)
    return ladder_losses_from_sums_t(s_m, s_z, sigmas, b, p, warm_start, c_col, recursion, add_bound)[:, 0]


def ladder_fused_bound(iterations: int, min_sep: int, sampling_prob: float, c_col: tuple[float, ...], dtype,
                       add_bound: float | None, remove_skip, width: int) -> bool:
    """Whether a ladder of ``width`` draws takes :func:`ladder_losses_from_key_t`: both skips on, float64, and
    :func:`~mcacct.kernels.fused_bound.fused_bound_applies` (switched on for the target platform and served)."""
    return (_skips_in_float64(dtype, add_bound, remove_skip)
            and fused_bound_applies(iterations, min_sep, sampling_prob, tuple(c_col), width))


def ladder_table_screen(iterations: int, c_col: tuple[float, ...], dtype, dot_method: str, add_bound: float | None,
                        remove_skip, width: int) -> bool:
    """Whether a ladder of ``width`` draws screens table normals (:mod:`mcacct.kernels.normal_table`) by key: where
    :func:`ladder_noise_lanes` would read the float64 noise lane-major, or for a constant column with both skips in
    float64 (its prefix sums), and :func:`~mcacct.kernels.normal_table.table_screen_applies` (switched on for the
    target platform)."""
    return (_skips_in_float64(dtype, add_bound, remove_skip)
            and (supports_draws_bound(c_col) or choose_dot_method(c_col, dot_method) == "fft")
            and table_screen_applies(iterations, width))


def ladder_by_key(key: jax.Array, iterations: int, min_sep: int, sampling_prob: float, c_col: tuple[float, ...],
                  dtype, dot_method: str, add_bound: float | None, remove_skip, width: int) -> bool:
    """Whether a ladder of ``width`` draws of ``key`` takes :func:`ladder_losses_from_key_t` (the noise drawn by the
    bound, and by column for the draws it does not let go): ``key`` redraws columns
    (:func:`~mcacct.kernels.normal.columns_supported`), and :func:`ladder_fused_bound` or
    :func:`ladder_table_screen`."""
    return columns_supported(key) and (
        ladder_fused_bound(iterations, min_sep, sampling_prob, c_col, dtype, add_bound, remove_skip, width)
        or ladder_table_screen(iterations, c_col, dtype, dot_method, add_bound, remove_skip, width))


def ladder_losses_of_block_t(key: jax.Array, iterations: int, sigmas: jax.Array, min_sep: int, sampling_prob: float,
                             warm_start: bool, participation_rate: float, c_col: tuple[float, ...], num_samples: int,
                             dtype, dot_method: str = "auto", recursion: str = "auto",
                             add_bound: float | None = None, remove_skip=None) -> jax.Array:
    """``(J, 2, B)`` ladder losses of the b-min-sep draws of ``key`` (:func:`standardised_blocks_t`'s): by
    :func:`ladder_losses_from_key_t` where :func:`ladder_by_key` says so, else
    :func:`ladder_losses_from_draws_t` on the drawn noise (lane-major where :func:`ladder_noise_lanes` says so). The
    arguments as theirs; ``participation_rate`` as :func:`standardised_blocks_t`'s."""
    n, b, p = int(iterations), int(min_sep), float(sampling_prob)
    if ladder_by_key(key, n, b, p, c_col, dtype, dot_method, add_bound, remove_skip, num_samples):
        k_x, k_z = jax.random.split(key)
        tau = participation_blocks_t(k_x, n, b, p, warm_start, num_samples, participation_cap(n, b, participation_rate))
        return ladder_losses_from_key_t(tau, k_z, n, sigmas, b, p, warm_start, c_col, dtype, dot_method, recursion,
                                        add_bound, remove_skip)
    lanes = ladder_noise_lanes(c_col, dtype, dot_method, add_bound, remove_skip)
    tau, z = standardised_blocks_t(key, n, b, p, warm_start, participation_rate, num_samples, jnp.float64, lanes)
    return ladder_losses_from_draws_t(tau, z, n, sigmas, b, p, warm_start, c_col, dtype, dot_method, recursion,
                                      add_bound, remove_skip, lanes)


def ladder_losses_from_key_t(tau: jax.Array, noise_key: jax.Array, iterations: int, sigmas: jax.Array, min_sep: int,
                             sampling_prob: float, warm_start: bool, c_col: tuple[float, ...], dtype,
                             dot_method: str = "auto", recursion: str = "auto", add_bound: float | None = None,
                             remove_skip=None) -> jax.Array:
    r"""``(J, 2, B)`` ladder losses of :func:`ladder_losses_from_draws_t` with both skips on, the float64 noise drawn
    only for the draws the skip does not let go: ``U`` from the fused kernel for a constant column where it applies
    (:func:`~mcacct.kernels.fused_bound.fused_remove_bound`, which draws the noise by counter), else from table
    normals within ``alpha`` of the draws (:func:`ladder_table_screen`): a constant column's prefix sums of them
    (:func:`~mcacct.kernels.const_column.remove_loss_bound_from_draws_t`), any other column's float32 screen
    (:func:`~mcacct.kernels.normal_table.table_normals_lanes`); for a draw it does not let go, the same settling as
    :func:`ladder_losses_from_draws_t` on the noise redrawn column by column
    (:func:`~mcacct.kernels.normal.standard_normal_columns`: the bits of :func:`standardised_blocks_t`'s noise). So
    every loss that is computed is the same bits, except where a CPU with FMA instructions lets XLA contract the
    sampler's multiply-adds otherwise in this program (a redrawn normal a few ulps off, each loss still within
    ``eta``); a skipped draw's ``U`` is another valid bound (docs/soundness.md, "Terms and bound in one pass" and
    "Table normals for the screen").

    Parameters
    ----------
    tau : jax.Array
        int32 ``(ceil(n/b), B)``: the participation per block of ``b`` rows.
    noise_key : jax.Array
        The block's noise key (typed, threefry): the key :func:`standardised_blocks_t` draws ``z`` from.
    iterations, sigmas, min_sep, sampling_prob, warm_start, c_col, dtype, dot_method, recursion
        As in :func:`ladder_losses_from_draws_t`; ``c_col`` constant and positive
        (:func:`~mcacct.kernels.const_column.supports_draws_bound`), or screened by float32 transforms
        (:func:`ladder_noise_lanes`).
    add_bound, remove_skip
        Both skips (required).

    Returns
    -------
    jax.Array
        ``(J, 2, B)``: ``[:, 0]`` remove, ``[:, 1]`` add losses.

    Raises
    ------
    ValueError
        If a skip is missing or ``dtype`` is not float64.
    """
    if not _skips_in_float64(dtype, add_bound, remove_skip):
        raise ValueError("ladder_losses_from_key_t needs both skips (add_bound and remove_skip) and float64")
    sigmas = jnp.asarray(sigmas)
    n, b, p, width = int(iterations), int(min_sep), float(sampling_prob), tau.shape[1]
    if ladder_fused_bound(n, b, p, c_col, dtype, add_bound, remove_skip, width):   # a GPU thread per draw
        tile = fused_bound_tile(width)
        u = fused_remove_bound_from_key(jax.random.key_data(noise_key), tau, sigmas, remove_skip.term_errors, n, b, p,
                                        warm_start, tuple(c_col), width, tile, num_warps=max(1, tile // 32))
    elif supports_draws_bound(c_col):       # the prefix sums of table normals within alpha of the draws
        z_hat = table_normals_from_bits(jax.random.bits(noise_key, (n, width), jnp.uint64))
        u = remove_loss_bound_from_draws_t(tau, z_hat, sigmas, remove_skip.term_errors, n, b, p, warm_start, c_col,
                                           noise_error=normal_table()[1])
    else:                                   # the float32 screen of table normals within alpha of the draws
        zeta = noise_block_maxima_t(table_normals_lanes(noise_key, (n, width)), n, b, c_col, lanes=True,
                                    noise_error=normal_table()[1])
        u = remove_loss_bound_from_maxima(mean_block_maxima_t(tau, n, b, c_col), zeta, sigmas,
                                          remove_skip.term_errors, n, b, p, warm_start)

    def exact(tau, cols, sigmas, noise_key):
        z = standard_normal_columns(noise_key, (n, width), cols, jnp.float64)
        return _exact_remove(tau, z, sigmas, n, b, p, warm_start, c_col, dtype, dot_method, recursion, add_bound)

    cols = jnp.arange(width, dtype=jnp.int32)
    rem = remove_losses_with_skip(u, remove_skip, exact, (tau, cols), (sigmas, noise_key), axes=(1, 0))
    return jnp.stack([rem, jnp.full_like(rem, add_bound)], axis=1)
