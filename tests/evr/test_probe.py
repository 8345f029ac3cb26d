"""mcacct.evr.cost.probe_rate: a run's per-call set-up is amortised over longer calls, and the rate never exceeds
the steady per-chunk rate (a fake runner with a known set-up and per-chunk time; no JAX program runs)."""

import time

import jax

from mcacct.evr import cost


def test_probe_amortises_the_per_call_setup(monkeypatch):
    setup, per_chunk, chunk = 0.04, 0.005, 64
    calls = []

    def fake_run_ladder(num_samples, chunk_size, **_):
        chunks = num_samples // (chunk_size * jax.local_device_count())
        calls.append(chunks)
        time.sleep(setup + per_chunk * chunks)

    monkeypatch.setattr(cost, "run_ladder", fake_run_ladder)
    rate, wall, once = cost.probe_rate(None, [1.0], 1.0, jax.random.key(0), chunk, min_seconds=1.0, min_calls=5,
                                       call_seconds=0.1)
    n = chunk * jax.local_device_count()
    steady, one_chunk_calls = n / per_chunk, n / (setup + per_chunk)
    timed = calls[1:]                          # calls[0] compiles; short calls double the next one's chunks
    assert all(b in (a, 2 * a) for a, b in zip(timed, timed[1:])) and 8 <= max(timed) <= cost.PROBE_MAX_CHUNKS
    assert rate <= steady                      # each call still pays its set-up: never optimistic
    assert rate > 2 * one_chunk_calls          # ... but far less of it than calls of one chunk did
    assert wall >= 1.0 and once >= 0.0
