r"""The one list of accounted sampling schemes, read by every consumer.

Each :class:`SchemeEntry` of :data:`SCHEMES` gives a scheme's command-line name, its class (a frozen dataclass
implementing :class:`mcacct.schemes.base.AccountedScheme`), its own command-line flags, the builder that turns parsed
flags into a :class:`~mcacct.engine.problem.Problem`, its row of ``mcacct compare`` and, optionally, the PLD
baselines that ``mcacct calibrate`` reports next to it. Job files store a scheme as ``{"type": class name,
field: value, ...}`` (:func:`scheme_to_dict` / :func:`scheme_from_dict`; the fingerprint hashes exactly that).

Consumers: ``mcacct calibrate|delta|epsilon|sample --scheme NAME`` (:func:`add_scheme_flags`,
:func:`problem_from_args`), :mod:`mcacct.jobs.shards` (files and fingerprints), :mod:`mcacct.report.compare` (plans and
its optional-row flags), :func:`mcacct.evr.calibrate.baseline_sigmas` (:func:`baseline_sigmas`) and the absl
launchers (``launch/_flags.py``).

**Adding a scheme** touches the scheme's own module (the dataclass) and one :class:`SchemeEntry` appended to
:data:`SCHEMES` below; nothing else lists schemes. Entries live here rather than next to their classes so that
the scheme modules stay free of command-line concerns and the import graph stays acyclic (this module imports
the scheme modules; none of them imports it).

Scheme flags (command line; ``--scheme`` picks the entry, default ``bminsep``):

* common: ``--iterations N --min-sep B (--sampling-prob P | --batch-size S --dataset-size M) [--c-col v1,...]
  [--cold-start]`` — each scheme accepts the subset in its entry's ``common`` (a flag that does not apply is
  refused, naming it); with none of the sampling flags the demo batch 32 of 1024 and ``c_col = 0.5 x 4`` are
  used, otherwise ``c_col`` defaults to ``1.0``;
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
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from mcacct.validate import check_count, check_prob, check_real, parse_floats
from mcacct.engine.problem import Problem
from mcacct.pld.specs import PoissonGaussianSpec as _ExactPoissonSpec  # the top candidate's exact PLD
from mcacct.schemes.banded_inverse import BandedInverse, strategy_from_inverse
from mcacct.schemes.baselines import BallsInBins, CyclicPoisson
from mcacct.schemes.multi_attribution import MultiAttribution
from mcacct.schemes.base import AccountedScheme
from mcacct.schemes.bminsep import BMinSep, expected_participation_rate, sampling_prob_from_batch_size
from mcacct.schemes.strategy import BandedToeplitz, parse_c_col
from mcacct.schemes.truncated import TruncatedBMinSep

__all__ = ["Flag", "SchemeEntry", "SchemeArgs", "CompareSetting", "ComparePlan", "SCHEMES", "COMMON_FLAGS",
           "DEFAULTS", "DEFAULT_SCHEME", "names", "get", "entry_for", "all_flags", "compare_flags",
           "add_scheme_flags", "problem_from_args", "scheme_to_dict", "scheme_from_dict", "baseline_sigmas", "top_pld",
           "AccountedScheme"]

#: Defaults of the common scheme flags (the built-in demo configuration).
DEFAULTS = {"iterations": 128, "min_sep": 4, "batch_size": 32.0, "dataset_size": 1024, "c_col": "0.5,0.5,0.5,0.5"}
DEFAULT_SCHEME = "bminsep"


# -- flags -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Flag:
    """One command-line flag of a scheme (``--max-batch-size``), defined once for argparse and absl.

    ``kind`` is ``int``, ``float``, ``str`` (parsed by the builder) or ``bool`` (a switch); every non-switch
    flag defaults to ``None`` (not given). ``check(name, value)`` validates a value given programmatically
    (``mcacct compare``'s options). ``compare``: the flag is also an option of ``mcacct compare``, which then
    adds the scheme's row. ``rate``: the flag fixes the participation rate (so the demo defaults of the batch
    flags are not used)."""

    option: str
    kind: type
    help: str
    check: Callable[[str, Any], Any] | None = None
    compare: bool = False
    rate: bool = False

    @property
    def dest(self) -> str:
        """The attribute name in parsed arguments (``max_batch_size``; also the absl flag's name)."""
        return self.option.lstrip("-").replace("-", "_")

    def parse(self, text: str) -> Any:
        """``argparse`` type of the flag: ``check(option, text)`` when there is a check (a refusal names the
        flag and its range at parse time, before any work), else ``kind(text)``."""
        if self.check is None:
            return self.kind(text)
        try:
            return self.check(self.option, text)
        except ValueError as err:
            msg = str(err)
            raise argparse.ArgumentTypeError(msg[len(self.option):].lstrip() if msg.startswith(self.option)
                                             else msg) from None

    def add_to(self, parser) -> None:
        """Add this flag to an ``argparse`` parser or argument group."""
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
                         "balls-in-bins and banded-inverse); default 1.0 (DP-SGD) when any sampling flag is "
                         "given, else the demo's 0.5,0.5,0.5,0.5", check=_c_col),
    Flag("--cold-start", bool, "Alg. 1 (all examples available at step 1) instead of the warm start of Alg. 2"),
)
_COMMON = {f.dest for f in COMMON_FLAGS}
_SAMPLING = ("sampling_prob", "batch_size", "dataset_size")


