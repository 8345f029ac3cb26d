"""Issue #41: one JSON schema for every ``--json`` report (docs/json.md).

Every subcommand's ``--json`` output parses as strict JSON (``Infinity``/``NaN`` refused), carries the schema
version and the common keys, spells them one way in every object (``notes`` a list beside the deprecated ``note``,
``certified_by``/``certified`` beside the deprecated ``verified``, ``scheme`` an object named by the registry), has
the device fields where Monte Carlo samples are drawn, and encodes a non-finite number as ``null`` listed in
``nonfinite``. Cheap: the Monte Carlo commands run a tiny balls-in-bins problem (one program, shared with
``tests/cli/test_crashes.py``); the PLD, individual, compare and mse-study computations are replaced by canned
results of the library's own types (their numbers are tested elsewhere), so the command-line code and the schema
run as they are.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from mcacct.cli import main
from mcacct.report.schema import COMMON_KEYS, DEVICE_KEYS, SCHEMA, json_text, report
from mcacct.schemes import registry

ROOT = Path(__file__).resolve().parents[2]
BIB = ["--scheme", "balls-in-bins", "--bins", "2", "--iterations", "4", "--c-col", "1"]
MC = ["--samples", "256", "--chunk-size", "256", "--quiet"]
#: Commands that draw Monte Carlo samples: their reports carry the device fields.
SAMPLING = {"calibrate", "delta", "epsilon", "sample", "compare", "mse-study"}
#: Commands that state a privacy bound: their reports carry ``certified``.
BOUNDS = {"delta", "epsilon", "merge", "plot", "pld epsilon", "pld delta", "pld calibrate", "individual",
          "dpis epsilon", "dpis calibrate"}


def _refuse(name):
    raise ValueError(f"not strict JSON: {name}")


def _run(argv, capsys) -> dict:
    rc = main(argv + ["--json"])
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out, parse_constant=_refuse)


def _resolve(doc, pointer: str):
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        doc = doc[int(token)] if isinstance(doc, list) else doc[token]
    return doc


def _objects(doc):
    """Every object of a report, the report first (not the maps ``nonfinite`` and ``deprecated``, keyed by
    pointers and old keys)."""
    if isinstance(doc, dict):
        yield doc
        for k, v in doc.items():
            if k not in ("nonfinite", "deprecated"):
                yield from _objects(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _objects(v)


def check_report(got: dict, command: str) -> dict:
    """The schema's promises for one report of ``command``."""
    assert list(got)[:3] == ["schema", "command", "mcacct_version"] and got["schema"] == SCHEMA, list(got)[:3]
    assert got["command"] == command
    for key in COMMON_KEYS + ("seconds", "compile_seconds"):
        assert key in got, (command, key)
    assert isinstance(got["notes"], list) and all(isinstance(n, str) for n in got["notes"])
    for pointer, name in got["nonfinite"].items():  # every one listed is a null of the document
        assert name in ("inf", "-inf", "nan") and _resolve(got, pointer) is None, (pointer, name)
    if command in SAMPLING:
        assert all(k in got for k in DEVICE_KEYS) and got["devices"] >= 1 and got["platform"], command
    if command in BOUNDS:
        assert isinstance(got["certified"], bool), command
    seen = set()
    for obj in _objects(got):
        seen |= set(obj)
        if "note" in obj:  # the deprecated string beside its list
            assert isinstance(obj["notes"], list) and obj["note"] in ("", None, "; ".join(obj["notes"])), obj
        if "verified" in obj:
            assert obj["certified_by"] in ("monte-carlo", "top-candidate", "pld") and obj["certified"] is True
        if isinstance(obj.get("scheme"), dict) and "name" in obj["scheme"]:
            assert obj["scheme"]["name"] in registry.names() and "label" in obj["scheme"]
    assert set(got["deprecated"]) <= seen and set(got["deprecated"]) <= {"note", "verified", "mu", "epsilon_gdp"}
    return got


