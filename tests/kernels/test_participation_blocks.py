"""C x from the per-block participation equals C x from the participation mask, value for value, for the same key
(hypothesis over n, b, p, c, cold/warm start, and the cap that triggers the extra gap draws)."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mcacct.kernels.participation import participation_blocks_t, participation_mask_t
from mcacct.kernels.mean_shift import (mean_shift_from_blocks_t, mean_shift_t, mean_sliding_from_blocks_t,
                                       mean_window_table)
from mcacct.kernels.sliding import sliding_dot_t


@settings(max_examples=12, deadline=None)  # each example compiles its own shapes
@given(st.integers(1, 90), st.integers(1, 12), st.floats(0.05, 1.0), st.booleans(), st.integers(1, 4),
       st.integers(0, 2**31 - 1), st.data())
def test_blocks_mean_equals_mask_mean(n, b, p, warm, cap, seed, data):
    k = data.draw(st.integers(1, b))
    c = tuple(data.draw(st.lists(st.floats(0.1, 2.0), min_size=k, max_size=k)))
    key = jax.random.key(seed)

    @jax.jit  # one compilation per example instead of one per operation and shape
    def both(key):
        want = mean_shift_t(participation_mask_t(key, n, b, p, warm, 6, cap), c, jnp.float64)
        got = mean_shift_from_blocks_t(participation_blocks_t(key, n, b, p, warm, 6, cap), n, b, c, jnp.float64)
        return got, want

    got, want = both(key)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@settings(max_examples=16, deadline=None)
@given(st.integers(1, 90), st.integers(1, 12), st.floats(0.05, 1.0), st.booleans(), st.integers(0, 2**31 - 1),
       st.data())
def test_mean_sliding_sums_from_the_table_equal_the_summed_windows(n, b, p, warm, seed, data):
    """``mean_sliding_from_blocks_t`` (three table reads per value) equals the sliding sums of the mean
    (``sliding_dot_t`` of ``mean_shift_from_blocks_t``) within the rounding of a k-term sum, signed and constant ``c``
    included, the windows cut at row ``n`` included."""
    k = data.draw(st.integers(1, b))
    c = tuple(data.draw(st.lists(st.floats(-2.0, 2.0), min_size=k, max_size=k)))
    if data.draw(st.booleans()):  # a constant c: the entries are computed, not read
        c = (c[0],) * k

    @jax.jit
    def both(key):
        tau = participation_blocks_t(key, n, b, p, warm, 6, 4)
        return (mean_sliding_from_blocks_t(tau, n, b, c, jnp.float64),
                sliding_dot_t(mean_shift_from_blocks_t(tau, n, b, c, jnp.float64), c, "direct"))

    got, want = both(jax.random.key(seed))
    scale = float(np.sum(np.abs(c)) * np.max(np.abs(c)))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=(2 * k + 4) * 2.0**-53 * scale + 1e-300)


def test_mean_window_table_is_the_brute_force_sum():
    """Every entry of ``mean_window_table`` against the window sum of one participation's mean, formed directly
    in exact rational arithmetic (``c`` of 5 taps, every offset and every cut), to within 2 ulp."""
    from fractions import Fraction
    c = (0.7, -0.3, 1.1, 0.25, -0.9)
    k = len(c)
    table = mean_window_table(c)
    assert table.shape == (k, 2 * k - 1)
    for length in range(1, k + 1):              # rows left in the window (cut at n)
        for delta in range(1 - k, k):           # participation at i + delta
            mean = {delta + j: Fraction(c[j]) for j in range(k)}   # rows relative to i
            exact = sum((Fraction(c[d]) * mean.get(d, 0) for d in range(length)), Fraction(0))
            got, want = float(table[length - 1, k - 1 + delta]), float(exact)
            assert abs(got - want) <= 2 * np.spacing(abs(want)), (length, delta, got, want)
