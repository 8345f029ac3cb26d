"""The remove direction's cheap bound (#39, shortcut 1; mcacct.kernels.bound): U >= L for every output, from terms
anywhere and from the schemes' own draws (over 10^6 (draw, sigma) pairs across sigma in [0.2, 2], warm and cold
start, participation forced by p near 1, a block length that does not divide b), and the ladder keeps exact,
bit-identical losses wherever U could reach a threshold."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from fractions import Fraction

from mcacct.kernels.block_terms import mean_block_maxima_t, noise_block_maxima_t
from mcacct.kernels.const_column import block_term_maxima_t, remove_loss_bound_from_draws_t
from mcacct.kernels.bound import (block_layout, block_maxima_t, remove_loss_bound_from_maxima,
                                  remove_loss_bound_from_sums_t, remove_loss_bound_t)
from mcacct.kernels.output import ladder_losses_from_draws_t, ladder_sums_t, standardised_blocks_t, standardised_sums_t
from mcacct.kernels.recursion import ladder_losses_from_sums_t, recursion_log_ratio_t
from mcacct.kernels.shortcuts import RemoveSkip
from mcacct.kernels.mean_shift import mean_shift_from_blocks_t
from mcacct.kernels.sliding import column_sq_norms
from mcacct.schemes.bminsep import expected_participation_rate


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))  # one program per example (eager: one per operation)
def _scan_and_bound(ell, b, p, warm, block):
    return recursion_log_ratio_t(ell, b, p, warm, "scan"), remove_loss_bound_t(ell, b, p, warm, 0.0, block)


@settings(max_examples=30, deadline=None)  # each example compiles its shapes: 30 keep it near 10 s
@given(n=st.integers(1, 60), b=st.integers(1, 24), p=st.sampled_from([1e-4, 0.01, 0.2, 0.7, 0.99, 1.0]),
       warm=st.booleans(), block=st.integers(1, 20), scale=st.sampled_from([0.1, 1.0, 8.0, 60.0]),
       walk=st.booleans(), seed=st.integers(0, 2**16))
def test_the_bound_holds_for_terms_anywhere(n, b, p, warm, block, scale, walk, seed):
    rng = np.random.default_rng(seed)
    ell = rng.normal(rng.normal() * scale, scale, (n, 32))
    if walk:  # smooth terms, as sliding sums give
        ell = np.cumsum(ell, axis=0) / np.sqrt(n)
    exact, u = (np.asarray(v) for v in _scan_and_bound(jnp.asarray(ell), b, p, warm, block))
    assert not np.any(np.isnan(u))
    finite = np.isfinite(exact)
    assert np.all(u[finite] >= exact[finite] - 1e-12 * (1 + np.abs(exact[finite]))), (u - exact).min()


def test_the_term_error_raises_the_bound_by_at_least_itself():
    ell = jnp.asarray(np.random.default_rng(1).normal(-1.0, 2.0, (40, 16)))
    u0 = np.asarray(remove_loss_bound_t(ell, 4, 0.1, True, 0.0))
    u1 = np.asarray(remove_loss_bound_t(ell + 0.01, 4, 0.1, True, 0.0))
    np.testing.assert_allclose(np.asarray(remove_loss_bound_t(ell, 4, 0.1, True, 0.01)), u1, rtol=1e-12)
    assert np.all(u1 >= u0)


@pytest.mark.parametrize("n,b,p,warm,block", [(48, 4, 0.05, True, 16), (48, 4, 0.05, False, 16),
                                              (40, 7, 0.9, True, 3), (100, 20, 0.02, True, 16)],
                         ids=["warm", "cold", "forced-p0.9-block3", "b20-block16"])
def test_the_bound_holds_on_the_schemes_draws(n, b, p, warm, block):
    """2^17 draws x 8 sigmas in [0.2, 2] per case (over 10^6 pairs in all), remove outputs of b-min-sep with the
    ladder's sliding sums: U >= the exact loss (log-space scan) wherever the latter is finite; for a constant column
    also U from the draws, for a decreasing one U with the mean's block maxima from the participation alone (and the
    noise's from the float32 screen)."""
    sigmas = jnp.asarray(np.geomspace(0.2, 2.0, 8))
    c = tuple(np.full(min(b, 3), 1 / np.sqrt(min(b, 3))))
    half = jnp.asarray(0.5 * column_sq_norms(c, n))[:, None]
    c2 = tuple(float(v) for v in np.linspace(1.0, 0.2, min(b, 5)) / np.sqrt(min(b, 5)))
    half2 = jnp.asarray(0.5 * column_sq_norms(c2, n))[:, None]
    rate = expected_participation_rate(p, b)
    s_blk, _, k_pad, _, _ = block_layout(n, b, block)

    @jax.jit
    def one(key):
        tau, z = standardised_blocks_t(key, n, b, p, warm, rate, 1 << 14)
        s_m, s_z = ladder_sums_t(tau, z, n, b, c, jnp.float64, "direct")
        u = remove_loss_bound_from_sums_t(s_m, s_z, half, sigmas, jnp.zeros(8), b, p, warm, block)
        u_draws = remove_loss_bound_from_draws_t(tau, z, sigmas, jnp.zeros(8), n, b, p, warm, c, block)
        exact = jax.lax.map(lambda s: recursion_log_ratio_t((s_m + (s * s_z - half)) / s**2, b, p, warm, "scan"),
                            sigmas)
        ok = jnp.isfinite(exact)

        def worst(u):
            return jnp.min(jnp.where(ok, u - exact + 1e-12 * (1 + jnp.abs(exact)), jnp.inf))

        # a decreasing column: the mean's block maxima from the participation alone (mean_block_maxima_t)
        s_m2, s_z2 = ladder_sums_t(tau, z, n, b, c2, jnp.float64, "direct")
        u_table = remove_loss_bound_from_maxima(mean_block_maxima_t(tau, n, b, c2, block),
                                                block_maxima_t(s_z2, s_blk, k_pad), sigmas,
                                                jnp.zeros(8), n, b, p, warm, block)
        exact2 = jax.lax.map(lambda s: recursion_log_ratio_t((s_m2 + (s * s_z2 - half2)) / s**2, b, p, warm, "scan"),
                             sigmas)
        # and the noise's from float32 FFT sums with their certified error (noise_block_maxima_t)
        u_screen = remove_loss_bound_from_maxima(mean_block_maxima_t(tau, n, b, c2, block),
                                                 noise_block_maxima_t(z, n, b, c2, block), sigmas, jnp.zeros(8), n, b,
                                                 p, warm, block)
        ok2 = jnp.isfinite(exact2)
        worst_table = jnp.min(jnp.where(ok2, jnp.minimum(u_table, u_screen) - exact2 + 1e-12 * (1 + jnp.abs(exact2)),
                                        jnp.inf))
        return worst(u), jnp.minimum(worst(u_draws), worst_table), jnp.mean(u - exact), jnp.mean(u_draws - u)

    worst, worst_draws, gaps, looser = zip(*[one(jax.random.key(i)) for i in range(8)])
    assert min(float(w) for w in worst) >= 0.0 and min(float(w) for w in worst_draws) >= 0.0
    assert float(np.mean(gaps)) > 0.0
    assert float(np.mean(looser)) >= 0.0   # the draws' bound is the looser: extremes of prefix sums, not of windows


