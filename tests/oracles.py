"""Deliberately simple float64 NumPy reference ("oracle") for DP-BandMF with
b-min-sep subsampling, by brute-force enumeration of all 2^n participation
vectors.  Intended only for small n (n <= 12) in tests.

Setting (Dong & Ganesh 2026 [arXiv:2602.09338], Sec. 4 Alg. 1/2 and Sec. 5):
  y = C x + z,  z ~ N(0, sigma^2 I),
  C[i, j] = c_col[i - j] if 0 <= i - j < len(c_col) else 0   (banded Toeplitz),
  P = sum_x prob(x) N(Cx, sigma^2 I),   Q = N(0, sigma^2 I).

Participation rules for one example (iterations t = 1..n):
  * cold start (Alg. 1): the example is eligible at t iff it did not participate
    in any of t-b+1..t-1; if eligible it participates w.p. p, else it cannot.
  * warm start (Alg. 2): with prob 1/(1+(b-1)p) no history ("available");
    otherwise a virtual participation at iteration 1-s, s ~ Uniform{1..b-1}
    (so eligibility starts at iteration b-s+1).  Virtual participations are
    not part of x.
No dynamic programming, no cleverness: everything is enumerated.
"""

import itertools
import math

import numpy as np
from scipy.stats import norm


def banded_toeplitz(n, c_col):
    """n x n lower-triangular banded Toeplitz matrix with first column c_col."""
    c_col = np.asarray(c_col, dtype=np.float64)
    C = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(n):
            d = i - j
            if 0 <= d < len(c_col):
                C[i, j] = c_col[d]
    return C


def _pattern_prob_given_last(x, b, p, last_participation):
    """Probability of participation vector x (iterations 1..n) given that the
    most recent (real or virtual) participation before iteration 1 was at
    iteration `last_participation` (None = never participated)."""
    prob = 1.0
    last = last_participation
    for t in range(1, len(x) + 1):
        eligible = (last is None) or (t - last >= b)
        if eligible:
            if x[t - 1] == 1:
                prob *= p
                last = t
            else:
                prob *= (1.0 - p)
        else:
            if x[t - 1] == 1:
                return 0.0  # violates min-sep
            # not eligible and not participating: probability 1
    return prob


def pattern_probability(x, b, p, warm_start):
    """Probability of one participation vector x under (cold/warm) b-min-sep."""
    if not warm_start:
        return _pattern_prob_given_last(x, b, p, None)
    p_available = 1.0 / (1.0 + (b - 1) * p)
    total = p_available * _pattern_prob_given_last(x, b, p, None)
    if b > 1:
        p_each_virtual = (1.0 - p_available) / (b - 1)
        for s in range(1, b):  # virtual participation at iteration 1 - s
            total += p_each_virtual * _pattern_prob_given_last(x, b, p, 1 - s)
    return total


def enumerate_patterns(n, b, p, warm_start):
    """All 2^n vectors x in {0,1}^n with their probabilities (zeros included).

    Returns list of (x: np.ndarray[int] of shape (n,), prob: float)."""
    assert n >= 1 and b >= 1 and 0.0 < p <= 1.0
    out = []
    for bits in itertools.product([0, 1], repeat=n):
        x = np.array(bits, dtype=np.int64)
        out.append((x, pattern_probability(x, b, p, warm_start)))
    total = sum(pr for _, pr in out)
    assert abs(total - 1.0) < 1e-12, total
    return out


