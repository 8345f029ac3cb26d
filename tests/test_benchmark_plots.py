"""The benchmarks' figures, drawn from hand-made results (no benchmark run): titles with the parameters,
labelled log axes, one legend entry per series (issue 23, item 6)."""

import importlib.util
import os

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def captured(monkeypatch):
    seen = []
    orig = Figure.savefig

    def savefig(self, *a, **k):
        seen.append([{"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                      "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
                      "legend": [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else []}
                     for ax in self.axes if ax.get_visible()] + [self.get_suptitle()])
        return orig(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return seen


def _rate(v: float) -> dict:
    return {"samples_per_s": v, "compile_s": 1.0}


THROUGHPUT = {
    "device": "cpu:cpu", "jax": "0.0", "sigma": 1.0, "c_col": "ones(b)/sqrt(b)", "chunk_size": 4096,
    "statistic": "median", "repeats": 3,
    "results": [{"config": "n1024_b8", "iterations": 1024, "min_sep": 8, "sampling_prob": 0.004,
                 "mcacct_float64": _rate(4e4), "noise_only": _rate(7e4), "reference": _rate(1e4)},
                {"config": "n7200_b256", "iterations": 7200, "min_sep": 256, "sampling_prob": 1.25e-4,
                 "mcacct_float64": _rate(4e3), "mcacct_float64_fft": _rate(3e3), "reference": _rate(1.6e3)}],
    "scaling": [{"sweep": "n", "iterations": n, "min_sep": 8, "samples_per_s": 7e7 / n} for n in (256, 1024, 4096)]
    + [{"sweep": "b", "iterations": 1024, "min_sep": b, "samples_per_s": 1.4e4} for b in (1, 16, 256)]
    + [{"sweep": "chunk", "chunk_size": c, "iterations": 1024, "min_sep": 8, "samples_per_s": 1.6e4}
       for c in (256, 4096)],
}


def test_throughput_plot(tmp_path, captured):
    tp = _load("throughput_plot")
    path = tp.plot_throughput(THROUGHPUT, str(tmp_path / "t.png"))
    assert os.path.getsize(path) > 1000
    (axes,) = captured
    bars, *sweeps, suptitle = axes
    assert "σ = 1" in suptitle and "chunk 4,096" in suptitle and "median of 3 runs" in suptitle
    assert "vs jax-privacy NumPy reference" in suptitle
    assert bars["yscale"] == "log" and "samples / s" in bars["ylabel"] and bars["xlabel"]
    assert bars["legend"] == ["mcacct, float64", "mcacct, float64, FFT products",
                              "noise-only ceiling (normal draws only)", "jax-privacy NumPy reference"]
    assert len(sweeps) == 3 and all(s["xscale"] == "log" and s["yscale"] == "log" for s in sweeps)
    assert [s["title"] for s in sweeps] == ["n sweep (b = 8)", "b sweep (n = 1024)", "chunk sweep (n = 1024, b = 8)"]
    # the command-line path redraws a PNG next to its JSON
    import json
    src = tmp_path / "throughput_x.json"
    src.write_text(json.dumps({**THROUGHPUT, "scaling": []}))
    assert tp.main([str(src)]) == 0 and (tmp_path / "throughput_x.png").stat().st_size > 1000


def test_accelerator_plot(tmp_path, captured):
    acc = _load("accelerator")
    table = {"n64_b8": {"iterations": 64, "min_sep": 8, "sampling_prob": 0.03,
                        "single": {"unfused_f64": {"samples_per_s": 1e6}, "unfused_f32": {"error": "boom"}},
                        "ladder": {"unfused_f64": {"draws_per_s": 5e5}, "fused_f64": {"refused": "no"}}}}
    data = {"device_kind": "TestChip", "jax": "0.0",
            "parts": {"throughput": {"settings": {"sigma": 1.0, "ladder": [0.8, 1.0], "seconds": 0.2,
                                                  "quick": True, "chunk_size": 0}, "table": table}}}
    assert acc.plot_throughput(data, str(tmp_path / "a.png")) == str(tmp_path / "a.png")
    ((ax, _),) = captured
    assert "TestChip" in ax["title"] and "σ = 1" in ax["title"] and "{0.8, 1}" in ax["title"]
    assert ax["yscale"] == "log" and ax["ylabel"] and ax["xlabel"]
    assert len(ax["legend"]) == len(acc.PLOT_SERIES)
    assert sum(s.endswith("none measured") for s in ax["legend"]) == 3
    assert acc.plot_throughput({"parts": {}}, str(tmp_path / "b.png")) is None
