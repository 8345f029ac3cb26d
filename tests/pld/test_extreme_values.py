"""Issue 37, items 3 and 4: extreme queries of the FFT PLD accountant (docs/pld.md, "Extreme ε and small h").

* A small-sigma Gaussian on a fine grid (sigma = 0.06, T = 4, h = 1e-3): the power-of-two padding of the loss grid
  reaches losses beyond 709.78, where ``connect_dots`` formed ``e^l * b`` = ``inf * 0`` = ``nan``. The delta query
  printed ``delta = nan`` with exit 0, the epsilon query was refused with a false "mass at +infinity 1", and
  ``events_delta`` / ``PLDAccountant`` raised "pmf must be ... finite".
* A huge epsilon (1e15 at h = 1e-4): the index of the query cell wrapped around int64 and delta came out 1.
* delta(epsilon) non-increasing, up to epsilon = 1e300, with the mass at infinity no longer inflated by the
  tilt-dependent FFT round-off factor.

The exact values come from the closed form of the Gaussian mechanism: T compositions with noise multiplier sigma
(sensitivity 1) are one Gaussian mechanism with sigma' = sigma / sqrt(T), and
delta(eps) = Phi(-eps sigma' + 1 / (2 sigma')) - e^eps Phi(-eps sigma' - 1 / (2 sigma')), evaluated in mpmath.
"""

from __future__ import annotations

import math
import re

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcacct import pld
from helpers import run_cli
from mcacct.pld import discrete, kernels, plan
from mcacct.pld.constants import INF_REL

SMALL = pld.GaussianSpec(sigma=0.06, steps=4)  # the case: exact delta(700) = 6.4581e-6
H_SMALL = 1e-3
POISSON = pld.PoissonGaussianSpec(sampling_prob=0.1, sigma=1.0, steps=10)  # the delta(1e15) = 1 case


def _exact_delta(eps: float, sigma: float, steps: int) -> float:
    """delta(eps) of the T-fold Gaussian mechanism (sensitivity 1), 60 digits."""
    with mpmath.workdps(60):
        s = mpmath.mpf(sigma) / mpmath.sqrt(steps)
        e = mpmath.mpf(eps)
        return float(mpmath.ncdf(-e * s + 1 / (2 * s)) - mpmath.exp(e) * mpmath.ncdf(-e * s - 1 / (2 * s)))


def _exact_epsilon(delta: float, sigma: float, steps: int) -> float:
    with mpmath.workdps(60):
        lo, hi = mpmath.mpf(0), mpmath.mpf(1)
        while _exact_delta(float(hi), sigma, steps) > delta:
            hi *= 2
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _exact_delta(float(mid), sigma, steps) > delta else (lo, mid)
        return float(hi)


EXACT_DELTA_700 = _exact_delta(700.0, 0.06, 4)  # 6.4580948695e-06
EXACT_EPS_1E5 = _exact_epsilon(1e-5, 0.06, 4)  # 696.77779154




def _one_error_line(rc, out, err):
    assert rc == 2, (rc, out, err)
    lines = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(lines) == 1 and "Traceback" not in err and out == "", err
    return lines[0]


def _printed(name: str, out: str) -> float:
    m = re.search(rf"^{name} = (\S+)", out, re.M)
    assert m, out
    return float(m.group(1))


# ---------------------------------------------------------------------------
# item 3: small sigma on a fine grid
# ---------------------------------------------------------------------------
def test_connect_dots_split_has_no_overflow_beyond_709():
    # a cell at loss 743 whose Q-mass underflowed: e^743 * 0 was nan; now all of a goes to the upper end point
    a = np.array([4e-260, 3e-200, 0.25])
    b = np.array([0.0, 3e-200 * math.exp(-710.5), 0.25 * math.exp(-1.0005)])
    lj = np.array([743.0, 710.0, 1.0])
    up_r, up_a = (np.asarray(v) for v in kernels.discretise._connect_dots_split(a, b, lj, lj + 1e-3, 1e-3))
    assert np.all(np.isfinite(up_r)) and np.all(np.isfinite(up_a))
    assert up_r[0] == a[0] and up_a[0] == 0.0  # rounded up: pessimistic
    assert 0.0 <= up_r[1] <= a[1] and 0.0 <= up_r[2] <= a[2]
    # the log-space product agrees with the plain one where the plain one is finite
    plain = (a[2] - math.exp(1.0) * b[2]) / -math.expm1(-1e-3)
    assert up_r[2] == pytest.approx(plain, rel=1e-9)


