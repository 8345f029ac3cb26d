"""Command-line glue for the PLD accountant (:mod:`mcacct.pld`).

Mount under the main ``mcacct`` command with :func:`add_pld_parser`::

    sub = parser.add_subparsers(dest="command")
    add_pld_parser(sub)
    args = parser.parse_args()
    sys.exit(args.func(args))

Sub-commands: ``mcacct pld epsilon|delta|calibrate``. Standalone use:
``python -m mcacct.cli.pld pld epsilon --scheme poisson --sampling-prob 0.01
--sigma 1 --steps 10000 --delta 1e-5 --json``.

Which flag goes with which mechanism and sub-command is written down once, in :data:`MODES` and
:data:`COMMANDS` (:mod:`mcacct.cli.pld_flags`, re-exported here with :func:`check_args`): the parsers offer a
sub-command only the flags it can use, and every flag that does not apply, is missing or is out of range is refused
before any PLD work; every refusal is one line ``error: ...`` on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from typing import Any

from mcacct.cli.pld_flags import (COMMAND_HELP, COMMANDS, MODES, add_pld_flags, check_args, mode_of, modes_help,
                                   parse_ccol)

__all__ = ["add_pld_parser", "run_pld", "build_spec", "check_args", "main", "MODES", "COMMANDS"]

def add_pld_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``pld`` with sub-commands ``epsilon``, ``delta`` and ``calibrate``.

    Parameters
    ----------
    subparsers
        The object returned by ``ArgumentParser.add_subparsers()``.

    Returns
    -------
    argparse.ArgumentParser
        The ``pld`` parser (``func=run_pld`` is set on every sub-command).
    """
    pld = subparsers.add_parser(
        "pld", help="FFT privacy-loss-distribution accountant",
        description="Pessimistic FFT PLD accounting for DP-SGD / BandMF (cyclic Poisson) "
                    "and group-level DP via mixtures of Gaussians.")
    sub = pld.add_subparsers(dest="pld_command", metavar="{epsilon,delta,calibrate}")
    sub.required = True
    for name in COMMANDS:
        sp = sub.add_parser(name, help=COMMAND_HELP[name], description=COMMAND_HELP[name] + ". " + modes_help(name))
        add_pld_flags(sp, name)
        sp.set_defaults(func=run_pld)
    pld.set_defaults(func=run_pld)
    return pld


def build_spec(args: argparse.Namespace, sigma: float):
    """Build the mechanism spec of :mod:`mcacct.pld` described by ``args`` (checked by :func:`check_args`).

    Raises
    ------
    ValueError
        On missing or inconsistent flags (and, via the spec, out-of-range values).
    """
    from mcacct import pld

    mode, _ = mode_of(args)
    k = 1 if args.group_size is None else args.group_size
    if mode == "gaussian":
        return pld.GaussianSpec(sigma=sigma, sensitivity=float(k), steps=args.steps)
    if mode == "cyclic-poisson":
        return pld.CyclicPoissonBandMFSpec(iterations=args.iterations, min_sep=args.min_sep,
                                           sampling_prob=args.sampling_prob, c_col=parse_ccol(args.c_col),
                                           sigma=sigma)
    if mode == "poisson --fixed-batch":
        n = args.dataset_size
        b = args.batch_size if args.batch_size is not None else max(1, round(args.sampling_prob * n))
        return pld.GroupFixedBatchSpec(group_size=k, batch_size=b, dataset_size=n, sigma=sigma, steps=args.steps)
    if mode == "poisson":
        if k == 1:
            return pld.PoissonGaussianSpec(sampling_prob=args.sampling_prob, sigma=sigma, steps=args.steps)
        return pld.GroupPoissonSpec(group_size=k, sampling_prob=args.sampling_prob, sigma=sigma, steps=args.steps)
    raise ValueError(f"--events describes no single mechanism (mode {mode!r})")


def _fmt(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.6g}"


def _describe(spec) -> dict:
    d = dataclasses.asdict(spec)
    d["type"] = type(spec).__name__
    d["compositions"] = spec.compositions
    if "c_col" in d:
        d["c_col"] = list(d["c_col"])
        d["col_norm"] = spec.col_norm
    return d


def run_pld(args: argparse.Namespace) -> dict:
    """Execute ``mcacct pld ...``: print a summary (unless ``--json``) and return the report (the entry point
    prints it as JSON with ``--json``, adding ``seconds`` and ``compile_seconds``).

    Every flag is checked first (:func:`check_args`). Bad input raises ``ValueError`` (the entry point prints
    ``error: <message>`` and exits with 2), including a ``--delta`` below what the accountant can certify
    (``pld epsilon``: no finite epsilon; ``pld calibrate``: below the mass at infinity / FFT round-off bound)
    and a composition larger than the memory budget of :mod:`mcacct.pld` (``$MCACCT_PLD_MEMORY_BUDGET``).
    JSON keys (docs/json.md): ``epsilon`` (epsilon command), ``delta`` (delta command), ``sigma`` (calibrate),
    ``certified`` (true: the pessimistic PLD bound), ``mechanism``, plus the other :class:`mcacct.pld.PLDResult`
    fields as numbers (a non-finite one is the report's ``null``, listed in ``nonfinite``).

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    dict
    """
    from mcacct.engine.progress import stage
    mode = check_args(args)
    with stage(f"pld {args.pld_command}: FFT accounting", not args.quiet):
        return _run(args, mode)


