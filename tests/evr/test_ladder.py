"""The ladder and the pilot's placement: fixed, sorted, coarse far from the estimate; the bracket only places."""

import jax
import pytest

import mcacct
from mcacct.engine.problem import Problem
from mcacct.engine.runner import padded_width
from mcacct.evr.calibrate import bracket_from_baselines, ladder_exponents, pilot_range, plan_calibration

PB = Problem(mcacct.BMinSep(0.2, 2, 16), mcacct.BandedToeplitz((0.6, 0.4)))


def test_ladder_exponents_fine_near_the_estimate_coarse_beyond():
    assert ladder_exponents(4, 3, 12) == [-16, -12, -8, -6, -4, -3, -2, -1, 0, 1, 2, 3, 5, 7, 12]
    assert ladder_exponents(4, 3, 0) == [-16, -12, -8, -6, -4, -3, -2, -1, 0, 1, 2, 3]
    assert ladder_exponents(0, 0, 0) == [0]
    for below, above, reach in [(12, 6, 24), (1, 1, 4), (5, 2, 3), (0, 4, 40)]:
        e = ladder_exponents(below, above, reach)
        assert e == sorted(set(e)) and max(e) == max(above, reach) and min(e) == -4 * below
        assert set(range(-below, above + 1)) <= set(e)
        # beyond the fine steps the gaps never shrink: the far ends cost a few candidates
        up = [j for j in e if j >= above]
        assert all(b - a >= 1 for a, b in zip(up, up[1:])) and len(up) <= 2 + reach.bit_length()


def test_padded_widths_waste_at_most_a_third_and_never_run_one_candidate():
    for j in range(1, 200):
        w = padded_width(j)
        assert w >= max(j, 2) and (j <= 2 or w <= 1.5 * j)
    assert len({padded_width(j) for j in range(1, 65)}) <= 12


def test_pilot_range_and_bracket():
    assert pilot_range(4.0) == (4.0 / 64, 4.0)
    assert pilot_range(4.0, (1.0, 2.0)) == (1.0, 2.0)
    assert pilot_range(4.0, (1.0, 9.0)) == (1.0, 4.0)        # never above the certified top
    lo, hi = pilot_range(4.0, (0.001, 0.002))                 # a bracket below the range: the full range
    assert (lo, hi) == (4.0 / 64, 4.0)
    with pytest.raises(ValueError, match=r"bracket\[0\]"):
        pilot_range(4.0, (-1.0, 2.0))
    assert bracket_from_baselines({"poisson_dpsgd_sigma": 1.0, "cyclic_poisson_bandmf_sigma": 2.0, "note": "x"}) \
        == (0.5, 2.5)
    assert bracket_from_baselines({}) is None


def test_a_bracket_only_places_the_ladder():
    """Any bracket gives a sorted ladder below the certified top; a bracket far off still reaches the answer's
    neighbourhood (the pilot widens), so it cannot make the result unsound, only coarser."""
    key = jax.random.key(3)
    free = plan_calibration(PB, 1.0, 1e-2, key, pilot_samples=3000)
    for bracket in [(free.pilot_sigma / 1.5, free.pilot_sigma * 1.5), (free.top_sigma / 2, free.top_sigma)]:
        p = plan_calibration(PB, 1.0, 1e-2, key, pilot_samples=3000, bracket=bracket)
        assert list(p.ladder) == sorted(p.ladder) and all(s < p.top_sigma for s in p.ladder)
        assert p.num_samples == free.num_samples and p.base_delta == free.base_delta


def test_systematic_reserve_is_a_checked_parameter_recorded_in_the_plan():
    p = plan_calibration(PB, 1.0, 1e-2, jax.random.key(3), sigmas=[1.0, 1.2], systematic_reserve=0.05)
    assert p.systematic_reserve == 0.05 and p.dropped == 0 and max(p.systematic) <= 0.05 * 1e-2
    assert p.statistical_delta <= 0.95 * 1e-2 + 1e-15 and p.overall_delta <= 1e-2
    for bad in (0.0, 0.6, float("nan")):
        with pytest.raises(ValueError, match="systematic_reserve"):
            plan_calibration(PB, 1.0, 1e-2, jax.random.key(3), sigmas=[1.0], systematic_reserve=bad)


def test_truncated_output_bound_is_two_entries_of_c_at_most():
    """Amplitudes 2 (P) and -1 (Q) at separated draws: every output coordinate gets at most one entry of c."""
    from mcacct.engine.systematic import output_coordinate_bound
    from mcacct.schemes.truncated import TruncatedBMinSep
    strat = mcacct.BandedToeplitz((0.7, 0.9, 0.2))
    sch = TruncatedBMinSep(0.3, 3, 12, 10, 2)
    assert output_coordinate_bound(sch, strat) == pytest.approx(1.8)
    # no truncation possible (dataset no larger than the batch): amplitudes 0/1 only
    assert output_coordinate_bound(TruncatedBMinSep(0.3, 3, 12, 2, 2), strat) == pytest.approx(0.9)
    # brute force over draws: amplitudes in {0, 1, 2} / {0, -1} at separated times
    import itertools
    import numpy as np
    C = strat.matrix(12)
    worst = 0.0
    for times in itertools.combinations(range(12), 4):
        if all(b - a >= 3 for a, b in zip(times, times[1:])):
            for amps in itertools.product((1, 2, -1), repeat=4):
                x = np.zeros(12)
                x[list(times)] = amps
                worst = max(worst, float(np.max(np.abs(C @ x))))
    assert worst <= output_coordinate_bound(sch, strat) + 1e-12