def test_monte_carlo_commands(tmp_path, capsys):
    got = check_report(_run(["delta", "--sigma", "2", "--epsilon", "1", *BIB, *MC], capsys), "delta")
    assert got["certified"] is True and got["notes"] == [] and "note" not in got and got["deprecated"] == {}
    assert got["scheme"] == {**got["scheme"], "name": "balls-in-bins", "label": "balls-in-bins"}
    shards = str(tmp_path / "s")
    got = check_report(_run(["sample", "--out", shards, "--sigma", "2", "--epsilon", "1", *BIB, *MC], capsys),
                       "sample")
    assert got["complete"] is True
    got = check_report(_run(["merge", shards], capsys), "merge")
    assert got["certified"] is True and got["notes"] == [] and got["scheme"]["name"] == "balls-in-bins"
    pytest.importorskip("matplotlib")
    got = check_report(_run(["plot", shards, "--out", str(tmp_path / "d.png"), "--points", "5"], capsys), "plot")
    assert got["floor"] == 0.5 / 256 and len(got["epsilon"]) == 5


def test_an_infinite_epsilon_is_null_listed_in_nonfinite(capsys):
    got = check_report(_run(["epsilon", "--sigma", "0.3", "--delta", "1e-3", *BIB, *MC], capsys), "epsilon")
    assert got["epsilon_upper"] is None and got["nonfinite"] == {"/epsilon_upper": "inf"}
    assert "loss histogram" in got["epsilon_upper_reason"] and got["certified"] is False
    assert "infinite" in got["notes"][-1] and got["note"] == "; ".join(got["notes"])
    assert got["deprecated"]["note"].startswith("use notes")
    assert math.isinf(float(got["nonfinite"]["/epsilon_upper"]))  # the name reads back as a float


def test_the_encoding_of_inf_and_nan_anywhere():
    text = json_text(report("x", {"a": math.inf, "b": [1.0, -math.inf, np.float64(np.nan)], "c/d": {"e~": math.nan},
                                  "f": np.array([np.inf, 2.0]), "g": np.float32(0.5), "notes": ("why",)}))
    got = json.loads(text, parse_constant=_refuse)
    assert got["nonfinite"] == {"/a": "inf", "/b/1": "-inf", "/b/2": "nan", "/c~1d/e~0": "nan", "/f/0": "inf"}
    assert got["a"] is None and got["b"] == [1.0, None, None] and got["f"] == [None, 2.0] and got["g"] == 0.5
    assert got["a_reason"] == "not a finite number (+inf)" and got["notes"] == ["why"] and got["note"] == "why"
    for pointer in got["nonfinite"]:
        assert _resolve(got, pointer) is None


def test_old_spellings_are_read_and_kept_one_version():
    cal = {"sigma": 1.2, "verified": False, "note": "", "top_certifier": "gaussian-worst-case-sensitivity",
           "rows": [{"scheme": "b-min-sep", "verified": True, "note": "a; b"}, {"scheme": "nope"}]}
    got = report("calibrate", cal)
    assert got["certified_by"] == "top-candidate" and got["certified"] is True and got["notes"] == []
    assert got["verified"] is False and got["note"] == ""  # the old keys as they were
    row = got["rows"][0]
    assert row["scheme"] == {"name": "bminsep", "label": "b-min-sep"} and row["certified_by"] == "monte-carlo"
    assert row["notes"] == ["a; b"] and got["rows"][1]["scheme"] == "nope"  # an unknown name is left alone
    assert set(got["deprecated"]) == {"note", "verified"} and cal["rows"][0]["scheme"] == "b-min-sep"  # a copy
    assert report("calibrate", got) == got  # reporting a report again changes nothing
    exact = report("calibrate", {"method": "pld", "verified": True})
    assert exact["certified_by"] == "pld" and exact["certified"] is True
    new = report("calibrate", {"certified_by": "monte-carlo", "notes": ["x", "y"]})
    assert new["verified"] is True and new["note"] == "x; y"
    # individual's renames are its own: a `mu` of another report is left alone
    assert "mu_full_batch" not in report("pld epsilon", {"mu": 1.0})
    assert report("individual", {"mu": [1.0]})["mu_full_batch"] == [1.0]


