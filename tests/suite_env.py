"""The environment the suite runs in: the XLA:CPU settings it compiles with, and the environments of subprocesses
(imports nothing that starts JAX: tests/conftest.py reads it before it imports jax)."""

import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import sys

#: XLA:CPU settings the suite compiles and runs with (appended to ``XLA_FLAGS`` by tests/conftest.py, before JAX
#: starts; the workers and every subprocess inherit them):
#:
#: - the elemental emitters instead of the fusion emitters. Two thirds of the suite's time was XLA compilation
#:   (benchmarks/results/suite_compile.txt); with these emitters tests/kernels and tests/pld took 397 s instead of
#:   523 s on the 2-core box (user time 765 s against 1,009), every test passing. They fuse some reductions
#:   differently, so a few float sums round differently in their last digits;
#: - Eigen's operations on one thread: the two workers already keep both cores busy (tests/schemes/truncated and
#:   tests/engine: user time 481 and 520 s against 543 and 648 s, alternating runs; no stored value moves).
#:
#: The statistics stored in tests/schemes/test_contract.py are the default compiler's (what users run): that test
#: computes them in a subprocess that compiles as users do (:func:`default_compiler_env`).
#: ``MCACCT_TEST_XLA=default`` runs the whole suite with the default settings.
SUITE_XLA_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_cpu_multi_thread_eigen=false"
#: appended to :data:`SUITE_XLA_FLAGS` where JAX runs on the CPU alone (:func:`cpu_only`; the level is every
#: backend's, and a GPU's kernels would run unoptimised): LLVM's optimisation level 0 for the programs XLA:CPU emits.
#: Compilation is most of the suite's time; the whole `make test` took 1,123 s instead of 1,546 s (user 2,122 s
#: against 2,979 s; 2-core box, 2026-11-29, one run each). The programs run slower, and at level 0 the same values
#: can differ in their last bits between two programs that compute them in differently shaped arrays (the truncated
#: scheme's two noise paths: 80 of 2,560 entries, by at most 3.5e-14 relative), where the default level gives equal
#: bits. The tests that assert such bits equal across programs (44 cases in 8 files, 2026-12-07) are marked
#: ``default_compiler`` and run in a subprocess that compiles as users do (tests/default_compiler.py); the README's
#: blocks run without the level (:func:`optimised_env`: they compute more than they compile).
CPU_ONLY_XLA_FLAGS = "--xla_backend_optimization_level=0"
#: the variable that turns :data:`SUITE_XLA_FLAGS` off (value ``default``)
XLA_SWITCH = "MCACCT_TEST_XLA"
#: thread pools of the BLAS libraries under NumPy and SciPy (each an OpenBLAS), set before either loads: one thread.
#: With the default, one per core, a library's threads wait for work by spinning after each large call, and on the
#: 2-core box they take the cycles of the other worker (perf: ``blas_thread_server`` 6% of a CLI run's samples).
#: tests/evr, tests/strategies, tests/individual and tests/report: user time 223 and 231 s against 266 and 239 s,
#: wall 124 and 127 s against 145 and 131 s (alternating runs). A variable already set is kept.
SUITE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1"}


def xla_accepts(flags: str) -> bool:
    """Whether XLA starts with ``XLA_FLAGS=flags`` (an unknown flag aborts the process; probed in a subprocess)."""
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
    code = "import jax.numpy as jnp; (jnp.zeros(2) + 1).block_until_ready()"
    try:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def cpu_only() -> bool:
    """Whether JAX will run on the CPU alone: ``JAX_PLATFORMS`` names the CPU only, or, where it is not set, no
    accelerator plugin is installed (no ``jax_plugins`` entry point or namespace package, no ``libtpu``). Imports
    nothing that starts JAX."""
    platforms = {p.strip() for p in os.environ.get("JAX_PLATFORMS", "").lower().split(",") if p.strip()}
    if platforms:
        return platforms == {"cpu"}
    if any(True for _ in importlib.metadata.entry_points(group="jax_plugins")):
        return False
    return all(importlib.util.find_spec(name) is None for name in ("jax_plugins", "libtpu"))


def suite_xla_flags(flags: str) -> str:
    """``flags`` (an ``XLA_FLAGS`` value) with :data:`SUITE_XLA_FLAGS` appended, and :data:`CPU_ONLY_XLA_FLAGS` where
    :func:`cpu_only`; unless it holds them already, :data:`XLA_SWITCH` is ``default``, or this XLA does not know them
    (:func:`xla_accepts`: without the level first, then without both; a note on stderr: the suite then compiles as
    users do)."""
    if os.environ.get(XLA_SWITCH) == "default" or SUITE_XLA_FLAGS in flags:
        return flags
    tries = [f"{SUITE_XLA_FLAGS} {CPU_ONLY_XLA_FLAGS}"] if cpu_only() else []
    for suite in tries + [SUITE_XLA_FLAGS]:
        extended = f"{flags} {suite}".strip()
        if xla_accepts(extended):
            return extended
    print(f"tests/suite_env.py: this XLA refuses {SUITE_XLA_FLAGS}; the suite compiles with the default settings",
          file=sys.stderr)
    return flags


