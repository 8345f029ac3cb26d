"""The confidence bounds and the Gaussian mechanism's certified delta stay upper bounds in floating point, checked in
60-digit arithmetic where float64 cancels: the KL divergence at huge sample counts, the Gaussian profile at epsilon
near 640 (an audit's cases, stop 75; docs/soundness.md, "The KL bound in floating point")."""

import mpmath
import pytest

from mcacct.statistics import confidence
from mcacct.statistics.gaussian import gaussian_delta, gaussian_sigma

mpmath.mp.dps = 60


def mp_kl(a, b):
    a, b = mpmath.mpf(a), mpmath.mpf(b)
    return a * mpmath.log(a / b) + (1 - a) * (mpmath.log1p(-a) - mpmath.log1p(-b))


def mp_gaussian_delta(d, s, e):
    d, s, e = mpmath.mpf(d), mpmath.mpf(s), mpmath.mpf(e)
    a, b = d / (2 * s), e * s / d
    return mpmath.ncdf(a - b) - mpmath.exp(e) * mpmath.ncdf(-a - b)


@pytest.mark.parametrize("target,samples", [(1e-3, 10 ** 11), (1e-3, 10 ** 15), (1e-3, 10 ** 17), (1e-8, 10 ** 13),
                                            (1e-12, 10 ** 17)])
def test_overall_delta_is_an_upper_bound_at_huge_sample_counts(target, samples):
    """Before stop 75, q = exp(-s KL) lost s times KL's round-off: at (1e-3, 1e17) the overall delta was 2.9e-13
    below its exact value."""
    base = confidence.base_delta_for_target(samples, target)
    d, q = confidence.overall_delta_terms(samples, base)
    exact_q = mpmath.exp(-samples * mp_kl(base, d))
    assert q >= exact_q
    assert confidence.overall_delta(samples, base) >= mpmath.mpf(d) + exact_q * (1 - mpmath.mpf(d))


@pytest.mark.parametrize("mean,samples", [(1e-3, 10 ** 15), (0.3, 10 ** 16), (1e-9, 10 ** 17)])
def test_kl_confidence_bounds_hold_at_huge_sample_counts(mean, samples):
    alpha = 1e-6
    target = mpmath.log(1 / mpmath.mpf(alpha)) / samples
    hi = confidence.kl_upper_confidence(mean, samples, alpha)
    lo = confidence.kl_lower_confidence(mean, samples, alpha)
    assert mp_kl(mean, hi) >= target       # at or beyond the exact bound on each side
    assert mp_kl(mean, lo) >= target


@pytest.mark.parametrize("d,s,e", [(0.02924, 0.0010789, 637.8), (1.0, 0.0413, 650.0), (0.5, 0.02, 600.0),
                                   (1.0, 1.0, 1.0), (1.0, 0.3, 20.0)])
def test_gaussian_delta_is_an_upper_bound_near_the_largest_epsilon(d, s, e):
    """4e-16 * first alone missed the round-off of e^epsilon Phi(.) near epsilon 640 (1.1e-9 relative low)."""
    assert gaussian_delta(d, s, e) >= mp_gaussian_delta(d, s, e)


def test_gaussian_sigma_holds_at_a_large_epsilon_and_refuses_a_delta_below_the_floor():
    sigma = gaussian_sigma(1.0, 650.0, 1e-50)
    assert mp_gaussian_delta(1.0, sigma, 650.0) <= 1e-50
    with pytest.raises(ValueError, match=r"^delta must be above the smallest delta"):
        gaussian_sigma(1.0, 0.0, 1e-17)
