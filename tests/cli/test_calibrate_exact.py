"""``mcacct calibrate`` sends a scheme with an exact PLD to the PLD accountant (issue #41, ``--method``)."""

from __future__ import annotations

import json

import pytest

from mcacct import pld
from mcacct.cli.commands import main

POISSON = ["--min-sep", "1", "--sampling-prob", "0.02", "--iterations", "200", "--epsilon", "2", "--delta", "1e-5"]


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's refusals
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_min_sep_one_is_calibrated_by_the_pld_accountant(capsys):
    rc, out, _ = _run(["calibrate", *POISSON, "--json", "--quiet"], capsys)
    assert rc == 0
    res = json.loads(out)
    spec = pld.PoissonGaussianSpec(0.02, 1.0, steps=200, sensitivity=1.0)
    assert res["method"] == "pld" and res["sigma"] == pld.pld_calibrate(spec, 2.0, 1e-5)
    assert res["overall_delta"] <= 1e-5 and res["num_samples"] == 0 and res["verified"] is True
    assert res["mechanism"]["type"] == "PoissonGaussianSpec" and res["mechanism"]["sigma"] == res["sigma"]


@pytest.mark.parametrize("argv,needle", [
    (["calibrate", *POISSON, "--samples", "1000"], "--samples does not apply to a scheme with an exact PLD"),
    (["calibrate", *POISSON, "--plan-only"], "add --method monte-carlo"),
    (["calibrate", "--method", "pld", "--sampling-prob", "0.02", "--iterations", "20"],
     "--method pld needs a scheme with an exact PLD"),
    (["calibrate", "--method", "exact"], "invalid choice"),
])
def test_refusals_name_the_method(argv, needle, capsys):
    rc, _, err = _run(argv + ["--quiet"], capsys)
    assert rc == 2 and needle in err and "Traceback" not in err
