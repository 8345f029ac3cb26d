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

The persistent compilation cache (:func:`enable_compilation_cache`) keeps compiled XLA programs between processes:
the command line turns it on for every command, the Python API at its first computation
(:func:`ensure_compilation_cache`, called by :func:`mcacct.get_noise_multiplier`, the engine's runner and
:func:`mcacct.pld.pld_calibrate`), both in ``$MCACCT_CACHE_DIR`` (``off`` disables it).

This module imports only ``jax`` (layer 0).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import jax

__all__ = ["target_platform", "PLATFORM_ENV", "LOWERING_GPU_KIND", "gpu_lowering_target", "CACHE_MIN_COMPILE_SECS",
           "cpu_cores", "use_cpu_cores", "AUTO_CPU_DEVICES_MAX", "ENV_CACHE", "compilation_cache_dir",
           "enable_compilation_cache", "ensure_compilation_cache"]

PLATFORM_ENV = "MCACCT_TARGET_PLATFORM"
#: the persistent cache keeps programs of every compile time. A PLD calibration compiles about 30 programs and
#: dispatches about 190 eager operations, each under 0.2 s to compile, and a new process compiled them all again:
#: at 0.2 s (JAX's default is 1 s) the README's command block took 174-187 s with an empty cache on the 2-core box,
#: at 0 148-158 s, with 233 cache entries (7.6 MB) instead of 73 (6.8 MB) (benchmarks/results/design_choices.md)
CACHE_MIN_COMPILE_SECS = 0.0
_ALIASES = {"cuda": "gpu", "rocm": "gpu", "gpu": "gpu", "cpu": "cpu", "tpu": "tpu"}


def target_platform() -> str:
    """``MCACCT_TARGET_PLATFORM`` (``cpu``, ``gpu``/``cuda``/``rocm``, ``tpu``) if set, else JAX's default backend
    (``gpu`` for CUDA and ROCm).

    Returns
    -------
    str
        ``"cpu"``, ``"gpu"`` or ``"tpu"`` (the name is matched case-insensitively).

    Raises
    ------
    ValueError
        If the name (from ``MCACCT_TARGET_PLATFORM`` or JAX) is none of ``cpu``, ``gpu``, ``cuda``, ``rocm``,
        ``tpu``; the message names ``MCACCT_TARGET_PLATFORM``.
    """
    name = os.environ.get(PLATFORM_ENV) or jax.default_backend()
    if name.lower() not in _ALIASES:
        raise ValueError(f"{PLATFORM_ENV} must be one of cpu, gpu, cuda, rocm, tpu; got {name!r}")
    return _ALIASES[name.lower()]


#: the card a host without a GPU lowers the Pallas (Triton) kernels for (``jax.export(..., platforms=["cuda"])``):
#: the H100 of issue #39's targets (compute capability 9.0)
LOWERING_GPU_KIND = "NVIDIA H100 80GB HBM3"


@contextlib.contextmanager
def gpu_lowering_target(device_kind: str = LOWERING_GPU_KIND) -> Iterator[None]:
    """A context in which ``jax.export(..., platforms=["cuda"])`` of a Pallas Triton kernel lowers on a host with no
    GPU.

    From JAX 0.11 the Triton lowering reads the target card's compute capability from the device, or, where there is
    none, from the abstract device of the current abstract mesh (``jax.sharding.use_abstract_mesh``); JAX 0.10 took
    a default. Here: a one-device abstract mesh whose abstract device is ``device_kind`` (a GPU), unless JAX's
    default backend is a GPU (then the concrete device is the target) or this JAX has no abstract devices. Only
    around an export: under an abstract mesh JAX refuses to run an eager computation, so make the export's arguments
    before entering it.

    Parameters
    ----------
    device_kind : str, optional
        The card, as ``jax.devices()[0].device_kind`` names it (default :data:`LOWERING_GPU_KIND`).
    """
    abstract_device = getattr(jax.sharding, "AbstractDevice", None)
    if jax.default_backend() == "gpu" or abstract_device is None:
        yield
        return
    device = abstract_device(device_kind=device_kind, num_cores=None, platform="gpu")
    mesh = jax.sharding.AbstractMesh((1,), ("lowering",), abstract_device=device)
    with jax.sharding.use_abstract_mesh(mesh):
        yield


