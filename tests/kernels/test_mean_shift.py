"""``mean_shift_amplitudes`` (``C a`` in O(n) for amplitudes at least ``len(c)`` apart) against the dense product,
and its refusal of amplitudes that are closer: such a row comes back as ``nan``, so its losses are non-finite and
the engine refuses them (a toy scheme that relied on it silently got a delta 2.5x too low, #40)."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mcacct
from mcacct.kernels.output import gaussian_output
from mcacct.kernels.mean_shift import mean_shift_amplitudes


def dense(a: np.ndarray, c: tuple[float, ...]) -> np.ndarray:
    n = a.shape[-1]
    C = np.zeros((n, n))
    for j in range(n):
        for t in range(max(0, j - len(c) + 1), j + 1):
            C[j, t] = c[j - t]
    return a @ C.T


@settings(max_examples=30, deadline=None)  # a few lengths: each compiles its own shapes
@given(n=st.sampled_from([1, 5, 16, 40]), k=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_equals_the_dense_product_or_refuses_the_row(n, k, seed):
    rng = np.random.default_rng(seed)
    c = tuple(rng.uniform(-1, 1, k).round(3))
    a = np.where(rng.random((4, n)) < 0.3, rng.normal(size=(4, n)), 0.0)
    a[0] = 0.0
    a[0, :: max(k, 1)] = 1.0                                          # exactly k apart: allowed
    got = np.asarray(mean_shift_amplitudes(jnp.asarray(a), c))
    for row, out in zip(a, got):
        nz = np.flatnonzero(row)
        if k == 1 or np.all(np.diff(nz) >= k):
            np.testing.assert_allclose(out, dense(row, c), rtol=1e-12, atol=1e-12)
        else:
            assert np.all(np.isnan(out))


@dataclasses.dataclass(frozen=True)
class EveryRound(mcacct.Scheme):
    """Misuse on purpose: takes part in every round but builds its mean with ``mean_shift_amplitudes``."""

    iterations: int

    def check_strategy(self, strategy):
        pass

    def sensitivity_bound(self, strategy):
        return math.sqrt(self.iterations) * sum(abs(v) for v in strategy.c_col)

    def draw(self, key, strategy, sigma, num_samples, direction, dtype):
        shape = (num_samples, self.iterations)
        return mcacct.Draws(gaussian_output(key, shape, sigma, dtype, direction == "remove",
                                            lambda _: mean_shift_amplitudes(jnp.ones(shape, dtype), strategy.c_col)))

    def loss_rows(self, y, strategy, sigma, aux, direction, dot_method, recursion):
        return jnp.sum(y, axis=-1) / sigma**2

    def output_coordinate_bound(self, strategy):
        return self.sensitivity_bound(strategy)

    def participation_boundaries(self):
        return 0

    def draw_law_tv(self):
        return 0.0

    def loss_error_params(self):
        return mcacct.LossErrorParams(1, 1.0, self.iterations, 1.0)

    def summary(self):
        return mcacct.SchemeSummary(None, None, 1.0, None)


def test_a_scheme_that_misuses_it_is_refused_by_the_engine():
    pb = mcacct.Problem(EveryRound(4), mcacct.BandedToeplitz((1.0, 0.5)))
    with pytest.raises(FloatingPointError, match="not finite"):
        mcacct.estimate(pb, 1.0, jax.random.key(0), 256, (1.0,), chunk_size=256)
