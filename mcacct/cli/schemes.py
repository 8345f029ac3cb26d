r"""The scheme flags of the command line: one table, :data:`SCHEME_CLI`, keyed by registry name.

Each :class:`SchemeCLI` entry gives the common flags that apply to a registered scheme (any other one given is
refused, naming it), the scheme's own flags, words added to a refusal, and the builder that turns parsed flags
into ``(scheme, strategy)``. The schemes and their order come from :mod:`mcacct.schemes.registry`; a scheme
registered there without an entry here works with the Python API, the job files and calibration, and is not
offered by the command line. Read by ``mcacct calibrate|delta|epsilon|sample --scheme NAME``
(:func:`add_scheme_flags`, :func:`problem_from_args`), ``mcacct compare`` (the flags of its optional rows) and
the absl launchers (``launch/_flags.py``).

Scheme flags (``--scheme`` picks the entry, default ``bminsep``; :class:`Flag`, :data:`COMMON_FLAGS`,
:class:`SchemeArgs` and :data:`DEFAULTS` come from :mod:`mcacct.cli.scheme_args`):

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
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from mcacct.cli.scheme_args import COMMON_DESTS, COMMON_FLAGS, DEFAULTS, Flag, SchemeArgs
from mcacct.engine.problem import Problem
from mcacct.engine.kernel_choice import resolve_loss_kernel
from mcacct.schemes import registry
from mcacct.schemes.banded_inverse import BandedInverse, strategy_from_inverse
from mcacct.schemes.balls_in_bins import BallsInBins
from mcacct.schemes.bminsep import BMinSep, expected_participation_rate, sampling_prob_from_batch_size
from mcacct.schemes.cyclic_poisson import CyclicPoisson
from mcacct.schemes.multi_attribution import MultiAttribution
from mcacct.strategies.banded import BandedToeplitz
from mcacct.schemes.truncated import TruncatedBMinSep
from mcacct.core.validate import check_count, check_real, parse_floats

__all__ = ["Flag", "SchemeArgs", "SchemeCLI", "SCHEME_CLI", "COMMON_FLAGS", "DEFAULTS", "DEFAULT_SCHEME",
           "bins_from_batch", "cli_schemes", "cli_names", "all_flags", "flag_for", "add_scheme_flags",
           "scheme_args", "scheme_from_args", "problem_from_args"]

#: The scheme of a command line without ``--scheme``.
DEFAULT_SCHEME = "bminsep"


@dataclass(frozen=True)
class SchemeCLI:
    """The command line of one registered scheme (an entry of :data:`SCHEME_CLI`).

    Parameters
    ----------
    build:
        ``build(args: SchemeArgs) -> (scheme, strategy)``.
    common:
        The common flags (dest names) that apply to the scheme; any other given common flag is refused.
    flags:
        The scheme's own flags.
    hints:
        Words added when a common flag (by dest) is refused for this scheme.
    parameters:
        The scheme's fields whose flag is not their dest (``cycle_length`` of cyclic Poisson is ``--min-sep``):
        a refusal by the scheme names the flag instead.
    """

    build: Callable[["SchemeArgs"], tuple[Any, BandedToeplitz]]
    common: frozenset = COMMON_DESTS
    flags: tuple[Flag, ...] = ()
    hints: Mapping[str, str] = field(default_factory=dict)
    parameters: Mapping[str, str] = field(default_factory=dict)

    @property
    def accepted(self) -> tuple[str, ...]:
        """Options this scheme accepts, in order (for messages)."""
        return tuple(f.option for f in COMMON_FLAGS if f.dest in self.common) + tuple(f.option for f in self.flags)


# -- builders ----------------------------------------------------------------------------------------------
def _build_bminsep(a: SchemeArgs):
    b = a.min_sep
    return BMinSep(a.min_sep_prob(b), b, a.iterations, a.warm_start), a.strategy()


def _build_truncated(a: SchemeArgs):
    b = a.min_sep
    sp, bs, m = a.rate(dataset_size_with_prob=True)
    if sp is not None:
        m = a.get("dataset_size")
        if m is None:
            raise ValueError("--dataset-size is required for --scheme truncated (an integer >= 1, the number "
                             "of examples M)")
        p = sp
        expected = expected_participation_rate(p, b) * check_count("dataset_size", m)
    else:
        p = sampling_prob_from_batch_size(bs, m, b)
        expected = bs
    bmax = a.get("max_batch_size")
    if bmax is None:
        bmax = int(math.ceil(1.25 * expected))
    return TruncatedBMinSep(p, b, a.iterations, m, bmax, a.warm_start), a.strategy()


def _build_multi(a: SchemeArgs):
    b = a.min_sep
    k = a.get("max_examples_per_user", 1)
    return MultiAttribution(a.min_sep_prob(b), b, a.iterations, k), a.strategy()


def _build_cyclic(a: SchemeArgs):
    b = a.min_sep
    sp, bs, m = a.rate()
    if sp is None:
        sampling_prob_from_batch_size(bs, m, b)  # checks B / M <= 1/b, naming expected_batch_size
        sp = min(b * bs / m, 1.0)
    return CyclicPoisson(sp, b, a.iterations, random_phase=not a.given("public_phase")), a.strategy()


def bins_from_batch(bs: float, m: int) -> int:
    """Balls-in-bins' ``T = M / B``; ``ValueError`` when it is not an integer (naming ``--bins``)."""
    m = check_count("dataset_size", m)
    bs = check_real("expected_batch_size", bs, low=0.0, high=float(m), low_open=True)
    bins = m / bs
    t = int(round(bins))
    if abs(bins - t) > 1e-9 * bins:
        raise ValueError(f"dataset_size / expected_batch_size = {bins:g} is not an integer number of bins: give "
                         "--bins (an integer >= 1) or a batch size that divides the dataset size")
    return t


