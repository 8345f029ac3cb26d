import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
# the command line keeps compiled programs in a persistent cache; the suite runs without one (hermetic), and
# tests/cli/test_cache.py checks the cache explicitly in a directory of its own
os.environ.setdefault("MCACCT_CACHE_DIR", "off")
import jax  # noqa: E402

# the suite is an application: float64 globally, before any test builds arrays (importing mcacct no longer
# changes the flag; its entry points scope float64 themselves, tests/test_precision.py checks that with x64 off)
jax.config.update("jax_enable_x64", True)
import mcacct  # noqa: E402,F401
import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.

    The suite compiles thousands of XLA programs in one process; each keeps memory mappings, and with the
    kernel's default ``vm.max_map_count`` (65530) a long run can make LLVM abort inside a compile. Clearing the
    caches per module keeps the process's mappings bounded; the cost is a few recompilations."""
    yield
    jax.clear_caches()
    if os.environ.get("MCACCT_TEST_MAPS"):
        with open(f"/proc/{os.getpid()}/maps") as f:
            print(f"\n[maps] {sum(1 for _ in f)}", file=sys.stderr)
