"""The figure of benchmarks/throughput.py, drawn from its JSON (no JAX needed).

    python benchmarks/throughput_plot.py benchmarks/results/throughput_cpu.json [...]

writes ``throughput_cpu.png`` next to each JSON file: a grouped bar chart of samples/s per configuration (log
scale) and, when the run had ``--scaling``, the n, b and chunk-size sweeps (log-log).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from matplotlib.axes import Axes

#: Legend text of each measured series.
SERIES = {
    "mcacct_float64": "mcacct, float64",
    "mcacct_float32": "mcacct, float32",
    "mcacct_float64_fft": "mcacct, float64, FFT products",
    "mcacct_float32_fft": "mcacct, float32, FFT products",
    "noise_only": "noise-only ceiling (normal draws only)",
    "reference": "jax-privacy NumPy reference",
}

#: The sweeps of ``--scaling``: name -> (x field, x-axis label, fields held fixed).
SWEEPS = {
    "n": ("iterations", "iterations n", ("min_sep",)),
    "b": ("min_sep", "min-separation b", ("iterations",)),
    "chunk": ("chunk_size", "chunk size in samples", ("iterations", "min_sep")),
}

_SHORT = {"iterations": "n", "min_sep": "b", "chunk_size": "chunk"}


def series_keys(rows: list[dict]) -> list[str]:
    """The measured series of the rows, in :data:`SERIES` order (unknown ``mcacct_*`` keys last).

    Parameters
    ----------
    rows:
        ``results`` of a throughput JSON.

    Returns
    -------
    list of str
        Keys whose entries hold ``samples_per_s``.
    """
    present = {k for r in rows for k in r if isinstance(r[k], dict) and "samples_per_s" in r[k]}
    known = [k for k in SERIES if k in present]
    return known + sorted(k for k in present - set(known) if k.startswith("mcacct_"))


def title(res: dict) -> str:
    """Title: what is compared, on which device, and the run's parameters.

    Parameters
    ----------
    res:
        A throughput JSON.

    Returns
    -------
    str
        Two lines; σ, c, chunk size and the statistic where the JSON records them.
    """
    rows = res.get("results", [])
    vs = " vs jax-privacy NumPy reference" if any("reference" in r for r in rows) else ""
    params = [f"σ = {res['sigma']:g}" if "sigma" in res else "", f"c = {res['c_col']}" if "c_col" in res else "",
              f"chunk {res['chunk_size']:,}" if "chunk_size" in res else "",
              f"{res['statistic']} of {res['repeats']} runs" if "repeats" in res else ""]
    return (f"mcacct throughput{vs}, positive direction\n{res.get('device', '?')}, jax {res.get('jax', '?')}: "
            + ", ".join(p for p in params if p))


def _bars(ax: "Axes", res: dict) -> None:
    """Grouped bars: one group per configuration, centred on its tick, one bar per series it measured (each
    series keeps its colour across groups)."""
    rows = res["results"]
    keys = series_keys(rows)
    colour = {k: f"C{i}" for i, k in enumerate(keys)}
    w = 0.8 / max(max((sum(k in r for k in keys) for r in rows), default=1), 1)
    labelled = set()
    for j, r in enumerate(rows):
        present = [k for k in keys if k in r]
        for i, k in enumerate(present):
            ax.bar(j + (i - (len(present) - 1) / 2) * w, r[k]["samples_per_s"], w, color=colour[k],
                   label=None if k in labelled else SERIES.get(k, k))
            labelled.add(k)
    ax.set_xticks(range(len(rows)),
                  [f"{r['config']}\nn = {r['iterations']}, b = {r['min_sep']}, p = {r['sampling_prob']:.3g}"
                   for r in rows], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("samples / s (log scale)")
    ax.set_xlabel("configuration (n iterations, min-separation b, sampling probability p)")
    ax.grid(axis="y", which="both", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    order = [labels.index(SERIES.get(k, k)) for k in keys]
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=7, loc="upper left",
              bbox_to_anchor=(1.01, 1.0))


def _sweep(ax: "Axes", rows: list[dict], name: str) -> None:
    """One ``--scaling`` sweep: samples/s against the swept field, log-log."""
    field, label, fixed = SWEEPS[name]
    pts = sorted((r[field], r["samples_per_s"]) for r in rows if r.get("sweep") == name)
    if not pts:
        ax.set_visible(False)
        return
    x, y = zip(*pts)
    ax.plot(x, y, "o-")
    ax.set_xscale("log", base=2)
    ax.set_xticks(x, [str(v) for v in x], minor=False)
    ax.minorticks_off()
    ax.set_yscale("log")
    centre, half = np.sqrt(min(y) * max(y)), max(np.sqrt(max(y) / min(y)) * 1.2, np.sqrt(10.0))
    ax.set_ylim(centre / half, centre * half)  # at least a decade: small differences are not magnified
    ax.set_xlabel(f"{label} (log scale)")
    ax.set_ylabel("samples / s (log scale)")
    held = ", ".join(f"{_SHORT[f]} = {rows[[r.get('sweep') for r in rows].index(name)][f]}" for f in fixed)
    ax.set_title(f"{name} sweep ({held})", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)


def plot_throughput(res: dict, path: str) -> str:
    """Write the figure of one throughput JSON (:mod:`throughput`'s output).

    Parameters
    ----------
    res:
        The JSON's content.
    path:
        Output image (format from its suffix).

    Returns
    -------
    str
        ``path``.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    scaling = res.get("scaling") or []
    fig = plt.figure(figsize=(11, 8.5 if scaling else 5))
    grid = fig.add_gridspec(2 if scaling else 1, 3)
    _bars(fig.add_subplot(grid[0, :]), res)
    for i, name in enumerate(SWEEPS if scaling else ()):
        _sweep(fig.add_subplot(grid[1, i]), scaling, name)
    fig.suptitle(title(res), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    """Redraw ``<name>.png`` next to each ``<name>.json`` given."""
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    for p in paths:
        with open(p) as f:
            print(plot_throughput(json.load(f), os.path.splitext(p)[0] + ".png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
