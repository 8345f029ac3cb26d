"""Sanity tests of the brute-force oracle in tests/oracles.py itself."""

import math
import os
import sys

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import multivariate_normal, norm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracles  # noqa: E402
from oracles import (  # noqa: E402
    banded_toeplitz,
    enumerate_patterns,
    gaussian_delta,
    log_likelihood_ratio,
    sample_y,
)

CONFIGS = [
    (n, b, p, w)
    for n in (1, 3, 6, 9)
    for b in (1, 2, 3, 5)
    for p in (0.05, 0.3, 0.7, 1.0)
    for w in (False, True)
]


def _as_dict(pats):
    return {tuple(int(v) for v in x): pr for x, pr in pats}


@pytest.mark.parametrize("n,b,p,warm", CONFIGS)
def test_probabilities_sum_to_one_and_respect_min_sep(n, b, p, warm):
    pats = enumerate_patterns(n, b, p, warm)
    assert len(pats) == 2**n
    assert all(pr >= 0.0 for _, pr in pats)
    assert math.isclose(sum(pr for _, pr in pats), 1.0, abs_tol=1e-12)
    for x, pr in pats:
        ones = np.flatnonzero(x)
        if pr > 0 and len(ones) > 1:
            assert np.min(np.diff(ones)) >= b


def test_toeplitz_matrix():
    C = banded_toeplitz(5, [1.0, 0.5, 0.25])
    expected = np.array([
        [1.0, 0, 0, 0, 0],
        [0.5, 1.0, 0, 0, 0],
        [0.25, 0.5, 1.0, 0, 0],
        [0, 0.25, 0.5, 1.0, 0],
        [0, 0, 0.25, 0.5, 1.0],
    ])
    np.testing.assert_array_equal(C, expected)


@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("p", [0.1, 0.5, 1.0])
def test_b1_is_product_bernoulli(p, warm):
    n = 7
    for x, pr in enumerate_patterns(n, 1, p, warm):
        k = int(x.sum())
        assert math.isclose(pr, p**k * (1 - p) ** (n - k), rel_tol=1e-12, abs_tol=1e-300)


@pytest.mark.parametrize("n", [2, 4, 7])
def test_warm_start_p1_b_eq_n_single_uniform_participation(n):
    # Available w.p. 1/n -> participates at iteration 1 (p=1) and is then barred
    # for iterations 2..n.  Virtual state s in {1..n-1} w.p. 1/n each -> first
    # eligible at iteration n-s+1 in {2..n}, participates there and is barred
    # afterwards.  So: exactly one participation, uniform over positions 1..n.
    d = _as_dict(enumerate_patterns(n, n, 1.0, True))
    for x, pr in d.items():
        if sum(x) == 1:
            assert math.isclose(pr, 1.0 / n, rel_tol=1e-12)
        else:
            assert pr == 0.0


@pytest.mark.parametrize("n,b", [(7, 3), (8, 4), (6, 2), (5, 5), (4, 6)])
def test_warm_start_p1_is_balls_in_bins(n, b):
    # p=1 warm start = balls-in-bins: a uniform phase r in {1..b} and the
    # example participates at r, r+b, r+2b, ... (phases > n give x = 0).
    expected = {}
    for r in range(1, b + 1):
        x = tuple(1 if (t >= r and (t - r) % b == 0) else 0 for t in range(1, n + 1))
        expected[x] = expected.get(x, 0.0) + 1.0 / b
    d = _as_dict(enumerate_patterns(n, b, 1.0, True))
    for x, pr in d.items():
        assert math.isclose(pr, expected.get(x, 0.0), rel_tol=1e-12, abs_tol=1e-15)


