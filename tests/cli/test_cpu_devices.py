"""``--cpu-devices auto`` (the default): JAX's CPU backend gets one device per core (mcacct.core.platform.use_cpu_cores),
so the engine's mesh runs a chunk per core; the statistics are the same bit for bit whatever the count. The suite
itself runs with ``JAX_NUM_CPU_DEVICES=1`` (tests/conftest.py); the subprocess below drops it."""

from __future__ import annotations

import json
import subprocess
import sys

import jax
import pytest

from mcacct.cli import main
from mcacct.core.platform import AUTO_CPU_DEVICES_MAX, cpu_cores, use_cpu_cores
from suite_env import cpu_subprocess_env

DELTA = ["delta", "--sigma", "1", "--epsilon", "1", "--iterations", "16", "--min-sep", "2", "--batch-size", "4",
         "--dataset-size", "64", "--samples", "3000", "--chunk-size", "500", "--json", "--quiet"]


def test_bad_values_name_the_flag(capsys):
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(SystemExit) as exc:
            main(DELTA + ["--cpu-devices", bad])
        assert exc.value.code == 2
        assert "--cpu-devices must be 'auto' or an integer" in capsys.readouterr().err
    with pytest.raises(ValueError, match="cpu devices must be an integer >= 1"):
        use_cpu_cores(0)


def test_after_jax_started_auto_leaves_it_and_an_explicit_other_count_is_refused(capsys):
    have = len(jax.devices("cpu"))                   # the backends run from here on
    assert use_cpu_cores() is None and use_cpu_cores(have) == have
    with pytest.raises(ValueError, match="--cpu-devices 7 must be set before JAX starts"):
        use_cpu_cores(7)
    assert main(DELTA + ["--cpu-devices", "7"]) == 2
    assert "--cpu-devices 7 must be set before JAX starts" in capsys.readouterr().err


def test_the_environment_choice_wins_over_auto(monkeypatch):
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "3")
    assert use_cpu_cores() is None
    monkeypatch.delenv("JAX_NUM_CPU_DEVICES")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=3")
    assert use_cpu_cores() is None


def test_auto_uses_every_core_with_the_same_statistics(capsys):
    env = cpu_subprocess_env()
    env.pop("JAX_NUM_CPU_DEVICES", None)
    r = subprocess.run([sys.executable, "-m", "mcacct", *DELTA], capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    several = json.loads(r.stdout.strip().splitlines()[-1])
    assert main(DELTA) == 0                            # this process: one CPU device (tests/conftest.py)
    one = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert one["devices"] == 1 and several["devices"] == min(cpu_cores(), AUTO_CPU_DEVICES_MAX)
    for key in ("delta_estimate", "delta_upper", "directions", "num_samples"):
        assert several[key] == one[key], key
