"""The fused remove bound compiled on a GPU (issue #39, shortcut 4; mcacct.kernels.fused_bound) at the production
shape: n = 7200, b = 256, c = ones(256)/16, §7.4's sampling probability and ladder. The Pallas Triton kernel must
read the XLA path's noise words (its ``U`` within the rounding allowances of ``remove_loss_bound_from_draws_t`` on the
materialised draws of the same key) and bound the exact loss, at blocks of 16 and 32 rounds.

Marked ``gpu`` (skipped without a GPU backend; tests/conftest.py); ``MCACCT_RUN_GPU_TESTS=1`` runs it on a CPU
with the kernel interpreted and fewer draws.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcacct.core.rates import sampling_prob_from_batch_size
from mcacct.kernels.const_column import remove_loss_bound_from_draws_t
from mcacct.kernels.fused_bound import fused_remove_bound_from_key
from mcacct.kernels.output import ladder_sums_t, standardised_blocks_t
from mcacct.kernels.recursion import recursion_log_ratio_t
from mcacct.kernels.sliding import column_sq_norms
from mcacct.schemes.bminsep import expected_participation_rate

from tests.kernels.test_fused_bound import allowance

pytestmark = pytest.mark.gpu

N, B = 7200, 256
P = sampling_prob_from_batch_size(1793, 14_745_600, B)
C = (1.0 / 16.0,) * B
LADDER = (0.44, 0.47, 0.5, 0.56)


def _on_gpu() -> bool:
    return jax.default_backend() != "cpu"


@pytest.mark.parametrize("block", [16, 32])
def test_compiled_fused_bound_reads_the_xla_draws_and_bounds_the_loss(block):
    width = 8192 if _on_gpu() else 128
    sig = jnp.asarray(LADDER)
    rate = expected_participation_rate(P, B)

    @jax.jit
    def run(key):
        tau, z = standardised_blocks_t(key, N, B, P, True, rate, width)
        nk = jax.random.key_data(jax.random.split(key)[1])
        fused = fused_remove_bound_from_key(nk, tau, sig, jnp.zeros(4), N, B, P, True, C, width, min(width, 128),
                                            block, interpret=not _on_gpu())
        xla = remove_loss_bound_from_draws_t(tau, z, sig, jnp.zeros(4), N, B, P, True, C, block)
        s_m, s_z = ladder_sums_t(tau, z, N, B, C, jnp.float64, "fft")
        half = jnp.asarray(0.5 * column_sq_norms(C, N))[:, None]
        exact = jax.lax.map(lambda s: recursion_log_ratio_t((s_m + (s * s_z - half)) / s**2, B, P, True, "scan"), sig)
        return fused, xla, exact, jnp.max(jnp.sum(jnp.abs(z), axis=0))

    fused, xla, exact, mass = (np.asarray(v) for v in run(jax.random.key(11)))
    assert np.all(np.isfinite(fused)) and np.all(np.isfinite(exact))
    np.testing.assert_allclose(fused, xla, rtol=1e-12, atol=allowance(N, B, C[0], mass, min(LADDER), block))
    # the exact loss from float64 FFT sums: within the loss-error bound of the exact one, far below this margin
    assert np.all(fused >= exact - 1e-6), (fused - exact).min()


def test_pallas_normals_within_normal_ulps_of_xla():
    """The normals a Pallas kernel computes from the counter words (as the fused bound does) against the XLA path's
    for the same key: within ``NORMAL_ULPS`` of each, the allowance the bound's ``zeta`` carries for another
    compiler's contraction of the inversion's multiply-adds (equal bits where both are XLA:CPU's)."""
    from jax.experimental import pallas as pl

    from mcacct.kernels.fused_bound import NORMAL_ULPS
    from mcacct.kernels.normal import normal_from_bits, standard_normal
    from mcacct.kernels.threefry import counter_word

    rows, width, tile = 256, 1024, 128
    key = jax.random.key(5)

    def kernel(key_ref, out_ref):
        cols = (pl.program_id(0) * tile + jax.lax.broadcasted_iota(jnp.int32, (rows, tile), 1)).astype(jnp.int64)
        flat = jax.lax.broadcasted_iota(jnp.int32, (rows, tile), 0).astype(jnp.int64) * width + cols
        out_ref[...] = normal_from_bits(counter_word(key_ref[0], key_ref[1], flat))

    fused = pl.pallas_call(kernel, grid=(width // tile,), in_specs=[pl.BlockSpec((2,), lambda i: (0,))],
                           out_specs=pl.BlockSpec((rows, tile), lambda i: (0, i)),
                           out_shape=jax.ShapeDtypeStruct((rows, width), jnp.float64),
                           interpret=not _on_gpu())(jax.random.key_data(key))
    xla = jax.jit(lambda k: standard_normal(k, (rows, width)))(key)
    fused, xla = np.asarray(fused), np.asarray(xla)
    ulps = np.abs(fused - xla) / (np.abs(xla) * 2.0**-52)
    assert float(ulps.max()) <= NORMAL_ULPS, float(ulps.max())

