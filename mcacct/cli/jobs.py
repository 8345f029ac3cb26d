"""``mcacct sample``, ``mcacct merge`` and ``mcacct plot``: sharded jobs and their exact merge.

Registered by :func:`mcacct.cli.commands.build_parser` through :func:`add_parsers`::

    mcacct sample --shard 3 --num-shards 8 --out runs/a [--scheme NAME] <scheme flags> --sigma 1.1 \\
        --epsilon 2 --samples 10000000
    mcacct merge runs/a [runs/b ...] [--out runs/merged] [--json]
    mcacct plot runs/merged --out delta.png
"""

from __future__ import annotations

import os
import time

from mcacct.cli.flags import add_problem_flags, device_info, float_list, problem_from_args, sample_count

__all__ = ["add_parsers", "cmd_sample", "cmd_merge", "cmd_plot"]


def _config(args):
    from mcacct.engine.statistics import DIRECTIONS
    from mcacct.jobs.shards import JobConfig

    directions = DIRECTIONS if args.direction == "both" else (args.direction,)
    epsilons = tuple(e for group in args.epsilon for e in group)
    return JobConfig(problem_from_args(args), args.sigma, epsilons, args.samples, args.chunk_size, args.seed,
                     args.candidate, directions)


def cmd_sample(args) -> dict:
    """Run (or resume) one shard; returns its summary."""
    from mcacct.jobs.shards import run_shard

    if args.plan is not None:
        return _sample_plan(args)
    for flag, value in (("--out", args.out), ("--sigma", args.sigma), ("--epsilon", args.epsilon)):
        if value is None:
            raise ValueError(f"{flag} is required (or give --plan DIR of a calibration plan)")
    cfg = _config(args)
    out = run_shard(cfg, args.shard, args.num_shards, args.out, progress=not args.quiet,
                    checkpoint_seconds=args.checkpoint_seconds, max_chunks=args.max_chunks)
    out.update(device_info())
    if not args.json:
        state = "complete" if out["complete"] else "incomplete (run again to resume)"
        print(f"shard {out['shard']}/{out['num_shards']} (chunks [{out['chunks'][0]}, {out['chunks'][1]}) of "
              f"{cfg.num_chunks} per direction): {state}; {out['samples_total']:,} samples "
              f"({out['samples_resumed']:,} resumed, {out['samples_computed']:,} new in {out['seconds']:.1f}s, "
              f"{out['samples_per_second']:,.0f} samples/s) -> {out['path']}")
    return out


def _sample_plan(args) -> dict:
    """Shard ``--shard`` of a calibration plan (``mcacct calibrate --plan-only --out DIR``)."""
    from mcacct.jobs.calibration import run_plan_shard

    out = run_plan_shard(args.plan, args.shard, args.num_shards, progress=not args.quiet, max_chunks=args.max_chunks)
    out.update(device_info())
    if not args.json:
        state = "complete" if out["complete"] else "incomplete (run again to resume)"
        print(f"plan shard {out['shard']}/{out['num_shards']} (chunks [{out['chunks'][0]}, {out['chunks'][1]})): "
              f"{state}; {out['seconds']:.1f}s -> {out['path']}")
    return out


def cmd_merge(args) -> dict:
    """Merge shard directories; report delta like ``mcacct delta``."""
    from mcacct.jobs.shards import merge, write_merged

    t0 = time.perf_counter()
    res = merge(args.dirs, allow_partial=args.allow_partial)
    out = res.report(args.alpha)
    if args.out:
        out["merged_path"] = write_merged(res, args.out)
    out["seconds"] = time.perf_counter() - t0
    if not args.json:
        for r in out["results"]:
            print(f"delta({r['epsilon']:g}) ~ {r['delta_estimate']:.4g}, upper {r['delta_upper']:.4g} "
                  f"({100 * (1 - args.alpha):g}% confidence), {out['num_samples']:,} samples per direction")
        print(f"{out['files']} file(s), sigma {out['sigma']:g}, fingerprint {out['fingerprint']}, "
              f"{out['samples_per_second']:,.0f} samples/s per job-second")
        if not out["complete"]:
            print(f"partial: missing shards {out['missing_shards'] or 'none'}; unfinished "
                  f"{out['incomplete_shards'] or 'none'}; chunks not covered {out['missing_chunks']}")
        if args.out:
            print(f"merged statistics -> {out['merged_path']}")
    return out


