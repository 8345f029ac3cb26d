"""Tests for mcacct.individual.gdp: mu-GDP closed forms (Dong, Roth & Su 2022, arXiv:1905.02383) and the
individual GDP filter (Koskela, Tobaben & Honkela 2023, arXiv:2209.15596, Alg. 1, Thm. 1).

References: scipy's normal CDF (moderate delta), 60-digit mpmath (tiny delta, large mu), the Gaussian
mechanism's hockey-stick divergence by numerical integration, and hand-worked filter steps with dyadic
values (exact in float64).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import gaussian_delta
from scipy import integrate, stats
from scipy.optimize import brentq

from mcacct.individual.gdp import (GDPFilterState, gdp_delta, gdp_epsilon, gdp_filter_epsilon, gdp_filter_init,
                                   gdp_filter_step, individual_mu)
from mcacct.training.batching import BMinSepSampler

HSET = settings(deadline=None, max_examples=30, derandomize=True)
mpmath.mp.dps = 60


def mp_delta(mu: float, eps: float) -> mpmath.mpf:
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


# -- gdp_delta -------------------------------------------------------------------------------------------------
def test_gdp_delta_matches_scipy_and_is_vectorised():
    mu = np.array([0.05, 0.3, 1.0, 2.0, 5.0, 10.0, 30.0])[:, None]
    eps = np.array([0.0, 0.1, 1.0, 3.0, 10.0])[None, :]
    got = gdp_delta(mu, eps)
    ref = stats.norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert got.shape == (7, 5) and got.dtype == np.float64
    ok = ref > 1e-6  # where the direct scipy formula has not lost digits to cancellation
    assert ok.sum() >= 20
    np.testing.assert_allclose(got[ok], ref[ok], rtol=1e-9)
    assert np.all(got >= 0) and np.all(np.diff(got, axis=1) <= 0) and np.all(np.diff(got, axis=0) >= 0)
    assert isinstance(gdp_delta(1.0, 1.0), np.float64)
    assert gdp_delta(0.0, 0.0) == 0.0 and gdp_delta(0, 3) == 0.0


@pytest.mark.parametrize("sens,sigma", [(1.0, 1.0), (1.0, 0.7), (0.3, 2.0), (2.5, 4.0)])
def test_gdp_delta_is_the_gaussian_mechanism_delta(sens, sigma):
    """H_{e^eps}(N(D, s^2) || N(0, s^2)) = delta_mu(eps) with mu = D / s; the divergence is integrated
    numerically over {p > e^eps q} = (eps s^2 / D + D / 2, inf), and also taken from Balle & Wang (2018)."""
    for eps in (0.0, 0.5, 1.0, 2.0):
        x0 = eps * sigma ** 2 / sens + sens / 2
        def integrand(x, eps=eps):
            return stats.norm.pdf(x, sens, sigma) - math.exp(eps) * stats.norm.pdf(x, 0.0, sigma)
        num, _ = integrate.quad(integrand, x0, x0 + 40 * sigma, epsabs=0.0, epsrel=1e-12, limit=200)
        got = gdp_delta(sens / sigma, eps)
        assert got == pytest.approx(num, rel=1e-8)
        assert got == pytest.approx(gaussian_delta(sens, sigma, eps), rel=1e-10)


@pytest.mark.parametrize("mu,eps", [(1e-4, 6e-4), (0.01, 0.07), (1.0, 7.2), (1.0, 30.0), (5.0, 47.0),
                                    (50.0, 0.0), (50.0, 100.0), (50.0, 1600.0), (50.0, 2500.0), (80.0, 3000.0)])
def test_gdp_delta_tiny_delta_and_large_mu_against_mpmath(mu, eps):
    ref = mp_delta(mu, eps)
    assert float(ref) > 1e-300
    assert gdp_delta(mu, eps) == pytest.approx(float(ref), rel=1e-10)


# -- gdp_epsilon -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("delta", [1e-12, 1e-8, 1e-5, 0.1])
@pytest.mark.parametrize("mu", [1e-3, 0.1, 0.5, 1.0, 3.0, 10.0, 50.0])
def test_gdp_epsilon_is_the_rounded_up_inverse(mu, delta):
    eps = gdp_epsilon(mu, delta)
    assert isinstance(eps, np.float64) and np.isfinite(eps)
    assert gdp_delta(mu, eps) <= delta  # sound in our arithmetic ...
    assert mp_delta(mu, eps) <= delta  # ... and in exact arithmetic
    if eps > 0:  # and nearly tight: a slightly smaller epsilon violates
        smaller = eps * (1 - 1e-6)
        assert gdp_delta(mu, smaller) > delta and mp_delta(mu, smaller) > delta
    else:
        assert mp_delta(mu, 0.0) <= delta


def test_gdp_epsilon_known_values_zero_cases_and_vectorisation():
    # mu = 1, delta = 1e-5: the root of the closed form by scipy's brentq on scipy's normal CDF
    f = lambda e: stats.norm.cdf(-e + 0.5) - math.exp(e) * stats.norm.cdf(-e - 0.5) - 1e-5  # noqa: E731
    assert gdp_epsilon(1.0, 1e-5) == pytest.approx(brentq(f, 0, 20, xtol=1e-14), rel=1e-8)
    assert gdp_epsilon(0.0, 1e-5) == 0.0
    assert gdp_epsilon(0.1, 0.5) == 0.0  # delta_mu(0) = 2 Phi(mu/2) - 1 = 0.0399 <= 0.5
    mus = np.linspace(0.01, 20.0, 257)
    vec = gdp_epsilon(mus, 1e-6)
    assert vec.dtype == np.float64 and vec.shape == (257,) and np.all(np.diff(vec) > 0)
    # one call per mu agrees up to the last bits (XLA's vectorised and scalar code paths round differently)
    np.testing.assert_allclose(vec[::64], [gdp_epsilon(m, 1e-6) for m in mus[::64]], rtol=1e-12)
    assert np.all(gdp_delta(mus, vec) <= 1e-6)


@HSET
@given(mu=st.floats(1e-3, 60.0), log_delta=st.floats(-14.0, -0.5))
def test_gdp_epsilon_property(mu, log_delta):
    delta = 10.0 ** log_delta
    eps = gdp_epsilon(mu, delta)
    assert gdp_delta(mu, eps) <= delta
    if eps > 0:
        assert gdp_delta(mu, eps * (1 - 1e-6)) > delta


def test_gdp_filter_epsilon_is_gdp_epsilon_of_the_budget_with_the_round_off():
    """B' = B (1 + (k + 4) 2^-52): at most a relative 2.3e-10 above gdp_epsilon(B) at a million steps."""
    for k in (1, 1000, 10 ** 6):
        factor = 1.0 + (k + 4) * 2.0 ** -52
        assert gdp_filter_epsilon(2.0, 1e-5, k) == gdp_epsilon(2.0 * factor, 1e-5)
        got = gdp_filter_epsilon([0.5, 1.0], 1e-6, k)
        np.testing.assert_array_equal(got, gdp_epsilon(np.array([0.5, 1.0]) * factor, 1e-6))
        # bisection to adjacent floats: equal up to the last bits at small k, never more than 1e-9 relative apart
        np.testing.assert_allclose(got, gdp_epsilon([0.5, 1.0], 1e-6), rtol=1e-9)


