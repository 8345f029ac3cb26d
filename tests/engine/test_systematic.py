"""The systematic terms of issue 10: normal draws (symmetric, never 0 or 1, bounded coupling), the
sampler's constants against mpmath, chunk-sum slack, the loss shift, float32 refusal, overall delta."""

import subprocess
import sys
from fractions import Fraction

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import mcacct
from mcacct.engine import systematic
from mcacct.engine.problem import Problem
from mcacct.statistics.accumulators import FIXED_BITS, DirectionStats, HistogramSpec, chunk_statistics
from mcacct.kernels.normal import _ndtri_lower, normal_from_bits

mpmath.mp.dps = 40


def _exact_ndtri(u: float) -> float:
    return float(-mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * mpmath.mpf(u)))


def test_normal_draws_are_finite_symmetric_and_bounded_at_every_extreme_word():
    top = np.uint64(2**64 - 1)
    words = np.array([0, top, top >> np.uint64(1), (top >> np.uint64(1)) + np.uint64(1), 2**11, 2**11 - 1,
                      (2**52 - 1) << 11, ((2**52 - 1) << 11) | (1 << 63)], np.uint64)
    z = np.asarray(normal_from_bits(jnp.asarray(words)))
    assert np.all(np.isfinite(z)) and np.all(z != 0.0)
    # the largest magnitudes are reached with both signs, and equal
    assert z.max() == -z.min()
    assert 8.29 < z.max() <= systematic.NORMAL_MAX_ABS
    # sign bit flips the sign exactly, for every cell
    rng = np.random.default_rng(1)
    w = rng.integers(0, 2**63, 10_000, dtype=np.uint64)
    pos, neg = np.asarray(normal_from_bits(jnp.asarray(w))), np.asarray(normal_from_bits(jnp.asarray(w | (1 << 63))))
    np.testing.assert_array_equal(pos, -neg)


def test_normal_max_abs_and_quantisation_constant_match_mpmath():
    w = mpmath.mpf(2) ** -53
    z0, z1 = -mpmath.sqrt(2) * mpmath.erfinv(1 - w), -mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * w)
    phi = lambda z: mpmath.exp(-z * z / 2) / mpmath.sqrt(2 * mpmath.pi)  # noqa: E731
    quant = 2 * (2 * phi(z0) - phi(z1)) + 2 * (w / 4) * (abs(z1) + w / phi(z1))
    assert float(quant) <= systematic._NORMAL_QUANT_L1
    assert float(abs(z0)) <= systematic.NORMAL_MAX_ABS
    assert systematic.NORMAL_COUPLING_L1 < 2e-15


def test_ndtri_relative_error_within_the_stated_bound():
    rng = np.random.default_rng(0)
    k = np.unique(np.concatenate([rng.integers(0, 2**52, 1500), (2.0 ** rng.uniform(0, 52, 1500)).astype(np.int64),
                                  np.arange(40), 2**52 - 1 - np.arange(40)]))
    u = (k.astype(np.float64) + 0.5) * 2.0**-53
    got = np.asarray(jax.jit(_ndtri_lower)(jnp.asarray(u)))
    ref = np.array([_exact_ndtri(float(x)) for x in u])
    rel = np.abs(got - ref) / np.abs(ref)
    assert rel.max() <= systematic.NDTRI_REL_ERROR / 2, rel.max()


def test_chunk_sum_slack_covers_float_summation():
    """A float64 chunk sum that rounded 1000 small terms away still yields an integer total >= the exact sum."""
    terms = [1.0] + [2.0**-53] * 1000
    float_sum = 0.0
    for t in terms:  # sequential: every small term is lost
        float_sum += t
    assert float_sum == 1.0
    st = DirectionStats((1.0,))
    st.add_chunk(len(terms), [float_sum], np.zeros(HistogramSpec().bins + 2, np.int64))
    exact = sum(Fraction(t) for t in terms)
    assert Fraction(st.sums[0], 2**FIXED_BITS) >= exact


