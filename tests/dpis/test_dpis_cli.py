"""``mcacct dpis epsilon|calibrate`` (mcacct.cli.dpis), through a parser built here."""

import argparse
import json

import pytest

from mcacct.cli.dpis import add_dpis_parser, expand_kappas

RUN = {"n_tilde": 6000.0, "batch_size": 60, "clip": 1.0, "sigma_n": 120, "sigma_k": 120, "rejection_k": 5,
       "iterations_per_epoch": 100,
       "epochs": [{"iterations": 100, "k_tilde": 6000.0, "sigma_g": 1.0},
                  {"iterations": 100, "k_tilde": 3000.0, "sigma_g": 0.8, "clip": 1.0}]}


def _call(argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command")
    add_dpis_parser(sub)
    args = p.parse_args(argv)
    return args.func(args)


def test_epsilon_smoke(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(RUN))
    out = _call(["dpis", "epsilon", "--run", str(path), "--delta", "1e-5", "--no-error-estimate",
                 "--value-discretization-interval", "1e-3"])
    assert 0 < out["epsilon_pld"] < out["epsilon_rdp"]
    assert out["iterations"] == 200 and len(out["events"]) == 4
    assert out["events"][0] == {"mechanism": "gaussian", "sigma": 120.0, "sensitivity": 1.0, "steps": 1, "count": 1}
    text = capsys.readouterr().out
    assert "PLD epsilon" in text and "RDP epsilon" in text
    rdp_only = _call(["dpis", "epsilon", "--run", str(path), "--delta", "1e-5", "--accountant", "rdp", "--json"])
    assert "epsilon_pld" not in rdp_only and rdp_only["epsilon_rdp"] == out["epsilon_rdp"]
    json.dumps(rdp_only)


def test_calibrate_smoke(capsys):
    out = _call(["dpis", "calibrate", "--dataset-size", "6000", "--batch-size", "60", "--epochs", "4",
                 "--epsilon", "2", "--delta", "1e-5", "--kappas", "1,0.5", "--rejection-k", "5", "--clip", "0.1",
                 "--accountant", "rdp"])
    assert out["kappas"] == [1.0, 1.0, 0.5, 0.5]
    assert out["rdp"]["epsilon"] <= 2.0 and len(out["rdp"]["sigma_g"]) == 4
    assert out["k_tilde_floors"] == pytest.approx([600.0, 600.0, 300.0, 300.0])
    assert out["paper_rdp"]["guarantee"] and len(out["paper_rdp"]["sigma_g"]) == 4
    assert out["rdp"]["sigma_n"] == out["rdp"]["sigma_k"] == 120.0    # default 0.02 N
    text = capsys.readouterr().out
    assert "DPIS noise plan" in text and "paper RDP" in text
    json.dumps(out)
    none = _call(["dpis", "calibrate", "--dataset-size", "6000", "--batch-size", "60", "--epochs", "2",
                  "--epsilon", "2", "--delta", "1e-5", "--sigma-n", "0", "--sigma-k", "0", "--accountant", "rdp",
                  "--json"])
    assert none["rdp"]["sigma_n"] is None and none["rdp"]["sigma_g"][0] < out["rdp"]["sigma_g"][0]


@pytest.mark.parametrize("edit,match", [
    (lambda d: d["epochs"][1].update(k_tilde=100.0), "epochs\\[1\\]: k_tilde must be >= rejection_k"),
    (lambda d: d["epochs"][0].update(sigma_g="x"), "epochs\\[0\\].sigma_g must be a finite number"),
    (lambda d: d.pop("clip"), "clip is required"),
])
def test_bad_run_file_raises_value_error_naming_the_entry(tmp_path, edit, match):
    data = json.loads(json.dumps(RUN))
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=match):
        _call(["dpis", "epsilon", "--run", str(path), "--delta", "1e-5"])
    with pytest.raises(SystemExit):  # refused by the parser's range type, before the file is read
        _call(["dpis", "epsilon", "--run", str(path), "--delta", "2"])


def test_kappa_expansion():
    assert expand_kappas("1,0.5", 4) == (1.0, 1.0, 0.5, 0.5)
    assert expand_kappas("0.7", 3) == (0.7, 0.7, 0.7)
    with pytest.raises(ValueError, match="kappas must hold"):
        expand_kappas("1,0.5", 3)
