"""``mcacct calibrate``: the smallest certified noise multiplier for a target (epsilon, delta).

Estimate-Verify-Release over a ladder of noise multipliers (Dong & Ganesh 2026, arXiv:2602.09338, Alg. 5) in this
process, its plan and cost (``--plan-only``), or the merge of a plan's shard jobs (``--from``); a scheme with an exact
PLD goes to the PLD accountant (``--method``).
"""

from __future__ import annotations

import sys
import time

from mcacct.cli.flags import (add_distributed_flags, add_problem_flags, device_info, int_in, join_distributed,
                              problem_from_args, problem_options, real_in, refuse_options, resolve_chunk_size,
                              sample_count, scheme_json, sigma_list)
from mcacct.cli.exact import METHODS, calibrate_exact
from mcacct.cli.schemes import DEFAULTS as SCHEME_DEFAULTS

__all__ = ["DEFAULTS", "add_calibrate_parser", "cmd_calibrate"]

DEFAULTS = dict(SCHEME_DEFAULTS, epsilon=2.0, delta=1e-3)
#: ``calibrate``'s options that shape a new calibration (refused with ``--from``, whose plan fixes them all).
_CALIBRATION_OPTIONS = ("--epsilon", "--delta", "--samples", "--ladder-ratio", "--above", "--below",
                        "--systematic-reserve", "--sigmas", "--plan-only", "--pilot", "--out")


def _check_calibrate_flags(args) -> None:
    """Refuse, before any work, the flags that a calibrate mode ignores, and a float32 kernel (it cannot certify)."""
    from mcacct.statistics.confidence import EPSILON_MAX
    from mcacct.evr.budget import check_calibration_dtype
    # the Gaussian top candidate needs e^epsilon (mcacct.statistics.confidence.EPSILON_MAX)
    if args.epsilon > EPSILON_MAX:
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


def add_calibrate_parser(sub) -> None:
    """Register ``mcacct calibrate`` (its handler :func:`cmd_calibrate`) on the subcommands ``sub``."""
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
                        "are dropped): no pilot, --ladder-ratio/--above/--below unused")
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
