"""One stored form of a problem and one fingerprint for every job file (:mod:`mcacct.jobs.problem_file`): every
registered scheme round-trips, statistics files and calibration plans store the same fields through the same
functions, and files of an older format version are refused naming both versions, never misread."""

from __future__ import annotations

import dataclasses
import json

import jax
import pytest

import mcacct
from mcacct.engine.problem import Problem, rng_identity
from mcacct.evr.calibrate import plan_calibration
from mcacct.jobs import calibration as cj
from mcacct.jobs import problem_file as pf
from mcacct.jobs import shards
from mcacct.schemes import registry
from mcacct.schemes.base import AccountedScheme
from mcacct.strategies.banded import BandedToeplitz

SCHEME_INSTANCES = [
    mcacct.BMinSep(0.2, 4, 32), mcacct.BMinSep(0.2, 4, 32, warm_start=False),
    mcacct.TruncatedBMinSep(0.2, 4, 32, 40, 8), mcacct.TruncatedBMinSep(0.3, 2, 16, 41, 8, False),
    mcacct.MultiAttribution(0.2, 4, 32), mcacct.MultiAttribution(0.2, 4, 32, 3),
    mcacct.CyclicPoisson(0.5, 4, 32), mcacct.CyclicPoisson(0.5, 4, 32, random_phase=False),
    mcacct.BallsInBins(4, 32), mcacct.BandedInverse(0.2, 2, 16), mcacct.BandedInverse(0.2, 2, 16, False),
]
ST = BandedToeplitz((1.0, 0.5))


def test_instances_cover_every_built_in_scheme():
    built_in = {e.cls for e in registry.schemes() if e.cls.__module__.startswith("mcacct.")}
    assert {type(s) for s in SCHEME_INSTANCES} == built_in


@pytest.mark.parametrize("scheme", SCHEME_INSTANCES, ids=lambda s: repr(s))
def test_to_dict_from_dict_round_trip_and_protocol(scheme):
    d = pf.scheme_to_dict(scheme)
    name = registry.entry_for(scheme).name  # the registry name, never a class or module path
    assert d == {"type": name, **dataclasses.asdict(scheme)}  # every field, by its own name
    back = pf.scheme_from_dict(json.loads(json.dumps(d)))
    assert back == scheme and type(back) is type(scheme)
    assert isinstance(scheme, AccountedScheme)


def test_protocol_is_runtime_checkable():
    assert not isinstance(object(), AccountedScheme)
    assert not isinstance(BandedToeplitz((1.0,)), AccountedScheme)


def test_from_dict_refusals():
    with pytest.raises(ValueError, match="no 'type'"):
        pf.scheme_from_dict({"sampling_prob": 0.2})
    with pytest.raises(ValueError, match="scheme.type must be one of"):
        pf.scheme_from_dict({"type": "Shuffling"})
    with pytest.raises(ValueError, match="has fields"):
        pf.scheme_from_dict({"type": "balls-in-bins", "min_sep": 4})
    with pytest.raises(ValueError, match="scheme.type must be one of .*entry point"):
        pf.scheme_from_dict({"type": "BallsInBins", "cycle_length": 4, "iterations": 8})  # a class name
    bad = {**pf.scheme_to_dict(mcacct.CyclicPoisson(0.5, 4, 32)), "extra": 1}
    with pytest.raises(ValueError, match=r"plan x\.scheme: CyclicPoisson has fields"):
        pf.scheme_from_dict(bad, "plan x.scheme")
    with pytest.raises(ValueError, match="problem.scheme must be one of"):
        pf.scheme_to_dict(object())


def test_problem_round_trip_and_refusals():
    problem = Problem(mcacct.CyclicPoisson(0.5, 2, 8), ST, "float32", "direct", "scan")
    d = pf.problem_to_dict(problem)
    assert tuple(d) == pf.PROBLEM_FIELDS and d["kernel"] == pf.KERNEL_VERSION and d["rng"] == rng_identity()
    back = pf.problem_from_dict(json.loads(json.dumps({**d, "other": 1})))  # other keys of the file are ignored
    assert back == problem and type(back.scheme) is type(problem.scheme)
    with pytest.raises(ValueError, match=r"^plan p: kernel is 'k0' but this mcacct runs .*; write it again$"):
        pf.problem_from_dict({**d, "kernel": "k0"}, "plan p", "write it again")
    with pytest.raises(ValueError, match=r"^config: rng is 'r' but this process draws with the generator"):
        pf.problem_from_dict({**d, "rng": "r"})
    with pytest.raises(ValueError, match="missing or has a malformed problem field"):
        pf.problem_from_dict({k: v for k, v in d.items() if k != "strategy"})