@pytest.mark.parametrize("budget,delta", [(1.0, 1e-5), (20.0, 1e-12), (40.0, 1e-100)])
def test_gdp_filter_epsilon_holds_for_the_true_budget_after_a_million_steps(budget, delta):
    """The true budget after k steps is at most B (1 + (k + 3) 2^-53) (docs/soundness.md, "GDP filter"); at k = 10^6
    the reported epsilon must hold for it in 60-digit arithmetic. gdp_epsilon(B) alone did not at (40, 1e-100): its
    exact delta there was 1.4e-7 relative above the target (an audit's figure), beyond gdp_epsilon's own margin."""
    k = 10 ** 6
    true_budget = mpmath.mpf(budget) * (1 + (k + 3) * mpmath.mpf(2) ** -53)
    assert mp_delta(true_budget, gdp_filter_epsilon(budget, delta, k)) <= delta


def test_the_filters_exact_sums_stay_within_the_round_off_bound():
    """Sequences built to end at B^2 in exact arithmetic up to a few ulps (some admitted with an exact sum above
    B^2): every admitted example's exact sum of squares (Fractions of the float mu's) is at most
    (B (1 + (k + 3) 2^-53))^2, the bound gdp_filter_epsilon covers."""
    from fractions import Fraction
    rng = np.random.default_rng(11)
    k, n, over = 40, 64, 0
    for budget in (1.0, 0.3, 7.0):
        w = rng.dirichlet(np.ones(k), size=n).T                       # (k, n): each column sums to 1
        mus = budget * np.sqrt(w) * (1 + rng.integers(-4, 5, size=(k, n)) * 2.0 ** -53)
        state, applied = gdp_filter_init(n), []
        for j in range(k):
            active, state = gdp_filter_step(state, mus[j], budget)
            applied.append(np.where(np.asarray(active), mus[j], 0.0))
        bound = (Fraction(budget) * (1 + Fraction(k + 3, 2 ** 53))) ** 2
        for i in range(n):
            exact = sum(Fraction(float(m)) ** 2 for m in np.asarray(applied)[:, i])
            assert exact <= bound
            over += exact > Fraction(budget) ** 2
    assert over > 0   # the case the bound is for occurred