@pytest.mark.parametrize("p", [0.2, 0.6])
def test_cold_start_b_ge_n_is_geometric(p):
    n = 6
    d = _as_dict(enumerate_patterns(n, n, p, False))
    for x, pr in d.items():
        k = sum(x)
        if k == 0:
            assert math.isclose(pr, (1 - p) ** n, rel_tol=1e-12)
        elif k == 1:
            t = x.index(1) + 1
            assert math.isclose(pr, (1 - p) ** (t - 1) * p, rel_tol=1e-12)
        else:
            assert pr == 0.0


@pytest.mark.parametrize("b", [1, 2, 3, 5])
@pytest.mark.parametrize("p", [0.1, 0.4, 1.0])
def test_warm_start_marginal_is_p0_everywhere(b, p):
    n = 9
    p0 = 1.0 / (1.0 / p + b - 1)
    pats = enumerate_patterns(n, b, p, True)
    marg = sum(pr * x.astype(float) for x, pr in pats)
    np.testing.assert_allclose(marg, np.full(n, p0), rtol=1e-12)


def test_cold_start_first_marginals():
    # Cold start: P(x_1)=p; P(x_2)=p(1-p) for b=2 (barred after x_1=1).
    pats = enumerate_patterns(4, 2, 0.3, False)
    marg = sum(pr * x.astype(float) for x, pr in pats)
    assert math.isclose(marg[0], 0.3, rel_tol=1e-12)
    assert math.isclose(marg[1], 0.3 * 0.7, rel_tol=1e-12)


def _simulate_literal(rng, m, n, b, p, warm):
    """Literal simulation of Alg. 1 / Alg. 2 (batches of m examples)."""
    hist = {}  # iteration index (may be <= 0) -> bool array over examples
    if warm:
        avail = rng.random(m) < 1.0 / (1.0 + (b - 1) * p)
        s = rng.integers(1, b, size=m) if b > 1 else np.zeros(m, dtype=int)
        for i in range(1, b):
            hist[1 - i] = (~avail) & (s == i)
    xs = np.zeros((m, n), dtype=np.int64)
    for i in range(1, n + 1):
        excl = np.zeros(m, dtype=bool)
        lo = i - b + 1 if warm else max(1, i - b + 1)
        for j in range(lo, i):
            excl |= hist.get(j, np.zeros(m, dtype=bool))
        hist[i] = (~excl) & (rng.random(m) < p)
        xs[:, i - 1] = hist[i]
    return xs


@pytest.mark.parametrize("n,b,p,warm", [(6, 3, 0.4, False), (6, 3, 0.4, True),
                                        (5, 4, 0.8, True), (7, 2, 0.25, True)])
def test_enumeration_matches_literal_simulation(n, b, p, warm):
    rng = np.random.default_rng(1234)
    m = 200_000
    xs = _simulate_literal(rng, m, n, b, p, warm)
    codes = xs @ (1 << np.arange(n))
    counts = np.bincount(codes, minlength=2**n) / m
    for x, pr in enumerate_patterns(n, b, p, warm):
        c = int(x @ (1 << np.arange(n)))
        se = math.sqrt(max(pr * (1 - pr), 1e-12) / m)
        assert abs(counts[c] - pr) < 5 * se + 1e-9, (x, counts[c], pr)


def test_llr_closed_form_full_participation():
    rng = np.random.default_rng(0)
    n, sigma = 8, 0.7
    for _ in range(20):
        y = rng.normal(size=n) * 2
        got = log_likelihood_ratio(y, sigma, [1.0], 1.0, 1, False)
        want = np.sum(y - 0.5) / sigma**2
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)


