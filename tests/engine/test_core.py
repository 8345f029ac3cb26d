"""Core accountant: closed forms, reference libraries, key discipline, estimators, rates.

The EVR tests live in tests/evr (test_bounds.py, test_calibrate.py), the command-line ones in
tests/cli/test_commands.py."""

import math

import jax
import numpy as np
import pytest

import mcacct
import oracles
from helpers import run_direction
from mcacct import evr
from mcacct.engine.problem import Problem, chunk_losses
from mcacct.engine.estimate import estimate
from mcacct.evr.calibrate import candidate_key, pilot_key

ALPHA = 1e-3  # two-sided tests use ALPHA per side: each fails with probability <= 1e-3 under the truth


def _within(est, direction, truth):
    s = est.stats[direction]
    m = s.mean_at(0)
    lo = evr.kl_lower_confidence(m, s.count, ALPHA)
    hi = evr.kl_upper_confidence(m, s.count, ALPHA)
    assert lo <= truth <= hi, (direction, lo, m, hi, truth)


@pytest.mark.parametrize("n,b,c_col", [(10, 1, (1.0,)), (12, 3, (1.0, 0.5, 0.25)), (9, 4, (0.5, 0.5, 0.5, 0.5))])
def test_p1_cold_start_is_gaussian_mechanism(n, b, c_col):
    """p = 1, cold start: participations at 1, 1+b, ...: delta(eps) is the Gaussian closed form."""
    scheme = mcacct.BMinSep(1.0, b, n, warm_start=False)
    strategy = mcacct.BandedToeplitz(c_col)
    sq = strategy.column_sq_norms(n)
    sens = math.sqrt(sum(sq[t] for t in range(0, n, b)))
    sigma, eps = 1.5, 0.8
    truth = oracles.gaussian_delta(sens, sigma, eps)
    est = estimate(Problem(scheme, strategy), sigma, jax.random.key(11), 60_000, (eps,), chunk_size=8192)
    for d in ("remove", "add"):
        _within(est, d, truth)
    assert abs(evr.gaussian_delta(sens, sigma, eps) - truth) <= 1e-12 + 1e-9 * truth


def _pld_delta(q, sigma, steps, eps):
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
    return acc.get_delta(eps)


@pytest.mark.parametrize("q,sigma,steps,eps", [(0.2, 1.0, 8, 1.0), (0.05, 0.7, 20, 1.5)])
def test_b1_matches_dp_accounting_poisson(q, sigma, steps, eps):
    """b = 1 is Poisson-subsampled Gaussian: MC delta agrees with dp-accounting's PLD (max of directions)."""
    truth = _pld_delta(q, sigma, steps, eps)
    est = estimate(Problem(mcacct.BMinSep(q, 1, steps)), sigma, jax.random.key(5), 80_000, (eps,),
                   chunk_size=8192)
    m = max(est.stats[d].mean_at(0) for d in ("remove", "add"))
    s = est.stats["remove"].count
    lo, hi = evr.kl_lower_confidence(m, s, ALPHA), evr.kl_upper_confidence(m, s, ALPHA)
    # dp-accounting's PLD is a pessimistic bound; allow its discretisation error (relative 1e-3)
    assert lo <= truth * (1 + 1e-3) and truth <= hi, (lo, m, hi, truth)


def test_same_keys_same_numbers_and_chunk_plan():
    pb = Problem(mcacct.BMinSep(0.2, 3, 40), mcacct.BandedToeplitz((1.0, 0.5)))
    a = chunk_losses(jax.random.key(3), 0.9, pb, 256, "remove")
    b = chunk_losses(jax.random.key(3), 0.9, pb, 256, "remove")
    c = chunk_losses(jax.random.key(4), 0.9, pb, 256, "remove")
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(a), np.asarray(c))
    # a full run equals the merge of its chunk ranges, exactly
    full = run_direction(pb, 0.9, jax.random.key(1), "remove", 1000, (0.5, 1.0), chunk_size=128)
    part1 = run_direction(pb, 0.9, jax.random.key(1), "remove", 1000, (0.5, 1.0), chunk_size=128,
                          chunk_range=(0, 3))
    part2 = run_direction(pb, 0.9, jax.random.key(1), "remove", 1000, (0.5, 1.0), chunk_size=128,
                          chunk_range=(3, 8))
    merged = part1.merge(part2)
    assert merged.count == full.count == 1000
    assert merged.sums == full.sums
    np.testing.assert_array_equal(merged.hist, full.hist)


