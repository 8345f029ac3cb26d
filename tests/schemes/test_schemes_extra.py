"""Extra schemes: multi-attribution (§6), truncated b-min-sep (App. D), cyclic Poisson and balls-in-bins
(§3), non-banded C with r-min-sep (App. B), and the comparison driver.

Exact checks are against brute-force enumeration (tests/oracles_extra.py) at 1e-9 relative in float64;
Monte Carlo checks use Chernoff-KL intervals at ALPHA = 1e-3 per side and fixed seeds.
"""

import argparse
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcacct
import oracles
import oracles_extra as ox
from mcacct import evr
from mcacct.engine.problem import Problem
from mcacct.engine.estimate import estimate
from mcacct.schemes.banded_inverse import BandedInverse, cross_term_allowance, strategy_from_inverse
from mcacct.engine.losses import direction_losses
from mcacct.schemes.balls_in_bins import BallsInBins
from mcacct.schemes.cyclic_poisson import CyclicPoisson
from mcacct.schemes.multi_attribution import MultiAttribution
from mcacct.schemes.truncated import TruncatedBMinSep

ALPHA = 1e-3
SIGMA = 0.7


def _close(got, expected, rtol=1e-9):
    got, expected = np.asarray(got), np.asarray(expected)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * np.max(np.abs(expected)))


def _interval(stats):
    m = stats.mean_at(0)
    return (evr.kl_lower_confidence(m, stats.count, ALPHA), m, evr.kl_upper_confidence(m, stats.count, ALPHA))


def _ys(rng, n, size=6, shift=0.4):
    return np.concatenate([rng.normal(size=(size, n)) * SIGMA + shift, rng.normal(size=(3, n)) * SIGMA])


# ------------------------------------------------------------------------------------------------------------
# multi-attribution
# ------------------------------------------------------------------------------------------------------------
MULTI_CASES = [(6, 2, 0.3, 2, (1.0, 0.5)), (5, 1, 0.4, 3, (1.0,)), (7, 3, 0.5, 2, (0.5, 0.3, 0.9)),
               (6, 3, 0.2, 3, (1.0, 0.0, 0.4)), (4, 2, 1.0, 2, (0.8, 0.6)), (8, 4, 0.15, 1, (0.5, 0.5, 0.5, 0.5))]


@pytest.mark.parametrize("n,b,p,k,c_col", MULTI_CASES)
@pytest.mark.parametrize("recursion", ["scan", "blocked", "linear"])
def test_multi_attribution_matches_enumeration(n, b, p, k, c_col, recursion):
    rng = np.random.default_rng(n * 100 + b * 10 + k)
    ys = _ys(rng, n)
    scheme = MultiAttribution(p, b, n, k)
    got = scheme.log_ratio(jnp.asarray(ys), mcacct.BandedToeplitz(c_col), SIGMA, recursion=recursion)
    _close(got, ox.multi_attribution_log_ratio(ys, SIGMA, c_col, p, b, k))


@pytest.mark.parametrize("n,b,p,c_col", [(9, 3, 0.35, (1.0, 0.5, 0.25)), (40, 4, 0.1, (0.5,) * 4),
                                         (12, 1, 0.3, (1.0,))])
def test_multi_attribution_k1_is_cold_start_bminsep(n, b, p, c_col):
    rng = np.random.default_rng(1)
    ys = jnp.asarray(rng.normal(size=(16, n)) + 0.3)
    strategy = mcacct.BandedToeplitz(c_col)
    got = MultiAttribution(p, b, n, 1).log_ratio(ys, strategy, SIGMA, recursion="scan")
    ref = mcacct.privacy_loss(mcacct.BMinSep(p, b, n, warm_start=False), ys, c_col, SIGMA, recursion="scan")
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-12, atol=1e-12)


def _mixture_pld_delta(sigma, sens, probs, steps, eps):
    from dp_accounting.pld import privacy_loss_distribution as pld
    # h = 2e-3 keeps the (pessimistic) PLD within ~1e-5 relative of h = 1e-4, in a tenth of the time
    d = pld.from_mixture_gaussian_mechanism(sigma, list(sens), list(probs), value_discretization_interval=2e-3)
    return d.self_compose(steps).get_delta_for_epsilon(eps)