@pytest.mark.parametrize("warm", [False, True])
def test_llr_matches_direct_density_mixture(warm):
    rng = np.random.default_rng(5)
    n, b, p, sigma, c = 6, 3, 0.35, 1.3, [1.0, 0.6, 0.3]
    C = banded_toeplitz(n, c)
    pats = enumerate_patterns(n, b, p, warm)
    cov = sigma**2 * np.eye(n)
    for _ in range(5):
        y = rng.normal(size=n) + 0.5
        Py = sum(pr * multivariate_normal(C @ x, cov).pdf(y) for x, pr in pats)
        Qy = multivariate_normal(np.zeros(n), cov).pdf(y)
        got = log_likelihood_ratio(y, sigma, c, p, b, warm)
        assert math.isclose(got, math.log(Py / Qy), rel_tol=1e-10, abs_tol=1e-10)
    ys = rng.normal(size=(4, n))
    batch = log_likelihood_ratio(ys, sigma, c, p, b, warm)
    single = [log_likelihood_ratio(yy, sigma, c, p, b, warm) for yy in ys]
    np.testing.assert_allclose(batch, single, rtol=1e-13)


@pytest.mark.parametrize("warm", [False, True])
def test_sampling_and_change_of_measure(warm):
    # E_Q[P/Q] = 1, E_P[Q/P] = 1, E_P[y] = C E[x], E_Q[y] = 0.
    rng = np.random.default_rng(11)
    n, b, p, sigma, c = 5, 2, 0.3, 1.5, [1.0, 0.5]
    m = 40_000
    yq = sample_y(rng, n, b, p, c, sigma, warm, positive=False, size=m)
    yp = sample_y(rng, n, b, p, c, sigma, warm, positive=True, size=m)
    assert yq.shape == (m, n) and yp.shape == (m, n)
    assert sample_y(rng, n, b, p, c, sigma, warm, positive=True).shape == (n,)
    lq = log_likelihood_ratio(yq, sigma, c, p, b, warm)
    lp = log_likelihood_ratio(yp, sigma, c, p, b, warm)
    for vals in (np.exp(lq), np.exp(-lp)):
        assert abs(vals.mean() - 1.0) < 5 * vals.std() / math.sqrt(m)
    pats = enumerate_patterns(n, b, p, warm)
    ex = sum(pr * x.astype(float) for x, pr in pats)
    mean_p = banded_toeplitz(n, c) @ ex
    np.testing.assert_allclose(yp.mean(0), mean_p, atol=5 * 1.6 * sigma / math.sqrt(m))
    np.testing.assert_allclose(yq.mean(0), 0.0, atol=5 * sigma / math.sqrt(m))


@pytest.mark.parametrize("D,sigma,eps", [(1.0, 1.0, 0.0), (1.0, 1.0, 1.0),
                                         (2.0, 0.7, 3.0), (0.3, 2.0, 0.1),
                                         (1.0, 0.5, 5.0)])
def test_gaussian_delta_vs_numerical_integration(D, sigma, eps):
    def integrand(t):
        return max(0.0, norm.pdf(t, D, sigma) - math.exp(eps) * norm.pdf(t, 0.0, sigma))
    # Positive part is t > t* = sigma^2 eps / D + D / 2.
    tstar = sigma**2 * eps / D + D / 2
    num, _ = integrate.quad(integrand, tstar, np.inf, epsabs=1e-14, epsrel=1e-12)
    got = gaussian_delta(D, sigma, eps)
    assert math.isclose(got, num, rel_tol=1e-8, abs_tol=1e-13)
    if eps == 0.0:  # total variation distance
        assert math.isclose(got, 2 * norm.cdf(D / (2 * sigma)) - 1, rel_tol=1e-12)


def test_gaussian_delta_matches_full_line_integral():
    D, sigma, eps = 1.0, 0.8, 0.7
    f = lambda t: max(0.0, norm.pdf(t, D, sigma) - math.exp(eps) * norm.pdf(t, 0.0, sigma))
    num, _ = integrate.quad(f, -np.inf, np.inf, points=None, limit=200)
    assert math.isclose(gaussian_delta(D, sigma, eps), num, rel_tol=1e-6)


def test_oracle_is_independent_of_mcacct():
    src = open(oracles.__file__).read()
    assert "import mcacct" not in src and "from mcacct" not in src
