"""The top-level commands of mcacct.cli.commands (calibrate, delta, epsilon): the default calibration run and
clear one-line errors (exit status 2, no traceback) for bad input."""

import json

import pytest

from mcacct.cli.commands import main


def test_default_calibration_cli(capsys):
    assert main(["calibrate", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] is True
    assert out["overall_delta"] <= out["delta"]
    for key in ("sigma", "base_delta", "epsilon", "num_samples", "candidates"):
        assert key in out
    assert all("sigma" in c for c in out["candidates"])
    base = out["baselines"]
    assert base["poisson_dpsgd_sigma"] > 0 and base["cyclic_poisson_bandmf_sigma"] > 0
    # DP-SGD (no correlation, C = I) needs less noise than BandMF with the same batch size
    assert base["poisson_dpsgd_sigma"] < out["sigma"]


@pytest.mark.parametrize("argv,needle", [
    (["delta", "--sigma", "1", "--epsilon", "1", "--sampling-prob", "0"], "--sampling-prob must be in (0, 1]"),
    (["delta", "--sigma", "1", "--epsilon", "1", "--sampling-prob", "1.5"], "--sampling-prob must be in (0, 1]"),
    (["delta", "--sigma", "1", "--epsilon", "1", "--min-sep", "0", "--sampling-prob", "0.1"], "--min-sep must be an integer in [1, inf)"),
    (["delta", "--sigma", "1", "--epsilon", "1", "--sampling-prob", "0.1", "--c-col", "1,-1"], "--c-col entries must be in [0, inf)"),
    (["delta", "--sigma", "1", "--epsilon", "1", "--sampling-prob", "0.1", "--c-col", "1,nan"], "--c-col entries must be in [0, inf)"),
    (["delta", "--sigma", "1", "--epsilon", "1", "--sampling-prob", "0.1", "--c-col", "1,1,1,1,1",
      "--min-sep", "4"], "--min-sep"),
    (["delta", "--sigma", "0", "--epsilon", "1", "--sampling-prob", "0.1"], "--sigma must be in (0, inf)"),
    (["delta", "--sigma", "1", "--epsilon", "-1", "--sampling-prob", "0.1"], "--epsilon must be in [0, inf)"),
    (["epsilon", "--sigma", "1", "--delta", "1.5", "--sampling-prob", "0.1"], "--delta must be in (0, 1)"),
    (["calibrate", "--delta", "0"], "--delta must be in (0, 1)"),
    (["calibrate", "--samples", "10"], "samples are needed"),
    (["calibrate", "--batch-size", "600", "--dataset-size", "1000", "--min-sep", "2"], "--batch-size must be in (0, dataset size / min-sep] = (0, 500]"),
])
def test_bad_input_clear_error(argv, needle, capsys):
    try:
        rc = main(argv + ["--quiet"])
    except SystemExit as e:  # range types refuse at parse time, after argparse's usage lines
        rc = e.code
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert rc == 2 and last.startswith("error:") and needle in last and "Traceback" not in err