def test_small_sigma_delta_is_finite_upper_bound():
    r = pld.pld_delta(SMALL, 700.0, value_discretization_interval=H_SMALL, estimate_error=False)
    for v in (r.delta, r.delta_remove, r.delta_add, r.infinity_mass):
        assert math.isfinite(v)
    assert r.delta >= EXACT_DELTA_700  # measured: 6.45809512e-06 against 6.45809487e-06
    assert r.delta == pytest.approx(EXACT_DELTA_700, rel=1e-6)
    assert r.infinity_mass < 1e-20 and r.tail_mass_bound < 1e-15  # the false "mass at +infinity 1" is gone


def test_small_sigma_epsilon_is_finite_upper_bound():
    r = pld.pld_epsilon(SMALL, 1e-5, value_discretization_interval=H_SMALL, estimate_error=False)
    assert math.isfinite(r.epsilon)
    assert r.epsilon >= EXACT_EPS_1E5  # measured: 696.7777919 against 696.7777915
    assert r.epsilon == pytest.approx(EXACT_EPS_1E5, rel=1e-8)


def test_small_sigma_events_and_stateful_accountant():
    r = pld.events_delta([(pld.GaussianSpec(sigma=0.06), 4)], 700.0, value_discretization_interval=H_SMALL,
                         estimate_error=False)
    assert math.isfinite(r.delta) and r.delta >= EXACT_DELTA_700
    assert r.delta == pytest.approx(EXACT_DELTA_700, rel=1e-6)
    acct = pld.PLDAccountant(H_SMALL).compose(pld.GaussianSpec(sigma=0.06), 4)
    d = acct.get_delta(700.0)
    assert d == r.delta
    for eps in (1e15, 1e300):  # the limit: the mass at infinity (with its round-off terms), never above delta(700)
        assert acct.get_delta(eps) <= d


def test_cli_small_sigma_delta_and_epsilon(capsys):
    flags = ["--scheme", "gaussian", "--steps", "4", "--sigma", "0.06", "--value-discretization-interval", "1e-3",
             "--no-error-estimate", "--quiet"]
    rc, out, err = run_cli(["pld", "delta", *flags, "--epsilon", "700"], capsys)
    assert rc == 0, err
    d = _printed("delta", out)
    assert math.isfinite(d) and d >= EXACT_DELTA_700 * (1 - 1e-5)  # printed to 6 digits
    assert "nan" not in out
    rc, out, err = run_cli(["pld", "epsilon", *flags, "--delta", "1e-5"], capsys)
    assert rc == 0, err
    e = _printed("epsilon", out)
    assert math.isfinite(e) and e == pytest.approx(EXACT_EPS_1E5, rel=1e-5)


# ---------------------------------------------------------------------------
# item 4: huge epsilon, and delta(epsilon) non-increasing
# ---------------------------------------------------------------------------
def test_query_delta_index_does_not_wrap_around():
    # eps_q / h = 1e19 > 2^63: the wrapped index used to pick rb[0] = 1
    n = 64
    out = np.full(n, 1.0 / n)
    rb = np.linspace(1.0, 0.0, n)
    for eps in (10.0, 1e15, 1e19, 1e300, 1.7e308):
        d, rb_d = kernels.query_delta(out, 1e-20, np.int64(-10), 1e-4, eps, rb, 1e-10, INF_REL)
        assert float(rb_d) == 0.0
        assert float(d) == pytest.approx(1e-20 * (1 + INF_REL), rel=1e-15)