class SchemeArgs:
    """The scheme flags of one command line, with the defaults and checks shared by every builder.

    ``values`` maps flag ``dest`` names to values (``None`` or ``False``: not given)."""

    def __init__(self, entry: "SchemeEntry", values: Mapping[str, Any]):
        self.entry = entry
        self._values = dict(values)

    def get(self, dest: str, default: Any = None) -> Any:
        v = self._values.get(dest)
        return default if v is None else v

    def given(self, dest: str) -> bool:
        v = self._values.get(dest)
        return v is not None and v is not False

    @property
    def iterations(self) -> int:
        return self.get("iterations", DEFAULTS["iterations"])

    @property
    def min_sep(self) -> int:
        return self.get("min_sep", DEFAULTS["min_sep"])

    @property
    def warm_start(self) -> bool:
        return not self.given("cold_start")

    @property
    def explicit(self) -> bool:
        """Whether any flag fixing the participation rate was given (else the demo batch and ``c_col``)."""
        return any(self.given(d) for d in _SAMPLING) or any(self.given(f.dest) for f in self.entry.flags if f.rate)

    def rate(self, dataset_size_with_prob: bool = False) -> tuple[float | None, float | None, int | None]:
        """``(p, None, None)`` when ``--sampling-prob`` is given, else ``(None, B, M)`` from the batch flags
        (the demo's 32 of 1024 when no sampling flag is given)."""
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
        """b-min-sep's ``p``: ``--sampling-prob``, or ``p0 / (1 - p0 (b-1))`` with ``p0 = B/M``."""
        sp, bs, m = self.rate()
        if sp is not None:
            return sp
        if bs > m / min_sep:
            demo = "" if self.explicit else (f" (the demo default batch {bs:g} of {m}: give --sampling-prob, or "
                                             "--batch-size with --dataset-size)")
            raise ValueError(f"--batch-size must be in (0, dataset size / min-sep] = (0, {m / min_sep:g}] so that "
                             f"every example can take part; got {bs:g}{demo}")
        return sampling_prob_from_batch_size(bs, m, min_sep)

    def strategy(self) -> BandedToeplitz:
        """``BandedToeplitz(--c-col)`` (default 1.0, or the demo's when no sampling flag is given)."""
        c_col = self.get("c_col", "1.0" if self.explicit else DEFAULTS["c_col"])
        return BandedToeplitz(c_col)