#: the most CPU devices ``use_cpu_cores()`` gives by default: each device holds a chunk's arrays at a time (about
#: 0.3 GB at the §7.4 shape, n = 7200, with chunks of 4096), so memory grows with the count
AUTO_CPU_DEVICES_MAX = 16


def cpu_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says, else ``os.cpu_count()``).

    Returns
    -------
    int
        At least 1.
    """
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

    Parameters
    ----------
    count : int or None, optional
        The number of CPU devices, an ``int >= 1`` (``bool`` refused); ``None`` (default): ``min(cpu_cores(),
        AUTO_CPU_DEVICES_MAX)`` unless the environment already chose.

    Returns
    -------
    int or None
        The count set (or already in place), or ``None`` when left alone.

    Raises
    ------
    ValueError
        If ``count`` is not an integer ``>= 1``, or an explicit ``count`` differs from the CPU device count of a
        process whose JAX backends have started.
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


#: The environment variable naming the persistent compilation cache's directory (``off``, ``0`` or empty: none).
ENV_CACHE = "MCACCT_CACHE_DIR"
_OFF = ("", "0", "off", "none", "false")
_ensured: list[bool] = []


def compilation_cache_dir() -> str | None:
    """Where compiled XLA programs are kept between runs: ``$MCACCT_CACHE_DIR`` (``off``, ``0`` or empty: no
    cache), else ``$XDG_CACHE_HOME/mcacct/jax`` (default ``~/.cache/mcacct/jax``).

    Returns
    -------
    str or None
        The directory (not created here), or ``None`` when ``MCACCT_CACHE_DIR`` is ``off``, ``0``, ``none``,
        ``false`` (any case) or empty.
    """
    v = os.environ.get(ENV_CACHE)
    if v is not None:
        return None if v.strip().lower() in _OFF else v
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mcacct", "jax")


def enable_compilation_cache(respect_existing: bool = False) -> str | None:
    """Turn on JAX's persistent compilation cache in :func:`compilation_cache_dir` (every program: the minimum
    compile time is :data:`CACHE_MIN_COMPILE_SECS`), so repeated commands, calls in new processes and shard jobs skip
    most of their start-up.

    Entries are keyed by the program, the compile options, the backend and the JAX/XLA versions, and written
    atomically, so concurrent jobs may share the directory; a cached program is the same executable, so results
    are bit-identical with or without it. JAX decides whether a process uses the cache at its first compilation,
    so the decision is reset (``jax.experimental.compilation_cache``) for a process that compiled before.

    Parameters
    ----------
    respect_existing : bool, default False
        Leave a cache directory the application already configured (``jax_compilation_cache_dir``) as it is and
        return it: the Python API's setting, so mcacct never moves a user's cache.

    Returns
    -------
    str or None
        The directory in use, or ``None`` when disabled (``MCACCT_CACHE_DIR=off``) or not writable (the run goes
        on without).
    """
    current = jax.config.jax_compilation_cache_dir
    if respect_existing and current:
        return current
    d = compilation_cache_dir()
    if d is None:
        return None
    try:
        os.makedirs(d, exist_ok=True)
    except OSError:
        return None
    if current != d:
        from jax.experimental.compilation_cache import compilation_cache as cc
        jax.config.update("jax_compilation_cache_dir", d)
        cc.reset_cache()  # a process that already compiled has decided "no cache": decide again
    jax.config.update("jax_persistent_cache_min_compile_time_secs", CACHE_MIN_COMPILE_SECS)
    return d


def ensure_compilation_cache() -> None:
    """The Python API's switch: :func:`enable_compilation_cache` with ``respect_existing=True``, once per process
    (later calls return at once)."""
    if not _ensured:
        _ensured.append(True)
        enable_compilation_cache(respect_existing=True)