def cmd_plot(args) -> dict:
    """Plot delta-hat(epsilon) with its confidence band from merged (or shard) statistics."""
    from mcacct.jobs.shards import merge
    from mcacct.report.plot import plot_delta_curve
    from mcacct.registry import entry_for

    res = merge(args.dirs, allow_partial=args.allow_partial)
    rep = res.report(args.alpha)
    marks = [(r["epsilon"], r["delta_estimate"], r["delta_upper"]) for r in rep["results"]]
    scheme = res.config.problem.scheme
    title = (f"{entry_for(scheme).name}: sigma={res.config.sigma:g}, n={scheme.iterations}, "
             f"b={scheme.min_sep}, {rep['num_samples']:,} samples/direction")
    curve = plot_delta_curve(res.stats, args.out, alpha=args.alpha, epsilon_max=args.epsilon_max,
                             points=args.points, title=title, marks=marks)
    out = {"out": os.path.abspath(args.out), "num_samples": rep["num_samples"], "sigma": res.config.sigma,
           "epsilon": curve["epsilon"].tolist(), "delta_estimate": curve["delta_estimate"].tolist(),
           "delta_lower": curve["delta_lower"].tolist(), "delta_upper": curve["delta_upper"].tolist()}
    if not args.json:
        print(f"wrote {out['out']}")
    return out


def add_parsers(sub) -> None:
    """Add ``sample``, ``merge`` and ``plot`` to the ``mcacct`` subcommand parsers ``sub``."""
    p = sub.add_parser("sample", help="run one shard of a Monte Carlo plan and write its statistics",
                       description="Run (or resume) shard --shard of --num-shards of the plan given by the "
                                   "scheme and Monte Carlo flags; statistics go to OUT/shard-IIIII-of-KKKKK.json "
                                   "(atomic writes, checkpoint after every chunk). Merge with `mcacct merge`.")
    p.add_argument("--shard", type=int, default=0, help="shard index in [0, num-shards) (default 0)")
    p.add_argument("--num-shards", type=int, default=1, help="number of shards of the plan (default 1)")
    p.add_argument("--plan", default=None,
                   help="directory of a calibration plan (`mcacct calibrate --plan-only --out DIR`): run shard "
                        "--shard of --num-shards of its verification, every candidate and direction; the shard "
                        "file goes to the plan directory, and the plan supplies every other flag")
    p.add_argument("--out", default=None, help="output directory (shared by all shards, or one per shard)")
    p.add_argument("--sigma", type=float, default=None, help="noise multiplier (> 0)")
    p.add_argument("--epsilon", type=float_list, nargs="+", default=None,
                   help="epsilon(s) >= 0 (space- or comma-separated)")
    p.add_argument("--samples", type=sample_count, default=100_000,
                   help="samples per direction of the whole plan, all shards together (default 100000)")
    p.add_argument("--candidate", type=int, default=None,
                   help="EVR ladder candidate index j: keys from candidate_key(seed key, j) (default: the seed "
                        "key itself, as in `mcacct delta`)")
    p.add_argument("--direction", choices=["both", "remove", "add"], default="both",
                   help="directions to sample (default both)")
    p.add_argument("--checkpoint-seconds", type=float, default=0.0,
                   help="minimum seconds between checkpoints (default 0: after every chunk)")
    p.add_argument("--max-chunks", type=int, default=None,
                   help="stop after this many new chunks (resumable), e.g. for time-limited jobs")
    add_problem_flags(p)
    p.set_defaults(func=cmd_sample)

    m = sub.add_parser("merge", help="combine shard statistics exactly and report delta",
                       description="Merge shard (or merged) statistics from directories/files exactly; refuses "
                                   "mixed configurations, duplicated shards and overlapping key ranges, and "
                                   "reports missing shards.")
    m.add_argument("dirs", nargs="+", help="shard directories or statistics files")
    m.add_argument("--out", default=None, help="write the merged statistics to OUT/merged.json")
    m.add_argument("--alpha", type=float, default=0.01, help="1 - confidence of the upper bound (default 0.01)")
    m.add_argument("--allow-partial", action="store_true",
                   help="merge even if shards are missing or unfinished (reported)")
    m.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    m.set_defaults(func=cmd_merge)

    q = sub.add_parser("plot", help="plot delta-hat(epsilon) with its confidence band (needs matplotlib)",
                       description="Plot the histogram estimate of delta(epsilon) with its Chernoff-KL band "
                                   "from merged (or shard) statistics.")
    q.add_argument("dirs", nargs="+", help="merged directory (or shard directories / statistics files)")
    q.add_argument("--out", required=True, help="figure file (png, pdf, svg, ...)")
    q.add_argument("--alpha", type=float, default=0.01, help="1 - confidence of the band (default 0.01)")
    q.add_argument("--epsilon-max", type=float, default=None, help="right end of the epsilon axis")
    q.add_argument("--points", type=int, default=200, help="grid points (default 200)")
    q.add_argument("--allow-partial", action="store_true", help="plot even if shards are missing")
    q.add_argument("--json", action="store_true", help="print the plotted arrays as JSON")
    q.set_defaults(func=cmd_plot)
