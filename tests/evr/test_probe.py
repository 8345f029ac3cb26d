"""mcacct.evr.cost.probe_rate: the steady rate of a long run, its set-up left out, timed by the arrival of its groups
(a fake runner with a known set-up and per-group time; no JAX program runs)."""

import time

import jax
import pytest

from mcacct.evr import cost


def _fake_runner(setup: float, per_group: float, calls: list):
    """A run_ladder that sleeps ``setup``, then ``per_group`` per group of one chunk per device, reporting each
    group to ``on_group`` and stopping when ``drop`` removes every candidate."""

    def fake_run_ladder(num_samples, chunk_size, sigmas, on_group=None, drop=None, **_):
        devices = jax.local_device_count()
        groups = num_samples // (chunk_size * devices)
        calls.append(groups)
        time.sleep(setup)
        active = set(range(len(sigmas)))
        for g in range(groups):
            time.sleep(per_group)
            if on_group is not None:
                on_group(list(range(g * devices, (g + 1) * devices)), None)
            if drop is not None:
                active -= set(drop(None))
            if not active:
                break

    return fake_run_ladder


def test_probe_times_the_steady_groups_and_leaves_the_setup_out(monkeypatch):
    setup, per_group, chunk = 0.5, 0.01, 64
    calls = []
    monkeypatch.setattr(cost, "run_ladder", _fake_runner(setup, per_group, calls))
    rate, wall, once = cost.probe_rate(None, [1.0, 1.2], 1.0, jax.random.key(0), chunk, min_seconds=0.3,
                                       min_calls=5)
    n = chunk * jax.local_device_count()
    steady = n / per_group
    assert calls[0] == 1 and calls[1] == cost.PROBE_MAX_CHUNKS   # the first call compiles; one long timed run
    assert 0.7 * steady <= rate <= 1.05 * steady                 # sleeps overshoot: the rate errs low
    assert rate > 5 * n / (setup + per_group)                    # what one-chunk calls paying the set-up gave
    assert 0.3 <= wall < 0.3 + 2 * setup + 1.0 and once >= 0.0  # it stopped after min_seconds, not 4096 groups


def test_a_short_run_is_timed_over_all_its_groups(monkeypatch):
    calls = []
    monkeypatch.setattr(cost, "run_ladder", _fake_runner(0.0, 0.002, calls))
    monkeypatch.setattr(cost, "PROBE_MAX_CHUNKS", 8)
    rate, _, _ = cost.probe_rate(None, [1.0], 1.0, jax.random.key(0), 16, min_seconds=60.0, min_calls=5)
    assert calls == [1, 8] and rate == pytest.approx(16 * jax.local_device_count() / 0.002, rel=0.5)
