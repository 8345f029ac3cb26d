r"""Exact, fast draws of the counts of other examples in truncated b-min-sep (Dong & Ganesh 2026,
arXiv:2602.09338, App. D): alias tables with 64-bit integer thresholds.

The ``N = M - 1`` other examples run independent b-min-sep chains, so the number drawn at round ``i`` is

.. math::  r_i \mid r_{<i} \sim \mathrm{Binom}(A_i, p), \qquad A_i = N - \sum_{j=i-b+1}^{i-1} r_j,

and ``A_i`` stays in a narrow band around its stationary mean (the window sum is ``Binom(N, beta)`` with
``beta = (b-1)p/(1+(b-1)p)`` in stationarity). Binomials with one ``p`` add, so for
``A = A_lo + k h + d`` (``0 <= d < h``)

.. math::  \mathrm{Binom}(A, p) = \mathrm{Binom}(A_{lo} + k h, p) + \mathrm{Binom}(d, p),

two independent terms, each drawn from a precomputed **alias table** (Walker 1977, Vose 1991): one table per
bin ``k`` of width ``h`` (the bins cover the band), one small table per ``d < h`` (``h p <= 1/32``, so the
second term is almost always 0). Lanes whose ``A`` leaves the band (the cold start's first rounds, or a window
more than 7 standard deviations off) take the exact digit tables of :mod:`mcacct.schemes.truncated.digits` for that round
(``Binom(A, p)`` as a sum over the binary digits of ``A``; before kernel 9 they drew with ``jax.random.binomial``,
whose law is not exact).

Exactness. Every table is built on the host in integer arithmetic from the exact rational ``p`` (the float's
value): unnormalised pmf values by the ratio recurrence in fixed point with 320 fraction bits, normalised
to integer weights that sum to exactly ``2^64``. The alias method then draws value ``v`` with probability
``w_v / 2^64`` **exactly**: a cell index from ``L`` uniform bits and a comparison of ``64 - L`` uniform bits
with the cell's integer threshold. The total-variation distance between a table's law and the exact binomial
is therefore at most (:attr:`CountTables.tv_per_draw`)

* ``K 2^-64`` for rounding ``K`` weights to integers, plus
* the exact mass of the values left out of the table (bounded by a geometric series from the first value
  left out, where the pmf ratio is below 1 and decreasing), plus
* ``K 2^-200`` for the fixed-point arithmetic (each ratio step loses less than one unit of ``2^-320`` of the
  mode's value; values are kept down to ``2^-100`` of it).

A draw of ``r_i`` uses one table of each kind, or (off the band) the digit tables, so one sample's counts are within
total variation ``n (tv_main + tv_rem + tv_digits)`` of the exact law (:attr:`CountTables.tv_per_draw` is the sum:
a draw takes one path or the other, and its law is within the larger of the two bounds); mcacct adds that to every
reported delta (the contributions lie in ``[0, 1]``). At the §7.4 shape it is below ``4e-12``.

One 64-bit word per draw. Both comparisons are done lazily: the word gives both cell indices and the top
``H`` bits of both comparands; only when those top bits equal the threshold's (probability ``2^-H`` per
comparison, ``H >= 24``) are the remaining bits drawn, from an independent key, for the whole round (a ``cond``).
This is the same comparison as with all bits drawn up front, so the law is unchanged.

The chain (:func:`other_counts_t`) runs a block of ``b - 1`` rounds on table lookups alone and replays the block
round by round, with those branches, only when some lane met a tie or left the band in it (a
:func:`~mcacct.kernels.control.rare_cond` per block instead of two per round). The lookups of the replay are the
same, so every count before a lane's first tie or off-band round is the same in both, and the replay's counts are
the chain's (tested bit for bit against the chain that takes every branch every round). A block with ties but no
lane off the band is replayed without a branch per round: the lookups again, every tie resolved by the bits the
round-by-round replay would draw for it, drawn for all the block's rounds at once (and round by round after all if
a resolved tie leads a lane off the band).

The lookup rounds of a block form one ``lax.scan``, unrolled :data:`COUNT_CHAIN_UNROLL` times per platform (integer
arithmetic: the counts are the same for every unroll). On a GPU the chain's sequential rounds look latency-bound,
and an unrolled body could let XLA run several rounds per kernel launch; on CPU unrolling is slower
(benchmarks/results/design_choices.md).

Everything here takes numbers and arrays; no scheme is imported.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.alias import BAND_SDS, MAX_BINS, alias_pick, bin_tables, binomial_alias, u64
from mcacct.schemes.truncated.digits import DigitTables, digit_tables, digits_draw
from mcacct.schemes.truncated.virtual import HalfTables, virtual_history, virtual_plan
from mcacct.kernels.control import rare_cond
from mcacct.core.platform import target_platform

__all__ = ["COUNT_CHAIN_UNROLL", "CountTables", "count_tables", "band_tables", "draw_counts", "table_lookup",
           "other_counts_t", "binomial_alias", "alias_pick", "BAND_SDS", "REMAINDER_CELL_BITS", "HalfTables",
           "virtual_plan", "virtual_history", "exact_tables"]

#: the remainder term Binom(d, p), d < h, takes values 0..7 (3 cell bits); h p <= 1/32 keeps P(>= 8) < 3e-17
REMAINDER_CELL_BITS = 3


class CountTables(NamedTuple):
    """The tables of one ``(N, p, b)``: ``main`` ``(bins, 2^L)`` and ``rem`` ``(h, 8)`` packed alias entries,
    ``offset`` ``(bins,)`` the smallest value of each main table; ``a_lo`` the smallest ``A`` covered,
    ``bin_bits`` ``log2 h``; ``digits`` the exact tables of trial counts off the band (up to the largest count a
    draw can see); ``tv_per_draw`` the total-variation bound of one draw (band tables plus digit tables)."""

    main: np.ndarray
    offset: np.ndarray
    rem: np.ndarray
    a_lo: int
    bins: int
    bin_bits: int
    cell_bits: int
    tv_per_draw: float
    digits: DigitTables | None = None


@functools.lru_cache(maxsize=32)
def count_tables(others: int, min_sep: int, sampling_prob: float) -> CountTables | None:
    """The tables for ``N = others`` other examples with separation ``b`` and probability ``p``, or ``None``
    where they would be too large (more than 512 bins or 8192 cells or 2^20 entries: the caller then draws
    every count from the digit tables, :func:`exact_tables`). Cached per process; building costs well under a
    second.

    Parameters
    ----------
    others, min_sep, sampling_prob : int, int, float
        ``N``, ``b`` and ``p`` (used at its exact float value).

    Returns
    -------
    CountTables or None
        ``None`` also for ``N <= 0``.
    """
    n_oth, b, p = int(others), int(min_sep), float(sampling_prob)
    if n_oth <= 0:
        return None
    w_lo, w_hi = window_band(n_oth, b, p)
    return band_tables(n_oth - w_hi, n_oth - w_lo, p, n_oth)    # A = N - W


def exact_tables(others: int, sampling_prob: float) -> DigitTables:
    """The digit tables drawing ``Binom(A, p)`` for every ``A <= others`` (:mod:`mcacct.schemes.truncated.digits`): the
    chain's sampler where :func:`count_tables` gives none, and of the lanes off its band.

    Parameters
    ----------
    others, sampling_prob : int, float
        The largest ``A`` (at least 1 is used) and ``p``.

    Returns
    -------
    DigitTables
    """
    return digit_tables(max(1, int(others)), float(sampling_prob))


def window_band(others: int, min_sep: int, sampling_prob: float) -> tuple[int, int]:
    r"""``[lo, hi]``: the stationary window sum ``W ~ Binom(N, beta)``, ``beta = (b-1)p/(1+(b-1)p)``, within
    :data:`BAND_SDS` standard deviations of its mean, clipped to ``[0, N]``: the numbers of blocked examples the
    tables cover (``A = N - W`` for :func:`count_tables`, ``W`` for :mod:`mcacct.schemes.truncated.screen`).

    Parameters
    ----------
    others, min_sep, sampling_prob : int, int, float
        ``N``, ``b`` and ``p`` (used at its exact float value).

    Returns
    -------
    tuple of int
        :math:`(\max(0, \lfloor \mu - 7 s \rfloor), \min(N, \lceil \mu + 7 s \rceil))`, :math:`\mu = N\beta`,
        :math:`s = \sqrt{N\beta(1-\beta)}` (7 = :data:`BAND_SDS`).
    """
    n_oth, b, p = int(others), int(min_sep), float(sampling_prob)
    beta = (b - 1) * p / (1.0 + (b - 1) * p)
    mean_w, sd_w = n_oth * beta, math.sqrt(n_oth * beta * (1.0 - beta))
    return max(0, math.floor(mean_w - BAND_SDS * sd_w)), min(n_oth, math.ceil(mean_w + BAND_SDS * sd_w))


@functools.lru_cache(maxsize=64)
def band_tables(lo: int, hi: int, sampling_prob: float, max_trials: int) -> CountTables | None:
    """Tables of ``Binom(A, p)`` for every ``A`` in ``[lo, hi]`` (bins of width ``h``, the largest power of two
    up to 4096 with ``2 h p <= 1/32``, and the remainder tables), with the digit tables for every ``A`` up to
    ``max_trials`` off the band, or ``None`` where they would be too large.

    Parameters
    ----------
    lo, hi : int
        The band of trial counts ``A``.
    sampling_prob, max_trials : float, int
        ``p`` and the largest ``A`` the digit tables must cover (at least ``hi``).

    Returns
    -------
    CountTables or None
    """
    p = float(sampling_prob)
    h_bits = 0
    while h_bits < 12 and (2 << h_bits) * p <= 1.0 / 32.0:
        h_bits += 1
    h = 1 << h_bits
    bins = (int(hi) - int(lo)) // h + 1
    if bins > MAX_BINS:
        return None
    binned = bin_tables(int(lo), bins, h, p)
    if binned is None:
        return None
    main, offset, cell_bits, tv_main = binned
    rem = np.zeros((h, 1 << REMAINDER_CELL_BITS), np.uint64)
    tv_rem = 0.0
    for d in range(h):
        off, rem[d], tv = binomial_alias(d, p, REMAINDER_CELL_BITS, max_values=1 << REMAINDER_CELL_BITS)
        if off != 0:
            raise AssertionError("the remainder's mode is 0 when h p <= 1/32")
        tv_rem = max(tv_rem, tv)
    digits = exact_tables(max(int(max_trials), int(hi)), p)
    return CountTables(main, offset, rem, int(lo), bins, h_bits, cell_bits, tv_main + tv_rem + digits.tv_per_draw,
                       digits)


class _Lookup(NamedTuple):
    """One table lookup of :func:`draw_counts`: the common-path value and what its rare paths need."""
    fast: jax.Array
    tie: jax.Array          # lanes whose comparison the word's bits left undecided
    outside: jax.Array      # lanes whose ``avail`` is off the tables' band
    parts: tuple            # (cell1, top1, e1, cell2, top2, e2, offset) for the ties


def _word_layout(tables: CountTables) -> tuple[int, int, int, int]:
    """Bits of a draw's 64-bit word: main cell ``L``, remainder cell ``R``, and the comparand bits read first for
    each, ``(L, R, H1, H2)``."""
    L, R = tables.cell_bits, REMAINDER_CELL_BITS
    h1 = (64 - L - R) // 2
    return L, R, h1, 64 - L - R - h1


def _lookup(avail: jax.Array, u: jax.Array, tables: CountTables) -> _Lookup:
    """The tables' value of ``Binom(avail, p)`` from one 64-bit word per entry (module docstring), no key used:
    exact except on ``tie`` and ``outside`` lanes."""
    L, R, h1, h2 = _word_layout(tables)
    cell1 = u >> u64(64 - L)
    top1 = (u >> u64(64 - L - h1)) & u64((1 << h1) - 1)
    cell2 = (u >> u64(h2)) & u64((1 << R) - 1)
    top2 = u & u64((1 << h2) - 1)
    rel = avail.astype(jnp.int32) - jnp.int32(tables.a_lo)
    span = tables.bins << tables.bin_bits
    outside = (rel < 0) | (rel >= span)
    rel = jnp.clip(rel, 0, span - 1)
    k = rel >> tables.bin_bits
    d = rel & ((1 << tables.bin_bits) - 1)
    main = jnp.asarray(tables.main.reshape(-1))
    rem = jnp.asarray(tables.rem.reshape(-1))
    e1 = main[(k << L) + cell1.astype(jnp.int32)]
    e2 = rem[(d << R) + cell2.astype(jnp.int32)]
    v1, tie1 = alias_pick(cell1, top1, e1, L, h1, None)
    v2, tie2 = alias_pick(cell2, top2, e2, R, h2, None)
    offset = jnp.asarray(tables.offset)[k]
    fast = offset + v1.astype(jnp.int32) + v2.astype(jnp.int32)
    return _Lookup(fast, tie1 | tie2, outside, (cell1, top1, e1, cell2, top2, e2, offset))


def table_lookup(avail: jax.Array, u: jax.Array, tables: CountTables) -> _Lookup:
    """The tables' value of ``Binom(avail, p)`` from one 64-bit word per entry, with its ``tie`` and ``outside``
    lanes (where the value is not yet exact: :func:`draw_counts` finishes them).

    Parameters
    ----------
    avail, u : jax.Array
        Trial counts (int32) and one uint64 word per entry, of the same shape.
    tables : CountTables
        The band's tables.

    Returns
    -------
    _Lookup
        ``fast`` (int32), ``tie`` and ``outside`` (bool masks) and the parts :func:`draw_counts` uses.
    """
    return _lookup(avail, u, tables)


def _resolve_ties(value, tie, parts, fresh, tables: CountTables) -> jax.Array:
    """``value`` with every ``tie`` lane's comparisons finished by the low bits ``fresh`` (``(2,) + shape``
    uint64, those of ``fold_in(fold_in(key, round), 1)``: :func:`draw_counts`)."""
    L, R, h1, h2 = _word_layout(tables)
    cell1, top1, e1, cell2, top2, e2, offset = parts
    w1, _ = alias_pick(cell1, top1, e1, L, h1, fresh[0])
    w2, _ = alias_pick(cell2, top2, e2, R, h2, fresh[1])
    return jnp.where(tie, offset + w1.astype(jnp.int32) + w2.astype(jnp.int32), value)


def draw_counts(key: jax.Array, avail: jax.Array, sampling_prob: float, tables: CountTables,
                u: jax.Array | None = None, index=None) -> jax.Array:
    """``Binom(avail, p)`` for every entry of ``avail`` (int32, any shape), exact up to ``tables.tv_per_draw``.

    One 64-bit word per entry (``u``, uint64 of ``avail``'s shape, drawn from ``key`` when not given; it must be
    independent of everything else ``key`` draws): ``L`` bits pick the main cell, ``H1`` bits start its comparison,
    3 bits pick the remainder cell and ``H2`` bits start its comparison; ties and lanes outside the tables' band
    redraw (module docstring) from ``fold_in(key, index)`` (``key`` when ``index`` is None), folded inside the rare
    branches so that the common path computes no key. Returns int32 of ``avail``'s shape.

    Parameters
    ----------
    key, avail : jax.Array
        The key of the rare paths' redraws and the trial counts.
    sampling_prob : float
        ``p`` (of the digit tables' draw off the band).
    tables : CountTables
        The band's tables.
    u, index : jax.Array, optional
        The words (default: drawn from ``fold_in(key, 0)``, folded with ``index`` first when given) and the round.

    Returns
    -------
    jax.Array
    """

    def sub_of(k, i, j):
        return jax.random.fold_in(k if i is None else jax.random.fold_in(k, i), j)

    if u is None:
        u = jax.random.bits(sub_of(key, index, 0), avail.shape, jnp.uint64)
    look = _lookup(avail, u, tables)

    def ties(value, k, i, tie, *parts):  # ties get their low bits (rare)
        return _resolve_ties(value, tie, parts, jax.random.bits(sub_of(k, i, 1), (2,) + value.shape, jnp.uint64),
                             tables)

    def off_band(value, k, i, outside, avail, p):  # lanes off the band: the exact digit tables (rare too)
        return jnp.where(outside, digits_draw(sub_of(k, i, 2), avail, tables.digits), value)

    def keep(value, *operands):
        return value

    value = rare_cond(jnp.any(look.tie), ties, keep, look.fast, key, index, look.tie, *look.parts)
    return rare_cond(jnp.any(look.outside), off_band, keep, value, key, index, look.outside, avail, sampling_prob)


#: ``platform -> unroll`` of the chain's lookup rounds (:func:`other_counts_t`): CPU 1, GPU 8, TPU 1 (no
#: measurement; ``benchmarks/accelerator.py --part production --count-unrolls 1,8,32`` records them on a device).
#: The figures behind them: benchmarks/results/design_choices.md.
COUNT_CHAIN_UNROLL = {"cpu": 1, "gpu": 8, "tpu": 1}


def other_counts_t(key: jax.Array, others: int, min_sep: int, sampling_prob: float, warm_start: bool,
                   iterations: int, num_samples: int, use_tables: bool = True, unroll: int | None = None
                   ) -> jax.Array:
    r"""Counts ``r`` of other examples drawn per round, time-major ``(n, num_samples)`` int32: the chain of the
    module docstring (cold start: ``r_j = 0`` for ``j < 1``; warm start: the multinomial virtual history).

    With ``use_tables`` (and tables of a sensible size, :func:`count_tables`) each round is one
    :func:`draw_counts`; otherwise every count is a draw from the digit tables (:func:`exact_tables`; the law is
    the same).
    ``unroll``: of the lookup rounds' scan (default :data:`COUNT_CHAIN_UNROLL` of the target platform); the counts
    do not depend on it.

    Parameters
    ----------
    key : jax.Array
        Split into the warm start's key and the chain's.
    others, min_sep, sampling_prob, warm_start : int, int, float, bool
        ``N``, ``b``, ``p`` and the start.
    iterations, num_samples : int
        ``n`` rounds and the lanes.
    use_tables, unroll : bool, int, optional
        As above.

    Returns
    -------
    jax.Array
        int32 ``(n, num_samples)``; for ``b = 1`` or ``N = 0`` every round draws :math:`\mathrm{Binom}(N, p)`.
    """
    b, p, n, B = int(min_sep), float(sampling_prob), int(iterations), int(num_samples)
    unroll = max(1, int(COUNT_CHAIN_UNROLL.get(target_platform(), 1) if unroll is None else unroll))
    tables = count_tables(int(others), b, p) if use_tables else None
    k_init, k_run = jax.random.split(key)

    def draw(k, avail, u=None, index=None):
        if tables is not None:
            return draw_counts(k, avail, p, tables, u, index)
        return digits_draw(k, avail, exact_tables(others, p))

    if b == 1 or others == 0:
        avail = jnp.full((n, B), int(others), jnp.int32)
        return draw(k_run, avail)
    m = b - 1
    prev = jnp.zeros((m, B), jnp.int32)
    if warm_start:
        counts = virtual_history(k_init, int(others), b, p, B)  # exchangeable cells
        prev = counts[::-1]                                                          # prev[s-1] = r_{s-m}
    blocks = -(-n // m)

    k_bits, k_rare = jax.random.split(k_run)

    def exact_block(prev, window, u, rounds, k_rare):
        def step(window, xs):
            leaving, i, u_i = xs   # round i = t m + s leaves r_{i-m}, the previous block's s-th round
            avail = jnp.maximum(int(others) - window, 0)
            r = draw(k_rare, avail, u_i, i) if tables is not None else draw(jax.random.fold_in(k_rare, i), avail)
            return window - leaving + r, r

        return jax.lax.scan(step, window, (prev, rounds, u if u is not None else jnp.zeros((m,), jnp.uint64)))

    def table_block(prev, window, u, fresh=None):
        """The block by table lookups, and whether some lane met a tie or left the band. Without ``fresh`` ties
        are left unresolved (then the block is replayed); with ``fresh`` (the replay's tie bits of every round,
        drawn at once) they are resolved as ``exact_block`` resolves them, so the block equals its replay unless
        some lane left the band."""
        def step(carry, xs):
            window, tie, outside = carry
            leaving, u_i = xs[:2]
            look = _lookup(jnp.maximum(int(others) - window, 0), u_i, tables)
            r = look.fast if fresh is None else _resolve_ties(look.fast, look.tie, look.parts, xs[2], tables)
            return (window - leaving + r, tie | look.tie, outside | look.outside), r

        no = jnp.zeros(window.shape, bool)
        (window, tie, outside), new = jax.lax.scan(step, (window, no, no), (prev, u) + (() if fresh is None
                                                                                       else (fresh,)),
                                                   unroll=min(unroll, m))
        return window, new, tie, outside

    def ties_only(w_fast, n_fast, prev, window, u, rounds, k_rare):
        """The lookups again with every tie resolved by the bits ``exact_block`` would draw for it, drawn for the
        whole block at once (no branch per round), and whether a resolved tie led a lane off the band."""
        fresh = jax.vmap(lambda i: jax.random.bits(jax.random.fold_in(jax.random.fold_in(k_rare, i), 1), (2, B),
                                                   jnp.uint64))(rounds)
        w_tie, n_tie, _, out = table_block(prev, window, u, fresh)
        return w_tie, n_tie, jnp.any(out)

    def replay(w_fast, n_fast, outside, *ops):
        """A block some lane of which met a tie or left the band: ``ties_only`` if none left it in the first pass,
        else (or when a resolved tie left it) round by round (``exact_block``). The same counts either way;
        ``exact_block`` appears once in the program (it holds the rare paths' digit tables: compile time)."""
        w, new, go = rare_cond(jnp.any(outside), lambda wf, nf, *o: (wf, nf, jnp.asarray(True)), ties_only,
                               w_fast, n_fast, *ops)
        return rare_cond(go, lambda wt, nt, *o: exact_block(*o), lambda wt, nt, *o: (wt, nt), w, new, *ops)

    def block(carry, t):
        prev, window = carry  # prev: the previous block's rounds, oldest first; window: their sum
        rounds = t * m + jnp.arange(1, m + 1)
        if tables is None:
            window, new = exact_block(prev, window, None, rounds, k_rare)
            return (new, window), new
        # the block's words in one call; ties and off-band lanes draw from per-round keys, in the replay only:
        # one branch per block of rounds instead of two per round (on accelerators each is a host round trip)
        u = jax.random.bits(jax.random.fold_in(k_bits, t), (m, B), jnp.uint64)
        w_fast, new_fast, tie, outside = table_block(prev, window, u)
        window, new = rare_cond(jnp.any(tie | outside), replay, lambda wf, nf, *ops: (wf, nf),
                                w_fast, new_fast, outside, prev, window, u, rounds, k_rare)
        return (new, window), new

    _, rs = jax.lax.scan(block, (prev, jnp.sum(prev, axis=0)), jnp.arange(blocks))
    return rs.reshape(blocks * m, B)[:n]
