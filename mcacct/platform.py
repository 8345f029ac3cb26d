r"""The platform the programs being traced are for: ``"cpu"``, ``"gpu"`` or ``"tpu"``.

Kernels choose their form by platform at trace time (``lax.map`` over cache-sized blocks or ``vmap``, the
recursion's ``"auto"``, the prefix sums, Pallas interpret mode, the loss kernel's ``"auto"``).
:func:`target_platform` is JAX's default backend, unless the environment variable ``MCACCT_TARGET_PLATFORM``
names another: a CPU host then traces the programs an accelerator would run, so that ``jax.export(...,
platforms=["cuda"])`` lowers those (``benchmarks/accelerator.py --lower-only``). Set it before the first trace of
a process (jit caches do not see it), and only to export, never to run.

This module imports only ``jax`` (layer 0).
"""

from __future__ import annotations

import os

import jax

__all__ = ["target_platform", "PLATFORM_ENV"]

PLATFORM_ENV = "MCACCT_TARGET_PLATFORM"
_ALIASES = {"cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "cpu": "cpu", "tpu": "tpu"}


def target_platform() -> str:
    """``MCACCT_TARGET_PLATFORM`` (``cpu``, ``gpu``/``cuda``/``rocm``, ``tpu``) if set, else JAX's default backend
    (``gpu`` for CUDA and ROCm)."""
    name = os.environ.get(PLATFORM_ENV) or jax.default_backend()
    if name.lower() not in _ALIASES:
        raise ValueError(f"{PLATFORM_ENV} must be one of cpu, gpu, cuda, rocm, tpu; got {name!r}")
    return _ALIASES[name.lower()]