def test_commands_without_sampling(tmp_path, capsys):
    check_report(_run(["calibrate", "--plan-only", "--sigmas", "1e-10,100", "--no-baselines", "--iterations", "8",
                       "--min-sep", "2", "--sampling-prob", "0.2", "--c-col", "1", "--quiet"], capsys), "calibrate")
    check_report(_run(["strategy", "--iterations", "8", "--c-col", "1,0.5"], capsys), "strategy")
    run = str(ROOT / "examples" / "dpis_run.json")
    got = check_report(_run(["dpis", "epsilon", "--run", run, "--delta", "1e-5", "--accountant", "rdp", "--quiet"],
                            capsys), "dpis epsilon")
    assert got["certified"] is False and "fixed in advance" in got["notes"][0]  # realized values: not a guarantee
    got = check_report(_run(["dpis", "calibrate", "--dataset-size", "1000", "--batch-size", "10", "--epochs", "2",
                             "--epsilon", "2", "--delta", "1e-5", "--accountant", "rdp", "--sigma-n", "0",
                             "--sigma-k", "0", "--quiet"], capsys), "dpis calibrate")
    assert got["certified"] is True and got["paper_rdp"]["notes"]


def _pld_result(**kw):
    from mcacct.pld import PLDResult
    base = dict(epsilon=1.0, delta=1e-6, epsilon_remove=1.0, epsilon_add=0.9, delta_remove=1e-6, delta_add=5e-7,
                infinity_mass=0.0, tail_mass_bound=0.0, error_estimate=math.nan, value_discretization_interval=1e-4,
                discretization="connect_dots", compositions=10, fft_size=1024)
    return PLDResult(**{**base, **kw})


def test_pld_commands(monkeypatch, tmp_path, capsys):
    from mcacct import pld
    monkeypatch.setattr(pld, "pld_delta", lambda spec, eps, **k: _pld_result(epsilon=eps))
    monkeypatch.setattr(pld, "pld_epsilon", lambda spec, dl, **k: _pld_result(delta=dl))
    monkeypatch.setattr(pld, "pld_calibrate", lambda spec, eps, dl, **k: 1.5)
    monkeypatch.setattr(pld, "events_epsilon", lambda evs, dl, **k: pld.EventsResult(
        2.0, dl, 2.0, 1.5, dl, dl, 0.0, math.nan, 1e-4, "connect_dots", ({"mechanism": "gaussian", "count": 1},)))
    gauss = ["--scheme", "gaussian", "--steps", "2", "--quiet"]
    got = check_report(_run(["pld", "delta", *gauss, "--sigma", "5", "--epsilon", "1"], capsys), "pld delta")
    assert got["certified"] is True and got["error_estimate"] is None and got["nonfinite"] == {"/error_estimate": "nan"}
    check_report(_run(["pld", "epsilon", *gauss, "--sigma", "5", "--delta", "1e-5"], capsys), "pld epsilon")
    got = check_report(_run(["pld", "calibrate", *gauss, "--epsilon", "1", "--delta", "1e-5"], capsys), "pld calibrate")
    assert got["sigma"] == 1.5 and got["mechanism"]["sigma"] == 1.5
    events = tmp_path / "events.json"
    events.write_text(json.dumps([{"mechanism": "gaussian", "sigma": 2.0, "count": 1}]))
    got = check_report(_run(["pld", "epsilon", "--events", str(events), "--delta", "1e-5", "--quiet"], capsys),
                       "pld epsilon")
    assert got["events"] == [{"mechanism": "gaussian", "count": 1}] and got["error_estimate"] is None


