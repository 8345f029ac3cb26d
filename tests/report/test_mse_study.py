"""``mcacct mse-study`` in its smoke form: every cell and calibration reported, the b = E cell of b-min-sep is the
balls-in-bins calibration (ratio <= 1 by construction), a rerun resumes from the cache with identical numbers."""

import json
import os

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
