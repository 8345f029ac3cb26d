"""Bad input over every subcommand: exit status 2, one last line ``error: ...`` naming the flag (argparse's usage
lines may come before it), no traceback, nothing written.

Every case is refused before any computation, so the table runs in-process in a few seconds."""

from __future__ import annotations

import os

import numpy as np
import pytest

from mcacct.cli import main

# (argv, text the error line must contain: the flag, and where it matters the allowed range)
DELTA = ["delta", "--sigma", "1", "--epsilon", "1"]
PLD_EPS = ["pld", "epsilon"]
CASES = [
    # calibrate
    (["calibrate", "--ladder-ratio", "0.5"], "--ladder-ratio must be in (1, inf)"),
    (["calibrate", "--systematic-reserve", "2"], "--systematic-reserve must be in (0, 0.5]"),
    (["calibrate", "--sigmas", "1.3,1.4", "--above", "5"], "--above"),
    (["calibrate", "--sigmas", "1.3,1.4", "--ladder-ratio", "1.5"], "--ladder-ratio"),
    (["calibrate", "--sigmas", "1,-1"], "--sigmas must be numbers in (0, inf)"),
    (["calibrate", "--from", "plan_dir", "--epsilon", "5", "--iterations", "7"], "--epsilon"),
    (["calibrate", "--from", "plan_dir", "--iterations", "7"], "--iterations"),
    (["calibrate", "--from", "plan_dir", "--seed", "3"], "--seed"),
    (["calibrate", "--plan-only", "--from", "plan_dir"], "--plan-only"),
    (["calibrate", "--out", "o"], "--out"),
    (["calibrate", "--epsilon", "-1"], "--epsilon must be in [0, inf)"),
    (["calibrate", "--delta", "1"], "--delta must be in (0, 1)"),
    (["calibrate", "--samples", "100", "--no-baselines"], "--samples"),
    # delta / epsilon: Monte Carlo and scheme flags
    (DELTA + ["--seed", "99999999999999999999"], "--seed must be an integer in [0, "),
    (DELTA + ["--seed", "-1"], "--seed must be an integer in [0, "),
    (DELTA + ["--scheme", "balls-in-bins", "--bins", "0"], "--bins must be an integer in [1, inf)"),
    (DELTA + ["--samples", "0"], "--samples must be a whole number in [1, "),
    (DELTA + ["--iterations", "8", "--min-sep", "64"], "--batch-size must be in (0, dataset size / min-sep]"),
    (DELTA + ["--iterations", "0"], "--iterations must be an integer in [1, inf)"),
    (DELTA + ["--min-sep", "0"], "--min-sep must be an integer in [1, inf)"),
    (DELTA + ["--sampling-prob", "1.5"], "--sampling-prob must be in (0, 1]"),
    (DELTA + ["--batch-size", "0", "--dataset-size", "10"], "--batch-size must be in (0, inf)"),
    (DELTA + ["--chunk-size", "0"], "--chunk-size must be 'auto' or an integer in [1, inf)"),
    (DELTA + ["--c-col", "0.5,0.5,"], "--c-col must be a comma-separated list"),
    (DELTA + ["--c-col", "1,-2"], "--c-col entries must be in [0, inf)"),
    (DELTA + ["--c-col", "1,1e200"], "--c-col entries must be at most 1e+100"),
    (DELTA + ["--c-col", "0,0"], "--c-col must have at least one positive entry"),
    (DELTA + ["--alpha", "1"], "--alpha must be in (0, 1)"),
    (DELTA + ["--scheme", "cyclic-poisson", "--cold-start"], "--cold-start does not apply"),
    (DELTA + ["--scheme", "truncated", "--sampling-prob", "0.1"], "--dataset-size"),
    (DELTA + ["--dtype", "float16"], "--dtype"),
    (["delta", "--sigma", "nan", "--epsilon", "1"], "--sigma must be a finite real number in (0, inf)"),
    (["delta", "--sigma", "-1", "--epsilon", "1"], "--sigma must be in (0, inf)"),
    (["epsilon", "--sigma", "1", "--delta", "0"], "--delta must be in (0, 1)"),
    # issue 37: out of float64's / int32's / memory's range, bad addresses (tests/cli/test_crashes.py has more)
    (["delta", "--sigma", "1e-300", "--epsilon", "1"], "--sigma must be in [1e-100, 1e+100]"),
    (["epsilon", "--sigma", "1e300", "--delta", "0.1"], "--sigma must be in [1e-100, 1e+100]"),
    (["calibrate", "--sigmas", "1,1e-300"], "--sigmas must be numbers in [1e-100, 1e+100]"),
    (["calibrate", "--epsilon", "1e308"], "--epsilon must be in [0, 700]"),
    (["calibrate", "--plan-only", "--iterations", "1e12"], "--iterations must be an integer in [1, 1048576]"),
    (DELTA + ["--scheme", "balls-in-bins", "--bins", "1e12", "--iterations", "64"],
     "--bins must be an integer in [1, 8192]"),
    (DELTA + ["--cpu-devices", "100000"], "--cpu-devices must be 'auto' or an integer in [1, 256]"),
    (DELTA + ["--coordinator-address", "localhost:abc"], "--coordinator-address must be host:port"),
    (DELTA + ["--coordinator-address", "::::", "--num-processes", "1"], "--coordinator-address must be host:port"),
    (["compare", "--schemes", "b-min-sep", "--max-batch-size", "40"], "--max-batch-size applies only to the truncated"),
    (["compare", "--epsilon", "1e308"], "--epsilon must be in [0, 700]"),
    (["mse-study", "--out", "norms.npy"], "--out must be a directory"),
    (["mse-study", "--cache", "norms.npy", "--out", "o"], "--cache must be a directory"),
    # strategy
    (["strategy", "--iterations", "16", "--c-col", "1,-2"], "--c-col entries must be in [0, inf)"),
    (["strategy", "--iterations", "16", "--c-col", "0.5,0.5,"], "--c-col must be a comma-separated list"),
    (["strategy", "--iterations", "0", "--bands", "1"], "--iterations must be an integer in [1, inf)"),
    (["strategy", "--iterations", "8", "--bands", "20"], "--bands must be an integer in [1, --iterations = 8]"),
    # individual
    (["individual", "--norms", "norms.npy", "--sigma", "1", "--sampling-prob", "0.1", "--delta", "1e-5",
      "--plot", "nodir/x.png"], "--plot"),
    (["individual", "--norms", "norms.npy", "--sigma", "1", "--sampling-prob", "0.1", "--delta", "1e-5",
      "--plot", "hist.xyz"], "--plot must end in one of .png"),
    (["individual", "--norms", "norms.npy", "--sigma", "0", "--sampling-prob", "0.1", "--delta", "1e-5"],
     "--sigma must be in (0, inf)"),
    (["individual", "--norms", "norms.npy", "--sigma", "1", "--sampling-prob", "2", "--delta", "1e-5"],
     "--sampling-prob must be in (0, 1]"),
    (["individual", "--norms", "missing.npy", "--sigma", "1", "--sampling-prob", "0.1", "--delta", "1e-5"],
     "--norms"),
    # dpis
    (["dpis", "epsilon", "--run", "run.json", "--delta", "2"], "--delta must be in (0, 1)"),
    (["dpis", "calibrate", "--dataset-size", "0", "--batch-size", "8", "--epochs", "1", "--epsilon", "1",
      "--delta", "1e-5"], "--dataset-size must be an integer in [1, inf)"),
    (["dpis", "calibrate", "--dataset-size", "100", "--batch-size", "8", "--epochs", "1", "--epsilon", "1",
      "--delta", "1e-5", "--rejection-k", "0.5"], "--rejection-k must be in [1, inf)"),
    # compare
    (["compare", "--delta", "2"], "--delta must be in (0, 1)"),
    (["compare", "--c-col", "1,-1"], "--c-col entries must be in [0, inf)"),
    (["compare", "--ladder-ratio", "1"], "--ladder-ratio must be in (1, inf)"),
    # sample / merge / plot (their own tables: tests/jobs/test_shards.py)
    (["sample", "--plan", "p", "--sigma", "3"], "--sigma does not apply with --plan"),
    (["sample", "--out", "d", "--sigma", "1", "--epsilon", "1", "--samples", "100", "--chunk-size", "64",
      "--shard", "0", "--num-shards", "3"], "--num-shards must be in [1, chunks=2]"),
    (["sample", "--out", "d", "--sigma", "1", "--epsilon", "1", "--shard", "5", "--num-shards", "2"],
     "--shard must be in [0, 1]"),
    (["merge", "missing"], "missing"),
    (["plot", "missing", "--out", "nodir/p.png"], "--out"),
    # pld (its own table: tests/pld/test_issue19.py)
    (["pld", "epsilon", "--scheme", "gaussian", "--sampling-prob", ".5", "--sigma", "1", "--steps", "3",
      "--delta", "1e-5"], "--sampling-prob does not apply"),
    (["pld", "epsilon", "--scheme", "cyclic-poisson", "--iterations", "64", "--min-sep", "2", "--c-col", "1,1,1",
      "--sampling-prob", "1", "--sigma", "10", "--delta", "1e-5"], "--c-col"),
    # #37: refused before the baselines, the pilot or any write
    (["calibrate", "--below", "1e8"], "--below must be an integer in [0, 417]"),
    (["calibrate", "--plan-only", "--above", "1000"], "--above must be an integer in [0, 417]"),
    (["sample", "--out", "s", "--sigma", "1e-300", "--epsilon", "1", "--samples", "256"], "--sigma must be in [1e-100"),
    # mse-study
    (["mse-study", "--samples", "0"], "--samples must be a whole number in [1, "),
    (["mse-study", "--seed", "-1"], "--seed must be an integer in [0, "),
]


