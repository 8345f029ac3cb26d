"""``mcacct sample``, ``mcacct merge`` and ``mcacct plot``: sharded jobs and their exact merge.

Registered by :func:`mcacct.cli.commands.build_parser` through :func:`add_parsers`::

    mcacct sample --shard 3 --num-shards 8 --out runs/a [--scheme NAME] <scheme flags> --sigma 1.1 \\
        --epsilon 2 --samples 10000000
    mcacct merge runs/a [runs/b ...] [--out runs/merged] [--json]
    mcacct plot runs/merged --out delta.png

Every flag is checked before anything is written or computed (``error: ...``, exit status 2): ranges, flags that
do not apply (``--plan`` fixes the problem and the Monte Carlo plan), output paths, and a shard directory that
already holds another configuration or another split.
"""

from __future__ import annotations

import os
import time

from mcacct.cli.flags import (add_problem_flags, device_info, float_list, given_options, int_in, problem_options,
                              problem_from_args, real_in, refuse_options, resolve_chunk_size, sample_count)

__all__ = ["add_parsers", "cmd_sample", "cmd_merge", "cmd_plot", "PLAN_FIXED_OPTIONS"]

#: ``sample``'s own options that a calibration plan fixes (refused with ``--plan``; the scheme flags, ``--scheme``,
#: ``--seed``, ``--chunk-size`` and ``--dtype`` are refused too).
PLAN_FIXED_OPTIONS = ("--out", "--sigma", "--epsilon", "--samples", "--candidate", "--direction")
#: ``mcacct.jobs.shards.CANDIDATE_MAX`` (``jax.random.fold_in`` takes a uint32), spelled out here so that building
#: the parsers imports no JAX.
CANDIDATE_MAX = 2**32 - 1


def _config(args):
    from mcacct.statistics.accumulators import DIRECTIONS
    from mcacct.jobs.shards import JobConfig

    directions = DIRECTIONS if args.direction == "both" else (args.direction,)
    epsilons = tuple(e for group in args.epsilon for e in group)
    problem = problem_from_args(args)
    return JobConfig(problem, args.sigma, epsilons, args.samples, resolve_chunk_size(args, problem), args.seed,
                     args.candidate, directions)


def _check_shards(shard: int, num_shards: int, num_chunks: int) -> None:
    """``--num-shards`` in ``[1, chunks]`` (a shard without a chunk is refused) and ``--shard`` in
    ``[0, num_shards - 1]``."""
    if not 1 <= num_shards <= num_chunks:
        raise ValueError(f"--num-shards must be in [1, chunks={num_chunks}]; got {num_shards}")
    if not 0 <= shard < num_shards:
        raise ValueError(f"--shard must be in [0, {num_shards - 1}]; got {shard}")


def _check_out_dir(flag: str, path: str | None) -> None:
    """A directory argument: not empty (which would write into the working directory unasked), and, when the
    path exists, a directory."""
    if path is None:
        return
    if not path.strip():
        raise ValueError(f"{flag} must name a directory; got {path!r}")
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{flag} {path} is not a directory")


def _refuse_plan_fixed(args) -> None:
    """With ``--plan``: every problem and Monte Carlo flag is the plan's; refuse those given."""
    from mcacct.cli.schemes import all_flags
    why = "with --plan (the plan fixes it)"
    refuse_options(args, PLAN_FIXED_OPTIONS + problem_options(), why)
    # arguments that did not come from the command line (no record of the options given): a value other than
    # the parser's "not given" still names its flag
    if not given_options(args):
        for opt, dest in (("--out", "out"), ("--sigma", "sigma"), ("--epsilon", "epsilon"),
                          ("--candidate", "candidate")):
            if getattr(args, dest, None) is not None:
                raise ValueError(f"{opt} does not apply {why}")
        for f in all_flags():
            if getattr(args, f.dest, None) not in (None, False):
                raise ValueError(f"{f.option} does not apply {why}")


