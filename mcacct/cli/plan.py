"""``mcacct calibrate --plan-only``: what a calibration will cost, in about a minute, before it runs.

Without ``--pilot`` (and without ``--sigmas``) no pilot runs: the report is :func:`mcacct.evr.cost.estimate_cost`
(sample budget, certified top, the largest ladder, a probe of a few chunks). ``--pilot`` (or an explicit
``--sigmas`` ladder) builds the real plan (:func:`mcacct.evr.calibrate.plan_calibration`: the ladder and its
systematic terms), probes it the same way, and with ``--out DIR`` writes it for shard jobs.
"""

from __future__ import annotations

import os

from mcacct.cli.flags import device_info
from mcacct.engine.progress import format_seconds

__all__ = ["plan_only"]


def _check_out(args) -> None:
    """Refuse, before any work, an ``--out`` that cannot take a plan or has no ladder to write."""
    if args.out is None:
        return
    if not args.out or (os.path.exists(args.out) and not os.path.isdir(args.out)):
        raise ValueError(f"--out must be a directory for the plan; got {args.out!r}")
    if args.sigmas is None and not args.pilot:
        raise ValueError("--out writes a plan for shard jobs, whose ladder the pilot places: add --pilot (run "
                         "`--plan-only` without --out first to see what the pilot costs) or give --sigmas")


def _estimate_only(args, problem, baselines_bracket) -> dict:
    import jax
    from mcacct.evr.cost import estimate_cost
    cost = estimate_cost(problem, args.epsilon, args.delta, jax.random.key(args.seed + 1), num_samples=args.samples,
                         ladder_ratio=args.ladder_ratio, above=args.above, below=args.below,
                         chunk_size=args.chunk_size, bracket=baselines_bracket,
                         systematic_reserve=args.systematic_reserve)
    out = {"pilot_ran": False, "cost": cost.to_dict(),
           "total_samples": cost.pilot_samples + cost.verification_samples,
           "expected_seconds_at_most": {"pilot": cost.pilot_seconds, "verification": cost.verification_seconds,
                                        "total": cost.total_seconds,
                                        "verification_one_device": cost.verification_seconds * cost.devices,
                                        "notes": ["from a probe of a few chunks; every candidate to the end "
                                                  "(candidates that fail leave early); one_device: the same work on "
                                                  "one device of this kind (shard jobs divide it by their number)"]},
           "notes": ["no pilot ran: --pilot places the ladder and shows its systematic terms (--out needs it)"]}
    if not args.json:
        print(f"plan: {cost.num_samples:,} samples per direction per candidate, base delta {cost.base_delta:.4g}, "
              f"top sigma {cost.top_sigma:.6g} ({cost.top_certifier})")
        print(f"cost: {cost.summary()}")
        print(f"      pilot ~{format_seconds(cost.pilot_seconds)}, verification at most "
              f"~{format_seconds(cost.verification_seconds)} (probe took {format_seconds(cost.probe_seconds)})")
    return out


