r"""The compiled fused kernel (Pallas Triton) against the unfused kernel on a GPU (issue #38).

Marked ``gpu``: skipped where JAX has no GPU backend (tests/conftest.py); ``benchmarks/device_session.sh`` runs them on
the device (through ``benchmarks/gpu_suite.py``). ``MCACCT_RUN_GPU_TESTS=1`` runs them on a CPU too, where the
fused kernel runs its XLA form and interpreted Pallas form: that checks this file's code, nothing GPU-specific.

*The tolerance, from the arithmetic.* For a given key both kernels draw the same outputs ``y`` (same counters, same
participation draws; ``mcacct/kernels/fused.py``) and evaluate the same sliding sums and recursion, so they differ
only in float rounding. ``eta = loss_error_bound(problem, sigma)`` (``mcacct/engine/systematic.py``,
docs/soundness.md "Floating-point error of the loss") bounds ``|L_hat - L|`` for every sample and either kernel: it
charges every rounding of the sliding sums (in any order: ``direct``, ``prefix``, the doubling suffix sums of the
Pallas form are sums of subsets of the terms), ``(8 + 4 Xi) u`` relative per recursion step and ``4 n u L_max`` for
the log-scale additions, assuming each operation and each ``exp``/``log`` is correct to a few units of ``u = 2^-53``.
The GPU keeps that premise: an FMA contraction rounds ``a b + c`` once instead of twice (its error is at most the
unfused pair's bound), and CUDA's float64 ``exp``, ``log`` and ``log1p`` (libdevice) are within 1-2 ulp (CUDA C++
Programming Guide, "Mathematical functions"), inside the per-step allowance. So each kernel's loss is within
``eta`` of the exact loss, and the two within ``2 eta`` of each other (triangle inequality): the bound asserted
here, with no other slack. It is not widened for the GPU: ``eta`` is 1e-10 to 1e-8 nats at these shapes, while the
observed CPU differences are ~1e-13, and a wrong draw or index shows as a difference of order 1.

*The shapes the compiled kernel accepts today* (``fused_gpu_supported``, ``FUSED_GPU_MAX_MIN_SEP``): ``min_sep`` a
power of two up to 64, ``len(c_col) <= min_sep``, ``0 < p < 1``, a power-of-two sample tile; the ladder is padded to
a power of two inside (3 sigmas here: padded to 4).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcacct import BandedToeplitz, BMinSep, Problem
from mcacct.engine.kernel_choice import FUSED_GPU_MAX_MIN_SEP, fused_block_ladder, resolve_loss_kernel
from mcacct.engine.losses import ladder_losses
from mcacct.schemes.mechanism import KernelOptions
from mcacct.engine.systematic import loss_error_bound
from mcacct.kernels.fused import fused_gpu_supported, fused_ladder_losses
from mcacct.core.precision import x64_scope

pytestmark = pytest.mark.gpu

SIGMAS = (0.6, 1.3, 2.0)
SAMPLES = 256             # the engine's tile: min(256 & -256, 64) = 64, so 4 programs

# (n, b, p, c_col, warm): every power-of-two b up to the engine's GPU maximum, n a multiple of b and not, constant c
# (prefix sums) and general c, len(c_col) = b and < b, warm and cold start, p from 0.01 to 0.9, and the b = 8
# configuration of issue #38's end-to-end check
CASES = [(20, 1, 0.4, (1.0,), False),
         (33, 2, 0.9, (0.8, 0.6), True),
         (37, 4, 0.3, (1.0, 0.5, 0.25), True),
         (50, 8, 0.2, (0.5,) * 8, False),
         (256, 8, 0.05, (0.35355,) * 8, True),
         (70, 16, 0.05, (0.25,) * 16, True),
         (100, 32, 0.02, (0.5,) * 4, True),
         (130, FUSED_GPU_MAX_MIN_SEP, 0.01, (0.7, 0.7), True)]


def _ids(case):
    n, b, p, c, warm = case
    return f"n{n}-b{b}-p{p}-k{len(c)}-{'warm' if warm else 'cold'}"


def _etas(scheme, strategy, sigmas=SIGMAS):
    return [loss_error_bound(Problem(scheme, strategy), s) for s in sigmas]


def _assert_within(got, want, etas, label):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (label, got.shape, want.shape)
    assert np.all(np.isfinite(got)), label
    for j, eta in enumerate(etas):
        diff = float(np.max(np.abs(got[j] - want[j])))
        assert diff <= 2 * eta, f"{label}, sigma #{j}: max |difference| {diff:.3g} > 2 eta = {2 * eta:.3g}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_engine_fused_kernel_equals_unfused_within_twice_eta(case):
    """The engine's path: ``fused_block_ladder`` (on a GPU the compiled Pallas Triton kernel) against the scheme's
    unfused ``ladder_losses`` (on a GPU the blocked recursion) on the same key, every sigma and both directions."""
    n, b, p, c, warm = case
    assert fused_gpu_supported(n, b, p, c) == (True, "")
    scheme, strategy = BMinSep(p, b, n, warm), BandedToeplitz(c)
    problem = Problem(scheme, strategy, loss_kernel="fused")
    assert resolve_loss_kernel(problem).kernel == "fused"      # the engine accepts the shape on this platform
    key = jax.random.key(n * 7 + b)
    sigmas = jnp.asarray(SIGMAS)
    with x64_scope():
        fused = fused_block_ladder(problem, key, sigmas, SAMPLES)
        unfused = ladder_losses(scheme.mechanism(strategy), key, sigmas, SAMPLES)
    _assert_within(fused, unfused, _etas(scheme, strategy), f"fused vs unfused {_ids(case)}")


@pytest.mark.parametrize("case", [CASES[2], CASES[4], CASES[5]], ids=_ids)
@pytest.mark.parametrize("tile", [8, 32])
def test_compiled_kernel_equals_its_xla_form_at_every_tile(case, tile):
    """The Pallas form (compiled on a GPU) at sample tiles 8 and 32 against the fused kernel's XLA form on the same
    device: same draws, same recursion, rounding only (within ``2 eta``)."""
    n, b, p, c, warm = case
    scheme, strategy = BMinSep(p, b, n, warm), BandedToeplitz(c)
    key = jax.random.key(11 + b)
    sigmas = jnp.asarray(SIGMAS)
    args = dict(iterations=n, min_sep=b, sampling_prob=p, warm_start=warm,
                participation_rate=scheme.participation_rate, c_col=c, num_samples=SAMPLES)
    with x64_scope():
        pallas = fused_ladder_losses(key, sigmas, pallas=True, tile=tile, **args)
        xla = fused_ladder_losses(key, sigmas, **args)
    _assert_within(pallas, xla, _etas(scheme, strategy), f"pallas tile {tile} vs xla {_ids(case)}")


def test_compiled_kernel_falls_back_to_the_exact_scan():
    """Tiny sigma: the block sums leave the linear recursion's safe range, the kernel's ``ok`` flags fail and the
    block is recomputed by the exact scan on the same draws: finite, and within ``2 eta`` of the unfused kernel."""
    n, b, p, c = 60, 4, 0.5, (1.0, 1.0, 1.0)
    scheme, strategy = BMinSep(p, b, n, True), BandedToeplitz(c)
    problem = Problem(scheme, strategy, loss_kernel="fused")
    key = jax.random.key(1)
    sigmas = jnp.asarray([0.03])
    with x64_scope():
        fused = fused_block_ladder(problem, key, sigmas, 64)
        unfused = ladder_losses(scheme.mechanism(strategy, KernelOptions(recursion="scan")), key, sigmas, 64)
    _assert_within(fused, unfused, _etas(scheme, strategy, (0.03,)), "tiny sigma fallback")