def test_poisson_huge_epsilon_is_the_limit(capsys):
    d13 = pld.pld_delta(POISSON, 1e13, estimate_error=False)
    d15 = pld.pld_delta(POISSON, 1e15, estimate_error=False)
    assert d15.delta == d13.delta < 1e-15  # was 1.0 at 1e15 against 4e-20 at 1e13
    assert d15.roundoff_bound == 0.0
    assert d15.delta >= d15.infinity_mass
    rc, out, err = run_cli(["pld", "delta", "-q", "0.1", "-T", "10", "--sigma", "1", "--epsilon", "1e15",
                         "--no-error-estimate", "--quiet"], capsys)
    assert rc == 0, err
    assert _printed("delta", out) == pytest.approx(d13.delta, rel=1e-5)


_GRID = np.concatenate([[0.0], np.linspace(0.05, 12.0, 40), np.geomspace(12.5, 1e300, 40)])
_CACHE: dict[float, float] = {}


def _poisson_delta(eps: float) -> float:
    if eps not in _CACHE:
        _CACHE[eps] = pld.pld_delta(POISSON, eps, value_discretization_interval=1e-3, estimate_error=False).delta
    return _CACHE[eps]


def test_delta_non_increasing_on_a_log_grid():
    ds = np.array([_poisson_delta(float(e)) for e in _GRID])
    assert np.all(np.isfinite(ds)) and np.all((ds >= 0) & (ds <= 1))
    assert np.all(np.diff(ds) <= 0), [(_GRID[i], ds[i], ds[i + 1]) for i in np.flatnonzero(np.diff(ds) > 0)]


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.floats(-3.0, 300.0), st.floats(-3.0, 300.0))
def test_delta_non_increasing_hypothesis(x1, x2):
    lo, hi = sorted((10.0 ** x1, 10.0 ** x2))
    assert _poisson_delta(hi) <= _poisson_delta(lo)


def test_gaussian_delta_flat_at_the_mass_at_infinity():
    # delta(500) < delta(700) by 2.5e-9 relative before the mass at infinity got its own factor (rho grew with the
    # tilt); from epsilon = 500 on the exact delta is below 1e-50, far below the mass at infinity (3e-23), so every
    # value there is the mass at infinity
    spec = pld.GaussianSpec(sigma=0.1, steps=4)
    eps = [0.0, 100.0, 300.0, 500.0, 700.0, 900.0, 1e4, 1e15, 1e300]
    ds = [pld.pld_delta(spec, e, value_discretization_interval=1e-2, estimate_error=False) for e in eps]
    vals = np.array([r.delta for r in ds])
    assert np.all(np.diff(vals) <= 0), vals
    assert vals[-1] == pytest.approx(ds[-1].infinity_mass * (1 + INF_REL), rel=1e-15)
    for e, v in zip(eps[:3], vals[:3]):
        assert v >= _exact_delta(e, 0.1, 4)


# ---------------------------------------------------------------------------
# guards: never nan / inf with exit 0
# ---------------------------------------------------------------------------
def test_check_finite_refuses_nan():
    r = {"delta": np.array([[np.nan, 1e-6]]), "epsilon": np.full((1, 2), np.nan), "inf": np.zeros((1, 2))}
    with pytest.raises(ValueError, match=r"no valid delta at sigma=0.5 with value_discretization_interval=0.001"):
        plan.check_finite(r, "delta", np.array([0.5]), 1e-3)
    r = {"delta": np.full((1, 2), np.nan), "epsilon": np.array([[np.inf, 3.0]]), "inf": np.array([[0.5, 0.0]])}
    plan.check_finite(r, "epsilon", np.array([0.5]), 1e-3)  # epsilon = inf is an answer
    r["epsilon"][0, 1] = np.nan
    with pytest.raises(ValueError, match="no valid epsilon"):
        plan.check_finite(r, "epsilon", np.array([0.5]), 1e-3)


