r"""Which loss kernel runs a problem's shared-draw ladder: the fused kernel (:mod:`mcacct.kernels.fused`: draws,
sliding sums and recursion in one pass) or the unfused one (the scheme's mechanism's ``ladder``).

``Problem.loss_kernel`` is ``"auto"``, ``"fused"`` or ``"unfused"``. Both kernels draw the same outputs for the same
key and differ only by float rounding, within the loss-error bound (docs/soundness.md); their bits differ, so the
*resolved* kernel is part of a job file's problem fields and of its fingerprint.

``"auto"`` reads :data:`AUTO_LOSS_KERNEL`, per platform: what the last measurement on that kind of device found
faster, with the file that holds the measurement. ``"fused"`` is refused, naming the reason, where the scheme
has no fused form (its mechanism's ``fused_args``: :class:`~mcacct.schemes.mechanism.Mechanism`), the
configuration is outside the fused kernel (:func:`mcacct.kernels.fused.fused_refusal`; on GPUs also
:func:`mcacct.kernels.fused.fused_gpu_supported`), or the kernel dtype is float32 (the fused kernel is float64).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from mcacct.kernels.fused import fused_gpu_supported, fused_ladder_losses, fused_refusal
from mcacct.core.validate import LOSS_KERNELS, check_choice
from mcacct.core.platform import target_platform

__all__ = ["AUTO_LOSS_KERNEL", "FUSED_GPU_MAX_MIN_SEP", "LOSS_KERNELS", "ResolvedKernel", "resolve_loss_kernel",
           "fused_block_ladder"]

#: ``platform -> (kernel, evidence)``: what ``"auto"`` picks on each platform, and the measurement behind it.
AUTO_LOSS_KERNEL = {
    "cpu": ("unfused", "benchmarks/results/throughput_cpu.json (2-core box, same run, both directions at one sigma): "
                       "the fused kernel's XLA form reached 0.35x (n=1024, b=8), 0.62x (n=7200, b=256) and 0.47x "
                       "(n=1024, b=1) of the unfused kernel's draws/s (ladder1_fused / ladder1_unfused)"),
    "gpu": ("unfused", "benchmarks/results/accelerator_nvidia_h200.json (H200, jax 0.11.2, 4-sigma ladder draws/s, "
                       "2026-11-26): the fused Pallas Triton kernel reached 4.35x the unfused kernel at (n=1024, b=8) "
                       "and 0.67x at (n=1024, b=1), and is refused beyond min_sep 64; kept unfused until a device run "
                       "records the compiled kernel's values within the loss-error bound of the unfused kernel's "
                       "(benchmarks/accelerator.py, throughput: fused_f64.agreement)"),
    "tpu": ("unfused", "the fused kernel's Pallas form targets GPUs (Triton); no TPU measurement"),
}


#: The largest ``min_sep`` the engine sends to the compiled (Pallas Triton) fused kernel: a policy, not a limit of
#: the kernel, whose Triton compilation grows with ``min_sep``; chosen to keep compilations well under a minute
#: (benchmarks/results/design_choices.md).
FUSED_GPU_MAX_MIN_SEP = 64


class ResolvedKernel(NamedTuple):
    """The kernel a problem runs (``"fused"`` or ``"unfused"``) and why."""

    kernel: str
    reason: str


def _fused_refused(problem) -> str:
    """Why the fused kernel cannot run ``problem`` here ("" if it can)."""
    args = problem.mechanism().fused_args
    if args is None:
        return f"{type(problem.scheme).__name__} has no fused kernel"
    if problem.dtype != "float64":
        return f"the fused kernel computes in float64; dtype is {problem.dtype!r}"
    gpu = target_platform() == "gpu"
    if gpu and args["min_sep"] > FUSED_GPU_MAX_MIN_SEP:
        return (f"min_sep={args['min_sep']} > {FUSED_GPU_MAX_MIN_SEP}: the compiled GPU kernel's compilation did not "
                f"finish in 180 s at min_sep=256 on an H200 (it took 4.6 s at 8; "
                f"benchmarks/results/accelerator_nvidia_h200.json)")
    check = (lambda *a: fused_gpu_supported(*a)[1]) if gpu else fused_refusal
    return check(args["iterations"], args["min_sep"], args["sampling_prob"], args["c_col"])


def resolve_loss_kernel(problem) -> ResolvedKernel:
    """The kernel ``problem.loss_kernel`` stands for on this process's default backend.

    Parameters
    ----------
    problem : Problem
        The problem; its ``loss_kernel`` is ``"auto"``, ``"fused"`` or ``"unfused"``.

    Returns
    -------
    ResolvedKernel
        ``("unfused" | "fused", reason)``: ``"asked for"``, or for ``"auto"`` the platform's entry of
        :data:`AUTO_LOSS_KERNEL` with its evidence (``"unfused"`` with the refusal where the fused kernel cannot run).

    Raises
    ------
    ValueError
        ``loss_kernel="fused"`` where the fused kernel cannot run the problem (the reason is named).
    """
    choice = check_choice("loss_kernel", problem.loss_kernel, LOSS_KERNELS)
    if choice == "unfused":
        return ResolvedKernel("unfused", "asked for")
    if choice == "fused":
        why = _fused_refused(problem)
        if why:
            raise ValueError(f"loss_kernel='fused' is not available for this problem: {why}; use 'unfused' or 'auto'")
        return ResolvedKernel("fused", "asked for")
    kernel, evidence = AUTO_LOSS_KERNEL.get(target_platform(), ("unfused", "no measurement on this platform"))
    why = _fused_refused(problem) if kernel == "fused" else ""
    if why:
        return ResolvedKernel("unfused", f"auto: the fused kernel does not serve this problem ({why})")
    return ResolvedKernel(kernel, f"auto on {target_platform()}: {evidence}")


def fused_block_ladder(problem, key, sigmas, num_samples: int) -> jax.Array:
    """``(J, 2, num_samples)`` losses of one block by the fused kernel (the draws of the mechanism's ``ladder``
    for the same key): its Pallas form on accelerators, its XLA form on CPU.

    Parameters
    ----------
    problem : Problem
        A problem whose mechanism has ``fused_args`` (see :func:`resolve_loss_kernel`).
    key : jax.Array
        The block's key.
    sigmas : array_like
        The ladder's ``J`` noise multipliers.
    num_samples : int
        Samples of the block; on accelerators the Pallas tile is its largest power-of-two divisor, at most 64.

    Returns
    -------
    jax.Array
        float64, shape ``(J, 2, num_samples)``: per sigma, the two directions' losses.
    """
    args = problem.mechanism().fused_args
    pallas = target_platform() != "cpu"
    tile = min(num_samples & -num_samples, 64) if pallas else 0   # a power of two that divides the block
    return fused_ladder_losses(key, jnp.asarray(sigmas, jnp.float64), num_samples=num_samples,
                               dot_method=problem.dot_method, pallas=pallas, tile=tile, **args)
