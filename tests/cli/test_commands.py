"""The top-level commands of mcacct.cli.commands (calibrate, delta, epsilon): clear one-line errors (exit status 2,
no traceback) for bad input. The default calibration run is checked on the README's run of it
(tests/test_readme_runs.py, ``check_demo_calibration``)."""

import pytest

from mcacct.cli.commands import main


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


def test_too_few_samples_are_refused_before_the_baselines(capsys):
    """The sample budget is arithmetic: too few ``--samples`` is refused before the PLD baselines run (they took
    ~20 s of a cold process before the error)."""
    assert main(["calibrate", "--samples", "10"]) == 2
    err = capsys.readouterr().err
    assert "samples are needed" in err.strip().splitlines()[-1] and "baselines" not in err