def test_cli_refuses_a_nan_result(monkeypatch, capsys):
    real = pld.pld_delta

    def fake(*a, **k):
        import dataclasses
        return dataclasses.replace(real(*a, **k), delta=math.nan)

    monkeypatch.setattr(pld, "pld_delta", fake)
    line = _one_error_line(*run_cli(["pld", "delta", "-q", "0.1", "-T", "10", "--sigma", "1", "--epsilon", "1",
                                  "--value-discretization-interval", "1e-3", "--no-error-estimate", "--quiet"],
                                 capsys))
    assert "computed delta = nan at --value-discretization-interval=0.001" in line  # the CLI names its flag


def test_results_refuse_nan():
    r = pld.pld_delta(POISSON, 1.0, value_discretization_interval=1e-3, estimate_error=False)
    import dataclasses
    for field, bad in (("delta", math.nan), ("delta_add", math.inf), ("epsilon_remove", math.nan)):
        with pytest.raises(ValueError, match=f"computed {field} = {bad}"):
            dataclasses.replace(r, **{field: bad})
    assert dataclasses.replace(r, epsilon_add=math.inf).epsilon_add == math.inf  # an answer, not a failure
    with pytest.raises(ValueError, match="computed delta = nan"):
        pld.EventsResult(1.0, math.nan, 1.0, 1.0, 0.1, 0.1, 0.0, math.nan, 1e-3, "connect_dots", ())


def test_cli_tiny_delta_is_refused_not_inf(capsys):
    line = _one_error_line(*run_cli(["pld", "epsilon", "-q", "0.1", "-T", "10", "--sigma", "1", "--delta", "1e-300",
                                  "--value-discretization-interval", "1e-3", "--no-error-estimate", "--quiet"],
                                 capsys))
    assert "--delta=1e-300" in line or "delta=1e-300" in line


def test_tiny_delta_below_one_directions_mass_at_infinity_is_inf():
    # remove: mass at infinity ~3e-26 > 1e-290; add: none, its round-off floor 1e-280 > 1e-290. The maximum over the
    # directions is inf whatever the add direction says (it used to raise)
    r = pld.pld_epsilon(POISSON, 1e-290, value_discretization_interval=1e-3, estimate_error=False)
    assert r.epsilon == math.inf


def test_privacy_parameters_pld_large_epsilon():
    p = discrete.privacy_parameters_pld(1000.0, 1e-6, 0.1)  # e^1000 raised OverflowError
    assert p.delta(500.0) == pytest.approx(1.0)
    assert p.delta(1000.0) >= 1e-6 and p.epsilon(2e-6) == pytest.approx(1000.0, rel=1e-8)
    assert p["remove"].infinity_mass >= 1e-6  # the underflowed -eps atom went to +inf
    small = discrete.privacy_parameters_pld(1.0, 1e-6, 0.1)
    assert small["remove"].infinity_mass == 1e-6 and small["remove"].pmf.sum() == pytest.approx(1 - 1e-6)
    with pytest.raises(ValueError, match="value_discretization_interval"):
        discrete.privacy_parameters_pld(1e15, 1e-6, 1e-4)


def test_error_estimate_refusal_names_the_users_h(monkeypatch):
    """#37: when the run at h passes but the error estimate's re-run at h/2 exceeds the grid, the refusal names the
    user's h (not h/2 alone) and the way out."""
    import mcacct.pld.plan as plan_module
    from mcacct.pld import GaussianSpec, pld_epsilon
    monkeypatch.setattr(plan_module, "MAX_GRID", 4096)
    pld_epsilon(GaussianSpec(1.0), 1e-5, value_discretization_interval=1e-2, estimate_error=False)
    with pytest.raises(ValueError, match=r"value_discretization_interval=0.01 works, but the error estimate re-runs "
                                         r"at h/2 = 0.005.*estimate_error=False"):
        pld_epsilon(GaussianSpec(1.0), 1e-5, value_discretization_interval=1e-2)
