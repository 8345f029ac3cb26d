r"""Samplers of the mechanism output ``y`` under the dominating pair.

Under ``P`` (the example is present) ``y = C x + z`` with ``x`` the example's b-min-sep participation
vector; under ``Q`` (absent) ``y = z``; ``z ~ N(0, sigma^2 I)``. Arrays are batch-first,
``(num_samples, iterations)``. All functions are pure, take an explicit ``jax.random`` key and are jitted
with the scheme and strategy as static arguments.

Participation times are drawn as a renewal process (see :mod:`mcacct.schemes`): the first participation
is at ``A + G_1`` and later ones ``b - 1 + G_k`` apart, ``G_k ~ Geometric(p)`` on ``{1, 2, ...}``. This
uses ``ceil(n/b)`` draws per sample instead of ``n`` and is exactly Alg. 1 (cold) / Alg. 2 (warm).
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.validate import check_int, check_sigma
from mcacct.normal import standard_normal
from mcacct.schemes import BMinSep
from mcacct.strategy import BandedToeplitz

__all__ = ["sample_participation", "sample_y", "sample_y_t", "mean_shift", "gaussian_output", "standardised_draws_t"]


def gaussian_output(key: jax.Array, shape: tuple[int, ...], sigma, dtype, positive: bool, mean_of_key) -> jax.Array:
    """``y = z`` (``Q``) or ``y = m + z`` (``P``) with ``z ~ N(0, sigma^2)`` of ``shape``: the key is split
    into a participation key, passed to ``mean_of_key`` (which returns the mean ``m = C x``), and a noise key.
    Every sampler of mcacct draws its outputs through this one function."""
    kx, kz = jax.random.split(key)
    z = standard_normal(kz, shape, dtype) * jnp.asarray(sigma, dtype)
    return z + mean_of_key(kx) if positive else z


def standardised_draws_t(key: jax.Array, scheme: BMinSep, strategy: BandedToeplitz, num_samples: int,
                         dtype=jnp.float64) -> tuple[jax.Array, jax.Array]:
    """The common random numbers of one block, time-major ``(n, num_samples)``: the output mean
    ``m = C x`` and the standard normal noise ``z``, from the same key split as :func:`gaussian_output`, so
    ``m + sigma z`` (remove) and ``sigma z`` (add) are exactly the outputs :func:`sample_y_t` draws for any
    ``sigma``: one set of draws serves both directions and every noise multiplier of a ladder."""
    kx, kz = jax.random.split(key)
    z = standard_normal(kz, (scheme.iterations, num_samples), dtype)
    m = _mean_shift_t(sample_participation_t(kx, scheme, num_samples), strategy.c_col, dtype)
    return m, z


def _geometric(key: jax.Array, p: float, shape: tuple[int, ...]) -> jax.Array:
    """Geometric(p) on {1, 2, ...} as int32 (exact inversion in float64)."""
    if p >= 1.0:
        return jnp.ones(shape, jnp.int32)
    u = jax.random.uniform(key, shape, dtype=jnp.float64)
    # 1 - u lies in (0, 1]; floor(log(1-u) / log(1-p)) is Geometric on {0, 1, ...}
    g = jnp.floor(jnp.log1p(-u) / np.log1p(-p))
    return (jnp.minimum(g, 2**30) + 1).astype(jnp.int32)


@partial(jax.jit, static_argnames=("scheme", "num_samples", "count"))
def participation_times(key: jax.Array, scheme: BMinSep, num_samples: int, count: int | None = None) -> jax.Array:
    """1-based participation times, shape ``(num_samples, count)`` (default ``count = ceil(n/b)``, all that
    fit); entries ``> n`` are unused."""
    b, p, n = scheme.min_sep, scheme.sampling_prob, scheme.iterations
    k_max = scheme.max_participations if count is None else count
    k_start, k_gap = jax.random.split(key)
    gaps = _geometric(k_gap, p, (num_samples, k_max))
    if scheme.warm_start and b > 1:
        ka, kb = jax.random.split(k_start)
        available = jax.random.uniform(ka, (num_samples,), dtype=jnp.float64) < 1.0 / (1.0 + (b - 1) * p)
        # Uniform{1..b-1} by inversion of a 52-bit uniform: b - 2 outcome boundaries, each met by the
        # quantised uniform with probability <= 2^-51 off an exact one (mcacct.systematic)
        ub = jax.random.uniform(kb, (num_samples,), dtype=jnp.float64)
        blocked_for = jnp.minimum(1 + jnp.floor(ub * (b - 1)).astype(jnp.int32), b - 1)
        offset = jnp.where(available, 0, blocked_for)
    else:
        offset = jnp.zeros((num_samples,), jnp.int32)
    steps = gaps.at[:, 1:].add(b - 1)
    times = offset[:, None] + jnp.cumsum(jnp.minimum(steps, n + 1), axis=1)
    return jnp.minimum(times, n + 1)


@partial(jax.jit, static_argnames=("scheme", "num_samples"))
def sample_participation(key: jax.Array, scheme: BMinSep, num_samples: int) -> jax.Array:
    """Participation vectors ``x`` of shape ``(num_samples, n)`` (bool) under b-min-sep subsampling."""
    n = scheme.iterations
    if scheme.min_sep == 1:
        return jax.random.uniform(key, (num_samples, n), dtype=jnp.float64) < scheme.sampling_prob
    times = participation_times(key, scheme, num_samples)
    rows = jnp.arange(num_samples)[:, None]
    x = jnp.zeros((num_samples, n + 1), bool).at[rows, times - 1].set(True)
    return x[:, :n]


def mean_shift(x: jax.Array, c_col: tuple[float, ...], dtype=jnp.float64) -> jax.Array:
    r"""``C x`` for min-sep-separated ``x`` of shape ``(..., n)``: ``(Cx)_j = c_{j - t}`` where ``t`` is the
    last participation at or before ``j`` (at most one participation is within ``len(c_col)`` of ``j``)."""
    n = x.shape[-1]
    idx = jnp.arange(n, dtype=jnp.int32)
    last = jax.lax.cummax(jnp.where(x, idx, -(2**30)), axis=x.ndim - 1)
    lag = idx - last
    c = jnp.asarray(c_col, dtype)
    return jnp.where(lag < len(c_col), c[jnp.clip(lag, 0, len(c_col) - 1)], jnp.zeros((), dtype))


def sample_y(key: jax.Array, scheme: BMinSep, strategy: BandedToeplitz, sigma: float | jax.Array,
             num_samples: int, positive: bool = True, dtype=jnp.float64) -> jax.Array:
    """Draw ``num_samples`` outputs ``y`` of shape ``(num_samples, n)`` under ``P`` or ``Q``.

    Parameters
    ----------
    key: a ``jax.random`` key; the same key gives the same samples.
    scheme: the sampling scheme (static).
    strategy: the banded Toeplitz strategy ``C`` (static); needs ``len(c_col) <= min_sep``.
    sigma: noise standard deviation (noise multiplier).
    positive: ``True`` samples ``P`` (``y = Cx + z``), ``False`` samples ``Q`` (``y = z``).
    """
    check_sigma("sigma", sigma)
    check_int("num_samples", num_samples, low=1)
    strategy.check_min_sep(scheme.min_sep)
    return _sample_y(key, scheme, strategy, sigma, num_samples, bool(positive), dtype)


@partial(jax.jit, static_argnames=("scheme", "strategy", "num_samples", "positive", "dtype"))
def _sample_y(key, scheme, strategy, sigma, num_samples, positive, dtype):
    return gaussian_output(key, (num_samples, scheme.iterations), sigma, dtype, positive,
                           lambda k: mean_shift(sample_participation(k, scheme, num_samples), strategy.c_col, dtype))


def participation_cap(scheme: BMinSep) -> int:
    """Gaps the engine draws up front per sample: ``mean + 8 sqrt(mean) + 16`` participations (``mean`` the
    expected count), at most ``ceil(n/b)``. More are drawn only if some sample of the batch needs them."""
    mean = scheme.iterations * scheme.participation_rate
    return min(scheme.max_participations, int(math.ceil(mean + 8.0 * math.sqrt(mean) + 16.0)))


def _mask_t(times: jax.Array, n: int) -> jax.Array:
    cols = jnp.arange(times.shape[0])[None, :]
    return jnp.zeros((n + 1, times.shape[0]), bool).at[times.T - 1, cols].set(True)[:n]


def _participation_t(key: jax.Array, scheme: BMinSep, num_samples: int, cap: int) -> jax.Array:
    """Time-major participation vectors, drawing ``cap`` gaps per sample and the remaining
    ``ceil(n/b) - cap`` (from an independent key) only when some sample's ``cap``-th participation is
    still within the horizon: the law is that of :func:`participation_times` with all gaps drawn."""
    b, p, n = scheme.min_sep, scheme.sampling_prob, scheme.iterations
    k_max = scheme.max_participations
    if cap >= k_max:
        return _mask_t(participation_times(key, scheme, num_samples), n)
    k_first, k_more = jax.random.split(key)
    times = participation_times(k_first, scheme, num_samples, cap)

    def with_more_gaps():
        extra = _geometric(k_more, p, (num_samples, k_max - cap))
        more = times[:, -1:] + jnp.cumsum(jnp.minimum(extra + (b - 1), n + 1), axis=1)
        return _mask_t(jnp.concatenate([times, jnp.minimum(more, n + 1)], axis=1), n)

    return jax.lax.cond(jnp.any(times[:, -1] <= n), with_more_gaps, lambda: _mask_t(times, n))


@partial(jax.jit, static_argnames=("scheme", "num_samples"))
def sample_participation_t(key: jax.Array, scheme: BMinSep, num_samples: int) -> jax.Array:
    """Time-major participation vectors, shape ``(n, num_samples)`` (bool), by the renewal process for every
    ``b`` (``b = 1`` too: ``O(n p)`` geometric gaps per sample instead of ``n`` uniforms)."""
    return _participation_t(key, scheme, num_samples, participation_cap(scheme))


def _shift_down(a: jax.Array, s: int, fill) -> jax.Array:
    """``a`` moved ``s`` rows down along axis 0 (row ``j`` gets row ``j - s``), ``fill`` above."""
    pad = jnp.full((s,) + a.shape[1:], fill, a.dtype)
    return jnp.concatenate([pad, a[:a.shape[0] - s]], axis=0)


def _mean_shift_t(x_t: jax.Array, c_col: tuple[float, ...], dtype) -> jax.Array:
    """:func:`mean_shift` along axis 0. The last participation within the column's reach is found by
    ``ceil(log2 len(c_col))`` doubling steps of a running max (a window of ``2^k >= len(c_col)`` rows: an
    older participation in it has lag ``>= len(c_col)`` and contributes nothing), not a full ``cummax``."""
    n = x_t.shape[0]
    L = len(c_col)
    if L == 1:
        return jnp.where(x_t, jnp.asarray(c_col[0], dtype), jnp.zeros((), dtype))
    idx = jnp.arange(n, dtype=jnp.int32).reshape((n,) + (1,) * (x_t.ndim - 1))
    last = jnp.where(x_t, idx, -(2**30))
    s = 1
    while s < L and s < n:
        last = jnp.maximum(last, _shift_down(last, s, -(2**30)))
        s *= 2
    lag = idx - last
    c = jnp.asarray(c_col, dtype)
    return jnp.where(lag < L, c[jnp.clip(lag, 0, L - 1)], jnp.zeros((), dtype))


def sample_y_t(key: jax.Array, scheme: BMinSep, strategy: BandedToeplitz, sigma: float | jax.Array,
               num_samples: int, positive: bool = True, dtype=jnp.float64) -> jax.Array:
    """Like :func:`sample_y` but time-major, shape ``(n, num_samples)`` (the engine's layout; for the same
    key the draws differ from :func:`sample_y`'s, the law is the same)."""
    check_sigma("sigma", sigma)
    check_int("num_samples", num_samples, low=1)
    strategy.check_min_sep(scheme.min_sep)
    return _sample_y_t(key, scheme, strategy, sigma, num_samples, bool(positive), dtype)


@partial(jax.jit, static_argnames=("scheme", "strategy", "num_samples", "positive", "dtype"))
def _sample_y_t(key, scheme, strategy, sigma, num_samples, positive, dtype):
    return gaussian_output(key, (scheme.iterations, num_samples), sigma, dtype, positive,
                           lambda k: _mean_shift_t(sample_participation_t(k, scheme, num_samples), strategy.c_col, dtype))
