"""Every recursion against an independent float64 log-space oracle across the regimes that matter:
long blocks (b up to 256, two-level sums), p up to 0.99 and 1, sigma / ||c|| down to 0.05, cold and warm start.

``p`` and ``sigma`` are traced arguments of one jitted kernel per (b, warm start, recursion), so the sweep
compiles once per structure, not once per case. The full sweep (more p, sigma and samples) is
``benchmarks/recursion_sweep.py``; this file is its CI subset plus brute force (n <= 12), the pathological
case of the old two-level sum, and a property-based test.
"""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mcacct
import oracles
from mcacct.kernels.sliding import participation_log_ratios_t

RECURSIONS = ("linear", "scan", "blocked", "assoc")


def oracle_log_ratio(ell: np.ndarray, b: int, p: float, warm: bool) -> np.ndarray:
    """ln P/Q from the terms ``ell`` (shape ``(n, m)``) by the plain reverse recursion of Theorem 5.1 in
    NumPy log space: ``f_i = logaddexp(ln(1-p) + f_{i+1}, ln p + ell_i + f_{i+b})``, ``f = 0`` past ``n``."""
    n, m = ell.shape
    log_q = np.log1p(-p) if p < 1 else -np.inf
    f = np.zeros((n + b + 1, m))
    for i in range(n - 1, -1, -1):
        f[i] = np.logaddexp(log_q + f[i + 1], np.log(p) + ell[i] + f[i + b])
    if not warm:
        return f[0]
    w = np.full((b, 1), np.log(p))
    w[0] = 0.0
    a = f[:b] + w
    mx = a.max(axis=0)
    return mx + np.log(np.exp(a - mx).sum(axis=0)) - np.log1p((b - 1) * p)


def oracle_terms(y: np.ndarray, c_col, sigma: float) -> np.ndarray:
    """``ell_i`` for time-major ``y`` (shape ``(n, m)``), columns of C truncated at row n."""
    n = y.shape[0]
    c = np.asarray(c_col, np.float64)
    ell = np.zeros_like(y)
    for i in range(n):
        cc = c[: n - i]
        ell[i] = (cc @ y[i:i + len(cc)] - 0.5 * cc @ cc) / sigma**2
    return ell


@partial(jax.jit, static_argnames=("b", "warm", "recursion"))
def _kernel(ell_t, p, b, warm, recursion):
    from mcacct.kernels.recursion import recursion_log_ratio_t  # here, so the sweep script imports this file on old versions
    return recursion_log_ratio_t(ell_t, b, p, warm, recursion)


@partial(jax.jit, static_argnames=("c_col",))
def _terms(y_t, sigma, c_col):
    return participation_log_ratios_t(y_t, sigma, tuple(c_col))


def _participation(rng, n, b, p, warm, m):
    """b-min-sep participation vectors (shape ``(n, m)``) simulated step by step (Alg. 1 / Alg. 2)."""
    x = np.zeros((n, m))
    wait = np.zeros(m, int)  # iterations until eligible again
    if warm and b > 1:
        blocked = rng.random(m) >= 1.0 / (1.0 + (b - 1) * p)
        wait = np.where(blocked, rng.integers(1, b, m), 0)
    for i in range(n):
        take = (wait == 0) & (rng.random(m) < p)
        x[i] = take
        wait = np.where(take, b - 1, np.maximum(wait - 1, 0))
    return x


