"""``mcacct.report.plot``: the plotted estimate and its band share one floor and stay ordered (issue 19, item 11)."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from helpers import capture_saved_figures  # noqa: E402
from mcacct.statistics.accumulators import DirectionStats, HistogramSpec  # noqa: E402
from mcacct.report.plot import delta_band, plot_delta_curve  # noqa: E402


def _stats(seed: int, n: int = 1000) -> DirectionStats:
    """Statistics of ``n`` losses spread over (0, 6] (and some at or below 0), without running a kernel."""
    spec = HistogramSpec()
    rng = np.random.default_rng(seed)
    loss = rng.exponential(0.8, n) - 0.3
    hist = np.zeros(spec.bins + 2, np.int64)
    np.add.at(hist, np.clip(np.ceil(loss / spec.width), 0, spec.bins + 1).astype(np.int64), 1)
    return DirectionStats((1.0,), spec, n, [0], hist)


@pytest.fixture
def captured(monkeypatch):
    """The lines and bands of every figure saved, read just before it is written."""
    return capture_saved_figures(monkeypatch, lambda ax: {
        "lines": {ln.get_label(): np.asarray(ln.get_ydata(), float) for ln in ax.get_lines()},
        "bands": [c for c in ax.collections], "legend": [t.get_text() for t in ax.get_legend().get_texts()],
        "ylabel": ax.get_ylabel()})


def test_plotted_estimate_is_floored_like_its_band(tmp_path, captured):
    stats = {"remove": _stats(1), "add": _stats(2)}
    res = plot_delta_curve(stats, str(tmp_path / "d.png"), epsilon_max=6.0, points=61)
    floor = 0.5 / 1000
    raw = delta_band(stats, res["epsilon"], 0.01)
    assert raw["delta_estimate"][-1] < floor  # the case of the audit: the estimate falls below the floor
    (fig,) = captured
    est = next(v for k, v in fig["lines"].items() if k.startswith(r"$\hat\delta"))
    assert np.all(np.isfinite(est)) and np.all(est >= floor)
    lo, hi = np.maximum(raw["delta_lower"], floor), np.maximum(raw["delta_upper"], floor)
    np.testing.assert_array_equal(est, np.maximum(raw["delta_estimate"], floor))
    assert np.all(lo <= est) and np.all(est <= hi)
    for d in stats:  # the per-direction curves are floored the same way
        y = fig["lines"][f"{d} direction"]
        assert np.all(np.isfinite(y)) and np.all(y >= floor)
    # the floor is a labelled dashed line, named as the resolution with N the samples (the title's n is the
    # iterations), not a curve that reads as data
    (label,) = [t for t in fig["legend"] if t.startswith("resolution floor")]
    assert "0.5/N" in label and "N = 1,000 samples per direction" in label and "0.5/n" not in fig["ylabel"]
    np.testing.assert_array_equal(fig["lines"][label], [floor, floor])
    assert res["floor"] == floor


def test_band_carries_the_systematic_term_like_the_marks():
    stats = {"remove": _stats(1), "add": _stats(2)}
    eps = np.linspace(0.0, 3.0, 7)
    plain = delta_band(stats, eps, 0.01)
    shifted = delta_band(stats, eps, 0.01, systematic=1e-3)
    np.testing.assert_allclose(shifted["delta_upper"], np.minimum(plain["delta_upper"] + 1e-3, 1.0))
    np.testing.assert_allclose(shifted["delta_lower"], np.maximum(plain["delta_lower"] - 1e-3, 0.0))
    np.testing.assert_array_equal(shifted["delta_estimate"], plain["delta_estimate"])


def test_curve_title_carries_the_parameters():
    import mcacct
    from mcacct.report.plot import curve_title

    t = curve_title("b-min-sep", mcacct.BMinSep(0.004, 8, 1024), 1.25, 20000, ("remove", "add"), True)
    assert t == "b-min-sep: σ = 1.25, n = 1024, b = 8, q = 0.004, 20,000 samples/direction"
    one = curve_title("cyclic-poisson", mcacct.CyclicPoisson(0.5, 4, 16), 1.0, 100, ("add",), False)
    assert "b = 4" in one and "q = 0.5" in one
    assert one.endswith("add direction only: not a certificate of the mechanism")
    f32 = curve_title("balls-in-bins", mcacct.BallsInBins(4, 16), 1.0, 100, ("remove", "add"), False)
    assert "b = 4" in f32 and f32.endswith("float32 kernel: not a privacy certificate")


def test_axes_say_what_they_show(tmp_path, captured):
    plot_delta_curve({"remove": _stats(1)}, str(tmp_path / "d.svg"), epsilon_max=3.0, points=11, alpha=0.05)
    (fig,) = captured
    assert "remove direction" in fig["legend"] and any("95% band" in t for t in fig["legend"])
