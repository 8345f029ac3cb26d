"""The screened counts of truncated b-min-sep (:mod:`mcacct.schemes.truncated.screen`) have the law of the chain.

* against an independent simulation of the ``M - 1`` other examples' b-min-sep chains: marginals, pairs, the
  fraction of samples with a truncated round and the counts of the truncated rounds, warm and cold start;
* per-sample randomness: the buffered chain (several rounds of a small buffer) gives the dense draws' values;
* the host-built pieces deterministically against exact values: ``tau``'s thresholds, the conditioned tail table,
  and the hypergeometric inversion's integer weights (hypothesis over small cases, and the §7.4 scale);
* the platform table: CPUs screen, accelerators run every sample's chain, and the scheme charges the larger bound;
* the block pass (no branch per round) gives the round-by-round counts bit for bit, also under ``vmap``, and
  replays only the blocks with a rare lane.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mcacct.schemes.truncated.screen as screen
from mcacct.schemes.truncated.counts import count_tables, other_counts_t
from mcacct.core.platform import PLATFORM_ENV
from mcacct.cli.flags import scheme_json
from mcacct.engine.problem import Problem
from mcacct.strategies.banded import BandedToeplitz
from mcacct.schemes.truncated import TruncatedBMinSep
from mcacct.schemes.truncated import block_counts
from mcacct.schemes.truncated.block_counts import count_draws
from mcacct.schemes.truncated.screen import hypergeometric_draw, hypergeometric_tv, hypergeometric_weights, screen_plan

from helpers import simulate_examples, table_weights, two_sample_chi2

CASES = [  # (others, b, p, n, B_max): flag probability 0.10-0.12, a truncated round in ~8% / ~1% of samples
    (999, 2, 0.02, 10, 31),
    (399, 3, 0.05, 20, 32),
]


def _binom_pmf(trials, p, k):
    return mpmath.binomial(trials, k) * mpmath.mpf(p) ** k * (1 - mpmath.mpf(p)) ** (trials - k)


def _hyper_pmf(total, marked, draws, x):
    if x < max(0, draws - (total - marked)) or x > min(marked, draws):
        return mpmath.mpf(0)
    return mpmath.binomial(marked, x) * mpmath.binomial(total - marked, draws - x) / mpmath.binomial(total, draws)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("warm", [True, False])
def test_screened_counts_match_an_independent_simulation_of_the_other_examples(case, warm):
    others, b, p, n, bmax = case
    assert screen_plan(others, b, p, n, bmax) is not None
    samples = 8000
    got = np.asarray(count_draws(jax.random.key(21), others, b, p, warm, n, bmax, samples, dense=True).dense_t).T
    ref = simulate_examples(np.random.default_rng(8), others, b, p, n, warm, samples)
    se = np.sqrt(got.var(axis=0) / samples + ref.var(axis=0) / samples) + 1e-12
    assert np.all(np.abs(got.mean(axis=0) - ref.mean(axis=0)) <= 5 * se)
    # the quantity screening must not bias: which samples have a truncated round, and their truncated counts
    t_got, t_ref = np.any(got >= bmax, axis=1), np.any(ref >= bmax, axis=1)
    se_t = math.sqrt((t_got.var() + t_ref.var()) / samples)
    assert abs(t_got.mean() - t_ref.mean()) <= 5 * se_t, (t_got.mean(), t_ref.mean())
    assert t_ref.mean() > 0.005
    for a_, b_ in ((got[got >= bmax].tolist(), ref[ref >= bmax].tolist()),
                   (np.sum(got >= bmax, axis=1).tolist(), np.sum(ref >= bmax, axis=1).tolist())):
        stat, df = two_sample_chi2(a_, b_)
        assert stat <= df + 6 * math.sqrt(2 * max(df, 1)) + 12, (stat, df)
    for i in (0, 1, n // 2, n - 2):  # marginals and pairs (r_i, r_{i+1})
        for a_, b_ in ((got[:, i].tolist(), ref[:, i].tolist()),
                       (list(map(tuple, got[:, i:i + 2])), list(map(tuple, ref[:, i:i + 2])))):
            stat, df = two_sample_chi2(a_, b_)
            assert stat <= df + 6 * math.sqrt(2 * max(df, 1)) + 12, (i, stat, df)


def test_buffered_chain_gives_the_dense_draws_values(monkeypatch):
    """A buffer of 8 samples (several rounds of it) flags the same samples as the dense draws, and the rows asked
    for are the dense rows, bit for bit."""
    others, b, p, n, bmax = CASES[1]
    monkeypatch.setattr(screen, "chain_buffer", lambda num_samples, flag_prob: 8)
    key, samples = jax.random.key(4), 128
    dense = count_draws(key, others, b, p, True, n, bmax, samples, dense=True)
    buffered = jax.jit(lambda k: count_draws(k, others, b, p, True, n, bmax, samples).truncated)(key)
    np.testing.assert_array_equal(np.asarray(buffered), np.asarray(jnp.any(dense.dense_t >= bmax, axis=0)))
    assert 0 < int(np.sum(buffered))
    idx = jnp.asarray([5, 77, 3, 127])
    np.testing.assert_array_equal(np.asarray(dense.rows_t(idx)), np.asarray(dense.dense_t)[:, np.asarray(idx)])


def test_platform_table_chooses_the_sampler(monkeypatch):
    """``AUTO_SCREEN``: traced for a GPU (or TPU), ``count_draws`` gives every sample's chain, the same values as
    :func:`other_counts_t`; traced for a CPU, the screened draws (``screen=True``), which differ. The scheme's
    ``count_sampler`` and the reports' ``scheme`` object say which."""
    others, b, p, n, bmax = CASES[0]
    key, samples = jax.random.key(9), 64
    assert set(screen.AUTO_SCREEN) == {"cpu", "gpu", "tpu"} and all(why for _, why in screen.AUTO_SCREEN.values())
    assert set(screen.SCREEN_BLOCK_PASS) == {"cpu", "gpu", "tpu"} and not screen.SCREEN_BLOCK_PASS["cpu"]
    scheme = TruncatedBMinSep(p, b, n, others + 1, bmax, True)
    problem = Problem(scheme, BandedToeplitz((1.0, 0.5)))
    assert TruncatedBMinSep(p, b, n, bmax, bmax, True).count_sampler == "none"   # M <= B_max: r is not drawn
    for platform in ("gpu", "tpu"):
        monkeypatch.setenv(PLATFORM_ENV, platform)
        assert not block_counts.screens_by_default()
        assert scheme.count_sampler == "chain" and scheme_json(problem)["count_sampler"] == "chain"
        chain = np.asarray(other_counts_t(key, others, b, p, True, n, samples))
        np.testing.assert_array_equal(np.asarray(count_draws(key, others, b, p, True, n, bmax, samples,
                                                             dense=True).dense_t), chain)
    monkeypatch.setenv(PLATFORM_ENV, "cpu")
    assert block_counts.screens_by_default()
    assert scheme.count_sampler == "screened" and scheme_json(problem)["count_sampler"] == "screened"
    got = np.asarray(count_draws(key, others, b, p, True, n, bmax, samples, dense=True).dense_t)
    np.testing.assert_array_equal(got, np.asarray(count_draws(key, others, b, p, True, n, bmax, samples, dense=True,
                                                              screen=True).dense_t))
    assert not np.array_equal(got, np.asarray(other_counts_t(key, others, b, p, True, n, samples)))


