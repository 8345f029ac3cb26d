"""Columns of the engine's noise redrawn alone (kernels.normal.standard_normal_columns) equal the same columns of
the whole draw, bit for bit: truncated b-min-sep redraws the noise of its rare samples this way instead of keeping
every sample's noise."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mcacct.kernels.normal import columns_supported, standard_normal, standard_normal_columns


SHAPES = [(1, 1), (7, 5), (40, 300), (3, 4096)]


@jax.jit
def _both(key, cols):
    return {shape: (standard_normal(key, shape), standard_normal_columns(key, shape, cols % shape[1]))
            for shape in SHAPES}


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), cols=st.lists(st.integers(0, 2**20), min_size=6, max_size=6))
def test_columns_equal_the_whole_draw(seed, cols):
    """One compiled program for every example: the shapes are fixed, the seed and six columns vary."""
    cols = jnp.asarray(cols, jnp.int32)
    for shape, (whole, got) in _both(jax.random.fold_in(jax.random.key(seed), 3), cols).items():
        np.testing.assert_array_equal(np.asarray(got), np.asarray(whole)[:, np.asarray(cols) % shape[1]])


def test_other_generators_are_refused():
    key = jax.random.key(0, impl="rbg")
    assert not columns_supported(key) and columns_supported(jax.random.key(0))
    with pytest.raises(ValueError, match="threefry"):
        standard_normal_columns(key, (4, 4), jnp.asarray([0]))
