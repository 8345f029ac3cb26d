r"""The warm start's virtual history of truncated b-min-sep's counts (Dong & Ganesh 2026, arXiv:2602.09338,
App. D, Alg. 2): how many of the ``N = M - 1`` other examples are blocked, and since which round, before round 1.

In stationarity an example is available with probability ``1 / (1 + (b-1) p)`` and blocked since each of the
``b - 1`` previous rounds with probability ``q = p / (1 + (b-1) p)``, independently across examples, so the counts
of the virtual rounds ``0, -1, ..., 2-b`` are multinomial (:func:`virtual_history`), drawn by splitting a binomial
level by level with exact alias tables of ``Binom(., 1/2)`` (:func:`virtual_plan`, the tables of
:mod:`mcacct.kernels.alias`). Every draw is an integer-table draw: the root ``T ~ Binom(N, C q)`` and the counts a
level's band tables do not cover by the exact digit tables of :mod:`mcacct.schemes.truncated.digits` (with ``q`` the exact
rational ``p / (1 + (b-1) p)`` of the float ``p``); no floating-point sampler is used. Used by
:mod:`mcacct.schemes.truncated.counts` and :mod:`mcacct.schemes.truncated.screen`. Plain numbers and arrays; no scheme is imported.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.alias import BAND_SDS, MAX_BINS, bin_tables, pmf_weights, u64
from mcacct.kernels.control import rare_cond
from mcacct.schemes.truncated.digits import DigitTables, digit_tables, digits_draw

__all__ = ["HalfTables", "VirtualPlan", "virtual_plan", "virtual_history", "stationary_blocked_prob"]


class HalfTables(NamedTuple):
    """Alias tables of ``Binom(N, 1/2)`` for ``N`` in ``[a_lo, a_lo + bins 2^bin_bits)``: bins of ``2^bin_bits``
    (at least 64), the remainder ``Binom(d, 1/2)``, ``d < 2^bin_bits``, as the popcount of ``d`` uniform bits
    (exact)."""

    main: np.ndarray
    offset: np.ndarray
    a_lo: int
    bins: int
    cell_bits: int
    tv_per_draw: float
    bin_bits: int = 6


class VirtualPlan(NamedTuple):
    """How the warm start's virtual history is drawn (:func:`virtual_plan`).

    ``cells = 2^levels`` equal cells of probability ``q`` (the exact rational, and ``q_float`` its float);
    ``tables[level]`` the :class:`HalfTables` of that level's splits (``None``: every split by ``half``);
    ``root`` the digit tables of ``T ~ Binom(N, cells q)``, ``half`` those of ``Binom(., 1/2)`` for counts off a
    level's band; ``sequential`` (when ``cells q > 1``) the digit tables of the ``m`` sequential binomials instead;
    ``tv`` the total-variation bound of one sample's virtual history."""

    levels: int
    cells: int
    q_float: float
    tables: tuple
    tv: float
    q: Fraction
    root: DigitTables | None
    half: DigitTables | None
    sequential: tuple


def stationary_blocked_prob(min_sep: int, sampling_prob) -> Fraction:
    """``q = p / (1 + (b-1) p)`` as an exact rational of the float ``p``: the stationary probability that an example
    was drawn in one given round of the previous ``b - 1`` (App. D).

    Parameters
    ----------
    min_sep, sampling_prob : int, float
        ``b`` and ``p`` (its exact float value).

    Returns
    -------
    fractions.Fraction
        :math:`q = p / (1 + (b-1) p)`.
    """
    p = Fraction(float(sampling_prob))
    return p / (1 + (int(min_sep) - 1) * p)


