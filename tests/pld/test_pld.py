"""Tests for the FFT PLD accountant (mcacct.pld) and its CLI (mcacct.cli.pld).

dp-accounting is used only here, as an oracle. Settings are fixed (no timing
asserts); shapes are shared between tests where possible to limit XLA compiles.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mcacct import pld
from mcacct.cli import pld as pld_cli

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting import dp_event  # noqa: E402
from dp_accounting.pld import pld_privacy_accountant  # noqa: E402
from dp_accounting.pld import privacy_loss_distribution as dp_pld  # noqa: E402

H = 1e-4


def _dp_poisson_epsilon(q: float, sigma: float, steps: int, delta: float, h: float = H) -> float:
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=h)
    event = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma))
    acc.compose(dp_event.SelfComposedDpEvent(event, steps))
    return acc.get_epsilon(delta)


def _binom_pmf(k: int, q: float) -> np.ndarray:
    return np.array([math.comb(k, j) * q**j * (1 - q) ** (k - j) for j in range(k + 1)])


# ---------------------------------------------------------------------------
# Agreement with dp-accounting (Poisson-subsampled Gaussian)
# ---------------------------------------------------------------------------
ORACLE_GRID = [
    # (q, sigma, steps, delta)
    (0.01, 1.0, 10_000, 1e-5),  # 10^4 compositions
    (0.02, 1.5, 1_000, 1e-6),
    (0.1, 2.0, 100, 1e-5),
    (0.005, 0.8, 3_000, 1e-7),
    (1.0, 3.0, 10, 1e-5),  # no subsampling: plain Gaussian
]


@pytest.mark.parametrize("q,sigma,steps,delta", ORACLE_GRID)
def test_epsilon_matches_dp_accounting(q, sigma, steps, delta):
    ours = pld.pld_epsilon(pld.PoissonGaussianSpec(q, sigma, steps), delta, estimate_error=False)
    ref = _dp_poisson_epsilon(q, sigma, steps, delta)
    assert abs(ours.epsilon - ref) <= 0.01 * ref
    # Both accountants are pessimistic (connect-the-dots at h = 1e-4, tails moved
    # to +inf), so both values are upper bounds on the same true epsilon and may
    # differ in either direction only by their discretisation slack, which is
    # O(h^2)-small for connect-the-dots (~1e-7 relative here). Ours may thus be
    # below dp-accounting's only by such a tiny amount, never by more.
    assert ours.epsilon >= ref - max(1e-6 * ref, 1e-9)
    assert ours.epsilon == max(ours.epsilon_remove, ours.epsilon_add)


def test_delta_matches_dp_accounting_and_error_estimate():
    spec = pld.PoissonGaussianSpec(0.01, 1.0, 10_000)
    ours = pld.pld_delta(spec, 1.0)
    ref = dp_pld.from_gaussian_mechanism(1.0, sampling_prob=0.01).self_compose(10_000)
    ref_delta = ref.get_delta_for_epsilon(1.0)
    assert abs(ours.delta - ref_delta) <= 1e-3 * ref_delta
    assert ours.delta >= ref_delta - 1e-9
    assert 0 < ours.error_estimate < 1e-4
    assert ours.tail_mass_bound < 1e-12


# ---------------------------------------------------------------------------
# Paper 004 (Koskela et al.), Tables 1-2: q=0.01, sigma=1.5, k=1e4, eps=1,
# remove relation: delta = 0.0496014103163 (error ~1e-12 in the paper).
# ---------------------------------------------------------------------------
def test_paper_004_table_value():
    tight = 0.0496014103163
    res = pld.pld_delta(pld.PoissonGaussianSpec(0.01, 1.5, 10_000), 1.0)
    # pessimistic: never below the tight value (up to the paper's own ~1e-11)
    assert res.delta_remove >= tight - 1e-10
    # our discretisation error is covered by our own Koskela-Jälkö-Honkela style estimate
    assert res.delta_remove - tight <= res.error_estimate
    assert abs(res.delta_remove - tight) <= 1e-4 * tight
    # paper: generally delta_{X/Y} (remove) > delta_{Y/X} (add); we report the max
    assert res.delta_remove > res.delta_add
    assert res.delta == res.delta_remove


def test_round_up_is_more_pessimistic_than_connect_dots():
    spec = pld.PoissonGaussianSpec(0.01, 1.5, 10_000)
    cd = pld.pld_delta(spec, 1.0, estimate_error=False)
    ru = pld.pld_delta(spec, 1.0, estimate_error=False, discretization="round_up")
    assert ru.delta >= cd.delta >= 0.0496014103163 - 1e-10


# ---------------------------------------------------------------------------
# Exact Gaussian: pessimism and accuracy
# ---------------------------------------------------------------------------
def _gauss_delta_exact(mu: float, eps: float) -> float:
    from scipy.stats import norm
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("eps", [0.0, 0.5, 2.0])
def test_gaussian_upper_bound_and_tight(eps):
    sigma, steps = 4.0, 20
    exact = _gauss_delta_exact(math.sqrt(steps) / sigma, eps)
    res = pld.pld_delta(pld.GaussianSpec(sigma, steps=steps), eps, estimate_error=False)
    assert res.delta >= exact - 1e-14
    assert res.delta <= exact * (1 + 1e-5) + 1e-14


# ---------------------------------------------------------------------------
# vmapped ladder == per-sigma evaluation
# ---------------------------------------------------------------------------
def test_ladder_matches_scalar_evaluation():
    sigmas = [1.4, 1.5, 1.6]
    spec = pld.PoissonGaussianSpec(0.02, 1.0, 1_000)
    ladder = pld.epsilons_for_sigmas(spec, sigmas, 1e-6)
    single = [pld.pld_epsilon(pld.PoissonGaussianSpec(0.02, s, 1_000), 1e-6,
                              estimate_error=False).epsilon for s in sigmas]
    np.testing.assert_allclose(ladder, single, rtol=1e-7)  # windows differ -> round-off only
    assert np.all(np.diff(ladder) < 0)  # more noise, less epsilon
    d = pld.deltas_for_sigmas(lambda s: pld.PoissonGaussianSpec(0.02, s, 1_000), sigmas, 2.0)
    assert np.all(np.diff(d) < 0)


# ---------------------------------------------------------------------------
# Group privacy (Ganesh 2024 [arXiv:2401.10294])
# ---------------------------------------------------------------------------
def test_group_poisson_vs_dp_accounting_and_lemma_1_1(capsys):
    q, steps, delta, h = 0.01, 2_000, 1e-6, 1e-3
    oracle_cases = {(1.0, 2), (2.0, 4)}  # dp-accounting's MoG PLD is slow: two spot checks
    rows = []
    for sigma, ks in ((1.0, (1, 2)), (2.0, (1, 2, 4, 8))):
        eps1 = None
        for k in ks:
            ours = pld.pld_epsilon(pld.GroupPoissonSpec(k, q, sigma, steps), delta,
                                   estimate_error=False, value_discretization_interval=h).epsilon
            ref = float("nan")
            if (sigma, k) in oracle_cases:
                ref_pld = dp_pld.from_mixture_gaussian_mechanism(
                    sigma, list(range(k + 1)), list(_binom_pmf(k, q)),
                    value_discretization_interval=h).self_compose(steps)
                ref = ref_pld.get_epsilon_for_delta(delta)
                assert abs(ours - ref) <= 0.01 * ref
                assert ours >= ref - 1e-6 * ref  # both pessimistic, see oracle test
            vadhan = pld.group_privacy_conversion_epsilon(
                pld.PoissonGaussianSpec(q, sigma, steps), k, delta, value_discretization_interval=h)
            if k == 1:
                eps1 = ours
                assert vadhan == pytest.approx(ours, abs=2 * h)  # k = 1: same guarantee
            # tight MoG accounting is never worse than the black-box conversion (Lemma 1.1)
            assert ours <= vadhan + 1e-9
            rows.append((sigma, k, ours, ref, vadhan, k * eps1))
    with capsys.disabled():
        print(f"\nGroup-level epsilon, Poisson q={q}, T={steps}, delta={delta} (h={h})")
        print(f"{'sigma':>5} {'k':>3} {'MoG (ours)':>11} {'dp-acct MoG':>12} {'Lemma 1.1':>10} {'k*eps1':>8}")
        for sg, k, o, r, v, lb in rows:
            print(f"{sg:>5} {k:>3} {o:>11.5f} {r:>12.5f} {v:>10.4f} {lb:>8.4f}")
    # Lemma 1.1 loses more as k grows (Ganesh 2024 [arXiv:2401.10294], Fig. 1)
    by = {(r[0], r[1]): r for r in rows}
    assert by[(2.0, 8)][4] - by[(2.0, 8)][2] > by[(2.0, 2)][4] - by[(2.0, 2)][2] > 0


def test_group_fixed_batch_mixture_and_oracle():
    from scipy.stats import hypergeom
    k, b, n, sigma, steps, h = 3, 500, 50_000, 2.0, 2_000, 1e-3
    spec = pld.GroupFixedBatchSpec(k, b, n, sigma, steps)
    c, p = spec.mixture()
    m = np.arange(k + 1)
    np.testing.assert_allclose(c, 2 * m)
    np.testing.assert_allclose(p, hypergeom(n + k, k, b).pmf(m), rtol=1e-10)
    ours = pld.pld_epsilon(spec, 1e-6, estimate_error=False, value_discretization_interval=h).epsilon
    ref = dp_pld.from_mixture_gaussian_mechanism(
        sigma, list(c), list(p), value_discretization_interval=h).self_compose(steps)
    ref_eps = ref.get_epsilon_for_delta(1e-6)
    assert abs(ours - ref_eps) <= 0.01 * ref_eps
    # Ganesh 2024 [arXiv:2401.10294], Sec. 4: with n >> B >> k, fixed batch at 2*sigma ~ Poisson at sigma
    pois = pld.pld_epsilon(pld.GroupPoissonSpec(k, b / n, sigma / 2, steps), 1e-6,
                           estimate_error=False, value_discretization_interval=h).epsilon
    assert abs(ours - pois) <= 0.02 * pois


def test_cyclic_poisson_equals_rescaled_poisson():
    c_col = (0.8, 0.5, 0.3)
    norm = math.sqrt(sum(v * v for v in c_col))
    spec = pld.CyclicPoissonBandMFSpec(iterations=1_001, min_sep=4, sampling_prob=0.02,
                                       c_col=c_col, sigma=1.0 * norm)
    assert spec.compositions == 251  # ceil(1001 / 4)
    a = pld.pld_epsilon(spec, 1e-6, estimate_error=False).epsilon
    b = pld.pld_epsilon(pld.PoissonGaussianSpec(0.02, 1.0, 251), 1e-6, estimate_error=False).epsilon
    assert a == pytest.approx(b, rel=1e-9)


# ---------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------
def test_calibrate_poisson_certified_and_matches_dp_accounting():
    q, steps, eps, delta, h = 0.01, 1_000, 2.0, 1e-5, 1e-3
    spec = pld.PoissonGaussianSpec(q, 1.0, steps)
    sigma = pld.pld_calibrate(spec, eps, delta, rtol=1e-3, value_discretization_interval=h)
    d = pld.deltas_for_sigmas(spec, [sigma * (1 - 2e-3), sigma], eps, value_discretization_interval=h)
    assert d[1] <= delta < d[0]  # certified, and (nearly) the smallest
    ref = _dp_poisson_epsilon(q, sigma, steps, delta)
    assert ref <= eps * (1 + 1e-3)


def test_calibrate_readme_fact_dpsgd_sigma():
    # shared/papers/README: q = 1793/14,745,600, 7200 steps, eps = 10,
    # delta = 1.301e-8 requires sigma ~= 0.367 (Dong & Ganesh 2026 [arXiv:2602.09338] says 0.368).
    spec = pld.PoissonGaussianSpec(1793 / 14_745_600, 1.0, 7_200)
    d = pld.deltas_for_sigmas(spec, [0.3655, 0.3675], 10.0)
    assert d[0] > 1.301e-8 >= d[1]


def test_calibrate_group_with_factory():
    def factory(s):
        return pld.GroupPoissonSpec(2, 0.01, s, 2_000)
    sigma = pld.pld_calibrate(factory, 8.0, 1e-6, rtol=1e-2, ladder_size=4,
                              value_discretization_interval=1e-3)
    e = pld.pld_epsilon(factory(sigma), 1e-6, estimate_error=False,
                        value_discretization_interval=1e-3).epsilon
    assert e <= 8.0
    assert 0.5 < sigma < 1.0  # eps(k=2, sigma=1) ~ 6.4 < 8


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("factory,match", [
    (lambda: pld.PoissonGaussianSpec(0.0, 1.0, 10), r"sampling_prob must be in \(0, 1\]"),
    (lambda: pld.PoissonGaussianSpec(1.5, 1.0, 10), r"sampling_prob must be in \(0, 1\]"),
    (lambda: pld.PoissonGaussianSpec(0.1, 0.0, 10), r"sigma must be in \(0, inf\); got 0"),
    (lambda: pld.PoissonGaussianSpec(0.1, -1.0, 10), r"sigma must be in \(0, inf\); got -1"),
    (lambda: pld.PoissonGaussianSpec(0.1, 1.0, 0), r"steps must be an integer in \[1, inf\); got 0"),
    (lambda: pld.PoissonGaussianSpec(0.1, 1.0, 2.5), r"steps must be an integer in \[1, inf\); got 2\.5"),
    (lambda: pld.PoissonGaussianSpec(0.1, 1.0, 2.0), r"steps must be an integer in \[1, inf\); got 2\.0$"),
    (lambda: pld.PoissonGaussianSpec("0.5", 1.0, 10), r"sampling_prob must be a finite real number in \(0, 1\]"),
    (lambda: pld.GaussianSpec(float("nan")), r"sigma must be a finite real number in \(0, inf\); got nan"),
    (lambda: pld.GroupPoissonSpec(0, 0.1, 1.0, 10), r"group_size must be an integer in \[1, inf\); got 0"),
    (lambda: pld.GroupFixedBatchSpec(0, 10, 100, 1.0, 10), r"group_size must be an integer in \[1, inf\)"),
    (lambda: pld.GroupFixedBatchSpec(2, 200, 100, 1.0, 10), r"batch_size must be in \[1, dataset_size=100\]"),
    (lambda: pld.CyclicPoissonBandMFSpec(100, 0, 0.1, (1.0,), 1.0), r"min_sep must be an integer in \[1, inf\)"),
    (lambda: pld.CyclicPoissonBandMFSpec(100, 4, 0.1, (), 1.0), r"c_col must be a non-empty sequence"),
    (lambda: pld.pld_delta(pld.GaussianSpec(1.0), -0.1), r"epsilon must be in \[0, inf\); got -0\.1"),
    (lambda: pld.pld_epsilon(pld.GaussianSpec(1.0), 0.0), r"delta must be in \(0, 1\)"),
    (lambda: pld.pld_epsilon(pld.GaussianSpec(1.0), 1.0), r"delta must be in \(0, 1\)"),
    (lambda: pld.pld_calibrate(pld.GaussianSpec(1.0), 1.0, 1.5), r"delta must be in \(0, 1\)"),
    (lambda: pld.pld_calibrate(pld.GaussianSpec(1.0), -1.0, 1e-5), r"epsilon must be in \[0, inf\); got -1"),
    (lambda: pld.epsilons_for_sigmas(pld.GaussianSpec(1.0), [1.0, -2.0], 1e-5), r"sigmas must be"),
    (lambda: pld.pld_delta(pld.GaussianSpec(1.0), 1.0, value_discretization_interval=0.0),
     r"value_discretization_interval must be in \(0, 0.1\]"),
    (lambda: pld.pld_delta(pld.GaussianSpec(1.0), 1.0, discretization="nearest"), r"discretization must be"),
    (lambda: pld.pld_delta("gaussian", 1.0), r"mechanism must be one of"),
    (lambda: pld.group_privacy_conversion_epsilon(pld.GaussianSpec(1.0), 0, 1e-5), r"group_size must be"),
    (lambda: pld.pld_calibrate(pld.GaussianSpec(1.0), 1.0, 1e-5, rtol=0.0), r"rtol must be in \[1e-12, 0.5\)"),
    (lambda: pld.pld_calibrate(pld.GaussianSpec(1.0), 1.0, 1e-5, rtol=1e-13), r"rtol must be in \[1e-12, 0.5\)"),
])
def test_input_validation(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


def test_epsilon_infinite_when_delta_below_infinity_mass():
    # the truncated noise tails (~1e-23 per step) sit at +inf: smaller deltas cannot be certified
    res = pld.pld_epsilon(pld.GaussianSpec(4.0, steps=20), 1e-40, estimate_error=False)
    assert res.infinity_mass > 1e-40
    assert math.isinf(res.epsilon)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------
def _cli(argv, capsys):
    rc = pld_cli.main(argv)  # the standalone entry point: the handler's report printed as JSON with --json
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_epsilon_delta_json(capsys):
    base = ["--scheme", "poisson", "--sampling-prob", "0.01", "--sigma", "1.0",
            "--steps", "10000", "--no-error-estimate", "--json"]
    rc, out, _ = _cli(["pld", "epsilon", *base, "--delta", "1e-5"], capsys)
    assert rc == 0
    data = json.loads(out)
    assert {"epsilon", "delta", "epsilon_remove", "epsilon_add", "error_estimate", "mechanism"} <= set(data)
    assert data["epsilon"] == pytest.approx(_dp_poisson_epsilon(0.01, 1.0, 10_000, 1e-5), rel=1e-3)
    rc, out, _ = _cli(["pld", "delta", *base, "--epsilon", "6.0"], capsys)
    assert rc == 0
    data = json.loads(out)
    assert "delta" in data and 1e-6 < data["delta"] < 1e-4


def test_cli_calibrate_and_summary(capsys):
    rc, out, _ = _cli(["pld", "calibrate", "--scheme", "gaussian", "--steps", "20",
                       "--epsilon", "1.0", "--delta", "1e-5", "--json"], capsys)
    assert rc == 0
    data = json.loads(out)
    assert "sigma" in data
    exact = _gauss_delta_exact(math.sqrt(20) / data["sigma"], 1.0)
    assert exact <= 1e-5
    rc, out, _ = _cli(["pld", "epsilon", "--scheme", "cyclic-poisson", "--iterations", "1001",
                       "--min-sep", "4", "--sampling-prob", "0.02", "--c-col", "0.8,0.5,0.3",
                       "--sigma", str(math.sqrt(0.98)), "--delta", "1e-6", "--no-error-estimate"], capsys)
    assert rc == 0 and "epsilon =" in out


@pytest.mark.parametrize("argv,msg", [
    (["pld", "epsilon", "--sampling-prob", "1.5", "--sigma", "1", "--steps", "10", "--delta", "1e-5"],
     "--sampling-prob must be in (0, 1]; got 1.5"),
    (["pld", "epsilon", "--sampling-prob", "0.1", "--steps", "10", "--delta", "1e-5"],
     "--sigma is required for pld epsilon --scheme poisson"),
    (["pld", "delta", "--sampling-prob", "0.1", "--sigma", "1", "--steps", "10", "--epsilon", "-1"],
     "--epsilon must be in [0, inf); got -1"),
    (["pld", "epsilon", "--sampling-prob", "0.1", "--sigma", "1", "--steps", "10", "--delta", "2"],
     "--delta must be in (0, 1); got 2"),
    (["pld", "epsilon", "--sampling-prob", "0.1", "--sigma", "-1", "--steps", "10", "--delta", "1e-5"],
     "--sigma must be in (0, inf); got -1"),
    (["pld", "epsilon", "--sampling-prob", "0.1", "--sigma", "1", "--steps", "0", "--delta", "1e-5"],
     "--steps must be an integer in [1, inf); got 0"),
    (["pld", "epsilon", "--sampling-prob", "0.1", "--sigma", "1", "--steps", "10", "--group-size", "0",
      "--delta", "1e-5"], "--group-size must be an integer in [1, inf); got 0"),
    (["pld", "epsilon", "--scheme", "cyclic-poisson", "--iterations", "10", "--min-sep", "2",
      "--sampling-prob", "0.1", "--c-col", "a,b", "--sigma", "1", "--delta", "1e-5"], "--c-col must be"),
    (["pld", "calibrate", "--sampling-prob", "0.1", "--steps", "10", "--delta", "1e-5"],
     "--epsilon is required for pld calibrate"),
])
def test_cli_bad_input(argv, msg, capsys):
    rc, out, err = _cli(argv, capsys)
    assert rc == 2
    assert err.startswith("error: ") and msg in err
    assert "Traceback" not in err and out == ""
