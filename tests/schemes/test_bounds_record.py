"""One ``Bounds`` record per scheme and strategy (issue #40): the contract reads ``bounds(strategy)`` and nothing
else for the sensitivity and the systematic terms; ``Scheme.bounds`` gathers the subclass's five statements; the
loss-error bound is the scheme's model, not a b-min-sep-shaped formula in the engine. Cheap: no sampling."""

from __future__ import annotations

import dataclasses
import math

import pytest

from mcacct import (BallsInBins, BandedInverse, BandedToeplitz, BMinSep, CyclicPoisson, MultiAttribution, Problem,
                    TruncatedBMinSep)
from mcacct.engine import systematic
from mcacct.schemes.base import BOUND_HOOKS, AccountedScheme, Bounds, LossErrorModel, LossErrorParams, Scheme
from mcacct.schemes.registry import SchemeInfo, missing_members

from tests.schemes.test_contract import PoissonOnce

STRATEGY = BandedToeplitz((1.0, 0.5))
SCHEMES = [BMinSep(0.2, 2, 12), BMinSep(0.2, 2, 12, warm_start=False), TruncatedBMinSep(0.2, 2, 12, 40, 5),
           MultiAttribution(0.2, 2, 12, 2), CyclicPoisson(0.3, 2, 12), BallsInBins(3, 12), BandedInverse(0.2, 2, 12)]


def test_the_contract_reads_one_record():
    members = {m for m in vars(AccountedScheme) if not m.startswith("_")}
    assert "bounds" in members and not members & set(BOUND_HOOKS)


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: type(s).__name__)
def test_bounds_gather_the_schemes_statements(scheme):
    b = scheme.bounds(STRATEGY)
    assert isinstance(b, Bounds) and isinstance(b.loss_error, LossErrorModel)
    assert b == (scheme.sensitivity_bound(STRATEGY), scheme.output_coordinate_bound(STRATEGY),
                 scheme.participation_boundaries(), scheme.draw_law_tv(), scheme.loss_error_params())
    assert b.sensitivity > 0 and b.output_coordinate > 0 and b.participation_boundaries >= 0 and b.draw_law_tv >= 0
    with pytest.raises(ValueError, match="strategy"):
        scheme.bounds((1.0,))


def test_the_recursions_model_is_its_closed_form():
    """``LossErrorParams.eta`` against the bound written out by hand (docs/soundness.md, "loss error")."""
    model = LossErrorParams(separation=4, sampling_prob=0.1, max_participations=3, mixture_factor=2.0)
    n, e, lam, u = 64, 1e-14, 7.5, 2.0**-53
    xi = lam + abs(math.log(0.1)) + 4 * abs(math.log(0.9)) + 1
    l_max = 3 * lam + n * abs(math.log(0.9)) + 4 * abs(math.log(0.1)) + 1
    assert model.eta(n, e, lam, u) == pytest.approx(2 * (3 * e + u * (n * (8 + 4 * xi) + 4 * n * l_max)), rel=1e-15)
    assert LossErrorParams(1, 1.0, 1, 1.0).eta(5, 0.0, 0.0, u) == pytest.approx(u * (5 * 12 + 4 * 5 * 1))  # p = 1


@dataclasses.dataclass(frozen=True)
class ClosedFormModel:
    """A loss-error model of another shape: a fixed bound (a stand-in for a closed form's)."""

    mixture_factor: float = 1.0

    def eta(self, iterations, term_error, term_bound, unit_roundoff) -> float:
        return 1e-9 + iterations * term_error


@dataclasses.dataclass(frozen=True)
class OwnBounds(PoissonOnce):
    """The toy with its bounds given as one record (no per-bound methods needed)."""

    def bounds(self, strategy) -> Bounds:
        self.check_strategy(strategy)
        return Bounds(1.0, 1.0, 1, 0.0, ClosedFormModel())


def test_the_engine_reads_the_schemes_model_and_a_scheme_may_give_the_record_itself():
    problem = Problem(OwnBounds(0.3, 6), STRATEGY)
    e_ell = systematic.term_error_bound(problem, 1.0) / 2.0
    assert systematic.loss_error_bound(problem, 1.0) == pytest.approx(1e-9 + 6 * e_ell, rel=1e-15)
    assert systematic.participation_mismatch_bound(problem.scheme, STRATEGY) == systematic.UNIFORM_BOUNDARY_MASS
    # a Scheme subclass that gives the record itself needs no per-bound method; one that gives neither the record
    # nor a bound is refused, naming each missing bound (tests/test_registry.py: the full list)
    assert missing_members(OwnBounds) == []
    SchemeInfo("own-bounds", OwnBounds)

    @dataclasses.dataclass(frozen=True)
    class Bare(Scheme):
        iterations: int = 4

    assert set(BOUND_HOOKS) <= set(missing_members(Bare)) and "bounds" not in missing_members(Bare)
