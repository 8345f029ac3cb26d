import os
import shutil
import sys
import tempfile
import uuid

sys.path.insert(0, os.path.dirname(__file__))
# one CPU device per process, as before `--cpu-devices auto` (one per core) became the CLI's default: the two xdist
# workers already keep both cores busy, and the suite's CLI subprocesses inherit this (tests that want several
# devices set JAX_NUM_CPU_DEVICES themselves; tests/cli/test_cpu_devices.py checks the default without it)
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "1")

from suite_env import put_thread_env, put_xla_flags, suite_xla_flags  # noqa: E402

# the suite's XLA:CPU settings and BLAS threads (tests/suite_env.py), before JAX starts: the workers and
# subprocesses inherit them
put_xla_flags(os.environ, suite_xla_flags(os.environ.get("XLA_FLAGS", "")))
put_thread_env(os.environ)
import jax  # noqa: E402

# the suite is an application: float64 globally, before any test builds arrays (importing mcacct no longer
# changes the flag; its entry points scope float64 themselves, tests/test_precision.py checks that with x64 off)
jax.config.update("jax_enable_x64", True)

# One compilation cache per test run, shared by the xdist workers (MCACCT_TEST_RUN_ID is set in the controller,
# which loads this file before it starts the workers, and inherited by them) and removed at the end: a module's
# programs recompiled after `jax.clear_caches()` below, or compiled again by the other worker, are read back
# instead (tests/pld: 368 s -> 299 s on the 2-core box). A run starts empty, so the suite stays hermetic; a cached
# program is the same executable (bit-identical results). MCACCT_TEST_JAX_CACHE=off compiles everything.
os.environ.setdefault("MCACCT_TEST_RUN_ID", uuid.uuid4().hex)  # set in the controller; its workers inherit it
_RUN_ID = os.environ["MCACCT_TEST_RUN_ID"]
_JAX_CACHE = os.environ.get("MCACCT_TEST_JAX_CACHE") or os.path.join(
    tempfile.gettempdir(), f"mcacct-test-jax-cache-{_RUN_ID}")
if _JAX_CACHE != "off":
    jax.config.update("jax_compilation_cache_dir", _JAX_CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    # the suite's subprocesses (python -c scripts, launchers, job workers) read and fill it too
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _JAX_CACHE)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
# the command line keeps compiled programs in a persistent cache (MCACCT_CACHE_DIR): the suite's CLI subprocesses
# use the run's cache above ("off" with it), never the user's (tests/cli/test_cache.py checks the cache in a
# directory of its own)
os.environ.setdefault("MCACCT_CACHE_DIR", _JAX_CACHE)
import mcacct  # noqa: E402,F401
import pytest  # noqa: E402
from default_compiler import pytest_pyfunc_call  # noqa: E402,F401  (the ``default_compiler`` marker's hook)
from hypothesis import settings as _hyp_settings  # noqa: E402

# Property tests draw their examples deterministically by default ("ci"): a clean clone's `make test` runs the
# same examples every time, so CI cannot fail on a draw no one can reproduce (stop 42's submission failed on a
# randomly drawn --value-discretization-interval 1e-320). MCACCT_HYPOTHESIS_PROFILE=explore draws fresh random
# examples to hunt for new counterexamples (add each one found to its test as an explicit @example).
_hyp_settings.register_profile("ci", derandomize=True, print_blob=True)
_hyp_settings.register_profile("explore", derandomize=False, print_blob=True)
_PROFILE = os.environ.get("MCACCT_HYPOTHESIS_PROFILE", "ci")
_hyp_settings.load_profile(_PROFILE)


#: the memory mappings a worker may hold before a test module's end drops JAX's compiled programs (half the
#: kernel's default ``vm.max_map_count``, 65530; one module adds at most about 3,000)
MAPS_BEFORE_CLEAR = 32768
#: the resident memory a worker may hold before a module's end drops them (a worker that kept every program until
#: MAPS_BEFORE_CLEAR grew to 3.6 GB; one that cleared after every module reached 1.8 GB in tests/evr to tests/pld)
RSS_BEFORE_CLEAR = 2 << 30