# -- individual_mu ---------------------------------------------------------------------------------------------
def test_individual_mu_full_batch():
    T, sigma = 100, 2.0
    ratios = np.stack([np.ones(T), np.zeros(T), np.r_[np.full(50, 0.5), np.zeros(50)]])
    got = individual_mu(ratios, sigma)
    assert got.dtype == np.float64 and got.shape == (3,)
    np.testing.assert_allclose(got, [math.sqrt(T) / sigma, 0.0, math.sqrt(50 * 0.25) / sigma], rtol=1e-15)
    assert individual_mu(np.ones(T), sigma) == pytest.approx(5.0, rel=1e-15)
    sig_t = np.r_[np.full(50, 1.0), np.full(50, 2.0)]  # per-step noise multipliers
    assert individual_mu(np.ones(T), sig_t) == pytest.approx(math.sqrt(50 + 50 / 4), rel=1e-15)


def test_filter_with_mu_from_individual_mu_runs_exactly_the_worst_case_steps():
    """Constant ratio 1, sigma = 2 (mu_t = 1/2 exactly): with B = individual_mu(ones(T), sigma) = sqrt(T)/2
    every example is active for exactly T = 16 steps and is dropped at step 17."""
    T, sigma, n = 16, 2.0, 3
    budget = individual_mu(np.ones(T), sigma)
    assert budget == 2.0
    state = gdp_filter_init(n)
    for _ in range(T):
        active, state = gdp_filter_step(state, np.full(n, 1.0 / sigma), budget)
        assert np.all(np.asarray(active))
    active, state = gdp_filter_step(state, np.full(n, 1.0 / sigma), budget)
    assert not np.any(np.asarray(active))
    np.testing.assert_array_equal(np.asarray(state.spent_sq), np.full(n, budget ** 2))


# -- the filter --------------------------------------------------------------------------------------------------
def test_filter_hand_worked_alg1():
    """B = 1, three examples; dyadic mu's so every sum is exact.

    step  mu                 spent + mu^2 (candidate)     active      spent after
    1     (.5, .75, 1)       (.25, .5625, 1)              (T, T, T)   (.25, .5625, 1)   (= B^2 allowed: HALT is >)
    2     (.5, .75, 0)       (.5, 1.125, 1)               (T, F, T)   (.5, .5625, 1)
    3     (.5, .25, .5)      (.75, [.625], 1.25)          (T, F, F)   (.75, .5625, 1)   ex. 1 fits but stays dropped
    4     (.5, 0, 0)         (1, -, -)                    (T, F, F)   (1, .5625, 1)
    5     (0, 0, 0)          (1, -, -)                    (T, F, F)   (1, .5625, 1)     mu = 0 keeps ex. 0 active
    6     (2**-26, 0, 0)     (1 + 2**-52, -, -)           (F, F, F)   (1, .5625, 1)
    """
    steps = [([.5, .75, 1.], [1, 1, 1], [.25, .5625, 1.]),
             ([.5, .75, 0.], [1, 0, 1], [.5, .5625, 1.]),
             ([.5, .25, .5], [1, 0, 0], [.75, .5625, 1.]),
             ([.5, 0., 0.], [1, 0, 0], [1., .5625, 1.]),
             ([0., 0., 0.], [1, 0, 0], [1., .5625, 1.]),
             ([2.0 ** -26, 0., 0.], [0, 0, 0], [1., .5625, 1.])]
    state = gdp_filter_init(3)
    assert state.spent_sq.dtype == jnp.float64 and state.active.dtype == jnp.bool_
    for mu, mask, spent in steps:
        active, state = gdp_filter_step(state, np.array(mu), 1.0)
        np.testing.assert_array_equal(np.asarray(active), np.array(mask, bool))
        np.testing.assert_array_equal(np.asarray(state.active), np.array(mask, bool))
        np.testing.assert_array_equal(np.asarray(state.spent_sq), spent)