def test_multi_attribution_b1_is_group_poisson():
    """b = 1, C = I: per step sum_j Binom(j; k, q) N(j, s^2) vs N(0, s^2), composed n times (dp-accounting)."""
    k, q, n, sigma, eps = 3, 0.1, 10, 1.5, 1.0
    probs = [math.comb(k, j) * q**j * (1 - q) ** (k - j) for j in range(k + 1)]
    truth = _mixture_pld_delta(sigma, range(k + 1), probs, n, eps)
    est = estimate(Problem(MultiAttribution(q, 1, n, k)), sigma, jax.random.key(21), 40_000, (eps,),
                   chunk_size=8000)
    m = max(est.stats[d].mean_at(0) for d in ("remove", "add"))
    s = est.stats["remove"].count
    lo, hi = evr.kl_lower_confidence(m, s, ALPHA), evr.kl_upper_confidence(m, s, ALPHA)
    assert lo <= truth * (1 + 1e-3) and truth <= hi, (lo, m, hi, truth)


# ------------------------------------------------------------------------------------------------------------
# truncated b-min-sep
# ------------------------------------------------------------------------------------------------------------
TRUNC_CASES = [(6, 2, 0.4, True, (1.0, 0.6), 3), (5, 1, 0.5, False, (1.0,), 2),
               (7, 3, 0.3, True, (0.5, 0.3, 0.9), 4), (6, 3, 0.6, False, (1.0, 0.5), 1),
               (5, 2, 1.0, True, (0.7, 0.7), 2)]


@pytest.mark.parametrize("n,b,p,warm,c_col,bmax", TRUNC_CASES)
def test_truncated_matches_enumeration(n, b, p, warm, c_col, bmax):
    rng = np.random.default_rng(n + 10 * b)
    ys = _ys(rng, n, shift=0.0)
    r = rng.integers(0, 2 * bmax + 2, size=ys.shape)
    scheme = TruncatedBMinSep(p, b, n, 50, bmax, warm)
    got = scheme.log_ratio(jnp.asarray(ys), mcacct.BandedToeplitz(c_col), SIGMA, jnp.asarray(r))
    expected = [ox.truncated_log_ratio(y, rr, SIGMA, c_col, p, b, warm, bmax) for y, rr in zip(ys, r)]
    _close(got, expected)


@pytest.mark.parametrize("b,warm", [(1, False), (3, True)])
def test_truncation_far_above_dataset_size_is_untruncated(b, warm):
    n, p, c_col = 16, 0.2, (1.0, 0.5, 0.25)[:b]
    strategy = mcacct.BandedToeplitz(c_col)
    trunc = TruncatedBMinSep(p, b, n, dataset_size=40, max_batch_size=10**6, warm_start=warm)
    base = mcacct.BMinSep(p, b, n, warm)
    for direction in ("remove", "add"):
        y, r = trunc.sample(jax.random.key(3), strategy, SIGMA, 256, direction)
        ref = mcacct.privacy_loss(base, y, c_col, SIGMA)
        np.testing.assert_allclose(np.asarray(trunc.log_ratio(y, strategy, SIGMA, r)), np.asarray(ref),
                                   rtol=1e-12, atol=1e-12)
    # the same holds with real counts r (all far below B_max)
    r = jax.jit(trunc.sample_other_counts, static_argnums=1)(jax.random.key(4), 256)  # one program (eager: ~100)
    np.testing.assert_allclose(np.asarray(trunc.log_ratio(y, strategy, SIGMA, r)), np.asarray(ref),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("b,warm", [(2, True), (2, False), (3, True)])
def test_other_counts_joint_law(b, warm):
    """The sequential-binomial sampler of r has the exact joint law of the M - 1 other examples' batches."""
    n, p, others, m = 4, 0.4, 2, 40_000
    pmf = ox.other_counts_pmf(n, b, p, warm, others)
    draw = jax.jit(TruncatedBMinSep(p, b, n, others + 1, 1, warm).sample_other_counts, static_argnums=1)  # one program
    r = np.asarray(draw(jax.random.key(7), m))
    counts = {}
    for row in map(tuple, r):
        counts[row] = counts.get(row, 0) + 1
    assert set(counts) <= set(pmf)
    for cell, prob in pmf.items():
        c = counts.get(cell, 0)
        assert abs(c - m * prob) <= 5 * math.sqrt(m * prob * (1 - prob)) + 1, (cell, c, m * prob)


# ------------------------------------------------------------------------------------------------------------
# cyclic Poisson and balls-in-bins
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,b,q,c_col", [(7, 3, 0.4, (1.0, 0.5, 0.2)), (8, 2, 1.0, (0.6, 0.8)),
                                         (5, 1, 0.3, (1.0,)), (4, 6, 0.5, (1.0, 0.3))])
