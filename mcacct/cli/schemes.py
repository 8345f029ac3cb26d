r"""The scheme flags of the command line, read from the registry: each scheme's entry gives its own.

A scheme's :class:`~mcacct.schemes.entry.SchemeInfo` carries its command line (``cli``, a
:class:`~mcacct.schemes.flags.SchemeCLI`): the common flags that apply to it (any other one given is refused,
naming it), its own flags, words added to a refusal, and the builder that turns parsed flags into ``(scheme,
strategy)``. The schemes and their order come from :mod:`mcacct.schemes.registry`; a scheme registered without a
command line works with the Python API, the job files and calibration, and is not offered here. Read by ``mcacct
calibrate|delta|epsilon|sample --scheme NAME`` (:func:`add_scheme_flags`, :func:`problem_from_args`), ``mcacct
compare`` (the flags of its optional rows) and the absl launchers (``launch/_flags.py``). This module names no
scheme except the default.

Scheme flags (``--scheme`` picks the entry, default ``bminsep``; :class:`Flag`, :data:`COMMON_FLAGS`,
:class:`SchemeArgs` and :data:`DEFAULTS` come from :mod:`mcacct.schemes.flags`; the per-scheme flags are declared
in each scheme's module):

* common: ``--iterations N --min-sep B (--sampling-prob P | --batch-size S --dataset-size M) [--c-col v1,...]
  [--cold-start]`` -- each scheme accepts the subset in its entry's ``common``; with none of the sampling flags
  the demo batch 32 of 1024 and its ``c_col = 0.5 x 4`` are used, otherwise ``c_col`` defaults to the API's
  MSE-optimised banded Toeplitz ``C`` with the scheme's separation as bands (:meth:`SchemeArgs.strategy`);
* ``truncated``: ``--max-batch-size`` (default ``ceil(1.25 x expected batch)``), and ``--dataset-size`` is the
  scheme's ``M`` (also with ``--sampling-prob``);
* ``multi-attribution``: ``--max-examples-per-user`` (default 1); always the cold start (Alg. 3);
* ``cyclic-poisson``: ``--public-phase``; ``q = b B / M`` from the batch flags, or ``--sampling-prob q``;
* ``balls-in-bins``: ``--bins T`` or ``T = M / B`` from the batch flags (an integer);
* ``banded-inverse``: ``--inverse-bands h0,h1,...`` (``C`` from the bands of its inverse) instead of
  ``--c-col``; ``--min-sep`` is ``r``.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from mcacct.engine.kernel_choice import resolve_loss_kernel
from mcacct.engine.problem import Problem
from mcacct.schemes import registry
from mcacct.schemes.flags import COMMON_FLAGS, DEFAULTS, Flag, SchemeArgs, SchemeCLI

__all__ = ["Flag", "SchemeArgs", "SchemeCLI", "COMMON_FLAGS", "DEFAULTS", "DEFAULT_SCHEME", "cli_schemes",
           "cli_names", "all_flags", "flag_for", "add_scheme_flags", "scheme_args", "scheme_from_args",
           "problem_from_args"]

#: The scheme of a command line without ``--scheme``.
DEFAULT_SCHEME = "bminsep"


# -- look-ups ----------------------------------------------------------------------------------------------
def cli_schemes() -> tuple[tuple[registry.SchemeInfo, SchemeCLI], ...]:
    """``(info, info.cli)`` of every registered scheme with a command line, in registry order.

    Returns
    -------
    tuple of (SchemeInfo, SchemeCLI)
    """
    return tuple((e, e.cli) for e in registry.schemes() if e.cli is not None)


def cli_names() -> tuple[str, ...]:
    """Registry names the command line offers (``--scheme`` choices).

    Returns
    -------
    tuple of str
        In registry order.
    """
    return tuple(e.name for e, _ in cli_schemes())


def _cli_for(name: str) -> tuple[registry.SchemeInfo, SchemeCLI]:
    info = registry.get(name)
    if info.cli is None:
        raise ValueError(f"--scheme must be one of {list(cli_names())}; got {name!r} (registered without a "
                         "command line: use the Python API)")
    return info, info.cli


def all_flags() -> tuple[Flag, ...]:
    """The common flags, then every offered scheme's own flags (each option once).

    Returns
    -------
    tuple of Flag
        :data:`COMMON_FLAGS` first, then the schemes' flags in registry order; a later flag with an option
        already listed is left out.
    """
    out, seen = list(COMMON_FLAGS), {f.option for f in COMMON_FLAGS}
    for _, cli in cli_schemes():
        for f in cli.flags:
            if f.option not in seen:
                seen.add(f.option)
                out.append(f)
    return tuple(out)


def flag_for(dest: str) -> Flag | None:
    """The scheme flag whose ``dest`` is ``dest`` (e.g. ``max_batch_size``), or ``None``.

    Parameters
    ----------
    dest : str
        The attribute name of the parsed flag.

    Returns
    -------
    Flag or None
        The first flag of :func:`all_flags` with that ``dest``.
    """
    return next((f for f in all_flags() if f.dest == dest), None)


# -- command line ------------------------------------------------------------------------------------------
def add_scheme_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--scheme`` and every scheme flag (common and per scheme) to ``parser``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The parser to add to; the flags go into two argument groups (common, then scheme-specific).
    """
    g = parser.add_argument_group("mechanism and sampling scheme (defaults: the built-in demo configuration)")
    g.add_argument("--scheme", choices=cli_names(), default=DEFAULT_SCHEME,
                   help="sampling scheme (default bminsep): " + "; ".join(f"{e.name}: {e.summary}"
                                                                          for e, _ in cli_schemes()))
    for f in COMMON_FLAGS:
        f.add_to(g)
    s = parser.add_argument_group("scheme-specific flags (refused for the other schemes)")
    for f in all_flags()[len(COMMON_FLAGS):]:
        f.add_to(s)