def cmd_sample(args) -> dict:
    """Run (or resume) one shard; returns its summary. Everything is checked before the shard file is written.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``sample``.

    Returns
    -------
    dict
        The shard's summary (:func:`mcacct.jobs.shards.run_shard`, or
        :func:`mcacct.jobs.calibration.run_plan_shard` with ``--plan``) with the device information.

    Raises
    ------
    ValueError
        A missing ``--out``, ``--sigma`` or ``--epsilon`` (without ``--plan``), a flag the plan fixes, a shard
        index or count out of range, an output directory that cannot hold the shard, or a chunk that left the
        kernel's numeric range (the shard stays resumable).
    """
    from mcacct.engine.estimate import certification_notes
    from mcacct.jobs.shards import run_shard

    if args.plan is not None:
        return _sample_plan(args)
    for flag, value in (("--out", args.out), ("--sigma", args.sigma), ("--epsilon", args.epsilon)):
        if value is None:
            raise ValueError(f"{flag} is required (or give --plan DIR of a calibration plan)")
    _check_out_dir("--out", args.out)
    cfg = _config(args)
    _check_shards(args.shard, args.num_shards, cfg.num_chunks)
    try:
        out = run_shard(cfg, args.shard, args.num_shards, args.out, progress=not args.quiet,
                        checkpoint_seconds=args.checkpoint_seconds, max_chunks=args.max_chunks)
    except FloatingPointError as err:  # a chunk left the kernel's numeric range: the run stops, resumable
        raise ValueError(str(err)) from err
    except OSError as err:
        raise ValueError(f"--out {args.out}: cannot write the shard file ({err})") from err
    out.update(device_info())
    notes = certification_notes(cfg.problem.dtype, cfg.directions)  # what a merge of this plan will say
    out["notes"] = list(notes)
    if not args.json:
        state = "complete" if out["complete"] else "incomplete (run again to resume)"
        print(f"shard {out['shard']}/{out['num_shards']} (chunks [{out['chunks'][0]}, {out['chunks'][1]}) of "
              f"{cfg.num_chunks} per direction): {state}; {out['samples_total']:,} samples "
              f"({out['samples_resumed']:,} resumed, {out['samples_computed']:,} new in {out['seconds']:.1f}s, "
              f"{out['samples_per_second']:,.0f} samples/s) -> {out['path']}")
        for note in notes:
            print(f"note: {note}")
    return out


