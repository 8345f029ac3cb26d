"""The ``mcacct`` console command.

Subcommands print a human summary, or one JSON object on stdout with ``--json``; progress goes to stderr.
Invalid input prints ``error: ...`` naming the parameter and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

DEFAULTS = dict(iterations=128, min_sep=4, sampling_prob=None, batch_size=32.0, dataset_size=1024,
                c_col="0.5,0.5,0.5,0.5", epsilon=2.0, delta=1e-3)


def _add_scheme_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("mechanism and sampling scheme (defaults: the built-in demo configuration)")
    g.add_argument("--iterations", type=int, default=DEFAULTS["iterations"], help="training iterations n (>= 1)")
    g.add_argument("--min-sep", type=int, default=DEFAULTS["min_sep"], help="minimum separation b (>= 1; 1 = Poisson)")
    g.add_argument("--sampling-prob", type=float, default=None,
                   help="sampling probability p in (0, 1] of an available example")
    g.add_argument("--batch-size", type=float, default=None,
                   help="expected batch size (with --dataset-size; sets p = p0/(1 - p0 (b-1)), p0 = batch/dataset)")
    g.add_argument("--dataset-size", type=int, default=None, help="dataset size (with --batch-size)")
    g.add_argument("--c-col", type=str, default=None,
                   help="comma-separated non-zeros of C's first column (length <= min-sep); default 1.0 "
                        "(DP-SGD) when any scheme flag is given, else the demo's 0.5,0.5,0.5,0.5")
    g.add_argument("--cold-start", action="store_true", help="Alg. 1 (all examples available at step 1) "
                   "instead of the warm start of Alg. 2")
    r = p.add_argument_group("Monte Carlo")
    r.add_argument("--seed", type=int, default=0, help="root seed of jax.random (default 0)")
    r.add_argument("--chunk-size", type=int, default=4096, help="samples per chunk (memory ~ chunk x n)")
    r.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="precision of the loss kernel (sums are always float64); only float64 certifies: "
                        "calibrate refuses float32, estimates report certified: false")
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    r.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _problem(args):
    from mcacct.accountant import Problem
    from mcacct.schemes import BMinSep, sampling_prob_from_batch_size
    from mcacct.strategy import BandedToeplitz

    explicit = any(getattr(args, k) is not None for k in ("sampling_prob", "batch_size", "dataset_size"))
    if args.sampling_prob is not None and (args.batch_size is not None or args.dataset_size is not None):
        raise ValueError("give either --sampling-prob or --batch-size with --dataset-size, not both")
    if args.sampling_prob is not None:
        p = args.sampling_prob
    else:
        bs = args.batch_size if args.batch_size is not None else (None if explicit else DEFAULTS["batch_size"])
        m = args.dataset_size if args.dataset_size is not None else (None if explicit else DEFAULTS["dataset_size"])
        if bs is None or m is None:
            raise ValueError("--batch-size and --dataset-size must be given together")
        p = sampling_prob_from_batch_size(bs, m, args.min_sep)
    c_col = args.c_col if args.c_col is not None else ("1.0" if explicit else DEFAULTS["c_col"])
    scheme = BMinSep(p, args.min_sep, args.iterations, warm_start=not args.cold_start)
    return Problem(scheme, BandedToeplitz(c_col), dtype=args.dtype)


def _scheme_json(problem) -> dict:
    s = problem.scheme
    return {"iterations": s.iterations, "min_sep": s.min_sep, "sampling_prob": s.sampling_prob,
            "participation_rate": s.participation_rate, "warm_start": s.warm_start,
            "c_col": list(problem.strategy.c_col), "dtype": problem.dtype}


def _device() -> str:
    import jax
    d = jax.devices()[0]
    return f"{d.platform}:{getattr(d, 'device_kind', '')} x{jax.device_count()}"


def cmd_calibrate(args) -> dict:
    import jax
    from mcacct.calibrate import calibrate
    problem = _problem(args)
    res = calibrate(problem, args.epsilon, args.delta, jax.random.key(args.seed), num_samples=args.samples,
                    ladder_ratio=args.ladder_ratio, above=args.above, below=args.below,
                    chunk_size=args.chunk_size, progress=not args.quiet)
    out = res.to_dict()
    out["delta"] = args.delta
    if not args.no_baselines:
        from mcacct.calibrate import baseline_sigmas
        out["baselines"] = baseline_sigmas(problem, args.epsilon, args.delta)
    out["scheme"] = _scheme_json(problem)
    out["seed"] = args.seed
    out["device"] = _device()
    out["samples_per_second"] = res.samples_used / max(res.seconds, 1e-9)
    if not args.json:
        print(f"sigma = {res.sigma:.6g}  ({'verified by Monte Carlo' if res.verified else 'Gaussian top candidate'})")
        print(f"certifies (epsilon, delta) = ({res.epsilon:g}, {res.overall_delta:.4g})  "
              f"[target delta {args.delta:g}, base delta {res.base_delta:.4g}]")
        print(f"samples: {res.num_samples:,} per direction per candidate, {res.samples_used:,} in all; "
              f"{len(res.candidates)} candidates verified; time {res.seconds:.1f}s "
              f"({out['samples_per_second']:,.0f} samples/s) on {out['device']}")
        if res.note:
            print(f"note: {res.note}")
        for k, v in out.get("baselines", {}).items():
            if k.endswith("_sigma"):
                print(f"baseline {k[:-6].replace('_', ' ')}: sigma = {v:.6g} (PLD accountant)")
    return out


def _estimate(args, epsilons):
    import jax
    from mcacct.accountant import estimate
    problem = _problem(args)
    n = args.samples
    return problem, estimate(problem, args.sigma, jax.random.key(args.seed), n, epsilons, alpha=args.alpha,
                             chunk_size=args.chunk_size, progress=not args.quiet)


def cmd_delta(args) -> dict:
    t0 = time.perf_counter()
    problem, est = _estimate(args, (args.epsilon,))
    d = est.delta(0)
    out = {"sigma": args.sigma, "epsilon": args.epsilon, "delta_estimate": d["delta_estimate"],
           "delta_upper": d["delta_upper"], "confidence": 1 - args.alpha, "num_samples": est.num_samples,
           "directions": {k: d[k] for k in ("remove", "add")}, "scheme": _scheme_json(problem),
           "systematic_delta": est.systematic, "certified": est.certified,
           "seed": args.seed, "seconds": time.perf_counter() - t0, "device": _device()}
    out["samples_per_second"] = 2 * est.num_samples / max(out["seconds"], 1e-9)
    if not args.json:
        print(f"delta({args.epsilon:g}) ~ {out['delta_estimate']:.4g}, upper {out['delta_upper']:.4g} "
              f"({100 * (1 - args.alpha):g}% confidence), {est.num_samples:,} samples per direction")
        _print_uncertified(est)
    return out


def cmd_epsilon(args) -> dict:
    from mcacct._validate import check_real
    t0 = time.perf_counter()
    check_real("delta", args.delta, low=0.0, high=1.0, low_open=True, high_open=True)
    problem, est = _estimate(args, (0.0,))
    e = est.epsilon(args.delta)
    out = {"sigma": args.sigma, "delta": args.delta, **e, "confidence": 1 - args.alpha,
           "num_samples": est.num_samples, "scheme": _scheme_json(problem), "systematic_delta": est.systematic,
           "certified": est.certified, "seed": args.seed,
           "seconds": time.perf_counter() - t0, "device": _device()}
    out["samples_per_second"] = 2 * est.num_samples / max(out["seconds"], 1e-9)
    if not args.json:
        print(f"epsilon({args.delta:g}) ~ {e['epsilon_estimate']:.4g}, upper {e['epsilon_upper']:.4g} "
              f"({100 * (1 - args.alpha):g}% confidence), {est.num_samples:,} samples per direction")
        _print_uncertified(est)
    return out


def _print_uncertified(est) -> None:
    if not est.certified:
        print("note: float32 kernel: its round-off is not bounded, so the upper bound holds for the float32 "
              "computation, not as a privacy certificate (use --dtype float64)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcacct", description="Monte Carlo privacy accounting for DP-BandMF with b-min-sep subsampling.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("calibrate", help="smallest verified noise multiplier for a target (epsilon, delta)",
                       description="Estimate-Verify-Release over a ladder of noise multipliers (Alg. 5).")
    p.add_argument("--epsilon", type=float, default=DEFAULTS["epsilon"], help="target epsilon (>= 0)")
    p.add_argument("--delta", type=float, default=DEFAULTS["delta"], help="target overall delta in (0, 1)")
    p.add_argument("--samples", type=int, default=None,
                   help="samples per direction per candidate (default: the minimum for base delta = delta/2)")
    p.add_argument("--ladder-ratio", type=float, default=1.01, help="ratio between candidates (> 1)")
    p.add_argument("--above", type=int, default=6, help="ladder steps above the pilot estimate")
    p.add_argument("--below", type=int, default=12, help="ladder steps below the pilot estimate")
    p.add_argument("--no-baselines", action="store_true",
                   help="skip the PLD sigmas of Poisson DP-SGD and cyclic-Poisson BandMF in the report")
    _add_scheme_flags(p)
    p.set_defaults(func=cmd_calibrate)

    for name, fn, what in (("delta", cmd_delta, "estimate delta(epsilon) for a noise multiplier"),
                           ("epsilon", cmd_epsilon, "estimate epsilon(delta) for a noise multiplier")):
        q = sub.add_parser(name, help=what, description=what + " (both directions, one-sided upper bound)")
        q.add_argument("--sigma", type=float, required=True, help="noise multiplier (> 0)")
        if name == "delta":
            q.add_argument("--epsilon", type=float, required=True, help="epsilon (>= 0)")
        else:
            q.add_argument("--delta", type=float, required=True, help="delta in (0, 1)")
        q.add_argument("--samples", type=int, default=100_000, help="samples per direction (default 100000)")
        q.add_argument("--alpha", type=float, default=0.01, help="1 - confidence of the upper bound (default 0.01)")
        _add_scheme_flags(q)
        q.set_defaults(func=fn)

    from mcacct.compare import add_compare_parser
    from mcacct.jobs_cli import add_parsers as add_job_parsers
    from mcacct.pld_cli import add_pld_parser

    add_pld_parser(sub)
    add_compare_parser(sub)
    add_job_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        import mcacct  # noqa: F401  (float64 on)
        out = args.func(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if isinstance(out, int):
        return out
    if getattr(args, "json", False):
        print(json.dumps(out, default=_json_default))
    return 0


def _json_default(o):
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:
        pass
    raise TypeError(f"not JSON serialisable: {type(o)}")


if __name__ == "__main__":
    sys.exit(main())
