"""The stepwise recursion (kernels/stepwise.py) against the exact log-space scan: random configurations within the
float64 bound of the recursion (hypothesis), p = 1, the range guard and its fallback, and what "auto" picks."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mcacct.kernels.recursion import auto_recursion, recursion_log_ratio_t, scan_first_values
from mcacct.kernels.stepwise import STEPWISE_MIN_LANES, stepwise_first_values
from mcacct.core.precision import x64_scope

U = 2.0**-53


def _bound(ell: np.ndarray, b: int, p: float) -> float:
    """The recursion part of the engine's loss-error bound (engine/systematic.py) for these terms, both recursions
    (scan and stepwise) counted."""
    n = ell.shape[0]
    lam = float(np.max(np.abs(ell)))
    log_p = abs(math.log(p))
    log_q = abs(math.log1p(-p)) if p < 1.0 else 0.0
    xi = lam + log_p + b * log_q + 1.0
    l_max = n * lam + n * log_q + b * log_p + 1.0
    return 2.0 * U * (n * (8.0 + 4.0 * xi) + 4.0 * n * l_max)


@functools.partial(jax.jit, static_argnums=(1, 2, 3))  # one program per example (eager: one per operation)
def _stepwise_and_scan(ell, b, p, warm):
    return (recursion_log_ratio_t(ell, b, p, warm, "stepwise"), recursion_log_ratio_t(ell, b, p, warm, "scan"))


@settings(max_examples=10, deadline=None)  # each example compiles its shapes
@given(n=st.integers(1, 120), b=st.integers(1, 24), p=st.floats(1e-4, 1.0), warm=st.booleans(),
       lanes=st.sampled_from([1, 3, 64]), scale=st.floats(0.1, 6.0), shift=st.floats(-4.0, 2.0),
       seed=st.integers(0, 2**16))
def test_stepwise_equals_scan_within_the_bound(n, b, p, warm, lanes, scale, shift, seed):
    with x64_scope():
        ell = np.asarray(jax.random.normal(jax.random.key(seed), (n, lanes), jnp.float64)) * scale + shift
        got, want = (np.asarray(v) for v in _stepwise_and_scan(jnp.asarray(ell), b, p, warm))
        assert np.all(np.isfinite(got))
        assert np.max(np.abs(got - want)) <= _bound(ell, b, p)


def test_production_shape_matches_scan():
    """n = 7200, b = 256, the p of the production case: within 1e-12 nats of the scan (4e-13 measured)."""
    with x64_scope():
        ell = jax.random.normal(jax.random.key(1), (7200, 64), jnp.float64) * 1.5 - 0.5
        p = 1.2548654029129254e-4
        got = recursion_log_ratio_t(ell, 256, p, True, "stepwise")
        want = recursion_log_ratio_t(ell, 256, p, True, "scan")
        assert float(jnp.max(jnp.abs(got - want))) <= 1e-12


def test_p_one_is_exact_products():
    """``p = 1`` (``log q = -inf``): ``f_i = e^{ell_i} f_{i+b}``, the same values as the log-space scan."""
    with x64_scope():
        ell = jax.random.normal(jax.random.key(2), (50, 8), jnp.float64)
        first, ok = stepwise_first_values(ell, 3, 0.0, -math.inf)
        want = scan_first_values(ell, 3, 0.0, -math.inf)
        assert bool(jnp.all(ok))
        np.testing.assert_allclose(np.asarray(first), np.asarray(want), rtol=0, atol=1e-12)


def test_out_of_range_samples_fall_back_to_the_scan():
    """Terms of +-800 overflow a linear-space block: ``ok`` is false for that sample, and the whole batch is the
    scan's, bit for bit; a batch in range is ``ok``."""
    with x64_scope():
        calm = jax.random.normal(jax.random.key(3), (40, 4), jnp.float64)
        _, ok = stepwise_first_values(calm, 4, math.log(0.3), math.log1p(-0.3))
        assert bool(jnp.all(ok))
        wild = calm.at[5:10, 1].set(800.0).at[20:30, 1].set(-800.0)
        _, ok = stepwise_first_values(wild, 4, math.log(0.3), math.log1p(-0.3))
        assert not bool(ok[1]) and bool(ok[0])
        got = recursion_log_ratio_t(wild, 4, 0.3, True, "stepwise")
        want = recursion_log_ratio_t(wild, 4, 0.3, True, "scan")
        assert np.array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("lanes, want", [(STEPWISE_MIN_LANES, "stepwise"), (STEPWISE_MIN_LANES // 2, "linear")])
def test_auto_picks_stepwise_for_wide_batches_on_cpu(lanes, want):
    expected = want if jax.default_backend() == "cpu" else "blocked"
    assert auto_recursion((lanes,)) == expected