def _build_bins(a: SchemeArgs):
    bins = a.get("bins")
    if bins is None:
        _, bs, m = a.rate()
        bins = bins_from_batch(bs, m)
    elif a.given("batch_size") or a.given("dataset_size"):
        raise ValueError("give either --bins or --batch-size with --dataset-size for --scheme balls-in-bins, "
                         "not both")
    return BallsInBins(bins, a.iterations), a.strategy(bands=bins)  # participations are exactly `bins` apart


def _build_inverse(a: SchemeArgs):
    r = a.min_sep
    bands = a.get("inverse_bands")
    if bands is not None:
        if a.given("c_col"):
            raise ValueError("give either --c-col (C's first column) or --inverse-bands (the bands of C^-1) for "
                             "--scheme banded-inverse, not both")
        strategy = strategy_from_inverse(parse_floats("inverse_bands", bands), a.iterations)
    else:  # its own default: C = I (DP-SGD), whose inverse has one band
        strategy = a.strategy(default=(1.0,))
    return BandedInverse(a.min_sep_prob(r), r, a.iterations, a.warm_start), strategy


#: The command line of each registered scheme, by registry name (add an entry to offer a scheme on the command
#: line; see the module docstring).
SCHEME_CLI: dict[str, SchemeCLI] = {
    "bminsep": SchemeCLI(_build_bminsep),
    "truncated": SchemeCLI(_build_truncated, flags=(
        Flag("--max-batch-size", int, "truncated: maximum batch size B_max (>= 1; default ceil(1.25 x expected "
                                      "batch size)); compare: adds the truncated row", check=check_count),)),
    "multi-attribution": SchemeCLI(_build_multi, flags=(
        Flag("--max-examples-per-user", int, "multi-attribution: examples per user k_u (>= 1; default 1, compare: "
                                             "2); compare: adds the multi-attribution row", check=check_count),)),
    "cyclic-poisson": SchemeCLI(
        _build_cyclic, COMMON_DESTS - {"cold_start"},
        flags=(Flag("--public-phase", bool, "cyclic-poisson: the public-partition worst case (part 0) instead of "
                                            "a secret random phase"),),
        hints={"cold_start": "the part is fixed from step 1 (there is no start state)"},
        parameters={"cycle_length": "--min-sep"}),
    "balls-in-bins": SchemeCLI(
        _build_bins, frozenset({"iterations", "batch_size", "dataset_size", "c_col"}),
        flags=(Flag("--bins", int, "balls-in-bins: number of bins T (>= 1; default dataset size / batch size)",
                    check=check_count, rate=True),),
        hints={"min_sep": "its separation is the number of bins: use --bins",
               "sampling_prob": "every opportunity is taken (p = 1): give --bins or the batch flags",
               "cold_start": "there is no start state"},
        parameters={"cycle_length": "--bins"}),
    "banded-inverse": SchemeCLI(_build_inverse, flags=(
        Flag("--inverse-bands", str, "banded-inverse: comma-separated bands h0,h1,... of C^-1 (h0 > 0; C = their "
                                     "inverse, instead of --c-col); compare: adds the banded-inverse row",
             check=parse_floats),)),
}


# -- look-ups ----------------------------------------------------------------------------------------------
def cli_schemes() -> tuple[tuple[registry.SchemeInfo, SchemeCLI], ...]:
    """``(info, cli)`` of every registered scheme with a command-line entry, in registry order."""
    return tuple((e, SCHEME_CLI[e.name]) for e in registry.schemes() if e.name in SCHEME_CLI)


def cli_names() -> tuple[str, ...]:
    """Registry names the command line offers (``--scheme`` choices)."""
    return tuple(e.name for e, _ in cli_schemes())


def _cli_for(name: str) -> tuple[registry.SchemeInfo, SchemeCLI]:
    info = registry.get(name)
    if info.name not in SCHEME_CLI:
        raise ValueError(f"--scheme must be one of {list(cli_names())}; got {name!r} (registered without a "
                         "command line: use the Python API)")
    return info, SCHEME_CLI[info.name]


def all_flags() -> tuple[Flag, ...]:
    """The common flags, then every offered scheme's own flags (each option once)."""
    out, seen = list(COMMON_FLAGS), {f.option for f in COMMON_FLAGS}
    for _, cli in cli_schemes():
        for f in cli.flags:
            if f.option not in seen:
                seen.add(f.option)
                out.append(f)
    return tuple(out)


def flag_for(dest: str) -> Flag | None:
    """The scheme flag whose ``dest`` is ``dest`` (e.g. ``max_batch_size``), or ``None``."""
    return next((f for f in all_flags() if f.dest == dest), None)


# -- command line ------------------------------------------------------------------------------------------
def add_scheme_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--scheme`` and every scheme flag (common and per scheme) to ``parser``."""
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
    to it are refused, naming them)."""
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
    """``(scheme, strategy)`` given by parsed scheme flags."""
    return _build(args, None)[:2]


def problem_from_args(args: Any) -> Problem:
    """The :class:`~mcacct.engine.problem.Problem` given by parsed scheme flags (an ``argparse.Namespace`` or any
    object with the flags' ``dest`` attributes; missing ones count as not given), ``args.dtype`` and
    ``args.loss_kernel``.

    Raises
    ------
    ValueError
        Naming the offending flag or parameter and its allowed range.
    """
    return _build(args, getattr(args, "dtype", None) or "float64")[2]
