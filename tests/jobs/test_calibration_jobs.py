"""Calibration as shard jobs: plan, shards in any order (one interrupted and resumed), merge = in-process."""

import json

import jax
import pytest

import mcacct
from mcacct.jobs import calibration as cj
from mcacct.jobs import integrity
from mcacct.engine.problem import Problem
from mcacct.evr.calibrate import calibrate, plan_calibration
from mcacct.cli.commands import main
from suite_env import cpu_subprocess_env

PB = Problem(mcacct.BMinSep(0.2, 2, 16), mcacct.BandedToeplitz((0.6, 0.4)))
FLAGS = ["--iterations", "16", "--min-sep", "2", "--sampling-prob", "0.2", "--c-col", "0.6,0.4", "--epsilon", "1",
         "--delta", "1e-2", "--chunk-size", "512", "--no-baselines"]


def test_shards_in_any_order_with_a_resume_equal_the_in_process_run(tmp_path):
    key = jax.random.key(5)
    ref = calibrate(PB, 1.0, 1e-2, key, pilot_samples=3000, chunk_size=512)
    plan = plan_calibration(PB, 1.0, 1e-2, key, pilot_samples=3000, chunk_size=512)
    assert list(plan.ladder) == ref.ladder == sorted(ref.ladder)
    cj.write_plan(str(tmp_path), plan, PB)
    part = cj.run_plan_shard(str(tmp_path), 2, 3, max_chunks=1)  # interrupted after one chunk
    assert not part["complete"] and part["steady_draws_per_second"] is None   # one group: no gap to read
    with pytest.raises(ValueError, match="unfinished shards"):
        cj.calibrate_from(str(tmp_path))
    for i in (1, 2, 0):  # shard 2 resumes where it stopped
        out = cj.run_plan_shard(str(tmp_path), i, 3)
        assert out["complete"] and (out["steady_draws_per_second"] is None or out["steady_draws_per_second"] > 0)
    res = cj.calibrate_from(str(tmp_path))
    assert res.sigma == ref.sigma and res.verified == ref.verified
    assert [c["passed"] for c in res.candidates] == [c["passed"] for c in ref.candidates]
    for a, b in zip(res.candidates, ref.candidates):
        if b["samples_remove"] == ref.num_samples:  # ran to completion in process: bit-identical statistics
            assert (a["delta_estimate_remove"], a["delta_estimate_add"]) == (b["delta_estimate_remove"],
                                                                             b["delta_estimate_add"])


