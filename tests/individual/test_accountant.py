"""Individual PLD accounting (mcacct.individual.accountant): closed forms, the homogeneous path, brute-force
(unbucketed) compositions through mcacct.pld.events, monotonicity, bucketing soundness, and the CLI."""

import json
import subprocess
import sys

import numpy as np
import pytest

import mcacct  # noqa: F401  (float64)
from mcacct import pld
from mcacct.individual import gdp_epsilon
from mcacct.individual.accountant import ACCOUNTANT_LABELS, bucket_counts, individual_epsilons

Q, SIGMA, DELTA = 0.05, 1.0, 1e-5


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(3)
    t = 120
    r = np.empty((6, t))
    r[0] = 1.0                                   # the worst case
    r[1] = 0.0                                   # never contributes
    r[2] = rng.choice([0.33, 0.71, 0.05], size=t)  # few distinct values, none on an edge of 20 buckets
    r[3] = rng.choice([0.0, 0.5, 0.97], size=t)
    r[4] = rng.uniform(0, 1, size=t)
    r[5] = r[4]
    r[5, 7] = min(1.0, r[4, 7] + 0.2)              # one step larger than row 4
    return r


@pytest.fixture(scope="module")
def result(rows):
    return individual_epsilons(rows, SIGMA, Q, DELTA, buckets=20)


def test_ones_equal_the_worst_case_and_zeros_cost_nothing(rows, result):
    worst = pld.pld_epsilon(pld.PoissonGaussianSpec(Q, SIGMA, steps=rows.shape[1]), DELTA,
                            estimate_error=False).epsilon
    assert result.worst_case_epsilon == worst
    assert result.epsilon[0] == worst
    assert result.epsilon[1] == 0.0
    assert np.all(result.epsilon <= worst)
    assert result.accountant == ACCOUNTANT_LABELS["approximative"]


def _unbucketed(row):
    vals, counts = np.unique(row[row > 0], return_counts=True)
    events = [pld.Event(pld.PoissonGaussianSpec(Q, SIGMA, sensitivity=float(v)), int(c)) for v, c in zip(vals, counts)]
    return pld.events_epsilon(events, DELTA, estimate_error=False).epsilon


@pytest.mark.parametrize("i", [2, 3])
def test_bucketing_never_lowers_epsilon(rows, result, i):
    exact = _unbucketed(rows[i])
    assert result.epsilon[i] >= exact
    assert result.epsilon_lower_bucket[i] <= exact + 1e-3  # up to the coarser grid's pessimism
    assert result.epsilon[i] - result.epsilon_lower_bucket[i] <= result.bucketing_bound + 1e-15


def test_epsilon_is_monotone_in_every_ratio(rows, result):
    assert result.epsilon[5] >= result.epsilon[4]
    bigger = rows[4:5] * 0 + np.maximum(rows[4:5], 0.5)
    more = individual_epsilons(np.concatenate([rows[4:5], bigger]), SIGMA, Q, DELTA, buckets=20,
                               bucketing_bound=False)
    assert more.epsilon[1] >= more.epsilon[0]


def test_q_one_is_the_exact_gaussian_epsilon(rows):
    res = individual_epsilons(rows[2:5], 3.0, 1.0, DELTA)
    mu = np.sqrt(np.sum(rows[2:5] ** 2, axis=1)) / 3.0
    np.testing.assert_allclose(res.mu, mu, rtol=1e-15)
    np.testing.assert_array_equal(res.epsilon, gdp_epsilon(mu, DELTA))
    ref = pld.pld_epsilon(pld.GaussianSpec(3.0, sensitivity=float(np.sqrt(np.sum(rows[2] ** 2)))), DELTA,
                          estimate_error=False).epsilon
    assert res.epsilon[0] == pytest.approx(ref, rel=1e-5)
    # ratios that depend on the trajectory: the realized mu is no bound fixed in advance (stop 75; the test below)
    assert res.accountant == ACCOUNTANT_LABELS["approximative"] and res.bucketing_bound == 0.0
    fixed = individual_epsilons(rows[2:5], 3.0, 1.0, DELTA, ratios_fixed=True)
    np.testing.assert_array_equal(fixed.epsilon, res.epsilon)
    assert fixed.accountant == ACCOUNTANT_LABELS["gdp"]