def _maps() -> int | None:
    """The process's memory mappings (``None`` where ``/proc`` has no count)."""
    try:
        with open(f"/proc/{os.getpid()}/maps") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def _rss() -> int | None:
    """The process's resident memory in bytes (``None`` where ``/proc`` has no count)."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


#: words of a test module that make it start and end with empty caches: it may patch what traced code reads
#: (module attributes, ``MCACCT_TARGET_PLATFORM``), or it reads how much was compiled
ISOLATING_WORDS = ("monkeypatch", "mock", "compile_seconds", "cache_hits", "CompileNotice", "_cache_size")


def _patches(module) -> bool:
    """Whether a test module names one of :data:`ISOLATING_WORDS`, so that its traces must neither come from nor go
    to other modules (``True`` where its source cannot be read)."""
    try:
        with open(module.__file__, encoding="utf-8") as f:
            text = f.read()
    except (OSError, TypeError):
        return True
    return any(w in text for w in ISOLATING_WORDS)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs(request):
    """Drop JAX's compiled programs after a test module once the process holds many memory mappings or much memory,
    and around every module that patches.

    The suite compiles thousands of XLA programs in one process; each keeps memory mappings, and with the
    kernel's default ``vm.max_map_count`` (65530) a long run can make LLVM abort inside a compile. Clearing the
    caches when the count passes :data:`MAPS_BEFORE_CLEAR`, or the resident memory :data:`RSS_BEFORE_CLEAR`, keeps
    both bounded, and the modules before that share their compiled programs (clearing after every module
    recompiled them: 4% of the time of tests/evr, tests/strategies and tests/jobs). A module that patches or reads
    compile counts (:func:`_patches`) starts and ends with empty caches, as every module did before: a patched
    trace never reaches another module, a patch is never hidden by a trace made without it, and what a module
    compiles does not depend on the modules before it.
    Where a count cannot be read, every module clears."""
    patches = _patches(request.module)
    if patches:
        jax.clear_caches()
    yield
    n, rss = _maps(), _rss()
    if patches or n is None or rss is None or n > MAPS_BEFORE_CLEAR or rss > RSS_BEFORE_CLEAR:
        jax.clear_caches()
    if os.environ.get("MCACCT_TEST_MAPS"):
        print(f"\n[maps] {n} -> {_maps()}", file=sys.stderr)


def pytest_sessionfinish(session, exitstatus):
    """Remove the run's compilation cache (in the controller, or in a run without workers)."""
    if not os.environ.get("PYTEST_XDIST_WORKER") and not os.environ.get("MCACCT_TEST_JAX_CACHE"):
        shutil.rmtree(_JAX_CACHE, ignore_errors=True)


#: the backends that run ``@pytest.mark.gpu`` tests
GPU_BACKENDS = ("gpu", "cuda", "rocm")
#: set to 1 to run the ``gpu`` tests whatever the backend (to check their code on a CPU, where the fused kernel runs
#: its interpreted Pallas form and the unfused kernel its CPU recursion; nothing GPU-specific is then checked)
RUN_GPU_TESTS_ENV = "MCACCT_RUN_GPU_TESTS"


def gpu_skip_reason(backend: str) -> str:
    """The reason a ``gpu`` test is skipped on ``backend`` ("" where it runs)."""
    if backend in GPU_BACKENDS or os.environ.get(RUN_GPU_TESTS_ENV) == "1":
        return ""
    return (f"needs a GPU (jax.default_backend() is {backend!r}); benchmarks/device_session.sh runs them on "
            "the device")


#: The test files that take longest on the 2-core box (their tests' summed durations, `pytest --durations`, stop 49:
#: about 390 s, then 55-145 s each), scheduled first. `make test` hands whole files to its two workers (`--dist
#: loadfile`) in collection order, so a long file collected last ran alone on one worker while the other idled
#: (test_readme_runs.py was the 94th of 101 files). Longest first keeps the two workers' ends close.
LONGEST_FILES = ("tests/test_readme_runs.py", "tests/pld/test_pld.py", "tests/schemes/truncated/test_truncated_fast.py",
                 "tests/kernels/test_fused.py", "tests/schemes/test_schemes_extra.py",
                 "tests/schemes/truncated/test_screen.py", "tests/cli/test_scheme_flags.py",
                 "tests/schemes/truncated/test_counts.py", "tests/engine/test_skip_zero.py",
                 "tests/schemes/test_contract.py", "tests/test_gpu_scripts.py")


def pytest_collection_modifyitems(config, items):
    """Order the longest files first (:data:`LONGEST_FILES`; the order within a file and of the other files is
    kept), and skip the tests marked ``gpu`` (pyproject.toml's markers) where JAX has no GPU backend. The backend is
    asked only when such a test was collected (``jax.default_backend()`` starts JAX's backends)."""
    rank = {f: i for i, f in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = gpu_skip_reason(jax.default_backend())
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))
