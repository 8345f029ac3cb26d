"""Command-line glue for the PLD accountant (:mod:`mcacct.pld`).

Mount under the main ``mcacct`` command with :func:`add_pld_parser`::

    sub = parser.add_subparsers(dest="command")
    add_pld_parser(sub)
    args = parser.parse_args()
    sys.exit(args.func(args))

Sub-commands: ``mcacct pld epsilon|delta|calibrate``. Standalone use:
``python -m mcacct.cli.pld pld epsilon --scheme poisson --sampling-prob 0.01
--sigma 1 --steps 10000 --delta 1e-5 --json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from typing import Any

from mcacct.validate import parse_floats

__all__ = ["add_pld_parser", "run_pld", "build_spec", "main"]

_SCHEMES = ("poisson", "cyclic-poisson", "gaussian")


def _common_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("mechanism")
    g.add_argument("--scheme", choices=_SCHEMES, default="poisson",
                   help="sampling scheme (default: poisson)")
    g.add_argument("--events", default=None, metavar="FILE.json",
                   help="epsilon|delta of a heterogeneous composition: a JSON list of events such as "
                        '[{"mechanism": "poisson_gaussian", "sampling_prob": 0.01, "sigma": 1.0, "count": 500}, '
                        '{"mechanism": "gaussian", "sigma": 5.0, "count": 1}]; mechanisms: gaussian, '
                        "poisson_gaussian, mixture_of_gaussians, group_poisson, group_fixed_batch, "
                        "cyclic_poisson_bandmf (replaces the mechanism flags)")
    g.add_argument("--sampling-prob", "-q", type=float, default=None, metavar="Q",
                   help="Poisson sampling probability q in (0, 1]")
    g.add_argument("--steps", "-T", type=int, default=None, metavar="T",
                   help="number of compositions / training steps (poisson, gaussian)")
    g.add_argument("--sigma", type=float, default=None,
                   help="noise multiplier (not used by calibrate)")
    g.add_argument("--group-size", "-k", type=int, default=1, metavar="K",
                   help="group size k for group-level DP (default 1)")
    g.add_argument("--fixed-batch", action="store_true",
                   help="fixed-batch-size sampling instead of Poisson (group analysis of Ganesh)")
    g.add_argument("--batch-size", type=int, default=None, metavar="B",
                   help="batch size B for --fixed-batch (or give --sampling-prob, B = round(q n))")
    g.add_argument("--dataset-size", type=int, default=None, metavar="N",
                   help="(lower bound on the) dataset size n for --fixed-batch")
    g.add_argument("--iterations", type=int, default=None, metavar="N",
                   help="cyclic-poisson: number of iterations n")
    g.add_argument("--min-sep", type=int, default=None, metavar="B",
                   help="cyclic-poisson: min separation / number of bands b")
    g.add_argument("--c-col", type=str, default=None, metavar="V1,V2,...",
                   help="cyclic-poisson: column of the strategy matrix (comma separated)")
    t = p.add_argument_group("target")
    t.add_argument("--epsilon", type=float, default=None, help="epsilon (>= 0)")
    t.add_argument("--delta", type=float, default=None, help="delta in (0, 1)")
    n = p.add_argument_group("numerics")
    n.add_argument("--value-discretization-interval", type=float, default=1e-4, metavar="H",
                   help="loss grid spacing (default 1e-4)")
    n.add_argument("--discretization", choices=("connect_dots", "round_up"), default="connect_dots",
                   help="pessimistic discretisation rule (default connect_dots)")
    n.add_argument("--no-error-estimate", action="store_true",
                   help="skip the h/2 re-run that gives the error estimate of Koskela, Jälkö & Honkela "
                        "(arXiv:1906.03049)")
    n.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    return p


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
    common = _common_parser()
    pld = subparsers.add_parser(
        "pld", help="FFT privacy-loss-distribution accountant",
        description="Pessimistic FFT PLD accounting for DP-SGD / BandMF (cyclic Poisson) "
                    "and group-level DP via mixtures of Gaussians.")
    sub = pld.add_subparsers(dest="pld_command", metavar="{epsilon,delta,calibrate}")
    sub.required = True
    for name, hlp in (("epsilon", "epsilon for a target --delta"),
                      ("delta", "delta for a target --epsilon"),
                      ("calibrate", "smallest sigma meeting --epsilon and --delta")):
        sp = sub.add_parser(name, parents=[common], help=hlp, description=hlp)
        sp.set_defaults(func=run_pld)
    pld.set_defaults(func=run_pld)
    return pld


def _parse_ccol(text: str) -> tuple[float, ...]:
    try:
        vals = parse_floats("--c-col", text)
    except ValueError:
        raise ValueError(f"--c-col must be a comma-separated list of numbers, got {text!r}") from None
    if not vals:
        raise ValueError(f"--c-col must be a comma-separated list of numbers, got {text!r}")
    return vals


def _require(value: Any, flag: str, scheme: str) -> Any:
    if value is None:
        raise ValueError(f"{flag} is required for --scheme {scheme}")
    return value


def build_spec(args: argparse.Namespace, sigma: float):
    """Build the mechanism spec of :mod:`mcacct.pld` described by ``args``.

    Raises
    ------
    ValueError
        On missing or inconsistent flags (and, via the spec, out-of-range values).
    """
    from mcacct import pld

    k = args.group_size
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"group_size must be an integer >= 1, got {k!r}")
    if args.scheme == "gaussian":
        if args.fixed_batch:
            raise ValueError("--fixed-batch is only valid with --scheme poisson")
        steps = _require(args.steps, "--steps", "gaussian")
        return pld.GaussianSpec(sigma=sigma, sensitivity=float(k), steps=steps)
    if args.scheme == "cyclic-poisson":
        if args.fixed_batch or k != 1:
            raise ValueError("--scheme cyclic-poisson supports neither --fixed-batch nor --group-size > 1")
        return pld.CyclicPoissonBandMFSpec(
            iterations=_require(args.iterations, "--iterations", "cyclic-poisson"),
            min_sep=_require(args.min_sep, "--min-sep", "cyclic-poisson"),
            sampling_prob=_require(args.sampling_prob, "--sampling-prob", "cyclic-poisson"),
            c_col=_parse_ccol(_require(args.c_col, "--c-col", "cyclic-poisson")),
            sigma=sigma,
        )
    steps = _require(args.steps, "--steps", "poisson")
    if args.fixed_batch:
        n = _require(args.dataset_size, "--dataset-size", "poisson --fixed-batch")
        b = args.batch_size
        if b is None:
            q = _require(args.sampling_prob, "--batch-size (or --sampling-prob)", "poisson --fixed-batch")
            if not (isinstance(q, float) and 0 < q <= 1):
                raise ValueError(f"sampling_prob must be in (0, 1], got {q!r}")
            if not isinstance(n, int) or n < 1:
                raise ValueError(f"dataset_size must be an integer >= 1, got {n!r}")
            b = max(1, round(q * n))
        return pld.GroupFixedBatchSpec(group_size=k, batch_size=b, dataset_size=n,
                                       sigma=sigma, steps=steps)
    q = _require(args.sampling_prob, "--sampling-prob", "poisson")
    if k == 1:
        return pld.PoissonGaussianSpec(sampling_prob=q, sigma=sigma, steps=steps)
    return pld.GroupPoissonSpec(group_size=k, sampling_prob=q, sigma=sigma, steps=steps)


def _fmt(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.6g}"


def _jsonable(d: dict) -> dict:
    out = {}
    for key, v in d.items():
        if isinstance(v, float) and not math.isfinite(v):
            out[key] = None if math.isnan(v) else ("inf" if v > 0 else "-inf")
        else:
            out[key] = v
    return out


def _describe(spec) -> dict:
    d = dataclasses.asdict(spec)
    d["type"] = type(spec).__name__
    d["compositions"] = spec.compositions
    if "c_col" in d:
        d["c_col"] = list(d["c_col"])
        d["col_norm"] = spec.col_norm
    return d


def run_pld(args: argparse.Namespace) -> int:
    """Execute ``mcacct pld ...``; print JSON (``--json``) or a summary.

    Returns 0 on success and 2 on bad input (``error: <message>`` on stderr), including a
    ``--delta`` below what the accountant can certify (``pld epsilon``: no finite epsilon;
    ``pld calibrate``: below the mass at infinity / FFT round-off bound).
    JSON keys: ``epsilon`` (epsilon command), ``delta`` (delta command),
    ``sigma`` (calibrate), plus the other :class:`mcacct.pld.PLDResult` fields.
    """
    try:
        from mcacct import pld

        cmd = getattr(args, "pld_command", None)
        if cmd not in ("epsilon", "delta", "calibrate"):
            raise ValueError("a sub-command is required: epsilon, delta or calibrate")
        opts = dict(value_discretization_interval=args.value_discretization_interval,
                    discretization=args.discretization)
        if cmd == "calibrate":
            if args.events is not None:
                raise ValueError("--events goes with pld epsilon and pld delta (calibrate takes one mechanism)")
            eps = _require(args.epsilon, "--epsilon", "calibrate")
            dl = _require(args.delta, "--delta", "calibrate")
            spec = build_spec(args, 1.0)
            sigma = pld.pld_calibrate(spec, eps, dl, **opts)
            out = {"sigma": sigma, "epsilon": eps, "delta": dl,
                   "mechanism": _jsonable(_describe(dataclasses.replace(spec, sigma=sigma)))}
            if args.json:
                print(json.dumps(out))
            else:
                print(f"sigma = {sigma:.6g}  (certified: ({_fmt(eps)}, {dl:g})-DP, "
                      f"{spec.compositions} compositions, {type(spec).__name__})")
            return 0
        if args.events is not None:
            return _run_events(args, cmd, opts)
        sigma = args.sigma
        if sigma is None:
            raise ValueError(f"--sigma is required for pld {cmd}")
        spec = build_spec(args, sigma)
        if cmd == "epsilon":
            dl = _require(args.delta, "--delta", "epsilon")
            res = pld.pld_epsilon(spec, dl, estimate_error=not args.no_error_estimate, **opts)
            if math.isinf(res.epsilon):  # the library's answer is the trivial epsilon = inf
                raise ValueError(
                    f"delta={dl:g} is below what the PLD accountant can certify here (mass at +infinity "
                    f"{res.infinity_mass:.2g}: truncated noise tails and the composition-window tail bound); "
                    "no finite epsilon can be certified, increase delta")
        else:
            eps = _require(args.epsilon, "--epsilon", "delta")
            res = pld.pld_delta(spec, eps, estimate_error=not args.no_error_estimate, **opts)
        out = _jsonable(dataclasses.asdict(res))
        out["mechanism"] = _jsonable(_describe(spec))
        if args.json:
            print(json.dumps(out))
        else:
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
        return 0
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run_events(args: argparse.Namespace, cmd: str, opts: dict) -> int:
    """``mcacct pld epsilon|delta --events FILE``: the heterogeneous composition of :mod:`mcacct.pld.events`."""
    from mcacct import pld

    events = pld.load_events(args.events)
    if cmd == "epsilon":
        dl = _require(args.delta, "--delta", "epsilon")
        res = pld.events_epsilon(events, dl, estimate_error=not args.no_error_estimate, **opts)
        if math.isinf(res.epsilon):
            raise ValueError(
                f"delta={dl:g} is below what the PLD accountant can certify for these events (mass at +infinity "
                f"{res.infinity_mass:.2g}: window tails and the l1 round-off bounds of the compositions); increase "
                "delta")
    else:
        res = pld.events_delta(events, _require(args.epsilon, "--epsilon", "delta"),
                               estimate_error=not args.no_error_estimate, **opts)
    out = res.to_dict()
    if args.json:
        print(json.dumps(out))
    else:
        err = "n/a" if math.isnan(res.error_estimate) else f"{res.error_estimate:.2g}"
        val = f"epsilon = {_fmt(res.epsilon)} at delta={res.delta:g}" if cmd == "epsilon" else \
            f"delta = {res.delta:.6g} at epsilon={_fmt(res.epsilon)}"
        print(f"{val}  [{len(res.events)} distinct events, {sum(e['count'] for e in res.events)} in all]")
        print(f"  per adjacency: remove {_fmt(res.epsilon_remove) if cmd == 'epsilon' else f'{res.delta_remove:.6g}'}"
              f" / add {_fmt(res.epsilon_add) if cmd == 'epsilon' else f'{res.delta_add:.6g}'}; error estimate "
              f"{err}; mass at +inf {res.infinity_mass:.2g}; {res.discretization} "
              f"h={res.value_discretization_interval:g}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m mcacct.cli.pld pld ...``."""
    parser = argparse.ArgumentParser(prog="mcacct", description="mcacct PLD accountant (standalone)")
    sub = parser.add_subparsers(dest="command", metavar="{pld}")
    sub.required = True
    add_pld_parser(sub)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