# -- mcacct compare ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompareSetting:
    """One ``mcacct compare`` configuration: every row gets the parameters that give this expected batch size.

    ``options`` holds the values of the entries' compare flags (``max_batch_size``, ...), ``None`` if not given.
    """

    iterations: int
    min_sep: int
    expected_batch_size: float
    dataset_size: int
    strategy: BandedToeplitz
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def participation_rate(self) -> float:
        """``p0 = B / M``."""
        return self.expected_batch_size / self.dataset_size

    @property
    def sampling_prob(self) -> float:
        """b-min-sep's ``p = p0 / (1 - p0 (b-1))`` (checks ``B / M <= 1/b``)."""
        return sampling_prob_from_batch_size(self.expected_batch_size, self.dataset_size, self.min_sep)

    def option(self, dest: str, default: Any = None) -> Any:
        v = self.options.get(dest)
        return default if v is None else v


@dataclass(frozen=True)
class ComparePlan:
    """A scheme's row of ``mcacct compare``: its problem (``None``: skipped, with ``skip`` the reason), extra
    ``params`` reported next to the scheme's fields, and ``pld(module) -> (spec, scale)`` when the scheme
    itself has a PLD analysis (its sigma is ``scale * module.pld_calibrate(spec, epsilon, delta)``)."""

    problem: Problem | None
    params: dict = field(default_factory=dict)
    pld: Callable[[Any], tuple[Any, float]] | None = None
    skip: str | None = None


# -- entries -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SchemeEntry:
    """One accounted scheme.

    Parameters
    ----------
    name:
        Command-line name (``--scheme NAME``).
    cls:
        The frozen dataclass (an :class:`~mcacct.schemes.base.AccountedScheme`); job files name it by class name.
    summary:
        One line for ``--help``.
    build:
        ``build(args: SchemeArgs) -> (scheme, strategy)``.
    common:
        The common flags (dest names) that apply to the scheme; any other given common flag is refused.
    flags:
        The scheme's own flags.
    compare_plan:
        ``compare_plan(setting: CompareSetting) -> ComparePlan``.
    compare_default:
        Whether ``mcacct compare`` runs the row by default (otherwise only when one of its compare flags is
        given or it is named in ``--schemes``).
    label:
        Name of the row in ``mcacct compare`` (default ``name``); accepted wherever ``name`` is.
    baselines:
        Optional ``baselines(problem, epsilon, delta) -> dict``: sigmas of deterministic (PLD) baselines at the
        same expected batch size, reported by ``mcacct calibrate``.
    hints:
        Optional words added when a common flag (by dest) is refused for this scheme.
    top_pld:
        Optional ``top_pld(problem) -> spec | None``: an :mod:`mcacct.pld` spec (at ``sigma = 1``) whose PLD is
        exactly the privacy curve of the scheme as run, when there is one (b-min-sep with ``b = 1`` is Poisson
        DP-SGD); ``calibrate`` then certifies its top candidate with the PLD accountant.
    """

    name: str
    cls: type
    summary: str
    build: Callable[[SchemeArgs], tuple[Any, BandedToeplitz]]
    common: frozenset
    compare_plan: Callable[[CompareSetting], ComparePlan]
    flags: tuple[Flag, ...] = ()
    compare_default: bool = False
    label: str | None = None
    baselines: Callable[[Problem, float, float], dict] | None = None
    hints: Mapping[str, str] = field(default_factory=dict)
    top_pld: Callable[[Problem], Any] | None = None

    @property
    def row_name(self) -> str:
        return self.label or self.name

    @property
    def accepted(self) -> tuple[str, ...]:
        """Options this scheme accepts, in order (for messages)."""
        return tuple(f.option for f in COMMON_FLAGS if f.dest in self.common) + tuple(f.option for f in self.flags)


# bminsep
def _build_bminsep(a: SchemeArgs):
    b = a.min_sep
    return BMinSep(a.min_sep_prob(b), b, a.iterations, a.warm_start), a.strategy()


