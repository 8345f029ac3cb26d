"""Plot of the estimated delta(epsilon) with its confidence band, from merged (or shard) statistics.

matplotlib is optional (``pip install 'mcacct[plot]'``); without it :func:`plot_delta_curve` raises a
``ValueError`` saying so.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from mcacct.core.validate import check_int, check_real
from mcacct.statistics.accumulators import DirectionStats, delta_bounds

__all__ = ["delta_band", "plot_delta_curve", "curve_title", "figure_formats", "check_figure_path"]


def figure_formats() -> tuple[str, ...]:
    """The file extensions matplotlib can write (``png``, ``pdf``, ``svg``, ...); ``ValueError`` without
    matplotlib.

    Returns
    -------
    tuple of str
        The extensions without the dot, sorted.

    Raises
    ------
    ValueError
        If matplotlib is not installed (the message says how to install it).
    """
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError as err:
        raise ValueError("mcacct plot needs matplotlib: pip install 'mcacct[plot]' (or matplotlib)") from err
    return tuple(sorted(FigureCanvasBase.get_supported_filetypes()))


def check_figure_path(path: str, name: str = "out") -> str:
    """Refuse a figure path before any work: its directory must exist and its extension be a format matplotlib
    writes (:func:`figure_formats`). ``ValueError`` naming ``name``; returns ``path``.

    Parameters
    ----------
    path : str
        The figure's file name.
    name : str
        The name of the option that gave ``path``, used in the messages.

    Returns
    -------
    str
        ``path`` unchanged.

    Raises
    ------
    ValueError
        Naming ``name``: ``path`` is not a non-empty string, its directory does not exist, it is a directory, or
        its extension is not among :func:`figure_formats` (or matplotlib is missing).
    """
    if not isinstance(path, str) or not path:
        raise ValueError(f"{name} must be a file name ending in an image format; got {path!r}")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ValueError(f"{name}: directory {os.path.dirname(path) or '.'} does not exist; got {path}")
    if os.path.isdir(path):
        raise ValueError(f"{name} is a directory; give a file name such as {os.path.join(path, 'delta.png')}")
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = figure_formats()
    if ext not in formats:
        raise ValueError(f"{name} must end in one of {', '.join('.' + f for f in formats)}; got "
                         f"{os.path.splitext(path)[1] or 'no extension'} ({path})")
    return path


def _hist_delta(stats: DirectionStats, eps: np.ndarray, block: int = 16) -> np.ndarray:
    """:meth:`DirectionStats.histogram_delta` in blocks of epsilons (bounded memory)."""
    return np.concatenate([stats.histogram_delta(eps[i:i + block]) for i in range(0, len(eps), block)])


def _max_loss(stats: DirectionStats) -> float:
    nz = np.flatnonzero(stats.hist[: stats.spec.bins + 1])
    top = (nz[-1] if nz.size else 0) * stats.spec.width
    if stats.hist[stats.spec.bins + 1] > 0:
        top = stats.spec.max_loss
    return float(top)


def delta_band(stats: dict[str, DirectionStats], epsilons: np.ndarray, alpha: float,
               systematic: float = 0.0) -> dict[str, np.ndarray]:
    """Histogram estimate of delta(epsilon) per direction and overall, with Chernoff-KL bounds.

    The band is *pointwise*: at each epsilon separately, ``delta_upper`` covers the true delta with
    confidence ``1 - alpha``; it is not a simultaneous band over the grid (the plot says so). As in
    :meth:`mcacct.engine.estimate.Estimate.delta`, ``systematic`` (the sampler's proven systematic term) is
    added to the upper and subtracted from the lower bound (clipped to ``[0, 1]``).

    Parameters
    ----------
    stats:
        Statistics per direction (``alpha`` is split over them, as in :class:`mcacct.engine.estimate.Estimate`).
    epsilons:
        Grid of epsilons.
    alpha:
        ``1 -`` confidence of each one-sided bound.
    systematic:
        Systematic term ``>= 0`` (:func:`mcacct.engine.systematic.systematic_bound`).

    Returns
    -------
    dict
        ``epsilon``, ``delta_estimate``, ``delta_lower``, ``delta_upper`` (maxima over directions) and
        ``<direction>_estimate`` per direction.
    """
    eps = np.asarray(epsilons, np.float64)
    systematic = check_real("systematic", systematic, low=0.0)
    a = alpha / len(stats)
    out = {"epsilon": eps, "delta_estimate": np.zeros_like(eps), "delta_lower": np.zeros_like(eps),
           "delta_upper": np.zeros_like(eps)}
    for d, s in stats.items():
        m = _hist_delta(s, eps)
        bounds = np.asarray([delta_bounds(float(v), s.count, a) for v in m])
        out[f"{d}_estimate"] = m
        out["delta_estimate"] = np.maximum(out["delta_estimate"], m)
        out["delta_lower"] = np.maximum(out["delta_lower"], np.maximum(bounds[:, 0] - systematic, 0.0))
        out["delta_upper"] = np.maximum(out["delta_upper"], np.minimum(bounds[:, 1] + systematic, 1.0))
    return out


def curve_title(scheme_name: str, scheme: object, sigma: float, num_samples: int,
                directions: Sequence[str], certified: bool) -> str:
    """Title of a delta(epsilon) figure: the mechanism and its parameters (σ, n, b, q), the sample count, and a
    second line when the curve is not a certificate.

    Parameters
    ----------
    scheme_name:
        Registry name of the scheme.
    scheme:
        The scheme; its ``iterations``, ``min_sep`` or ``cycle_length`` and ``sampling_prob`` are shown where
        it has them.
    sigma:
        Noise multiplier.
    num_samples:
        Samples per direction.
    directions:
        Directions run (one only: the curve is labelled "not a certificate").
    certified:
        Whether the estimate certifies the mechanism (False for a float32 kernel).

    Returns
    -------
    str
    """
    parts = [f"σ = {sigma:g}", f"n = {scheme.iterations}"]
    summary = scheme.summary()
    if summary.bands is not None:
        parts.append(f"b = {summary.bands}")
    if summary.sampling_prob is not None:
        parts.append(f"q = {summary.sampling_prob:.4g}")
    title = f"{scheme_name}: {', '.join(parts)}, {num_samples:,} samples/direction"
    if len(directions) < 2:
        title += f"\n{directions[0]} direction only: not a certificate of the mechanism"
    elif not certified:
        title += "\nfloat32 kernel: not a privacy certificate"
    return title


def plot_delta_curve(stats: dict[str, DirectionStats], out: str, alpha: float = 0.01,
                     epsilon_max: float | None = None, points: int = 200, title: str | None = None,
                     marks: Sequence[tuple[float, float, float]] = (), systematic: float = 0.0) -> dict:
    """Write a figure of delta-hat(epsilon) with its ``1 - alpha`` band to ``out`` (png, pdf, svg, ...).

    On the log axis every plotted value -- the estimate, the per-direction estimates, both edges of the band
    and the marks -- is drawn at ``max(value, 0.5 / N)`` (``N`` the smallest sample count of a direction, not
    the iterations ``n`` of the title; below half a sample's worth a histogram estimate is zero or round-off):
    one floor for all, so the drawn estimate always lies inside its drawn band. The floor is drawn as a dashed
    line over a grey band (the values below it, not resolved), labelled in the legend as the resolution floor
    with ``N``, so that a curve lying on it does not read as data. The returned arrays are the values
    themselves, with the floor as ``floor``.

    Parameters
    ----------
    stats:
        Merged statistics per direction.
    out:
        Output file; the format follows its extension (:func:`check_figure_path`, checked before any work).
    alpha:
        ``1 -`` confidence of the band (split over directions).
    epsilon_max:
        Right end of the epsilon axis (default: the largest loss observed, at most the histogram range).
    points:
        Grid points in ``[0, epsilon_max]``.
    title:
        Figure title.
    marks:
        ``(epsilon, delta_estimate, delta_upper)`` from the exact fixed-point sums, drawn as points.
    systematic:
        The sampler's systematic term, added to the band's upper edge as to the marks' upper bounds
        (:func:`delta_band`).

    Returns
    -------
    dict
        The plotted arrays (see :func:`delta_band`), ``floor`` and ``out``.
    """
    alpha = check_real("alpha", alpha, low=0.0, high=1.0, low_open=True, high_open=True)
    points = check_int("points", points, low=2)
    if not stats or any(s.count == 0 for s in stats.values()):
        raise ValueError("stats must hold at least one sample in every direction")
    if epsilon_max is None:
        epsilon_max = max(_max_loss(s) for s in stats.values())
        epsilon_max = max(epsilon_max, max((m[0] for m in marks), default=0.0), 0.5)
    epsilon_max = check_real("epsilon_max", epsilon_max, low=0.0, low_open=True)
    check_figure_path(out)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ValueError("mcacct plot needs matplotlib: pip install 'mcacct[plot]' (or matplotlib)") from err
    eps = np.linspace(0.0, epsilon_max, points)
    band = delta_band(stats, eps, alpha, systematic)
    n = min(s.count for s in stats.values())
    floor = 0.5 / n  # below half a sample's worth the log axis would be empty (n: samples, not iterations)

    def floored(v) -> np.ndarray:
        return np.maximum(np.asarray(v, np.float64), floor)

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.fill_between(eps, floored(band["delta_lower"]), floored(band["delta_upper"]), alpha=0.25,
                    label=f"pointwise {100 * (1 - alpha):g}% band (each $\\varepsilon$ separately)")
    ax.plot(eps, floored(band["delta_estimate"]), lw=1.8, label=r"$\hat\delta(\varepsilon)$ (max of directions)")
    for d in stats:
        ax.plot(eps, floored(band[f"{d}_estimate"]), lw=0.8, ls="--", label=f"{d} direction")
    if marks:
        me = np.asarray(marks, np.float64)
        lo, hi = floored(me[:, 1]), floored(me[:, 2])
        ax.errorbar(me[:, 0], lo, yerr=[np.zeros(len(me)), np.maximum(hi - lo, 0.0)], fmt="o", ms=4,
                    capsize=3, label="exact sums (upper bound)")
    ax.set_yscale("log")
    ax.axhline(floor, color="0.35", ls=(0, (5, 3)), lw=1.0,
               label=f"resolution floor 0.5/N = {floor:.2g}, N = {n:,} samples per direction")
    ax.axhspan(floor / 3, floor, color="0.88", zorder=0, lw=0)  # below the resolution: no data
    ax.set_ylim(bottom=floor / 3)
    ax.set_xlabel(r"$\varepsilon$ (privacy-loss threshold)")
    ax.set_ylabel(r"$\delta(\varepsilon)$ (grey: below the resolution floor, drawn on it)", fontsize=8)
    ax.set_title(title or f"{n:,} samples per direction, {100 * (1 - alpha):g}% confidence", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(out, dpi=150)
    except OSError as err:
        raise ValueError(f"out: cannot write {out} ({err})") from err
    finally:
        plt.close(fig)
    return {**band, "floor": floor, "out": out}
