"""``mcacct dpis``: privacy accounting for DPIS (Wei, Bao, Xiao & Yang 2022, arXiv:2210.09634; :mod:`mcacct.dpis`).

* ``mcacct dpis epsilon --run FILE.json --delta D`` accounts a run (the JSON format of
  :mod:`mcacct.dpis.runfile`) with the PLD accountant (both directions) and the paper's RDP accountant.
* ``mcacct dpis calibrate --dataset-size N --batch-size B --epochs E --epsilon EPS --delta D ...`` prints the
  pre-committed noise plan from the PLD accountant next to the same plan from the RDP accountant and the paper's
  adaptive schedule (Sec. 4.2) under RDP.

Handlers return a dict (printed as JSON by the main entry point with ``--json``) and raise ``ValueError`` for bad
input.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from mcacct.cli.flags import int_in, real_in, refuse_options
from mcacct.engine.progress import stage
from mcacct.core.validate import check_int, check_real, parse_floats

__all__ = ["add_dpis_parser", "cmd_dpis_epsilon", "cmd_dpis_calibrate", "expand_kappas"]

_NOTE = ("the composition of the run's values as if fixed in advance; for sigma_g or k_tilde chosen from released "
         "values this is the realized-parameter epsilon, and the guarantee is that of the plan the run followed "
         "(mcacct dpis calibrate; docs/dpis.md)")
_PAPER_NOTE = ("these sigma_g values are computed from the anticipated kappas and are not the ones to train with: at "
               "the start of each epoch e recompute sigma_g from the realized kappa_e = k_tilde_e / (n_tilde * C) "
               "(mcacct.dpis.paper_schedule on the realized kappas of epochs 0..e, with this order and "
               "iterations_per_epoch = T); T, N and this order are fixed public constants, never recomputed from "
               "the private dataset size")


def add_dpis_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``dpis`` with the sub-commands ``epsilon`` and ``calibrate``.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The set to add to.

    Returns
    -------
    argparse.ArgumentParser
        The ``dpis`` parser; its sub-commands' ``func`` are :func:`cmd_dpis_epsilon` and :func:`cmd_dpis_calibrate`.
    """
    p = subparsers.add_parser("dpis", help="DPIS (DP-SGD with importance sampling): epsilon of a run, noise plan",
                              description="Privacy accounting for DPIS (Wei, Bao, Xiao & Yang 2022, "
                                          "arXiv:2210.09634) with the PLD accountant and the paper's RDP one.")
    sub = p.add_subparsers(dest="dpis_command", required=True)

    e = sub.add_parser("epsilon", help="epsilon(delta) of a DPIS run given as a JSON file",
                       description="epsilon(delta) of a DPIS run (max over add/remove) with the PLD accountant and "
                                   "the paper's RDP accountant (eq. 13 + Lemma 2.5). FILE: {\"n_tilde\", "
                                   "\"batch_size\", \"clip\", \"epochs\": [{\"iterations\", \"k_tilde\", "
                                   "\"sigma_g\"}, ...], optional \"sigma_n\", \"sigma_k\", \"p_k\", \"k_releases\", "
                                   "\"iterations_per_epoch\", \"k_star_releases\", \"rejection_k\"}; with "
                                   "\"sigma_k\" and entries of several iterations, give \"k_releases\" or "
                                   "\"iterations_per_epoch\" (docs/dpis.md).")
    e.add_argument("--run", required=True, metavar="FILE.json", help="the run's per-epoch (or per-iteration) values")
    e.add_argument("--delta", type=real_in(0, 1, low_open=True, high_open=True), required=True, help="delta in (0, 1)")
    e.add_argument("--accountant", choices=("both", "pld", "rdp"), default="both", help="default both")
    e.add_argument("--value-discretization-interval", type=real_in(0, 0.1, low_open=True), default=1e-4, metavar="H",
                   help="PLD loss grid spacing (default 1e-4; not with --accountant rdp)")
    e.add_argument("--no-error-estimate", action="store_true",
                   help="skip the PLD h/2 re-run (not with --accountant rdp)")
    e.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    e.add_argument("--quiet", action="store_true", help="no progress on stderr")
    e.set_defaults(func=cmd_dpis_epsilon)

    c = sub.add_parser("calibrate", help="noise plan for a target (epsilon, delta): PLD vs RDP",
                       description="Smallest pre-committed DPIS noise plan meeting (epsilon, delta), from the PLD "
                                   "accountant and from the paper's RDP accountant, and the paper's adaptive "
                                   "schedule under RDP (a Renyi filter at a fixed order). At run time: floor k_tilde "
                                   "at kappa_e*N*C and use sigma_g = s_e * k_tilde / (n_tilde * C).")
    c.add_argument("--dataset-size", type=int_in(1), required=True, help="public planning size N (>= 1)")
    c.add_argument("--batch-size", type=real_in(0, low_open=True), required=True, help="expected batch size b in (0, N]")
    c.add_argument("--epochs", type=int_in(1), required=True, help="number of epochs E (>= 1)")
    c.add_argument("--iterations-per-epoch", type=int_in(1), default=None, help="T (default floor(N / b))")
    c.add_argument("--epsilon", type=real_in(0, low_open=True), required=True, help="target epsilon (> 0)")
    c.add_argument("--delta", type=real_in(0, 1, low_open=True, high_open=True), required=True, help="target delta in (0, 1)")
    c.add_argument("--clip", type=real_in(0, low_open=True), default=1.0, help="clip bound C (> 0; only scales the k_tilde floors)")
    c.add_argument("--kappas", default="1", metavar="K1,K2,...",
                   help="anticipated k_tilde / (N C) per epoch, in (0, 1]: E values, or m values with m dividing E "
                        "(each repeated E/m times); default 1 (worst case = Poisson DP-SGD)")
    c.add_argument("--rule", choices=("constant_sigma", "constant_multiplier"), default="constant_sigma",
                   help="plan shape: equal anticipated sigma_g (default) or equal effective multiplier")
    c.add_argument("--sigma-n", type=real_in(0), default=None, help="noise std of N~ (default 0.02 N; 0: not released)")
    c.add_argument("--sigma-k", type=real_in(0), default=None, help="sigma_K of K' (default 0.02 N; 0: not released)")
    c.add_argument("--p-k", type=real_in(0, 1, low_open=True), default=None,
                   help="sampling rate of K' (default b / N; not with --sigma-k 0)")
    c.add_argument("--k-star-releases", type=int_in(0), default=0, help="adaptive-clipping releases K* (default 0)")
    c.add_argument("--rejection-k", type=real_in(1), default=None, help="rejection-sampling multiplier k (>= 1)")
    c.add_argument("--a-e", type=real_in(0, 1), default=1.0,
                   help="phase divider a_E of the paper's schedule (default 1; not with --accountant pld)")
    c.add_argument("--accountant", choices=("both", "pld", "rdp"), default="both", help="default both")
    c.add_argument("--value-discretization-interval", type=real_in(0, 0.1, low_open=True), default=1e-3, metavar="H",
                   help="PLD loss grid spacing of the calibration (default 1e-3; not with --accountant rdp)")
    c.add_argument("--rtol", type=real_in(0, 0.5, low_open=True, high_open=True), default=1e-3,
                   help="relative bracket width of the PLD bisection (default 1e-3; not with --accountant rdp)")
    c.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    c.add_argument("--quiet", action="store_true", help="no progress on stderr")
    c.set_defaults(func=cmd_dpis_calibrate)
    return p


