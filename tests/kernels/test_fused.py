"""The fused kernel (mcacct.kernels.fused): its losses equal the unfused kernel's on the same draws (and brute
force), and the Pallas form in interpret mode equals the XLA form."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import oracles
from mcacct.kernels.fused import fused_ladder_losses
from mcacct.kernels.output import standardised_draws_t
from mcacct.kernels.recursion import ladder_losses_t

# (n, b, p, c_col, warm, samples): short and long blocks, constant c (prefix sums) and general c (direct),
# b = 1, p up to 0.9, n not a multiple of b
CASES = [(37, 4, 0.3, (1.0, 0.5, 0.25), True, 16),
         (50, 8, 0.2, (0.5,) * 8, False, 8),
         (70, 16, 0.05, (0.25,) * 16, True, 32),
         (131, 40, 0.9, (0.3,) * 8, True, 8),
         (20, 1, 0.4, (1.0,), False, 8),
         (45, 3, 0.7, (0.8, 0.6), True, 16)]


@functools.partial(jax.jit, static_argnums=range(2, 9))  # one program per case (eager: ~60 small compiles)
def _unfused(key, sigmas, n, b, p, warm, c, s, recursion="scan"):
    rate = 1 / (1 / p + b - 1)
    m, z = standardised_draws_t(key, n, b, p, warm, rate, c, s)
    return ladder_losses_t(m, z, jnp.asarray(sigmas), b, p, warm, c, "auto", recursion), m, z


@pytest.mark.parametrize("n,b,p,c,warm,s", CASES)
def test_fused_equals_unfused_and_pallas(n, b, p, c, warm, s):
    key = jax.random.key(n * 7 + b)
    sigmas = jnp.asarray([0.6, 1.3])
    rate = 1 / (1 / p + b - 1)
    want, _, _ = _unfused(key, sigmas, n, b, p, warm, c, s)
    got = fused_ladder_losses(key, sigmas, n, b, p, warm, rate, c, s)
    scale = float(np.max(np.abs(np.asarray(want)))) + 1.0
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=1e-11 * scale)
    # Pallas in interpret mode on every platform: on a GPU the default compiles (Triton), which refuses a min_sep
    # that is not a power of two (3, 40 here) by design; the compiled kernel is checked in tests/gpu (#38)
    pal = fused_ladder_losses(key, sigmas, n, b, p, warm, rate, c, s, pallas=True, tile=8, interpret=True)
    np.testing.assert_allclose(np.asarray(pal), np.asarray(got), rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("n,b,p,c,warm", [(9, 3, 0.35, (1.0, 0.5), True), (8, 2, 0.6, (0.8, 0.6), False),
                                          (7, 4, 0.25, (0.5,) * 4, True)])
def test_fused_matches_enumeration(n, b, p, c, warm):
    key = jax.random.key(3)
    sigma = 0.8
    got, m, z = _unfused(key, jnp.asarray([sigma]), n, b, p, warm, c, 8)
    fused = fused_ladder_losses(key, jnp.asarray([sigma]), n, b, p, warm, 1 / (1 / p + b - 1), c, 8)
    y_rem = np.asarray(m + sigma * z).T
    y_add = np.asarray(sigma * z).T
    rem = [oracles.log_likelihood_ratio(y, sigma, c, p, b, warm) for y in y_rem]
    add = [-oracles.log_likelihood_ratio(y, sigma, c, p, b, warm) for y in y_add]
    np.testing.assert_allclose(np.asarray(fused[0, 0]), rem, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(np.asarray(fused[0, 1]), add, rtol=1e-9, atol=1e-9)


def test_fused_falls_back_to_exact_scan():
    """Tiny sigma: the linear recursion's block sums leave the safe range; the block is recomputed exactly."""
    n, b, p, c = 60, 6, 0.5, (1.0, 1.0, 1.0)
    key = jax.random.key(1)
    sigmas = jnp.asarray([0.03])
    want, _, _ = _unfused(key, sigmas, n, b, p, True, c, 8)
    got = fused_ladder_losses(key, sigmas, n, b, p, True, 1 / (1 / p + b - 1), c, 8)
    assert np.all(np.isfinite(np.asarray(got)))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)


@pytest.mark.parametrize("kwargs,match", [({"sampling_prob": 1.0}, "sampling_prob"),
                                          ({"c_col": (1.0,) * 5}, "len\\(c_col\\)")])
def test_fused_refuses_what_it_cannot_run(kwargs, match):
    args = dict(iterations=20, min_sep=4, sampling_prob=0.3, warm_start=True, participation_rate=0.2,
                c_col=(1.0,), num_samples=8)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        fused_ladder_losses(jax.random.key(0), jnp.asarray([1.0]), **args)
