"""``mcacct strategy``: optimise the banded Toeplitz ``C`` of DP-BandMF (:mod:`mcacct.strategies`), or report the
error of a given ``--c-col``."""

from __future__ import annotations

import sys

from mcacct.strategies.toeplitz import OBJECTIVES, optimize_banded_toeplitz, strategy_error
from mcacct.cli.flags import c_col_arg, int_in, refuse_options

__all__ = ["add_strategy_parser", "cmd_strategy"]


def add_strategy_parser(subparsers):
    """Add ``strategy`` to an ``argparse`` sub-parser set.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The set to add to.

    Returns
    -------
    argparse.ArgumentParser
        The new parser; its ``func`` is :func:`cmd_strategy`.
    """
    p = subparsers.add_parser(
        "strategy", help="optimise the banded Toeplitz strategy C (prefix-sum error) or report a given one's error",
        description="Minimise the prefix-sum error ||A C^-1||_F^2 / n * ||c||^2 (or the max-error variant) over "
                    "lower-triangular banded Toeplitz C with BANDS non-zeros, by L-BFGS (optax) in float64. "
                    "Prints c_col (normalised to ||c|| = 1) and its error; --c-col reports the error of a given "
                    "strategy instead.")
    p.add_argument("--iterations", type=int_in(1), required=True, help="n: training iterations (>= 1)")
    p.add_argument("--bands", type=int_in(1), default=None, help="non-zeros of C's first column, 1..n")
    p.add_argument("--objective", choices=OBJECTIVES, default="mean", help="mean (default) or max squared error")
    p.add_argument("--c-col", type=c_col_arg, default=None,
                   help="comma-separated c_col, each >= 0 and one > 0: report its error, no optimisation")
    p.add_argument("--max-steps", type=int_in(1), default=500,
                   help="L-BFGS steps per run (>= 1; default 500; with --bands only)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(func=cmd_strategy)
    return p


def cmd_strategy(args) -> dict:
    """``mcacct strategy``: optimise the banded Toeplitz ``C`` for ``--bands``, or report the error of ``--c-col``.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``strategy``.

    Returns
    -------
    dict
        The report: ``c_col``, ``error``, ``iterations``, ``bands``, ``objective``, ``optimized`` and, after an
        optimisation, ``steps`` and ``optimization_seconds``.

    Raises
    ------
    ValueError
        Both or neither of ``--bands`` and ``--c-col``, ``--max-steps`` with ``--c-col``, or more bands or entries
        than ``--iterations``.
    """
    n = args.iterations
    if args.c_col is not None:
        if args.bands is not None:
            raise ValueError("give --bands (optimise) or --c-col (evaluate), not both")
        refuse_options(args, ("--max-steps",), "with --c-col (it bounds the optimisation, which --c-col skips; "
                                               "it applies with --bands)")
        c = args.c_col
        if len(c) > n:  # C is n x n: later entries would not enter C, yet count in the error and in bands
            raise ValueError(f"--c-col must have between 1 and --iterations = {n} entries; got {len(c)}")
        out = {"c_col": list(c), "error": strategy_error(c, n, args.objective), "iterations": n, "bands": len(c),
               "objective": args.objective, "optimized": False}
    else:
        if args.bands is None:
            raise ValueError("--bands is required (an integer in [1, iterations]) unless --c-col is given")
        if args.bands > n:
            raise ValueError(f"--bands must be an integer in [1, --iterations = {n}]; got {args.bands}")
        print(f"optimising C: n = {n}, bands = {args.bands}, objective = {args.objective} ...", file=sys.stderr,
              flush=True)
        r = optimize_banded_toeplitz(n, args.bands, args.objective, max_steps=args.max_steps)
        out = {"c_col": list(r.c_col), "error": r.error, "iterations": r.iterations, "bands": r.bands,
               "objective": r.objective, "optimized": True, "steps": r.steps,
               "optimization_seconds": r.seconds}  # `seconds` is the command's wall time (docs/json.md)
    if not args.json:
        print(f"error ({out['objective']}) = {out['error']:.10g} at n = {n}, bands = {out['bands']}")
        print("c_col = " + ",".join(f"{v:.12g}" for v in out["c_col"]))
    return out
