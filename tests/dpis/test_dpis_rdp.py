"""The paper's RDP accountant (eq. 13, eq. 6, Lemma 2.5) and PLD <= RDP on DPIS runs."""

import math

import numpy as np
import pytest

from mcacct.dpis import (DEFAULT_ORDERS, DPISEpoch, DPISRun, conversion_offset, dpis_epsilon, dpis_events,
                         dpis_rdp_epsilon, rdp_dpis_iteration, rdp_gaussian, rdp_of_events, rdp_poisson_gaussian,
                         rdp_to_epsilon)


def test_eq13_at_the_worst_case_k_tilde_is_the_subsampled_gaussian_rdp():
    # K~ = N~ C: q = b / N~ = 0.01, sigma = 1 (values of the issue, to 1e-6 relative)
    n_tilde, b, clip = 10_000.0, 100.0, 0.7
    tau = rdp_dpis_iteration(n_tilde * clip, n_tilde, b, clip, 1.0, orders=[2, 8])
    assert tau[0] == pytest.approx(1.718134e-4, rel=1e-6)
    assert tau[1] == pytest.approx(8.936439e-4, rel=1e-6)
    np.testing.assert_allclose(tau, rdp_poisson_gaussian(0.01, 1.0, [2, 8]), rtol=1e-13)
    # order 2 in closed form: log(1 + q^2 (e^{1/sigma^2} - 1))
    assert tau[0] == pytest.approx(math.log1p(1e-4 * math.expm1(1.0)), rel=1e-12)


@pytest.mark.parametrize("k_tilde", [300.0, 2_000.0, 7_000.0])
def test_eq13_literal_equals_the_rdp_of_the_iteration_event(k_tilde):
    n_tilde, b, clip, sg, alphas = 10_000.0, 100.0, 0.7, 0.9, np.arange(2, 21)
    q = b * clip / k_tilde
    m = np.arange(0, 21)
    literal = []
    for a in alphas:  # eq. (13) term by term
        terms = [math.comb(int(a), int(j)) * (1 - q) ** (a - j) * q ** j
                 * math.exp((j * j - j) * k_tilde ** 2 / (2 * n_tilde ** 2 * sg ** 2 * clip ** 2)) for j in m[:a + 1]]
        literal.append(math.log(sum(terms)) / (a - 1))
    np.testing.assert_allclose(rdp_dpis_iteration(k_tilde, n_tilde, b, clip, sg, alphas), literal, rtol=1e-11)
    run = DPISRun(n_tilde, b, clip, (DPISEpoch(1, k_tilde, sg),))
    np.testing.assert_allclose(rdp_of_events(dpis_events(run), alphas), literal, rtol=1e-11)


def test_rdp_decreases_with_k_tilde_at_fixed_sigma_g():
    # the paper's remark after Lemma 3.1: tau_DPIS increases with K~ (checked here on a grid)
    taus = [rdp_dpis_iteration(k, 10_000.0, 100.0, 1.0, 0.8) for k in (10_000.0, 8_000.0, 5_000.0, 2_000.0)]
    for hi, lo in zip(taus, taus[1:]):
        assert np.all(lo <= hi * (1 + 1e-12))


def test_gaussian_rdp_and_the_conversion_of_lemma_2_5():
    np.testing.assert_allclose(rdp_gaussian(2.0, [2, 3]), [2 / 8, 3 / 8])
    a, dl = np.array([2, 10]), 1e-5
    off = conversion_offset(a, dl)
    np.testing.assert_allclose(off, (math.log(1 / dl) + (a - 1) * np.log(1 - 1 / a) - np.log(a)) / (a - 1))
    r = rdp_to_epsilon([1.0, 0.2], a, dl)
    assert r.order == 10 and r.epsilon == pytest.approx(0.2 + off[1])
    with pytest.raises(ValueError, match="orders"):
        rdp_gaussian(1.0, [1, 2])
    with pytest.raises(ValueError, match="k_tilde must be >="):
        rdp_dpis_iteration(10.0, 1000.0, 100.0, 1.0, 1.0)


@pytest.mark.parametrize("k_tildes,sigmas,aux", [
    ((6_000.0, 3_000.0), (1.0, 0.8), dict(sigma_n=120.0, sigma_k=120.0)),   # N~ = 6000, b = 60, C = 1
    ((6_000.0, 6_000.0), (0.7, 0.7), {}),                                    # Poisson DP-SGD
])
def test_pld_epsilon_is_at_most_the_rdp_epsilon(k_tildes, sigmas, aux):
    run = DPISRun(6_000.0, 60.0, 1.0, tuple(DPISEpoch(100, k, s) for k, s in zip(k_tildes, sigmas)),
                  iterations_per_epoch=100, **aux)
    pld_eps = dpis_epsilon(run, 1e-5, value_discretization_interval=1e-3, estimate_error=False).epsilon
    rdp = dpis_rdp_epsilon(run, 1e-5)
    assert rdp.order in DEFAULT_ORDERS
    assert 0 < pld_eps < rdp.epsilon
