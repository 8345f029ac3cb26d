"""The guided second ladder of a PLD calibration (mcacct/pld/search.py): the interpolated crossing, the rungs placed
around it, and a calibration that stays certified and within ``rtol`` when the guess is wrong."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mcacct import pld
from mcacct.pld import accountant
from mcacct.pld.search import crossing, guided_ladder

SPEC = pld.PoissonGaussianSpec(0.05, 1.0, steps=20)
EPS, DELTA, H = 1.0, 1e-3, 1e-2


@settings(max_examples=60, deadline=None)
@given(root=st.floats(0.3, 5.0), slope=st.floats(2.0, 40.0), curve=st.floats(-20.0, 20.0),
       spread=st.floats(1.01, 1.3), where=st.floats(0.05, 0.95))
def test_crossing_recovers_the_root_of_a_smooth_log_log_curve(root, slope, curve, spread, where):
    # log(delta / target) = -slope * u + curve * u^2 with u = log(sigma / root): decreasing on the ladder below
    target = 1e-5
    step = math.log(spread) / 7
    lo_index = 3
    u = (np.arange(8) - lo_index - where) * step  # the root sits between rungs 3 and 4
    sig = root * np.exp(u)
    assume(np.all(np.diff(-slope * u + curve * u ** 2) < 0))  # decreasing on the ladder, as a delta curve is
    deltas = target * np.exp(-slope * u + curve * u ** 2)
    got = crossing(sig, deltas, target, float(sig[lo_index]), float(sig[lo_index + 1]))
    assert sig[lo_index] < got < sig[lo_index + 1]
    assert abs(math.log(got / root)) <= 1e-6 + 1e-3 * step ** 2 * abs(curve)  # a cubic fits a quadratic exactly


def test_crossing_declines_without_positive_deltas_at_the_bracket():
    sig = np.array([1.0, 1.1, 1.2])
    assert crossing(sig, np.array([1e-2, 1e-3, 0.0]), 5e-3, 1.1, 1.2) is None
    assert crossing(sig, np.array([1e-2, np.nan, 1e-4]), 5e-3, 1.1, 1.2) is None
    assert crossing(sig, np.array([1e-2, 1e-3, 1e-4]), 5e-3, 1.0, 1.05) is None  # 1.05 is not a rung
    # two usable rungs: a line through them (log-log)
    got = crossing(np.array([1.0, 2.0]), np.array([1e-2, 1e-4]), 1e-3, 1.0, 2.0)
    assert got == pytest.approx(math.sqrt(2.0), rel=1e-12)
    # the cubic passes through the bracket's ends, so it crosses between them even beside a spike
    sig = np.array([0.9, 1.0, 2.0, 2.1])
    got = crossing(sig, np.array([1e-2, 1e-2, 1e-4, 1e3]), 1e-3, 1.0, 2.0)
    assert 1.0 < got < 2.0


@settings(max_examples=80, deadline=None)
@given(lo=st.floats(0.1, 10.0), width=st.floats(1e-3, 0.5), where=st.floats(0.0, 1.0),
       size=st.integers(2, 12), rtol=st.floats(1e-6, 1e-3))
def test_guided_rungs_are_inside_the_bracket_and_close_enough_to_end_the_search(lo, width, where, size, rtol):
    hi = lo * (1 + width)
    guess = lo + where * (hi - lo)
    rungs = guided_ladder(guess, lo, hi, size, rtol)
    if rungs is None:
        assert hi / lo <= (1 / (1 - 0.9 * rtol)) ** (size + 1)
        return
    assert rungs.shape == (size,) and np.all(np.diff(rungs) > 0)
    assert lo < rungs[0] and rungs[-1] < hi
    assert np.all(np.diff(rungs) <= rtol * rungs[1:])  # a crossing between two rungs ends the search
    if lo * 1.01 < guess < hi / 1.01 and hi / lo > 1.01 ** 2:  # a guess well inside is bracketed by the rungs
        assert rungs[0] <= guess <= rungs[-1]


def test_a_wrong_guess_costs_passes_not_soundness(monkeypatch):
    ref = pld.pld_calibrate(SPEC, EPS, DELTA, value_discretization_interval=H, rtol=1e-3)
    for off in (0.97, 1.03):  # the guess 3% low or high: the guided rungs all pass, or all fail
        monkeypatch.setattr(accountant, "crossing", lambda s, d, t, lo, hi, f=off: f * ref)
        got = pld.pld_calibrate(SPEC, EPS, DELTA, value_discretization_interval=H, rtol=1e-3)
        assert abs(got - ref) <= 1e-3 * ref
        assert pld.pld_delta(pld.PoissonGaussianSpec(0.05, got, steps=20), EPS,
                             value_discretization_interval=H).delta <= DELTA


def test_two_passes_when_the_first_ladder_brackets(monkeypatch):
    calls, run = [], accountant.run
    monkeypatch.setattr(accountant, "run", lambda *a, **k: calls.append(a[1]) or run(*a, **k))
    sigma = pld.pld_calibrate(SPEC, EPS, DELTA, value_discretization_interval=H)
    assert len(calls) == 2, [list(c) for c in calls]
    second = calls[1]
    assert np.all(np.diff(second) <= 1e-4 * second[1:])  # the guided rungs, 0.9 rtol apart
    assert any(s <= sigma <= s * (1 + 1e-5) for s in second)  # a guided rung, rounded up to 6 significant digits