N_PROP, K_PROP = 4, 10


@jax.jit
def _run_filter(mus, budget):
    def body(state, mu):
        active, state = gdp_filter_step(state, mu, budget)
        return state, (active, state.spent_sq)
    return jax.lax.scan(body, gdp_filter_init(N_PROP), mus)


@HSET
@given(mus=st.lists(st.floats(0.0, 1.5), min_size=N_PROP * K_PROP, max_size=N_PROP * K_PROP),
       budget=st.floats(0.05, 2.0))
def test_filter_never_exceeds_budget(mus, budget):
    """Under the filter (run with jit + lax.scan) the applied mu's of every example satisfy sum mu^2 <= B^2.

    Tolerance: the filter compares the float64 running sum with fl(B^2); the exact sum of the applied squares
    (math.fsum) may exceed B^2 only by the round-off of K additions and the squarings, bounded by
    (K + 2) * 2**-52 * B^2 (plus K * 2**-1022 for subnormal squares that XLA flushes to zero)."""
    mus = np.array(mus).reshape(K_PROP, N_PROP)
    final, (active, spent) = _run_filter(jnp.asarray(mus), budget)
    active, spent = np.asarray(active), np.asarray(spent)
    applied = np.where(active, mus, 0.0)
    tol = (K_PROP + 2) * 2.0 ** -52 * budget ** 2
    for i in range(N_PROP):
        assert math.fsum(float(m) ** 2 for m in applied[:, i]) <= budget ** 2 + tol
        dropped = np.flatnonzero(~active[:, i])
        if dropped.size:  # once dropped, dropped for good
            assert not active[dropped[0]:, i].any()
            j = dropped[0]  # and it was dropped because the step would have crossed the budget
            assert spent[j - 1, i] * (j > 0) + mus[j, i] ** 2 > budget ** 2 * (1 - 1e-12)
    # atol: XLA on CPU flushes subnormal squares (mu < ~1e-154) to zero
    np.testing.assert_allclose(spent, np.cumsum(applied ** 2, axis=0), rtol=1e-12, atol=1e-300)
    assert np.all(spent <= budget ** 2)
    np.testing.assert_array_equal(np.asarray(final.active), active[-1])


def test_filter_traced_bad_values_drop_examples():
    """Inside jit value checks cannot run; a NaN/inf mu or a budget <= 0 then drops instead of admitting."""
    step = jax.jit(gdp_filter_step)
    active, _ = step(gdp_filter_init(3), jnp.array([jnp.nan, jnp.inf, 0.1]), 1.0)
    np.testing.assert_array_equal(np.asarray(active), [False, False, True])
    active, _ = step(gdp_filter_init(3), jnp.array([0.0, 0.1, 0.2]), -1.0)
    assert not np.asarray(active).any()
    # a budget below BUDGET_MIN: its square would be subnormal (flushed to 0 on CPU, admitting mu = 100 B before)
    active, _ = step(gdp_filter_init(3), jnp.array([1e-156, 1e-160, 0.0]), 1e-158)
    assert not np.asarray(active).any()


