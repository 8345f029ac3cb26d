"""The command line's scheme table (:mod:`mcacct.cli.schemes`): every offered scheme builds from its flags exactly
as from its Python constructor, refuses flags that do not apply, calibrates and samples/merges through the
command line; the absl launchers read the same flags. Tables are keyed by registry name and checked against
the registry."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import pytest

import mcacct
from mcacct.cli import schemes as cli_schemes
from mcacct.cli.commands import build_parser, main
from mcacct.engine.problem import Problem
from mcacct.jobs.problem_file import scheme_to_dict
from mcacct.noise_multiplier import default_strategy
from mcacct.schemes import registry
from mcacct.schemes.banded_inverse import BandedInverse, strategy_from_inverse
from mcacct.schemes.bminsep import BMinSep, sampling_prob_from_batch_size
from mcacct.schemes.multi_attribution import MultiAttribution
from mcacct.strategies.banded import BandedToeplitz
from mcacct.schemes.truncated import TruncatedBMinSep

CyclicPoisson, BallsInBins = mcacct.CyclicPoisson, mcacct.BallsInBins
ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES = cli_schemes.cli_names()  # every scheme the command line offers, from the registry

# tiny configurations of every offered scheme: n = 8, expected batch 2 of 16 (p0 = 1/8)
_BATCH = ["--iterations", "8", "--batch-size", "2", "--dataset-size", "16"]
TINY = {
    "bminsep": [*_BATCH, "--min-sep", "2", "--c-col", "1,0.5"],
    "truncated": [*_BATCH, "--min-sep", "2", "--c-col", "1,0.5", "--max-batch-size", "3"],
    "multi-attribution": [*_BATCH, "--min-sep", "2", "--c-col", "1,0.5", "--max-examples-per-user", "2"],
    "cyclic-poisson": [*_BATCH, "--min-sep", "2", "--c-col", "1,0.5"],
    "balls-in-bins": [*_BATCH, "--c-col", "1,0.5"],
    "banded-inverse": [*_BATCH, "--min-sep", "2", "--inverse-bands", "1,-0.5"],
}


def test_every_built_in_scheme_offers_its_command_line_from_its_entry():
    assert NAMES == tuple(e.name for e in registry.schemes() if e.cli is not None)  # registry order
    built_in = {e.name for e in registry.schemes() if e.cls.__module__.startswith("mcacct.")}
    assert set(NAMES) == built_in  # every built-in scheme is offered
    assert set(TINY) == set(NAMES)  # this file's table covers every offered scheme
    options = [f.option for f in cli_schemes.all_flags()]
    assert len(options) == len(set(options))
    assert {f.option for f in cli_schemes.COMMON_FLAGS} <= set(options)
    common = {f.dest for f in cli_schemes.COMMON_FLAGS}
    for _, cli in cli_schemes.cli_schemes():  # hints explain refusals of common flags
        assert set(cli.common) <= common and set(cli.hints) <= common - set(cli.common)
    assert cli_schemes.flag_for("max_batch_size").option == "--max-batch-size" and cli_schemes.flag_for("x") is None


def _parse(name: str, argv: list[str], cmd: str = "delta"):
    extra = ["--sigma", "1", "--epsilon", "1"] if cmd == "delta" else []
    return build_parser().parse_args([cmd, *extra, "--scheme", name, *argv])




def mse(scheme, n: int, bands: int, *rest):
    """The problem of a setting without --c-col: C is the API's MSE-optimised default (issue #41), fitted when
    the case runs."""
    return lambda: Problem(scheme, default_strategy(n, bands), *rest)


DEMO = BandedToeplitz((0.5, 0.5, 0.5, 0.5))
FLAG_CASES = [
    ("bminsep", [], Problem(BMinSep(sampling_prob_from_batch_size(32, 1024, 4), 4, 128, True), DEMO)),
    ("bminsep", ["--iterations", "8", "--min-sep", "2", "--sampling-prob", "0.3", "--cold-start", "--c-col",
                 "1,0.5"], Problem(BMinSep(0.3, 2, 8, False), BandedToeplitz((1.0, 0.5)))),
    ("bminsep", ["--batch-size", "2", "--dataset-size", "16", "--min-sep", "2", "--iterations", "8", "--dtype",
                 "float32"], mse(BMinSep(sampling_prob_from_batch_size(2, 16, 2), 2, 8), 8, 2, "float32")),
    ("truncated", ["--sampling-prob", "0.2", "--dataset-size", "40", "--max-batch-size", "8", "--iterations",
                   "32"], mse(TruncatedBMinSep(0.2, 4, 32, 40, 8), 32, 4)),
    ("truncated", ["--batch-size", "4", "--dataset-size", "40", "--iterations", "32", "--cold-start"],
     mse(TruncatedBMinSep(sampling_prob_from_batch_size(4, 40, 4), 4, 32, 40, 5, False), 32, 4)),
    ("multi-attribution", ["--sampling-prob", "0.2", "--iterations", "32", "--max-examples-per-user", "3"],
     mse(MultiAttribution(0.2, 4, 32, 3), 32, 4)),
    ("multi-attribution", ["--batch-size", "2", "--dataset-size", "16", "--min-sep", "2", "--iterations", "8"],
     mse(MultiAttribution(sampling_prob_from_batch_size(2, 16, 2), 2, 8), 8, 2)),
    ("cyclic-poisson", ["--sampling-prob", "0.5", "--iterations", "32", "--public-phase"],
     mse(CyclicPoisson(0.5, 4, 32, random_phase=False), 32, 4)),
    ("cyclic-poisson", ["--batch-size", "4", "--dataset-size", "64", "--iterations", "32"],
     mse(CyclicPoisson(0.25, 4, 32), 32, 4)),
    ("balls-in-bins", ["--bins", "4", "--iterations", "32"], mse(BallsInBins(4, 32), 32, 4)),
    ("balls-in-bins", ["--batch-size", "8", "--dataset-size", "64", "--iterations", "32", "--c-col",
                       ",".join(["1"] * 9)], Problem(BallsInBins(8, 32), BandedToeplitz((1.0,) * 9))),
    ("banded-inverse", ["--sampling-prob", "0.2", "--min-sep", "2", "--iterations", "16", "--inverse-bands",
                        "1,-0.5"], Problem(BandedInverse(0.2, 2, 16), strategy_from_inverse((1.0, -0.5), 16))),
    ("banded-inverse", ["--sampling-prob", "0.2", "--min-sep", "2", "--iterations", "16", "--c-col", "1,0.5,0.25"],
     Problem(BandedInverse(0.2, 2, 16), BandedToeplitz((1.0, 0.5, 0.25)))),
]


def test_flag_cases_cover_every_offered_scheme():
    assert {c[0] for c in FLAG_CASES} == set(NAMES)


@pytest.mark.parametrize("name,argv,expected", FLAG_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(FLAG_CASES)])
def test_cli_flags_build_the_python_dataclass(name, argv, expected):
    for cmd in ("delta", "calibrate", "sample"):
        if cmd == "sample":
            args = build_parser().parse_args(["sample", "--out", "x", "--sigma", "1", "--epsilon", "1",
                                              "--scheme", name, *argv])
        else:
            args = _parse(name, argv, cmd)
        got = cli_schemes.problem_from_args(args)
        expected = expected() if callable(expected) else expected
        assert got == expected and type(got.scheme) is type(expected.scheme)
        assert type(got.scheme) is registry.get(name).cls


def test_scheme_defaults_to_bminsep():
    args = build_parser().parse_args(["delta", "--sigma", "1", "--epsilon", "1", "--sampling-prob", "0.1"])
    assert args.scheme == cli_schemes.DEFAULT_SCHEME == "bminsep"
    assert cli_schemes.problem_from_args(args) == Problem(BMinSep(0.1, 4, 128), default_strategy(128, 4))


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
    assert merged["config"]["scheme"]["type"] == name  # job files name the registry name
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


@pytest.mark.slow
def test_launcher_flags_come_from_the_cli_table():
    code = """
import sys
sys.path.insert(0, sys.argv[1])
from absl import flags
import _flags
_flags.define_scheme_flags()
flags.FLAGS(["prog", "--scheme=truncated", "--sampling_prob=0.2", "--dataset_size=40", "--max_batch_size=8",
             "--iterations=32"])
from mcacct.jobs.problem_file import scheme_to_dict
from mcacct.noise_multiplier import default_strategy
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
    assert lines[0] == str(scheme_to_dict(TruncatedBMinSep(0.2, 4, 32, 40, 8)))
    assert lines[1].startswith("error: --min-sep does not apply to --scheme balls-in-bins")
    assert "cli._problem" not in (ROOT / "launch" / "_flags.py").read_text()
