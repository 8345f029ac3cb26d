"""`calibrate --plan-only` runs no pilot unless asked (a bounded probe instead); every command's JSON carries
`seconds` (its wall time) and `compile_seconds`."""

import json

import pytest

from mcacct.cli import main
from mcacct.statistics import confidence as bounds

FLAGS = ["--iterations", "16", "--min-sep", "2", "--sampling-prob", "0.2", "--c-col", "0.6,0.4", "--epsilon", "1",
         "--delta", "5e-2", "--chunk-size", "512"]


def test_plan_only_estimates_without_a_pilot(capsys):
    assert main(["calibrate", "--plan-only", "--json", "--quiet", *FLAGS]) == 0
    out = json.loads(capsys.readouterr().out)
    s, base = bounds.sample_budget(5e-2 * 0.99)
    assert out["pilot_ran"] is False and out["cost"]["num_samples"] == s and out["cost"]["base_delta"] == base
    assert out["total_samples"] == out["cost"]["pilot_samples"] + -(-s // 512) * 512
    assert out["expected_seconds_at_most"]["total"] > 0 and "no pilot ran" in out["note"]
    assert out["seconds"] >= out["compile_seconds"] > 0


def test_plan_only_human_output_states_the_cost(capsys):
    assert main(["calibrate", "--plan-only", "--quiet", *FLAGS]) == 0
    text = capsys.readouterr().out
    assert "cost:" in text and "draws/s" in text and "pilot ~" in text


@pytest.mark.parametrize("argv, needle", [
    (["calibrate", "--plan-only", "--out", "somewhere"], "add --pilot"),
    (["calibrate", "--pilot"], "--pilot goes with --plan-only"),
    (["calibrate", "--plan-only", "--pilot", "--sigmas", "1,2"], "exclude each other"),
])
def test_plan_flag_refusals(argv, needle, capsys, tmp_path):
    argv = [str(tmp_path / a) if a == "somewhere" else a for a in argv]
    assert main(argv + ["--quiet", *FLAGS]) == 2
    assert needle in capsys.readouterr().err


def test_pld_reports_wall_seconds_and_its_stage(capsys):
    argv = ["pld", "delta", "--sampling-prob", "0.5", "--steps", "3", "--sigma", "1", "--epsilon", "1",
            "--value-discretization-interval", "0.01", "--no-error-estimate", "--json"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert out["delta"] > 0 and out["seconds"] > 0 and "compile_seconds" in out
    assert "pld delta: FFT accounting" in cap.err
    assert main([*argv, "--quiet"]) == 0 and capsys.readouterr().err == ""
