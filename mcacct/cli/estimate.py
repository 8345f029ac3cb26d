"""``mcacct delta`` and ``mcacct epsilon``: the Monte Carlo estimate for one noise multiplier, with its upper bound.

Both directions are sampled (:func:`mcacct.engine.estimate.estimate`); ``delta`` sums the loss exactly at
``--epsilon``, ``epsilon`` reads the loss histogram at ``--delta``. The reported upper bound is one-sided at
confidence ``1 - --alpha``.
"""

from __future__ import annotations

import math
import time

from mcacct.cli.flags import (add_distributed_flags, add_problem_flags, device_info, join_distributed,
                              problem_from_args, real_in, resolve_chunk_size, sample_count, scheme_json,
                              sigma_value)

__all__ = ["add_estimate_parsers", "cmd_delta", "cmd_epsilon"]


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


def add_estimate_parsers(sub) -> None:
    """Register ``mcacct delta`` and ``mcacct epsilon`` (handlers :func:`cmd_delta`, :func:`cmd_epsilon`) on the
    subcommands ``sub``."""
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
