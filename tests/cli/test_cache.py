"""The persistent compilation cache of the command line: filled on the first run, used on the next, same numbers."""

import json
import subprocess
import sys

import pytest

from mcacct.cli.flags import compilation_cache_dir
from suite_env import cpu_subprocess_env

ARGS = ["delta", "--sigma", "1", "--epsilon", "1", "--samples", "1000", "--json", "--quiet"]


def _run(env):
    r = subprocess.run([sys.executable, "-m", "mcacct", *ARGS], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_cache_is_filled_then_reused_with_identical_results(tmp_path):
    cache = tmp_path / "cache"
    env = cpu_subprocess_env(MCACCT_CACHE_DIR=str(cache))
    first = _run(env)
    entries = sorted(p.name for p in cache.iterdir())
    assert entries, "the first run wrote no compiled program"
    second = _run(env)
    off = _run(dict(env, MCACCT_CACHE_DIR="off"))
    for k in ("delta_estimate", "delta_upper", "num_samples"):
        assert first[k] == second[k] == off[k]
    assert sorted(p.name for p in cache.iterdir()) == entries  # nothing recompiled on the second run
    # start-up is reported apart: tracing + lowering + compiling, and the programs read from the cache
    assert first["startup"]["cache_hits"] == 0 and second["startup"]["cache_hits"] >= 1
    assert 0 < second["startup"]["compile_seconds"] < first["startup"]["compile_seconds"] <= first["seconds"]


def test_cache_directory_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("MCACCT_CACHE_DIR", "off")
    assert compilation_cache_dir() is None
    monkeypatch.setenv("MCACCT_CACHE_DIR", str(tmp_path))
    assert compilation_cache_dir() == str(tmp_path)
    monkeypatch.delenv("MCACCT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compilation_cache_dir() == str(tmp_path / "xdg" / "mcacct" / "jax")
