"""``mcacct strategy``: JSON output, evaluation of a given c_col, clear errors (exit 2)."""

import json

import numpy as np

import pytest

from mcacct.cli import main


def test_strategy_json(capsys):
    assert main(["strategy", "--iterations", "64", "--bands", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["iterations"] == 64 and out["bands"] == 4 and len(out["c_col"]) == 4
    assert np.linalg.norm(out["c_col"]) == np.float64(1.0) or abs(np.linalg.norm(out["c_col"]) - 1) < 1e-12
    assert 0 < out["error"] < 65 / 2 and out["seconds"] > 0


def test_strategy_evaluates_a_given_c_col(capsys):
    assert main(["strategy", "--iterations", "9", "--c-col", "1", "--objective", "max", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["error"] == 9.0


def test_strategy_bad_input_exit_2(capsys):
    assert main(["strategy", "--iterations", "8", "--bands", "9"]) == 2
    assert "bands" in capsys.readouterr().err
    assert main(["strategy", "--iterations", "8"]) == 2
    with pytest.raises(SystemExit) as exc:  # refused by the parser's --c-col type
        main(["strategy", "--iterations", "8", "--c-col", "1,x"])
    assert exc.value.code == 2 and "--c-col" in capsys.readouterr().err