def test_statistics_files_and_plans_store_the_problem_alike(tmp_path):
    problem = Problem(mcacct.BallsInBins(2, 8), ST)
    cfg = shards.JobConfig(problem, 1.0, (0.5,), 100, 64)
    stored = pf.problem_to_dict(problem)
    assert {k: cfg.to_dict()[k] for k in pf.PROBLEM_FIELDS} == stored
    assert cfg.fingerprint() == shards.config_fingerprint(cfg.to_dict()) == pf.fingerprint(shards.FORMAT,
                                                                                           cfg.to_dict())
    plan = plan_calibration(problem, 1.0, 0.1, jax.random.key(0), num_samples=256, chunk_size=128,
                            sigmas=[1.0, 2.0])
    path = cj.write_plan(str(tmp_path), plan, problem)
    d = json.loads(open(path).read())
    assert {k: d[k] for k in pf.PROBLEM_FIELDS} == stored and d["format"] == cj.FORMAT
    rest = {k: v for k, v in d.items() if k not in ("format", "fingerprint", "integrity")}
    assert d["fingerprint"] == cj.plan_fingerprint(d) == pf.fingerprint(cj.FORMAT, rest)
    assert cj.load_plan(str(tmp_path))[1] == problem


def test_check_format_names_both_versions():
    pf.check_format("mcacct-stats/2", "mcacct-stats/2", "x")
    with pytest.raises(ValueError, match=r"^f is not a stats file \(format 'mcacct-stats/2'\)$"):
        pf.check_format("something/1", "mcacct-stats/2", "f is not a stats file")
    with pytest.raises(ValueError, match=r"of format 'mcacct-stats/2': it has format 'mcacct-stats/1' \(written by "
                                         "another version of mcacct"):
        pf.check_format("mcacct-stats/1", "mcacct-stats/2", "f is not a stats file")


def _downgrade_scheme(d: dict) -> None:
    """The scheme as format 1 stored it: cyclic Poisson's and balls-in-bins' cycle length was ``min_sep``."""
    if "cycle_length" in d:
        d["min_sep"] = d.pop("cycle_length")


@pytest.mark.parametrize("version", [1, 2, 3])
def test_files_of_earlier_formats_are_refused_naming_the_version(tmp_path, capsys, version):
    """Version 1 stored cyclic Poisson's cycle length as min_sep; version 2 carried no digest (#37); version 3 named
    the scheme by its class name (#40): each is refused by its format name, as statistics files and as plans."""
    from mcacct.cli.commands import main
    assert shards.FORMAT == "mcacct-stats/4" and cj.FORMAT == "mcacct-calibration-plan/4"
    assert cj.SHARD_FORMAT == "mcacct-calibration-shard/3"
    problem = Problem(mcacct.CyclicPoisson(0.5, 2, 8), ST)
    cfg = shards.JobConfig(problem, 1.0, (0.5,), 64, 64)
    new = tmp_path / "new"
    shards.run_shard(cfg, 0, 1, str(new))
    obj = json.loads((new / shards.shard_filename(0, 1)).read_text())
    obj["format"] = f"mcacct-stats/{version}"
    obj.pop("integrity")
    if version == 1:
        _downgrade_scheme(obj["config"]["scheme"])
    if version <= 3:
        obj["config"]["scheme"]["type"] = "CyclicPoisson"
    old = tmp_path / "old"
    old.mkdir()
    (old / shards.shard_filename(0, 1)).write_text(json.dumps(obj))
    needle = f"of format 'mcacct-stats/4': it has format 'mcacct-stats/{version}'"
    with pytest.raises(ValueError, match=needle):
        shards.load_stats_file(str(old / shards.shard_filename(0, 1)))
    with pytest.raises(ValueError, match=needle):
        shards.merge([str(old)])
    with pytest.raises(ValueError, match=needle + r".*; use another --out"):
        shards.run_shard(cfg, 0, 1, str(old))
    assert main(["merge", str(old)]) == 2
    assert needle in capsys.readouterr().err

    plan = plan_calibration(problem, 1.0, 0.1, jax.random.key(0), num_samples=256, chunk_size=128,
                            sigmas=[1.0, 2.0])
    path = cj.write_plan(str(tmp_path / "plan"), plan, problem)
    d = json.loads(open(path).read())
    d["format"] = f"mcacct-calibration-plan/{version}"
    d.pop("integrity")
    if version == 1:
        _downgrade_scheme(d["scheme"])
    if version <= 3:
        d["scheme"]["type"] = "CyclicPoisson"
    open(path, "w").write(json.dumps(d))
    for call in (lambda: cj.load_plan(str(tmp_path / "plan")), lambda: cj.run_plan_shard(str(tmp_path / "plan"), 0, 1),
                 lambda: cj.calibrate_from(str(tmp_path / "plan"))):
        with pytest.raises(ValueError, match="of format 'mcacct-calibration-plan/4': it has format "
                                             f"'mcacct-calibration-plan/{version}'"):
            call()
