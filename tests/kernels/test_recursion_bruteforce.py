"""The §5 recursion equals brute-force enumeration of participation patterns (float64, 1e-9 relative)."""

import jax
import numpy as np
import pytest

import mcacct
import oracles

C_COLS = {1: [(1.0,)], 2: [(1.0,), (0.8, 0.6)], 3: [(1.0, 0.5, 0.25), (0.3, 0.0, 0.9)],
          4: [(0.5, 0.5, 0.5, 0.5), (1.0, 0.7, 0.2), (0.2, 0.4, 0.6, 0.8)]}
CASES = [(n, b, p, c, warm)
         for b in (1, 2, 3, 4)
         for n, p in ((5, 0.35), (9, 0.1), (12, 0.8), (7, 1.0))
         for c in C_COLS[b]
         for warm in (False, True)]


@pytest.mark.parametrize("n,b,p,c_col,warm", CASES)
@pytest.mark.parametrize("method,recursion", [("auto", "scan"), ("direct", "blocked"), ("fft", "assoc"), ("auto", "linear")])
def test_recursion_matches_enumeration(n, b, p, c_col, warm, method, recursion):
    rng = np.random.default_rng(hash((n, b, p, c_col, warm)) % 2**32)
    sigma = 0.7
    ys = np.concatenate([
        oracles.sample_y(rng, n, b, p, c_col, sigma, warm, True, size=6),
        oracles.sample_y(rng, n, b, p, c_col, sigma, warm, False, size=3),
    ])
    expected = np.array([oracles.log_likelihood_ratio(y, sigma, c_col, p, b, warm) for y in ys])
    scheme = mcacct.BMinSep(p, b, n, warm_start=warm)
    got = np.asarray(mcacct.privacy_loss(scheme, ys, c_col, sigma, dot_method=method, recursion=recursion))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9 * np.max(np.abs(expected)))


def test_sampler_matches_enumerated_pattern_law():
    """Empirical pattern frequencies of the renewal sampler match the enumerated probabilities."""
    n, b, p = 6, 3, 0.4
    for warm in (False, True):
        scheme = mcacct.BMinSep(p, b, n, warm_start=warm)
        m = 200_000
        x = np.asarray(mcacct.sample_participation(jax.random.key(3), scheme, m)).astype(int)
        codes = x @ (1 << np.arange(n))
        counts = np.bincount(codes, minlength=2**n)
        for pattern, prob in oracles.enumerate_patterns(n, b, p, warm):
            c = counts[int(np.asarray(pattern) @ (1 << np.arange(n)))]
            sd = np.sqrt(m * prob * (1 - prob))
            assert abs(c - m * prob) <= 5 * sd + 1e-9, (warm, pattern, c, m * prob)


@pytest.mark.parametrize("n,b,p,c_col,warm", [(12, 3, 0.3, (1.0, 0.5, 0.25), True), (9, 4, 1.0, (0.5,) * 4, True),
                                              (11, 2, 0.2, (0.8, 0.6), False), (10, 1, 0.4, (1.0,), True)])
@pytest.mark.parametrize("recursion", ["scan", "blocked", "assoc", "linear"])
def test_engine_kernel_equals_enumeration_on_its_own_draws(n, b, p, c_col, warm, recursion):
    """The fused time-major engine kernel gives the brute-force loss of the very y it draws."""
    from mcacct.engine.problem import Problem, block_keys, block_size, chunk_losses
    from mcacct.schemes.bminsep import sample_y_t
    scheme = mcacct.BMinSep(p, b, n, warm_start=warm)
    strategy = mcacct.BandedToeplitz(c_col)
    pb = Problem(scheme, strategy, recursion=recursion)
    sigma, key = 0.9, jax.random.key(7)
    assert block_size(pb, 16) == 16
    for direction in ("remove", "add"):
        positive = direction == "remove"
        losses = np.asarray(chunk_losses(key, sigma, pb, 16, direction))
        ys = np.asarray(sample_y_t(block_keys(key, pb, 16)[0], scheme, strategy, sigma, 16, direction)).T
        expected = np.array([oracles.log_likelihood_ratio(y, sigma, c_col, p, b, warm) for y in ys])
        expected = expected if positive else -expected
        np.testing.assert_allclose(losses, expected, rtol=1e-9, atol=1e-9 * np.max(np.abs(expected)))