def compiles_less_optimised() -> bool:
    """Whether this process's ``XLA_FLAGS`` hold :data:`CPU_ONLY_XLA_FLAGS` (set by tests/conftest.py)."""
    return CPU_ONLY_XLA_FLAGS in os.environ.get("XLA_FLAGS", "").split()


def put_thread_env(env) -> None:
    """Set :data:`SUITE_THREAD_ENV` in ``env`` (a dict or ``os.environ``) where a variable is not set already."""
    for name, value in SUITE_THREAD_ENV.items():
        env.setdefault(name, value)


def put_xla_flags(env, flags: str) -> None:
    """Set ``env["XLA_FLAGS"]`` to ``flags``, or remove it where ``flags`` is empty (``env``: a dict or
    ``os.environ``)."""
    if flags.strip():
        env["XLA_FLAGS"] = flags.strip()
    else:
        env.pop("XLA_FLAGS", None)


def cpu_subprocess_env(**extra: str) -> dict:
    """``os.environ`` for a subprocess that picks its own CPU devices: ``XLA_FLAGS`` without a host device count
    (the suite's settings kept), ``JAX_PLATFORMS=cpu``, then ``extra``."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    put_xla_flags(env, " ".join(f for f in env.get("XLA_FLAGS", "").split()
                                if not f.startswith("--xla_force_host_platform_device_count")))
    env.update(extra)
    return env


def optimised_env(env) -> dict:
    """A copy of ``env`` (a dict or ``os.environ``) without :data:`CPU_ONLY_XLA_FLAGS` in ``XLA_FLAGS``: for a
    subprocess that runs long computations more than it compiles (the README's commands: their blocks took 659 s at
    level 0 against 412 s without it), the suite's other settings kept."""
    env = dict(env)
    _drop_xla_flags(env, CPU_ONLY_XLA_FLAGS)
    return env


#: ``--xla_cpu_max_isa`` values below the one that brings FMA (AVX2) on x86-64
_ISA_WITHOUT_FMA = frozenset({"SSE4_2", "AVX"})


def xla_cpu_fma(flags: str | None = None, cpuinfo: str = "/proc/cpuinfo", machine: str | None = None) -> bool:
    """Whether XLA:CPU emits fused multiply-adds here: LLVM contracts a product and a sum into one FMA (one rounding
    instead of two) wherever the target has the instruction, so the same program rounds some values otherwise on a
    CPU without it (tests/schemes/test_contract.py's stored values are of a CPU with it). x86-64: the ``fma`` flag of
    ``cpuinfo`` (taken as present where the file cannot be read) and no ``--xla_cpu_max_isa`` below AVX2 in
    ``flags`` (default ``XLA_FLAGS``); aarch64 always has it."""
    machine = (machine or platform.machine()).lower()
    if machine in ("arm64", "aarch64"):
        return True
    flags = os.environ.get("XLA_FLAGS", "") if flags is None else flags
    for f in flags.split():
        if f.startswith("--xla_cpu_max_isa=") and f.split("=", 1)[1].upper() in _ISA_WITHOUT_FMA:
            return False
    try:
        with open(cpuinfo) as fh:
            for line in fh:
                if line.startswith("flags"):
                    return "fma" in line.split(":", 1)[1].split()
    except OSError:
        pass
    return True


def default_compiler_env() -> dict:
    """``os.environ`` for a subprocess that compiles as users do: the flags of :data:`SUITE_XLA_FLAGS` and
    :data:`CPU_ONLY_XLA_FLAGS` left out of ``XLA_FLAGS`` and :data:`XLA_SWITCH` set to ``default`` (a pytest run
    inside keeps it so)."""
    env = dict(os.environ, **{XLA_SWITCH: "default"})
    _drop_xla_flags(env, f"{SUITE_XLA_FLAGS} {CPU_ONLY_XLA_FLAGS}")
    return env


def _drop_xla_flags(env: dict, flags: str) -> None:
    """Remove each of ``flags`` (space-separated) from ``env["XLA_FLAGS"]``, the others kept in order."""
    drop = set(flags.split())
    put_xla_flags(env, " ".join(f for f in env.get("XLA_FLAGS", "").split() if f not in drop))
