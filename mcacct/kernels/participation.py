r"""Participation draws of b-min-sep subsampling, as a renewal process (Dong & Ganesh 2026, arXiv:2602.09338,
Alg. 1 cold start, Alg. 2 warm start).

Per example, b-min-sep subsampling is a renewal process: the first participation is at ``A + G_1`` and later
ones ``b - 1 + G_k`` apart, ``G_k ~ Geometric(p)`` on ``{1, 2, ...}``; ``A = 0`` for the cold start, and for
the warm start ``A = 0`` with probability ``1 / (1 + (b - 1) p)`` (available) and otherwise
``A ~ Uniform{1..b-1}`` (blocked). This uses ``ceil(n/b)`` draws per sample instead of ``n``.

Every function takes the numbers ``iterations`` (``n``), ``min_sep`` (``b``), ``sampling_prob`` (``p``) and
``warm_start`` (all static) and imports no scheme. Uniforms are 52-bit (``jax.random.uniform`` in float64);
the mismatch with exact uniforms is bounded in :mod:`mcacct.engine.systematic`.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.rates import stationary_available_prob
from mcacct.kernels.control import rare_cond

__all__ = ["NO_PARTICIPATION", "block_participation", "geometric", "max_participations", "participation_times", "participation_mask",
           "participation_cap", "participation_blocks_t", "participation_mask_t"]


NO_PARTICIPATION = -(2 ** 30)  # "no participation in this block" (block_participation)


def geometric(key: jax.Array, p: float, shape: tuple[int, ...]) -> jax.Array:
    """Geometric(p) on {1, 2, ...} as int32 (exact inversion in float64).

    Parameters
    ----------
    key : jax.Array
        PRNG key.
    p : float
        Success probability in ``(0, 1]``; ``p >= 1`` gives ones.
    shape : tuple of int
        Shape of the draws.

    Returns
    -------
    jax.Array
        int32 of ``shape``, values in ``[1, 2^30 + 1]``.
    """
    if p >= 1.0:
        return jnp.ones(shape, jnp.int32)
    u = jax.random.uniform(key, shape, dtype=jnp.float64)
    # 1 - u lies in (0, 1]; floor(log(1-u) / log(1-p)) is Geometric on {0, 1, ...}
    g = jnp.floor(jnp.log1p(-u) / np.log1p(-p))
    return (jnp.minimum(g, 2**30) + 1).astype(jnp.int32)


def max_participations(iterations: int, min_sep: int) -> int:
    """``ceil(n / b)``: the most participations that fit into ``n`` iterations.

    Parameters
    ----------
    iterations : int
        ``n``.
    min_sep : int
        ``b``, ``>= 1``.

    Returns
    -------
    int
    """
    return -(-int(iterations) // int(min_sep))


@partial(jax.jit, static_argnames=("iterations", "min_sep", "sampling_prob", "warm_start", "num_samples", "count"))
def participation_times(key: jax.Array, iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                        num_samples: int, count: int | None = None) -> jax.Array:
    """1-based participation times of the renewal process, one row per sample.

    Parameters
    ----------
    key : jax.Array
        PRNG key.
    iterations : int
        ``n`` (static).
    min_sep : int
        ``b``, ``>= 1`` (static).
    sampling_prob : float
        ``p`` in ``(0, 1]`` (static).
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1) (static).
    num_samples : int
        Samples ``B`` (static).
    count : int or None, optional
        Participations drawn per sample (static); default ``ceil(n/b)``, all that fit.

    Returns
    -------
    jax.Array
        int32 ``(num_samples, count)``, non-decreasing along a row; entries ``> n`` (capped at ``n + 1``) are
        unused.
    """
    b, p, n = min_sep, sampling_prob, iterations
    k_max = max_participations(n, b) if count is None else count
    k_start, k_gap = jax.random.split(key)
    gaps = geometric(k_gap, p, (num_samples, k_max))
    if warm_start and b > 1:
        ka, kb = jax.random.split(k_start)
        available = jax.random.uniform(ka, (num_samples,), dtype=jnp.float64) < stationary_available_prob(p, b)
        # Uniform{1..b-1} by inversion of a 52-bit uniform: b - 2 outcome boundaries, each met by the
        # quantised uniform with probability <= 2^-51 off an exact one (mcacct.engine.systematic)
        ub = jax.random.uniform(kb, (num_samples,), dtype=jnp.float64)
        blocked_for = jnp.minimum(1 + jnp.floor(ub * (b - 1)).astype(jnp.int32), b - 1)
        offset = jnp.where(available, 0, blocked_for)
    else:
        offset = jnp.zeros((num_samples,), jnp.int32)
    steps = gaps.at[:, 1:].add(b - 1)
    times = offset[:, None] + jnp.cumsum(jnp.minimum(steps, n + 1), axis=1)
    return jnp.minimum(times, n + 1)


@partial(jax.jit, static_argnames=("iterations", "min_sep", "sampling_prob", "warm_start", "num_samples"))
def participation_mask(key: jax.Array, iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                       num_samples: int) -> jax.Array:
    """Participation vectors ``x`` of shape ``(num_samples, n)`` (bool).

    ``b = 1`` draws ``n`` Bernoulli(p) per sample directly; larger ``b`` goes through
    :func:`participation_times`.

    Parameters
    ----------
    key : jax.Array
        PRNG key.
    iterations : int
        ``n`` (static).
    min_sep : int
        ``b``, ``>= 1`` (static).
    sampling_prob : float
        ``p`` in ``(0, 1]`` (static).
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1) (static).
    num_samples : int
        Samples ``B`` (static).

    Returns
    -------
    jax.Array
        bool ``(num_samples, n)``, row-major.
    """
    n = iterations
    if min_sep == 1:
        return jax.random.uniform(key, (num_samples, n), dtype=jnp.float64) < sampling_prob
    times = participation_times(key, n, min_sep, sampling_prob, warm_start, num_samples)
    rows = jnp.arange(num_samples)[:, None]
    x = jnp.zeros((num_samples, n + 1), bool).at[rows, times - 1].set(True)
    return x[:, :n]


def participation_cap(iterations: int, min_sep: int, participation_rate: float) -> int:
    """Gaps the engine draws up front per sample.

    ``mean + 8 sqrt(mean) + 16`` participations (``mean`` the expected count ``n * participation_rate``), at most
    ``ceil(n/b)``. More are drawn only if some sample of the batch needs them.

    Parameters
    ----------
    iterations : int
        ``n``.
    min_sep : int
        ``b``, ``>= 1``.
    participation_rate : float
        Expected participations per iteration, ``>= 0``.

    Returns
    -------
    int
    """
    mean = iterations * participation_rate
    return min(max_participations(iterations, min_sep), int(math.ceil(mean + 8.0 * math.sqrt(mean) + 16.0)))


def _mask_t(times: jax.Array, n: int) -> jax.Array:
    cols = jnp.arange(times.shape[0])[None, :]
    return jnp.zeros((n + 1, times.shape[0]), bool).at[times.T - 1, cols].set(True)[:n]


def _capped_times(key, n, b, p, warm_start, num_samples, cap, finish):
    """``finish(times)`` of the participation times: the first ``cap`` drawn from one key, the rest (from an
    independent key) only when some sample's ``cap``-th time is within the horizon (a rare branch:
    :func:`~mcacct.kernels.control.rare_cond`)."""
    k_first, k_more = jax.random.split(key)
    times = participation_times(k_first, n, b, p, warm_start, num_samples, cap)

    def all_times(times, k_more):
        extra = geometric(k_more, p, (num_samples, max_participations(n, b) - cap))
        more = times[:, -1:] + jnp.cumsum(jnp.minimum(extra + (b - 1), n + 1), axis=1)
        return finish(jnp.concatenate([times, jnp.minimum(more, n + 1)], axis=1))

    return rare_cond(jnp.any(times[:, -1] <= n), all_times, lambda times, k_more: finish(times), times, k_more)


@partial(jax.jit, static_argnames=("iterations", "min_sep", "sampling_prob", "warm_start", "num_samples", "cap"))
def participation_blocks_t(key: jax.Array, iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                           num_samples: int, cap: int) -> jax.Array:
    """:func:`block_participation` of the draws behind :func:`participation_mask_t` for the same key.

    Parameters
    ----------
    key : jax.Array
        PRNG key.
    iterations : int
        ``n`` (static).
    min_sep : int
        ``b``, ``>= 1`` (static).
    sampling_prob : float
        ``p`` in ``(0, 1]`` (static).
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1) (static).
    num_samples : int
        Samples ``B`` (static).
    cap : int
        Gaps drawn up front per sample (:func:`participation_cap`; static); the rest only when needed.

    Returns
    -------
    jax.Array
        int32 ``(ceil(n/b), num_samples)``: the participation time in each block of ``b`` iterations (real,
        0-based) or ``NO_PARTICIPATION``.
    """
    n, b, k_max = iterations, min_sep, max_participations(iterations, min_sep)
    if cap >= k_max:
        return block_participation(participation_times(key, n, b, sampling_prob, warm_start, num_samples), n, b)
    return _capped_times(key, n, b, sampling_prob, warm_start, num_samples, cap,
                         lambda times: block_participation(times, n, b))


@partial(jax.jit, static_argnames=("iterations", "min_sep", "sampling_prob", "warm_start", "num_samples", "cap"))
def participation_mask_t(key: jax.Array, iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                         num_samples: int, cap: int) -> jax.Array:
    """Time-major participation vectors, shape ``(n, num_samples)`` (bool), by the renewal process.

    For every ``b`` (``b = 1`` too: ``O(n p)`` geometric gaps per sample instead of ``n`` uniforms). Draws ``cap``
    gaps per sample (:func:`participation_cap`) and the remaining ``ceil(n/b) - cap`` (from an independent key)
    only when some sample's ``cap``-th participation is still within the horizon: the law is that of
    :func:`participation_times` with all gaps drawn.

    Parameters
    ----------
    key : jax.Array
        PRNG key.
    iterations : int
        ``n`` (static).
    min_sep : int
        ``b``, ``>= 1`` (static).
    sampling_prob : float
        ``p`` in ``(0, 1]`` (static).
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1) (static).
    num_samples : int
        Samples ``B`` (static).
    cap : int
        Gaps drawn up front per sample (static).

    Returns
    -------
    jax.Array
        bool ``(n, num_samples)``.
    """
    n, k_max = iterations, max_participations(iterations, min_sep)
    if cap >= k_max:
        return _mask_t(participation_times(key, n, min_sep, sampling_prob, warm_start, num_samples), n)
    return _capped_times(key, n, min_sep, sampling_prob, warm_start, num_samples, cap, lambda t: _mask_t(t, n))


def block_participation(times: jax.Array, iterations: int, min_sep: int) -> jax.Array:
    """Per block of ``b`` iterations, the participation in it.

    Blocks are aligned at the end (``pad = nblk b - n`` dummy rows in front, as in the recursion); a block holds at
    most one participation, since consecutive ones are at least ``b`` apart.

    Parameters
    ----------
    times : jax.Array
        1-based participation times ``(B, K)``; entries ``> n`` are unused.
    iterations : int
        ``n``.
    min_sep : int
        ``b``, ``>= 1``.

    Returns
    -------
    jax.Array
        int32 ``(nblk, B)``, ``nblk = ceil(n/b)``: real 0-based times (``NO_PARTICIPATION`` if none).
    """
    n, b = iterations, min_sep
    nblk = -(-n // b)
    pad = nblk * b - n
    t0 = times - 1                                               # 0-based; >= n: unused
    q = jnp.where(t0 < n, (t0 + pad) // b, nblk)                 # unused -> dummy row nblk
    cols = jnp.broadcast_to(jnp.arange(times.shape[0])[:, None], times.shape)
    out = jnp.full((nblk + 1, times.shape[0]), NO_PARTICIPATION, jnp.int32).at[q, cols].set(t0.astype(jnp.int32))
    return out[:nblk]