def _half_tables(lo: int, hi: int) -> HalfTables | None:
    """Tables of ``Binom(N, 1/2)`` for ``N`` in ``[lo, hi]``: bins of the smallest width ``2^bin_bits >= 64`` for
    which they fit the limits of :func:`mcacct.kernels.alias.bin_tables` (``None`` if none up to 4096 does)."""
    values = len(pmf_weights(int(hi), 1, 2)[1])           # the widest table decides the cells
    cell_bits = max(1, (values - 1).bit_length())
    for bin_bits in range(6, 13):
        bins = (int(hi) - int(lo)) // (1 << bin_bits) + 1
        if bins <= MAX_BINS and bins << cell_bits <= 1 << 20:
            binned = bin_tables(int(lo), bins, 1 << bin_bits, 0.5)
            if binned is None:
                return None
            main, offset, cells, tv_main = binned
            return HalfTables(main, offset, int(lo), main.shape[0], cells, tv_main, bin_bits)
    return None


@functools.lru_cache(maxsize=32)
def virtual_plan(others: int, min_sep: int, sampling_prob: float) -> VirtualPlan:
    """How the warm start's virtual history is drawn (:class:`VirtualPlan`): ``cells = 2^levels`` equal cells of
    probability ``q = p / (1 + (b-1) p)`` (exact rational), ``T ~ Binom(N, cells q)`` by digit tables, and per
    level of the splitting tree :class:`HalfTables` over a band of 7 standard deviations (counts off it by digit
    tables); when ``cells q > 1``, ``m`` sequential binomials by digit tables. ``tv`` adds, per sample: the root
    draw's bound, and for each of the ``2^level`` splits of a level its table's bound plus the digit tables' (a
    split uses one or the other); or the ``m`` sequential draws' bounds.

    Parameters
    ----------
    others, min_sep, sampling_prob : int, int, float
        ``N``, ``b`` and ``p``.

    Returns
    -------
    VirtualPlan
        Empty (``tv = 0``) for ``N <= 0`` or ``b = 1``; cached per process.
    """
    n_oth, b, p = int(others), int(min_sep), float(sampling_prob)
    m = b - 1
    q = stationary_blocked_prob(b, p)
    levels = max(0, (m - 1).bit_length())
    cells = 1 << levels
    if n_oth <= 0 or m <= 0:
        return VirtualPlan(levels, cells, float(q), (), 0.0, q, None, None, ())
    if cells * q > 1:
        fp = Fraction(p)
        seq = tuple(digit_tables(n_oth, fp / (1 + (b - s) * fp)) for s in range(1, b))
        return VirtualPlan(levels, cells, float(q), (), sum(t.tv_per_draw for t in seq), q, None, None, seq)
    root = digit_tables(n_oth, cells * q)
    half = digit_tables(n_oth, Fraction(1, 2)) if levels else None
    tables, tv = [], root.tv_per_draw
    for level in range(levels):
        pr = min(1.0, float((cells >> level) * q))    # a node at this level holds cells >> level cells
        mean, sd = n_oth * pr, math.sqrt(n_oth * pr * (1.0 - pr))
        lo = max(0, math.floor(mean - BAND_SDS * sd))
        hi = min(n_oth, math.ceil(mean + BAND_SDS * sd))
        t = _half_tables(lo, hi)
        tables.append(t)
        tv += (1 << level) * ((0.0 if t is None else t.tv_per_draw) + half.tv_per_draw)  # 2^level splits
    return VirtualPlan(levels, cells, float(q), tuple(tables), tv, q, root, half, ())


