"""Shared pieces of mcacct's figures: a diverging colour scale centred at 1 for ratios, an annotated heatmap whose
text colour follows each cell's background, and a labelled colour bar.

matplotlib is imported inside the functions (it is optional); callers select the backend (``Agg``) first.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from matplotlib.axes import Axes
    from matplotlib.colorbar import Colorbar
    from matplotlib.colors import Colormap, LogNorm, Normalize
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage

__all__ = ["RATIO_CMAP", "relative_luminance", "text_colour", "ratio_norm", "ratio_ticks", "tick_label",
           "annotated_heatmap", "labelled_colorbar"]

#: Diverging map for ratios: blue below 1, near-white at 1, red above 1 (readable by red-green colour-blind readers).
RATIO_CMAP = "RdBu_r"

#: Candidate colour-bar ticks above 1 of a ratio scale (their reciprocals are the ticks below 1).
_RATIO_TICKS = (1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0, 1e3, 1e4, 1e5, 1e6)


def relative_luminance(rgba: Sequence[float]) -> float:
    """WCAG 2 relative luminance of an sRGB colour with channels in ``[0, 1]`` (alpha ignored).

    Parameters
    ----------
    rgba:
        ``(r, g, b)`` or ``(r, g, b, a)``.

    Returns
    -------
    float
        Luminance in ``[0, 1]`` (0 black, 1 white).
    """
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(float(c)) for c in rgba[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def text_colour(rgba: Sequence[float]) -> str:
    """``"white"`` or ``"black"``, whichever contrasts more with the background ``rgba`` (WCAG contrast ratio).

    Parameters
    ----------
    rgba:
        Background colour, channels in ``[0, 1]``.

    Returns
    -------
    str
        ``"white"`` on dark backgrounds, ``"black"`` on light ones.
    """
    lum = relative_luminance(rgba)
    return "white" if (1.05 / (lum + 0.05)) > ((lum + 0.05) / 0.05) else "black"


def ratio_norm(values: np.ndarray | Sequence[float], min_span: float = 1.25) -> "LogNorm":
    """A logarithmic norm symmetric about 1: ``[1/r, r]`` with ``r`` the largest of ``v`` and ``1/v`` over the
    finite positive values (at least ``min_span``), so 1 maps to the middle of a diverging map, a ratio and its
    reciprocal get equally strong colours, and no value saturates.

    Parameters
    ----------
    values:
        The ratios to be shown (NaN, infinite and non-positive entries are ignored).
    min_span:
        Smallest ``r > 1``, so ratios all near 1 are not drawn as extremes.

    Returns
    -------
    matplotlib.colors.LogNorm
        ``norm(1.0) == 0.5``.
    """
    from matplotlib.colors import LogNorm

    v = np.asarray(values, np.float64).ravel()
    v = v[np.isfinite(v) & (v > 0)]
    span = float(np.max(np.abs(np.log(v)))) if v.size else 0.0
    r = max(math.exp(span), float(min_span))
    return LogNorm(vmin=1.0 / r, vmax=r)


def ratio_ticks(norm: "Normalize", count: int = 3) -> list[float]:
    """Colour-bar ticks of a ratio scale symmetric about 1 (:func:`ratio_norm`): 1, up to ``count`` round ratios
    above it, spread out in log scale, and their reciprocals.

    Parameters
    ----------
    norm:
        The norm of the colour scale; ticks lie in ``[norm.vmin, norm.vmax]``.
    count:
        Most ticks on each side of 1.

    Returns
    -------
    list of float
        Ticks in increasing order, 1 among them.
    """
    top = min(float(norm.vmax), 1.0 / float(norm.vmin))
    gap = math.log(top) / (count + 1)
    above, last = [], 0.0
    for t in _RATIO_TICKS:
        if t <= top * (1 + 1e-9) and math.log(t) - last >= gap:
            above.append(t)
            last = math.log(t)
    return [1.0 / t for t in reversed(above)] + [1.0] + above


def tick_label(value: float) -> str:
    """A short label of a ratio: two decimals at most, trailing zeros dropped (``0.909 -> "0.91"``,
    ``1.25 -> "1.25"``, ``10.0 -> "10"``); one significant digit below 0.1 (``0.001 -> "0.001"``).

    Parameters
    ----------
    value : float
        The ratio, a tick of :func:`ratio_ticks`.

    Returns
    -------
    str
        ``f"{value:.1g}"`` below 0.1, else ``f"{value:.2f}"`` without trailing zeros and point.
    """
    if value < 0.1:
        return f"{value:.1g}"
    return f"{value:.2f}".rstrip("0").rstrip(".")


def annotated_heatmap(ax: "Axes", grid: np.ndarray, norm: "Normalize", cmap: "str | Colormap" = RATIO_CMAP,
                      fmt: str = "{:.2f}", missing: str = "n/a", fontsize: float = 9) -> "AxesImage":
    """Draw ``grid`` (rows bottom to top) as an image and write each cell's value on it, in white on dark and
    black on light cells (:func:`text_colour`); NaN cells read ``missing``.

    Parameters
    ----------
    ax:
        The axes to draw on.
    grid:
        2-D array of values (NaN: no value).
    norm, cmap:
        Colour scale.
    fmt:
        Format of the annotations.
    missing:
        Text of NaN cells.
    fontsize:
        Size of the annotations.

    Returns
    -------
    matplotlib.image.AxesImage
        The image (for :func:`labelled_colorbar`).
    """
    grid = np.asarray(grid, np.float64)
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, norm=norm, origin="lower", aspect="auto")
    for (i, j), v in np.ndenumerate(grid):
        if np.isfinite(v):
            ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=fontsize,
                    color=text_colour(im.cmap(im.norm(v))))
        else:
            ax.text(j, i, missing, ha="center", va="center", fontsize=fontsize, color="0.4")
    return im


def labelled_colorbar(fig: "Figure", im: "AxesImage", ax: "Axes", label: str,
                      ticks: Sequence[float] | None = None) -> "Colorbar":
    """A colour bar beside ``ax`` with ``label`` and, if given, ``ticks`` (minor ticks off).

    Parameters
    ----------
    fig, im, ax:
        The figure, the image and the axes it sits in.
    label:
        What the colours mean (with units or direction, e.g. "< 1: b-min-sep better").
    ticks:
        Tick values (default: matplotlib's), labelled by :func:`tick_label`.

    Returns
    -------
    matplotlib.colorbar.Colorbar
    """
    cbar = fig.colorbar(im, ax=ax)
    cbar.set_label(label)
    if ticks is not None:
        cbar.ax.minorticks_off()
        cbar.set_ticks(list(ticks), labels=[tick_label(t) for t in ticks])
    return cbar