def _run(argv, capsys) -> tuple[int, str]:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse refusals
        rc = e.code
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("argv,needle", CASES, ids=[" ".join(a)[:70] for a, _ in CASES])
def test_bad_input_exits_2_with_one_error_line(argv, needle, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    np.save("norms.npy", np.full((3, 4), 0.5))
    before = sorted(os.listdir(tmp_path))
    rc, err = _run(argv, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert "Traceback" not in err
    assert lines and lines[-1].startswith("error: "), err
    assert sum(ln.startswith("error:") or ": error:" in ln for ln in lines) == 1, err
    assert needle in lines[-1], lines[-1]
    assert "np.float64" not in err
    assert sorted(os.listdir(tmp_path)) == before, "a refused command wrote something"


def test_every_subcommand_has_a_case():
    from mcacct.cli.commands import build_parser
    import argparse
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    covered = {argv[0] for argv, _ in CASES} | {argv[0] for argv, _ in EXTRA_CASES}
    assert set(sub.choices) <= covered, sorted(set(sub.choices) - covered)


#: Cases of the subcommands whose own test files hold their bad-input tables (pld, sample, merge, plot).
EXTRA_CASES: list = []


def test_version(capsys):
    import mcacct
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip() == f"mcacct {mcacct.__version__}"
