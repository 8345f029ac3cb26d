r"""The warm start's virtual history of truncated b-min-sep's counts (Dong & Ganesh 2026, arXiv:2602.09338,
App. D, Alg. 2): how many of the ``N = M - 1`` other examples are blocked, and since which round, before round 1.

In stationarity an example is available with probability ``1 / (1 + (b-1) p)`` and blocked since each of the
``b - 1`` previous rounds with probability ``q = p / (1 + (b-1) p)``, independently across examples, so the counts
of the virtual rounds ``0, -1, ..., 2-b`` are multinomial (:func:`virtual_history`), drawn by splitting a binomial
level by level with exact alias tables of ``Binom(., 1/2)`` (:func:`virtual_plan`, the tables of
:mod:`mcacct.kernels.alias`). Used by :mod:`mcacct.kernels.counts` and :mod:`mcacct.kernels.screen`. Plain numbers
and arrays; no scheme is imported.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.alias import BAND_SDS, bin_tables, u64
from mcacct.kernels.control import rare_cond

__all__ = ["HalfTables", "virtual_plan", "virtual_history"]


class HalfTables(NamedTuple):
    """Alias tables of ``Binom(N, 1/2)`` for ``N`` in ``[a_lo, a_lo + 64 bins)``: bins of 64, the remainder
    ``Binom(d, 1/2)``, ``d < 64``, as the popcount of ``d`` uniform bits (exact)."""

    main: np.ndarray
    offset: np.ndarray
    a_lo: int
    bins: int
    cell_bits: int
    tv_per_draw: float


_HALF_BITS = 6


@functools.lru_cache(maxsize=32)
def virtual_plan(others: int, min_sep: int, sampling_prob: float):
    """How the warm start's virtual history is drawn: ``(levels, cells, q, tables, tv)`` with ``cells = 2^levels``
    equal cells of probability ``q = p / (1 + (b-1) p)``, per level of the splitting tree either
    :class:`HalfTables` (a node's count in a band of 7 standard deviations) or ``None`` (``jax.random.binomial``),
    and ``tv`` the total-variation bound of one sample's table draws; ``None`` when ``cells q > 1`` (sequential
    binomials)."""
    n_oth, b, p = int(others), int(min_sep), float(sampling_prob)
    m = b - 1
    q = p / (1.0 + m * p)
    levels = max(0, (m - 1).bit_length())
    cells = 1 << levels
    if cells * q > 1.0:
        return None
    tables, tv = [], 0.0
    for level in range(levels):
        pr = min(1.0, (cells >> level) * q)       # a node at this level holds cells >> level cells
        mean, sd = n_oth * pr, math.sqrt(n_oth * pr * (1.0 - pr))
        lo = max(0, math.floor(mean - BAND_SDS * sd))
        hi = min(n_oth, math.ceil(mean + BAND_SDS * sd))
        binned = bin_tables(lo, (hi - lo) // (1 << _HALF_BITS) + 1, 1 << _HALF_BITS, 0.5)
        if binned is None:
            tables.append(None)
            continue
        main, offset, cell_bits, tv_main = binned
        tables.append(HalfTables(main, offset, lo, main.shape[0], cell_bits, tv_main))
        tv += (1 << level) * tv_main              # 2^level splits at this level
    return levels, cells, q, tuple(tables), tv


def _split_half(key, counts: jax.Array, tables: HalfTables | None) -> jax.Array:
    """``Binom(counts, 1/2)`` (int32): from the tables (exact up to their ``tv_per_draw``; counts off the band by
    ``jax.random.binomial``) or all by ``jax.random.binomial``."""
    k_bits, k_slow = jax.random.split(key)

    def slow(k, c):
        return jax.random.binomial(k, c.astype(jnp.float64), 0.5, dtype=jnp.float64).astype(jnp.int32)

    if tables is None:
        return slow(k_slow, counts)
    L = tables.cell_bits
    u = jax.random.bits(k_bits, (2,) + counts.shape, jnp.uint64)
    rel = counts.astype(jnp.int64) - tables.a_lo
    span = tables.bins << _HALF_BITS
    outside = (rel < 0) | (rel >= span)
    rel = jnp.clip(rel, 0, span - 1)
    k, d = rel >> _HALF_BITS, rel & ((1 << _HALF_BITS) - 1)
    cell = u[0] >> u64(64 - L)
    entry = jnp.asarray(tables.main.reshape(-1))[(k << L) + cell.astype(jnp.int64)]
    thr, alias = entry >> u64(L), entry & u64((1 << L) - 1)
    value = jnp.where((u[0] & u64((1 << (64 - L)) - 1)) < thr, cell, alias).astype(jnp.int32)
    rem = jax.lax.population_count(u[1] & ((u64(1) << d.astype(jnp.uint64)) - u64(1))).astype(jnp.int32)
    fast = jnp.asarray(tables.offset)[k] + value + rem
    return rare_cond(jnp.any(outside), lambda fast, k, c, out: jnp.where(out, slow(k, c), fast),
                     lambda fast, *operands: fast, fast, k_slow, counts, outside)


def virtual_history(key, others: int, min_sep: int, sampling_prob: float, num_samples: int) -> jax.Array:
    """The warm start's virtual rounds ``0, -1, ..., 2-b``: multinomial with ``N`` trials and ``m = b - 1`` cells of
    probability ``q = p / (1 + (b-1) p)``; ``(m, B)`` int32 (the cells are exchangeable, so their order is free).

    With ``C = 2^ceil(log2 m)`` and ``C q <= 1``: ``T ~ Binom(N, C q)`` examples fall in ``C`` equal cells, split
    level by level with ``Binom(., 1/2)`` (:func:`virtual_plan`: alias tables where a level's counts stay in a
    narrow band, ``jax.random.binomial`` elsewhere), and the ``C - m`` extra cells are dropped (merging cells of a
    multinomial keeps it multinomial, so the first ``m`` have the law above). Otherwise ``m`` sequential binomials
    (``jax.random.binomial``)."""
    b, p = min_sep, sampling_prob
    m = b - 1
    plan = virtual_plan(int(others), b, p)
    if plan is not None:
        levels, cells, q, tables, _ = plan
        k_total, k_split = jax.random.split(key)
        counts = jax.random.binomial(k_total, jnp.full((1, num_samples), float(others)), cells * q,
                                     dtype=jnp.float64).astype(jnp.int32)
        for level in range(levels):
            left = _split_half(jax.random.fold_in(k_split, level), counts, tables[level])
            counts = jnp.stack([left, counts - left], axis=1).reshape(2 * counts.shape[0], num_samples)
        return counts[:m]

    def init(rest, s):
        cnt = jax.random.binomial(jax.random.fold_in(key, s), rest, p / (1.0 + (b - s) * p), dtype=jnp.float64)
        return rest - cnt, cnt

    _, counts = jax.lax.scan(init, jnp.full((num_samples,), float(others)), jnp.arange(1, b))
    return counts.astype(jnp.int32)
