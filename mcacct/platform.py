r"""The platform the programs being traced are for: ``"cpu"``, ``"gpu"`` or ``"tpu"``.

Kernels choose their form by platform at trace time (``lax.map`` over cache-sized blocks or ``vmap``, the
recursion's ``"auto"``, the prefix sums, Pallas interpret mode, the loss kernel's ``"auto"``).
:func:`target_platform` is JAX's default backend, unless the environment variable ``MCACCT_TARGET_PLATFORM``
names another: a CPU host then traces the programs an accelerator would run, so that ``jax.export(...,
platforms=["cuda"])`` lowers those (``benchmarks/accelerator.py --lower-only``). Set it before the first trace of
a process (jit caches do not see it), and only to export, never to run.

:func:`use_cpu_cores` gives JAX's CPU backend one device per core before it starts (the CLI does, ``--cpu-devices``):
XLA:CPU runs a program's sequential steps (the recursions' and the count chain's scans) on one thread, so one
device leaves the other cores idle, while the engine's mesh runs one chunk per device at a time with the same
statistics bit for bit whatever the device count (:mod:`mcacct.engine.runner`).

This module imports only ``jax`` (layer 0).
"""

from __future__ import annotations

import os

import jax

__all__ = ["target_platform", "PLATFORM_ENV", "cpu_cores", "use_cpu_cores", "AUTO_CPU_DEVICES_MAX"]

PLATFORM_ENV = "MCACCT_TARGET_PLATFORM"
_ALIASES = {"cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "cpu": "cpu", "tpu": "tpu"}


def target_platform() -> str:
    """``MCACCT_TARGET_PLATFORM`` (``cpu``, ``gpu``/``cuda``/``rocm``, ``tpu``) if set, else JAX's default backend
    (``gpu`` for CUDA and ROCm)."""
    name = os.environ.get(PLATFORM_ENV) or jax.default_backend()
    if name.lower() not in _ALIASES:
        raise ValueError(f"{PLATFORM_ENV} must be one of cpu, gpu, cuda, rocm, tpu; got {name!r}")
    return _ALIASES[name.lower()]


#: the most CPU devices ``use_cpu_cores()`` gives by default: each device holds a chunk's arrays at a time (about
#: 0.3 GB at the §7.4 shape, n = 7200, with chunks of 4096), so memory grows with the count
AUTO_CPU_DEVICES_MAX = 16


def cpu_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _user_chose_cpu_devices() -> bool:
    return ("JAX_NUM_CPU_DEVICES" in os.environ
            or "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""))


def use_cpu_cores(count: int | None = None) -> int | None:
    """Give JAX's CPU backend ``count`` devices (default: :func:`cpu_cores`, at most :data:`AUTO_CPU_DEVICES_MAX`).

    Call it before the first JAX computation of the process: JAX fixes its CPU device count when its backends
    start. Returns the count (set now, or the one JAX already has when ``count`` equals it), or ``None`` when left
    alone: by default (``count=None``) when the environment already chose (``JAX_NUM_CPU_DEVICES``, or
    ``--xla_force_host_platform_device_count`` in ``XLA_FLAGS``) or JAX's backends have started. An explicit
    ``count`` that can no longer be set raises ``ValueError`` unless it is the count JAX already has. Accelerator
    backends are not affected.
    """
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise ValueError(f"cpu devices must be an integer >= 1; got {count!r}")
    explicit = count is not None
    if not explicit:
        if _user_chose_cpu_devices():
            return None
        count = min(cpu_cores(), AUTO_CPU_DEVICES_MAX)
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError as err:  # JAX's backends have started: the count is fixed for this process
        if not explicit or len(jax.devices("cpu")) == count:
            return None
        raise ValueError(f"--cpu-devices {count} must be set before JAX starts (this process already runs "
                         f"{len(jax.devices('cpu'))} CPU devices)") from err
    return count