def _with_ladder(args, problem, bracket, baselines: dict | None = None) -> dict:
    import jax
    from mcacct.evr.calibrate import plan_calibration
    from mcacct.evr.cost import probe_rate
    plan = plan_calibration(problem, args.epsilon, args.delta, jax.random.key(args.seed), num_samples=args.samples,
                            ladder_ratio=args.ladder_ratio, above=args.above, below=args.below,
                            chunk_size=args.chunk_size, progress=not args.quiet, sigmas=args.sigmas,
                            bracket=bracket, systematic_reserve=args.systematic_reserve,
                            announce_verification=False)  # the probe below states the time: one figure
    out = {"pilot_ran": args.sigmas is None,
           "plan": {k: getattr(plan, k) for k in ("epsilon", "target_delta", "base_delta", "num_samples",
                                                  "top_sigma", "top_certifier", "pilot_sigma", "chunk_size")},
           "ladder": list(plan.ladder), "overall_delta": plan.overall_delta,
           "systematic": list(plan.systematic), "systematic_reserve": plan.systematic_reserve,
           "dropped": plan.dropped, "pilot_samples_drawn": plan.pilot_samples_drawn,
           "pilot_seconds": plan.pilot_seconds, "notes": []}
    if not plan.ladder:
        out["notes"].append(_empty_ladder_note(args, plan))
    devices = jax.local_device_count()
    chunks = -(-plan.num_samples // plan.chunk_size) if plan.ladder else 0  # no candidate: nothing is drawn
    out["verification"] = {"chunks": chunks, "samples_drawn": chunks * plan.chunk_size,
                           "evaluations_at_most": 2 * plan.num_samples * len(plan.ladder)}
    out["total_samples"] = plan.pilot_samples_drawn + chunks * plan.chunk_size  # pilot + verification draws
    if plan.ladder:
        rate, probe_seconds, _ = probe_rate(problem, plan.ladder, plan.epsilon, jax.random.key(args.seed + 1),
                                         plan.chunk_size)
        out["probe"] = {"draws_per_second": rate, "draws_per_second_per_device": rate / devices,
                        "devices": devices, "candidates": len(plan.ladder), "seconds": probe_seconds}
        out["expected_seconds_at_most"] = {"verification": chunks * plan.chunk_size / rate,
                                           "verification_one_device": chunks * plan.chunk_size * devices / rate,
                                           "notes": ["every candidate to the end; candidates that fail leave "
                                                     "early; one_device: the same work on one device of this kind "
                                                     "(shard jobs divide it by their number)"]}
    if args.out:
        from mcacct.jobs.calibration import write_plan
        out["plan_path"] = write_plan(args.out, plan, problem, baselines)
    if not args.json:
        print(f"plan: {out['total_samples']:,} samples in all (pilot {plan.pilot_samples_drawn:,}, verification "
              f"{chunks * plan.chunk_size:,}, shared by both directions and every candidate)")
        if plan.ladder:
            print(f"plan: {plan.num_samples:,} samples per direction, {len(plan.ladder)} candidates "
                  f"[{plan.ladder[0]:.6g} .. {plan.ladder[-1]:.6g}], {chunks:,} chunks of {plan.chunk_size}")
        else:
            print("plan: 0 candidates to verify (note below): the verification draws no Monte Carlo sample")
        for note in out["notes"]:
            print(f"note: {note}")
        if "probe" in out:
            print(f"probe: {out['probe']['draws_per_second']:,.0f} draws/s on {devices} device(s); verification "
                  f"at most {format_seconds(out['expected_seconds_at_most']['verification'])} here, "
                  f"{format_seconds(out['expected_seconds_at_most']['verification_one_device'])} on one device")
        if args.out:
            print(f"wrote {out['plan_path']}; run `mcacct sample --plan {args.out} --shard i --num-shards k`, then "
                  f"`mcacct calibrate --from {args.out}`")
    return out


def _empty_ladder_note(args, plan) -> str:
    """Why a plan has no candidate to verify (every one dropped for its systematic term, or, with ``--sigmas``, at
    or above the certified top) and what the calibration then returns."""
    why = []
    if plan.dropped:
        why.append(f"{plan.dropped} candidate(s) dropped because their systematic term exceeds "
                   f"{plan.systematic_reserve:g} of the target delta (give larger sigmas, or raise "
                   "--systematic-reserve, at most 0.5)")
    if args.sigmas is not None and any(v >= plan.top_sigma for v in args.sigmas):
        why.append(f"the {'other ' if plan.dropped else ''}candidates of --sigmas are at or above the certified top "
                   f"sigma {plan.top_sigma:.6g}, which needs no Monte Carlo")
    return (f"no candidate to verify: {'; '.join(why) or 'the ladder is empty'}. The calibration would return the "
            f"certified top sigma {plan.top_sigma:.6g} ({plan.top_certifier}) without drawing a sample")


def plan_only(args, problem, baselines) -> dict:
    """``--plan-only``: the cost estimate (no pilot), or with ``--pilot`` / ``--sigmas`` the plan itself, its
    samples and, from a probe of a few chunks, its expected wall time; ``--out DIR`` also writes the plan.

    ``baselines()`` gives ``(report, bracket)`` of the scheme's PLD baselines (:mod:`mcacct.cli.commands`
    computes them, only when a pilot runs: the bracket places the pilot's grid). With ``--out`` the report's
    baselines go into the plan file, so that ``calibrate --from`` reports them without computing them again.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``calibrate``.
    problem : Problem
        The problem of the flags.
    baselines : callable
        Called without arguments, only when a pilot runs (``--pilot`` without ``--sigmas``).

    Returns
    -------
    dict
        The report, with the device information.

    Raises
    ------
    ValueError
        An ``--out`` that is not a directory path, or ``--out`` without ``--pilot`` or ``--sigmas``; or an
        argument the calibration refuses.
    """
    _check_out(args)
    if args.sigmas is None and not args.pilot:  # no baselines either: they would only place the probe's ladder
        out = _estimate_only(args, problem, None)
    else:  # with --sigmas the baselines would place nothing: `calibrate --from` computes them for its report
        base, bracket = baselines() if args.sigmas is None else (None, None)
        out = _with_ladder(args, problem, bracket, base)
    out.update(device_info())
    return out
