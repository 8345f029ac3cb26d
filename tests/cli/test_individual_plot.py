"""``mcacct individual --plot``: the histogram's title carries δ, σ, q and the run's shape; wide ranges of
epsilon get a log axis (issue 23, item 6)."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from helpers import capture_saved_figures  # noqa: E402
from mcacct.cli.individual import _plot, individual_title  # noqa: E402


@pytest.fixture
def captured(monkeypatch):
    """Title, axis labels, scale and legend of every figure saved."""
    return capture_saved_figures(monkeypatch, lambda ax: {
        "title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(), "xscale": ax.get_xscale(),
        "legend": [t.get_text() for t in ax.get_legend().get_texts()]})


def test_title_carries_delta_sigma_q_and_shape():
    t = individual_title(1e-5, 1.5, 0.01, 1000, 250, 2.0, 100)
    for part in ("δ = 1e-05", "σ = 1.5", "q = 0.01", "1,000 steps", "250 examples", "C = 2", "100 ratio buckets"):
        assert part in t


def test_title_and_axis_say_what_the_json_says(tmp_path, captured):
    """The JSON's ``accountant_kind`` decides the word: approximative (not a guarantee) or rigorous upper bounds;
    never "upper bounds" for an approximative result."""
    approx = individual_title(1e-5, 1.0, 0.01, 100, 30, 1.0, 100, "approximative")
    assert "approximative, not a guarantee" in approx and "upper bound" not in approx
    assert individual_title(1e-5, 1.0, 0.01, 100, 30, 1.0, 100) == approx  # the CLI's default case
    for kind in ("fixed", "gdp"):
        assert "(rigorous upper bounds)" in individual_title(1e-5, 1.0, 1.0, 100, 30, 1.0, 100, kind)
    eps = np.linspace(0.1, 0.5, 30)
    _plot(str(tmp_path / "a.png"), eps, 1.0, approx, "approximative")
    _plot(str(tmp_path / "f.png"), eps, 1.0, approx, "fixed")
    a, f = captured
    assert "approximative" in a["xlabel"] and "upper bound" not in a["xlabel"] and "upper bound" in f["xlabel"]


def test_histogram_labels_and_log_axis_for_wide_ranges(tmp_path, captured):
    rng = np.random.default_rng(0)
    title = individual_title(1e-5, 1.0, 0.01, 100, 300, 1.0, 100)
    _plot(str(tmp_path / "lin.png"), rng.gamma(3.0, 0.3, 300), 2.5, title)
    wide = np.concatenate([10 ** rng.uniform(-4, 0.5, 300), np.zeros(3)])
    _plot(str(tmp_path / "log.svg"), wide, 3.2, title)
    lin, log = captured
    assert lin["title"] == title and lin["xscale"] == "linear" and "ε" in lin["xlabel"] and lin["ylabel"]
    assert any(s.startswith("worst case") for s in lin["legend"]) and any(s.startswith("median") for s in lin["legend"])
    assert log["xscale"] == "log" and "3 at ε = 0 not shown" in log["legend"][0]
    assert (tmp_path / "lin.png").stat().st_size > 1000 and (tmp_path / "log.svg").stat().st_size > 1000