@pytest.mark.parametrize("case", CASES)
def test_draw_law_tv_charges_the_larger_of_both_samplers(case):
    others, b, p, n, bmax = case
    plan, tables = screen_plan(others, b, p, n, bmax), count_tables(others, b, p)
    scheme = TruncatedBMinSep(p, b, n, others + 1, bmax, False)   # cold start: no virtual history term
    assert scheme.draw_law_tv() == max(plan.tv, n * tables.tv_per_draw) > 0


@pytest.mark.parametrize("case", CASES)
def test_tau_thresholds_and_tail_table_equal_the_exact_law(case):
    others, b, p, n, bmax = case
    plan = screen_plan(others, b, p, n, bmax)
    mpmath.mp.dps = 60
    q = mpmath.fsum(_binom_pmf(others, p, k) for k in range(bmax, others + 1))
    for t in range(n):
        exact = 1 - (1 - q) ** (t + 1)
        assert abs(mpmath.mpf(int(plan.thresholds[t])) / 2**64 - exact) <= 2 * 2.0**-64, t
    assert abs(plan.flag_prob - float(1 - (1 - q) ** n)) <= 1e-15
    w = table_weights(plan.tail, plan.tail_bits)
    assert sum(w) == 1 << 64
    ks = range(plan.tail_offset, plan.tail_offset + len(w))
    l1 = mpmath.fsum(abs(mpmath.mpf(int(wk)) / 2**64 - _binom_pmf(others, p, k) / q) for k, wk in zip(ks, w))
    l1 += 1 - mpmath.fsum(_binom_pmf(others, p, k) for k in ks) / q     # conditioned mass beyond the table
    assert float(l1) <= 2 * plan.tv, (float(l1), plan.tv)