def _plan_bminsep(s: CompareSetting) -> ComparePlan:
    pld = None
    if s.min_sep == 1:
        def pld(mod, _q=s.participation_rate, _s=s.strategy.c_col[0], _n=s.iterations):
            return mod.PoissonGaussianSpec(sampling_prob=_q, sigma=1.0, steps=_n, sensitivity=_s), 1.0
    return ComparePlan(Problem(BMinSep(s.sampling_prob, s.min_sep, s.iterations, True), s.strategy), pld=pld)


def _baselines_bminsep(problem: Problem, epsilon: float, delta: float) -> dict:
    """Poisson DP-SGD (``C = I``, ``q = p0``, ``n`` steps) and cyclic-Poisson BandMF (``b`` parts,
    ``q = b p0``, ``ceil(n/b)`` compositions, sensitivity ``||c||``) at the same expected batch size."""
    from mcacct.pld import CyclicPoissonBandMFSpec, PoissonGaussianSpec, pld_calibrate
    scheme = problem.scheme
    p0 = scheme.participation_rate
    b, n = scheme.min_sep, scheme.iterations
    out = {"poisson_dpsgd_sigma": pld_calibrate(PoissonGaussianSpec(p0, 1.0, steps=n), epsilon, delta)}
    out["cyclic_poisson_bandmf_sigma"] = pld_calibrate(
        CyclicPoissonBandMFSpec(n, b, min(1.0, b * p0), tuple(problem.strategy.c_col), 1.0), epsilon, delta)
    out["note"] = ("PLD (FFT) accountant at the target delta; equal expected batch size p0 = "
                   f"{p0:.6g} of the dataset per iteration")
    return out


# truncated
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


def _plan_truncated(s: CompareSetting) -> ComparePlan:
    bmax = s.option("max_batch_size", int(math.ceil(1.25 * s.expected_batch_size)))
    scheme = TruncatedBMinSep(s.sampling_prob, s.min_sep, s.iterations, s.dataset_size, bmax, True)
    return ComparePlan(Problem(scheme, s.strategy))


# multi-attribution
def _build_multi(a: SchemeArgs):
    b = a.min_sep
    k = a.get("max_examples_per_user", 1)
    return MultiAttribution(a.min_sep_prob(b), b, a.iterations, k), a.strategy()


def _plan_multi(s: CompareSetting) -> ComparePlan:
    k = s.option("max_examples_per_user", 2)
    p = s.sampling_prob
    pld = None
    if s.min_sep == 1:
        def pld(mod, _k=k, _p=p, _n=s.iterations, _s=s.strategy.c_col[0]):
            return mod.GroupPoissonSpec(group_size=_k, sampling_prob=_p, sigma=1.0, steps=_n), _s
    return ComparePlan(Problem(MultiAttribution(p, s.min_sep, s.iterations, k), s.strategy), {"level": "user"},
                       pld=pld)


# cyclic-poisson
def _build_cyclic(a: SchemeArgs):
    b = a.min_sep
    sp, bs, m = a.rate()
    if sp is None:
        sampling_prob_from_batch_size(bs, m, b)  # checks B / M <= 1/b, naming expected_batch_size
        sp = min(b * bs / m, 1.0)
    return CyclicPoisson(sp, b, a.iterations, random_phase=not a.given("public_phase")), a.strategy()


def _plan_cyclic(s: CompareSetting) -> ComparePlan:
    b, n = s.min_sep, s.iterations
    q = min(b * s.participation_rate, 1.0)

    def pld(mod, _q=q, _c=tuple(s.strategy.c_col)):
        return mod.CyclicPoissonBandMFSpec(iterations=n, min_sep=b, sampling_prob=_q, c_col=_c, sigma=1.0), 1.0
    return ComparePlan(Problem(CyclicPoisson(q, b, n, random_phase=True), s.strategy), pld=pld)