def test_individual_names_its_quantities(monkeypatch, tmp_path, capsys):
    from mcacct.individual import accountant, gdp
    labels = accountant.ACCOUNTANT_LABELS
    res = accountant.IndividualResult(np.array([0.1, 0.2]), None, np.array([1.0, 2.0]), 0.5, math.nan, 1e-12, 1024,
                                      10, labels["approximative"])
    monkeypatch.setattr(accountant, "individual_epsilons", lambda *a, **k: res)
    monkeypatch.setattr(gdp, "gdp_epsilon", lambda mu, delta: np.asarray(mu) * 3.0)
    norms = tmp_path / "n.npy"
    np.save(norms, np.array([[0.5, 1.0], [0.1, 0.3]]))
    argv = ["individual", "--norms", str(norms), "--sigma", "1", "--delta", "1e-5", "--quiet"]
    got = check_report(_run(argv + ["--sampling-prob", "0.5", "--no-bucketing-bound"], capsys), "individual")
    assert got["certified"] is False and got["accountant_kind"] == "approximative"
    assert got["notes"][0].startswith("epsilon is approximative") and "not of this run" in got["notes"][1]
    assert got["mu_full_batch"] == got["mu"] == [1.0, 2.0] and got["epsilon_full_batch"] == [3.0, 6.0]
    assert "epsilon_gdp" not in got and got["nonfinite"] == {"/bucketing_bound": "nan"}
    monkeypatch.setattr(accountant, "individual_epsilons", lambda *a, **k: res._replace(accountant=labels["gdp"]))
    got = check_report(_run(argv + ["--sampling-prob", "1"], capsys), "individual")
    assert got["certified"] is True and got["epsilon_gdp"] == got["epsilon_full_batch"] and got["notes"] == []


def test_compare_and_mse_study(monkeypatch, tmp_path, capsys):
    import mcacct.cli.compare as cli_compare
    import mcacct.cli.mse_study as cli_mse
    rows = [{"scheme": "b-min-sep", "params": {}, "sigma": 0.8, "verified": True, "overall_delta": 9e-4,
             "top_sigma": 1.2, "num_samples": 1000, "note": "", "seconds": 1.0, "sigma_pld": None,
             "pld_note": "no PLD analysis for this scheme"}]
    monkeypatch.setattr(cli_compare, "compare_schemes", lambda *a, **k: {
        "epsilon": 2.0, "delta": 1e-3, "iterations": 64, "min_sep": 4, "expected_batch_size": 32.0,
        "dataset_size": 1024, "rows": rows, "skipped": [{"scheme": "balls-in-bins", "reason": "bins"}]})
    got = check_report(_run(["compare", "--c-col", "1", "--quiet"], capsys), "compare")  # no C to fit
    assert got["rows"][0]["scheme"] == {"name": "bminsep", "label": "b-min-sep"}
    assert got["rows"][0]["certified_by"] == "monte-carlo" and got["skipped"][0]["scheme"]["name"] == "balls-in-bins"
    study = {"grid": {"iterations": 16}, "cells": [{"epsilon": 2.0, "epoch": 4, "best": {}}],
             "calibrations": [{"method": "b-min-sep", "sigma": 1.9, "verified": True},
                              {"method": "cyclic-poisson", "sigma": 1.7, "verified": True, "certified_by": "pld"}]}
    monkeypatch.setattr(cli_mse, "run_study", lambda *a, **k: json.loads(json.dumps(study)))
    out = tmp_path / "study"
    got = check_report(_run(["mse-study", "--smoke", "--out", str(out), "--no-plot", "--quiet"], capsys), "mse-study")
    assert [c["certified_by"] for c in got["calibrations"]] == ["monte-carlo", "pld"]
    written = json.loads((out / "study.json").read_text(), parse_constant=_refuse)  # the file: the same schema
    assert {k: v for k, v in written.items() if k not in ("seconds", "compile_seconds")} == \
        {k: v for k, v in got.items() if k not in ("seconds", "compile_seconds")}
