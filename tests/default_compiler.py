"""The ``default_compiler`` marker: a test that asserts bits equal across two programs runs in a subprocess that
compiles as users do.

Where the suite compiles at LLVM's optimisation level 0 (tests/suite_env.py, ``CPU_ONLY_XLA_FLAGS``), the same values
can differ in their last bits between two programs that compute them in differently shaped arrays; the default level
gives equal bits, and those are what the marked tests are about. Their body is then not run in the worker: the marked
tests of one file run together in one ``pytest`` subprocess with :func:`suite_env.default_compiler_env` (the run's
compilation cache shared, its cache key holds the flags), and each test's outcome is the subprocess's outcome for it.
Without the level (``MCACCT_TEST_XLA=default``, or a machine with an accelerator) they run in the worker as usual.
tests/conftest.py imports the hook below.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from suite_env import compiles_less_optimised, default_compiler_env

#: the marker (registered in pyproject.toml)
MARKER = "default_compiler"
#: the longest a file's marked tests may take in their subprocess (s)
TIMEOUT = 1200

_outcomes: dict[str, dict[str, str]] = {}  # file -> {nodeid: "PASSED" | "FAILED" | ...}
_logs: dict[str, str] = {}  # file -> the subprocess's output


def _run_file(item: pytest.Item) -> None:
    """Run the marked tests of ``item``'s file in one subprocess and keep each one's outcome."""
    path = str(item.path)
    nodeids = [i.nodeid for i in item.session.items if i.get_closest_marker(MARKER) is not None
               and str(i.path) == path]
    env = default_compiler_env()
    # the run's compilation cache, kept by the parent (a subprocess run without workers would remove it at its end)
    env["MCACCT_TEST_JAX_CACHE"] = os.environ.get("MCACCT_TEST_JAX_CACHE") or os.environ.get(
        "JAX_COMPILATION_CACHE_DIR", "off")
    cmd = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist", *nodeids]
    try:
        r = subprocess.run(cmd, cwd=str(item.config.rootpath), env=env, capture_output=True, text=True,
                           timeout=TIMEOUT)
        log = r.stdout + r.stderr
    except subprocess.TimeoutExpired as e:
        log = f"the subprocess did not finish in {TIMEOUT} s: {e}"
    outcomes = {}
    for line in log.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "XFAIL", "XPASS"):
            outcomes[rest.split(" - ")[0].strip()] = word
    _outcomes[path], _logs[path] = outcomes, log


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    """Take the outcome of a ``default_compiler`` test from its file's subprocess where the suite compiles at level 0
    (``None``, the usual call, elsewhere)."""
    if pyfuncitem.get_closest_marker(MARKER) is None or not compiles_less_optimised():
        return None
    path = str(pyfuncitem.path)
    if path not in _outcomes:
        _run_file(pyfuncitem)
    outcome = _outcomes[path].get(pyfuncitem.nodeid)
    if outcome != "PASSED":
        pytest.fail(f"{pyfuncitem.nodeid} under the default compiler (a subprocess, tests/default_compiler.py): "
                    f"{outcome or 'no outcome'}\n{_logs[path][-6000:]}", pytrace=False)
    return True
