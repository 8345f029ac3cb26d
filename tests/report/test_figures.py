"""``mcacct.report.figures``: ratio colour scales centred at 1 that do not saturate, annotations readable on
their cells, labelled colour bars (issue 23, item 6)."""

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mcacct.report.figures import (  # noqa: E402
    RATIO_CMAP, annotated_heatmap, labelled_colorbar, ratio_norm, ratio_ticks, text_colour, tick_label)


def test_text_colour_follows_the_background_luminance():
    cmap = matplotlib.colormaps[RATIO_CMAP]
    assert text_colour((1.0, 1.0, 1.0)) == "black" and text_colour((0.0, 0.0, 0.0, 1.0)) == "white"
    assert text_colour(cmap(1.0)) == "white"      # dark red
    assert text_colour(cmap(0.0)) == "white"      # dark blue
    assert text_colour(cmap(0.5)) == "black"      # near white, the ratio 1
    assert text_colour((1.0, 1.0, 0.0)) == "black"  # yellow is light


def test_ratio_norm_is_centred_at_one_symmetric_and_never_saturates():
    vals = np.array([[0.35, 1.02], [np.nan, 12.0]])
    norm = ratio_norm(vals)
    assert norm(1.0) == pytest.approx(0.5)
    assert norm.vmin * norm.vmax == pytest.approx(1.0)
    assert norm(12.0) <= 1.0 and norm(0.35) >= 0.0
    assert norm(2.0) - 0.5 == pytest.approx(0.5 - norm(0.5))  # a ratio and its reciprocal: equally strong
    tight = ratio_norm([0.99, 1.01])
    assert tight.vmax == pytest.approx(1.25) and tight(1.0) == pytest.approx(0.5)
    assert ratio_norm([np.nan]).vmax == pytest.approx(1.25)


def test_ratio_ticks_hold_one_and_lie_in_range():
    for vals in ([0.8, 1.02], [0.35, 0.6], [1e-3, 5.0], [0.2, 30.0]):
        norm = ratio_norm(vals)
        ticks = ratio_ticks(norm)
        assert 1.0 in ticks and ticks == sorted(ticks) and len(ticks) >= 3
        assert all(norm.vmin * (1 - 1e-9) <= t <= norm.vmax * (1 + 1e-9) for t in ticks)
    assert [tick_label(t) for t in (1 / 1.1, 1.25, 10.0, 1e-3, 1 / 1.5)] == ["0.91", "1.25", "10", "0.001", "0.67"]


def test_annotated_heatmap_texts_and_colorbar_label():
    grid = np.array([[0.3, 1.0], [12.0, np.nan]])
    fig, ax = plt.subplots()
    norm = ratio_norm(grid)
    im = annotated_heatmap(ax, grid, norm)
    cbar = labelled_colorbar(fig, im, ax, "ratio (< 1: better)", ratio_ticks(norm))
    texts = {t.get_text(): t.get_color() for t in ax.texts}
    assert texts == {"0.30": "black", "1.00": "black", "12.00": "white", "n/a": "0.4"}
    assert cbar.ax.get_ylabel() == "ratio (< 1: better)"
    assert "1" in [t.get_text() for t in cbar.ax.get_yticklabels()]
    plt.close(fig)
