"""The scheme registry: every scheme round-trips through job files, builds from its CLI flags exactly as from
its Python constructor, calibrates and samples/merges through the command line; no import cycles."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import mcacct
from mcacct import registry
from mcacct.engine.problem import Problem
from mcacct.schemes.banded_inverse import BandedInverse, strategy_from_inverse
from mcacct.schemes.baselines import BallsInBins, CyclicPoisson
from mcacct.cli.commands import build_parser, main
from mcacct.schemes.multi_attribution import MultiAttribution
from mcacct.schemes.base import AccountedScheme
from mcacct.schemes.bminsep import BMinSep, sampling_prob_from_batch_size
from mcacct.schemes.strategy import BandedToeplitz
from mcacct.schemes.truncated import TruncatedBMinSep

ROOT = pathlib.Path(__file__).resolve().parents[1]  # tests/ is one level below the root
NAMES = ("bminsep", "truncated", "multi-attribution", "cyclic-poisson", "balls-in-bins", "banded-inverse")

# tiny configurations of every scheme: n = 8, expected batch 2 of 16 (p0 = 1/8)
_BATCH = ["--iterations", "8", "--batch-size", "2", "--dataset-size", "16"]
TINY = {
    "bminsep": [*_BATCH, "--min-sep", "2", "--c-col", "1,0.5"],
    "truncated": [*_BATCH, "--min-sep", "2", "--c-col", "1,0.5", "--max-batch-size", "3"],
    "multi-attribution": [*_BATCH, "--min-sep", "2", "--c-col", "1,0.5", "--max-examples-per-user", "2"],
    "cyclic-poisson": [*_BATCH, "--min-sep", "2", "--c-col", "1,0.5"],
    "balls-in-bins": [*_BATCH, "--c-col", "1,0.5"],
    "banded-inverse": [*_BATCH, "--min-sep", "2", "--inverse-bands", "1,-0.5"],
}


def test_registry_lists_every_scheme_once():
    assert registry.names() == NAMES
    classes = [e.cls for e in registry.SCHEMES]
    assert set(classes) == {BMinSep, TruncatedBMinSep, MultiAttribution, CyclicPoisson, BallsInBins, BandedInverse}
    assert len(set(classes)) == len(classes)
    for e in registry.SCHEMES:
        assert dataclasses.is_dataclass(e.cls) and e.cls.__dataclass_params__.frozen
        assert registry.get(e.name) is e and registry.get(e.row_name) is e and registry.entry_for(e.cls) is e
        assert getattr(mcacct, e.cls.__name__) is e.cls  # public API
    options = [f.option for f in registry.all_flags()]
    assert len(options) == len(set(options))
    with pytest.raises(ValueError, match="scheme must be one of"):
        registry.get("shuffling")
    assert registry.entry_for(object()) is None


SCHEME_INSTANCES = [
    BMinSep(0.2, 4, 32), BMinSep(0.2, 4, 32, warm_start=False),
    TruncatedBMinSep(0.2, 4, 32, 40, 8), TruncatedBMinSep(0.3, 2, 16, 41, 8, False),
    MultiAttribution(0.2, 4, 32), MultiAttribution(0.2, 4, 32, 3),
    CyclicPoisson(0.5, 4, 32), CyclicPoisson(0.5, 4, 32, random_phase=False),
    BallsInBins(4, 32), BandedInverse(0.2, 2, 16), BandedInverse(0.2, 2, 16, False),
]


@pytest.mark.parametrize("scheme", SCHEME_INSTANCES, ids=lambda s: repr(s))
def test_to_dict_from_dict_round_trip_and_protocol(scheme):
    d = registry.scheme_to_dict(scheme)
    assert d["type"] == type(scheme).__name__
    assert set(d) == {"type"} | {f.name for f in dataclasses.fields(scheme)}
    back = registry.scheme_from_dict(json.loads(json.dumps(d)))
    assert back == scheme and type(back) is type(scheme)
    assert isinstance(scheme, AccountedScheme)
    # jobs.py stores schemes through the registry (same functions, same file format)
    from mcacct.jobs import shards as jobs
    assert jobs.scheme_to_dict is registry.scheme_to_dict and jobs.scheme_from_dict is registry.scheme_from_dict


def test_protocol_is_runtime_checkable():
    assert not isinstance(object(), AccountedScheme)
    assert not isinstance(BandedToeplitz((1.0,)), AccountedScheme)


def test_from_dict_refusals():
    with pytest.raises(ValueError, match="no 'type'"):
        registry.scheme_from_dict({"sampling_prob": 0.2})
    with pytest.raises(ValueError, match="scheme.type must be one of"):
        registry.scheme_from_dict({"type": "Shuffling"})
    with pytest.raises(ValueError, match="has fields"):
        registry.scheme_from_dict({"type": "BallsInBins", "min_sep": 4})
    with pytest.raises(ValueError, match="problem.scheme must be one of"):
        registry.scheme_to_dict(object())


def _parse(name: str, argv: list[str], cmd: str = "delta"):
    extra = ["--sigma", "1", "--epsilon", "1"] if cmd == "delta" else []
    return build_parser().parse_args([cmd, *extra, "--scheme", name, *argv])


ONE = BandedToeplitz((1.0,))
DEMO = BandedToeplitz((0.5, 0.5, 0.5, 0.5))
FLAG_CASES = [
    ("bminsep", [], Problem(BMinSep(sampling_prob_from_batch_size(32, 1024, 4), 4, 128, True), DEMO)),
    ("bminsep", ["--iterations", "8", "--min-sep", "2", "--sampling-prob", "0.3", "--cold-start", "--c-col",
                 "1,0.5"], Problem(BMinSep(0.3, 2, 8, False), BandedToeplitz((1.0, 0.5)))),
    ("bminsep", ["--batch-size", "2", "--dataset-size", "16", "--min-sep", "2", "--iterations", "8", "--dtype",
                 "float32"], Problem(BMinSep(sampling_prob_from_batch_size(2, 16, 2), 2, 8), ONE, "float32")),
    ("truncated", ["--sampling-prob", "0.2", "--dataset-size", "40", "--max-batch-size", "8", "--iterations",
                   "32"], Problem(TruncatedBMinSep(0.2, 4, 32, 40, 8), ONE)),
    ("truncated", ["--batch-size", "4", "--dataset-size", "40", "--iterations", "32", "--cold-start"],
     Problem(TruncatedBMinSep(sampling_prob_from_batch_size(4, 40, 4), 4, 32, 40, 5, False), ONE)),
    ("multi-attribution", ["--sampling-prob", "0.2", "--iterations", "32", "--max-examples-per-user", "3"],
     Problem(MultiAttribution(0.2, 4, 32, 3), ONE)),
    ("multi-attribution", ["--batch-size", "2", "--dataset-size", "16", "--min-sep", "2", "--iterations", "8"],
     Problem(MultiAttribution(sampling_prob_from_batch_size(2, 16, 2), 2, 8), ONE)),
    ("cyclic-poisson", ["--sampling-prob", "0.5", "--iterations", "32", "--public-phase"],
     Problem(CyclicPoisson(0.5, 4, 32, random_phase=False), ONE)),
    ("cyclic-poisson", ["--batch-size", "4", "--dataset-size", "64", "--iterations", "32"],
     Problem(CyclicPoisson(0.25, 4, 32), ONE)),
    ("balls-in-bins", ["--bins", "4", "--iterations", "32"], Problem(BallsInBins(4, 32), ONE)),
    ("balls-in-bins", ["--batch-size", "8", "--dataset-size", "64", "--iterations", "32", "--c-col",
                       ",".join(["1"] * 9)], Problem(BallsInBins(8, 32), BandedToeplitz((1.0,) * 9))),
    ("banded-inverse", ["--sampling-prob", "0.2", "--min-sep", "2", "--iterations", "16", "--inverse-bands",
                        "1,-0.5"], Problem(BandedInverse(0.2, 2, 16), strategy_from_inverse((1.0, -0.5), 16))),
    ("banded-inverse", ["--sampling-prob", "0.2", "--min-sep", "2", "--iterations", "16", "--c-col", "1,0.5,0.25"],
     Problem(BandedInverse(0.2, 2, 16), BandedToeplitz((1.0, 0.5, 0.25)))),
]


@pytest.mark.parametrize("name,argv,expected", FLAG_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(FLAG_CASES)])
def test_cli_flags_build_the_python_dataclass(name, argv, expected):
    for cmd in ("delta", "calibrate", "sample"):
        if cmd == "sample":
            args = build_parser().parse_args(["sample", "--out", "x", "--sigma", "1", "--epsilon", "1",
                                              "--scheme", name, *argv])
        else:
            args = _parse(name, argv, cmd)
        got = registry.problem_from_args(args)
        assert got == expected and type(got.scheme) is type(expected.scheme)


def test_scheme_defaults_to_bminsep():
    args = build_parser().parse_args(["delta", "--sigma", "1", "--epsilon", "1", "--sampling-prob", "0.1"])
    assert args.scheme == "bminsep"
    assert registry.problem_from_args(args) == Problem(BMinSep(0.1, 4, 128), ONE)


@pytest.mark.parametrize("argv,needle", [
    (["--scheme", "balls-in-bins", "--min-sep", "3"], "--min-sep does not apply to --scheme balls-in-bins"),
    (["--scheme", "balls-in-bins", "--sampling-prob", "0.3"], "--sampling-prob does not apply"),
    (["--scheme", "cyclic-poisson", "--sampling-prob", "0.2", "--cold-start"], "--cold-start does not apply"),
    (["--scheme", "bminsep", "--sampling-prob", "0.1", "--max-batch-size", "3"], "--max-batch-size does not apply"),
    (["--scheme", "bminsep", "--sampling-prob", "0.1", "--bins", "3"], "--bins does not apply"),
    (["--scheme", "truncated", "--sampling-prob", "0.2"], "--dataset-size"),
    (["--scheme", "truncated", "--sampling-prob", "0.2", "--dataset-size", "40", "--max-batch-size", "0"],
     "--max-batch-size must be an integer in [1, inf)"),
    (["--scheme", "truncated", "--sampling-prob", "0.2", "--batch-size", "4", "--dataset-size", "40"],
     "--sampling-prob"),
    (["--scheme", "balls-in-bins", "--batch-size", "3", "--dataset-size", "16"], "--bins"),
    (["--scheme", "balls-in-bins", "--bins", "0"], "--bins must be an integer in [1, inf)"),
    (["--scheme", "balls-in-bins", "--bins", "4", "--batch-size", "4", "--dataset-size", "16"], "--bins"),
    (["--scheme", "banded-inverse", "--sampling-prob", "0.2", "--c-col", "1", "--inverse-bands", "1,-0.5"],
     "--inverse-bands"),
    (["--scheme", "banded-inverse", "--sampling-prob", "0.2", "--inverse-bands", "1,x"], "--inverse-bands"),
    (["--scheme", "banded-inverse", "--sampling-prob", "0.2", "--inverse-bands", "0,1"], "--inverse-bands"),
    (["--scheme", "multi-attribution", "--sampling-prob", "0.2", "--max-examples-per-user", "0"],
     "--max-examples-per-user must be an integer in [1, inf)"),
    (["--scheme", "cyclic-poisson", "--batch-size", "20", "--dataset-size", "64"], "--batch-size"),
    (["--scheme", "cyclic-poisson", "--sampling-prob", "1.5"], "--sampling-prob must be in (0, 1]"),
    (["--scheme", "cyclic-poisson", "--sampling-prob", "0.5", "--min-sep", "2", "--c-col", "1,1,1"], "--min-sep"),
])
def test_bad_scheme_flags_exit_2(argv, needle, capsys):
    try:
        rc = main(["delta", "--sigma", "1", "--epsilon", "1", *argv, "--quiet"])
    except SystemExit as e:  # refused by argparse (range types), after its usage lines
        rc = e.code
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert rc == 2 and last.startswith("error:") and needle in last and "Traceback" not in err


def test_unknown_scheme_and_bad_sigmas_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["delta", "--sigma", "1", "--epsilon", "1", "--scheme", "shuffling"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--scheme" in err and "invalid choice" in err and "bminsep" in err
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "--sigmas", "1,x"])
    assert exc.value.code == 2 and "--sigmas" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # a range refusal of the parser, before any work
        main(["calibrate", "--sigmas", "0,1", "--quiet"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.strip().splitlines()[-1].startswith("error: --sigmas must be numbers in (0, inf)")
    assert "Traceback" not in err


@pytest.mark.parametrize("name", NAMES)
def test_every_scheme_calibrates_through_the_cli(name, capsys):
    sigmas = [0.8, 1.2, 2.0]
    argv = ["calibrate", "--scheme", name, *TINY[name], "--epsilon", "1", "--delta", "0.1", "--samples", "400",
            "--chunk-size", "128", "--sigmas", ",".join(map(str, sigmas)), "--no-baselines", "--json", "--quiet"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["scheme"]["name"] == name and out["scheme"]["type"] == registry.get(name).cls.__name__
    assert out["scheme"]["iterations"] == 8
    assert out["overall_delta"] <= 0.1 and out["num_samples"] == 400
    assert out["candidates"] and all(c["sigma"] in sigmas for c in out["candidates"])
    assert out["sigma"] in sigmas or (not out["verified"] and out["sigma"] == out["top_sigma"])
    assert isinstance(out["devices"], int) and out["devices"] >= 1
    assert isinstance(out["device_kind"], str) and out["platform"] and out["device"].startswith(out["platform"])
    assert "baselines" not in out


def test_baselines_come_from_the_registry(monkeypatch):
    """bminsep's hook: Poisson DP-SGD at q = p0 and cyclic-Poisson BandMF at q = b p0 (PLD calls recorded; the
    PLD accountant itself is tested in tests/pld/ and through `mcacct calibrate` in tests/engine/test_core.py)."""
    from mcacct import pld
    from mcacct.evr.calibrate import baseline_sigmas
    calls = []

    def fake_calibrate(spec, epsilon, delta):
        calls.append((spec, epsilon, delta))
        return float(len(calls))

    monkeypatch.setattr(pld, "pld_calibrate", fake_calibrate)
    pb = Problem(BMinSep(0.2, 2, 8), BandedToeplitz((1.0, 0.5)))
    base = registry.baseline_sigmas(pb, 1.0, 0.1)
    assert base["poisson_dpsgd_sigma"] == 1.0 and base["cyclic_poisson_bandmf_sigma"] == 2.0 and "note" in base
    p0 = pb.scheme.participation_rate
    assert calls[0] == (pld.PoissonGaussianSpec(p0, 1.0, steps=8), 1.0, 0.1)
    assert calls[1] == (pld.CyclicPoissonBandMFSpec(8, 2, 2 * p0, (1.0, 0.5), 1.0), 1.0, 0.1)
    calls.clear()
    assert baseline_sigmas(pb, 1.0, 0.1) == base  # calibrate.baseline_sigmas delegates to the registry
    assert [e.name for e in registry.SCHEMES if e.baselines is not None] == ["bminsep"]
    for scheme in (CyclicPoisson(0.5, 2, 8), BallsInBins(2, 8)):
        assert registry.baseline_sigmas(Problem(scheme, BandedToeplitz((1.0, 0.5))), 1.0, 0.1) == {}


@pytest.mark.parametrize("name", NAMES)
def test_sample_and_merge_every_scheme(name, tmp_path, capsys):
    """Two shards of `mcacct sample --scheme NAME` merge into exactly the numbers of `mcacct delta`."""
    mc = ["--sigma", "1", "--epsilon", "0.5", "--samples", "300", "--chunk-size", "64", "--quiet"]
    out = tmp_path / name
    for i in (0, 1):
        assert main(["sample", "--scheme", name, *TINY[name], *mc, "--shard", str(i), "--num-shards", "2",
                     "--out", str(out), "--json"]) == 0
        shard = json.loads(capsys.readouterr().out)
        assert shard["complete"] and shard["devices"] >= 1
    assert main(["merge", str(out), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert merged["complete"] and merged["num_samples"] == 300
    assert merged["config"]["scheme"]["type"] == registry.get(name).cls.__name__
    assert main(["delta", "--scheme", name, *TINY[name], *mc, "--json"]) == 0
    delta = json.loads(capsys.readouterr().out)
    for k in ("delta_estimate", "delta_upper", "num_samples"):
        assert merged[k] == delta[k]
    assert delta["scheme"]["name"] == name


def test_merge_refuses_shards_of_another_scheme(tmp_path, capsys):
    mc = ["--sigma", "1", "--epsilon", "0.5", "--samples", "300", "--chunk-size", "64", "--quiet"]
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["sample", "--scheme", "bminsep", *TINY["bminsep"], *mc, "--num-shards", "2", "--out", str(a)]) == 0
    assert main(["sample", "--scheme", "truncated", *TINY["truncated"], *mc, "--shard", "1", "--num-shards", "2",
                 "--out", str(b)]) == 0
    shutil.copy(next(b.glob("shard-*.json")), a)
    capsys.readouterr()
    assert main(["merge", str(a)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "scheme.type differs" in err and "Traceback" not in err
    # equal scheme, another field: refused too (by the fingerprint)
    c = tmp_path / "c"
    assert main(["sample", "--scheme", "truncated", *TINY["truncated"][:-1], "4", *mc, "--shard", "0",
                 "--num-shards", "2", "--out", str(c)]) == 0
    shutil.copy(next(b.glob("shard-*.json")), c)
    capsys.readouterr()
    assert main(["merge", str(c)]) == 2
    assert "scheme.max_batch_size differs" in capsys.readouterr().err


def test_compare_plans_come_from_the_registry():
    from mcacct.cli import compare as compare_cli
    from mcacct.report import compare
    assert compare.SCHEMES == tuple(e.row_name for e in registry.SCHEMES)
    assert [e.name for e in compare._parse_schemes("bminsep,truncated-b-min-sep,balls-in-bins")] == [
        "bminsep", "truncated", "balls-in-bins"]
    setting = registry.CompareSetting(8, 2, 2.0, 16, BandedToeplitz((1.0, 0.5)),
                                      {"max_batch_size": 3, "inverse_bands": (1.0, -0.5)})
    for e in registry.SCHEMES:
        plan = e.compare_plan(setting)
        assert plan.skip is None and type(plan.problem.scheme) is e.cls and plan.problem.scheme.iterations == 8
        rate = getattr(plan.problem.scheme, "participation_rate", None)
        if rate is not None and e.name != "multi-attribution":  # equal expected batch size 2/16
            assert rate == pytest.approx(2 / 16)
    assert registry.get("banded-inverse").compare_plan(
        registry.CompareSetting(8, 2, 2.0, 16, BandedToeplitz((1.0,)))).skip == "inverse_bands not given"
    assert "integer number of bins" in registry.get("balls-in-bins").compare_plan(
        registry.CompareSetting(8, 2, 3.0, 16, BandedToeplitz((1.0,)))).skip
    # the compare parser's optional-row flags are the registry's
    import argparse
    parser = argparse.ArgumentParser(prog="mcacct")
    compare_cli.add_compare_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", "--max-batch-size", "5", "--inverse-bands", "1,-0.5"])
    assert args.max_batch_size == 5 and args.inverse_bands == (1.0, -0.5) and args.max_examples_per_user is None
    with pytest.raises(ValueError, match="max_batch_size"):
        compare.compare_schemes(1.0, 0.05, 8, 2, 2, 16, max_batch_size=0)
    with pytest.raises(ValueError, match="options must be among"):
        compare.compare_schemes(1.0, 0.05, 8, 2, 2, 16, options={"nope": 1})


def test_launcher_flags_come_from_the_registry():
    code = """
import sys
sys.path.insert(0, sys.argv[1])
from absl import flags
import _flags
_flags.define_scheme_flags()
flags.FLAGS(["prog", "--scheme=truncated", "--sampling_prob=0.2", "--dataset_size=40", "--max_batch_size=8",
             "--iterations=32"])
from mcacct.registry import scheme_to_dict
print(scheme_to_dict(_flags.problem_from_flags().scheme))
flags.FLAGS.unparse_flags()
flags.FLAGS(["prog", "--scheme=balls-in-bins", "--min_sep=3"])
try:
    _flags.problem_from_flags()
except ValueError as err:
    print("error:", err)
"""
    r = subprocess.run([sys.executable, "-c", code, str(ROOT / "launch")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0] == str(registry.scheme_to_dict(TruncatedBMinSep(0.2, 4, 32, 40, 8)))
    assert lines[1].startswith("error: --min-sep does not apply to --scheme balls-in-bins")
    assert "cli._problem" not in (ROOT / "launch" / "_flags.py").read_text()