def test_a_realized_mu_is_no_guarantee_when_the_ratios_adapt():
    """Why q = 1 with trajectory-dependent ratios is labelled approximative (docs/individual.md, stop 75): steps
    that are eta-GDP while the example takes part, and a ratio that falls to 0 for good once the running privacy
    loss L_n reaches eps(eta sqrt(n), delta) + 0.05 (allowed: mu_{n+1} depends on the outputs so far and x_i only).
    Reporting eps(mu_realized, delta) on each outcome would need E_P[(1 - exp(eps(a) - L(a)))_+] <= delta; exact
    dynamic programming of L on a grid gives about 13 delta. Without the stopping rule it gives delta (the check of
    the computation)."""
    from scipy.stats import norm
    eta, steps, delta = 0.1, 400, 1e-5
    eps_n = np.asarray(gdp_epsilon(eta * np.sqrt(np.arange(1, steps + 1)), delta))
    h = eta / 25
    grid = np.arange(-12 * eta * np.sqrt(steps) - 5, eps_n[-1] + 5 + 10 * eta, h)  # no mass reaches the ends
    x = np.arange(-225, 226) * h
    kernel = norm.pdf(x, eta ** 2 / 2, eta)       # one step's privacy loss under P: N(eta^2/2, eta^2)
    kernel /= kernel.sum()

    def ex_post(margin):
        dens = np.zeros_like(grid)
        dens[np.argmin(np.abs(grid))] = 1.0
        total = 0.0
        for n in range(steps):
            dens = np.convolve(dens, kernel, mode="same")
            stop = grid >= eps_n[n] + margin if n < steps - 1 else np.ones(grid.shape, bool)
            total += np.sum(dens[stop] * np.clip(1 - np.exp(eps_n[n] - grid[stop]), 0, None))
            dens = np.where(stop, 0.0, dens)
        return total

    assert ex_post(np.inf) == pytest.approx(delta, rel=1e-4)
    assert ex_post(0.05) > 10 * delta


def test_bucket_edges_are_never_below_the_ratio():
    r = np.array([[0.0, 1e-300, 0.1, 0.3, 0.30000000000000004, 0.7, 1.0, 0.1 * 3]])
    for k in (1, 3, 10, 100):
        up = bucket_counts(r, k, up=True)[0]
        down = bucket_counts(r, k, up=False)[0]
        assert up.sum() == 7 and down.sum() <= 7
        edges = np.arange(1, k + 1) / k
        ku = np.ceil(r[0] * k)
        ku = np.where(ku / k < r[0], ku + 1, ku)
        assert np.all(edges[ku[r[0] > 0].astype(int) - 1] >= r[0][r[0] > 0])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="ratios must be finite and in"):
        individual_epsilons(np.array([[1.5]]), 1.0, 0.1, 1e-5)
    with pytest.raises(ValueError, match="sampling_prob"):
        individual_epsilons(np.ones((1, 3)), 1.0, 0.0, 1e-5)
    with pytest.raises(ValueError, match="below what the individual accountant can certify"):
        individual_epsilons(np.ones((1, 50)), 1.0, 0.1, 1e-12)


@pytest.mark.slow
def test_cli_individual(tmp_path, rows):
    path = tmp_path / "norms.npy"
    np.save(path, rows[:4] * 2.0)
    plot = tmp_path / "hist.png"
    run = subprocess.run([sys.executable, "-m", "mcacct", "individual", "--norms", str(path), "--clip-norm", "2",
                          "--sigma", str(SIGMA), "--sampling-prob", str(Q), "--delta", str(DELTA), "--buckets", "20",
                          "--json", "--plot", str(plot)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert len(out["epsilon"]) == 4 and out["epsilon"][1] == 0.0 and plot.stat().st_size > 0
    assert out["worst_case_epsilon"] == out["epsilon"][0] and "approximative" in out["accountant"]
    bad = tmp_path / "bad.npy"
    np.save(bad, -np.ones((2, 3)))
    run = subprocess.run([sys.executable, "-m", "mcacct", "individual", "--norms", str(bad), "--sigma", "1",
                          "--sampling-prob", "0.1", "--delta", "1e-5"], capture_output=True, text=True)
    assert run.returncode == 2 and "--norms must hold finite, non-negative" in run.stderr