def scheme_args(args: Any) -> SchemeArgs:
    """The :class:`SchemeArgs` of parsed arguments (``args.scheme`` picks the entry; flags that do not apply
    to it are refused, naming them).

    Parameters
    ----------
    args : Any
        An ``argparse.Namespace`` or any object with the flags' ``dest`` attributes (missing ones count as not
        given; ``None`` or absent ``scheme`` is :data:`DEFAULT_SCHEME`).

    Returns
    -------
    SchemeArgs
        The scheme's name, its command line and the values of every scheme flag.

    Raises
    ------
    ValueError
        A scheme registered without a command line, or a flag given that does not apply to the scheme
        (``"--FLAG does not apply to --scheme NAME ... (its flags: ...)"``).
    """
    info, cli = _cli_for(getattr(args, "scheme", None) or DEFAULT_SCHEME)
    values = {f.dest: getattr(args, f.dest, None) for f in all_flags()}
    own = {f.dest for f in cli.flags} | set(cli.common)
    for f in all_flags():
        v = values.get(f.dest)
        if f.dest not in own and v is not None and v is not False:
            hint = cli.hints.get(f.dest)
            raise ValueError(f"{f.option} does not apply to --scheme {info.name}{'; ' + hint if hint else ''} "
                             f"(its flags: {', '.join(cli.accepted)})")
    return SchemeArgs(info.name, cli, values)


def _in_flag_terms(err: ValueError, cli: SchemeCLI) -> ValueError:
    """``err`` with the scheme's fields of ``cli.parameters`` named by their flags (``err`` itself if none)."""
    msg = str(err)
    for name, option in cli.parameters.items():
        msg = re.sub(rf"(?<![\w-]){name}\b", option, msg)
    return err if msg == str(err) else ValueError(msg)


def _build(args: Any, dtype: str | None):
    a = scheme_args(args)
    try:
        scheme, strategy = a.cli.build(a)
        if dtype is None:
            return scheme, strategy, None
        problem = Problem(scheme, strategy, dtype=dtype, loss_kernel=getattr(args, "loss_kernel", None) or "auto",
                          skip_zero=not getattr(args, "no_skip", False))
        try:
            resolve_loss_kernel(problem)  # refuses "fused" where it cannot run, naming why
        except ValueError as err:
            raise ValueError(str(err).replace("loss_kernel='fused'", "--loss-kernel fused")) from err
        return scheme, strategy, problem
    except ValueError as err:  # the scheme's own checks name its fields: name their flags
        named = _in_flag_terms(err, a.cli)
        if named is err:
            raise
        raise named from err


def scheme_from_args(args: Any):
    """``(scheme, strategy)`` given by parsed scheme flags.

    Parameters
    ----------
    args : Any
        As for :func:`scheme_args`.

    Returns
    -------
    tuple
        The scheme and its :class:`~mcacct.strategies.banded.BandedToeplitz` strategy.

    Raises
    ------
    ValueError
        As :func:`scheme_args`, or the scheme's own checks, with its fields named by their flags.
    """
    return _build(args, None)[:2]


def problem_from_args(args: Any) -> Problem:
    """The :class:`~mcacct.engine.problem.Problem` given by parsed scheme flags (an ``argparse.Namespace`` or any
    object with the flags' ``dest`` attributes; missing ones count as not given), ``args.dtype`` and
    ``args.loss_kernel``.

    Parameters
    ----------
    args : Any
        The parsed flags; ``dtype`` defaults to ``"float64"``, ``loss_kernel`` to ``"auto"``, and ``no_skip``
        sets ``skip_zero=False``.

    Returns
    -------
    Problem

    Raises
    ------
    ValueError
        Naming the offending flag or parameter and its allowed range.
    """
    return _build(args, getattr(args, "dtype", None) or "float64")[2]
