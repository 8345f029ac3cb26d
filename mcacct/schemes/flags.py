r"""The command-line facet of a scheme's entry: its flags and the builder that turns them into a scheme.

:class:`Flag` defines a flag once for argparse and the absl launchers; :data:`COMMON_FLAGS` are the flags shared
by the schemes (each scheme accepts a subset, :attr:`SchemeCLI.common`); :class:`SchemeCLI` is what a scheme's
:class:`~mcacct.schemes.entry.SchemeInfo` says about its command line; :class:`SchemeArgs` gives a scheme's builder
the parsed values with the demo defaults (:data:`DEFAULTS`) and the rules shared by every scheme:
``--sampling-prob`` or ``--batch-size`` with ``--dataset-size``; with no sampling flag, the demo configuration
(batch 32 of 1024 and its own ``c_col = 0.5 x 4``). Without ``--c-col``, a setting the user gives gets the default
of the Python API (:func:`mcacct.get_noise_multiplier`): the MSE-optimised banded Toeplitz ``C``
(:func:`mcacct.strategies.default.default_strategy`, ``||c|| = 1``) with as many bands as the scheme's separation
(``--min-sep``; the cycle length of cyclic Poisson, the number of bins of balls-in-bins), so that ``C`` never has
more bands than participations are apart; banded-inverse states its own (``C = I``).

Nothing here parses a command line: :mod:`mcacct.cli.schemes` reads these entries from the registry.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from mcacct.core.rates import sampling_prob_from_batch_size
from mcacct.strategies import default as strategy_default
from mcacct.strategies.banded import BandedToeplitz, parse_c_col
from mcacct.core.validate import check_count, check_prob, check_real

__all__ = ["Flag", "COMMON_FLAGS", "COMMON_DESTS", "DEFAULTS", "SchemeArgs", "SchemeCLI"]

#: Defaults of the common scheme flags (the built-in demo configuration).
DEFAULTS = {"iterations": 128, "min_sep": 4, "batch_size": 32.0, "dataset_size": 1024, "c_col": "0.5,0.5,0.5,0.5"}


# -- flags -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Flag:
    """One command-line flag of a scheme (``--max-batch-size``), defined once for argparse and absl.

    ``kind`` is ``int``, ``float``, ``str`` (parsed by the builder) or ``bool`` (a switch); every non-switch
    flag defaults to ``None`` (not given). ``check(name, value)`` validates a value (the argparse type, through
    :meth:`parse`). ``rate``: the flag fixes the participation rate (so the demo defaults of the batch flags
    are not used)."""

    option: str
    kind: type
    help: str
    check: Callable[[str, Any], Any] | None = None
    rate: bool = False

    @property
    def dest(self) -> str:
        """The attribute name in parsed arguments (``max_batch_size``; also the absl flag's name)."""
        return self.option.lstrip("-").replace("-", "_")

    def parse(self, text: str) -> Any:
        """``argparse`` type of the flag: ``check(option, text)`` when there is a check (a refusal names the
        flag and its range at parse time, before any work), else ``kind(text)``.

        Parameters
        ----------
        text : str
            The text after the flag.

        Returns
        -------
        object
            The checked value (``check``'s return), or ``kind(text)``.

        Raises
        ------
        argparse.ArgumentTypeError
            With the check's ``ValueError`` message, the leading flag name removed (argparse adds it).
        ValueError
            From ``kind(text)`` when the flag has no check.
        """
        if self.check is None:
            return self.kind(text)
        try:
            return self.check(self.option, text)
        except ValueError as err:
            msg = str(err)
            raise argparse.ArgumentTypeError(msg[len(self.option):].lstrip() if msg.startswith(self.option)
                                             else msg) from None

    def add_to(self, parser) -> None:
        """Add this flag to an ``argparse`` parser or argument group.

        Parameters
        ----------
        parser : argparse.ArgumentParser or argument group
            Where to add it: a switch (``store_true``) for ``bool``, else an option of type :meth:`parse` (or
            ``kind``) defaulting to ``None``.
        """
        if self.kind is bool:
            parser.add_argument(self.option, action="store_true", help=self.help)
        else:
            parser.add_argument(self.option, type=self.parse if self.check is not None else self.kind, default=None,
                                help=self.help)


def _positive(name: str, value: Any) -> float:
    return check_real(name, value, low=0.0, low_open=True)


def _c_col(name: str, value: Any) -> tuple[float, ...]:
    return parse_c_col(value, name)


COMMON_FLAGS = (
    Flag("--iterations", int, "training iterations n (>= 1; default 128)", check=check_count),
    Flag("--min-sep", int, "minimum separation b (>= 1; 1 = Poisson; default 4); the cycle length of "
                           "cyclic-poisson, r of banded-inverse", check=check_count),
    Flag("--sampling-prob", float, "sampling probability p in (0, 1] of an available example (cyclic-poisson: "
                                   "q, the probability within the example's part)", check=check_prob),
    Flag("--batch-size", float, "expected batch size (> 0, with --dataset-size; sets p = p0/(1 - p0 (b-1)), "
                                "p0 = batch/dataset; default 32 of 1024 when no sampling flag is given)",
         check=_positive),
    Flag("--dataset-size", int, "dataset size (>= 1, with --batch-size; truncated: the scheme's M, also with "
                                "--sampling-prob)", check=check_count),
    Flag("--c-col", str, "comma-separated non-zeros of C's first column, each >= 0 (length <= min-sep except "
                         "balls-in-bins and banded-inverse); default: the MSE-optimised banded Toeplitz C "
                         "(||c|| = 1) with min-sep bands (cyclic-poisson: cycle length, balls-in-bins: bins; "
                         "banded-inverse: 1.0), as get_noise_multiplier; the demo (no sampling flag) spells out "
                         "its own 0.5,0.5,0.5,0.5", check=_c_col),
    Flag("--cold-start", bool, "Alg. 1 (all examples available at step 1) instead of the warm start of Alg. 2"),
)
COMMON_DESTS = frozenset(f.dest for f in COMMON_FLAGS)
_SAMPLING = ("sampling_prob", "batch_size", "dataset_size")


class SchemeArgs:
    """The scheme flags of one command line, with the defaults and checks shared by every builder.

    ``name`` is the scheme's registry name, ``cli`` its :class:`SchemeCLI` (its ``flags`` are read); ``values`` maps flag ``dest`` names to values (``None`` or ``False``: not given)."""

    def __init__(self, name: str, cli: Any, values: Mapping[str, Any]):
        self.name = name
        self.cli = cli
        self._values = dict(values)

    def get(self, dest: str, default: Any = None) -> Any:
        """The value of flag ``dest``, or ``default`` when not given.

        Parameters
        ----------
        dest : str
            The flag's dest name.
        default : object, optional
            Returned when the flag's value is ``None``.

        Returns
        -------
        object
            The flag's value, or ``default``.
        """
        v = self._values.get(dest)
        return default if v is None else v

    def given(self, dest: str) -> bool:
        """Whether flag ``dest`` was given (a switch: set).

        Parameters
        ----------
        dest : str
            The flag's dest name.

        Returns
        -------
        bool
            ``True`` unless the value is absent, ``None`` or ``False``.
        """
        v = self._values.get(dest)
        return v is not None and v is not False

    @property
    def iterations(self) -> int:
        """``--iterations`` (default 128)."""
        return self.get("iterations", DEFAULTS["iterations"])

    @property
    def min_sep(self) -> int:
        """``--min-sep`` (default 4)."""
        return self.get("min_sep", DEFAULTS["min_sep"])

    @property
    def warm_start(self) -> bool:
        """``False`` when ``--cold-start`` is given."""
        return not self.given("cold_start")

    @property
    def explicit(self) -> bool:
        """Whether any flag fixing the participation rate was given (else the demo batch and ``c_col``)."""
        return any(self.given(d) for d in _SAMPLING) or any(self.given(f.dest) for f in self.cli.flags if f.rate)

    def rate(self, dataset_size_with_prob: bool = False) -> tuple[float | None, float | None, int | None]:
        """``(p, None, None)`` when ``--sampling-prob`` is given, else ``(None, B, M)`` from the batch flags
        (the demo's 32 of 1024 when no sampling flag is given).

        Parameters
        ----------
        dataset_size_with_prob : bool, default False
            Accept ``--dataset-size`` next to ``--sampling-prob`` (truncation's ``M``); it is then read elsewhere.

        Returns
        -------
        tuple
            ``(p, None, None)`` or ``(None, B, M)``.

        Raises
        ------
        ValueError
            If ``--sampling-prob`` is given with ``--batch-size`` (or with ``--dataset-size``, unless
            ``dataset_size_with_prob``), or if only one of ``--batch-size`` and ``--dataset-size`` is given.
        """
        sp, bs, m = (self._values.get(d) for d in _SAMPLING)
        if sp is not None:
            if bs is not None or (m is not None and not dataset_size_with_prob):
                raise ValueError("give either --sampling-prob or --batch-size with --dataset-size, not both")
            return sp, None, None
        if not self.explicit:
            bs = DEFAULTS["batch_size"] if bs is None else bs
            m = DEFAULTS["dataset_size"] if m is None else m
        if bs is None or m is None:
            raise ValueError("--batch-size and --dataset-size must be given together")
        return None, bs, m

    def min_sep_prob(self, min_sep: int) -> float:
        r"""b-min-sep's ``p``: ``--sampling-prob``, or ``p0 / (1 - p0 (b-1))`` with ``p0 = B/M``.

        Parameters
        ----------
        min_sep : int
            The separation ``b >= 1``.

        Returns
        -------
        float
            :math:`p \in (0, 1]`.

        Raises
        ------
        ValueError
            As :meth:`rate`, or naming ``--batch-size`` if :math:`B > M / b` (with a hint when it is the demo's
            default).
        """
        sp, bs, m = self.rate()
        if sp is not None:
            return sp
        if bs > m / min_sep:
            demo = "" if self.explicit else (f" (the demo default batch {bs:g} of {m}: give --sampling-prob, or "
                                             "--batch-size with --dataset-size)")
            raise ValueError(f"--batch-size must be in (0, dataset size / min-sep] = (0, {m / min_sep:g}] so that "
                             f"every example can take part; got {bs:g}{demo}")
        return sampling_prob_from_batch_size(bs, m, min_sep)

    def strategy(self, bands: int | None = None, default: tuple[float, ...] | None = None) -> BandedToeplitz:
        """The strategy ``C`` of the command line.

        Parameters
        ----------
        bands : int, optional
            Bands of the default ``C`` (default ``--min-sep``): the scheme's separation of participations.
        default : tuple of float, optional
            A scheme's own default ``c_col``, used instead of the MSE-optimised one.

        Returns
        -------
        BandedToeplitz
            ``--c-col`` when given; the demo's ``0.5 x 4`` when no sampling flag is given (the demo configuration
            spells out its own); else ``default`` when given, else the MSE-optimised banded Toeplitz ``C`` with
            ``min(bands, iterations)`` bands (:func:`mcacct.strategies.default.default_strategy`, as the Python API).
        """
        if self.given("c_col"):
            return BandedToeplitz(self.get("c_col"))
        if not self.explicit:
            return BandedToeplitz(DEFAULTS["c_col"])
        if default is not None:
            return BandedToeplitz(default)
        return strategy_default.default_strategy(self.iterations, self.min_sep if bands is None else int(bands))


@dataclass(frozen=True)
class SchemeCLI:
    """The command line of one scheme (:attr:`mcacct.schemes.entry.SchemeInfo.cli`).

    Parameters
    ----------
    build : callable
        ``build(args: SchemeArgs) -> (scheme, strategy)``; its ``ValueError`` names the scheme's fields, which
        the command line renames to flags (``parameters``).
    common : frozenset of str
        The common flags (dest names) that apply to the scheme; any other given common flag is refused.
    flags : tuple of Flag
        The scheme's own flags.
    hints : mapping of str to str
        Words added when a common flag (by dest) is refused for this scheme.
    parameters : mapping of str to str
        The scheme's fields whose flag is not their dest (``cycle_length`` of cyclic Poisson is ``--min-sep``):
        a refusal by the scheme names the flag instead.
    """

    build: Callable[[SchemeArgs], tuple[Any, BandedToeplitz]]
    common: frozenset = COMMON_DESTS
    flags: tuple[Flag, ...] = ()
    hints: Mapping[str, str] = field(default_factory=dict)
    parameters: Mapping[str, str] = field(default_factory=dict)

    @property
    def accepted(self) -> tuple[str, ...]:
        """Options this scheme accepts, in order (for messages)."""
        return tuple(f.option for f in COMMON_FLAGS if f.dest in self.common) + tuple(f.option for f in self.flags)