def test_plan_refuses_other_plans_and_missing_shards(tmp_path):
    plan = plan_calibration(PB, 1.0, 1e-2, jax.random.key(1), sigmas=[1.2, 1.5], chunk_size=512)
    cj.write_plan(str(tmp_path), plan, PB)
    other = plan_calibration(PB, 1.0, 1e-2, jax.random.key(1), sigmas=[1.2, 1.6], chunk_size=512)
    with pytest.raises(ValueError, match="another calibration plan"):
        cj.write_plan(str(tmp_path), other, PB)
    with pytest.raises(ValueError, match="no shard files"):
        cj.calibrate_from(str(tmp_path))
    cj.run_plan_shard(str(tmp_path), 0, 2, checkpoint_seconds=60.0)
    with pytest.raises(ValueError, match=r"missing shards \['1/2'\]"):
        cj.calibrate_from(str(tmp_path))
    # another split next to this one (calibrate --from would refuse the mix), or a shard without a chunk: refused
    # before anything is written
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ValueError, match="split into 2"):
        cj.run_plan_shard(str(tmp_path), 1, 3)
    chunks = -(-plan.num_samples // plan.chunk_size)
    with pytest.raises(ValueError, match=rf"num_shards must be in \[1, chunks={chunks}\]; got {chunks + 1}"):
        cj.run_plan_shard(str(tmp_path), 0, chunks + 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # the statistics of another kind of run in the plan directory: refused (calibrate --from would fail on it)
    (tmp_path / "shard-00001-of-00002.json").write_text(json.dumps({"format": "mcacct-stats/1"}))
    with pytest.raises(ValueError, match="not a shard of a calibration plan"):
        cj.run_plan_shard(str(tmp_path), 0, 2)
    (tmp_path / "shard-00001-of-00002.json").unlink()
    with pytest.raises(ValueError, match="not a directory"):
        cj.write_plan(str(tmp_path / cj.PLAN_NAME), plan, PB)
    # a plan written under another random-number generator (same keys, other numbers) is refused
    path = tmp_path / cj.PLAN_NAME
    d = json.loads(path.read_text())
    d.pop("fingerprint")
    d["rng"] = "jax.random:rbg:classic"
    d["fingerprint"] = cj.plan_fingerprint(d)
    path.write_text(json.dumps(integrity.seal(d)))  # a consistent file, as that generator's mcacct would write it
    with pytest.raises(ValueError, match="generator"):
        cj.load_plan(str(tmp_path))


def test_cli_plan_sample_from(tmp_path, capsys):
    d = str(tmp_path / "plan")
    assert main(["calibrate", "--plan-only", "--out", d, "--sigmas", "1.2,1.4,1.6", "--json", "--quiet", *FLAGS]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["ladder"] == [1.2, 1.4, 1.6] and planned["probe"]["draws_per_second"] > 0
    assert planned["expected_seconds_at_most"]["verification"] > 0
    for i in (1, 0):
        assert main(["sample", "--plan", d, "--shard", str(i), "--num-shards", "2", "--json", "--quiet"]) == 0
        capsys.readouterr()
    assert main(["sample", "--plan", d, "--num-shards", "999", "--quiet"]) == 2
    assert "error: --num-shards must be in [1, chunks=" in capsys.readouterr().err
    assert main(["sample", "--plan", d, "--sigma", "3", "--quiet"]) == 2
    assert "error: --sigma does not apply with --plan (the plan fixes it)" in capsys.readouterr().err
    assert main(["calibrate", "--from", d, "--json", "--quiet", "--no-baselines"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert main(["calibrate", "--sigmas", "1.2,1.4,1.6", "--json", "--quiet", *FLAGS]) == 0
    direct = json.loads(capsys.readouterr().out)
    assert merged["sigma"] == direct["sigma"]
    assert [c["passed"] for c in merged["candidates"]] == [c["passed"] for c in direct["candidates"]]
    for a, b in zip(merged["candidates"], direct["candidates"]):
        if b["samples_remove"] == direct["num_samples"]:  # complete in process: identical statistics
            assert a == b
    assert main(["sample", "--plan", str(tmp_path / "nope"), "--quiet"]) == 2


@pytest.mark.slow
def test_sigkill_plan_shard_then_resume_equals_in_process(tmp_path, capsys):
    """SIGKILL `mcacct sample --plan` once its checkpoint holds a completed group; resume; merge = in process."""
    import os
    import subprocess
    import sys

    from helpers import sigkill_when

    d = str(tmp_path / "plan")
    flags = [*FLAGS[:-1], "--samples", str(512 * 600), "--sigmas", "1.2,1.4,1.6", "--no-baselines"]
    assert main(["calibrate", "--plan-only", "--out", d, "--json", "--quiet", *flags]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["total_samples"] == planned["verification"]["samples_drawn"]  # explicit ladder: no pilot
    path = os.path.join(d, cj.shard_filename(0, 1))
    env = cpu_subprocess_env()
    proc = subprocess.Popen([sys.executable, "-m", "mcacct", "sample", "--plan", d, "--shard", "0", "--num-shards",
                             "1", "--quiet"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def one_group_done():
        if not os.path.exists(path):
            return False
        with open(path) as f:
            done = json.load(f)["done"]
        return done[1] > done[0]

    sigkill_when(proc, one_group_done)
    with open(path) as f:
        killed = json.load(f)  # a complete, valid checkpoint
    assert killed["done"][1] < killed["planned"][1]
    assert main(["sample", "--plan", d, "--shard", "0", "--num-shards", "1", "--quiet"]) == 0  # resume
    capsys.readouterr()
    assert main(["calibrate", "--from", d, "--json", "--quiet", "--no-baselines"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert main(["calibrate", "--json", "--quiet", *flags]) == 0
    direct = json.loads(capsys.readouterr().out)
    assert merged["sigma"] == direct["sigma"]
    for a, b in zip(merged["candidates"], direct["candidates"]):
        assert a["passed"] == b["passed"]
        if b["samples_remove"] == direct["num_samples"]:  # complete in process: identical statistics
            assert a == b


def test_plan_keeps_the_report_baselines_sealed_and_calibrate_from_reports_them(tmp_path, capsys):
    """``--plan-only --pilot --out`` stores the report's PLD baselines with the plan (outside the fingerprint, inside
    the integrity seal); ``calibrate --from`` reports them instead of computing them again."""
    plan = plan_calibration(PB, 1.0, 1e-2, jax.random.key(1), sigmas=[1.2, 1.5], num_samples=6144, chunk_size=2048)
    bare, kept = str(tmp_path / "bare"), str(tmp_path / "kept")
    cj.write_plan(bare, plan, PB)
    stored = {"poisson_dpsgd_sigma": 0.5, "cyclic_poisson_bandmf_sigma": 0.75, "notes": ["stored with the plan"]}
    cj.write_plan(kept, plan, PB, stored)
    assert cj.plan_baselines(bare) is None and cj.plan_baselines(kept) == stored
    assert cj.load_plan(bare)[2] == cj.load_plan(kept)[2]  # the same plan: the same fingerprint, the same shards
    cj.write_plan(str(tmp_path / "inf"), plan, PB, {"poisson_dpsgd_sigma": float("inf")})  # not JSON: left out
    assert cj.plan_baselines(str(tmp_path / "inf")) is None
    cj.run_plan_shard(kept, 0, 1)
    assert main(["calibrate", "--from", kept, "--json", "--quiet"]) == 0
    reported = json.loads(capsys.readouterr().out)["baselines"]  # (plus the report's deprecated aliases)
    assert {k: reported[k] for k in stored} == stored
    path = tmp_path / "kept" / cj.PLAN_NAME
    d = json.loads(path.read_text())
    d["baselines"]["poisson_dpsgd_sigma"] = 5.0  # edited: the seal no longer holds
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="digest"):
        cj.plan_baselines(kept)