def test_loss_shift_raises_every_contribution():
    losses = jnp.asarray([-1.0, 0.5, 1.0, 2.0, 3.0])
    eps = jnp.asarray([1.0])
    a, _ = chunk_statistics(losses, 5, eps, HistogramSpec())
    b, _ = chunk_statistics(losses, 5, eps, HistogramSpec(), 1e-6)
    assert float(b[0]) > float(a[0])


@pytest.mark.parametrize("b,p,sigma", [(8, 0.03, 0.7), (64, 0.95, 2.0), (256, 0.5, 0.3)])
def test_loss_error_bound_dominates_observed_kernel_differences(b, p, sigma):
    """Sanity: the float64 bound exceeds the gap between two float64 recursions and the float64/float32 gap
    is not covered (which is why float32 cannot certify)."""
    from mcacct.kernels.sliding import participation_log_ratios_t
    from mcacct.kernels.recursion import recursion_log_ratio_t
    n = 4 * b + 3
    scheme = mcacct.BMinSep(p, b, n)
    strategy = mcacct.BandedToeplitz((0.5,) * 4)
    eta = systematic.loss_error_bound(Problem(scheme, strategy), sigma)
    y = np.asarray(mcacct.sample_y(jax.random.key(b), scheme, strategy, sigma, 64)).T
    ell = participation_log_ratios_t(jnp.asarray(y), sigma, strategy.c_col)
    lin = np.asarray(recursion_log_ratio_t(ell, b, p, True, "linear"))
    scan = np.asarray(recursion_log_ratio_t(ell, b, p, True, "scan"))
    assert np.abs(lin - scan).max() <= eta
    assert 0 < eta < 1e-6


def test_systematic_terms_are_small_at_production_size():
    p = mcacct.sampling_prob_from_batch_size(1793, 14_745_600, 256)
    pr = Problem(mcacct.BMinSep(p, 256, 7200), mcacct.BandedToeplitz((1 / 16,) * 256))
    bound = systematic.systematic_bound(pr, 0.44)
    assert bound.delta < 1e-10 and bound.loss_shift < 1e-6
    assert systematic.systematic_bound(Problem(pr.scheme, pr.strategy, dtype="float32"), 0.44).loss_shift == 0.0


def test_calibrate_refuses_float32_and_reports_systematic_within_target():
    problem = Problem(mcacct.BMinSep(0.2, 2, 16), mcacct.BandedToeplitz((0.6, 0.4)))
    with pytest.raises(ValueError, match="float32"):
        mcacct.calibrate(Problem(problem.scheme, problem.strategy, dtype="float32"), 2.0, 1e-2, jax.random.key(0))
    res = mcacct.calibrate(problem, 2.0, 1e-2, jax.random.key(0), pilot_samples=2000)
    assert res.systematic_delta > 0
    assert res.overall_delta == pytest.approx(res.statistical_delta + res.systematic_delta, rel=1e-12)
    assert res.overall_delta <= 1e-2
    assert all(c["systematic_delta"] <= res.systematic_delta for c in res.candidates)


@pytest.mark.slow
def test_cli_calibrate_float32_exits_2_without_traceback():
    r = subprocess.run([sys.executable, "-m", "mcacct", "calibrate", "--dtype", "float32", "--quiet"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "float32" in r.stderr and "Traceback" not in r.stderr


def test_estimate_reports_systematic_and_certification():
    problem = Problem(mcacct.BMinSep(0.2, 2, 16), mcacct.BandedToeplitz((0.6, 0.4)))
    est = mcacct.estimate(problem, 1.0, jax.random.key(0), 2000)
    assert est.certified and est.systematic > 0
    d = est.delta(0)
    assert d["delta_upper"] >= d["remove"]["delta_estimate"] + est.systematic
    est32 = mcacct.estimate(Problem(problem.scheme, problem.strategy, dtype="float32"), 1.0, jax.random.key(0), 2000)
    assert not est32.certified