# balls-in-bins
def _bins_from_batch(bs: float, m: int) -> int:
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
        bins = _bins_from_batch(bs, m)
    elif a.given("batch_size") or a.given("dataset_size"):
        raise ValueError("give either --bins or --batch-size with --dataset-size for --scheme balls-in-bins, "
                         "not both")
    return BallsInBins(bins, a.iterations), a.strategy()


def _plan_bins(s: CompareSetting) -> ComparePlan:
    try:
        t = _bins_from_batch(s.expected_batch_size, s.dataset_size)
    except ValueError:
        bins = s.dataset_size / s.expected_batch_size
        return ComparePlan(None, skip=f"dataset_size / expected_batch_size = {bins:g} is not an integer number of bins")
    # more bands than bins is handled exactly (overlapping columns of a bin)
    return ComparePlan(Problem(BallsInBins(t, s.iterations), s.strategy))


# banded-inverse
def _build_inverse(a: SchemeArgs):
    r = a.min_sep
    bands = a.get("inverse_bands")
    if bands is not None:
        if a.given("c_col"):
            raise ValueError("give either --c-col (C's first column) or --inverse-bands (the bands of C^-1) for "
                             "--scheme banded-inverse, not both")
        strategy = strategy_from_inverse(parse_floats("inverse_bands", bands), a.iterations)
    else:
        strategy = a.strategy()
    return BandedInverse(a.min_sep_prob(r), r, a.iterations, a.warm_start), strategy


def _plan_inverse(s: CompareSetting) -> ComparePlan:
    bands = s.option("inverse_bands")
    if bands is None:
        return ComparePlan(None, skip="inverse_bands not given")
    bands = parse_floats("inverse_bands", bands)
    inv = strategy_from_inverse(bands, s.iterations)
    return ComparePlan(Problem(BandedInverse(s.sampling_prob, s.min_sep, s.iterations, True), inv),
                       {"inverse_bands": list(bands), "c_col_length": len(inv.c_col)})


_ALL = frozenset(_COMMON)


def _top_pld_bminsep(problem: Problem):
    """b-min-sep with ``b = 1`` is Poisson subsampling with ``C = c_0 I``: ``n`` Poisson-subsampled Gaussians of
    sensitivity ``c_0``."""
    scheme = problem.scheme
    if scheme.min_sep != 1:
        return None
    return _ExactPoissonSpec(sampling_prob=scheme.sampling_prob, sigma=1.0, steps=scheme.iterations,
                             sensitivity=problem.strategy.c_col[0])

