"""Tests for mcacct.composition.empirical: Monte Carlo PLDs composed with FFT-PLD mechanisms.

Setting: Poisson-subsampled Gaussian, q = 0.2, sigma = 1. The Monte Carlo part is b-min-sep with
b = 1 and C = I (c_col = [1]) over T1 = 30 iterations -- exactly T1 compositions of the
Poisson-subsampled Gaussian -- and the PLD part is ``PoissonGaussianSpec(q, sigma, T2 = 10)``, so the
composition is T1 + T2 = 40 steps, which mcacct.pld computes (near-)exactly.

dp-accounting is used only as an oracle.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import mcacct
import mcacct.composition as C
from mcacct.composition.empirical import opposite_direction
from mcacct import pld
from mcacct.engine.problem import Problem
from mcacct.engine.estimate import estimate
from mcacct.statistics.accumulators import DIRECTIONS, DirectionStats, HistogramSpec

Q, SIGMA, T1, T2 = 0.2, 1.0, 30, 10
EPS = 1.0
N_MC = 50_000
W = HistogramSpec().width  # 2**-10
H_MC = W / 8  # default grid of compose_mc_with_pld
H = 1e-4


@pytest.fixture(scope="module")
def est():
    return estimate(Problem(mcacct.BMinSep(Q, 1, T1), mcacct.BandedToeplitz((1.0,))), SIGMA,
                    jax.random.key(3), N_MC, (EPS,), chunk_size=8192)


@pytest.fixture(scope="module")
def exact_total():
    return pld.pld_delta(pld.PoissonGaussianSpec(Q, SIGMA, T1 + T2), EPS, estimate_error=False)


def _fake_stats(p: C.DirectionPLD, spec: HistogramSpec = HistogramSpec()) -> DirectionStats:
    """Statistics whose histogram *is* the (near-exact) law of the loss: the expectation of the MC data.

    Grid masses at (offset + i) h, h = w/8, go to histogram bin ceil(index / 8) (bin 0 for L <= 0), with
    2**52 pseudo-samples (rounding error ~1e-16)."""
    idx = p.offset + np.arange(p.pmf.size)
    k = np.where(idx > 0, -(-idx // 8), 0)
    k = np.minimum(k, spec.bins + 1)
    scale = 2.0**52
    hist = np.zeros(spec.bins + 2, np.int64)
    np.add.at(hist, k, np.round(p.pmf * scale).astype(np.int64))
    hist[spec.bins + 1] += int(round(p.infinity_mass * scale))
    return DirectionStats((EPS,), spec, int(hist.sum()), [0], hist)


@pytest.fixture(scope="module")
def expected_stats():
    exact_t1 = C.mechanism_pld(pld.PoissonGaussianSpec(Q, SIGMA, T1), H_MC)
    return {d: _fake_stats(exact_t1[d]) for d in DIRECTIONS}


# ---------------------------------------------------------------------------
# identity / adapters
# ---------------------------------------------------------------------------
def test_identity_composition_is_the_mc_estimate(est):
    curve = est.delta_curve([EPS, 2.0])
    for k, e in enumerate([EPS, 2.0]):
        for mechs in ([], [C.identity_pld(H_MC)]):
            r = C.compose_mc_with_pld(est, mechs, epsilon=e)
            assert r.certified is False
            assert r.delta == pytest.approx(curve["delta_estimate"][k], rel=1e-12)
            assert r.delta_upper == pytest.approx(curve["delta_upper"][k], rel=1e-12)
    ref = est.epsilon(0.05)
    r = C.compose_mc_with_pld(est, [], delta=0.05)
    assert r.epsilon == pytest.approx(ref["epsilon_estimate"], abs=2e-6)  # ours: exact in the cell
    assert r.epsilon_upper == pytest.approx(ref["epsilon_upper"], abs=2e-6)  # both bisect to 1e-6
    # per direction, the empirical PLD reproduces histogram_delta for either negative-part rule
    for d, s in est.stats.items():
        for opp in (None, est.stats[opposite_direction(d)]):
            p = C.empirical_pld_from_stats(s, opposite=opp)
            assert p.certified is False
            np.testing.assert_allclose(p.delta([0.0, 0.5, EPS, 3.0]), s.histogram_delta([0.0, 0.5, EPS, 3.0]),
                                       rtol=1e-12)


def test_identity_is_neutral_for_pld():
    m = C.mechanism_pld(pld.PoissonGaussianSpec(Q, SIGMA, T2), H)
    mi = C.compose(m, C.identity_pld(H))
    for d in DIRECTIONS:
        assert mi[d].offset == m[d].offset
        np.testing.assert_array_equal(mi[d].pmf, m[d].pmf)
        assert mi[d].infinity_mass == pytest.approx(m[d].infinity_mass, rel=1e-9, abs=1e-300)
    assert mi.certified


def test_mechanism_pld_reproduces_pld_module():
    spec = pld.PoissonGaussianSpec(Q, SIGMA, T2)
    m = C.mechanism_pld(spec, H)
    ref_d = pld.pld_delta(spec, EPS, estimate_error=False)
    ref_e = pld.pld_epsilon(spec, 1e-5, estimate_error=False)
    # Same discretised PLD and FFT; the two paths add different rigorous round-off margins (pld: the
    # tilted per-query r_k and a relative (1 + rho), rho ~ 1e-10; composition: an l1 bound in the
    # mass at infinity), so they agree to those margins, not to the last bit.
    assert m.delta(EPS) == pytest.approx(ref_d.delta, rel=1e-9)
    assert m.epsilon(1e-5) == pytest.approx(ref_e.epsilon, rel=1e-7)
    # composing two PLD mechanisms by FFT = the PLD of the total number of steps (both pessimistic)
    both = C.compose(C.mechanism_pld(pld.PoissonGaussianSpec(Q, SIGMA, T1), H), m)
    tot = pld.pld_delta(pld.PoissonGaussianSpec(Q, SIGMA, T1 + T2), EPS, estimate_error=False).delta
    assert both.delta(EPS) == pytest.approx(tot, rel=1e-6)


# ---------------------------------------------------------------------------
# MC estimate composed with a PLD mechanism vs the PLD of all steps
# ---------------------------------------------------------------------------
def test_expected_estimator_brackets_exact(expected_stats, exact_total):
    """Deterministic: the estimator's expectation (histogram = exact law of L) vs the exact 40-step value.

    * mirror: only the bin rounding (loss + at most w = 2**-10 per sample) separates them;
    * zero: additionally at most Pr[L <= 0] * delta_PLD(eps) (module docstring)."""
    exact = exact_total.delta
    spec2 = pld.PoissonGaussianSpec(Q, SIGMA, T2)
    mirror = C.compose_mc_with_pld(expected_stats, [spec2], epsilon=EPS, negative_part="mirror").delta
    zero = C.compose_mc_with_pld(expected_stats, [spec2], epsilon=EPS, negative_part="zero").delta
    rounding = mirror - exact
    assert 0.0 <= rounding <= 2e-3 * exact  # a shift of the loss by <= w moves delta by <~ w * delta-scale
    neg = max(s.hist[0] / s.count for s in expected_stats.values())
    bias_bound = neg * pld.pld_delta(spec2, EPS, estimate_error=False).delta
    assert exact <= zero <= exact + bias_bound + rounding
    assert zero - mirror > 0.2 * bias_bound  # the bias of "zero" is real here (about 0.014)


def test_mc_composition_matches_total_steps(est, expected_stats, exact_total):
    spec2 = pld.PoissonGaussianSpec(Q, SIGMA, T2)
    exact = exact_total.delta
    r = C.compose_mc_with_pld(est, [spec2], epsilon=EPS)  # auto -> mirror (both directions present)
    assert r.per_direction["remove"]["negative_part"] == "mirror"
    assert r.delta_lower <= r.delta <= r.delta_upper
    # within the 99% MC interval (fixed key => deterministic), and the interval covers the expectation
    assert r.delta_lower <= exact <= r.delta_upper
    expected = C.compose_mc_with_pld(expected_stats, [spec2], epsilon=EPS).delta
    assert r.delta_lower <= expected <= r.delta_upper
    assert abs(r.delta - exact) <= 0.05 * exact
    # "zero": pessimistic, biased up by <= Pr[L<=0] * delta_PLD(eps); its upper bound still covers exact
    z = C.compose_mc_with_pld(est, [spec2], epsilon=EPS, negative_part="zero")
    assert z.delta >= r.delta
    assert z.delta_upper >= exact
    # both directions are reported, max taken
    assert r.delta == max(v["delta"] for v in r.per_direction.values())


def test_mc_composition_epsilon_query(est):
    spec2 = pld.PoissonGaussianSpec(Q, SIGMA, T2)
    dl = 1e-2
    exact = pld.pld_epsilon(pld.PoissonGaussianSpec(Q, SIGMA, T1 + T2), dl, estimate_error=False).epsilon
    r = C.compose_mc_with_pld(est, (spec2,), delta=dl)
    assert r.delta == dl and r.delta_upper == dl
    assert r.epsilon <= r.epsilon_upper
    assert exact <= r.epsilon_upper
    assert abs(r.epsilon - exact) <= 0.05 * exact
    # consistency of the two queries
    back = C.compose_mc_with_pld(est, [spec2], epsilon=r.epsilon).delta
    assert back == pytest.approx(dl, rel=1e-6)


def test_mirror_reconstructs_negative_mass(est):
    """Pr_P[L <= 0] from the remove histogram vs E_Q[e^{-L'}; L' >= 0] from the add samples."""
    emp = C.empirical_pld(est, negative_part="mirror")
    for d, s in est.stats.items():
        p, o = emp[d], est.stats[opposite_direction(d)]
        direct = s.hist[0] / s.count
        mirrored = p.pmf[p.losses <= 0].sum()
        wts = np.exp(-np.arange(o.hist.size - 1) * W)  # weights of opposite bins 1.. (rounded up)
        assert mirrored == pytest.approx((o.hist[1:] * wts).sum() / o.count, rel=1e-12)
        second = (o.hist[1:] * wts**2).sum() / o.count
        se = math.sqrt(direct * (1 - direct) / s.count + (second - mirrored**2) / o.count)
        # two independent estimates of one number; the mirror weights are rounded up by <= e^w
        assert -4 * se <= mirrored - direct <= 4 * se + math.expm1(W) * mirrored


# ---------------------------------------------------------------------------
# certified (eps1, delta1) o PLD
# ---------------------------------------------------------------------------
def _dp_accounting_delta(e1, d1, eps):
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as dp_pld
    del dpa
    ref = dp_pld.from_privacy_parameters(common.DifferentialPrivacyParameters(e1, d1),
                                         value_discretization_interval=H)
    ref = ref.compose(dp_pld.from_gaussian_mechanism(SIGMA, sampling_prob=Q, value_discretization_interval=H)
                      .self_compose(T2))
    return ref.get_delta_for_epsilon(eps)


@pytest.mark.parametrize("e1", [2.0, 1.23456])
def test_certified_composition(e1, exact_total):
    # the MC part (T1 steps) is certified (e1, d1)-DP; here d1 comes from the pessimistic PLD
    d1 = pld.pld_delta(pld.PoissonGaussianSpec(Q, SIGMA, T1), e1, estimate_error=False).delta
    spec2 = pld.PoissonGaussianSpec(Q, SIGMA, T2)
    eps = 2.5
    exact = pld.pld_delta(pld.PoissonGaussianSpec(Q, SIGMA, T1 + T2), eps, estimate_error=False).delta
    ours = C.certified_composition(e1, d1, [spec2], epsilon=eps)
    ours_ru = C.certified_composition(e1, d1, [spec2], epsilon=eps, pair_discretization="round_up")
    basic = C.certified_composition(e1, d1, [spec2], epsilon=eps, method="basic")
    ref = _dp_accounting_delta(e1, d1, eps)
    assert ours.certified and basic.certified
    # with dp-accounting's rounding rule for the four-point atoms we reproduce it
    assert ours_ru.delta == pytest.approx(ref, rel=1e-8)
    # connect-the-dots for the atoms is at most one grid step (h = 1e-4) tighter
    assert ref - H <= ours.delta <= ours_ru.delta + 1e-12
    # all certificates are >= the exact value, and the dominating pair beats basic composition
    assert exact <= ours.delta <= basic.delta
    assert basic.delta == pytest.approx(d1 + pld.pld_delta(spec2, eps - e1, estimate_error=False).delta,
                                        rel=1e-9)
    # epsilon side: consistent with the delta side
    e_back = C.certified_composition(e1, d1, [spec2], delta=ours.delta).epsilon
    assert e_back == pytest.approx(eps, abs=1e-6)
    e_basic = C.certified_composition(e1, d1, [spec2], delta=ours.delta, method="basic").epsilon
    assert e_basic >= e_back


def test_privacy_parameters_pld_is_the_four_point_curve():
    e1, d1 = 1.5, 1e-3
    p = C.privacy_parameters_pld(e1, d1, H)
    for e in (0.0, 0.7, e1, 2.0):
        four = d1 + (1 - d1) * max(math.exp(e1) - math.exp(e), 0.0) / (1 + math.exp(e1))
        # e1 is a multiple of h: connect-the-dots and round-up are both exact
        assert p.delta(e) == pytest.approx(four, rel=1e-9, abs=1e-15)
    assert p.epsilon(d1 * 1.000001) <= e1 + 1e-9
    # no composition: the certificate returns the input pair
    r = C.certified_composition(e1, d1, [], epsilon=e1)
    assert r.delta == pytest.approx(d1, rel=1e-9)
    # pure DP (delta = 0)
    assert C.privacy_parameters_pld(1.0, 0.0, H).delta(1.0) == pytest.approx(0.0, abs=1e-15)


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------
def test_validation_errors(est):
    spec2 = pld.PoissonGaussianSpec(Q, SIGMA, T2)
    with pytest.raises(ValueError, match="exactly one"):
        C.compose_mc_with_pld(est, [spec2])
    with pytest.raises(ValueError, match="exactly one"):
        C.compose_mc_with_pld(est, [spec2], epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="epsilon"):
        C.compose_mc_with_pld(est, [spec2], epsilon=-1.0)
    with pytest.raises(ValueError, match="delta"):
        C.compose_mc_with_pld(est, [spec2], delta=1.5)
    with pytest.raises(ValueError, match="estimate_or_stats"):
        C.compose_mc_with_pld(0.5, [spec2], epsilon=1.0)
    with pytest.raises(ValueError, match="pld_mechanisms"):
        C.compose_mc_with_pld(est, 3, epsilon=1.0)
    with pytest.raises(ValueError, match="Spec"):
        C.compose_mc_with_pld(est, ["gaussian"], epsilon=1.0)
    with pytest.raises(ValueError, match="empirical"):
        C.compose_mc_with_pld(est, [C.empirical_pld(est)], epsilon=1.0)
    with pytest.raises(ValueError, match="value_discretization_interval"):
        C.compose_mc_with_pld(est, [C.identity_pld(1e-3)], epsilon=1.0)
    with pytest.raises(ValueError, match="negative_part"):
        C.compose_mc_with_pld(est, [spec2], epsilon=1.0, negative_part="drop")
    with pytest.raises(ValueError, match="both directions"):
        C.compose_mc_with_pld(est.stats["remove"], [spec2], epsilon=1.0, negative_part="mirror")
    with pytest.raises(ValueError, match="alpha"):
        C.compose_mc_with_pld(est, [spec2], epsilon=1.0, alpha=0.0)
    with pytest.raises(ValueError, match="direction"):
        C.compose_mc_with_pld({"sideways": est.stats["add"]}, [spec2], epsilon=1.0)
    with pytest.raises(ValueError, match="no samples"):
        C.empirical_pld_from_stats(DirectionStats((1.0,)))
    bad = DirectionStats((1.0,), count=5)
    with pytest.raises(ValueError, match="sums to"):
        C.empirical_pld_from_stats(bad)
    with pytest.raises(ValueError, match="value_discretization_interval"):
        C.empirical_pld_from_stats(est.stats["remove"], 0.5)
    with pytest.raises(ValueError, match="different grids"):
        C.identity_pld(1e-4)["remove"].compose(C.identity_pld(2e-4)["remove"])
    with pytest.raises(ValueError, match="mc_delta"):
        C.certified_composition(1.0, 1.0, [spec2], epsilon=2.0)
    with pytest.raises(ValueError, match="epsilon"):
        C.certified_composition(-1.0, 1e-6, [spec2], epsilon=2.0)
    with pytest.raises(ValueError, match="method"):
        C.certified_composition(1.0, 1e-6, [spec2], epsilon=2.0, method="advanced")
    with pytest.raises(ValueError, match="epsilon >= mc_epsilon"):
        C.certified_composition(1.0, 1e-6, [spec2], epsilon=0.5, method="basic")
    with pytest.raises(ValueError, match="delta > mc_delta"):
        C.certified_composition(1.0, 1e-3, [spec2], delta=1e-4, method="basic")
    with pytest.raises(ValueError, match="discretization"):
        C.certified_composition(1.0, 1e-6, [spec2], epsilon=2.0, pair_discretization="round_down")
    with pytest.raises(ValueError, match="delta"):
        C.privacy_parameters_pld(1.0, -0.1)
    with pytest.raises(ValueError, match="at least one"):
        C.compose()