def cmd_dpis_epsilon(args: argparse.Namespace) -> dict:
    """``mcacct dpis epsilon``: epsilon at ``--delta`` of the run in ``--run``, by the PLD and/or the RDP accountant.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``dpis epsilon``.

    Returns
    -------
    dict
        The report: ``delta``, ``iterations``, ``epochs``, ``events``, ``epsilon_pld`` and ``pld`` and/or
        ``epsilon_rdp`` and ``rdp_order``; ``certified`` is false (the values are the run's realized ones).

    Raises
    ------
    ValueError
        A PLD flag with ``--accountant rdp``, or a run file that cannot be read (named).
    """
    from mcacct.dpis import dpis_epsilon, dpis_events, dpis_rdp_epsilon, load_run
    from mcacct.pld.vocabulary import event_to_dict
    if args.accountant == "rdp":
        refuse_options(args, ("--value-discretization-interval", "--no-error-estimate"),
                       "with --accountant rdp (it sets the PLD accountant; use --accountant pld or both)")
    delta = check_real("delta", args.delta, low=0.0, high=1.0, low_open=True, high_open=True)
    run = load_run(args.run)
    out: dict = {"delta": delta, "iterations": run.iterations, "epochs": len(run.epochs),
                 "events": [event_to_dict(e) for e in dpis_events(run)],
                 "certified": False, "notes": [_NOTE]}
    if args.accountant in ("both", "pld"):
        with stage("dpis epsilon: PLD accounting", not args.quiet):
            r = dpis_epsilon(run, delta, value_discretization_interval=args.value_discretization_interval,
                             estimate_error=not args.no_error_estimate)
        out["epsilon_pld"] = r.epsilon
        out["pld"] = {k: v for k, v in dataclasses.asdict(r).items() if k != "events"}  # floats: strict JSON
    if args.accountant in ("both", "rdp"):
        rr = dpis_rdp_epsilon(run, delta)
        out["epsilon_rdp"], out["rdp_order"] = rr.epsilon, rr.order
    if not args.json:
        parts = []
        if "epsilon_pld" in out:
            parts.append(f"PLD epsilon = {out['epsilon_pld']:.6g}")
        if "epsilon_rdp" in out:
            parts.append(f"RDP epsilon = {out['epsilon_rdp']:.6g} (order {out['rdp_order']})")
        print(f"DPIS run: {run.iterations} iterations in {len(run.epochs)} entries, delta = {delta:g}: "
              + "; ".join(parts))
        print(f"  {len(out['events'])} distinct events; note: {_NOTE}")
    return out


