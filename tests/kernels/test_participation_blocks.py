"""C x from the per-block participation equals C x from the participation mask, value for value, for the same key
(hypothesis over n, b, p, c, cold/warm start, and the cap that triggers the extra gap draws)."""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mcacct.kernels.participation import participation_blocks_t, participation_mask_t
from mcacct.kernels.sliding import mean_shift_from_blocks_t, mean_shift_t


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
