"""``Estimate.delta_at``: delta queried by an epsilon value, exact on the run's grid and labelled as the
rounded-up histogram's off it."""

from __future__ import annotations

import jax
import pytest

import mcacct
from mcacct import BandedToeplitz, BMinSep, Problem
from mcacct.engine.estimate import DeltaAt


@pytest.fixture(scope="module")
def est():
    problem = Problem(BMinSep(0.2, 4, 32, True), BandedToeplitz((0.6, 0.5, 0.4)))
    return mcacct.estimate(problem, 1.0, jax.random.key(3), 2048, (0.5, 1.0), chunk_size=512)


def test_on_the_grid_it_is_the_exact_delta(est):
    got = est.delta_at(1.0)
    want = est.delta(1)
    assert isinstance(got, DeltaAt) and got.exact
    assert (got.delta_estimate, got.delta_upper, got.delta_lower) == (want["delta_estimate"], want["delta_upper"],
                                                                       want["delta_lower"])
    assert set(got.by_direction) == {"remove", "add"}


def test_off_the_grid_it_is_the_histogram_and_says_so(est):
    mid = est.delta_at(0.75)
    assert not mid.exact and mid.delta_lower is None
    curve = est.delta_curve([0.75])
    assert mid.delta_upper == pytest.approx(float(curve["delta_upper"][0]), rel=0, abs=0)
    # delta(epsilon) decreases in epsilon, and the histogram rounds up: between the grid's exact estimates
    assert est.delta_at(1.0).delta_estimate <= mid.delta_estimate
    assert mid.delta_upper >= est.delta_at(1.0).delta_upper - 1e-12


def test_bad_epsilon_names_the_parameter(est):
    with pytest.raises(ValueError, match="epsilon must be in"):
        est.delta_at(-1.0)


def test_epsilon_at_is_the_typed_epsilon_query(est):
    from mcacct.engine.estimate import EpsilonAt
    got = est.epsilon_at(0.05)
    want = est.epsilon(0.05)
    assert isinstance(got, EpsilonAt) and not got.exact
    assert (got.epsilon_estimate, got.epsilon_upper) == (want["epsilon_estimate"], want["epsilon_upper"])
    assert got.epsilon_estimate <= got.epsilon_upper
    # the certified upper epsilon gives at most the target delta on the histogram's upper curve
    assert est.delta_at(got.epsilon_upper).delta_upper <= 0.05 + 1e-12
    with pytest.raises(ValueError, match="delta must be in"):
        est.epsilon_at(1.5)