def _implied_l1(total, marked, draws, half):
    lowest, cum, _, _ = hypergeometric_weights(total, jnp.asarray(marked), jnp.asarray(draws), half)
    cum = [int(c) for c in np.asarray(cum)]
    weights = [c - prev for c, prev in zip(cum, [0] + cum[:-1])]
    inside = [_hyper_pmf(total, marked, draws, int(lowest) + j) for j in range(len(weights))]
    l1 = mpmath.fsum(abs(mpmath.mpf(w) / cum[-1] - e) for w, e in zip(weights, inside))
    return float(l1 + (1 - mpmath.fsum(inside)))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 400), st.data())
def test_hypergeometric_weights_are_the_exact_law_small(total, data):
    mpmath.mp.dps = 40
    marked = data.draw(st.integers(0, total))
    draws = data.draw(st.integers(0, min(total, 60)))
    half = 45
    assert _implied_l1(total, marked, draws, half) <= 2 * hypergeometric_tv(half, max(draws, 1))


@pytest.mark.parametrize("total,marked,draws", [(14_745_599, 457_000, 2100), (14_745_599, 460_123, 2559),
                                                (14_745_599, 0, 2048), (1_000_000, 999_000, 3000)])
def test_hypergeometric_weights_are_the_exact_law_at_scale(total, marked, draws):
    mpmath.mp.dps = 40
    half = math.ceil(math.sqrt(30.0 * draws)) + 1
    tv = hypergeometric_tv(half, draws)
    assert tv < 1e-12
    assert _implied_l1(total, marked, draws, half) <= 2 * tv


def test_hypergeometric_draws_have_the_exact_law():
    total, marked, draws, count = 1000, 300, 50, 20000
    keys = jax.random.split(jax.random.key(9), count)
    got = np.asarray(hypergeometric_draw(keys, total, jnp.full(count, marked), jnp.full(count, draws), 40))
    mpmath.mp.dps = 30
    values = np.arange(draws + 1)
    expected = np.array([float(_hyper_pmf(total, marked, draws, int(x))) for x in values]) * count
    observed = np.bincount(got, minlength=draws + 1)
    keep = expected >= 10
    obs = np.append(observed[keep], observed[~keep].sum())
    exp_ = np.append(expected[keep], expected[~keep].sum())
    stat = float(np.sum((obs - exp_) ** 2 / exp_))
    df = len(obs) - 1
    assert stat <= df + 6 * math.sqrt(2 * df) + 12, (stat, df)


def _replays_counted(monkeypatch):
    """Count, at run time, the blocks :func:`screened_counts_t`'s block pass sends to the round-by-round replay."""
    calls, plain = [], screen.rare_cond

    def spy(rare, rare_fn, common_fn, *ops):
        if getattr(rare_fn, "__name__", "") == "replay_block":
            def counted(*o):
                jax.debug.callback(lambda: calls.append(1))
                return rare_fn(*o)
            return plain(rare, counted, common_fn, *ops)
        return plain(rare, rare_fn, common_fn, *ops)

    monkeypatch.setattr(screen, "rare_cond", spy)
    return calls


