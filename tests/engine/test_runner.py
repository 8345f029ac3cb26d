"""The one runner: shared draws across a ladder and both directions, early dropping, device counts."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

import mcacct
from mcacct.engine.problem import Problem, chunk_losses
from mcacct.evr.calibrate import verification_key
from mcacct.statistics.accumulators import DIRECTIONS, HistogramSpec
from mcacct.engine.runner import run_ladder
from mcacct.cli.commands import main

PB = Problem(mcacct.BMinSep(0.3, 4, 40), mcacct.BandedToeplitz((0.5, 0.5, 0.5, 0.5)))
SIGMAS = (0.7, 0.9, 1.2)
N, CHUNK, EPS = 256 * 5 + 3, 256, (0.5, 1.0)


def _same(a, b):
    assert a.count == b.count and a.sums == b.sums
    np.testing.assert_array_equal(a.hist, b.hist)


def test_each_candidate_equals_an_independent_run_on_the_same_draws():
    key = jax.random.key(4)
    ladder = run_ladder(PB, SIGMAS, key, N, EPS, CHUNK)
    for j, s in enumerate(SIGMAS):
        alone = run_ladder(PB, [s], key, N, EPS, CHUNK)
        for d in DIRECTIONS:
            _same(ladder.stats[j][d], alone.stats[0][d])


def test_shared_draws_are_the_per_sigma_kernels_draws():
    """Candidate j's losses are those of the scheme's own per-sigma kernel on the same chunk key (remove: y ~ P,
    add: y ~ Q from the same z), up to the rounding of taking the sliding sums by linearity."""
    from mcacct.engine.problem import block_keys, block_size
    from mcacct.engine.runner import block_ladder_losses
    key = jax.random.key(9)
    bs = block_size(PB, CHUNK)
    ladder = jax.jit(block_ladder_losses, static_argnums=(2, 3))  # as the engine runs it (eagerly: ~85 compiles)
    got = np.concatenate([np.asarray(ladder(k, np.asarray(SIGMAS), PB, bs)) for k in block_keys(key, PB, CHUNK)],
                         axis=-1)
    for j, s in enumerate(SIGMAS):
        for i, direction in enumerate(("remove", "add")):
            want = np.asarray(chunk_losses(key, s, PB, CHUNK, direction))
            np.testing.assert_allclose(got[j, i], want, rtol=1e-12, atol=1e-12)


def test_generic_schemes_share_draws_through_their_key():
    """A scheme without a shared-work ladder runs the generic loss kernel per candidate on the same key."""
    from mcacct.schemes.cyclic_poisson import CyclicPoisson
    pb = Problem(CyclicPoisson(0.5, 4, 24), mcacct.BandedToeplitz((0.5, 0.5)))
    key = jax.random.key(2)
    run = run_ladder(pb, SIGMAS, key, 300, (1.0,), 128)
    for j, s in enumerate(SIGMAS):
        _same(run.stats[j]["remove"], run_ladder(pb, [s], key, 300, (1.0,), 128).stats[0]["remove"])


def test_dropping_changes_no_verdict_and_calibration_records_a_sorted_ladder():
    problem = Problem(mcacct.BMinSep(0.2, 2, 16), mcacct.BandedToeplitz((0.6, 0.4)))
    res = mcacct.calibrate(problem, 1.0, 1e-2, jax.random.key(5), pilot_samples=3000)
    assert res.ladder == sorted(res.ladder) and len(res.ladder) >= 2
    base, s = res.base_delta, res.num_samples
    full = run_ladder(problem, res.ladder, verification_key(jax.random.key(5)), s, (1.0,), 4096,
                      HistogramSpec(width=64.0, bins=1))
    passed = [all(st.mean_at(0) <= base for st in full.stats[j].values()) for j in range(len(res.ladder))]
    i_star = len(passed)
    while i_star > 0 and passed[i_star - 1]:
        i_star -= 1
    want = res.ladder[i_star] if i_star < len(passed) else res.top_sigma
    assert res.sigma == want
    for c in res.candidates:  # completed candidates have the full run's statistics
        if c["samples_remove"] == s:
            assert c["delta_estimate_remove"] == full.stats[c["index"]]["remove"].mean_at(0)


CLI_CAL = ["calibrate", "--epsilon", "1", "--delta", "1e-2", "--iterations", "16", "--min-sep", "2",
           "--sampling-prob", "0.2", "--c-col", "0.6,0.4", "--chunk-size", "1024", "--seed", "5",
           "--no-baselines", "--json", "--quiet"]
from helpers import ROOT  # noqa: E402
from suite_env import cpu_subprocess_env  # noqa: E402


def _same_calibration(got: dict, ref: dict) -> None:
    """Same ladder, verdicts and sigma; bit-identical statistics for every candidate both runs completed."""
    assert got["sigma"] == ref["sigma"] and got["ladder"] == ref["ladder"] and got["verified"] == ref["verified"]
    assert [c["passed"] for c in got["candidates"]] == [c["passed"] for c in ref["candidates"]]
    s = ref["num_samples"]
    done = {c["index"]: c for c in got["candidates"] if c["samples_remove"] == s and c["samples_add"] == s}
    for c in ref["candidates"]:
        if c["samples_remove"] == s and c["samples_add"] == s and c["index"] in done:
            assert done[c["index"]]["delta_estimate_remove"] == c["delta_estimate_remove"]
            assert done[c["index"]]["delta_estimate_add"] == c["delta_estimate_add"]
    # the candidates that passed ran to completion everywhere
    assert all(c["index"] in done for c in ref["candidates"] if c["passed"])


@pytest.fixture(scope="module")
def one_device_cli(tmp_path_factory):
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(CLI_CAL) == 0
    return json.loads(buf.getvalue().strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("devices", [2, 4])
def test_calibrate_is_identical_on_1_2_and_4_devices(devices, one_device_cli):
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES=str(devices))
    r = subprocess.run([sys.executable, "-m", "mcacct", *CLI_CAL], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["devices"] == devices and one_device_cli["devices"] == 1
    _same_calibration(got, one_device_cli)


@pytest.mark.slow
def test_calibrate_in_two_processes_equals_one_process(tmp_path, one_device_cli):
    """Two jax.distributed processes with 2 CPU devices each (gloo), pilot and verification both sharded."""
    env = cpu_subprocess_env()
    cmd = [sys.executable, os.path.join(ROOT, "launch", "local_multiprocess.py"), "--num_processes=2",
           "--devices_per_process=2", f"--out={tmp_path / 'out.json'}", "--timeout=280", "--mcacct", "--", *CLI_CAL]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads((tmp_path / "out.json").read_text().strip().splitlines()[-1])
    assert got["processes"] == 2 and got["global_devices"] == 4 and got["process_index"] == 0
    _same_calibration(got, one_device_cli)


def test_run_ladder_validates():
    with pytest.raises(ValueError, match="sigmas"):
        run_ladder(PB, [], jax.random.key(0), N, EPS, CHUNK)
    with pytest.raises(ValueError, match="sigmas"):
        run_ladder(PB, [1.0, -1.0], jax.random.key(0), N, EPS, CHUNK)
    with pytest.raises(ValueError, match="chunk_ids"):
        run_ladder(PB, [1.0], jax.random.key(0), N, EPS, CHUNK, chunk_ids=[99])
