"""mcacct.kernels.threefry: its block function and its counter words equal JAX's threefry, bit for bit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.extend.random import threefry_2x32

from mcacct.kernels import threefry
from mcacct.kernels.threefry import counter_bits, counters_supported, jax_block_words, key_words, threefry2x32

U32 = st.integers(0, 2**32 - 1)


@settings(max_examples=40, deadline=None)
@given(U32, U32, st.lists(st.tuples(U32, U32), min_size=1, max_size=8))
def test_threefry_equals_jax(k0, k1, counters):
    x0 = jnp.asarray([c[0] for c in counters], jnp.uint32)
    x1 = jnp.asarray([c[1] for c in counters], jnp.uint32)
    want = threefry_2x32(jnp.asarray([k0, k1], jnp.uint32), jnp.concatenate([x0, x1]))
    got = threefry2x32(k0, k1, x0, x1)
    np.testing.assert_array_equal(np.concatenate([np.asarray(g) for g in got]), np.asarray(want))


@pytest.mark.parametrize("shape", [(1,), (7, 5), (3, 64)])
def test_counter_bits_is_jax_random_bits(shape):
    key = jax.random.key(11)
    want = jax.random.bits(key, shape, jnp.uint64)
    got = counter_bits(jax.random.key_data(key), jnp.arange(int(np.prod(shape))).reshape(shape))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# one jitted function for every example: a program per shape (5), not per example
_counter_words = jax.jit(lambda k, index: counter_bits(key_words(k), index))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), fold=st.integers(0, 2**31 - 1),
       shape=st.sampled_from([(1,), (5,), (3, 7), (2, 3, 4), (129, 33)]))
def test_counter_words_equal_jax_words(seed, fold, shape):
    """Folded typed keys, several ranks; the word of every position, under jit as the kernels run it."""
    key = jax.random.fold_in(jax.random.key(seed), fold)
    index = jnp.arange(int(np.prod(shape)), dtype=jnp.uint64).reshape(shape)
    got = _counter_words(key, index)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.random.bits(key, shape, jnp.uint64)))


def test_vmapped_and_legacy_keys():
    keys = jax.random.split(jax.random.key(3), 6)
    index = jnp.arange(36, dtype=jnp.uint64).reshape(4, 9)
    got = jax.vmap(lambda k: counter_bits(key_words(k), index))(keys)
    want = jax.vmap(lambda k: jax.random.bits(k, (4, 9), jnp.uint64))(keys)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    legacy = jax.random.PRNGKey(5)
    assert counters_supported(legacy)
    np.testing.assert_array_equal(np.asarray(counter_bits(key_words(legacy), index)),
                                  np.asarray(jax.random.bits(legacy, (4, 9), jnp.uint64)))


def test_other_generators_are_not_counter_based_here():
    assert not counters_supported(jax.random.key(0, impl="rbg"))
    assert not counters_supported(jax.random.key(0, impl="unsafe_rbg"))
    assert counters_supported(jax.random.key(0))


@pytest.mark.parametrize("primitive", [True, False], ids=["jax-primitive", "plain-rounds"])
def test_jax_block_words_are_the_counter_words(monkeypatch, primitive):
    """JAX's block function by its primitive, or the rounds written out where a JAX lacks it: the same words as
    :func:`counter_bits` of the counters ``hi 2^32 + lo``."""
    if not primitive:
        monkeypatch.setattr(threefry, "_JAX_THREEFRY", None)
    rng = np.random.default_rng(4)
    hi, lo = (rng.integers(0, 2**32, (5, 7), dtype=np.uint64) for _ in range(2))
    key = jax.random.fold_in(jax.random.key(21), 8)
    got = jax_block_words(key_words(key), hi.astype(np.uint32), lo.astype(np.uint32))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(counter_bits(key_words(key), (hi << 32) | lo)))
