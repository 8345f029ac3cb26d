"""``mcacct mse-study``: the MSE study of Dong & Ganesh 2026 (arXiv:2602.09338), §7.1
(:mod:`mcacct.report.mse_study`): resumable, JSON of every cell, two heatmaps."""

from __future__ import annotations

import dataclasses
import os

from mcacct.report.mse_study import FULL_GRID, QUICK_GRID, SMOKE_GRID, plot_ratios, run_study
from mcacct.cli.flags import SEED_MAX, check_out_dir, device_info, int_in, json_text, sample_count
from mcacct.report.schema import report
from mcacct.core.validate import check_int

__all__ = ["add_mse_study_parser", "cmd_mse_study"]


def add_mse_study_parser(subparsers):
    """Add ``mse-study`` to an ``argparse`` sub-parser set.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The set to add to.

    Returns
    -------
    argparse.ArgumentParser
        The new parser; its ``func`` is :func:`cmd_mse_study`.
    """
    p = subparsers.add_parser(
        "mse-study", help="MSE of b-min-sep vs cyclic Poisson vs balls-in-bins (Dong & Ganesh 2026, "
                          "arXiv:2602.09338, §7.1), resumable",
        description="For each (epsilon, epoch length) the best MSE = error(C) sigma(C)^2 over bands (and b) of "
                    "b-min-sep and balls-in-bins (sigma by EVR calibration) and cyclic Poisson (PLD); every "
                    "calibration is cached in --cache, so a rerun resumes. Writes study.json and two heatmaps "
                    "to --out.")
    grid = p.add_mutually_exclusive_group()
    grid.add_argument("--quick", action="store_true", help="a small grid (about 10 minutes on 2 CPU cores)")
    grid.add_argument("--smoke", action="store_true", help="a tiny grid for tests (n = 32, seconds)")
    p.add_argument("--samples", type=sample_count, default=None, help="samples per direction per candidate (default: Alg. 5)")
    p.add_argument("--seed", type=int_in(0, SEED_MAX), default=0, help="root seed (default 0)")
    p.add_argument("--cache", default=None, help="calibration cache directory (default: OUT/cache)")
    p.add_argument("--out", default="mse_study", help="output directory (default ./mse_study)")
    p.add_argument("--no-plot", action="store_true", help="skip the heatmaps")
    p.add_argument("--json", action="store_true", help="print the study as one JSON object on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_mse_study)
    return p


def cmd_mse_study(args) -> dict:
    """``mcacct mse-study``: run (or resume) the study of :mod:`mcacct.report.mse_study`, write ``study.json``
    and the heatmaps to ``--out``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``mse-study``.

    Returns
    -------
    dict
        The study (:func:`mcacct.report.mse_study.run_study`) with the device information and ``plots``.

    Raises
    ------
    ValueError
        ``--samples`` below 100, or an ``--out`` or ``--cache`` that cannot be a directory.
    """
    grid = SMOKE_GRID if args.smoke else QUICK_GRID if args.quick else FULL_GRID
    if args.samples is not None:
        grid = dataclasses.replace(grid, samples=check_int("samples", args.samples, low=100))
    # both directories are checked before anything is created or computed (exit 2 naming the flag)
    check_out_dir("--out", args.out)
    cache = args.cache or os.path.join(args.out, "cache")
    check_out_dir("--cache" if args.cache else "--out", cache)
    os.makedirs(args.out, exist_ok=True)
    study = run_study(grid, cache, args.seed, progress=not args.quiet)
    study.update(device_info())  # the calibrations' Monte Carlo samples were drawn here
    path = os.path.join(args.out, "study.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:  # the --json report's schema (docs/json.md), without `plots`
        f.write(json_text(report("mse-study", study), indent=1))
    os.replace(tmp, path)
    if not args.no_plot:
        try:
            study["plots"] = plot_ratios(study, os.path.join(args.out, "mse_ratio"))
        except ImportError:
            study["plots"] = []
    if not args.json:
        print(f"{'epsilon':>8}{'E':>6}  {'b-min-sep (bands,b)':>22}{'/cyclic':>9}{'/bib':>7}")
        for c in study["cells"]:
            bm = c["best"]["b-min-sep"]
            print(f"{c['epsilon']:>8g}{c['epoch']:>6}  {bm['mse']:>12.4g} ({bm['bands']},{bm['b']})".ljust(38)
                  + f"{c.get('ratio_cyclic_poisson', float('nan')):>9.3f}{c.get('ratio_balls_in_bins', float('nan')):>7.3f}")
        print(f"written: {path}")
    return study