@pytest.mark.parametrize("random_phase", [True, False])
def test_cyclic_matches_enumeration(n, b, q, c_col, random_phase):
    rng = np.random.default_rng(n * b)
    ys = _ys(rng, n)
    got = CyclicPoisson(q, b, n, random_phase).log_ratio(jnp.asarray(ys), mcacct.BandedToeplitz(c_col), SIGMA)
    _close(got, ox.cyclic_log_ratio(ys, SIGMA, c_col, q, b, random_phase))


def _poisson_pld_delta(q, sigma, steps, eps):
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
    return acc.get_delta(eps)


def test_cyclic_poisson_matches_pld_composition():
    """Fixed phase: ceil(n/b) compositions of the Poisson-subsampled Gaussian with noise sigma / ||c||;
    the random phase (a mixture over shifts) can only be smaller."""
    n, b, q, sigma, eps = 24, 3, 0.3, 1.0, 1.0
    c_col = (0.6, 0.6, 0.5)
    norm = math.sqrt(sum(v * v for v in c_col))
    truth = _poisson_pld_delta(q, sigma / norm, -(-n // b), eps)
    strategy = mcacct.BandedToeplitz(c_col)
    est = estimate(Problem(CyclicPoisson(q, b, n, random_phase=False), strategy), sigma, jax.random.key(8),
                   60_000, (eps,), chunk_size=6000)
    m = max(est.stats[d].mean_at(0) for d in ("remove", "add"))
    s = est.stats["remove"].count
    lo, hi = evr.kl_lower_confidence(m, s, ALPHA), evr.kl_upper_confidence(m, s, ALPHA)
    assert lo <= truth * (1 + 1e-3) and truth <= hi, (lo, m, hi, truth)
    est_r = estimate(Problem(CyclicPoisson(q, b, n, random_phase=True), strategy), sigma, jax.random.key(9),
                     60_000, (eps,), chunk_size=6000)
    for d in ("remove", "add"):
        assert _interval(est_r.stats[d])[0] <= truth * (1 + 1e-3)


def test_balls_in_bins_is_warm_bminsep_with_p1():
    n, b, c_col = 11, 3, (1.0, 0.5, 0.25)
    rng = np.random.default_rng(5)
    ys = jnp.asarray(_ys(rng, n))
    got = BallsInBins(b, n).log_ratio(ys, mcacct.BandedToeplitz(c_col), SIGMA)
    ref = mcacct.privacy_loss(mcacct.BMinSep(1.0, b, n, warm_start=True), ys, c_col, SIGMA)
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-12, atol=1e-12)
    _close(got, ox.cyclic_log_ratio(np.asarray(ys), SIGMA, c_col, 1.0, b, True))


def test_balls_in_bins_closed_forms():
    sigma, eps = 1.2, 0.7
    # b = 1: deterministic participation in every step = Gaussian mechanism with sensitivity c0 sqrt(n)
    n, c0 = 6, 0.9
    truth = oracles.gaussian_delta(c0 * math.sqrt(n), sigma, eps)
    est = estimate(Problem(BallsInBins(1, n), mcacct.BandedToeplitz((c0,))), sigma, jax.random.key(12),
                   40_000, (eps,), chunk_size=8000)
    for d in ("remove", "add"):
        lo, m, hi = _interval(est.stats[d])
        assert lo <= truth <= hi, (d, lo, m, hi, truth)
    # one iteration, b bins: P = (1/b) N(c0) + (1 - 1/b) N(0) vs N(0), both directions in closed form
    b = 3
    rem, add = ox.single_step_mixture_delta(1.0 / b, c0, sigma * 0.5, eps * 0.5)
    est = estimate(Problem(BallsInBins(b, 1), mcacct.BandedToeplitz((c0,))), sigma * 0.5, jax.random.key(13),
                   40_000, (eps * 0.5,), chunk_size=8000)
    for d, truth in (("remove", rem), ("add", add)):
        lo, m, hi = _interval(est.stats[d])
        assert lo <= truth <= hi, (d, lo, m, hi, truth)


# ------------------------------------------------------------------------------------------------------------
# non-banded C with r-min-sep (App. B)
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("h,n,r,p,warm", [((1.0, -0.6), 8, 2, 0.4, True), ((1.0, -0.5, 0.06), 7, 3, 0.5, False),
                                          ((2.0, -1.0), 8, 1, 0.3, True)])
def test_banded_inverse_bounds_against_enumeration(h, n, r, p, warm):
    strategy = strategy_from_inverse(h, n)
    c = np.asarray(strategy.c_col)
    cinv = np.zeros((n, n))
    for d, v in enumerate(h):
        cinv += np.diag(np.full(n - d, v), -d)
    np.testing.assert_allclose(oracles.banded_toeplitz(n, c) @ cinv, np.eye(n), atol=1e-12)
    rng = np.random.default_rng(len(h) * n)
    ys = _ys(rng, n)
    scheme = BandedInverse(p, r, n, warm)
    lower, upper = scheme.log_ratio_bounds(jnp.asarray(ys), strategy, SIGMA)
    true = oracles.log_likelihood_ratio(ys, SIGMA, c, p, r, warm)
    gam = ox.allowance(c, n, r)
    np.testing.assert_allclose(cross_term_allowance(c, n, r), gam, rtol=1e-12, atol=1e-15)
    assert np.all(gam >= ox.max_cross_sum(c, n, r) - 1e-12)  # the allowance dominates every cross sum
    assert np.all(np.asarray(lower) <= true + 1e-12) and np.all(true <= np.asarray(upper) + 1e-12)
    _close(upper, ox.separated_sum_log_ratio(ys, SIGMA, c, p, r, warm))
    _close(lower, ox.separated_sum_log_ratio(ys, SIGMA, c, p, r, warm, shift=gam))


def test_banded_inverse_with_banded_c_is_exact():
    n, r, p, c_col = 10, 3, 0.3, (1.0, 0.4)
    ys = jnp.asarray(_ys(np.random.default_rng(2), n))
    lower, upper = BandedInverse(p, r, n).log_ratio_bounds(ys, mcacct.BandedToeplitz(c_col), SIGMA)
    ref = mcacct.privacy_loss(mcacct.BMinSep(p, r, n), ys, c_col, SIGMA)
    np.testing.assert_allclose(np.asarray(lower), np.asarray(ref), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(upper), np.asarray(ref), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------------------
# samplers agree with the losses: E_P[Q/P] = 1 and E_Q[P/Q] = 1 (<= 1 for the bounds of App. B)
# ------------------------------------------------------------------------------------------------------------
IDENTITY_SCHEMES = [
    ("multi", MultiAttribution(0.3, 3, 12, 2), (1.0, 0.5, 0.3), "eq"),
    ("trunc", TruncatedBMinSep(0.3, 2, 12, 6, 2, True), (1.0, 0.5), "eq"),
    ("trunc-cold-b1", TruncatedBMinSep(0.4, 1, 8, 5, 1, False), (1.0,), "eq"),
    ("cyclic", CyclicPoisson(0.5, 3, 12, True), (1.0, 0.5, 0.3), "eq"),
    ("bib", BallsInBins(4, 12), (0.7, 0.7), "eq"),
    ("inverse", BandedInverse(0.3, 2, 12, True), None, "le"),
]


@pytest.mark.parametrize("name,scheme,c_col,kind", IDENTITY_SCHEMES, ids=[s[0] for s in IDENTITY_SCHEMES])
def test_sampler_and_loss_are_one_pair(name, scheme, c_col, kind):
    strategy = strategy_from_inverse((1.0, -0.5), 12) if c_col is None else mcacct.BandedToeplitz(c_col)
    sigma, m = 1.3, 20_000
    # both directions' losses (the generic kernel) as one program: the same functions on the same key, compiled
    # once instead of once per direction (XLA computes the draws they share once; the truncated scheme's count draws
    # dominate its compile time)
    both = jax.jit(lambda key, sig: [direction_losses(scheme.mechanism(strategy), key, sig, m, d)
                                     for d in ("remove", "add")])
    for direction, loss in zip(("remove", "add"), both(jax.random.key(31), sigma)):
        v = np.exp(-np.asarray(loss))  # Q/P under P, P/Q under Q
        mean, sd = v.mean(), v.std() / math.sqrt(m)
        if kind == "eq":
            assert abs(mean - 1.0) <= 6 * sd, (direction, mean, sd)
        else:
            assert 0.5 < mean <= 1.0 + 6 * sd, (direction, mean, sd)


# ------------------------------------------------------------------------------------------------------------
# validation, calibration path, comparison
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make,needle", [
    (lambda: MultiAttribution(0.1, 2, 10, 0), "max_examples_per_user"),
    (lambda: MultiAttribution(0.0, 2, 10, 2), "sampling_prob"),
    (lambda: TruncatedBMinSep(0.1, 2, 10, 0, 5), "dataset_size"),
    (lambda: TruncatedBMinSep(0.1, 2, 10, 100, 0), "max_batch_size"),
    (lambda: TruncatedBMinSep(0.1, 2, 10, 100, 5, warm_start=1), "warm_start"),
    (lambda: CyclicPoisson(1.5, 2, 10), "sampling_prob"),
    (lambda: CyclicPoisson(0.5, 2, 10, random_phase="yes"), "random_phase"),
    (lambda: BallsInBins(0, 10), "cycle_length"),
    (lambda: BallsInBins(2, 0), "iterations"),
    (lambda: BandedInverse(0.2, 0, 10), "min_sep"),
    (lambda: strategy_from_inverse((0.0, 1.0), 5), "inverse_bands"),
    (lambda: strategy_from_inverse((1.0, 0.5), 5), "inverse_bands"),
    (lambda: Problem(MultiAttribution(0.1, 2, 10, 2), mcacct.BandedToeplitz((1.0, 1.0, 1.0))), "min_sep"),
])
def test_bad_input_names_parameter(make, needle):
    with pytest.raises(ValueError, match=needle):
        make()


def test_sensitivity_bounds():
    st = mcacct.BandedToeplitz((1.0, 0.5))
    base = st.worst_case_sensitivity(10, 2)
    assert MultiAttribution(0.1, 2, 10, 3).sensitivity_bound(st) == pytest.approx(3 * base)
    assert TruncatedBMinSep(0.1, 2, 10, 100, 5).sensitivity_bound(st) == pytest.approx(3 * base)
    assert TruncatedBMinSep(0.1, 2, 10, 5, 5).sensitivity_bound(st) == pytest.approx(base)
    assert CyclicPoisson(0.1, 2, 10).sensitivity_bound(st) == pytest.approx(base)
    assert BandedInverse(0.1, 2, 10).sensitivity_bound(st) == pytest.approx(base)
    inv = strategy_from_inverse((1.0, -0.5), 10)
    c = np.asarray(inv.c_col)
    worst = max(np.linalg.norm(oracles.banded_toeplitz(10, c) @ x) for x, pr in
                oracles.enumerate_patterns(10, 2, 0.5, False) if pr > 0)
    assert BandedInverse(0.1, 2, 10).sensitivity_bound(inv) >= worst


def test_compare_cli_json():
    from mcacct.cli.compare import add_compare_parser, cmd_compare
    from mcacct.report.compare import compare_schemes
    parser = argparse.ArgumentParser(prog="mcacct")
    add_compare_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", "--iterations", "8", "--min-sep", "2", "--batch-size", "4",
                              "--dataset-size", "16", "--c-col", "1,0.5", "--epsilon", "1", "--delta", "0.05",
                              "--samples", "4000", "--schemes", "b-min-sep,cyclic-poisson,balls-in-bins",
                              "--no-pld", "--json", "--quiet"])
    assert args.func is cmd_compare
    out = json.loads(json.dumps(args.func(args)))
    rows = {r["scheme"]: r for r in out["rows"]}
    assert set(rows) == {"b-min-sep", "cyclic-poisson", "balls-in-bins"}
    for r in rows.values():
        assert 0 < r["sigma"] <= r["top_sigma"] and r["overall_delta"] <= 0.05 and r["sigma_pld"] is None
    assert rows["cyclic-poisson"]["params"]["sampling_prob"] == pytest.approx(0.5)
    assert rows["balls-in-bins"]["params"]["cycle_length"] == 4
    with pytest.raises(ValueError, match="expected_batch_size"):
        compare_schemes(1.0, 0.05, 8, 2, 10, 16)
    with pytest.raises(ValueError, match="schemes"):
        compare_schemes(1.0, 0.05, 8, 2, 4, 16, schemes="nope")


