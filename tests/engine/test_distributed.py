"""Sharded Monte Carlo: identical statistics whatever the number of devices and processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import mcacct
from mcacct.engine import distributed
from mcacct.engine.runner import run_ladder
from helpers import run_direction
from mcacct.engine.problem import Problem
from mcacct.evr.calibrate import candidate_key
from mcacct.statistics.accumulators import DIRECTIONS, DirectionStats, HistogramSpec
from mcacct.jobs.shards import stats_from_json

from helpers import ROOT  # noqa: E402
from suite_env import cpu_subprocess_env  # noqa: E402
PB = Problem(mcacct.BMinSep(0.2, 4, 32), mcacct.BandedToeplitz((0.5, 0.5, 0.5, 0.5)))
SIGMA, EPS, CHUNK = 0.9, (0.5, 1.0), 256
N = 256 * 9 + 17  # a partial last group and a masked last chunk


def _env(**extra) -> dict:
    return cpu_subprocess_env(**extra)


def _assert_same(a: DirectionStats, b: DirectionStats) -> None:
    assert a.count == b.count
    assert a.sums == b.sums
    np.testing.assert_array_equal(a.hist, b.hist)


@pytest.mark.slow
def test_sharded_over_4_devices_equals_single_device():
    code = textwrap.dedent(f"""
        import json, jax, mcacct
        from mcacct.engine.problem import Problem
        from mcacct.jobs.shards import stats_to_json
        assert jax.local_device_count() == 4, jax.devices()
        out = {{}}
        for dtype in ("float64", "float32"):
            pb = Problem(mcacct.BMinSep(0.2, 4, 32), mcacct.BandedToeplitz((0.5, 0.5, 0.5, 0.5)), dtype=dtype)
            est = mcacct.estimate(pb, {SIGMA}, jax.random.key(7), {N}, {EPS}, chunk_size={CHUNK})
            out[dtype] = {{d: stats_to_json(s) for d, s in est.stats.items()}}
        print(json.dumps(out))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                       env=_env(JAX_NUM_CPU_DEVICES="4"))
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for dtype in ("float64", "float32"):
        pb = Problem(PB.scheme, PB.strategy, dtype=dtype)
        ref = mcacct.estimate(pb, SIGMA, jax.random.key(7), N, EPS, chunk_size=CHUNK)
        for d in DIRECTIONS:
            _assert_same(stats_from_json(got[dtype][d], EPS, HistogramSpec()), ref.stats[d])


@pytest.mark.slow
def test_two_processes_equal_one_process(tmp_path):
    """Two jax.distributed processes (2 CPU devices each, gloo collectives) = one process, one device."""
    out = tmp_path / "result.json"
    cmd = [sys.executable, os.path.join(ROOT, "launch", "local_multiprocess.py"), "--num_processes=2",
           "--devices_per_process=2", f"--out={out}", "--timeout=200", "--",
           f"--sigma={SIGMA}", "--epsilon=0.5,1.0", f"--samples={N}", f"--chunk_size={CHUNK}", "--seed=3",
           "--candidate=2", "--iterations=32", "--min_sep=4", "--sampling_prob=0.2", "--c_col=0.5,0.5,0.5,0.5",
           "--quiet"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["process_count"] == 2 and res["devices"] == 4
    key = candidate_key(jax.random.key(3), 2)
    ref = mcacct.estimate(PB, SIGMA, key, N, EPS, chunk_size=CHUNK)
    for d in DIRECTIONS:
        _assert_same(stats_from_json(res["stats"][d], EPS, HistogramSpec()), ref.stats[d])
    assert json.loads(r.stdout.strip().splitlines()[-1])["delta_upper"] == res["delta_upper"]


def test_any_chunk_order_and_subset_merges_exactly():
    key = jax.random.key(1)
    full = run_direction(PB, SIGMA, key, "add", N, EPS, CHUNK)
    ids = [9, 3, 0, 7, 1]
    rest = [c for c in range(10) if c not in ids]
    a = run_direction(PB, SIGMA, key, "add", N, EPS, CHUNK, chunk_ids=ids)
    b = run_direction(PB, SIGMA, key, "add", N, EPS, CHUNK, chunk_ids=rest)
    _assert_same(a.merge(b), full)
    # the per-process split c % P == p covers the plan exactly once
    parts = [distributed.process_chunk_ids(10, p, 3) for p in range(3)]
    assert sorted(c for p in parts for c in p) == list(range(10))
    merged = DirectionStats(EPS)
    for p in parts:
        merged = merged.merge(run_direction(PB, SIGMA, key, "add", N, EPS, CHUNK, chunk_ids=p))
    _assert_same(merged, full)


def test_runner_callbacks_and_drop():
    groups = []
    run = run_ladder(PB, [SIGMA], jax.random.key(2), N, EPS, CHUNK, chunk_ids=range(4),
                     on_group=lambda ids, r: groups.append((list(ids), r.stats[0]["remove"].count)))
    assert groups == [([0], 256), ([1], 512), ([2], 768), ([3], 1024)] and run.stats[0]["remove"].count == 1024
    # a dropped candidate leaves the run: its statistics stop where the drop rule removed it
    run = run_ladder(PB, [SIGMA], jax.random.key(2), N, EPS, CHUNK, chunk_ids=range(10),
                     drop=lambda r: [0] if r.stats[0]["remove"].count >= 512 else [])
    assert run.stats[0]["remove"].count == 512 and run.active == []


def test_stats_exchange_roundtrip_exact():
    st = DirectionStats(EPS, HistogramSpec(), 12345, [2**140 + 12345, 3 * 2**64 + 1],
                        np.arange(HistogramSpec().bins + 2, dtype=np.int64))
    back = distributed.stats_from_array(distributed.stats_to_array(st), EPS, st.spec)
    _assert_same(back, st)
    _assert_same(distributed.allreduce_stats(st), st)  # one process: identity (a copy)


def test_validation_names_parameter():
    with pytest.raises(ValueError, match="chunk_ids"):
        run_ladder(PB, [SIGMA], jax.random.key(0), N, EPS, CHUNK, chunk_ids=[10])
    with pytest.raises(ValueError, match="num_samples"):
        run_ladder(PB, [SIGMA], jax.random.key(0), 0, EPS, CHUNK)
    with pytest.raises(ValueError, match="sigma"):
        mcacct.estimate(PB, -1.0, jax.random.key(0), N, EPS)
    with pytest.raises(ValueError, match="process_id"):
        distributed.process_chunk_ids(10, 3, 3)
    with pytest.raises(ValueError, match="coordinator_address"):
        distributed.initialize_distributed(None)
    with pytest.raises(ValueError, match="mesh"):
        from jax.sharding import Mesh
        run_ladder(PB, [SIGMA], jax.random.key(0), N, EPS, CHUNK, mesh=Mesh(np.array(jax.devices()[:1]), ("x",)))