def test_filter_with_bminsep_sampler_under_scan():
    """Drive the filter together with BMinSepSampler for 150 steps inside jit + lax.scan.

    How mu is formed here: each step draws per-example ratios r in [0, 1] (stand-ins for clipped norm / clip
    bound) and sets mu = r / sigma for the examples the sampler put in the batch, 0 for the others. For
    full-batch DP-GD (q = 1) mu = r / sigma is the exact per-step GDP parameter; under Poisson / b-min-sep
    subsampling r / sigma is not a dominating pair of the subsampled step, and charging only sampled steps uses
    the private sampling coins, so this is NOT a privacy accounting (the paper's Sec. 5 approximate PLD filter
    is what applies there). The test only exercises the mechanics: the filter mask combined with the batch
    mask, spent never above B^2, dropped examples never return, and scan == an eager step-by-step loop."""
    n, steps, sigma, budget = 40, 150, 1.0, 4.0
    sampler = BMinSepSampler(n, sampling_prob=0.5, min_sep=2)
    key = jax.random.PRNGKey(7)
    k_init, k_run = jax.random.split(key)
    keys = jax.random.split(k_run, steps)

    def one_step(carry, k):
        s_state, f_state = carry
        k_batch, k_r = jax.random.split(k)
        s_state, batch = sampler.step(k_batch, s_state)
        r = jax.random.uniform(k_r, (n,))
        mu = jnp.where(batch, r / sigma, 0.0)
        active, f_state = gdp_filter_step(f_state, mu, budget)
        used = batch & active  # multiply per-example gradients / weights by this mask
        return (s_state, f_state), (batch, active, used, mu)

    carry0 = (sampler.init(k_init, warm_start=True), gdp_filter_init(n))
    (_, f_final), (batch, active, used, mu) = jax.jit(lambda c, ks: jax.lax.scan(one_step, c, ks))(carry0, keys)
    batch, active, used, mu = map(np.asarray, (batch, active, used, mu))
    spent = np.asarray(f_final.spent_sq)

    assert not np.any(used & ~batch)
    np.testing.assert_allclose(spent, np.sum(np.where(used, mu, 0.0) ** 2, axis=0), rtol=1e-12)
    assert np.all(spent <= budget ** 2)
    for i in range(n):
        off = np.flatnonzero(~active[:, i])
        assert off.size == 0 or not active[off[0]:, i].any()
    assert 0 < (~active[-1]).sum() < n  # the budget binds for some examples, not all
    assert np.all(used.sum(axis=0) <= batch.sum(axis=0))
    assert not np.any(used[1:] & used[:-1])  # min_sep = 2 still holds for the filtered batches

    # the same keys, stepped eagerly (concrete values: the argument checks run)
    carry, eager = carry0, []
    for k in keys[:20]:
        carry, out = one_step(carry, k)
        eager.append(np.asarray(out[2]))
    np.testing.assert_array_equal(np.stack(eager), used[:20])


# -- argument checks ----------------------------------------------------------------------------------------------
_STATE = GDPFilterState(jnp.zeros(3), jnp.ones(3, bool))


@pytest.mark.parametrize("call,name", [
    (lambda: gdp_delta(-1.0, 1.0), "mu"),
    (lambda: gdp_delta(np.array([1.0, np.nan]), 1.0), "mu"),
    (lambda: gdp_delta("1", 1.0), "mu"),
    (lambda: gdp_delta(True, 1.0), "mu"),
    (lambda: gdp_delta(1.0, -0.5), "epsilon"),
    (lambda: gdp_delta(1.0, [0.0, np.inf]), "epsilon"),
    (lambda: gdp_epsilon(1.0, 0.0), "delta"),
    (lambda: gdp_epsilon(1.0, 1.0), "delta"),
    (lambda: gdp_epsilon(1.0, [1e-5, 2.0]), "delta"),
    (lambda: gdp_epsilon([1.0, -2.0], 1e-5), "mu"),
    (lambda: individual_mu(np.ones(3), 0.0), "sigma"),
    (lambda: individual_mu(np.ones((2, 3)), [1.0, 2.0]), "sigma"),
    (lambda: individual_mu(-np.ones(3), 1.0), "ratios"),
    (lambda: individual_mu(1.0, 1.0), "ratios"),
    (lambda: gdp_filter_init(0), "num_examples"),
    (lambda: gdp_filter_init(2.5), "num_examples"),
    (lambda: gdp_filter_step(_STATE, np.array([0.1, -0.1, 0.0]), 1.0), "mu_t"),
    (lambda: gdp_filter_step(_STATE, np.ones(2), 1.0), "mu_t"),
    (lambda: gdp_filter_step(_STATE, 0.1, 0.0), "budget"),
    (lambda: gdp_filter_step(_STATE, 0.1, np.ones(4)), "budget"),
    (lambda: gdp_filter_step((jnp.zeros(3), jnp.ones(3, bool)), 0.1, 1.0), "state"),
    (lambda: gdp_filter_step(GDPFilterState(jnp.zeros(3), jnp.ones(2, bool)), 0.1, 1.0), "state"),
    (lambda: gdp_filter_epsilon(0.0, 1e-5, 10), "budget"),
    (lambda: gdp_filter_epsilon(1e-101, 1e-5, 10), "budget"),
    (lambda: gdp_filter_epsilon(1.0, 1e-5, 0), "steps"),
    (lambda: gdp_filter_epsilon(1.0, 1e-5, 2 ** 41), "steps"),
    (lambda: gdp_filter_epsilon(1.0, 1e-5, 2.5), "steps"),
    (lambda: gdp_filter_step(_STATE, 0.1, 1e-158), "budget"),
    (lambda: gdp_filter_epsilon(1.0, 1.5, 10), "delta"),
])
def test_bad_arguments_raise_value_error_naming_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        call()