def log_likelihood_ratio(y, sigma, c_col, p, b, warm_start):
    """ln P(y)/Q(y) = logsumexp_x [ln prob(x) + (<Cx,y> - ||Cx||^2/2)/sigma^2].

    y has shape (n,) (returns float); shape (m, n) is also accepted (returns an
    array of m values)."""
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[-1]
    C = banded_toeplitz(n, c_col)
    terms = []
    means = []
    for x, pr in enumerate_patterns(n, b, p, warm_start):
        if pr > 0.0:
            mu = C @ x.astype(np.float64)
            means.append(mu)
            terms.append(math.log(pr) - 0.5 * float(mu @ mu) / sigma**2)
    means = np.array(means)              # (K, n)
    terms = np.array(terms)              # (K,)
    a = terms + (y @ means.T) / sigma**2  # (..., K)
    amax = np.max(a, axis=-1, keepdims=True)
    res = np.squeeze(amax, -1) + np.log(np.sum(np.exp(a - amax), axis=-1))
    if res.ndim == 0:
        return float(res)
    return res


def sample_y(rng, n, b, p, c_col, sigma, warm_start, positive, size=None):
    """Sample y ~ P (positive=True) or y ~ Q (positive=False).

    With size=None returns shape (n,); with integer size returns (size, n)."""
    m = 1 if size is None else int(size)
    C = banded_toeplitz(n, c_col)
    if positive:
        pats = enumerate_patterns(n, b, p, warm_start)
        xs = np.array([x for x, _ in pats], dtype=np.float64)
        probs = np.array([pr for _, pr in pats])
        idx = rng.choice(len(pats), size=m, p=probs / probs.sum())
        x = xs[idx]
    else:
        x = np.zeros((m, n))
    y = x @ C.T + sigma * rng.standard_normal((m, n))
    return y[0] if size is None else y


def gaussian_delta(sensitivity, sigma, epsilon):
    """Exact hockey-stick divergence H_{e^eps}(N(D, s^2) || N(0, s^2))
    (Balle & Wang 2018, Thm. 8)."""
    D = float(sensitivity)
    s = float(sigma)
    a = D / (2.0 * s)
    b = epsilon * s / D
    return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))


def exact_binomial_pmf(trials, p, ks, dps, step_dps):
    """Binom(trials, p) at ``ks`` in mpmath, ``dps`` digits; ``p`` a float or an exact ``Fraction``.

    Within a run of consecutive ``ks`` (0 < p < 1) only the first value comes from log-gammas (``dps`` digits: a
    relative error near ``10^-dps N ln N``); the next ones follow by the exact ratio
    ``pmf(k + 1) / pmf(k) = (trials - k) p / ((k + 1) (1 - p))`` at ``step_dps`` digits, each step rounding once
    (relative ``10^-step_dps``), so a run of ``L`` cells adds at most about ``L 10^-step_dps``. The same values as
    a log-gamma pair per cell, at a fraction of the host time. ``p = 1`` puts the mass 1 at ``trials``."""
    import mpmath
    interior = 0 < p < 1
    num, den = (p.numerator, p.denominator) if hasattr(p, "numerator") else (None, None)
    with mpmath.workdps(dps):
        pm = mpmath.mpf(p) if num is None else mpmath.mpf(num) / den
        lg = mpmath.loggamma(trials + 1)
    with mpmath.workdps(step_dps):  # p / (1 - p), from the integers where p is exact
        ratio = None if not interior else pm / (1 - pm) if num is None else mpmath.mpf(num) / (den - num)

    def direct(k):
        with mpmath.workdps(dps):
            return mpmath.exp(lg - mpmath.loggamma(k + 1) - mpmath.loggamma(trials - k + 1)
                              + k * mpmath.log(pm) + (trials - k) * mpmath.log1p(-pm))

    out, prev_k, prev = [], None, None
    for k in ks:
        if not 0 <= k <= trials or (p == 1 and k != trials):
            out.append(mpmath.mpf(0))
            prev_k = None
            continue
        if p == 1:
            out.append(mpmath.mpf(1))
            continue
        if ratio is not None and prev_k == k - 1:
            with mpmath.workdps(step_dps):
                prev = prev * (trials - prev_k) / (prev_k + 1) * ratio
        else:
            prev = direct(k)
        prev_k = k
        out.append(+prev)
    return out
