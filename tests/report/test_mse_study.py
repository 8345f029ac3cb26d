"""``mcacct mse-study`` in its smoke form: every cell and calibration reported, the b = E cell of b-min-sep is the
balls-in-bins calibration (ratio <= 1 by construction), a rerun resumes from the cache with identical numbers; the
heatmaps carry their parameters, a labelled colour bar centred at 1 and readable annotations."""

import json
import os

import pytest

from mcacct.cli import main
from mcacct.report.mse_study import QUICK_GRID, SMOKE_GRID


def test_smoke_study_and_resume(tmp_path, capsys):
    out = str(tmp_path / "study")
    assert main(["mse-study", "--smoke", "--out", out, "--no-plot", "--quiet", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    (cell,) = first["cells"]
    assert set(cell["best"]) == {"b-min-sep", "balls-in-bins", "cyclic-poisson"}
    assert cell["ratio_balls_in_bins"] <= 1.0
    methods = {r["method"] for r in first["calibrations"]}
    assert methods == {"b-min-sep", "balls-in-bins", "cyclic-poisson"}
    for r in first["calibrations"]:
        assert r["mse"] == r["error"] * r["sigma"] ** 2
    cached = os.listdir(os.path.join(out, "cache"))
    assert main(["mse-study", "--smoke", "--out", out, "--no-plot", "--quiet", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["cells"] == first["cells"] and sorted(os.listdir(os.path.join(out, "cache"))) == sorted(cached)


def test_grids_respect_bands_and_epoch():
    assert SMOKE_GRID.min_seps(2, 4) == [2, 4]
    assert QUICK_GRID.min_seps(2, 128) == [2, 8, 32, 128]
    assert QUICK_GRID.min_seps(8, 256) == [8, 32, 128, 256]
    assert QUICK_GRID.min_seps(32, 16) == []


def _study() -> dict:
    """A hand-made study: ratios far above and below 1, one cell without a balls-in-bins ratio."""
    cells = [{"epsilon": e, "epoch": E, "best": {}, "ratio_cyclic_poisson": a,
              **({} if b is None else {"ratio_balls_in_bins": b})}
             for (e, E, a, b) in [(1.0, 128, 3.2, 0.9), (1.0, 256, 0.4, 0.5), (8.0, 128, 12.0, None),
                                  (8.0, 256, 1.0, 0.35)]]
    return {"grid": {"iterations": 512, "delta": 1e-5, "bands": [2, 8], "b_step": 2, "samples": None},
            "cells": cells}


def test_heatmaps_are_readable_without_the_code(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure
    from mcacct.report.mse_study import plot_ratios

    seen = []
    orig = Figure.savefig

    def savefig(self, *a, **k):
        ax, cax = self.axes
        im = ax.images[0]
        seen.append({"title": ax.get_title(), "cbar": cax.get_ylabel(), "norm": im.norm, "xlabel": ax.get_xlabel(),
                     "texts": {t.get_text(): t.get_color() for t in ax.texts}})
        return orig(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", savefig)
    paths = plot_ratios(_study(), str(tmp_path / "r"))
    assert [os.path.basename(p) for p in paths] == ["r_cyclic_poisson.png", "r_balls_in_bins.png"]
    assert all(os.path.getsize(p) > 1000 for p in paths)
    cyc, bib = seen
    for fig, name in ((cyc, "cyclic Poisson"), (bib, "balls-in-bins")):
        assert f"MSE(b-min-sep) / MSE({name})" in fig["cbar"] and "< 1: b-min-sep better" in fig["cbar"]
        assert fig["norm"](1.0) == pytest.approx(0.5)
        assert "n = 512" in fig["title"] and "δ = 1e-05" in fig["title"] and "{2, 8}" in fig["title"]
        assert "ε" in fig["xlabel"]
    assert cyc["norm"].vmax >= 12.0  # the largest ratio does not saturate
    assert cyc["texts"]["12.00"] == "white" and cyc["texts"]["1.00"] == "black"
    assert bib["texts"]["n/a"] != "white"
