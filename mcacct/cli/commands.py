"""The ``mcacct`` console command.

Subcommands print a human summary, or one JSON object on stdout with ``--json``; progress goes to stderr.
Invalid input prints ``error: ...`` naming the parameter and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

from mcacct.cli.flags import (Parser, add_distributed_flags, configure_cpu_devices, add_problem_flags, device_info,
                              enable_compilation_cache, flag_message, int_in, join_distributed, json_text,
                              problem_from_args, real_in, problem_options, record_given, refuse_options,
                              resolve_chunk_size, sample_count, scheme_json, sigma_list, sigma_value)
from mcacct.cli.exact import METHODS, calibrate_exact
from mcacct.cli.schemes import DEFAULTS as SCHEME_DEFAULTS
from mcacct.core.precision import float64

DEFAULTS = dict(SCHEME_DEFAULTS, epsilon=2.0, delta=1e-3)
#: ``calibrate``'s options that shape a new calibration (refused with ``--from``, whose plan fixes them all).
_CALIBRATION_OPTIONS = ("--epsilon", "--delta", "--samples", "--ladder-ratio", "--above", "--below",
                        "--systematic-reserve", "--sigmas", "--plan-only", "--pilot", "--out")


def _check_calibrate_flags(args) -> None:
    """Refuse, before any work, the flags that a calibrate mode ignores, and a float32 kernel (it cannot certify)."""
    from mcacct.statistics.confidence import EPSILON_MAX
    from mcacct.evr.budget import check_calibration_dtype
    if args.epsilon > EPSILON_MAX:  # the Gaussian top candidate needs e^epsilon (mcacct.statistics.confidence.EPSILON_MAX)
        raise ValueError(f"--epsilon must be in [0, {EPSILON_MAX:g}] to calibrate; got {args.epsilon:g} (the "
                         "certified top of the ladder, the Gaussian mechanism's exact delta, multiplies by "
                         "e^epsilon, which float64 holds only up to epsilon ~ 709)")
    if args.from_dir is not None:
        refuse_options(args, _CALIBRATION_OPTIONS + problem_options(),
                       "with --from (the plan in the directory fixes the problem, the target and the ladder)")
    else:
        check_calibration_dtype(args.dtype)
    if args.sigmas is not None:
        refuse_options(args, ("--ladder-ratio", "--above", "--below"),
                       "with --sigmas (an explicit ladder: no pilot, no generated ladder)")
    elif args.from_dir is None:  # before the baselines and the pilot (or --plan-only's probe) spend any time
        from mcacct.evr.calibrate import check_ladder_options
        check_ladder_options(args.ladder_ratio, args.above, args.below)
    if args.out is not None and not args.plan_only:
        raise ValueError("--out goes with --plan-only (write a plan for shard jobs)")
    if args.pilot and not args.plan_only:
        raise ValueError("--pilot goes with --plan-only (a calibration always runs its pilot unless --sigmas is "
                         "given)")
    if args.pilot and args.sigmas is not None:
        raise ValueError("--pilot and --sigmas exclude each other (an explicit ladder needs no pilot)")


def _baselines(args, problem) -> tuple[dict | None, tuple[float, float] | None]:
    """The scheme's PLD baselines for the report (unless ``--no-baselines``) and, without ``--sigmas``, the
    pilot bracket they give (placement only: :func:`mcacct.evr.calibrate.pilot_range`)."""
    if args.no_baselines:
        return None, None
    from mcacct.evr.calibrate import baseline_sigmas, bracket_from_baselines
    t0 = time.perf_counter()
    base = baseline_sigmas(problem, args.epsilon, args.delta)
    if base and not args.quiet:
        print(f"[mcacct] baselines (PLD): {time.perf_counter() - t0:.1f}s", file=sys.stderr, flush=True)
    return base, (bracket_from_baselines(base) if args.sigmas is None else None)


def cmd_calibrate(args) -> dict | int:
    """``mcacct calibrate``: the smallest certified noise multiplier for ``--epsilon`` and ``--delta``.

    A scheme with an exact PLD goes to the PLD accountant (``--method``); ``--plan-only`` prints (or writes) the
    plan; ``--from DIR`` merges a plan's shards; otherwise Estimate-Verify-Release runs here.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``calibrate``.

    Returns
    -------
    dict or int
        The report (printed as JSON by :func:`main` with ``--json``), or an exit code (0 on a process other than
        process 0 of a distributed run).
    """
    import jax
    from mcacct.evr.budget import calibration_budget
    from mcacct.evr.calibrate import calibrate
    _check_calibrate_flags(args)
    multi = join_distributed(args)
    if multi and (args.from_dir is not None or args.plan_only):
        raise ValueError("--coordinator-address runs the calibration itself; --plan-only and --from are "
                         "single-process steps (shard jobs need no jax.distributed)")
    baselines, out_bracket = None, None
    if args.from_dir is not None:
        from mcacct.jobs.calibration import calibrate_from, load_plan, plan_baselines
        res = calibrate_from(args.from_dir)
        problem = load_plan(args.from_dir)[1]
        if not args.no_baselines:  # those the plan stored (--plan-only --pilot --out), else computed here
            from mcacct.evr.calibrate import baseline_sigmas
            baselines = plan_baselines(args.from_dir) or baseline_sigmas(problem, res.epsilon, res.target_delta)
    else:
        problem = problem_from_args(args)
        exact = calibrate_exact(args, problem)  # a scheme with an exact PLD: the PLD accountant (--method)
        if exact is not None:
            return exact
        resolve_chunk_size(args, problem)
        if args.plan_only:
            from mcacct.cli.plan import plan_only
            return plan_only(args, problem, lambda: _baselines(args, problem))
        # the budget (arithmetic) first: too few --samples is refused at once, not after the PLD baselines' seconds
        calibration_budget(problem, args.epsilon, args.delta, args.samples, args.ladder_ratio, args.above,
                           args.below, args.chunk_size, args.systematic_reserve)
        baselines, bracket = _baselines(args, problem)
        res = calibrate(problem, args.epsilon, args.delta, jax.random.key(args.seed), num_samples=args.samples,
                        ladder_ratio=args.ladder_ratio, above=args.above, below=args.below,
                        chunk_size=args.chunk_size, progress=not args.quiet, sigmas=args.sigmas, bracket=bracket,
                        systematic_reserve=args.systematic_reserve)
        out_bracket = bracket
    out = res.to_dict()
    # `seconds` becomes the command's wall time (main); the calibration's own time (with --from: the shard jobs'
    # seconds summed) stays here
    out["calibration_seconds"], out["delta"] = res.seconds, res.target_delta
    if baselines is not None:
        out["baselines"] = baselines
    if out_bracket is not None:
        out["pilot_bracket"] = list(out_bracket)
    out["scheme"] = scheme_json(problem)
    out["seed"] = args.seed
    out.update(device_info())
    out["samples_per_second"] = res.samples_used / max(res.seconds, 1e-9)
    if multi:
        out["process_index"] = jax.process_index()
        if jax.process_index() != 0:  # every process holds the same result; process 0 reports it
            return 0
    if not args.json:
        print(f"sigma = {res.sigma:.6g}  ({'verified by Monte Carlo' if res.verified else 'Gaussian top candidate'})")
        print(f"certifies (epsilon, delta) = ({res.epsilon:g}, {res.overall_delta:.4g})  "
              f"[target delta {res.target_delta:g}, base delta {res.base_delta:.4g}]")
        print(f"samples: {res.num_samples:,} per direction per candidate, {res.samples_used:,} in all; "
              f"{len(res.candidates)} candidates verified on {out['device']}")
        wall = time.perf_counter() - getattr(args, "started_at", time.perf_counter() - res.seconds)
        print(f"time {wall:.1f}s in all: calibration {res.seconds:.1f}s ({out['samples_per_second']:,.0f} "
              f"samples/s), the rest PLD baselines and start-up")
        if res.note:
            print(f"note: {res.note}")
        for k, v in out.get("baselines", {}).items():
            if k.endswith("_sigma"):
                print(f"baseline {k[:-6].replace('_', ' ')}: sigma = {v:.6g} (PLD accountant)")
    return out


def _estimate(args, epsilons):
    """The problem of the flags and its :func:`mcacct.engine.estimate.estimate` at ``--sigma`` (``epsilons``: the
    ones summed exactly; none for an epsilon query, which reads the histogram)."""
    import jax
    from mcacct.engine.estimate import estimate
    args.multi = join_distributed(args)
    problem = problem_from_args(args)
    resolve_chunk_size(args, problem)
    n = args.samples
    return problem, estimate(problem, args.sigma, jax.random.key(args.seed), n, epsilons, alpha=args.alpha,
                             chunk_size=args.chunk_size, progress=not args.quiet)


def cmd_delta(args) -> dict:
    """``mcacct delta``: the Monte Carlo estimate of delta at ``--epsilon`` for ``--sigma``, with its upper bound.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``delta``.

    Returns
    -------
    dict
        The report.
    """
    t0 = time.perf_counter()
    problem, est = _estimate(args, (args.epsilon,))
    d = est.delta(0)
    out = {"sigma": args.sigma, "epsilon": args.epsilon, "delta_estimate": d["delta_estimate"],
           "delta_upper": d["delta_upper"], "directions": {k: d[k] for k in ("remove", "add")},
           **_estimate_report(args, problem, est, t0)}
    if not args.json:
        print(f"delta({args.epsilon:g}) ~ {out['delta_estimate']:.4g}, upper {out['delta_upper']:.4g} "
              f"({100 * (1 - args.alpha):g}% confidence), {est.num_samples:,} samples per direction")
        _print_notes(out["notes"])
    return out


def _estimate_report(args, problem, est, t0: float) -> dict:
    """The fields every estimate report shares: confidence, samples, scheme, systematic term, certification,
    seed, the resolved chunk size (with the seed it fixes the draws), timing and devices."""
    seconds = time.perf_counter() - t0
    return {"confidence": 1 - args.alpha, "num_samples": est.num_samples, "scheme": scheme_json(problem),
            "systematic_delta": est.systematic, "certified": est.certified, "notes": list(est.notes),
            "seed": args.seed, "chunk_size": args.chunk_size, "seconds": seconds,
            "samples_per_second": 2 * est.num_samples / max(seconds, 1e-9), **device_info()}


def cmd_epsilon(args) -> dict:
    """``mcacct epsilon``: the Monte Carlo estimate of epsilon at ``--delta`` for ``--sigma``, with its upper bound.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``epsilon``.

    Returns
    -------
    dict
        The report.
    """
    from mcacct.core.validate import check_real
    t0 = time.perf_counter()
    check_real("delta", args.delta, low=0.0, high=1.0, low_open=True, high_open=True)
    problem, est = _estimate(args, ())
    e = est.epsilon(args.delta)
    max_loss = min(s.spec.max_loss for s in est.stats.values())
    fields = {}
    for key in ("epsilon_estimate", "epsilon_upper"):  # JSON: null with the reason beside it (flags.json_text)
        fields[key] = e[key]
        if not math.isfinite(e[key]):
            fields[f"{key}_reason"] = (f"no epsilon in [0, {max_loss:g}] (the range of the loss histogram) has "
                                       f"{'an estimated' if key == 'epsilon_estimate' else 'an upper-bounded'} "
                                       f"delta at most {args.delta:g}")
    out = {"sigma": args.sigma, "delta": args.delta, **fields, **_estimate_report(args, problem, est, t0)}
    if not math.isfinite(e["epsilon_upper"]):  # an infinite upper bound certifies nothing
        out["certified"] = False
        out["notes"] = out["notes"] + [
            f"epsilon_upper is infinite: {fields['epsilon_upper_reason']}, so it certifies nothing (more --samples, "
            "a larger --sigma or a larger --delta may give a finite bound)"]
    if not args.json:
        print(f"epsilon({args.delta:g}) ~ {e['epsilon_estimate']:.4g}, upper {e['epsilon_upper']:.4g} "
              f"({100 * (1 - args.alpha):g}% confidence), {est.num_samples:,} samples per direction")
        _print_notes(out["notes"])
    return out


def _print_notes(notes) -> None:
    """Why the result is not a certificate (float32 kernel, one direction, a bound >= 1), one ``note:`` line each;
    the human output then says so once more."""
    for note in notes:
        print(f"note: {note}")
    if notes:
        print("certified: no")


def build_parser() -> argparse.ArgumentParser:
    """The ``mcacct`` argument parser with every subcommand.

    Returns
    -------
    Parser
        Each subcommand's parser sets ``func``, its handler.
    """
    parser = Parser(
        prog="mcacct", description="Monte Carlo privacy accounting for DP-BandMF with b-min-sep subsampling.")
    import mcacct
    parser.add_argument("--version", action="version", version=f"mcacct {mcacct.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("calibrate", help="smallest verified noise multiplier for a target (epsilon, delta)",
                       description="Estimate-Verify-Release over a ladder of noise multipliers (Alg. 5).")
    p.add_argument("--epsilon", type=real_in(0), default=DEFAULTS["epsilon"],
                   help=f"target epsilon in [0, 700] (e^epsilon must be a float64 number; default "
                        f"{DEFAULTS['epsilon']:g})")
    p.add_argument("--delta", type=real_in(0, 1, low_open=True, high_open=True), default=DEFAULTS["delta"],
                   help=f"target overall delta in (0, 1) (default {DEFAULTS['delta']:g})")
    p.add_argument("--samples", type=sample_count, default=None,
                   help="samples per direction per candidate (default: the minimum for base delta = delta/2)")
    p.add_argument("--ladder-ratio", type=real_in(1, low_open=True), default=1.01,
                   help="ratio between candidates (> 1; default 1.01)")
    p.add_argument("--above", type=int_in(0), default=3,
                   help="fine ladder steps above the pilot estimate (default 3; beyond them gaps of 2, 4, 8, ... "
                        "steps up to the pilot's 90%%-safe sigma, at most 4x --above steps)")
    p.add_argument("--below", type=int_in(0), default=4,
                   help="fine ladder steps below the pilot estimate (default 4; beyond them gaps of 2, 4, 8, ... "
                        "steps down to 4x --below steps)")
    p.add_argument("--systematic-reserve", type=real_in(0, 0.5, low_open=True), default=0.01,
                   help="fraction of the target delta set aside for the sampler's proven systematic terms "
                        "(default 0.01, at most 0.5); ladder candidates whose term exceeds it are dropped before "
                        "any verification sample (--plan-only shows the terms)")
    p.add_argument("--sigmas", type=sigma_list, default=None,
                   help="explicit ladder s1,s2,... (each in [1e-100, 1e100]; candidates at or above the certified top "
                        "are "
                        "dropped): no pilot, --ladder-ratio/--above/--below unused")
    p.add_argument("--plan-only", action="store_true",
                   help="print what the calibration will cost (samples; wall time from a probe of a few chunks; "
                        "about a minute) and run nothing else; with --pilot (or --sigmas) the plan itself: the "
                        "ladder and its systematic terms; with --out DIR also write it for shard jobs (`mcacct sample "
                        "--plan DIR ...`, then `mcacct calibrate --from DIR`)")
    p.add_argument("--pilot", action="store_true",
                   help="with --plan-only: run the pilot that places the ladder (its cost is what --plan-only "
                        "alone prints); needed by --out unless --sigmas gives the ladder")
    p.add_argument("--out", default=None, help="with --plan-only: directory to write the plan to")
    p.add_argument("--from", dest="from_dir", default=None,
                   help="merge the shards of the plan in this directory and apply Alg. 5 (no sampling here)")
    p.add_argument("--no-baselines", action="store_true",
                   help="skip the scheme's PLD baselines in the report (bminsep: the sigmas of Poisson DP-SGD "
                        "and cyclic-Poisson BandMF at the same expected batch size)")
    p.add_argument("--method", choices=METHODS, default="auto",
                   help="auto (default): a scheme with an exact PLD (--min-sep 1; cyclic-poisson --public-phase "
                        "with complete columns) goes to the deterministic PLD accountant, every other to Monte "
                        "Carlo; pld: refuse a scheme without one; monte-carlo: Estimate-Verify-Release always")
    add_problem_flags(p)
    add_distributed_flags(p)
    p.set_defaults(func=cmd_calibrate)

    for name, fn, what in (("delta", cmd_delta, "estimate delta(epsilon) for a noise multiplier"),
                           ("epsilon", cmd_epsilon, "estimate epsilon(delta) for a noise multiplier")):
        q = sub.add_parser(name, help=what, description=what + " (both directions, one-sided upper bound)")
        q.add_argument("--sigma", type=sigma_value, required=True,
                       help="noise multiplier, in [1e-100, 1e100] (the privacy loss grows like 1/sigma^2: float64 "
                            "cannot hold it outside)")
        if name == "delta":
            q.add_argument("--epsilon", type=real_in(0), required=True, help="epsilon (>= 0)")
        else:
            q.add_argument("--delta", type=real_in(0, 1, low_open=True, high_open=True), required=True,
                           help="delta in (0, 1)")
        q.add_argument("--samples", type=sample_count, default=100_000, help="samples per direction (default 100000)")
        q.add_argument("--alpha", type=real_in(0, 1, low_open=True, high_open=True), default=0.01,
                       help="1 - confidence of the upper bound, in (0, 1) (default 0.01)")
        add_problem_flags(q)
        add_distributed_flags(q)
        q.set_defaults(func=fn)

    from mcacct.cli.compare import add_compare_parser
    from mcacct.cli.jobs import add_parsers as add_job_parsers
    from mcacct.cli.pld import add_pld_parser
    from mcacct.cli.mse_study import add_mse_study_parser
    from mcacct.cli.strategy import add_strategy_parser
    from mcacct.cli.individual import add_individual_parser
    from mcacct.cli.dpis import add_dpis_parser

    add_pld_parser(sub)
    add_individual_parser(sub)
    add_dpis_parser(sub)
    add_strategy_parser(sub)
    add_mse_study_parser(sub)
    add_compare_parser(sub)
    add_job_parsers(sub)
    return parser


def out_of_memory_message(chunk_size, err: BaseException) -> str:
    """What the CLI says when the device runs out of memory: the chunk size is the lever (memory ~ chunk x n).

    Parameters
    ----------
    chunk_size : int or Any
        The ``--chunk-size`` in use; an integer gets a suggestion of a quarter of it (at least 1).
    err : BaseException
        The device's error; the first 300 characters of its first line end the message.

    Returns
    -------
    str
    """
    smaller = f", e.g. {max(1, chunk_size // 4)}" if isinstance(chunk_size, int) else ""
    return (f"the device ran out of memory at --chunk-size {chunk_size} (memory grows with chunk size x "
            f"iterations); give a smaller --chunk-size{smaller}. {str(err).splitlines()[0][:300]}")


@float64  # the whole command in float64 (mcacct.core.precision); the caller's global flag is unchanged
def main(argv: list[str] | None = None) -> int:
    """Run the ``mcacct`` command line in float64.

    Parameters
    ----------
    argv : list of str or None
        The arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 on success, 2 for invalid input (``error: ...`` on stderr), a numeric range exceeded or a
        device out of memory, 130 when interrupted, or the code a handler returns.
    """
    try:
        parser = build_parser()  # reads the scheme registry, which loads the installed schemes' entry points
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    record_given(args, argv)
    try:
        configure_cpu_devices(args)  # before JAX starts its backends
        import mcacct  # noqa: F401
        from mcacct.engine.progress import CompileClock
        enable_compilation_cache()
        t0 = time.perf_counter()
        args.started_at = t0  # the human summaries state the command's wall time, as the JSON's `seconds`
        clock = CompileClock.start()
        out = args.func(args)
        if isinstance(out, dict):
            compiled = CompileClock.since(clock)  # tracing + lowering + compiling, persistent-cache hits
            if args.command in ("calibrate", "delta", "epsilon"):
                out["startup"] = compiled
            # the command's wall time, everything included (baselines, pilot, compilation); the compilation
            # part beside it
            out["seconds"] = time.perf_counter() - t0
            out["compile_seconds"] = compiled["compile_seconds"]
    except ValueError as err:
        print(f"error: {flag_message(str(err))}", file=sys.stderr)
        return 2
    except FloatingPointError as err:  # a kernel's numeric range exceeded: nothing was certified
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 -- only a device running out of memory is answered here
        if "RESOURCE_EXHAUSTED" not in str(err) or not hasattr(args, "chunk_size"):
            raise
        print(f"error: {out_of_memory_message(args.chunk_size, err)}", file=sys.stderr)
        return 2
    if isinstance(out, int):
        return out
    if getattr(args, "multi", False):
        import jax
        if jax.process_index() != 0:  # every process holds the same result; process 0 reports it
            return 0
    if getattr(args, "json", False):
        from mcacct.report.schema import report
        # the one schema of every report (docs/json.md); a non-finite number is null (flags.json_text)
        print(json_text(report(command_name(args), out)))
    return 0


def command_name(args: argparse.Namespace) -> str:
    """The subcommand of ``args`` as typed, sub-commands joined by a space (``"pld epsilon"``): a report's
    ``command``.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    str
    """
    return " ".join(str(v) for v in (getattr(args, "command", None), getattr(args, "pld_command", None),
                                     getattr(args, "dpis_command", None)) if v)


if __name__ == "__main__":
    sys.exit(main())
