"""EVR calibration (mcacct.evr.calibrate): a small calibration is sound and its ladder ordered, and the top
candidate uses the tightest valid certificate (PLD for b = 1, the worst-case Gaussian otherwise)."""

import math

import jax

import mcacct
from mcacct import evr
from mcacct.engine.problem import Problem
from mcacct.evr.calibrate import calibrate


def test_calibration_key_independence_and_soundness_small():
    pb = Problem(mcacct.BMinSep(0.25, 2, 16), mcacct.BandedToeplitz((1.0, 0.5)))
    r = calibrate(pb, 1.0, 1e-2, jax.random.key(1))
    assert r.overall_delta <= 1e-2
    assert r.sigma <= r.top_sigma
    sigmas = [c["sigma"] for c in r.candidates]
    assert sigmas == sorted(sigmas, reverse=True)
    # the returned sigma passed, every candidate above it passed
    passed = [c for c in r.candidates if c["passed"]]
    assert all(c["sigma"] >= r.sigma for c in passed)


def test_top_candidate_uses_tightest_valid_certificate():
    """b = 1 is Poisson subsampling: the PLD bound certifies a smaller top sigma than the worst-case Gaussian."""
    from mcacct.evr.calibrate import top_sigma
    from mcacct import pld
    pb = Problem(mcacct.BMinSep(0.05, 1, 50))
    sig, how = top_sigma(pb, 1.0, 1e-4)
    assert how.startswith("pld")
    assert sig <= evr.gaussian_sigma(math.sqrt(50), 1.0, 1e-4)
    res = pld.pld_delta(pld.PoissonGaussianSpec(0.05, sig, steps=50), 1.0)
    assert res.delta <= 1e-4
    pb2 = Problem(mcacct.BMinSep(0.05, 3, 50), mcacct.BandedToeplitz((1.0, 0.5)))
    sig2, how2 = top_sigma(pb2, 1.0, 1e-4)
    assert how2 == "gaussian-worst-case-sensitivity"
    assert evr.gaussian_delta(pb2.strategy.worst_case_sensitivity(50, 3), sig2, 1.0) <= 1e-4
