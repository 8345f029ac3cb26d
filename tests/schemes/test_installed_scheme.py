"""A scheme defined outside the package (docs/examples/always_in.py, the example of docs/schemes.md) runs end to end:
registered at run time, it is checked against its exact Gaussian PLD and calibrates; installed through an entry
point of group ``mcacct.schemes``, its shard jobs, merge, calibration from a plan and report run in fresh processes
that import nothing of the test's; without the entry point a fresh process refuses its files, saying why."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import pytest

import mcacct
from mcacct.evr.calibrate import plan_calibration
from mcacct.jobs import calibration as cj
from mcacct.jobs import shards
from mcacct.schemes import registry

from helpers import ROOT

EXAMPLE = Path(ROOT) / "docs" / "examples" / "always_in.py"


@pytest.fixture(scope="module")
def always_in(tmp_path_factory):
    """The example module, importable from a folder of its own that also carries an installed distribution's
    metadata declaring the entry point (what ``pip install`` of a package with that entry point writes)."""
    site = tmp_path_factory.mktemp("site")
    shutil.copy(EXAMPLE, site / "always_in.py")
    meta = site / "always_in-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: always-in\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text("[mcacct.schemes]\nalways-in = always_in:INFO\n")
    sys.path.insert(0, str(site))
    try:
        import always_in as module
        info = registry.register(module.INFO)
        yield module, site
        registry.unregister(info.name)
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("always_in", None)


def _problem(module):
    return mcacct.Problem(module.AlwaysIn(6), mcacct.BandedToeplitz((1.0, 0.5)))


def _cli(site, *args, entry_point=True):
    """``python -m mcacct ARGS`` in a fresh process; its path holds the example (and its entry point) only when
    ``entry_point``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if entry_point:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "mcacct", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_estimate_brackets_the_exact_gaussian_pld_and_calibrates(always_in):
    module, _ = always_in
    pb = _problem(module)
    sigma, eps = 4.0, 0.5
    est = mcacct.estimate(pb, sigma, jax.random.key(1), 8192, (eps,), chunk_size=2048)
    exact = mcacct.pld.pld_delta(dataclasses.replace(pb.scheme.exact_pld(pb.strategy), sigma=sigma), eps).delta
    for d in ("remove", "add"):
        assert est.delta(0)[d]["delta_lower"] <= exact <= est.delta(0)[d]["delta_upper"]
    # the certified sigma is sound by the exact PLD (||mu|| = 3.5: delta(1) = 0.016 at sigma 6, 0.0068 at 7)
    res = mcacct.calibrate(pb, 1.0, 1e-2, jax.random.key(2), sigmas=[6.0, 6.5, 7.0], chunk_size=2048,
                          num_samples=4096)
    at = dataclasses.replace(pb.scheme.exact_pld(pb.strategy), sigma=res.sigma)
    assert res.overall_delta <= 1e-2 and mcacct.pld.pld_delta(at, 1.0).delta <= 1e-2


def test_installed_scheme_runs_shards_merge_plan_and_report_in_fresh_processes(always_in, tmp_path):
    module, site = always_in
    pb = _problem(module)
    # statistics shards written here; merged and plotted by fresh processes that know the scheme by its entry point
    cfg = shards.JobConfig(problem=pb, sigma=4.0, epsilons=(0.5,), num_samples=1024, chunk_size=512, seed=3)
    for i in range(2):
        shards.run_shard(cfg, i, 2, str(tmp_path / "stats"))
    assert json.loads(next((tmp_path / "stats").glob("*.json")).read_text())["config"]["scheme"]["type"] == "always-in"
    r = _cli(site, "merge", str(tmp_path / "stats"), "--out", str(tmp_path / "merged"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    rep = json.loads(r.stdout)
    direct = mcacct.estimate(pb, 4.0, cfg.root_key(), 1024, (0.5,), chunk_size=512)
    assert rep["results"][0]["delta_upper"] == direct.delta(0)["delta_upper"]
    assert rep["config"]["scheme"] == {"type": "always-in", "iterations": 6}
    r = _cli(site, "plot", str(tmp_path / "merged"), "--out", str(tmp_path / "delta.png"))
    assert r.returncode == 0 and (tmp_path / "delta.png").stat().st_size > 0, r.stderr[-2000:]
    # calibration as shard jobs: the plan written here, its shards and the verdict run in fresh processes
    plan = plan_calibration(pb, 1.0, 1e-2, jax.random.key(4), sigmas=[6.0, 6.5, 7.0], chunk_size=1024,
                            num_samples=2048)
    cj.write_plan(str(tmp_path / "plan"), plan, pb)
    for i in (1, 0):
        r = _cli(site, "sample", "--plan", str(tmp_path / "plan"), "--shard", str(i), "--num-shards", "2", "--quiet")
        assert r.returncode == 0, r.stderr[-2000:]
    r = _cli(site, "calibrate", "--from", str(tmp_path / "plan"), "--json", "--quiet", "--no-baselines")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["scheme"]["name"] == "always-in" and out["scheme"]["participation_rate"] == 1.0
    assert out["sigma"] == cj.calibrate_from(str(tmp_path / "plan")).sigma
    # a fresh process without the entry point refuses the files, naming the ways to make the scheme known
    r = _cli(site, "merge", str(tmp_path / "stats"), entry_point=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "got 'always-in'" in r.stderr and "entry point of group 'mcacct.schemes'" in r.stderr
    # an installed package whose entry point fails to load is named, not a traceback
    broken = tmp_path / "broken"
    (broken / "broken_scheme-0.1.dist-info").mkdir(parents=True)
    (broken / "broken_scheme-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-scheme\n"
                                                                     "Version: 0.1\n")
    (broken / "broken_scheme-0.1.dist-info" / "entry_points.txt").write_text("[mcacct.schemes]\nbroken = nowhere:INFO\n")
    r = _cli(broken, "merge", str(tmp_path / "stats"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert "entry point 'broken' = 'nowhere:INFO' of group 'mcacct.schemes' could not be loaded" in r.stderr
