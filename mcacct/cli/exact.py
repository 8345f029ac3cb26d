r"""``mcacct calibrate`` for a scheme with an exact PLD: the deterministic PLD accountant instead of Monte Carlo.

Under ``--method auto`` (the default) a scheme whose privacy curve the PLD accountant gives exactly (its
``exact_pld``: b-min-sep with ``--min-sep 1``, cyclic Poisson with ``--public-phase`` whose class-0 columns are
complete) is calibrated by :func:`mcacct.pld.pld_calibrate` in seconds, as :func:`mcacct.get_noise_multiplier`
does; ``--method monte-carlo`` runs Estimate-Verify-Release anyway, ``--method pld`` refuses a scheme without an
exact PLD. Monte Carlo flags given on the PLD route are refused, naming ``--method monte-carlo``.
"""

from __future__ import annotations

import dataclasses

from mcacct.cli.flags import device_info, refuse_options, scheme_json

__all__ = ["METHODS", "MONTE_CARLO_FLAGS", "calibrate_exact"]

#: ``--method`` choices (:data:`mcacct.noise_multiplier.METHODS`).
METHODS = ("auto", "pld", "monte-carlo")
#: calibrate's flags that only a Monte Carlo calibration reads.
MONTE_CARLO_FLAGS = ("--samples", "--ladder-ratio", "--above", "--below", "--systematic-reserve", "--sigmas",
                     "--plan-only", "--pilot", "--out", "--seed", "--chunk-size", "--coordinator-address",
                     "--num-processes", "--process-id", "--loss-kernel", "--no-skip")


def calibrate_exact(args, problem) -> dict | None:
    """The report of the PLD route for ``problem``, or ``None`` when the calibration goes to Monte Carlo.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``calibrate`` (``--method``, ``--epsilon``, ``--delta``, ``--json``).
    problem : Problem
        The problem of the flags.

    Returns
    -------
    dict or None
        The report, with ``sigma`` from the PLD accountant and ``overall_delta`` its certified delta at that
        sigma; ``None`` with ``--method monte-carlo`` or for a scheme without an exact PLD under ``--method auto``.

    Raises
    ------
    ValueError
        ``--method pld`` for a scheme without an exact PLD, or a Monte Carlo flag on the PLD route.
    """
    from mcacct import pld
    method = getattr(args, "method", "auto")
    if method == "monte-carlo":
        return None
    spec = problem.scheme.exact_pld(problem.strategy)
    if spec is None:
        if method == "pld":
            raise ValueError("--method pld needs a scheme with an exact PLD (--min-sep 1, or cyclic-poisson with "
                             "--public-phase and complete columns); this one has none: use --method auto or "
                             "monte-carlo")
        return None
    refuse_options(args, MONTE_CARLO_FLAGS, "to a scheme with an exact PLD, which the PLD accountant calibrates "
                                            "(add --method monte-carlo to calibrate it by Monte Carlo)")
    sigma = float(pld.pld_calibrate(spec, args.epsilon, args.delta))
    at = dataclasses.replace(spec, sigma=sigma)
    res = pld.pld_delta(at, args.epsilon, estimate_error=False)  # the certified delta at the returned sigma
    out = {"sigma": sigma, "method": "pld", "verified": True, "epsilon": args.epsilon, "delta": args.delta,
           "overall_delta": float(res.delta), "num_samples": 0, "samples_used": 0, "candidates": [],
           "mechanism": {"type": type(at).__name__,
                         **{k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(at).items()}},
           "note": "exact PLD (pessimistic FFT accountant): deterministic, no Monte Carlo; --method monte-carlo "
                   "runs Estimate-Verify-Release instead",
           "scheme": scheme_json(problem), **device_info()}
    if not args.json:
        print(f"sigma = {sigma:.6g}  (PLD accountant: the scheme's exact privacy curve, no Monte Carlo)")
        print(f"certifies (epsilon, delta) = ({args.epsilon:g}, {out['overall_delta']:.4g})  "
              f"[target delta {args.delta:g}]")
    return out