#: Every scheme, in command-line order. Append an entry here to add a scheme (see the module docstring).
SCHEMES: tuple[SchemeEntry, ...] = (
    SchemeEntry("bminsep", BMinSep, "b-min-sep subsampling (Alg. 1/2)", _build_bminsep, _ALL, _plan_bminsep,
                compare_default=True, label="b-min-sep", baselines=_baselines_bminsep, top_pld=_top_pld_bminsep),
    SchemeEntry("truncated", TruncatedBMinSep, "b-min-sep truncated to a maximum batch size (App. D)",
                _build_truncated, _ALL, _plan_truncated,
                flags=(Flag("--max-batch-size", int, "truncated: maximum batch size B_max (>= 1; default "
                            "ceil(1.25 x expected batch size)); compare: adds the truncated row",
                            check=check_count, compare=True),),
                label="truncated-b-min-sep"),
    SchemeEntry("multi-attribution", MultiAttribution, "user-level multi-attribution b-min-sep (Alg. 3), cold "
                "start", _build_multi, _ALL, _plan_multi,
                flags=(Flag("--max-examples-per-user", int, "multi-attribution: examples per user k_u (>= 1; "
                            "default 1, compare: 2); compare: adds the multi-attribution row",
                            check=check_count, compare=True),)),
    SchemeEntry("cyclic-poisson", CyclicPoisson, "cyclic Poisson over min-sep parts (q = b B / M)", _build_cyclic,
                _ALL - {"cold_start"}, _plan_cyclic, compare_default=True,
                hints={"cold_start": "the part is fixed from step 1 (there is no start state)"},
                flags=(Flag("--public-phase", bool, "cyclic-poisson: the public-partition worst case (part 0) "
                            "instead of a secret random phase"),)),
    SchemeEntry("balls-in-bins", BallsInBins, "balls-in-bins with T bins (T = M / B)", _build_bins,
                frozenset({"iterations", "batch_size", "dataset_size", "c_col"}), _plan_bins, compare_default=True,
                flags=(Flag("--bins", int, "balls-in-bins: number of bins T (>= 1; default dataset size / "
                            "batch size)", check=check_count, rate=True),),
                hints={"min_sep": "its separation is the number of bins: use --bins",
                       "sampling_prob": "every opportunity is taken (p = 1): give --bins or the batch flags",
                       "cold_start": "there is no start state"}),
    SchemeEntry("banded-inverse", BandedInverse, "r-min-sep with a non-banded C from banded C^-1 (App. B)",
                _build_inverse, _ALL, _plan_inverse,
                flags=(Flag("--inverse-bands", str, "banded-inverse: comma-separated bands h0,h1,... of C^-1 "
                            "(h0 > 0; C = their inverse, instead of --c-col); compare: adds the banded-inverse "
                            "row", check=parse_floats, compare=True),)),
)


# -- look-ups ----------------------------------------------------------------------------------------------
def names() -> tuple[str, ...]:
    """Command-line names of every scheme."""
    return tuple(e.name for e in SCHEMES)


def get(name: str) -> SchemeEntry:
    """The entry called ``name`` (its command-line name or its compare label)."""
    for e in SCHEMES:
        if name in (e.name, e.label):
            return e
    raise ValueError(f"scheme must be one of {list(names())}; got {name!r}")


def entry_for(scheme: Any) -> SchemeEntry | None:
    """The entry of a scheme instance or class (the nearest registered class in its MRO), or ``None``."""
    cls = scheme if isinstance(scheme, type) else type(scheme)
    by_cls = {e.cls: e for e in SCHEMES}
    for c in cls.__mro__:
        if c in by_cls:
            return by_cls[c]
    return None


def all_flags() -> tuple[Flag, ...]:
    """The common flags, then every scheme's own flags (each option once)."""
    out, seen = list(COMMON_FLAGS), {f.option for f in COMMON_FLAGS}
    for e in SCHEMES:
        for f in e.flags:
            if f.option not in seen:
                seen.add(f.option)
                out.append(f)
    return tuple(out)


def compare_flags() -> tuple[tuple[SchemeEntry, Flag], ...]:
    """The flags that are also options of ``mcacct compare`` (each adds its scheme's row)."""
    return tuple((e, f) for e in SCHEMES for f in e.flags if f.compare)


