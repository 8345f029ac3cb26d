"""EVR bounds (mcacct.statistics.confidence): the overall delta of the Estimate-Verify-Release test against jax-privacy's
reference, the minimum sample count, the Chernoff tail bound, and the analytic Gaussian mechanism's sigma."""

import math

import pytest

import oracles
from mcacct import evr


def test_evr_matches_reference_and_is_monotone():
    from jax_privacy.experimental.monte_carlo import delta_calculation as ref
    for s, base in ((10**5, 1e-4), (10**7, 1e-6), (3 * 10**6, 2e-6)):
        assert evr.overall_delta(s, base) == pytest.approx(ref.get_overall_delta(s, base), rel=1e-6)
        assert evr.overall_delta(s, base) >= ref.get_overall_delta(s, base) * (1 - 1e-9)
    s = evr.min_samples(1e-5, 5e-6)
    assert evr.overall_delta(s, 5e-6) <= 1e-5 < evr.overall_delta(s - 1, 5e-6)
    assert evr.base_delta_for_target(10**7, 1e-5) < 1e-5
    assert evr.overall_delta(10**7, evr.base_delta_for_target(10**7, 1e-5)) <= 1e-5
    # Chernoff bound: q is exactly exp(-s KL) (up to the safety factor)
    q = evr.tail_bound(1000, 0.01, 0.02)
    assert q == pytest.approx(math.exp(-1000 * evr.kl_bernoulli(0.01, 0.02)), rel=1e-8)


def test_gaussian_sigma_inverts_gaussian_delta():
    for sens, eps, delta in ((1.0, 1.0, 1e-5), (7.3, 0.5, 1e-8), (0.2, 8.0, 1e-3)):
        s = evr.gaussian_sigma(sens, eps, delta)
        assert oracles.gaussian_delta(sens, s, eps) <= delta
        assert oracles.gaussian_delta(sens, s * (1 - 1e-6), eps) > delta * (1 - 1e-4)