def expand_kappas(value: Any, epochs: int) -> tuple[float, ...]:
    """``--kappas``: E values, or m values with m dividing E, each repeated E/m times.

    Parameters
    ----------
    value : Any
        The values, a comma-separated string or a sequence of numbers.
    epochs : int
        The number of epochs ``E``.

    Returns
    -------
    tuple of float
        ``E`` values: each of the ``m`` given repeated ``E / m`` times in a row.

    Raises
    ------
    ValueError
        Naming ``kappas`` if an item is not a number, or their count is 0 or does not divide ``E``.
    """
    vals = parse_floats("kappas", value)
    if not vals or epochs % len(vals):
        raise ValueError(f"kappas must hold E = {epochs} values or a number of values dividing E; got {len(vals)}")
    return tuple(v for v in vals for _ in range(epochs // len(vals)))


def _aux(value: float | None, n: int, name: str) -> float | None:
    if value is None:
        return 0.02 * n
    v = check_real(name, value, low=0.0)
    return None if v == 0 else v


def _check_calibrate_flags(args: argparse.Namespace) -> None:
    """Refuse, before any work, the flags that the chosen configuration ignores (given on the command line)."""
    if args.accountant == "rdp":
        refuse_options(args, ("--value-discretization-interval", "--rtol"),
                       "with --accountant rdp (it sets the PLD calibration; use --accountant pld or both)")
    if args.accountant == "pld":
        refuse_options(args, ("--a-e",), "with --accountant pld (it sets the paper's RDP schedule; use "
                                         "--accountant rdp or both)")
    if args.sigma_k == 0:
        refuse_options(args, ("--p-k",), "with --sigma-k 0 (K' is not released, so it has no sampling rate; "
                                         "--p-k applies with --sigma-k > 0 or its default)")


def cmd_dpis_calibrate(args: argparse.Namespace) -> dict:
    """``mcacct dpis calibrate``: the pre-committed noise plan for ``--epsilon`` and ``--delta``, by the PLD and/or
    the RDP accountant, and the paper's adaptive schedule under RDP.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``dpis calibrate``.

    Returns
    -------
    dict
        The report: the setting, ``pld`` and/or ``rdp`` (each plan's fields), ``k_tilde_floors`` per epoch,
        ``paper_rdp`` unless ``--accountant pld``, and the run-time rule.

    Raises
    ------
    ValueError
        A flag the chosen configuration ignores, a value out of range (named), or auxiliary releases that alone
        exceed the target.
    """
    from mcacct.dpis import calibrate_plan, paper_schedule
    _check_calibrate_flags(args)
    n = check_int("dataset_size", args.dataset_size, low=1)
    e_count = check_int("epochs", args.epochs, low=1)
    clip = check_real("clip", args.clip, low=0.0, low_open=True)
    kappas = expand_kappas(args.kappas, e_count)
    common = dict(iterations_per_epoch=args.iterations_per_epoch, kappas=kappas,
                  sigma_n=_aux(args.sigma_n, n, "sigma_n"), sigma_k=_aux(args.sigma_k, n, "sigma_k"), p_k=args.p_k,
                  k_star_releases=args.k_star_releases)
    out: dict = {"dataset_size": n, "batch_size": args.batch_size, "epochs": e_count, "epsilon": args.epsilon,
                 "delta": args.delta, "clip": clip, "kappas": list(kappas), "rule": args.rule,
                 "runtime_rule": "k_tilde <- max(k_tilde, kappa_e * N * C); sigma_g = s_e * k_tilde / (n_tilde * C)",
                 "certified": True}  # each plan's epsilon is a certified bound of its accountant
    plans = {}
    for acc in ("pld", "rdp"):
        if args.accountant in ("both", acc):
            with stage(f"dpis calibrate: {acc.upper()} noise plan", not args.quiet):
                plans[acc] = calibrate_plan(n, args.batch_size, e_count, args.epsilon, args.delta,
                                            rejection_k=args.rejection_k, accountant=acc, rule=args.rule,
                                            value_discretization_interval=args.value_discretization_interval,
                                            rtol=args.rtol, **common)
            out[acc] = plans[acc].to_dict()
    first = next(iter(plans.values()))
    out["k_tilde_floors"] = [first.k_tilde_floor(e, clip) for e in range(e_count)]
    if args.accountant in ("both", "rdp"):
        rest = {k: v for k, v in common.items() if k != "kappas"}
        ps = paper_schedule(kappas, n, args.batch_size, e_count, args.epsilon, args.delta, a_e=args.a_e,
                            rejection_k=args.rejection_k, **rest)
        out["paper_rdp"] = {"sigma_g": list(ps.sigma_g), "phases": list(ps.phases), "order": ps.order,
                            "epsilon": ps.epsilon, "guarantee": ps.guarantee,
                            "notes": ["Sec. 4.2 of the paper on the anticipated kappas, budget checked at one "
                                      "fixed RDP order (a Renyi filter)", _PAPER_NOTE]}
    if not args.json:
        _print_schedule(out, plans, e_count)
    return out


def _print_schedule(out: dict, plans: dict, e_count: int) -> None:
    head = f"DPIS noise plan ({out['rule']}): N = {out['dataset_size']}, b = {out['batch_size']:g}, E = {e_count}, "
    print(head + f"target ({out['epsilon']:g}, {out['delta']:g})")
    for acc, plan in plans.items():
        print(f"  {acc.upper()}: certified epsilon {plan.epsilon:.6g}" + (f" (order {plan.order})" if plan.order
                                                                          else ""))
    cols = ["epoch", "kappa"] + [f"sigma_g {a.upper()}" for a in plans] + (["paper RDP"] if "paper_rdp" in out else [])
    print("  " + " | ".join(f"{c:>12}" for c in cols))
    rows = sorted({0, e_count - 1} | {e for e in range(1, e_count) if out["kappas"][e] != out["kappas"][e - 1]})
    for e in rows:
        vals = [f"{e + 1:>12d}", f"{out['kappas'][e]:>12.4g}"] + [f"{p.sigma_g[e]:>12.5g}" for p in plans.values()]
        if "paper_rdp" in out:
            vals.append(f"{out['paper_rdp']['sigma_g'][e]:>12.5g}")
        print("  " + " | ".join(vals))
    print(f"  runtime rule: {out['runtime_rule']}")
    if "paper_rdp" in out:
        print(f"  paper RDP (filter order {out['paper_rdp']['order']}): {_PAPER_NOTE}")
