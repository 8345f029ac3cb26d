"""mcacct.evr.cost.probe_rate: the rate is the steady rate of a run of several groups, read from their arrivals as
a shard job reads itself, so a call's set-up does not lower it; the run is sized by a one-group call (a fake runner
with a known set-up and per-group time; no JAX program runs)."""

import time
from types import SimpleNamespace

import jax
import pytest

from mcacct.evr import cost

SETUP, PER_GROUP, CHUNK = 0.05, 0.01, 64


def _fake(calls, steady=True):
    def fake_run_ladder(num_samples, chunk_size, **_):
        n = chunk_size * jax.local_device_count()
        groups = num_samples // n
        calls.append(groups)
        time.sleep(SETUP + PER_GROUP * groups)
        if not steady or groups < 2:
            return SimpleNamespace(steady_draws=0, steady_seconds=0.0)
        return SimpleNamespace(steady_draws=(groups - 1) * n, steady_seconds=(groups - 1) * PER_GROUP)
    return fake_run_ladder


def test_probe_reads_the_steady_rate_of_one_sized_run(monkeypatch):
    calls = []
    monkeypatch.setattr(cost, "run_ladder", _fake(calls))
    rate, wall, once = cost.probe_rate(None, [1.0], 1.0, jax.random.key(0), CHUNK, min_seconds=0.3, min_groups=5)
    n = CHUNK * jax.local_device_count()
    assert calls[:2] == [1, 1] and len(calls) == 3          # compile, one group, the timed run
    # sized by the one-group call (set-up included): ceil(0.3 / 0.06) + 1 = 6 groups at least
    assert 6 <= calls[2] <= 7
    assert rate == pytest.approx(n / PER_GROUP)              # the set-up does not lower it
    assert wall >= 2 * SETUP and once >= 0.0


def test_probe_groups_are_bounded_and_a_run_without_gaps_falls_back_to_its_wall_rate(monkeypatch):
    calls = []
    monkeypatch.setattr(cost, "run_ladder", _fake(calls, steady=False))
    monkeypatch.setattr(cost, "PROBE_MAX_GROUPS", 8)
    rate, _, _ = cost.probe_rate(None, [1.0], 1.0, jax.random.key(0), CHUNK, min_seconds=10.0, min_groups=3)
    n = CHUNK * jax.local_device_count()
    assert calls[2] == 8
    assert rate <= 8 * n / (SETUP + 8 * PER_GROUP) * 1.01   # the whole call's wall time: errs low