def _sample_plan(args) -> dict:
    """Shard ``--shard`` of a calibration plan (``mcacct calibrate --plan-only --out DIR``)."""
    from mcacct.jobs.calibration import load_plan, run_plan_shard

    _refuse_plan_fixed(args)
    _check_out_dir("--plan", args.plan)
    plan = load_plan(args.plan)[0]
    _check_shards(args.shard, args.num_shards, -(-plan.num_samples // plan.chunk_size))
    try:
        out = run_plan_shard(args.plan, args.shard, args.num_shards, progress=not args.quiet,
                             max_chunks=args.max_chunks, checkpoint_seconds=args.checkpoint_seconds)
    except OSError as err:
        raise ValueError(f"--plan {args.plan}: cannot write the shard file ({err})") from err
    out.update(device_info())
    if not args.json:
        state = "complete" if out["complete"] else "incomplete (run again to resume)"
        print(f"plan shard {out['shard']}/{out['num_shards']} (chunks [{out['chunks'][0]}, {out['chunks'][1]})): "
              f"{state}; {out['seconds']:.1f}s{_steady(out)} -> {out['path']}")
    return out


def _steady(out: dict) -> str:
    rate = out.get("steady_draws_per_second")
    return "" if rate is None else f" ({rate:,.0f} draws/s after the first group)"


def _scheme(problem) -> dict:
    """The report's ``scheme`` of the merged statistics' problem: its registry ``name`` and its fields (docs/json.md;
    the job file's ``config.scheme`` names the class instead)."""
    from mcacct.jobs.problem_file import scheme_to_dict
    from mcacct.schemes.registry import entry_for
    entry = entry_for(problem.scheme)
    return {"name": entry.name if entry is not None else type(problem.scheme).__name__,
            **scheme_to_dict(problem.scheme), "c_col": list(problem.strategy.c_col), "dtype": problem.dtype}


def cmd_merge(args) -> dict:
    """Merge shard directories; report delta like ``mcacct delta`` (with its notes when not a certificate) and
    how the files were checked (digest, or MAC under ``MCACCT_SHARD_KEY``).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``merge``.

    Returns
    -------
    dict
        :meth:`mcacct.jobs.merge.MergeResult.report` with the scheme, ``seconds`` and, with ``--out``,
        ``merged_path``.

    Raises
    ------
    ValueError
        Files that :func:`mcacct.jobs.merge.merge` refuses, or an ``--out`` that cannot be written.
    """
    from mcacct.jobs.integrity import describe
    from mcacct.jobs.merge import merge, write_merged

    _check_out_dir("--out", args.out)
    t0 = time.perf_counter()
    res = merge(args.dirs, allow_partial=args.allow_partial)
    out = res.report(args.alpha)
    out["scheme"] = _scheme(res.config.problem)  # by registry name, as every report (config.scheme: by class)
    if args.out:
        try:
            out["merged_path"] = write_merged(res, args.out)
        except OSError as err:
            raise ValueError(f"--out {args.out}: cannot write the merged statistics ({err})") from err
    out["seconds"] = time.perf_counter() - t0
    if not args.json:
        dirs = out["directions_run"]
        which = "" if len(dirs) > 1 else f", {dirs[0]} direction only"
        for r in out["results"]:
            print(f"delta({r['epsilon']:g}) ~ {r['delta_estimate']:.4g}, upper {r['delta_upper']:.4g} "
                  f"({100 * (1 - args.alpha):g}% confidence), {out['num_samples']:,} samples per direction{which}")
        print(f"{out['files']} file(s), sigma {out['sigma']:g}, fingerprint {out['fingerprint']}, "
              f"{out['samples_per_second']:,.0f} samples/s per job-second")
        print(f"files checked by {describe(out['integrity'])}")
        if not out["complete"]:
            print(f"partial: missing shards {out['missing_shards'] or 'none'}; unfinished "
                  f"{out['incomplete_shards'] or 'none'}; chunks not covered {out['missing_chunks']}")
        for note in out["notes"]:
            print(f"note: {note}")
        if args.out:
            print(f"merged statistics -> {out['merged_path']}")
    return out


def cmd_plot(args) -> dict:
    """Plot delta-hat(epsilon) with its confidence band from merged (or shard) statistics. The figure path (its
    directory and format) is checked before the statistics are read.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``plot``.

    Returns
    -------
    dict
        The figure's path, the scheme and setting, and the plotted arrays (``epsilon``, ``delta_estimate``,
        ``delta_lower``, ``delta_upper``) with the resolution ``floor``.

    Raises
    ------
    ValueError
        An ``--out`` that is no figure path or cannot be written, or files that the merge refuses.
    """
    from mcacct.jobs.merge import merge
    from mcacct.schemes.registry import entry_for
    from mcacct.report.plot import check_figure_path, curve_title, plot_delta_curve

    check_figure_path(args.out, "--out")
    res = merge(args.dirs, allow_partial=args.allow_partial)
    rep = res.report(args.alpha)
    marks = [(r["epsilon"], r["delta_estimate"], r["delta_upper"]) for r in rep["results"]]
    scheme = res.config.problem.scheme
    dirs = rep["directions_run"]
    title = curve_title(entry_for(scheme).name, scheme, res.config.sigma, rep["num_samples"], dirs,
                        rep["certified"])
    try:
        curve = plot_delta_curve(res.stats, args.out, alpha=args.alpha, epsilon_max=args.epsilon_max,
                                 points=args.points, title=title, marks=marks, systematic=rep["systematic_delta"])
    except OSError as err:
        raise ValueError(f"--out {args.out}: cannot write the figure ({err})") from err
    out = {"out": os.path.abspath(args.out), "scheme": _scheme(res.config.problem),
           "num_samples": rep["num_samples"], "sigma": res.config.sigma,
           "directions_run": dirs, "certified": rep["certified"], "notes": list(rep["notes"]),
           "floor": curve["floor"], "epsilon": curve["epsilon"].tolist(),
           "delta_estimate": curve["delta_estimate"].tolist(), "delta_lower": curve["delta_lower"].tolist(),
           "delta_upper": curve["delta_upper"].tolist()}
    if not args.json:
        print(f"wrote {out['out']}")
        for note in rep["notes"]:
            print(f"note: {note}")
    return out


def add_parsers(sub) -> None:
    """Add ``sample``, ``merge`` and ``plot`` to the ``mcacct`` subcommand parsers ``sub``.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The set to add to; the handlers are :func:`cmd_sample`, :func:`cmd_merge` and :func:`cmd_plot`.
    """
    p = sub.add_parser("sample", help="run one shard of a Monte Carlo plan and write its statistics",
                       description="Run (or resume) shard --shard of --num-shards of the plan given by the "
                                   "scheme and Monte Carlo flags; statistics go to OUT/shard-IIIII-of-KKKKK.json "
                                   "(atomic writes, checkpoint after every chunk). Merge with `mcacct merge`. "
                                   "A directory holds the shards of one plan and one split.")
    p.add_argument("--shard", type=int_in(0), default=0, help="shard index in [0, num-shards) (default 0)")
    p.add_argument("--num-shards", type=int_in(1), default=1,
                   help="number of shards of the plan, in [1, chunks] (default 1)")
    p.add_argument("--plan", default=None,
                   help="directory of a calibration plan (`mcacct calibrate --plan-only --out DIR`): run shard "
                        "--shard of --num-shards of its verification, every candidate and direction; the shard "
                        "file goes to the plan directory, and the plan fixes every problem and Monte Carlo flag "
                        "(giving one is an error); --max-chunks, --checkpoint-seconds, --json, --quiet apply")
    p.add_argument("--out", default=None, help="output directory (shared by all shards, or one per shard)")
    p.add_argument("--sigma", type=real_in(0, low_open=True), default=None, help="noise multiplier (> 0)")
    p.add_argument("--epsilon", type=float_list, nargs="+", default=None,
                   help="epsilon(s) >= 0 (space- or comma-separated)")
    p.add_argument("--samples", type=sample_count, default=100_000,
                   help="samples per direction of the whole plan, all shards together (default 100000)")
    p.add_argument("--candidate", type=int_in(0, CANDIDATE_MAX), default=None,
                   help="EVR ladder candidate index j in [0, 2^32 - 1]: keys from candidate_key(seed key, j) "
                        "(default: the seed key itself, as in `mcacct delta`)")
    p.add_argument("--direction", choices=["both", "remove", "add"], default="both",
                   help="directions to sample (default both); a run of one direction bounds that direction only "
                        "and is reported as not certified")
    p.add_argument("--checkpoint-seconds", type=real_in(0), default=0.0,
                   help="minimum seconds between checkpoints, >= 0 (default 0: after every chunk)")
    p.add_argument("--max-chunks", type=int_in(1), default=None,
                   help="stop after this many new chunks, >= 1 (resumable), e.g. for time-limited jobs")
    add_problem_flags(p)
    p.set_defaults(func=cmd_sample)

    m = sub.add_parser("merge", help="combine shard statistics exactly and report delta",
                       description="Merge shard (or merged) statistics from directories/files exactly; refuses "
                                   "mixed configurations, duplicated shards, overlapping key ranges, files whose "
                                   "digest does not match their content and inconsistent statistics, and reports "
                                   "missing shards. With MCACCT_SHARD_KEY set (a secret of >= 16 bytes shared with "
                                   "the shard jobs), every file must carry a valid HMAC under it; unsigned files "
                                   "are refused (docs/scale_out.md, 'Integrity').")
    m.add_argument("dirs", nargs="+", help="shard directories or statistics files")
    m.add_argument("--out", default=None,
                   help="write the merged statistics to OUT/merged.json (OUT: a directory, created if needed)")
    m.add_argument("--alpha", type=real_in(0, 1, low_open=True, high_open=True), default=0.01,
                   help="1 - confidence of the upper bound, in (0, 1) (default 0.01)")
    m.add_argument("--allow-partial", action="store_true",
                   help="merge even if shards are missing or unfinished (reported)")
    m.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    m.set_defaults(func=cmd_merge)

    q = sub.add_parser("plot", help="plot delta-hat(epsilon) with its confidence band (needs matplotlib)",
                       description="Plot the histogram estimate of delta(epsilon) with its Chernoff-KL band "
                                   "from merged (or shard) statistics; values below the resolution floor 0.5/N "
                                   "(N: samples per direction) are drawn on it, a dashed line.")
    q.add_argument("dirs", nargs="+", help="merged directory (or shard directories / statistics files)")
    q.add_argument("--out", required=True,
                   help="figure file (png, pdf, svg, ...: the extension picks the format; its directory must exist)")
    q.add_argument("--alpha", type=real_in(0, 1, low_open=True, high_open=True), default=0.01,
                   help="1 - confidence of the band, in (0, 1) (default 0.01)")
    q.add_argument("--epsilon-max", type=real_in(0, low_open=True), default=None,
                   help="right end of the epsilon axis (> 0)")
    q.add_argument("--points", type=int_in(2, 100_000), default=200,
                   help="grid points, in [2, 100000] (default 200)")
    q.add_argument("--allow-partial", action="store_true", help="plot even if shards are missing")
    q.add_argument("--json", action="store_true", help="print the plotted arrays as JSON")
    q.set_defaults(func=cmd_plot)