# -- command line ------------------------------------------------------------------------------------------
def add_scheme_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--scheme`` and every scheme flag (common and per scheme) to ``parser``."""
    g = parser.add_argument_group("mechanism and sampling scheme (defaults: the built-in demo configuration)")
    g.add_argument("--scheme", choices=names(), default=DEFAULT_SCHEME,
                   help="sampling scheme (default bminsep): " + "; ".join(f"{e.name}: {e.summary}" for e in SCHEMES))
    for f in COMMON_FLAGS:
        f.add_to(g)
    s = parser.add_argument_group("scheme-specific flags (refused for the other schemes)")
    for f in all_flags()[len(COMMON_FLAGS):]:
        f.add_to(s)


def _values(args: Any) -> dict[str, Any]:
    return {f.dest: getattr(args, f.dest, None) for f in all_flags()}


def scheme_args(args: Any) -> SchemeArgs:
    """The :class:`SchemeArgs` of parsed arguments (``args.scheme`` picks the entry; flags that do not apply
    to it are refused, naming them)."""
    entry = get(getattr(args, "scheme", None) or DEFAULT_SCHEME)
    values = _values(args)
    own = {f.dest for f in entry.flags} | set(entry.common)
    for f in all_flags():
        v = values.get(f.dest)
        if f.dest not in own and v is not None and v is not False:
            hint = entry.hints.get(f.dest)
            raise ValueError(f"{f.option} does not apply to --scheme {entry.name}{'; ' + hint if hint else ''} "
                             f"(its flags: {', '.join(entry.accepted)})")
    return SchemeArgs(entry, values)


def scheme_from_args(args: Any):
    """``(scheme, strategy)`` given by parsed scheme flags."""
    a = scheme_args(args)
    return a.entry.build(a)


def problem_from_args(args: Any) -> Problem:
    """The :class:`~mcacct.engine.problem.Problem` given by parsed scheme flags (an ``argparse.Namespace`` or any
    object with the flags' ``dest`` attributes; missing ones count as not given) and ``args.dtype``.

    Raises
    ------
    ValueError
        Naming the offending flag or parameter and its allowed range.
    """
    scheme, strategy = scheme_from_args(args)
    return Problem(scheme, strategy, dtype=getattr(args, "dtype", None) or "float64")


# -- job files ---------------------------------------------------------------------------------------------
def _types() -> dict[str, type]:
    return {e.cls.__name__: e.cls for e in SCHEMES}


def scheme_to_dict(scheme: Any) -> dict:
    """``{"type": class name, field: value, ...}`` with every dataclass field of a registered scheme."""
    types = _types()
    name = type(scheme).__name__
    if types.get(name) is not type(scheme) or not dataclasses.is_dataclass(scheme):
        raise ValueError(f"problem.scheme must be one of {sorted(types)} for a sharded job; got {name}")
    out: dict[str, Any] = {"type": name}
    for f in dataclasses.fields(scheme):
        v = getattr(scheme, f.name)
        if isinstance(v, (bool, np.bool_)):
            v = bool(v)
        elif isinstance(v, (int, np.integer)):
            v = int(v)
        elif isinstance(v, (float, np.floating)):
            v = float(v)
        else:
            raise ValueError(f"problem.scheme.{f.name} = {v!r} cannot be stored in a job file")
        out[f.name] = v
    return out


def scheme_from_dict(d: dict):
    """Inverse of :func:`scheme_to_dict` (the fields must be exactly those of the named class)."""
    types = _types()
    if not isinstance(d, dict) or "type" not in d:
        raise ValueError("config.scheme has no 'type': the file was written by an older mcacct whose fingerprint "
                         "did not identify the scheme and kernel; rerun the shards with this version")
    cls = types.get(d["type"])
    if cls is None:
        raise ValueError(f"config.scheme.type must be one of {sorted(types)}; got {d['type']!r}")
    names_ = {f.name for f in dataclasses.fields(cls)}
    given = set(d) - {"type"}
    if given != names_:
        raise ValueError(f"config.scheme: {cls.__name__} has fields {sorted(names_)}; got {sorted(given)}")
    return cls(**{k: d[k] for k in names_})


# -- PLD baselines -----------------------------------------------------------------------------------------
def top_pld(problem: Problem):
    """The scheme entry's exact PLD spec (``top_pld`` hook) for this problem, or ``None``."""
    entry = entry_for(problem.scheme)
    return None if entry is None or entry.top_pld is None else entry.top_pld(problem)


def baseline_sigmas(problem: Problem, epsilon: float, delta: float) -> dict:
    """The baseline sigmas of the scheme's entry (its ``baselines`` hook), or ``{}`` when it has none."""
    entry = entry_for(problem.scheme)
    if entry is None or entry.baselines is None:
        return {}
    return entry.baselines(problem, epsilon, delta)