def _draws(n, b, p, c_col, sigma, warm, m, seed):
    """Time-major y: m/2 samples under P and m/2 under Q."""
    rng = np.random.default_rng(seed)
    x = _participation(rng, n, b, p, warm, m)
    x[:, m // 2:] = 0.0
    return oracles.banded_toeplitz(n, c_col) @ x + sigma * rng.standard_normal((n, m))


def _check(got, want, tol=1e-12):
    """Relative ``tol`` per sample (absolute ``tol`` where ``|L| < 1``)."""
    err = np.abs(got - want) / np.maximum(np.abs(want), 1.0)
    assert np.all(np.isfinite(got))
    assert err.max() <= tol, (err.max(), int(err.argmax()))


C_FOR_B = {1: (1.0,), 2: (0.8, 0.6), 33: (0.3,) * 8, 40: (0.3,) * 8, 64: (0.5,) * 4, 256: (0.25, 0.5, 0.25)}


@pytest.mark.parametrize("b", sorted(C_FOR_B))
@pytest.mark.parametrize("warm", [False, True])
@pytest.mark.parametrize("recursion", RECURSIONS)
def test_recursions_match_log_space_oracle_across_regimes(b, warm, recursion):
    c_col = C_FOR_B[b]
    n = 4 * b + 7 if b > 2 else 60
    norm = float(np.sqrt(np.sum(np.square(c_col))))
    for p in (0.5, 0.99, 1.0):
        for rel_sigma in (0.05, 2.0):
            sigma = rel_sigma * norm
            y = _draws(n, b, p, c_col, sigma, warm, 12, seed=b + int(100 * p))
            ell = oracle_terms(y, c_col, sigma)
            np.testing.assert_allclose(np.asarray(_terms(jnp.asarray(y), sigma, c_col)), ell,
                                       rtol=1e-12, atol=1e-12 * np.abs(ell).max())
            got = np.asarray(_kernel(jnp.asarray(ell), p, b, warm, recursion))
            _check(got, oracle_log_ratio(ell, b, p, warm))


@pytest.mark.parametrize("recursion", RECURSIONS)
def test_later_group_dwarfing_earlier_groups_loses_no_mass(recursion):
    """The two-level block sum of the linear recursion (b > 32) once formed the exclusive prefix of group
    totals as ``inclusive - total``: when a later group's total exceeds an earlier one's by more than
    1/eps, the earlier groups' mass vanished while the range guard passed. Here the ratio is e^40 ~ 2e17."""
    n, b, p = 64 * 6, 64, 0.9
    rng = np.random.default_rng(0)
    ell = rng.normal(0.0, 0.5, (n, 16))
    for blk in range(n // b):  # in every block, early iterations dwarf late ones
        ell[blk * b: blk * b + 48] += 40.0
    ell[:, :4] = rng.normal(0.0, 3.0, (n, 4))  # and a few ordinary samples beside them
    for warm in (False, True):
        got = np.asarray(_kernel(jnp.asarray(ell), p, b, warm, recursion))
        _check(got, oracle_log_ratio(ell, b, p, warm))


BRUTE = [(10, 1, 0.99, (1.0,)), (10, 2, 0.99, (0.8, 0.6)), (10, 2, 1.0, (0.8, 0.6)), (9, 33, 0.99, (0.3,) * 8),
         (11, 33, 1.0, (0.5, 0.2)), (12, 4, 0.9, (0.5,) * 4)]


@pytest.mark.parametrize("n,b,p,c_col", BRUTE)
@pytest.mark.parametrize("warm", [False, True])
def test_small_sigma_extreme_p_equals_enumeration(n, b, p, c_col, warm):
    norm = float(np.sqrt(np.sum(np.square(c_col))))
    sigma = 0.05 * norm
    rng = np.random.default_rng(n * b)
    ys = np.concatenate([oracles.sample_y(rng, n, b, p, c_col, sigma, warm, True, size=4),
                         oracles.sample_y(rng, n, b, p, c_col, sigma, warm, False, size=2)])
    want = np.array([oracles.log_likelihood_ratio(y, sigma, c_col, p, b, warm) for y in ys])
    ell = jnp.asarray(oracle_terms(ys.T, c_col, sigma))
    for recursion in RECURSIONS:
        got = np.asarray(_kernel(ell, p, b, warm, recursion))
        _check(got, want, tol=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(b=st.sampled_from([1, 2, 3, 33, 40]), warm=st.booleans(), recursion=st.sampled_from(RECURSIONS),
       p=st.one_of(st.floats(1e-3, 0.999), st.just(1.0), st.just(0.99)),
       rel_sigma=st.floats(0.05, 3.0), seed=st.integers(0, 2**16))
def test_property_recursions_match_oracle(b, warm, recursion, p, rel_sigma, seed):
    c_col = (0.6, 0.3, 0.1)[: min(b, 3)]
    n = 2 * b + 11
    sigma = rel_sigma * float(np.sqrt(np.sum(np.square(c_col))))
    y = _draws(n, b, p, c_col, sigma, warm, 8, seed)
    ell = oracle_terms(y, c_col, sigma)
    got = np.asarray(_kernel(jnp.asarray(ell), p, b, warm, recursion))
    _check(got, oracle_log_ratio(ell, b, p, warm))