@functools.partial(jax.jit, static_argnums=tuple(range(1, 8)))  # one program per example
def _term_maxima(key, n, b, p, warm, c, block, scale):
    tau, z = standardised_blocks_t(key, n, b, p, warm, expected_participation_rate(p, b), 4)
    z = z * scale
    return block_term_maxima_t(tau, z, n, b, c, block) + (mean_shift_from_blocks_t(tau, n, b, c, jnp.float64), z)


@settings(max_examples=6, deadline=None)  # each example compiles its program (~2-3 s)
@given(n=st.integers(1, 70), b=st.integers(1, 24), k=st.integers(1, 24), p=st.sampled_from([0.01, 0.3, 0.9, 1.0]),
       warm=st.booleans(), block=st.integers(1, 20), c0=st.sampled_from([1e-3, 0.0625, 0.7, 3.0]),
       scale=st.sampled_from([1.0, 1e3]), seed=st.integers(0, 2**16))
# every block reached (p = 1), a block length that does not divide b
@example(n=37, b=5, k=3, p=1.0, warm=True, block=3, c0=3.0, scale=1e3, seed=1)
def test_block_term_maxima_bound_the_exact_block_maxima(n, b, k, p, warm, block, c0, scale, seed):
    """mu and zeta from the draws are at least the exact block maxima of s^m - |c|^2/2 and s^z (exact rationals of
    the float draws and c_0: Fractions), whatever the participation (p near 1: several reach a block) and the noise's
    scale (float error of the prefix sums)."""
    k = min(k, b)
    c = (c0,) * k
    mu, zeta, mean, z = (np.asarray(v) for v in _term_maxima(jax.random.key(seed), n, b, p, warm, c, block, scale))
    s = max(1, min(block, b))
    k_blocks = -(-n // s)
    front = mu.shape[0] - k_blocks
    assert np.all(mu[:front] == -np.inf) and np.all(zeta[:front] == -np.inf)
    c0f = Fraction(c0)
    for lane in range(4):
        # exact prefix sums (Fractions of the floats), then every window's sum
        pm, pz = [Fraction(0)], [Fraction(0)]
        for t in range(n):
            pm.append(pm[-1] + Fraction(float(mean[t, lane])))
            pz.append(pz[-1] + Fraction(float(z[t, lane])))
        for blk in range(k_blocks):
            rows = range(max(0, n - (k_blocks - blk) * s), n - (k_blocks - 1 - blk) * s)
            ends = [min(i + k, n) for i in rows]
            best_m = max(c0f * (pm[e] - pm[i]) - c0f * c0f * (e - i) / 2 for i, e in zip(rows, ends))
            best_z = max(c0f * (pz[e] - pz[i]) for i, e in zip(rows, ends))
            assert Fraction(float(mu[front + blk, lane])) >= best_m, (blk, lane)
            assert Fraction(float(zeta[front + blk, lane])) >= best_z, (blk, lane)


def _sums(n=48, b=4, p=0.05, num=512):
    c = (0.5, 0.5, 0.5, 0.5)
    return standardised_sums_t(jax.random.key(7), n, b, p, True, expected_participation_rate(p, b), c, num,
                               jnp.float64, "auto") + (c,)


@pytest.mark.parametrize("threshold", [-np.inf, 2.0, 4.0, 60.0])
def test_the_ladder_keeps_exact_bits_where_the_bound_could_count(threshold):
    s_m, s_z, c = _sums()
    sig = jnp.asarray([0.3, 0.7, 2.0])
    ladder = jax.jit(lambda sm, sz, rs: ladder_losses_from_sums_t(sm, sz, sig, 4, 0.05, True, c, "auto", None, rs))
    off = np.asarray(ladder(s_m, s_z, None))
    on = np.asarray(ladder(s_m, s_z, RemoveSkip(jnp.full(3, threshold), jnp.zeros(3), jnp.zeros(3))))
    np.testing.assert_array_equal(on[:, 1], off[:, 1])          # the add direction untouched
    rem_on, rem_off = on[:, 0], off[:, 0]
    exact = np.all(rem_on == rem_off, axis=0)                   # per sample, every candidate
    skipped = ~exact
    # a sample keeps U only where every candidate's U is at most the threshold, and U bounds the exact loss
    assert np.all(rem_on[:, skipped] <= threshold) and np.all(rem_on[:, skipped] >= rem_off[:, skipped] - 1e-12)
    half = jnp.asarray(0.5 * column_sq_norms(c, 48))[:, None]
    u = np.asarray(remove_loss_bound_from_sums_t(s_m, s_z, half, sig, jnp.zeros(3), 4, 0.05, True))
    np.testing.assert_array_equal(skipped, np.all(u <= threshold, axis=0))  # exactly the samples U lets go
    if threshold == -np.inf:
        assert exact.all()
    if threshold == 60.0:
        assert skipped.all()


@pytest.mark.parametrize("threshold", [2.0, 4.0, 60.0])
def test_the_draws_ladder_keeps_exact_bits_where_its_bound_could_count(threshold):
    """ladder_losses_from_draws_t with both skips (constant c): the add losses are the bound, every remove loss is
    the exact one bit for bit or a U at most the threshold and at least the exact loss, and U comes from the draws
    (no sliding sums where a batch is skipped whole)."""
    n, b, p, c = 48, 4, 0.05, (0.5, 0.5, 0.5, 0.5)
    tau, z = standardised_blocks_t(jax.random.key(7), n, b, p, True, expected_participation_rate(p, b), 512)
    sig = jnp.asarray([0.3, 0.7, 2.0])

    @functools.partial(jax.jit, static_argnums=2)
    def ladder(tau, z, add_bound, rs):
        return ladder_losses_from_draws_t(tau, z, n, sig, b, p, True, c, jnp.float64, "auto", "auto", add_bound, rs)

    off = np.asarray(ladder(tau, z, 9.0, None))
    on = np.asarray(ladder(tau, z, 9.0, RemoveSkip(jnp.full(3, threshold), jnp.zeros(3), jnp.zeros(3))))
    assert np.all(on[:, 1] == 9.0) and np.all(off[:, 1] == 9.0)
    rem_on, rem_off = on[:, 0], off[:, 0]
    u = np.asarray(remove_loss_bound_from_draws_t(tau, z, sig, jnp.zeros(3), n, b, p, True, c))
    skipped = np.all(u <= threshold, axis=0)
    np.testing.assert_array_equal(rem_on[:, ~skipped], rem_off[:, ~skipped])
    # U computed inside the ladder's program (its products fused or not) and here differ by ulps at most
    np.testing.assert_allclose(rem_on[:, skipped], u[:, skipped], rtol=1e-13, atol=1e-15)
    assert np.all(rem_on[:, skipped] >= rem_off[:, skipped] - 1e-12)
    assert 0 < skipped.sum() and (threshold == 60.0 or skipped.sum() < skipped.size)
