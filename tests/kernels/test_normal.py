"""Columns of the engine's noise redrawn alone (kernels.normal.standard_normal_columns) equal the same columns of
the whole draw, bit for bit: truncated b-min-sep redraws the noise of its rare samples this way instead of keeping
every sample's noise."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mcacct.kernels.normal import (columns_supported, log_f64, standard_normal, standard_normal_columns,
                                   standard_normal_lanes)


SHAPES = [(1, 1), (7, 5), (40, 300), (3, 4096)]


@jax.jit
def _both(key, cols):
    return {shape: (standard_normal(key, shape), standard_normal_columns(key, shape, cols % shape[1]))
            for shape in SHAPES}


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), cols=st.lists(st.integers(0, 2**20), min_size=6, max_size=6))
def test_columns_equal_the_whole_draw(seed, cols):
    """One compiled program for every example: the shapes are fixed, the seed and six columns vary."""
    cols = jnp.asarray(cols, jnp.int32)
    for shape, (whole, got) in _both(jax.random.fold_in(jax.random.key(seed), 3), cols).items():
        np.testing.assert_array_equal(np.asarray(got), np.asarray(whole)[:, np.asarray(cols) % shape[1]])


@jax.jit
def _lanes(key):
    return {shape: (standard_normal(key, shape), standard_normal_lanes(key, shape)) for shape in SHAPES}


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_lanes_are_the_transposed_draw(seed):
    """The lane-major draw hashes the same counters in the transposed layout: the whole draw's transpose, bit for
    bit, in one program and in its own."""
    key = jax.random.fold_in(jax.random.key(seed), 5)
    for shape, (whole, lanes) in _lanes(key).items():
        np.testing.assert_array_equal(np.asarray(lanes), np.asarray(whole).T)
    alone = jax.jit(lambda k: standard_normal_lanes(k, (40, 300)))(key)      # jitted both: an eager draw rounds
    whole = jax.jit(lambda k: standard_normal(k, (40, 300)))(key)            # op by op (other fusions)
    np.testing.assert_array_equal(np.asarray(alone), np.asarray(whole).T)


def test_lanes_of_legacy_keys_and_other_generators():
    """A legacy threefry key draws by counter too; another generator's draw is transposed (the same values)."""
    for key in (jax.random.PRNGKey(7), jax.random.key(0, impl="rbg")):
        lanes, whole = jax.jit(lambda k: (standard_normal_lanes(k, (6, 3)), standard_normal(k, (6, 3))))(key)
        np.testing.assert_array_equal(np.asarray(lanes), np.asarray(whole).T)


def test_other_generators_are_refused():
    key = jax.random.key(0, impl="rbg")
    assert not columns_supported(key) and columns_supported(jax.random.key(0))
    with pytest.raises(ValueError, match="threefry"):
        standard_normal_columns(key, (4, 4), jnp.asarray([0]))


def _words_of_cells(cells, negative=False):
    """uint64 words whose top 53 bits are the sign bit and the 52-bit cell ``k`` (``u = (k + 1/2) 2^-53``)."""
    top = np.asarray(cells, np.uint64) | (np.uint64(1 << 52) if negative else np.uint64(0))
    return jnp.asarray(top << np.uint64(11))


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
def test_the_far_tail_only_when_needed_gives_the_same_bits():
    """``far_when_needed`` (the XLA paths) skips the far tail's rational function where no element needs it; every
    value stays bit for bit that of the plain select (the Pallas kernel's form), with and without far elements, under
    ``jit`` and ``vmap`` (where the branch runs for the whole batch if any element is far)."""
    from mcacct.kernels.normal import normal_from_bits
    rng = np.random.default_rng(5)
    far_cells = np.unique(np.concatenate([np.arange(0, 64), rng.integers(0, 126_000, 4000),  # u < e^-25: far
                                          [125_000, 126_000, 127_000, 130_000]]))           # around r = 5
    random_words = jax.random.bits(jax.random.key(9), (1 << 16,), jnp.uint64)
    mid_words = _words_of_cells(rng.integers(0, 1 << 46, 1 << 14))                      # u < 2^-7: the mid tail
    plain = jax.jit(lambda b: normal_from_bits(b))
    needed = jax.jit(lambda b: normal_from_bits(b, far_when_needed=True))
    for words in (random_words, mid_words, _words_of_cells(far_cells), _words_of_cells(far_cells, True),
                  jnp.concatenate([random_words, _words_of_cells(far_cells[:1])])):
        a, b = np.asarray(plain(words)), np.asarray(needed(words))
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64))
    batch = jnp.stack([random_words[:4096], jnp.concatenate([random_words[:4095], _words_of_cells([3])])])
    a = np.asarray(jax.vmap(plain)(batch))
    b = np.asarray(jax.jit(jax.vmap(lambda w: normal_from_bits(w, far_when_needed=True)))(batch))
    assert np.array_equal(a.view(np.uint64), b.view(np.uint64)) and np.abs(a[1, -1]) > 7.0


_LOG = jax.jit(log_f64)


def _cells(k: np.ndarray) -> np.ndarray:
    """The sampler's ``u = (k + 1/2) 2^-53`` for cells ``k`` in ``[0, 2^52)``."""
    return (k.astype(np.float64) + 0.5) * 2.0**-53


@settings(max_examples=25, deadline=None)
@given(ks=st.lists(st.integers(0, 2**52 - 1), min_size=64, max_size=64))
def test_log_is_within_one_ulp_of_the_library_log_on_the_samplers_cells(ks):
    """``log_f64`` (the sampler's vectorisable log) against NumPy's float64 log (correctly rounded in practice):
    at most 1 ulp apart on any cell, one compiled shape for every example."""
    u = _cells(np.asarray(ks, np.uint64))
    got, want = np.asarray(_LOG(jnp.asarray(u))), np.log(u)
    assert np.all(np.abs(got - want) <= np.spacing(np.abs(want))), u[np.argmax(np.abs(got - want))]


def test_log_relative_error_against_mpmath_at_the_ends_and_the_mantissa_switch():
    """Relative error at most 1.5 * 2^-53 against a 40-digit reference: the first and last cells, cells on both
    sides of a mantissa of sqrt(2) (where the reduction switches) and of powers of two, and random cells."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    rng = np.random.default_rng(0)
    special = [0.5 - 2.0**-54, 2.0**-54, 1.5 * 2.0**-53, 0.25, 0.25 + 2.0**-55, 0.25 - 2.0**-55]
    for e in (-2, -10, -30, -50):
        for m in (2**0.5, 1.0):
            c = m * 2.0**e
            special += [np.nextafter(c, 0), c, np.nextafter(c, 1)]
    u = np.concatenate([np.asarray(special), _cells(rng.integers(0, 2**52, 250, dtype=np.uint64))])
    u = np.asarray([float(x) for x in u if 0 < x <= 0.5])
    got = np.asarray(_LOG(jnp.asarray(u)))
    rel = max(abs(float((mpmath.mpf(g) - mpmath.log(mpmath.mpf(x))) / mpmath.log(mpmath.mpf(x))))
              for g, x in zip(got, u))
    assert rel <= 1.5 * 2.0**-53, rel
