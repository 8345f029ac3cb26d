"""The engine's choice of loss kernel (engine/kernel_choice.py): resolution and refusals, the fused kernel's losses
equal the unfused ones within the loss-error bound on the same draws, calibrations agree, and job files record the
resolved kernel."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcacct
from mcacct import BandedToeplitz, BMinSep, Problem, TruncatedBMinSep
from mcacct.engine.kernel_choice import AUTO_LOSS_KERNEL, fused_block_ladder, resolve_loss_kernel
from mcacct.engine.losses import ladder_losses
from mcacct.engine.systematic import loss_error_bound
from mcacct.jobs.problem_file import problem_from_dict, problem_to_dict
from mcacct.core.precision import x64_scope

SCHEME = BMinSep(0.2, 4, 32, True)
STRATEGY = BandedToeplitz((0.6, 0.5, 0.4))


def test_auto_follows_the_table_and_names_its_evidence():
    r = resolve_loss_kernel(Problem(SCHEME, STRATEGY))
    platform = "gpu" if jax.default_backend() in ("gpu", "cuda", "rocm") else jax.default_backend()
    assert r.kernel == AUTO_LOSS_KERNEL[platform][0]
    assert "benchmarks/results" in AUTO_LOSS_KERNEL["cpu"][1]
    assert resolve_loss_kernel(Problem(SCHEME, STRATEGY, loss_kernel="fused")).kernel == "fused"
    assert resolve_loss_kernel(Problem(SCHEME, STRATEGY, loss_kernel="unfused")).kernel == "unfused"


@pytest.mark.parametrize("problem, needle", [
    (Problem(TruncatedBMinSep(0.2, 2, 16, 12, 3, True), BandedToeplitz((1.0, 0.5)), loss_kernel="fused"),
     "TruncatedBMinSep has no fused kernel"),
    (Problem(SCHEME, STRATEGY, dtype="float32", loss_kernel="fused"), "float64"),
    (Problem(BMinSep(1.0, 4, 32, True), STRATEGY, loss_kernel="fused"), "sampling_prob < 1"),
])
def test_fused_is_refused_with_the_reason(problem, needle):
    with pytest.raises(ValueError, match="loss_kernel='fused' is not available") as err:
        resolve_loss_kernel(problem)
    assert needle in str(err.value)


def test_bad_choice_names_the_field():
    with pytest.raises(ValueError, match="loss_kernel"):
        Problem(SCHEME, STRATEGY, loss_kernel="fast")


def test_fused_losses_equal_unfused_within_the_loss_error_bound():
    sigmas = jnp.asarray([0.8, 1.1])
    with x64_scope():
        fused = np.asarray(fused_block_ladder(Problem(SCHEME, STRATEGY, loss_kernel="fused"), jax.random.key(5),
                                              sigmas, 256))
        unfused = np.asarray(ladder_losses(SCHEME.mechanism(STRATEGY), jax.random.key(5), sigmas, 256))
    for j, s in enumerate([0.8, 1.1]):
        eta = loss_error_bound(Problem(SCHEME, STRATEGY), s)
        assert np.max(np.abs(fused[j] - unfused[j])) <= eta


def test_calibrations_agree_and_files_record_the_resolved_kernel():
    got = {}
    for kernel in ("fused", "unfused"):
        problem = Problem(SCHEME, STRATEGY, loss_kernel=kernel)
        got[kernel] = mcacct.calibrate(problem, 1.0, 1e-2, jax.random.key(2), sigmas=[0.9, 1.2, 1.6],
                                       num_samples=4096).sigma
        d = problem_to_dict(problem)
        assert d["loss_kernel"] == kernel
        assert problem_from_dict(d).loss_kernel == kernel
    assert got["fused"] == got["unfused"]
    assert problem_to_dict(Problem(SCHEME, STRATEGY))["loss_kernel_resolved"] == resolve_loss_kernel(
        Problem(SCHEME, STRATEGY)).kernel


def test_gpu_refuses_the_fused_kernel_beyond_its_compile_time_bound(monkeypatch):
    """On a GPU the compiled fused kernel serves min_sep up to FUSED_GPU_MAX_MIN_SEP (its Triton compilation did not
    finish in 180 s at 256 on an H200); auto falls back to the unfused kernel and says why."""
    from mcacct.engine.kernel_choice import FUSED_GPU_MAX_MIN_SEP
    monkeypatch.setenv("MCACCT_TARGET_PLATFORM", "gpu")
    b = 2 * FUSED_GPU_MAX_MIN_SEP
    wide = BMinSep(0.001, b, 4 * b, True)
    c = tuple(np.ones(b) / np.sqrt(b))
    with pytest.raises(ValueError, match=f"min_sep={b} > {FUSED_GPU_MAX_MIN_SEP}"):
        resolve_loss_kernel(Problem(wide, BandedToeplitz(c), loss_kernel="fused"))
    monkeypatch.setitem(AUTO_LOSS_KERNEL, "gpu", ("fused", "test"))
    auto = resolve_loss_kernel(Problem(wide, BandedToeplitz(c)))
    assert auto.kernel == "unfused" and "compilation" in auto.reason
    narrow = BMinSep(0.01, 8, 64, True)
    assert resolve_loss_kernel(Problem(narrow, BandedToeplitz((0.5,) * 8), loss_kernel="fused")).kernel == "fused"
