"""The flags of ``mcacct pld`` (:mod:`mcacct.cli.pld`), written down once.

Which flag goes with which mechanism and sub-command is :data:`MODES` and :data:`COMMANDS`: the parsers offer a
sub-command only the flags it can use (:func:`add_pld_flags`; ``--help`` lists exactly those), and :func:`check_args`
refuses, before any PLD work, a flag that does not apply to the chosen mechanism (naming it and the flags that do),
a missing required flag, and any value out of range (``--flag must be in RANGE; got VALUE``).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from mcacct.core.validate import check_int, check_real, parse_floats

__all__ = ["MODES", "COMMANDS", "COMMAND_HELP", "add_pld_flags", "modes_help", "mode_of", "check_args", "parse_ccol"]


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
                               help="poisson --fixed-batch: n (>= 1), a lower bound on the size of the SMALLER of the two "
                                    "neighbouring datasets: your dataset's size minus --group-size (Ganesh, Thm 3.3)"),
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
COMMAND_HELP = {"epsilon": "epsilon for a target --delta", "delta": "delta for a target --epsilon",
         "calibrate": "smallest sigma meeting --epsilon and --delta"}


def add_pld_flags(sp: argparse.ArgumentParser, cmd: str) -> None:
    never = COMMANDS[cmd][1]
    groups = {name: sp.add_argument_group(name) for name in ("mechanism", "target", "numerics")}
    for opts, kw, group in _FLAGS:
        kw = dict(kw)
        if opts[-1] in never:  # accepted by the parser only to be refused by name (see check_args)
            kw["help"] = argparse.SUPPRESS
        elif cmd == "calibrate" and opts[-1] in ("--epsilon", "--delta"):
            kw["help"] = "target " + kw["help"]
        groups[group].add_argument(*opts, **kw)


def modes_help(cmd: str) -> str:
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


def mode_of(args: argparse.Namespace) -> tuple[str, str]:
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
    mode, where = mode_of(args)
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
        col = parse_ccol(args.c_col)
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


def parse_ccol(text: str) -> tuple[float, ...]:
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
