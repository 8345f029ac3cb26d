"""Banded Toeplitz strategies: the error against dense linear algebra and closed forms, the gradient against
finite differences, and the optimiser against jax-privacy's (test-only oracle) on the same objective."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcacct.strategies import (inverse_times_ones, optimize_banded_toeplitz, per_query_error, strategy_error,
                               strategy_objective)


def _dense_c(c, n):
    m = np.zeros((n, n))
    for d, v in enumerate(c):
        m += v * np.eye(n, k=-d)
    return m


@pytest.mark.parametrize("n,k", [(7, 3), (300, 5), (200, 70), (64, 64)])
def test_inverse_times_ones_is_dense_solve(n, k):
    c = np.random.default_rng(k).uniform(0.1, 1.0, k)
    c[0] = 1.5
    want = np.linalg.solve(_dense_c(c, n), np.ones(n))
    np.testing.assert_allclose(np.asarray(inverse_times_ones(jnp.asarray(c), n)), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n", [1, 10, 1000])
def test_one_band_is_the_prefix_matrix(n):
    assert strategy_error((1.0,), n) == pytest.approx((n + 1) / 2, rel=1e-13)
    assert strategy_error((3.0,), n, "max") == pytest.approx(n, rel=1e-13)  # scale invariant
    assert optimize_banded_toeplitz(n, 1).c_col == (1.0,)


def test_error_is_the_frobenius_norm():
    n, c = 50, np.array([1.0, 0.6, 0.3, 0.1])
    b = np.tril(np.ones((n, n))) @ np.linalg.inv(_dense_c(c, n))
    rows = np.sum(b ** 2, axis=1)
    np.testing.assert_allclose(np.asarray(per_query_error(jnp.asarray(c), n)), rows, rtol=1e-10)
    assert strategy_error(c, n) == pytest.approx(np.sum(b ** 2) / n * np.sum(c ** 2), rel=1e-10)
    assert strategy_error(c, n, "max") == pytest.approx(rows.max() * np.sum(c ** 2), rel=1e-10)


@pytest.mark.parametrize("objective", ["mean", "max"])
def test_gradient_matches_finite_differences(objective):
    n, c = 120, jnp.asarray([1.0, 0.5, 0.35, 0.2, 0.1])
    g = np.asarray(jax.grad(strategy_objective)(c, n, objective))
    h = 1e-6
    fd = [(float(strategy_objective(c.at[i].add(h), n, objective))
           - float(strategy_objective(c.at[i].add(-h), n, objective))) / (2 * h) for i in range(c.shape[0])]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n,bands,objective", [(256, 2, "mean"), (256, 8, "mean"), (256, 32, "mean"),
                                               (1024, 16, "mean"), (256, 8, "max")])
def test_at_least_as_good_as_jax_privacy(n, bands, objective):
    toeplitz = pytest.importorskip("jax_privacy.matrix_factorization.toeplitz")
    ours = optimize_banded_toeplitz(n, bands, objective)
    theirs = np.asarray(toeplitz.optimize_banded_toeplitz(n, bands, reduction_fn=jnp.mean if objective == "mean"
                                                          else jnp.max))
    ref = strategy_error(theirs, n, objective)
    assert ours.error <= ref * (1 + 1e-4)
    assert ours.error == pytest.approx(strategy_error(ours.c_col, n, objective), rel=1e-12)
    assert np.linalg.norm(ours.c_col) == pytest.approx(1.0, rel=1e-12)
    assert min(ours.c_col) >= 0.0


@pytest.mark.parametrize("kwargs,match", [({"iterations": 0, "bands": 1}, "iterations"),
                                          ({"iterations": 10, "bands": 11}, "bands"),
                                          ({"iterations": 10, "bands": 2, "objective": "median"}, "objective")])
def test_bad_input_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        optimize_banded_toeplitz(**kwargs)


def test_error_of_bad_c_col_is_refused():
    with pytest.raises(ValueError, match="c_col"):
        strategy_error((0.0, 1.0), 10)
