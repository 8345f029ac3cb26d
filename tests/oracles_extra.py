"""Brute-force float64 NumPy oracles for the extra schemes (multi-attribution, truncated b-min-sep, cyclic
Poisson, balls-in-bins, non-banded C with r-min-sep). Everything is enumerated: every participation
pattern (and every truncation outcome) with its probability, then a log-sum-exp over Gaussian
likelihood ratios. Small n only (n <= 9).
"""

import itertools
import math

import numpy as np

import oracles


def _lse(a, axis=-1):
    m = np.max(a, axis=axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.sum(np.exp(a - m), axis=axis))


def mixture_log_ratio(y, sigma, means, log_probs):
    """ln sum_m prob_m N(mean_m, s^2 I)(y) / N(0, s^2 I)(y) for y of shape (..., n)."""
    means = np.asarray(means, float)
    log_probs = np.asarray(log_probs, float)
    a = log_probs - 0.5 * np.sum(means**2, axis=1) / sigma**2 + (np.asarray(y) @ means.T) / sigma**2
    return _lse(a)


# -- multi-attribution (Thm. 6.1): x_i ~ Binom(k, p) unless one of the previous b-1 entries is positive --
def multi_attribution_patterns(n, b, p, k):
    out = []
    for x in itertools.product(range(k + 1), repeat=n):
        prob = 1.0
        for t in range(n):
            blocked = any(x[s] > 0 for s in range(max(0, t - b + 1), t))
            if blocked:
                if x[t] > 0:
                    prob = 0.0
                    break
            else:
                prob *= math.comb(k, x[t]) * p ** x[t] * (1 - p) ** (k - x[t])
        if prob > 0:
            out.append((np.array(x, float), prob))
    assert abs(sum(pr for _, pr in out) - 1) < 1e-12
    return out


def multi_attribution_log_ratio(y, sigma, c_col, p, b, k):
    n = np.asarray(y).shape[-1]
    C = oracles.banded_toeplitz(n, c_col)
    pats = multi_attribution_patterns(n, b, p, k)
    return mixture_log_ratio(y, sigma, [C @ x for x, _ in pats], [math.log(pr) for _, pr in pats])


# -- truncated b-min-sep (App. D): P amplitudes 2/1/0, Q amplitudes -1/0 given r ---------------------------
def truncated_log_ratio(y, r, sigma, c_col, p, b, warm, max_batch):
    y = np.asarray(y, float)
    n = y.shape[-1]
    C = oracles.banded_toeplitz(n, c_col)
    r = np.asarray(r)
    p_means, p_logs, q_means, q_logs = [], [], [], []
    for x, prob in oracles.enumerate_patterns(n, b, p, warm):
        if prob == 0.0:
            continue
        trunc = [t for t in range(n) if x[t] == 1 and r[t] >= max_batch]
        for surv in itertools.product([0, 1], repeat=len(trunc)):
            w = prob
            a_p = x.astype(float).copy()
            a_q = np.zeros(n)
            for t, s in zip(trunc, surv):
                wt = max_batch / (r[t] + 1)
                w *= wt if s else 1 - wt
                a_p[t] = 2.0 if s else 0.0
                a_q[t] = -1.0 if s else 0.0
            p_means.append(C @ a_p)
            p_logs.append(math.log(w))
            q_means.append(C @ a_q)
            q_logs.append(math.log(w))
    return mixture_log_ratio(y, sigma, p_means, p_logs) - mixture_log_ratio(y, sigma, q_means, q_logs)


def other_counts_pmf(n, b, p, warm, others):
    """Exact joint law of (r_1..r_n) for `others` independent b-min-sep examples, as a dict."""
    single = [(tuple(x), pr) for x, pr in oracles.enumerate_patterns(n, b, p, warm) if pr > 0]
    pmf = {}
    for combo in itertools.product(single, repeat=others):
        r = tuple(int(sum(c[0][t] for c in combo)) for t in range(n))
        pmf[r] = pmf.get(r, 0.0) + math.prod(c[1] for c in combo)
    return pmf


