"""The ``default_compiler`` marker (tests/default_compiler.py) runs its tests where the suite's LLVM level 0 is off."""

import os
import subprocess
import sys

import pytest
from suite_env import CPU_ONLY_XLA_FLAGS, compiles_less_optimised


@pytest.mark.default_compiler
@pytest.mark.parametrize("case", ["one", "two"])
def test_a_marked_test_compiles_as_users_do(case):
    """Both cases run (in one subprocess where the suite compiles at level 0), without the level."""
    assert CPU_ONLY_XLA_FLAGS not in os.environ.get("XLA_FLAGS", "").split()
    assert not compiles_less_optimised()


def test_the_outcome_of_a_failing_marked_test_is_a_failure(tmp_path):
    """A marked test that fails in its subprocess fails in the run that marked it (not a silent pass), and a marked
    test that passes there passes."""
    (tmp_path / "conftest.py").write_text("from default_compiler import pytest_pyfunc_call  # noqa: F401\n")
    (tmp_path / "test_marked.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.default_compiler\ndef test_fails():\n    assert False, 'failed in the subprocess'\n\n"
        "@pytest.mark.default_compiler\ndef test_passes():\n    pass\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)),
               XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} {CPU_ONLY_XLA_FLAGS}".strip())
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "-W", "ignore::pytest.PytestUnknownMarkWarning"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout[-3000:]
    assert "PASSED test_marked.py::test_passes" in r.stdout
    assert "FAILED test_marked.py::test_fails" in r.stdout and "under the default compiler" in r.stdout