def _run(args: argparse.Namespace, mode: str) -> dict:
    from mcacct import pld

    cmd = args.pld_command
    opts = dict(value_discretization_interval=(1e-4 if args.value_discretization_interval is None
                                               else args.value_discretization_interval),
                discretization=args.discretization or "connect_dots")
    if mode == "events":
        return _run_events(args, cmd, opts)
    if cmd == "calibrate":
        eps, dl = args.epsilon, args.delta
        spec = build_spec(args, 1.0)
        sigma = pld.pld_calibrate(spec, eps, dl, **opts)
        out = {"sigma": sigma, "epsilon": eps, "delta": dl, "certified": True,
               "mechanism": _describe(dataclasses.replace(spec, sigma=sigma))}
        if not args.json:
            print(f"sigma = {sigma:.6g}  (certified: ({_fmt(eps)}, {dl:g})-DP, "
                  f"{spec.compositions} compositions, {type(spec).__name__})")
        return out
    sigma = args.sigma
    spec = build_spec(args, sigma)
    if cmd == "epsilon":
        dl = args.delta
        res = pld.pld_epsilon(spec, dl, estimate_error=not args.no_error_estimate, **opts)
        if math.isinf(res.epsilon):  # the library's answer is the trivial epsilon = inf
            raise ValueError(
                f"delta={dl:g} is below what the PLD accountant can certify here (mass at +infinity "
                f"{res.infinity_mass:.2g}: truncated noise tails and the composition-window tail bound); "
                "no finite epsilon can be certified, increase delta")
    else:
        res = pld.pld_delta(spec, args.epsilon, estimate_error=not args.no_error_estimate, **opts)
    out = {**dataclasses.asdict(res), "certified": True}  # non-finite numbers: the report's encoding (docs/json.md)
    out["mechanism"] = _describe(spec)
    if not args.json:
        what = "epsilon" if cmd == "epsilon" else "delta"
        val = res.epsilon if cmd == "epsilon" else res.delta
        given = f"delta={res.delta:g}" if cmd == "epsilon" else f"epsilon={_fmt(res.epsilon)}"
        per = (f"remove {_fmt(res.epsilon_remove)} / add {_fmt(res.epsilon_add)}" if cmd == "epsilon"
               else f"remove {res.delta_remove:.6g} / add {res.delta_add:.6g}")
        print(f"{what} = {_fmt(val) if cmd == 'epsilon' else f'{val:.6g}'} at {given}  "
              f"[{type(spec).__name__}, sigma={sigma:g}, {spec.compositions} compositions]")
        err = "n/a" if math.isnan(res.error_estimate) else f"{res.error_estimate:.2g}"
        print(f"  per adjacency: {per}; error estimate {err}; tail bound {res.tail_mass_bound:.2g}; "
              f"round-off bound {res.roundoff_bound:.2g}; {res.discretization} "
              f"h={res.value_discretization_interval:g}")
    return out


def _run_events(args: argparse.Namespace, cmd: str, opts: dict) -> dict:
    """``mcacct pld epsilon|delta --events FILE``: the heterogeneous composition of :mod:`mcacct.pld.events`."""
    from mcacct import pld

    events = pld.load_events(args.events)
    if cmd == "epsilon":
        dl = args.delta
        res = pld.events_epsilon(events, dl, estimate_error=not args.no_error_estimate, **opts)
        if math.isinf(res.epsilon):
            raise ValueError(
                f"delta={dl:g} is below what the PLD accountant can certify for these events (mass at +infinity "
                f"{res.infinity_mass:.2g}: window tails and the l1 round-off bounds of the compositions); increase "
                "delta")
    else:
        res = pld.events_delta(events, args.epsilon, estimate_error=not args.no_error_estimate, **opts)
    out = {**dataclasses.asdict(res), "events": [dict(e) for e in res.events]}  # floats: docs/json.md
    if not args.json:
        err = "n/a" if math.isnan(res.error_estimate) else f"{res.error_estimate:.2g}"
        val = f"epsilon = {_fmt(res.epsilon)} at delta={res.delta:g}" if cmd == "epsilon" else \
            f"delta = {res.delta:.6g} at epsilon={_fmt(res.epsilon)}"
        print(f"{val}  [{len(res.events)} distinct events, {sum(e['count'] for e in res.events)} in all]")
        print(f"  per adjacency: remove {_fmt(res.epsilon_remove) if cmd == 'epsilon' else f'{res.delta_remove:.6g}'}"
              f" / add {_fmt(res.epsilon_add) if cmd == 'epsilon' else f'{res.delta_add:.6g}'}; error estimate "
              f"{err}; mass at +inf {res.infinity_mass:.2g}; {res.discretization} "
              f"h={res.value_discretization_interval:g}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m mcacct.cli.pld pld ...``."""
    from mcacct.core.precision import x64_scope

    parser = argparse.ArgumentParser(prog="mcacct", description="mcacct PLD accountant (standalone)")
    sub = parser.add_subparsers(dest="command", metavar="{pld}")
    sub.required = True
    add_pld_parser(sub)
    args = parser.parse_args(argv)
    with x64_scope():
        try:
            out = args.func(args)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.json:
        from mcacct.cli.flags import json_text
        from mcacct.report.schema import report
        print(json_text(report(f"pld {args.pld_command}", out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
