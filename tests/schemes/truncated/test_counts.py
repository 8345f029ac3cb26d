"""The exact fast law of the counts r of truncated b-min-sep (mcacct.schemes.truncated.counts).

* every alias table against the exact pmf (mpmath, 50 digits), deterministically, tail included, at the §7.4
  shape and at small shapes;
* the lazy comparison against the full 64-bit comparison (hypothesis);
* the chain against an independent simulation of the M - 1 other examples' b-min-sep chains (two-sample
  chi-square on marginals and on pairs (r_i, r_{i+1}), means within standard errors), warm and cold start,
  with remainder tables (h > 1) and with lanes outside the tables' band (the exact digit tables);
* the exact small-M joint law is in tests/schemes/test_schemes_extra.py::test_other_counts_joint_law.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mcacct.schemes.truncated.counts import alias_pick, binomial_alias, count_tables, other_counts_t, virtual_plan
from mcacct.core.rates import sampling_prob_from_batch_size
from mcacct.schemes.truncated import TruncatedBMinSep

from helpers import simulate_examples, table_weights, two_sample_chi2
from oracles import exact_binomial_pmf

M74, B74, N74, BMAX74 = 14_745_600, 256, 7200, 2048
P74 = sampling_prob_from_batch_size(1793, M74, B74)


def _exact_pmf(trials: int, p: float, ks) -> list:
    """Binom(trials, p) at ``ks`` in 50 digits, consecutive cells by the exact pmf ratio at 70 digits
    (:func:`oracles.exact_binomial_pmf`: far below the tables' 2^-64 units over the longest run here)."""
    mpmath.mp.dps = 50
    return exact_binomial_pmf(trials, p, ks, 50, 70)


def _check_table(trials: int, p: float, cell_bits: int, max_values=None, tail_at=None) -> float:
    offset, packed, tv = binomial_alias(trials, p, cell_bits, max_values)
    cell_bits = int(len(packed)).bit_length() - 1
    w = table_weights(packed, cell_bits)
    assert sum(w) == 1 << 64                                   # exactly a probability law
    ks = list(range(offset, offset + len(packed)))
    pmf = _exact_pmf(trials, p, ks)
    inside = mpmath.fsum(pmf)
    l1 = mpmath.fsum(abs(mpmath.mpf(int(wk)) / 2**64 - pk) for wk, pk in zip(w, pmf)) + (1 - inside)
    assert float(l1) <= 2 * tv, (trials, p, float(l1), tv)
    if tail_at is not None:  # the tail that decides truncation, deterministically (chi-square cannot see it)
        table_tail = sum(int(wk) for k, wk in zip(ks, w) if k >= tail_at) / 2**64
        exact_tail = 1 - mpmath.fsum(_exact_pmf(trials, p, range(0, tail_at)))
        assert abs(table_tail - float(exact_tail)) <= len(packed) * 2.0**-64 + 1e-30, (table_tail, exact_tail)
    return tv


def test_production_tables_equal_the_exact_pmf_tail_included():
    tables = count_tables(M74 - 1, B74, P74)
    assert tables is not None and tables.bins > 1 and tables.bin_bits > 0
    h = 1 << tables.bin_bits
    for k in (0, tables.bins // 2, tables.bins - 1):
        trials = tables.a_lo + k * h
        tv = _check_table(trials, P74, tables.cell_bits, tail_at=BMAX74)
        assert tv < 1e-15
        offset, packed, _ = binomial_alias(trials, P74, tables.cell_bits)
        np.testing.assert_array_equal(packed, tables.main[k])
        assert offset == tables.offset[k]
    for d in (0, 1, h - 1):
        _check_table(d, P74, 3, max_values=8)
    # the warm start's splitting tree: Binom(N0 + h k, 1/2) tables at every level, the root's split included
    # (bins of 128 there; the root T and off-band counts by digit tables: tests/schemes/truncated/test_exact_draws.py)
    plan = virtual_plan(M74 - 1, B74, P74)
    assert plan.cells == 256 and all(t is not None for t in plan.tables) and plan.tv < 1e-11
    for t in (plan.tables[0], plan.tables[1], plan.tables[-1]):
        k = t.bins // 2
        _check_table(t.a_lo + (1 << t.bin_bits) * k, 0.5, t.cell_bits)
        np.testing.assert_array_equal(binomial_alias(t.a_lo + (1 << t.bin_bits) * k, 0.5, t.cell_bits)[1], t.main[k])
    # one sample's counts are within this total variation of their exact law: added to every delta
    scheme = TruncatedBMinSep(P74, B74, N74, M74, BMAX74)
    assert 0 < scheme.draw_law_tv() < 0.01 * 1.301e-8 / 5  # a fifth of the 1% reserve (it charges every path: #37)


@pytest.mark.parametrize("trials,p,bits", [(0, 0.3, 1), (1, 0.5, 1), (7, 1.0, 1), (40, 0.25, 6), (500, 0.01, None),
                                           (3000, 0.9, None), (10**6, 1e-3, 11)])
def test_small_tables_equal_the_exact_pmf(trials, p, bits):
    _check_table(trials, p, bits, tail_at=max(1, int(trials * p + 4 * math.sqrt(trials * p + 1))))


@settings(max_examples=200, deadline=None)
@given(u=st.integers(0, 2**64 - 1), thr=st.integers(0, 2**61 - 1), alias=st.integers(0, 7),
       low=st.integers(0, 2**64 - 1))
def test_lazy_comparison_is_the_full_comparison(u, thr, alias, low):
    cell_bits, top_bits = 3, 20
    cell, frac = u >> 61, u & ((1 << 61) - 1)
    top = frac >> (61 - top_bits)
    entry = (thr << cell_bits) | alias
    args = [jnp.asarray(np.uint64(v)) for v in (cell, top, entry)]
    fast, tie = alias_pick(*args, cell_bits, top_bits)
    full = (top << (61 - top_bits)) | (low >> (64 - (61 - top_bits)))
    resolved, _ = alias_pick(*args, cell_bits, top_bits, jnp.asarray(np.uint64(low)))
    want = cell if full < thr else alias
    assert int(resolved) == want
    if not bool(tie):
        assert int(fast) == (cell if frac < thr else alias)


@pytest.mark.parametrize("others,b,p,n,warm", [
    (199, 3, 0.004, 8, True),     # remainder tables (h = 4), every A in the band
    (199, 3, 0.004, 8, False),
    (1999, 5, 0.02, 10, False),   # the cold start's first rounds leave the band: the exact slow path
    (1999, 5, 0.02, 10, True),
])
def test_counts_match_an_independent_simulation_of_the_other_examples(others, b, p, n, warm):
    samples = 6000
    tables = count_tables(others, b, p)
    assert tables is not None
    got = np.asarray(other_counts_t(jax.random.key(11), others, b, p, warm, n, samples)).T
    ref = simulate_examples(np.random.default_rng(5), others, b, p, n, warm, samples)
    # means within 5 standard errors of the difference, every round
    se = np.sqrt(got.var(axis=0) / samples + ref.var(axis=0) / samples) + 1e-12
    assert np.all(np.abs(got.mean(axis=0) - ref.mean(axis=0)) <= 5 * se)
    # chi-square on marginals and on pairs (r_i, r_{i+1}); the 1e-4 quantile of chi2(df) is below df + 6 sqrt(2 df) + 12
    for i in (0, 1, b - 1, n - 2):
        for a_, b_ in ((got[:, i].tolist(), ref[:, i].tolist()),
                       (list(map(tuple, got[:, i:i + 2])), list(map(tuple, ref[:, i:i + 2])))):
            stat, df = two_sample_chi2(a_, b_)
            assert stat <= df + 6 * math.sqrt(2 * max(df, 1)) + 12, (i, stat, df)


def test_tables_refused_where_too_large_fall_back_to_the_digit_tables():
    assert count_tables(10**9, 2, 0.4) is None
    r = other_counts_t(jax.random.key(0), 10**6, 2, 0.4, True, 3, 8)  # every count from the exact digit tables
    assert r.shape == (3, 8) and r.dtype == jnp.int32


def test_block_replay_equals_the_round_by_round_chain(monkeypatch):
    """A block of rounds runs on table lookups alone and is replayed round by round (ties and off-band lanes
    redrawn) when some lane needed that: the counts equal, bit for bit, those of the chain that takes every rare
    branch every round (the rare branches only change the lanes that need them), also under vmap."""
    others, b, p, n, warm, lanes = 1999, 5, 0.02, 24, False, 32  # the cold start's first rounds leave the band
    assert count_tables(others, b, p) is not None

    def chain(key):
        return other_counts_t(key, others, b, p, warm, n, lanes)

    _assert_lazy_equals_eager(monkeypatch, chain, jax.random.split(jax.random.key(3), 2), 1)


def _assert_lazy_equals_eager(monkeypatch, chain, keys, one: int) -> np.ndarray:
    """``chain`` under ``vmap`` over ``keys`` and alone on ``keys[one]`` equals, bit for bit, ``chain`` under
    ``vmap`` with every rare branch of schemes/truncated/counts.py taken every time; returns the lone run's counts (the rare
    branches are taken every time after this)."""
    import mcacct.schemes.truncated.counts as counts_mod
    from mcacct.kernels.control import rare_cond
    lazy = np.asarray(jax.vmap(chain)(keys))
    lazy_one = np.asarray(chain(keys[one]))
    monkeypatch.setattr(counts_mod, "rare_cond", lambda pred, rare, common, *ops: rare_cond(True, rare, common, *ops))
    eager = np.asarray(jax.vmap(chain)(keys))
    np.testing.assert_array_equal(lazy, eager)
    np.testing.assert_array_equal(lazy_one, eager[one])
    return lazy_one


def test_the_chain_does_not_depend_on_its_unroll(unroll=3):
    """The lookup rounds' scan unrolled (``unroll``; COUNT_CHAIN_UNROLL per platform) gives the same counts, bit for
    bit, with replayed blocks (the cold start leaves the band) and an unroll that does not divide the block. Cold
    starts only: the warm start changes the chain's first window, not its rounds, and its multinomial history costs
    ~15 s per eager run on the 2-core box."""
    for others, b, p, warm in ((1999, 5, 0.02, False), (5000, 9, 0.01, False)):
        key = jax.random.key(7)
        base = np.asarray(other_counts_t(key, others, b, p, warm, 30, 16, unroll=1))
        np.testing.assert_array_equal(np.asarray(other_counts_t(key, others, b, p, warm, 30, 16, unroll=unroll)),
                                      base)


@pytest.mark.parametrize("warm", [False])  # the warm start changes only the first window (20 s more per run)
def test_tie_replay_equals_the_round_by_round_chain(monkeypatch, warm):
    """A block whose lanes met ties but stayed in the band is replayed by lookups with the ties resolved from bits
    drawn for the whole block at once (no branch per round): the counts equal, bit for bit, those of the chain that
    resolves every tie round by round. Ties are made frequent (a lookup whose word ends in four zero bits is
    flagged too) and their resolution is made to read the fresh bits (it adds the lowest one), in both chains
    alike: equal counts then also say that the replay drew each round's tie bits from the same key."""
    import mcacct.schemes.truncated.counts as counts_mod
    lookup, resolve = counts_mod._lookup, counts_mod._resolve_ties

    def frequent_ties(avail, u, tables):
        look = lookup(avail, u, tables)
        return look._replace(tie=look.tie | ((u & counts_mod.u64(15)) == counts_mod.u64(0)))

    def reading_fresh_bits(value, tie, parts, fresh, tables):
        return resolve(value, tie, parts, fresh, tables) + jnp.where(tie, (fresh[0] & 1).astype(jnp.int32), 0)

    monkeypatch.setattr(counts_mod, "_lookup", frequent_ties)
    monkeypatch.setattr(counts_mod, "_resolve_ties", reading_fresh_bits)
    others, b, p, n, lanes = 5000, 9, 0.01, 40, 16

    def chain(key):
        return other_counts_t(key, others, b, p, warm, n, lanes)

    keys = jax.random.split(jax.random.key(4), 2)
    lazy_one = _assert_lazy_equals_eager(monkeypatch, chain, keys, 0)
    monkeypatch.setattr(counts_mod, "_lookup", lookup)
    monkeypatch.setattr(counts_mod, "_resolve_ties", resolve)
    assert not np.array_equal(np.asarray(chain(keys[0])), lazy_one)  # the made-up ties did change counts