# -- cyclic Poisson / balls-in-bins --------------------------------------------------------------------------
def cyclic_log_ratio(y, sigma, c_col, q, b, random_phase):
    y = np.asarray(y, float)
    n = y.shape[-1]
    C = oracles.banded_toeplitz(n, c_col)
    means, logs = [], []
    shifts = range(b) if random_phase else [0]
    for s in shifts:
        slots = [t for t in range(n) if t % b == s]
        for bits in itertools.product([0, 1], repeat=len(slots)):
            pr = (1.0 / len(shifts)) * math.prod(q if v else 1 - q for v in bits)
            if pr == 0.0:
                continue
            x = np.zeros(n)
            x[[t for t, v in zip(slots, bits) if v]] = 1.0
            means.append(C @ x)
            logs.append(math.log(pr))
    return mixture_log_ratio(y, sigma, means, logs)


def single_step_mixture_delta(weight, mu, sigma, eps):
    """H_{e^eps}(w N(mu, s^2) + (1-w) N(0, s^2) || N(0, s^2)) (remove) and the reverse (add), closed forms.

    The loss ln(1 - w + w e^{(mu u - mu^2/2)/s^2}) is increasing in u, so each divergence is a difference
    of normal tail probabilities at the threshold where the loss equals eps (resp. -eps)."""
    from scipy.stats import norm

    def u_at(level):  # loss(u) = level
        t = (math.exp(level) - (1 - weight)) / weight
        if t <= 0:
            return -math.inf
        return (math.log(t) * sigma**2 + mu**2 / 2) / mu

    def tail(u, m):
        return norm.sf((u - m) / sigma)
    u = u_at(eps)  # remove: P(L > eps) - e^eps Q(L > eps)
    rem = weight * tail(u, mu) + (1 - weight) * tail(u, 0.0) - math.exp(eps) * tail(u, 0.0)
    u2 = u_at(-eps)  # add: Q(L < -eps) - e^eps P(L < -eps)
    add = (1 - tail(u2, 0.0)) - math.exp(eps) * (weight * (1 - tail(u2, mu)) + (1 - weight) * (1 - tail(u2, 0.0)))
    return max(rem, 0.0), max(add, 0.0)


# -- non-banded C with r-min-sep (App. B) ---------------------------------------------------------------------
def full_column_terms(y, sigma, c_col):
    n = np.asarray(y).shape[-1]
    C = oracles.banded_toeplitz(n, c_col)
    return (np.asarray(y) @ C - 0.5 * np.sum(C**2, axis=0)) / sigma**2, C


def allowance(c_col, n, r):
    """Gamma_j by its definition (slow and simple)."""
    c = np.zeros(n)
    c[: min(len(c_col), n)] = np.asarray(c_col, float)[:n]
    gamma = [sum(c[d] * c[d + lag] for d in range(n - lag)) for lag in range(n)]
    star = [max(gamma[lag:]) for lag in range(n)]
    return np.array([sum(star[q * r] for q in range(1, j // r + 1)) for j in range(n)])


def separated_sum_log_ratio(y, sigma, c_col, p, r, warm, shift=None):
    """ln sum_x mu_r(x) exp(sum_{j in S} (ell_j - shift_j)) with full-column ell (the dropped-cross-term sum)."""
    ell, _ = full_column_terms(y, sigma, c_col)
    n = ell.shape[-1]
    if shift is not None:
        ell = ell - np.asarray(shift) / sigma**2
    terms, logs = [], []
    for x, pr in oracles.enumerate_patterns(n, r, p, warm):
        if pr > 0:
            terms.append(x.astype(float))
            logs.append(math.log(pr))
    return _lse(np.asarray(logs) + ell @ np.asarray(terms).T)


def max_cross_sum(c_col, n, r):
    """max over r-separated patterns and positions j of sum_{i<j in S} <c_i, c_j> (brute force)."""
    C = oracles.banded_toeplitz(n, c_col)
    G = C.T @ C
    best = np.zeros(n)
    for x, pr in oracles.enumerate_patterns(n, r, 0.5, False):
        if pr == 0:
            continue
        S = [t for t in range(n) if x[t]]
        for j in S:
            best[j] = max(best[j], sum(G[i, j] for i in S if i < j))
    return best