@pytest.mark.parametrize("case,warm,replays", [
    ((999, 2, 0.02, 10, 31), True, 0),         # a rejected pair in about 1 round in 80: redrawn within the pass
    ((399, 8, 0.03, 60, 26), False, 1),        # cold start: the first block leaves the band, it alone is replayed
    ((5000, 32, 0.002, 400, 24), True, 0),     # long blocks (31 rounds)
])
def test_block_pass_gives_the_round_by_round_counts(monkeypatch, case, warm, replays):
    """The counts drawn by blocks (``block_pass``) equal the round-by-round ones bit for bit, and the blocks are
    replayed only where a lane tied, left its band or was rejected twice: none in the warm cases, where hundreds of
    lanes reach their ``tau`` and (first case) dozens of pairs are rejected and redrawn without a replay."""
    others, b, p, n, bmax = case
    plan = screen_plan(others, b, p, n, bmax)
    k_tau, k_chain = jax.random.split(jax.random.key(7))
    taus = screen.screen_taus(k_tau, plan, 2048)
    flagged = int(jnp.sum(taus < n))
    lanes = jnp.nonzero(taus < n, size=flagged)[0]
    calls = _replays_counted(monkeypatch)

    def counts(block_pass):
        return np.asarray(jax.jit(lambda k, l, t: screen.screened_counts_t(k, l, t, others, b, p, warm, n, bmax, plan,
                                                                           block_pass))(k_chain, lanes, taus[lanes]))

    rounds = counts(False)
    assert not calls
    np.testing.assert_array_equal(counts(True), rounds)
    assert len(calls) == replays and -(-n // (b - 1)) >= 8
    q = 1.0 - (1.0 - plan.flag_prob) ** (1.0 / n)       # P[r' >= B_max] per round
    if case[0] == 999:
        assert q * float(jnp.sum(taus[lanes])) > 10      # expected rejected pairs before tau
    if warm:   # samples with a truncated round among the flagged ones
        assert 0 < int(np.sum(np.any(rounds >= bmax, axis=0))) < flagged


def test_block_pass_under_vmap_gives_the_same_counts(monkeypatch):
    """As the engine runs it on an accelerator (blocks under ``vmap``): the truncated flags and the rows asked for
    are the same by blocks and round by round."""
    others, b, p, n, bmax = CASES[1]
    keys = jax.random.split(jax.random.key(5), 3)
    idx = jnp.asarray([0, 17, 255, 300])

    def run(block_pass):
        monkeypatch.setitem(screen.SCREEN_BLOCK_PASS, "cpu", block_pass)

        def one(k):
            d = count_draws(k, others, b, p, True, n, bmax, 512, screen=True)
            return d.truncated, d.rows_t(idx)
        return [np.asarray(a) for a in jax.jit(jax.vmap(one))(keys)]

    (t_rounds, r_rounds), (t_blocks, r_blocks) = run(False), run(True)
    np.testing.assert_array_equal(t_blocks, t_rounds)
    np.testing.assert_array_equal(r_blocks, r_rounds)
    assert 0 < int(t_rounds.sum())


@pytest.mark.parametrize("screened", [False, True])
def test_prepared_counts_read_back_the_drawn_counts(screened):
    """``prepare_counts`` then ``counts_from_prepared`` (every sample's chain, or screened): the flags of
    ``count_draws``, the kept rows its rows, and the rows beyond the kept ones drawn again to the same values."""
    others, b, p, n, bmax = CASES[1]
    key, samples, kept = jax.random.key(6), 512, 2
    drawn = count_draws(key, others, b, p, True, n, bmax, samples, screen=screened)
    prepared = block_counts.prepare_counts(key, others, b, p, True, n, bmax, samples, kept, screened)
    read = block_counts.counts_from_prepared(prepared, key, others, b, p, True, n, bmax, samples, screened)
    np.testing.assert_array_equal(np.asarray(prepared.truncated), np.asarray(drawn.truncated))
    idx = jnp.nonzero(drawn.truncated, size=8, fill_value=samples)[0]
    assert int(jnp.sum(idx < samples)) == 8 > kept     # every row asked for is a truncated sample
    np.testing.assert_array_equal(np.asarray(prepared.kept_idx), np.asarray(idx[:kept]))
    np.testing.assert_array_equal(np.asarray(read.rows_t(idx[:8])), np.asarray(drawn.rows_t(idx[:8])))
