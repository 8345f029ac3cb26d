"""The Python API keeps compiled programs in the persistent cache too (issue #41), with the command line's opt-out
(``MCACCT_CACHE_DIR=off``), and never moves a cache directory the application configured itself."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import mcacct.core.platform as platform

#: a process that compiled something first, then calls the API: a small Monte Carlo run (its sampling program takes
#: about 1.6 s to compile on the 2-core box, cached at any threshold; a PLD calibration, which compiles
#: eight programs, made this test cost four times as much)
CODE = """
import jax, jax.numpy as jnp
jnp.arange(3.0).sum().block_until_ready()  # compiled before mcacct turns the cache on
import mcacct
problem = mcacct.Problem(mcacct.BMinSep(0.1, 2, 8), mcacct.BandedToeplitz((1.0,)))
print(mcacct.estimate(problem, 1.0, jax.random.key(0), 1000, epsilons=(1.0,)).delta_at(1.0).delta_upper)
print("DIR", jax.config.jax_compilation_cache_dir)
"""


def _run(tmp_path, **env_over) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")
           and k not in ("MCACCT_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")}
    env.update(env_over)
    done = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_the_api_fills_mcacct_cache_and_respects_the_applications(tmp_path):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    out = _run(tmp_path, MCACCT_CACHE_DIR=str(ours))
    assert f"DIR {ours}" in out and any(ours.iterdir())  # filled though the process had compiled before
    # the application's own settings (its minimum compile time too: JAX's default of 1 s would make this flaky)
    out = _run(tmp_path, MCACCT_CACHE_DIR=str(ours / "unused"), JAX_COMPILATION_CACHE_DIR=str(theirs),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    assert f"DIR {theirs}" in out, out
    assert any(theirs.iterdir()) and not (ours / "unused").exists(), (list(theirs.iterdir()), out)


def test_opt_out_and_default_directory(monkeypatch, tmp_path):
    monkeypatch.setenv(platform.ENV_CACHE, "off")
    assert platform.compilation_cache_dir() is None and platform.enable_compilation_cache() is None
    monkeypatch.delenv(platform.ENV_CACHE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert platform.compilation_cache_dir() == str(tmp_path / "mcacct" / "jax")
