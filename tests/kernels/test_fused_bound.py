"""The fused remove bound (#39, shortcut 4; mcacct.kernels.fused_bound): the kernel body, interpreted on CPU, bounds
the exact loss on the schemes' draws (warm and cold start, participation forced by p near 1, block lengths that do
not divide b or the column, n below b), reads the same noise words as the XLA path (its U within the rounding
allowances (:func:`allowance`) of :func:`remove_loss_bound_from_draws_t` on the materialised draws) and refuses
what it cannot serve by name. Its lowering for an NVIDIA GPU at the production shape (b = 256) is checked in
test_lowering.py."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from mcacct.kernels.block_terms import sum_error
from mcacct.kernels.const_column import remove_loss_bound_from_draws_t
from mcacct.kernels.fused_bound import NORMAL_ULPS, fused_bound_refusal, fused_remove_bound, fused_remove_bound_from_key
from mcacct.kernels.output import ladder_sums_t, standardised_blocks_t
from mcacct.kernels.recursion import recursion_log_ratio_t
from mcacct.kernels.sliding import column_sq_norms
from mcacct.schemes.bminsep import expected_participation_rate


@functools.partial(jax.jit, static_argnums=tuple(range(1, 9)))
def _bounds(key, n, b, p, warm, k, c0, width, block):
    """``(U fused, U of the XLA path, exact loss)``, each ``(8, width)``, for 8 sigmas in [0.2, 2], and the largest
    noise mass ``sum |z|`` of a draw."""
    sigmas = jnp.asarray(np.geomspace(0.2, 2.0, 8))
    c = (c0,) * k
    tau, z = standardised_blocks_t(key, n, b, p, warm, expected_participation_rate(p, b), width)
    noise_key = jax.random.key_data(jax.random.split(key)[1])
    fused = fused_remove_bound_from_key(noise_key, tau, sigmas, jnp.zeros(8), n, b, p, warm, c, width,
                                        min(width, 256), block, interpret=True)
    xla = remove_loss_bound_from_draws_t(tau, z, sigmas, jnp.zeros(8), n, b, p, warm, c, block)
    s_m, s_z = ladder_sums_t(tau, z, n, b, c, jnp.float64, "direct")
    half = jnp.asarray(0.5 * column_sq_norms(c, n))[:, None]
    exact = jax.lax.map(lambda s: recursion_log_ratio_t((s_m + (s * s_z - half)) / s**2, b, p, warm, "scan"), sigmas)
    return fused, xla, exact, jnp.max(jnp.sum(jnp.abs(z), axis=0))


def allowance(n: int, b: int, c0: float, mass, sigma_min: float, block: int) -> float:
    """How far the two bounds may differ: the noise allowances (the XLA path's ``2 c0 gamma sum|z|`` over all ``n``
    rows, the fused one's over the rows from each block on plus ``NORMAL_ULPS``) over the smallest sigma, times the
    ``n/b + 2`` jumps of the recursion through which a raise of every exponent can compound; and the step allowances
    (``1 + 2^-40`` per block of ``s`` rounds in the fused kernel, per super-block of ``b/s`` blocks in the XLA path:
    ``ln U`` moves by at most ``2^-40`` per block, ``n/s + 4`` of them with the warm start's sum)."""
    noise = (2.0 * sum_error(n + 64 + n) + NORMAL_ULPS * 2.0**-52) * c0 * 1.01 * float(mass) / sigma_min
    return (n // b + 2) * noise + (n // min(block, b) + 4) * 2.0**-40 * 1.01 + 1e-13


def _check(n, b, c0, block, fused, xla, exact, mass):
    fused, xla, exact = (np.asarray(v) for v in (fused, xla, exact))
    tol = allowance(n, b, c0, mass, 0.2, block)
    ok = np.isfinite(exact)
    assert ok.mean() > 0.99 and not np.any(np.isnan(fused))
    assert np.all(fused[ok] >= exact[ok] - 1e-12 * (1 + np.abs(exact[ok]))), (fused - exact)[ok].min()
    # the same draws: both bounds from the same noise, differing only in their rounding allowances (the fused one
    # takes the suffix mass of each block, the XLA one all n rows; one allowance per block, not per super-block)
    np.testing.assert_allclose(fused, xla, rtol=1e-12, atol=tol)


@pytest.mark.parametrize("n,b,p,warm,k,c0,block", [
    (300, 64, 0.02, True, 64, 0.125, 16),        # b and k multiples of the block
    (137, 40, 0.1, True, 23, 0.2, 16),           # b = 2*16 + 8 (r > 0), k not a multiple, block 0 partial
    (137, 40, 0.9, False, 5, 0.4, 16),           # participation forced, k < block, cold start
    (257, 64, 0.02, False, 50, 0.14, 32),        # block 32, block 0 a single row
    (20, 64, 0.2, True, 64, 0.125, 16),          # n < b: the warm start's rows past n
    (70, 2, 0.4, True, 1, 0.7, 2),               # block = b = 2
    (295, 7, 1e-3, False, 3, 0.01, 1),           # 295 blocks of one round, a small column: the step allowances
], ids=["aligned", "r-and-k-unaligned", "forced-cold-short-c", "block32", "n-below-b", "b2", "many-blocks"])
def test_fused_bound_holds_and_reads_the_xla_draws(n, b, p, warm, k, c0, block):
    """2^12 draws x 8 sigmas per case, 2 keys (about 5.7e5 (draw, sigma) pairs in all)."""
    for seed in (0, 1):
        _check(n, b, c0, block, *_bounds(jax.random.key(seed), n, b, p, warm, k, c0, 1 << 12, block))


@settings(max_examples=8, deadline=None)   # each example compiles its shapes (~2-4 s)
@given(n=st.integers(1, 90), b=st.sampled_from([1, 2, 4, 8, 16, 24, 33]), k=st.integers(1, 33),
       p=st.sampled_from([1e-3, 0.05, 0.5, 0.95]), warm=st.booleans(), block=st.sampled_from([1, 2, 4, 8, 16]),
       c0=st.sampled_from([0.05, 0.5, 2.0]), seed=st.integers(0, 2**16))
@example(n=1, b=1, k=1, p=0.5, warm=True, block=16, c0=0.5, seed=0)
@example(n=45, b=33, k=33, p=0.95, warm=False, block=16, c0=2.0, seed=3)
def test_fused_bound_holds_anywhere(n, b, k, p, warm, block, c0, seed):
    k = min(k, b)
    s = min(block, b)
    if s & (s - 1):
        assert "power of two" in fused_bound_refusal(n, b, p, (c0,) * k, block)
        return
    _check(n, b, c0, block, *_bounds(jax.random.key(seed), n, b, p, warm, k, c0, 64, block))


def test_fused_bound_refuses_by_name():
    assert "constant, positive c_col" in fused_bound_refusal(64, 8, 0.1, (1.0, 0.5))
    assert "constant, positive c_col" in fused_bound_refusal(64, 4, 0.1, (1.0,) * 5)
    assert "0 < sampling_prob < 1" in fused_bound_refusal(64, 8, 1.0, (1.0,))
    assert "power of two" in fused_bound_refusal(64, 24, 0.1, (1.0,), block=24)
    assert fused_bound_refusal(7200, 256, 1.2e-4, (1 / 16,) * 256) == ""
    mu = jnp.zeros((8, 48))
    with pytest.raises(ValueError, match="tile must divide"):
        fused_remove_bound(jnp.zeros(2, jnp.uint32), mu, jnp.ones(2), jnp.zeros(2), 48, 32, 64, 8, 0.1, True,
                           (1.0,), interpret=True)
    with pytest.raises(ValueError, match="power-of-two tile"):
        fused_remove_bound(jnp.zeros(2, jnp.uint32), mu, jnp.ones(2), jnp.zeros(2), 48, 48, 64, 8, 0.1, True,
                           (1.0,), interpret=False)
