"""The DPIS batch sampler (mcacct.training.dpis_sampler): inclusion frequencies, the rejection filter, refusal."""

import math
from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcacct.training.dpis_sampler import (DPISSampler, DPISState, importance_sample, noisy_gradient,
                                          noisy_norm_sum, refine_k_tilde)

N, B, C, K, TRIALS = 1_000, 10.0, 1.0, 5.0, 20_000
#: two-sided z for a family-wise error of 1e-4 over N records (Bonferroni) with TRIALS Bernoulli draws each
Z = NormalDist().inv_cdf(1 - 1e-4 / (2 * N))


def _setup():
    rng = np.random.default_rng(7)
    prev = rng.uniform(0.0, 1.5, N)             # norms at the start of the epoch (state)
    cur = prev * rng.uniform(0.3, 2.5, N)       # current norms: some exceed g_hat (clipped to it), some exceed C
    cur[:5] = 0.0                               # zero gradients are never included
    sampler = DPISSampler(N, B, C, k=K)
    state = sampler.init(prev)
    k_tilde = float(np.minimum(prev, C).sum())  # ~ 580 >= k b C = 50
    return sampler, state, cur, k_tilde


def _assert_binomial(freq, p, trials):
    sd = np.sqrt(p * (1 - p) / trials)
    ok = np.where(sd > 0, np.abs(freq - p) <= Z * sd + 1e-12, freq == p)
    assert ok.all(), f"{(~ok).sum()} records outside {Z:.2f} sd; worst {np.max(np.abs(freq - p) / (sd + 1e-300))}"


def test_end_to_end_inclusion_frequencies_are_b_norm_over_k_tilde():
    sampler, state, cur, k_tilde = _setup()
    draw = jax.jit(jax.vmap(lambda key: sampler.step(key, state, cur, k_tilde, float(N))[1].mask))
    freq = np.asarray(draw(jax.random.split(jax.random.key(0), TRIALS))).mean(axis=0)
    clipped = np.minimum(cur, np.minimum(np.asarray(state.g_hat), C))   # ||g_bar||: clip to min(g_hat, C)
    pi = B * clipped / k_tilde                                          # eq. (15)
    _assert_binomial(freq, pi, TRIALS)
    assert freq[:5].max() == 0.0
    # the expected batch size is b * sum ||g_bar|| / K~ (~ b when K~ tracks the norm sum)
    assert freq.sum() == pytest.approx(pi.sum(), rel=0.01)


def test_rejection_step_accepts_candidates_with_the_stated_probability():
    sampler, state, cur, k_tilde = _setup()
    g_hat = np.asarray(state.g_hat)

    def one(key):
        k1, k2 = jax.random.split(key)
        cand, q = sampler.filter(k1, state, k_tilde)
        _, batch = sampler.accept(k2, state, cand, q, cur, k_tilde, float(N))
        return cand, batch.mask, q

    cand, mask, q = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(1), TRIALS))
    cand, mask = np.asarray(cand), np.asarray(mask)
    _assert_binomial(cand.mean(0), B * g_hat / k_tilde, TRIALS)        # filter: q = b g_hat / K~ (no cap)
    np.testing.assert_allclose(np.asarray(q)[0], B * g_hat / k_tilde)
    assert not (mask & ~cand).any()                                    # only candidates are accepted
    p = np.minimum(cur, np.minimum(g_hat, C)) / g_hat                  # acceptance p = ||g_bar|| / g_hat
    n_cand = cand.sum(0)
    rate = mask.sum(0) / np.maximum(n_cand, 1)
    sd = np.sqrt(p * (1 - p) / np.maximum(n_cand, 1))
    assert np.all(np.abs(rate - p) <= Z * sd + 1e-12)