def _split_half(key, counts: jax.Array, tables: HalfTables | None, half: DigitTables) -> jax.Array:
    """``Binom(counts, 1/2)`` (int32): from the band tables (exact up to their ``tv_per_draw``; counts off the band
    by the digit tables ``half``) or all by ``half``."""
    k_bits, k_slow = jax.random.split(key)
    if tables is None:
        return digits_draw(k_slow, counts, half)
    L, hb = tables.cell_bits, tables.bin_bits
    words = max(1, (1 << hb) // 64)
    u = jax.random.bits(k_bits, (1 + words,) + counts.shape, jnp.uint64)
    rel = counts.astype(jnp.int64) - tables.a_lo
    span = tables.bins << hb
    outside = (rel < 0) | (rel >= span)
    rel = jnp.clip(rel, 0, span - 1)
    k, d = rel >> hb, rel & ((1 << hb) - 1)
    cell = u[0] >> u64(64 - L)
    entry = jnp.asarray(tables.main.reshape(-1))[(k << L) + cell.astype(jnp.int64)]
    thr, alias = entry >> u64(L), entry & u64((1 << L) - 1)
    value = jnp.where((u[0] & u64((1 << (64 - L)) - 1)) < thr, cell, alias).astype(jnp.int32)
    rem = jnp.zeros(counts.shape, jnp.int32)
    for w in range(words):  # Binom(d, 1/2) as the popcount of d uniform bits, 64 per word
        bits_w = jnp.clip(d - 64 * w, 0, 64).astype(jnp.uint64)
        mask = jnp.where(bits_w >= 64, ~u64(0), (u64(1) << jnp.minimum(bits_w, u64(63))) - u64(1))
        rem = rem + jax.lax.population_count(u[1 + w] & mask).astype(jnp.int32)
    fast = jnp.asarray(tables.offset)[k] + value + rem
    return rare_cond(jnp.any(outside), lambda fast, k, c, out: jnp.where(out, digits_draw(k, c, half), fast),
                     lambda fast, *operands: fast, fast, k_slow, counts, outside)


def virtual_history(key, others: int, min_sep: int, sampling_prob: float, num_samples: int) -> jax.Array:
    """The warm start's virtual rounds ``0, -1, ..., 2-b``: multinomial with ``N`` trials and ``m = b - 1`` cells of
    probability ``q = p / (1 + (b-1) p)``; ``(m, B)`` int32 (the cells are exchangeable, so their order is free).

    With ``C = 2^ceil(log2 m)`` and ``C q <= 1``: ``T ~ Binom(N, C q)`` examples (digit tables) fall in ``C`` equal
    cells, split level by level with ``Binom(., 1/2)`` (:func:`virtual_plan`: alias tables where a level's counts
    stay in a narrow band, digit tables elsewhere), and the ``C - m`` extra cells are dropped (merging cells of a
    multinomial keeps it multinomial, so the first ``m`` have the law above). Otherwise ``m`` sequential binomials
    ``Binom(rest, p / (1 + (b - s) p))`` (digit tables). Every draw is exact up to ``virtual_plan(...).tv``.

    Parameters
    ----------
    key : jax.Array
        The key of the draws.
    others, min_sep, sampling_prob, num_samples : int, int, float, int
        ``N``, ``b``, ``p`` and the lanes ``B``.

    Returns
    -------
    jax.Array
        int32 ``(b - 1, num_samples)``; zeros for ``N <= 0``.
    """
    b = int(min_sep)
    m = b - 1
    plan = virtual_plan(int(others), b, float(sampling_prob))
    if int(others) <= 0:
        return jnp.zeros((m, num_samples), jnp.int32)
    if not plan.sequential:
        k_total, k_split = jax.random.split(key)
        counts = digits_draw(k_total, jnp.full((1, num_samples), int(others), jnp.int32), plan.root)
        for level in range(plan.levels):
            left = _split_half(jax.random.fold_in(k_split, level), counts, plan.tables[level], plan.half)
            counts = jnp.stack([left, counts - left], axis=1).reshape(2 * counts.shape[0], num_samples)
        return counts[:m]

    rest, out = jnp.full((num_samples,), int(others), jnp.int32), []
    for s in range(1, b):  # b - 1 <= C - 1 rounds, each its own exact rational probability
        cnt = digits_draw(jax.random.fold_in(key, s), rest, plan.sequential[s - 1])
        rest, out = rest - cnt, out + [cnt]
    return jnp.stack(out)
