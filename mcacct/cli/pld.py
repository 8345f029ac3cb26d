"""Command-line glue for the PLD accountant (:mod:`mcacct.pld`).

Mount under the main ``mcacct`` command with :func:`add_pld_parser`::

    sub = parser.add_subparsers(dest="command")
    add_pld_parser(sub)
    args = parser.parse_args()
    sys.exit(args.func(args))

Sub-commands: ``mcacct pld epsilon|delta|calibrate``. Standalone use:
``python -m mcacct.cli.pld pld epsilon --scheme poisson --sampling-prob 0.01
--sigma 1 --steps 10000 --delta 1e-5 --json``.

Which flag goes with which mechanism and sub-command is written down once, in :data:`MODES` and
:data:`COMMANDS`: the parsers offer a sub-command only the flags it can use (``--help`` lists exactly those), and
:func:`check_args` refuses, before any PLD work, a flag that does not apply to the chosen mechanism (naming it and
the flags that do), a missing required flag, and any value out of range (``--flag must be in RANGE; got
VALUE``); every refusal is one line ``error: ...`` on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from typing import Any

from mcacct.core.validate import check_int, check_real, parse_floats

__all__ = ["add_pld_parser", "run_pld", "build_spec", "check_args", "main", "MODES", "COMMANDS"]

_SCHEMES = ("poisson", "cyclic-poisson", "gaussian")
_EVENT_KINDS = ("gaussian, poisson_gaussian, mixture_of_gaussians, group_poisson, group_fixed_batch, "
                "cyclic_poisson_bandmf")

# Every flag of ``mcacct pld``: (option strings, add_argument keywords, help group). Value flags default to None,
# switches to False, so that "given" is "not None / True".
_FLAGS: tuple[tuple[tuple[str, ...], dict, str], ...] = (
    (("--scheme",), dict(choices=_SCHEMES, default=None,
                         help="sampling scheme (default: poisson); each takes the flags listed with it"), "mechanism"),
    (("--events",), dict(default=None, metavar="FILE.json",
                         help="a heterogeneous composition instead of --scheme: a JSON list of events such as "
                              '[{"mechanism": "poisson_gaussian", "sampling_prob": 0.01, "sigma": 1.0, "count": 500}, '
                              '{"mechanism": "gaussian", "sigma": 5.0, "count": 1}] (count is required); mechanisms: '
                              f"{_EVENT_KINDS}; takes no mechanism flag"), "mechanism"),
    (("-q", "--sampling-prob"), dict(default=None, metavar="Q",
                                     help="poisson, cyclic-poisson: Poisson sampling probability q in (0, 1] "
                                          "(poisson --fixed-batch: B = round(q n) instead of --batch-size)"),
     "mechanism"),
    (("-T", "--steps"), dict(default=None, metavar="T",
                             help="poisson, gaussian: number of compositions / training steps (>= 1)"), "mechanism"),
    (("--sigma",), dict(default=None,
                        help="noise multiplier (> 0); every scheme of pld epsilon and pld delta"), "mechanism"),
    (("-k", "--group-size"), dict(default=None, metavar="K",
                                  help="poisson, gaussian: group size k for group-level DP (default 1; gaussian: "
                                       "sensitivity k)"), "mechanism"),
    (("--fixed-batch",), dict(action="store_true",
                              help="poisson: fixed-batch-size sampling instead of Poisson (group analysis of "
                                   "Ganesh); takes --dataset-size and --batch-size or --sampling-prob"), "mechanism"),
    (("--batch-size",), dict(default=None, metavar="B",
                             help="poisson --fixed-batch: batch size B in [1, --dataset-size]"), "mechanism"),
    (("--dataset-size",), dict(default=None, metavar="N",
                               help="poisson --fixed-batch: (lower bound on the) dataset size n (>= 1)"),
     "mechanism"),
    (("--iterations",), dict(default=None, metavar="N",
                             help="cyclic-poisson: number of iterations n (>= 1)"), "mechanism"),
    (("--min-sep",), dict(default=None, metavar="B",
                          help="cyclic-poisson: min separation / number of bands b (>= 1)"), "mechanism"),
    (("--c-col",), dict(type=str, default=None, metavar="V1,V2,...",
                        help="cyclic-poisson: column of the strategy matrix, 1 to --min-sep comma-separated "
                             "finite numbers, norm > 0"), "mechanism"),
    (("--epsilon",), dict(default=None, help="epsilon (finite, >= 0)"), "target"),
    (("--delta",), dict(default=None, help="delta in (0, 1)"), "target"),
    (("--value-discretization-interval",), dict(default=None, metavar="H",
                                                help="loss grid spacing in (0, 0.1] (default 1e-4)"), "numerics"),
    (("--discretization",), dict(choices=("connect_dots", "round_up"), default=None,
                                 help="pessimistic discretisation rule (default connect_dots)"), "numerics"),
    (("--no-error-estimate",), dict(action="store_true",
                                    help="skip the h/2 re-run that gives the error estimate of Koskela, Jälkö & "
                                         "Honkela (arXiv:1906.03049)"), "numerics"),
    (("--json",), dict(action="store_true", help="print JSON instead of a summary"), "numerics"),
    (("--quiet",), dict(action="store_true", help="no progress on stderr"), "numerics"),
)
_OPTION = {opts[-1]: opts for opts, _, _ in _FLAGS}  # long option -> all its option strings
_ORDER = tuple(opts[-1] for opts, _, _ in _FLAGS)
_NUMERICS = ("--value-discretization-interval", "--discretization", "--json", "--quiet")

#: The mechanism modes and their flags: ``True`` required, ``False`` optional (``--fixed-batch`` takes exactly
#: one of ``--batch-size`` and ``--sampling-prob``). ``pld calibrate`` drops ``--sigma`` (it finds it).
MODES: dict[str, dict[str, bool]] = {
    "poisson": {"--scheme": False, "--sampling-prob": True, "--steps": True, "--sigma": True, "--group-size": False,
                "--fixed-batch": False},
    "poisson --fixed-batch": {"--scheme": False, "--fixed-batch": True, "--dataset-size": True,
                              "--batch-size": False, "--sampling-prob": False, "--steps": True, "--sigma": True,
                              "--group-size": False},
    "gaussian": {"--scheme": True, "--steps": True, "--sigma": True, "--group-size": False},
    "cyclic-poisson": {"--scheme": True, "--iterations": True, "--min-sep": True, "--sampling-prob": True,
                       "--c-col": True, "--sigma": True},
    "events": {"--events": True},
}

#: Per sub-command: (its own flags, ``True`` required; the flags it never takes, with the reason).
COMMANDS: dict[str, tuple[dict[str, bool], dict[str, str]]] = {
    "epsilon": ({"--delta": True, "--no-error-estimate": False},
                {"--epsilon": "it takes --delta and reports epsilon (pld delta takes --epsilon)"}),
    "delta": ({"--epsilon": True, "--no-error-estimate": False},
              {"--delta": "it takes --epsilon and reports delta (pld epsilon takes --delta)"}),
    "calibrate": ({"--epsilon": True, "--delta": True},
                  {"--sigma": "it finds sigma", "--no-error-estimate": "it makes no error estimate",
                   "--events": "it calibrates one mechanism given by --scheme and its flags, not a list of events"}),
}
_HELP = {"epsilon": "epsilon for a target --delta", "delta": "delta for a target --epsilon",
         "calibrate": "smallest sigma meeting --epsilon and --delta"}


def _parser_for(sp: argparse.ArgumentParser, cmd: str) -> None:
    never = COMMANDS[cmd][1]
    groups = {name: sp.add_argument_group(name) for name in ("mechanism", "target", "numerics")}
    for opts, kw, group in _FLAGS:
        kw = dict(kw)
        if opts[-1] in never:  # accepted by the parser only to be refused by name (see check_args)
            kw["help"] = argparse.SUPPRESS
        elif cmd == "calibrate" and opts[-1] in ("--epsilon", "--delta"):
            kw["help"] = "target " + kw["help"]
        groups[group].add_argument(*opts, **kw)


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
    pld = subparsers.add_parser(
        "pld", help="FFT privacy-loss-distribution accountant",
        description="Pessimistic FFT PLD accounting for DP-SGD / BandMF (cyclic Poisson) "
                    "and group-level DP via mixtures of Gaussians.")
    sub = pld.add_subparsers(dest="pld_command", metavar="{epsilon,delta,calibrate}")
    sub.required = True
    for name in COMMANDS:
        sp = sub.add_parser(name, help=_HELP[name], description=_HELP[name] + ". " + _modes_help(name))
        _parser_for(sp, name)
        sp.set_defaults(func=run_pld)
    pld.set_defaults(func=run_pld)
    return pld


def _modes_help(cmd: str) -> str:
    parts = []
    for mode in MODES:
        flags = _allowed(cmd, mode)
        if flags is None:
            continue
        head = "--events" if mode == "events" else f"--scheme {mode}"
        own = COMMANDS[cmd][0]
        parts.append(f"{head}: " + " ".join(f for f in flags if f not in _NUMERICS and f != "--scheme"
                                            and f not in own))
    return "Mechanism flags: " + "; ".join(parts) + " (any other is refused)."


def _allowed(cmd: str, mode: str) -> tuple[str, ...] | None:
    """The flags of ``pld cmd`` with mechanism ``mode`` (``None``: the command does not take that mode)."""
    own, never = COMMANDS[cmd]
    if mode == "events" and "--events" in never:  # the command does not take a list of events
        return None
    keep = (set(MODES[mode]) | set(own) | set(_NUMERICS)) - set(never)
    return tuple(f for f in _ORDER if f in keep)


def _given(args: argparse.Namespace, flag: str) -> bool:
    v = getattr(args, _dest(flag), None)
    return v is not None and v is not False


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _mode(args: argparse.Namespace) -> tuple[str, str]:
    """``(mode, where)``: the key of :data:`MODES` and how messages name it (``--scheme gaussian``)."""
    if _given(args, "--events"):
        return "events", "--events"
    scheme = args.scheme or "poisson"
    if scheme == "poisson" and args.fixed_batch:
        return "poisson --fixed-batch", "--scheme poisson --fixed-batch"
    return scheme, f"--scheme {scheme}"


def check_args(args: argparse.Namespace) -> str:
    """Refuse, before any PLD work, flags that do not apply, missing flags and values out of range
    (``ValueError`` naming the flag); returns the mechanism mode (a key of :data:`MODES`)."""
    cmd = getattr(args, "pld_command", None)
    if cmd not in COMMANDS:
        raise ValueError("a sub-command is required: epsilon, delta or calibrate")
    own, never = COMMANDS[cmd]
    for flag in _ORDER:
        if flag in never and _given(args, flag):
            raise ValueError(f"{flag} does not apply to pld {cmd}: {never[flag]}")
    mode, where = _mode(args)
    allowed = _allowed(cmd, mode)
    for flag in _ORDER:
        if _given(args, flag) and flag not in allowed:
            raise ValueError(f"{flag} does not apply to pld {cmd} {where} (its flags: {', '.join(allowed)})")
    for flag, required in own.items():
        if required and not _given(args, flag):
            raise ValueError(f"{flag} is required for pld {cmd}")
    for flag, required in MODES[mode].items():
        if required and flag in allowed and flag != "--scheme" and not _given(args, flag):
            raise ValueError(f"{flag} is required for pld {cmd} {where}")
    if mode == "poisson --fixed-batch" and _given(args, "--batch-size") == _given(args, "--sampling-prob"):
        raise ValueError(f"pld {cmd} {where} takes --batch-size or --sampling-prob (B = round(q n)), not both "
                         "and not neither")
    _check_ranges(args)
    return mode


def _check_ranges(args: argparse.Namespace) -> None:
    """Every given value in its range, one wording: ``--flag must be in RANGE; got VALUE`` (numbers are parsed
    here, not by argparse, so a malformed one reads the same); the parsed numbers replace the strings on ``args``."""
    reals = {"--sampling-prob": dict(low=0.0, high=1.0, low_open=True),
             "--sigma": dict(low=0.0, low_open=True),
             "--epsilon": dict(low=0.0),
             "--delta": dict(low=0.0, high=1.0, low_open=True, high_open=True),
             "--value-discretization-interval": dict(low=0.0, high=0.1, low_open=True)}
    for flag, rng in reals.items():
        if _given(args, flag):
            setattr(args, _dest(flag), check_real(flag, _number(getattr(args, _dest(flag))), **rng))
    for flag in ("--steps", "--group-size", "--dataset-size", "--iterations", "--min-sep", "--batch-size"):
        if _given(args, flag):
            high = args.dataset_size if flag == "--batch-size" and _given(args, "--dataset-size") else None
            setattr(args, _dest(flag), check_int(flag, _exact_int(getattr(args, _dest(flag))), low=1, high=high))
    if _given(args, "--c-col"):
        col = _parse_ccol(args.c_col)
        b = args.min_sep
        if b is not None and len(col) > b:
            raise ValueError(
                f"--c-col has {len(col)} entries but --min-sep {b} allows 1 to {b}: the cyclic-Poisson analysis "
                "needs at most --min-sep entries (a longer column makes the shifted columns of one example's "
                "participations overlap)")


def _number(text: Any) -> Any:
    """``float(text)`` when it reads as a number (so messages show ``nan``, ``2``), else ``text`` as given."""
    try:
        return float(text) if isinstance(text, str) else text
    except ValueError:
        return text


def _exact_int(text: Any) -> Any:
    """``int(text)`` for an integer literal (exact beyond 2^53), else the number or ``text`` for
    :func:`check_int`."""
    try:
        return int(text.replace("_", "")) if isinstance(text, str) else text
    except ValueError:
        return _number(text)


def _parse_ccol(text: str) -> tuple[float, ...]:
    try:
        vals = parse_floats("--c-col", text)
    except ValueError:
        raise ValueError(f"--c-col must be a comma-separated list of numbers; got {text!r}") from None
    if not vals:
        raise ValueError(f"--c-col must be a comma-separated list of numbers; got {text!r}")
    if not all(math.isfinite(v) for v in vals):
        raise ValueError(f"--c-col entries must be finite numbers; got {text!r}")
    if not any(v != 0 for v in vals):
        raise ValueError(f"--c-col must have norm > 0 (an entry != 0); got {text!r}")
    return vals


def build_spec(args: argparse.Namespace, sigma: float):
    """Build the mechanism spec of :mod:`mcacct.pld` described by ``args`` (checked by :func:`check_args`).

    Raises
    ------
    ValueError
        On missing or inconsistent flags (and, via the spec, out-of-range values).
    """
    from mcacct import pld

    mode, _ = _mode(args)
    k = 1 if args.group_size is None else args.group_size
    if mode == "gaussian":
        return pld.GaussianSpec(sigma=sigma, sensitivity=float(k), steps=args.steps)
    if mode == "cyclic-poisson":
        return pld.CyclicPoissonBandMFSpec(iterations=args.iterations, min_sep=args.min_sep,
                                           sampling_prob=args.sampling_prob, c_col=_parse_ccol(args.c_col),
                                           sigma=sigma)
    if mode == "poisson --fixed-batch":
        n = args.dataset_size
        b = args.batch_size if args.batch_size is not None else max(1, round(args.sampling_prob * n))
        return pld.GroupFixedBatchSpec(group_size=k, batch_size=b, dataset_size=n, sigma=sigma, steps=args.steps)
    if mode == "poisson":
        if k == 1:
            return pld.PoissonGaussianSpec(sampling_prob=args.sampling_prob, sigma=sigma, steps=args.steps)
        return pld.GroupPoissonSpec(group_size=k, sampling_prob=args.sampling_prob, sigma=sigma, steps=args.steps)
    raise ValueError(f"--events describes no single mechanism (mode {mode!r})")


def _fmt(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.6g}"


def _describe(spec) -> dict:
    d = dataclasses.asdict(spec)
    d["type"] = type(spec).__name__
    d["compositions"] = spec.compositions
    if "c_col" in d:
        d["c_col"] = list(d["c_col"])
        d["col_norm"] = spec.col_norm
    return d


def run_pld(args: argparse.Namespace) -> dict:
    """Execute ``mcacct pld ...``: print a summary (unless ``--json``) and return the report (the entry point
    prints it as JSON with ``--json``, adding ``seconds`` and ``compile_seconds``).

    Every flag is checked first (:func:`check_args`). Bad input raises ``ValueError`` (the entry point prints
    ``error: <message>`` and exits with 2), including a ``--delta`` below what the accountant can certify
    (``pld epsilon``: no finite epsilon; ``pld calibrate``: below the mass at infinity / FFT round-off bound)
    and a composition larger than the memory budget of :mod:`mcacct.pld` (``$MCACCT_PLD_MEMORY_BUDGET``).
    JSON keys (docs/json.md): ``epsilon`` (epsilon command), ``delta`` (delta command), ``sigma`` (calibrate),
    ``certified`` (true: the pessimistic PLD bound), ``mechanism``, plus the other :class:`mcacct.pld.PLDResult`
    fields as numbers (a non-finite one is the report's ``null``, listed in ``nonfinite``).

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    dict
    """
    from mcacct.engine.progress import stage
    mode = check_args(args)
    with stage(f"pld {args.pld_command}: FFT accounting", not args.quiet):
        return _run(args, mode)


def _run(args: argparse.Namespace, mode: str) -> dict:
    from mcacct import pld

    cmd = args.pld_command
    opts = dict(value_discretization_interval=(1e-4 if args.value_discretization_interval is None
                                               else args.value_discretization_interval),
                discretization=args.discretization or "connect_dots")
    if mode == "events":
        return _run_events(args, cmd, opts)
    if cmd == "calibrate":
        eps, dl = args.epsilon, args.delta
        spec = build_spec(args, 1.0)
        sigma = pld.pld_calibrate(spec, eps, dl, **opts)
        out = {"sigma": sigma, "epsilon": eps, "delta": dl, "certified": True,
               "mechanism": _describe(dataclasses.replace(spec, sigma=sigma))}
        if not args.json:
            print(f"sigma = {sigma:.6g}  (certified: ({_fmt(eps)}, {dl:g})-DP, "
                  f"{spec.compositions} compositions, {type(spec).__name__})")
        return out
    sigma = args.sigma
    spec = build_spec(args, sigma)
    if cmd == "epsilon":
        dl = args.delta
        res = pld.pld_epsilon(spec, dl, estimate_error=not args.no_error_estimate, **opts)
        if math.isinf(res.epsilon):  # the library's answer is the trivial epsilon = inf
            raise ValueError(
                f"delta={dl:g} is below what the PLD accountant can certify here (mass at +infinity "
                f"{res.infinity_mass:.2g}: truncated noise tails and the composition-window tail bound); "
                "no finite epsilon can be certified, increase delta")
    else:
        res = pld.pld_delta(spec, args.epsilon, estimate_error=not args.no_error_estimate, **opts)
    out = {**dataclasses.asdict(res), "certified": True}  # non-finite numbers: the report's encoding (docs/json.md)
    out["mechanism"] = _describe(spec)
    if not args.json:
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
    return out


def _run_events(args: argparse.Namespace, cmd: str, opts: dict) -> dict:
    """``mcacct pld epsilon|delta --events FILE``: the heterogeneous composition of :mod:`mcacct.pld.events`."""
    from mcacct import pld

    events = pld.load_events(args.events)
    if cmd == "epsilon":
        dl = args.delta
        res = pld.events_epsilon(events, dl, estimate_error=not args.no_error_estimate, **opts)
        if math.isinf(res.epsilon):
            raise ValueError(
                f"delta={dl:g} is below what the PLD accountant can certify for these events (mass at +infinity "
                f"{res.infinity_mass:.2g}: window tails and the l1 round-off bounds of the compositions); increase "
                "delta")
    else:
        res = pld.events_delta(events, args.epsilon, estimate_error=not args.no_error_estimate, **opts)
    out = {**dataclasses.asdict(res), "events": [dict(e) for e in res.events]}  # floats: docs/json.md
    if not args.json:
        err = "n/a" if math.isnan(res.error_estimate) else f"{res.error_estimate:.2g}"
        val = f"epsilon = {_fmt(res.epsilon)} at delta={res.delta:g}" if cmd == "epsilon" else \
            f"delta = {res.delta:.6g} at epsilon={_fmt(res.epsilon)}"
        print(f"{val}  [{len(res.events)} distinct events, {sum(e['count'] for e in res.events)} in all]")
        print(f"  per adjacency: remove {_fmt(res.epsilon_remove) if cmd == 'epsilon' else f'{res.delta_remove:.6g}'}"
              f" / add {_fmt(res.epsilon_add) if cmd == 'epsilon' else f'{res.delta_add:.6g}'}; error estimate "
              f"{err}; mass at +inf {res.infinity_mass:.2g}; {res.discretization} "
              f"h={res.value_discretization_interval:g}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m mcacct.cli.pld pld ...``."""
    from mcacct.core.precision import x64_scope

    parser = argparse.ArgumentParser(prog="mcacct", description="mcacct PLD accountant (standalone)")
    sub = parser.add_subparsers(dest="command", metavar="{pld}")
    sub.required = True
    add_pld_parser(sub)
    args = parser.parse_args(argv)
    with x64_scope():
        try:
            out = args.func(args)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.json:
        from mcacct.cli.flags import json_text
        from mcacct.report.schema import report
        print(json_text(report(f"pld {args.pld_command}", out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