def test_state_weights_and_unbiased_estimate():
    sampler, state, cur, k_tilde = _setup()
    n_tilde = 1_020.0
    new, batch = sampler.step(jax.random.key(3), state, cur, k_tilde, n_tilde)
    cand, mask = np.asarray(batch.candidates), np.asarray(batch.mask)
    g_hat = np.asarray(state.g_hat)
    clipped = np.minimum(cur, np.minimum(g_hat, C))
    np.testing.assert_allclose(np.asarray(new.g_hat)[cand], K * np.maximum(clipped, C / 100)[cand])
    np.testing.assert_array_equal(np.asarray(new.g_hat)[~cand], g_hat[~cand])
    # weight b / (N~ pi) = K~ / (N~ ||g_bar||): every included record contributes norm K~ / N~
    w = np.asarray(batch.weight)
    np.testing.assert_allclose((w * clipped)[mask], k_tilde / n_tilde)
    assert (w[~mask] == 0).all() and bool(batch.covered)
    # the noisy gradient (sigma_g -> 0) of 1-D gradients g_i = norm_i is unbiased for sum(g_bar) / N~
    grads = jnp.asarray(cur)[:, None]
    est = jax.jit(jax.vmap(lambda key: noisy_gradient(key, grads, sampler.step(key, state, cur, k_tilde,
                                                                                n_tilde)[1], 1e-12, C, B)))
    vals = np.asarray(est(jax.random.split(jax.random.key(4), 4_000)))[:, 0]
    target = clipped.sum() / n_tilde
    assert abs(vals.mean() - target) <= 5 * vals.std() / math.sqrt(vals.size)


def test_k_tilde_below_k_b_c_is_refused():
    sampler, state, cur, _ = _setup()
    with pytest.raises(ValueError, match="k_tilde must be >= k\\*batch_size\\*clip = 50.0"):
        sampler.step(jax.random.key(0), state, cur, 49.0, float(N))
    with pytest.raises(ValueError, match="k_tilde must be >= k\\*batch_size\\*clip"):
        sampler.filter(jax.random.key(0), state, 10.0)
    covered = jax.jit(lambda kt: sampler.step(jax.random.key(0), state, cur, kt, float(N))[1].covered)
    assert not bool(covered(49.0)) and bool(covered(50.0))   # traced K~: flagged, not raised
    with pytest.raises(ValueError, match="k must be in"):
        DPISSampler(N, B, C, k=0.5)
    with pytest.raises(ValueError, match="norms must have shape"):
        sampler.init(np.ones(3))
    with pytest.raises(ValueError, match="state must be a DPISState"):
        sampler.filter(jax.random.key(0), (1,), 100.0)
    assert isinstance(state, DPISState)


def test_plain_importance_sampling_and_the_auxiliary_releases():
    rng = np.random.default_rng(2)
    norms = rng.uniform(0, 2.0, 300)
    k_tilde = float(np.minimum(norms, C).sum())
    draw = jax.jit(jax.vmap(lambda key: importance_sample(key, norms, k_tilde, 300.0, 5.0, C).mask))
    freq = np.asarray(draw(jax.random.split(jax.random.key(5), TRIALS))).mean(0)
    _assert_binomial(freq, 5.0 * np.minimum(norms, C) / k_tilde, TRIALS)
    with pytest.raises(ValueError, match="k_tilde must be >= batch_size\\*clip"):
        importance_sample(jax.random.key(0), norms, 4.0, 300.0, 5.0, C)
    # K' of eq. (11) is unbiased for the clipped norm sum; eq. (12) with the lower bounds first
    ks = jax.vmap(lambda key: noisy_norm_sum(key, norms, C, 0.2, 0.0))(jax.random.split(jax.random.key(6), 4000))
    assert float(jnp.mean(ks)) == pytest.approx(k_tilde, rel=0.02)
    assert float(refine_k_tilde(1e9, 300.0, 5.0, C)) == 300.0
    assert float(refine_k_tilde(1.0, 300.0, 5.0, C, k=5.0, xi=0.0)) == 25.0
    assert float(refine_k_tilde(1.0, 10.0, 5.0, C, floor=40.0)) == 40.0   # the plan's floor wins over N~ C