def test_compare_pld_columns_come_from_the_pld_accountant(monkeypatch):
    """PLD columns: the rows' PLD specs go through mcacct.pld.pld_calibrate (scaled), None with a note when it
    fails."""
    from mcacct import pld
    from mcacct.report import compare

    calls = []

    def fake_calibrate(spec, eps, delta):
        calls.append(spec)
        return 1.25

    monkeypatch.setattr(pld, "pld_calibrate", fake_calibrate)
    out = compare.compare_schemes(1.0, 0.05, 4, 1, 4, 16, (0.8,), schemes=["cyclic-poisson", "b-min-sep"],
                                  num_samples=4000)
    rows = {r["scheme"]: r for r in out["rows"]}
    assert rows["cyclic-poisson"]["sigma_pld"] == 1.25 and rows["b-min-sep"]["sigma_pld"] == 1.25
    assert calls[0].sampling_prob == pytest.approx(0.25) and calls[1].sensitivity == 0.8

    def failing(spec, eps, delta):
        raise ValueError("no sigma")

    monkeypatch.setattr(pld, "pld_calibrate", failing)
    out = compare.compare_schemes(1.0, 0.05, 4, 1, 4, 16, (0.8,), schemes=["b-min-sep"], num_samples=4000)
    assert out["rows"][0]["sigma_pld"] is None and "no sigma" in out["rows"][0]["pld_note"]