def test_runner_key_layout_one_chunk_key_for_both_directions_and_every_candidate():
    """The key layout the runner uses (engine/runner.py; docs/soundness.md, "Shared draws"): chunk ``c`` of a run
    keyed ``K`` draws from ``fold_in(K, c)`` (its blocks from ``fold_in(chunk key, j)``, engine.problem.block_keys),
    whatever the shard, device or process that runs it; both directions and every ladder candidate use that one
    chunk key. The run keys of one seed (``mcacct delta`` and shard jobs: the seed's key; ``--candidate j``:
    ``candidate_key``; calibration: ``verification_key``, and ``fold_in(pilot_key, stage)`` for the pilot) never
    give the same chunk key."""
    from mcacct.engine.problem import block_keys
    from mcacct.engine.runner import run_ladder
    from mcacct.statistics.accumulators import DIRECTIONS
    from mcacct.evr.calibrate import verification_key

    pb = Problem(mcacct.BMinSep(0.3, 2, 8), mcacct.BandedToeplitz((1.0, 0.5)))
    key, chunk, sigmas, eps = jax.random.key(3), 64, (0.7, 1.1), (0.0, 0.5, 1.0)
    one = run_ladder(pb, sigmas, key, 3 * chunk, eps, chunk, chunk_ids=[2])  # chunk 2 alone
    chunk_key = jax.random.fold_in(key, 2)
    for j, s in enumerate(sigmas):
        for d in DIRECTIONS:  # the per-direction kernel on fold_in(key, 2) gives the same sums
            losses = np.asarray(chunk_losses(chunk_key, s, pb, chunk, d), np.float64)
            ref = [float(np.sum(np.maximum(0.0, -np.expm1(e - losses)))) for e in eps]
            got = [one.stats[j][d].mean_at(i) * chunk for i in range(len(eps))]
            np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-9)
    # shard-like splits of the chunk range merge to the whole run exactly (the key depends on c alone)
    full = run_ladder(pb, sigmas, key, 3 * chunk, eps, chunk)
    rest = run_ladder(pb, sigmas, key, 3 * chunk, eps, chunk, chunk_ids=[1, 0])
    for j in range(len(sigmas)):
        for d in DIRECTIONS:
            merged = one.stats[j][d].merge(rest.stats[j][d])
            assert merged.count == full.stats[j][d].count and merged.sums == full.stats[j][d].sums
            np.testing.assert_array_equal(merged.hist, full.stats[j][d].hist)
    # distinct chunk keys (and block keys) across chunks and across the run keys of one seed
    root = jax.random.key(0)
    runs = [root, verification_key(root), *(jax.random.fold_in(pilot_key(root), st) for st in (0, 1)),
            *(candidate_key(root, j) for j in range(50))]
    seen = set()
    for k in runs:
        for c in range(6):
            ck = jax.random.fold_in(k, c)
            for bk in [ck, *block_keys(ck, pb, 4 * 4096)]:  # 4 blocks of 4096
                data = tuple(np.asarray(jax.random.key_data(bk)).tolist())
                assert data not in seen
                seen.add(data)


def test_histogram_is_pessimistic_and_close():
    pb = Problem(mcacct.BMinSep(0.3, 2, 30), mcacct.BandedToeplitz((1.0, 0.3)))
    st = run_direction(pb, 0.8, jax.random.key(9), "remove", 20_000, (0.5, 1.0, 2.0), chunk_size=4096)
    for j, e in enumerate((0.5, 1.0, 2.0)):
        exact = st.mean_at(j)
        hist = float(st.histogram_delta(e)[0])
        assert exact <= hist <= exact * math.exp(st.spec.width) + 1e-15


def test_epsilon_from_delta_consistent():
    pb = Problem(mcacct.BMinSep(1.0, 1, 4, warm_start=False))
    est = estimate(pb, 2.0, jax.random.key(2), 50_000, (0.0,), chunk_size=8192)
    e = est.epsilon(0.01)
    # exact epsilon of the Gaussian mechanism with sensitivity 2, sigma 2 at delta 0.01
    lo, hi = 0.0, 20.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if oracles.gaussian_delta(2.0, 2.0, mid) <= 0.01 else (mid, hi)
    assert e["epsilon_estimate"] <= e["epsilon_upper"]
    assert abs(e["epsilon_estimate"] - hi) < 0.1
    assert e["epsilon_upper"] >= hi - 0.01


def test_float32_kernel_close_to_float64_on_same_keys():
    """Precision policy check: float32 loss kernel vs float64 on identical keys (worst relative diff in delta)."""
    sch = mcacct.BMinSep(mcacct.sampling_prob_from_batch_size(4, 1024, 8), 8, 256)
    strat = mcacct.BandedToeplitz(tuple(np.ones(8) / np.sqrt(8)))
    worst = 0.0
    for sigma in (0.6, 1.0):
        d = {}
        for dt in ("float64", "float32"):
            st = run_direction(Problem(sch, strat, dtype=dt), sigma, jax.random.key(0), "remove", 20_000,
                               (0.5, 1.0, 2.0), chunk_size=4096)
            d[dt] = np.array([st.mean_at(j) for j in range(3)])
        rel = np.max(np.abs(d["float32"] - d["float64"]) / np.maximum(d["float64"], 1e-300))
        worst = max(worst, rel)
    assert worst < 1e-3, worst


def test_batch_size_helper():
    p = mcacct.sampling_prob_from_batch_size(1793, 14_745_600, 256)
    p0 = 1793 / 14_745_600
    assert p == pytest.approx(p0 / (1 - p0 * 255))
    assert mcacct.expected_participation_rate(p, 256) == pytest.approx(p0)
    with pytest.raises(ValueError, match="expected_batch_size"):
        mcacct.sampling_prob_from_batch_size(600, 1000, 2)


def test_warm_start_rate_is_stationary():
    sch = mcacct.BMinSep(0.3, 4, 20, warm_start=True)
    x = np.asarray(mcacct.sample_participation(jax.random.key(0), sch, 100_000))
    rate = x.mean(axis=0)
    p0 = sch.participation_rate
    sd = math.sqrt(p0 * (1 - p0) / 100_000)
    assert np.all(np.abs(rate - p0) < 5 * sd)
