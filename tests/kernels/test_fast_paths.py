"""The fast CPU paths: float64 inversion normals, the linear-space recursion and its exact fallback, and
the capped renewal sampler. Each is checked against an independent computation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

import mcacct
import oracles
from mcacct.kernels.recursion import linear_first_values, poisson_log_ratio_linear
from mcacct.schemes.bminsep import log_ratio_from_terms_t
from mcacct.kernels.normal import ndtri, standard_normal
from mcacct.kernels.participation import participation_cap, participation_mask_t


def test_ndtri_matches_scipy_to_float64_accuracy():
    u = np.concatenate([np.linspace(0, 1, 200_001)[1:-1], 10.0 ** -np.arange(1, 300, 0.25),
                        1 - 10.0 ** -np.arange(1, 16, 0.01), [2.0 ** -54, 1 - 2.0 ** -53]])
    got = np.asarray(jax.jit(ndtri)(jnp.asarray(u)))
    want = special.ndtri(u)
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-300)
    assert rel.max() < 1e-14, (rel.max(), u[rel.argmax()])
    np.testing.assert_array_equal(np.sign(got), np.sign(want))


def test_standard_normal_law_and_tails():
    m = 2_000_000
    z = np.asarray(standard_normal(jax.random.key(11), (m,)))
    # Kolmogorov-Smirnov at a fixed seed; the 1e-3 critical value is 1.95/sqrt(m)
    assert stats.kstest(z, "norm").statistic < 1.95 / np.sqrt(m)
    assert abs(z.mean()) < 5 / np.sqrt(m) and abs(z.var() - 1) < 5 * np.sqrt(2 / m)
    # tail mass beyond 4 sd matches within 5 binomial standard errors
    pt = 2 * special.ndtr(-4.0)
    assert abs((np.abs(z) > 4).mean() - pt) < 5 * np.sqrt(pt / m)
    # the most extreme inputs give the float64 tails, far beyond float32's ~5.4 sd
    assert float(ndtri(jnp.float64(2.0 ** -54))) < -8.2


def test_standard_normal_is_a_pure_function_of_the_key():
    k = jax.random.key(5)
    a = standard_normal(k, (7, 3))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(standard_normal(k, (7, 3))))
    assert standard_normal(k, (4,), jnp.float32).dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(standard_normal(k, (4,), jnp.float32)),
                                  np.asarray(standard_normal(k, (4,))).astype(np.float32))


@pytest.mark.parametrize("n,b,p", [(1024, 8, 0.004), (300, 256, 1e-4), (100, 3, 0.7), (33, 5, 0.2), (64, 1, 0.01)])
@pytest.mark.parametrize("scale", [0.5, 8.0])
def test_linear_recursion_equals_log_space_scan(n, b, p, scale):
    scheme = mcacct.BMinSep(p, b, n)
    ell = jax.random.normal(jax.random.key(n + b), (n, 32)) * scale - scale / 2
    want = np.asarray(log_ratio_from_terms_t(ell, scheme, "scan"))
    got = np.asarray(log_ratio_from_terms_t(ell, scheme, "linear"))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def test_linear_recursion_flags_range_loss_and_falls_back_exactly():
    n, b, p = 64, 4, 0.1
    scheme = mcacct.BMinSep(p, b, n)
    ell = np.zeros((n, 3))
    ell[10, 1] = 900.0   # e^{900} dwarfs its block: the other terms flush to zero
    ell[30, 2] = -900.0
    ell = jnp.asarray(ell)
    _, ok = linear_first_values(ell, b, jnp.log(p), float(np.log1p(-p)))
    assert bool(ok[0]) and not bool(ok[1])
    want = np.asarray(log_ratio_from_terms_t(ell, scheme, "scan"))
    got = np.asarray(log_ratio_from_terms_t(ell, scheme, "linear"))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_poisson_grouped_products_fall_back_on_overflow():
    n, p = 40, 0.05
    ell = np.zeros((n, 2))
    ell[:8, 1] = 200.0  # the product of one group overflows float64
    ell = jnp.asarray(ell)
    _, ok = poisson_log_ratio_linear(ell, jnp.log(p), p)
    assert bool(ok[0]) and not bool(ok[1])
    scheme = mcacct.BMinSep(p, 1, n)
    want = np.sum(np.logaddexp(np.log1p(-p), np.log(p) + np.asarray(ell)), axis=0)
    np.testing.assert_allclose(np.asarray(log_ratio_from_terms_t(ell, scheme, "linear")), want, rtol=1e-12)


@pytest.mark.parametrize("n,b,p", [(6, 3, 0.4), (6, 1, 0.3), (7, 2, 0.5)])
@pytest.mark.parametrize("warm", [False, True])
def test_capped_renewal_sampler_keeps_the_pattern_law(n, b, p, warm):
    """With a cap of one gap the extension branch runs on nearly every batch; with the default cap it
    almost never does. Both give the enumerated law (5 standard errors per pattern)."""
    scheme = mcacct.BMinSep(p, b, n, warm_start=warm)
    m = 100_000
    for cap in (1, participation_cap(n, b, scheme.participation_rate)):
        x = np.asarray(participation_mask_t(jax.random.key(3), n, b, p, warm, m, cap)).T.astype(int)
        counts = np.bincount(x @ (1 << np.arange(n)), minlength=2 ** n)
        for pattern, prob in oracles.enumerate_patterns(n, b, p, warm):
            c = counts[int(np.asarray(pattern) @ (1 << np.arange(n)))]
            assert abs(c - m * prob) <= 5 * np.sqrt(m * prob * (1 - prob)) + 1e-9, (cap, pattern, c, m * prob)


def test_participation_cap_is_far_in_the_tail():
    scheme = mcacct.BMinSep(mcacct.sampling_prob_from_batch_size(1, 256, 8), 8, 1024)
    cap = participation_cap(scheme.iterations, scheme.min_sep, scheme.participation_rate)
    mean = 1024 * scheme.participation_rate
    assert cap < scheme.max_participations
    # Binomial(n, rate) upper tail at the cap (a Poisson bound is larger): negligible per batch
    assert stats.poisson.sf(cap, mean) < 1e-12


def test_poisson_product_form_serves_stepwise_and_auto_at_b1():
    """At b = 1 ``"stepwise"`` (``"auto"``'s CPU choice for wide batches) takes the grouped product form: the same
    numbers as ``"linear"`` bit for bit and the ``logaddexp`` terms within 1e-12; where a group's product
    overflows, the whole batch is the ``logaddexp`` sum."""
    n, p, lanes = 40, 0.05, 64
    scheme = mcacct.BMinSep(p, 1, n)
    ell = np.asarray(jax.random.normal(jax.random.key(5), (n, lanes), jnp.float64)) * 3.0
    wild = ell.copy()
    wild[:8, 1] = 200.0
    for terms, fell_back in ((ell, False), (wild, True)):
        want = np.sum(np.logaddexp(np.log1p(-p), np.log(p) + terms), axis=0)
        linear = np.asarray(log_ratio_from_terms_t(jnp.asarray(terms), scheme, "linear"))
        exact = np.asarray(log_ratio_from_terms_t(jnp.asarray(terms), scheme, "scan"))
        assert np.array_equal(linear, exact) == fell_back
        for recursion in ("stepwise", "auto"):
            got = np.asarray(log_ratio_from_terms_t(jnp.asarray(terms), scheme, recursion))
            np.testing.assert_allclose(got, want, rtol=1e-12)
            if jax.default_backend() == "cpu" or recursion == "stepwise":
                assert np.array_equal(got, linear), recursion
