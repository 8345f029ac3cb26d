r"""The MSE study of Dong & Ganesh 2026 (arXiv:2602.09338), §7.1: which sampling scheme buys the lowest error.

For a prefix-sum workload over ``n`` iterations, DP-BandMF with a banded Toeplitz ``C`` (``||c|| = 1``,
``bands`` non-zeros, optimised by :func:`mcacct.strategies.optimize_banded_toeplitz`) has mean squared error

.. math::  \mathrm{MSE} = \frac{\|A C^{-1}\|_F^2}{n}\, \sigma(C)^2,

with :math:`\sigma(C)` the smallest noise multiplier that meets the target (ε, δ) under the scheme. At epoch
length ``E = |D|/B`` (so the per-iteration participation rate is ``1/E``) the study compares, per (ε, E), the
best over ``bands`` (and ``b``) of

* **b-min-sep** with ``bands <= b <= E`` (powers of two), σ by EVR calibration (Monte Carlo, Alg. 5);
* **balls-in-bins** with ``E`` bins, σ by EVR calibration; the ``b = E`` cell of b-min-sep is the same
  mechanism (``p = 1``, warm start) and reuses this calibration, so b-min-sep's best is never worse by
  construction;
* **cyclic Poisson** with cycle ``b`` (``bands <= b <= E``, powers of two) and rate ``b/E`` within its part,
  σ by the PLD accountant (public-partition worst case).

Every calibration is cached on disk as one JSON file named by a hash of its configuration, so an interrupted
study resumes where it stopped; the calibrations run through the engine's runner on all local devices.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import jax
import numpy as np
from mcacct.core.precision import float64

__all__ = ["StudyGrid", "QUICK_GRID", "FULL_GRID", "SMOKE_GRID", "run_study", "plot_ratios", "ratio_title"]


@dataclass(frozen=True)
class StudyGrid:
    """The grid: ``iterations`` n, target ``delta``, ``epsilons``, ``epoch_lengths`` (E = |D|/B), ``bands``;
    b-min-sep and cyclic Poisson sweep ``b`` over powers of two in ``[bands, E]`` every ``b_step``-th power
    (plus ``E`` itself). ``samples``: Monte Carlo samples per direction per candidate (None: Alg. 5's minimum).

    Attributes
    ----------
    iterations : int
        Training iterations ``n``.
    delta : float
        Target delta of every calibration.
    epsilons : tuple of float
        Target epsilons.
    epoch_lengths : tuple of int
        Epoch lengths ``E``.
    bands : tuple of int
        Band counts of the strategies compared.
    b_step : int
        Every ``b_step``-th power of two is swept (:meth:`min_seps`).
    samples : int or None
        Monte Carlo samples per direction per candidate.
    """
    iterations: int = 1024
    delta: float = 1e-3
    epsilons: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
    epoch_lengths: tuple[int, ...] = (128, 256, 512, 1024)
    bands: tuple[int, ...] = (2, 4, 8, 16, 32)
    b_step: int = 1
    samples: int | None = None

    def min_seps(self, bands: int, epoch: int) -> list[int]:
        r"""The values of ``b`` swept for ``bands`` at epoch length ``epoch``.

        Parameters
        ----------
        bands : int
            Non-zeros of ``C``, the smallest ``b`` allowed.
        epoch : int
            Epoch length ``E``, the largest ``b`` allowed.

        Returns
        -------
        list of int
            Every ``b_step``-th power of two from :math:`2^{\lfloor \log_2 \mathrm{bands} \rfloor}` up to
            :math:`2^{\lfloor \log_2 E \rfloor}` that lies in ``[bands, E]``, plus ``E`` itself, sorted; empty when
            ``bands > E``.
        """
        pows = [1 << e for e in range(int(math.log2(bands)), int(math.log2(epoch)) + 1)]
        keep = [b for i, b in enumerate(pows) if i % self.b_step == 0 and bands <= b <= epoch]
        return sorted(set(keep + [epoch])) if bands <= epoch else []


FULL_GRID = StudyGrid()
QUICK_GRID = StudyGrid(epsilons=(1.0, 8.0), epoch_lengths=(128, 256), bands=(2, 8), b_step=2)
SMOKE_GRID = StudyGrid(iterations=16, delta=1e-2, epsilons=(2.0,), epoch_lengths=(4,), bands=(2,), samples=3000)


def _cached(cache_dir: str, config: dict, compute):
    """``compute()`` once per configuration: the result is stored as ``<sha>.json`` (written atomically)."""
    blob = json.dumps(config, sort_keys=True)
    path = os.path.join(cache_dir, hashlib.sha256(blob.encode()).hexdigest()[:24] + ".json")
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)["result"]
    result = compute()
    tmp = path + f".tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"config": config, "result": result}, f)
    os.replace(tmp, path)
    return result


def _mc_sigma(scheme, c_col, epsilon, delta, samples, seed) -> dict:
    import mcacct
    from mcacct.engine.problem import Problem
    t0 = time.perf_counter()
    res = mcacct.calibrate(Problem(scheme, mcacct.BandedToeplitz(tuple(c_col))), epsilon, delta,
                           jax.random.key(seed), num_samples=samples)
    return {"sigma": res.sigma, "verified": res.verified, "overall_delta": res.overall_delta,
            "num_samples": res.num_samples, "seconds": time.perf_counter() - t0}


def _pld_sigma(n, b, q, c_col, epsilon, delta) -> dict:
    from mcacct.pld import CyclicPoissonBandMFSpec, pld_calibrate
    t0 = time.perf_counter()
    sigma = pld_calibrate(CyclicPoissonBandMFSpec(n, b, q, tuple(c_col), 1.0), epsilon, delta)
    return {"sigma": float(sigma), "verified": True, "seconds": time.perf_counter() - t0}


@float64
def run_study(grid: StudyGrid, cache_dir: str, seed: int = 0, progress: bool = True) -> dict:
    r"""Run (or resume) the study on ``grid``; returns every calibration and, per (ε, E), each method's best
    MSE with its bands (and b) and the ratios b-min-sep / cyclic Poisson and b-min-sep / balls-in-bins.

    Each calibration's MSE is :math:`\mathrm{err}(C)\, \sigma^2` with :math:`\mathrm{err}(C) = \|A C^{-1}\|_F^2 / n`
    the strategy's error, and a cell's ratio is the quotient of the two methods' best MSEs.

    Parameters
    ----------
    grid : StudyGrid
        The grid to run (:data:`FULL_GRID`, :data:`QUICK_GRID`, :data:`SMOKE_GRID` or one's own).
    cache_dir : str
        Directory of the cached strategies and calibrations (created if missing); a rerun reads what is there.
    seed : int
        Root seed of every Monte Carlo calibration.
    progress : bool
        Print one line per cell of the sweep to stderr.

    Returns
    -------
    dict
        ``grid`` (the grid's fields), ``strategies`` (the optimised strategy per ``bands``, keyed by its string),
        ``cells`` (per (ε, E) where b-min-sep has a result: ``epsilon``, ``epoch``, ``best`` per method with
        ``mse``, ``bands``, ``b`` and ``sigma``, and ``ratio_cyclic_poisson`` / ``ratio_balls_in_bins`` where
        the other method has one), ``calibrations`` (one row per method and cell) and ``devices``.

    Raises
    ------
    ValueError
        If ``cache_dir`` is an existing file or cannot be created (both messages name ``cache_dir``).
    """
    import mcacct
    from mcacct.strategies import optimize_banded_toeplitz

    if os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
        raise ValueError(f"cache_dir must be a directory; {cache_dir!r} is an existing file")
    try:
        os.makedirs(cache_dir, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cache_dir {cache_dir!r} cannot be created ({err.strerror or err})") from None
    n, delta = grid.iterations, grid.delta
    strategies = {}
    for k in grid.bands:
        s = _cached(cache_dir, {"kind": "strategy", "n": n, "bands": k},
                    lambda k=k: optimize_banded_toeplitz(n, k)._asdict())
        strategies[k] = s
    cells, rows = [], []
    total = sum(len(grid.min_seps(k, e)) for e in grid.epoch_lengths for k in grid.bands) * len(grid.epsilons)
    done = 0
    for eps in grid.epsilons:
        for epoch in grid.epoch_lengths:
            best = {}
            for k in grid.bands:
                c, err = strategies[k]["c_col"], strategies[k]["error"]
                for b in grid.min_seps(k, epoch):
                    base = {"n": n, "delta": delta, "epsilon": eps, "epoch": epoch, "bands": k, "b": b,
                            "samples": grid.samples, "seed": seed}
                    if b == epoch:  # p = 1 warm start: balls-in-bins with E bins, one calibration for both
                        cal = _cached(cache_dir, {"kind": "balls-in-bins", **base}, lambda: _mc_sigma(
                            mcacct.BallsInBins(epoch, n), c, eps, delta, grid.samples, seed))
                        methods = ("b-min-sep", "balls-in-bins")
                    else:
                        p = mcacct.sampling_prob_from_batch_size(1.0, epoch, b)
                        cal = _cached(cache_dir, {"kind": "b-min-sep", **base}, lambda: _mc_sigma(
                            mcacct.BMinSep(p, b, n), c, eps, delta, grid.samples, seed))
                        methods = ("b-min-sep",)
                    cyc = _cached(cache_dir, {"kind": "cyclic-poisson", **base},
                                  lambda: _pld_sigma(n, b, min(1.0, b / epoch), c, eps, delta))
                    for method, r in [(m, cal) for m in methods] + [("cyclic-poisson", cyc)]:
                        mse = err * r["sigma"] ** 2
                        by = {"certified_by": "pld"} if method == "cyclic-poisson" else {}  # docs/json.md
                        rows.append({"method": method, "epsilon": eps, "epoch": epoch, "bands": k, "b": b,
                                     "error": err, "mse": mse, **r, **by})
                        if method not in best or mse < best[method]["mse"]:
                            best[method] = {"mse": mse, "bands": k, "b": b, "sigma": r["sigma"]}
                    done += 1
                    if progress:
                        print(f"[mse-study] {done}/{total}: eps={eps:g} E={epoch} bands={k} b={b} "
                              f"sigma={cal['sigma']:.4f} (cyclic {cyc['sigma']:.4f})", file=sys.stderr, flush=True)
            if "b-min-sep" in best:
                cell = {"epsilon": eps, "epoch": epoch, "best": best}
                for other, key in (("cyclic-poisson", "ratio_cyclic_poisson"), ("balls-in-bins", "ratio_balls_in_bins")):
                    if other in best:
                        cell[key] = best["b-min-sep"]["mse"] / best[other]["mse"]
                cells.append(cell)
    return {"grid": grid.__dict__, "strategies": {str(k): v for k, v in strategies.items()}, "cells": cells,
            "calibrations": rows, "devices": jax.device_count()}


_RATIOS = (("ratio_cyclic_poisson", "cyclic Poisson"), ("ratio_balls_in_bins", "balls-in-bins"))


def _ratio_grid(study: dict, key: str) -> tuple[list[float], list[int], np.ndarray]:
    """The ε values (columns), epoch lengths (rows) and the ratio ``key`` per cell (NaN where absent)."""
    eps = sorted({c["epsilon"] for c in study["cells"]})
    epochs = sorted({c["epoch"] for c in study["cells"]})
    grid = np.full((len(epochs), len(eps)), np.nan)
    for c in study["cells"]:
        if key in c:
            grid[epochs.index(c["epoch"]), eps.index(c["epsilon"])] = c[key]
    return eps, epochs, grid


def ratio_title(study: dict, name: str) -> str:
    """Title of one heatmap: the ratio and the grid's parameters.

    Parameters
    ----------
    study:
        The output of :func:`run_study` (its ``grid``).
    name:
        The method b-min-sep is compared with ("cyclic Poisson", "balls-in-bins").

    Returns
    -------
    str
        Three lines: the ratio; n, δ and bands; the b sweep and the Monte Carlo sample count.
    """
    g = study["grid"]
    samples = "Alg. 5 minimum" if g.get("samples") is None else f"{g['samples']:,}"
    bands = ", ".join(str(b) for b in g.get("bands", ()))
    return (f"MSE ratio b-min-sep / {name}, each at its best bands and b\n"
            f"n = {g['iterations']} iterations, δ = {g['delta']:g}, bands ∈ {{{bands}}}\n"
            f"b: powers of 2 in [bands, E], step {g.get('b_step', 1)}; MC samples: {samples}")


def plot_ratios(study: dict, path_prefix: str) -> list[str]:
    """Two heatmaps (ε across, epoch length up) of the MSE ratios b-min-sep / cyclic Poisson and b-min-sep /
    balls-in-bins, written as ``<prefix>_cyclic_poisson.png`` and ``<prefix>_balls_in_bins.png``.

    The colour scale is logarithmic and symmetric about 1 (blue: b-min-sep better, red: worse; nothing
    saturates), the colour bar is labelled, and each cell carries its value in a colour readable on it.

    Parameters
    ----------
    study:
        The output of :func:`run_study` (``cells`` and ``grid``).
    path_prefix:
        Prefix of the PNG files.

    Returns
    -------
    list of str
        The paths written.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mcacct.report.figures import annotated_heatmap, labelled_colorbar, ratio_norm, ratio_ticks

    paths = []
    for key, name in _RATIOS:
        eps, epochs, grid = _ratio_grid(study, key)
        fig, ax = plt.subplots(figsize=(max(1.3 * len(eps) + 4.2, 7.0), 0.8 * len(epochs) + 2.6))
        norm = ratio_norm(grid)
        im = annotated_heatmap(ax, grid, norm)
        ax.set_xticks(range(len(eps)), [f"{e:g}" for e in eps])
        ax.set_yticks(range(len(epochs)), [str(e) for e in epochs])
        ax.set_xlabel("target ε")
        ax.set_ylabel("epoch length E = |D|/B\n(iterations per epoch)")
        ax.set_title(ratio_title(study, name), fontsize=9)
        labelled_colorbar(fig, im, ax, f"MSE(b-min-sep) / MSE({name})\n< 1: b-min-sep better (log scale)",
                          ratio_ticks(norm))
        fig.tight_layout()
        path = f"{path_prefix}_{key[6:]}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths
