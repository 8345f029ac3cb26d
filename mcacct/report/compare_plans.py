r"""The rows of ``mcacct compare``: one plan per scheme, keyed by registry name (:data:`COMPARE_PLANS`).

A plan turns a :class:`CompareSetting` (iterations, ``b``, expected batch size ``B`` of ``M`` examples, strategy
and the values of the compare options) into the scheme's :class:`ComparePlan`: the problem at that expected
batch size, extra parameters to report and, where the scheme itself has a PLD analysis, its spec. A plan's
``options`` (``max_batch_size``, ...) each add its row when given; their values are checked by the option's
check. The row's name and whether it runs by default come from the scheme's
:class:`~mcacct.schemes.registry.SchemeInfo` (``label``, ``compare_default``); a registered scheme without a plan
here is not offered by ``mcacct compare``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from mcacct.engine.problem import Problem
from mcacct.schemes import registry
from mcacct.schemes.banded_inverse import BandedInverse, strategy_from_inverse
from mcacct.schemes.balls_in_bins import BallsInBins
from mcacct.schemes.bminsep import BMinSep, sampling_prob_from_batch_size
from mcacct.schemes.cyclic_poisson import CyclicPoisson
from mcacct.schemes.multi_attribution import MultiAttribution
from mcacct.strategies.banded import BandedToeplitz
from mcacct.schemes.truncated import TruncatedBMinSep
from mcacct.core.validate import check_count, check_real, parse_floats

__all__ = ["CompareSetting", "ComparePlan", "CompareEntry", "COMPARE_PLANS", "compare_schemes_info",
           "compare_options"]


@dataclass(frozen=True)
class CompareSetting:
    """One ``mcacct compare`` configuration: every row gets the parameters that give this expected batch size.

    ``options`` holds the values of the plans' options (``max_batch_size``, ...), ``None`` if not given.
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
        """The value of option ``dest``, or ``default`` when not given."""
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


@dataclass(frozen=True)
class CompareEntry:
    """The compare row of one registered scheme (an entry of :data:`COMPARE_PLANS`).

    Parameters
    ----------
    plan:
        ``plan(setting: CompareSetting) -> ComparePlan``.
    options:
        ``dest -> check(name, value)`` of the row's options: giving one adds the row (the command line offers
        the scheme flag of the same ``dest``, :func:`mcacct.cli.schemes.flag_for`).
    """

    plan: Callable[[CompareSetting], ComparePlan]
    options: Mapping[str, Callable[[str, Any], Any]] = field(default_factory=dict)


def _plan_bminsep(s: CompareSetting) -> ComparePlan:
    pld = None
    if s.min_sep == 1:
        def pld(mod, _q=s.participation_rate, _s=s.strategy.c_col[0], _n=s.iterations):
            return mod.PoissonGaussianSpec(sampling_prob=_q, sigma=1.0, steps=_n, sensitivity=_s), 1.0
    return ComparePlan(Problem(BMinSep(s.sampling_prob, s.min_sep, s.iterations, True), s.strategy), pld=pld)


def _plan_truncated(s: CompareSetting) -> ComparePlan:
    bmax = s.option("max_batch_size", int(math.ceil(1.25 * s.expected_batch_size)))
    scheme = TruncatedBMinSep(s.sampling_prob, s.min_sep, s.iterations, s.dataset_size, bmax, True)
    return ComparePlan(Problem(scheme, s.strategy))


def _plan_multi(s: CompareSetting) -> ComparePlan:
    k = s.option("max_examples_per_user", 2)
    p = s.sampling_prob
    pld = None
    if s.min_sep == 1:
        def pld(mod, _k=k, _p=p, _n=s.iterations, _s=s.strategy.c_col[0]):
            return mod.GroupPoissonSpec(group_size=_k, sampling_prob=_p, sigma=1.0, steps=_n), _s
    return ComparePlan(Problem(MultiAttribution(p, s.min_sep, s.iterations, k), s.strategy), {"level": "user"},
                       pld=pld)


def _plan_cyclic(s: CompareSetting) -> ComparePlan:
    b, n = s.min_sep, s.iterations
    q = min(b * s.participation_rate, 1.0)

    def pld(mod, _q=q, _c=tuple(s.strategy.c_col)):
        return mod.CyclicPoissonBandMFSpec(iterations=n, min_sep=b, sampling_prob=_q, c_col=_c, sigma=1.0), 1.0
    return ComparePlan(Problem(CyclicPoisson(q, b, n, random_phase=True), s.strategy), pld=pld)


def _plan_bins(s: CompareSetting) -> ComparePlan:
    bins = s.dataset_size / s.expected_batch_size
    try:
        m = check_count("dataset_size", s.dataset_size)
        check_real("expected_batch_size", s.expected_batch_size, low=0.0, high=float(m), low_open=True)
        t = int(round(bins))
        ok = abs(bins - t) <= 1e-9 * bins
    except ValueError:
        ok = False
    if not ok:
        return ComparePlan(None, skip=f"dataset_size / expected_batch_size = {bins:g} is not an integer number of bins")
    # more bands than bins is handled exactly (overlapping columns of a bin)
    return ComparePlan(Problem(BallsInBins(t, s.iterations), s.strategy))


def _plan_inverse(s: CompareSetting) -> ComparePlan:
    bands = s.option("inverse_bands")
    if bands is None:
        return ComparePlan(None, skip="inverse_bands not given")
    bands = parse_floats("inverse_bands", bands)
    inv = strategy_from_inverse(bands, s.iterations)
    return ComparePlan(Problem(BandedInverse(s.sampling_prob, s.min_sep, s.iterations, True), inv),
                       {"inverse_bands": list(bands), "c_col_length": len(inv.c_col)})


#: The compare row of each registered scheme, by registry name (add an entry to offer a scheme in ``mcacct
#: compare``; its row name and default come from the registry).
COMPARE_PLANS: dict[str, CompareEntry] = {
    "bminsep": CompareEntry(_plan_bminsep),
    "truncated": CompareEntry(_plan_truncated, {"max_batch_size": check_count}),
    "multi-attribution": CompareEntry(_plan_multi, {"max_examples_per_user": check_count}),
    "cyclic-poisson": CompareEntry(_plan_cyclic),
    "balls-in-bins": CompareEntry(_plan_bins),
    "banded-inverse": CompareEntry(_plan_inverse, {"inverse_bands": parse_floats}),
}


def compare_schemes_info() -> tuple[tuple[registry.SchemeInfo, CompareEntry], ...]:
    """``(info, entry)`` of every registered scheme with a compare plan, in registry order."""
    return tuple((e, COMPARE_PLANS[e.name]) for e in registry.schemes() if e.name in COMPARE_PLANS)


def compare_options() -> tuple[tuple[registry.SchemeInfo, str, Callable[[str, Any], Any]], ...]:
    """``(info, dest, check)`` of every compare option (each adds its scheme's row), in registry order."""
    return tuple((e, dest, check) for e, entry in compare_schemes_info() for dest, check in entry.options.items())
