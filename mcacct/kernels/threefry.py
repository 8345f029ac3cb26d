r"""JAX's threefry generator by counter: its block function and the word of any position of an array.

JAX's default generator is Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror & Shaw 2011, "Parallel random
numbers: as easy as 1, 2, 3", SC'11) in the *partitionable* layout (``jax_threefry_partitionable``, the default
since JAX 0.5): the 64-bit word at row-major position ``c`` of ``jax.random.bits(key, shape, uint64)`` is
:math:`2^{32} h + g`, where ``(h, g)`` is the block function under the key's two words of the counter pair
``(c >> 32, c mod 2^32)``. It depends on ``key`` and ``c`` alone, so any word of a draw can be computed without
the others: the fused kernel draws its noise this way inside a Pallas kernel (:mod:`mcacct.kernels.fused`), and
the truncated scheme regenerates the noise columns of its rare samples
(:func:`mcacct.kernels.normal.standard_normal_columns`). Both thus draw exactly JAX's words
(``tests/kernels/test_threefry.py`` checks the block function and the words bit for bit), and no soundness
argument changes. Plain uint32 operations, written out round by round.

Not used for whole arrays. On CPU JAX lowers the block function with rolled loops (a ``while`` over the five
groups of rounds); the unrolled form here is faster for a whole array alone but not inside the loss kernels
(benchmarks/results/design_choices.md), so ``standard_normal`` keeps ``jax.random.bits``, and a whole array drawn in
another layout (:func:`mcacct.kernels.normal.standard_normal_lanes`) hashes its counters with JAX's own block
function (:func:`jax_block_words`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["threefry2x32", "counter_bits", "counter_word", "jax_block_words", "key_words", "counters_supported",
           "default_counters_supported"]

try:    # JAX's block function as a primitive (the public extension API)
    from jax.extend.random import threefry2x32_p as _JAX_THREEFRY
except ImportError:  # pragma: no cover - an older or trimmed JAX: the plain form below gives the same words
    _JAX_THREEFRY = None

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = np.uint32(0x1BD11BDA)


def _rotl(x: jax.Array, r: int) -> jax.Array:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0: jax.Array, x1: jax.Array) -> tuple[jax.Array, jax.Array]:
    r"""Threefry-2x32, 20 rounds, of the uint32 counters ``(x0, x1)`` under the key ``(k0, k1)``.

    Five groups of four rounds :math:`x_0 \leftarrow x_0 + x_1,\ x_1 \leftarrow \mathrm{rotl}(x_1, r) \oplus
    x_0` (rotations 13, 15, 26, 6 and 17, 29, 16, 24 alternately), each followed by a key injection from
    :math:`(k_0, k_1, k_0 \oplus k_1 \oplus \mathtt{0x1BD11BDA})` and the group number. Plain uint32
    operations, so it also runs inside a Pallas kernel (:mod:`mcacct.kernels.fused`).

    Parameters
    ----------
    k0, k1 : int or jax.Array
        The key's two uint32 words.
    x0, x1 : jax.Array
        uint32 counters, broadcast against each other.

    Returns
    -------
    tuple of jax.Array
        The two uint32 output words.
    """
    k0 = jnp.asarray(k0, jnp.uint32)
    k1 = jnp.asarray(k1, jnp.uint32)
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def counter_bits(key_data: jax.Array, flat_index: jax.Array) -> jax.Array:
    """The uint64 word of ``jax.random.bits(key, shape, uint64)`` at ``flat_index`` (partitionable layout).

    ``hi << 32 | lo`` with ``(hi, lo)`` the block of ``(index >> 32, index)``.

    Parameters
    ----------
    key_data : jax.Array
        The key's uint32 data, shape ``(2,)``.
    flat_index : jax.Array
        Row-major positions in the drawn array, any shape (taken as uint64).

    Returns
    -------
    jax.Array
        uint64 words, the shape of ``flat_index``.
    """
    return counter_word(key_data[0], key_data[1], flat_index)


def counter_word(k0, k1, flat_index: jax.Array) -> jax.Array:
    """:func:`counter_bits` with the key words as two scalars.

    A Pallas kernel loads them from a ref: a slice of a value does not lower for Triton.

    Parameters
    ----------
    k0, k1 : int or jax.Array
        The key's two uint32 words.
    flat_index : jax.Array
        Row-major positions in the drawn array, any shape (taken as uint64).

    Returns
    -------
    jax.Array
        uint64 words, the shape of ``flat_index``.
    """
    f = jnp.asarray(flat_index, jnp.uint64)
    hi, lo = threefry2x32(k0, k1, (f >> np.uint64(32)).astype(jnp.uint32),
                          (f & np.uint64(0xFFFFFFFF)).astype(jnp.uint32))
    return (hi.astype(jnp.uint64) << np.uint64(32)) | lo.astype(jnp.uint64)


def jax_block_words(key_data: jax.Array, hi: jax.Array, lo: jax.Array) -> jax.Array:
    """uint64 words ``hi' << 32 | lo'`` of the block function of the uint32 counter pairs ``(hi, lo)``, hashed by
    JAX's own primitive (``jax.extend.random.threefry2x32_p``, lowered as ``jax.random.bits`` lowers it), or by
    :func:`threefry2x32` where this JAX does not export it: the same words either way.

    Parameters
    ----------
    key_data : jax.Array
        The key's uint32 data, shape ``(2,)``.
    hi, lo : jax.Array
        uint32 counters, one shape.

    Returns
    -------
    jax.Array
        uint64 words, the shape of ``lo``.
    """
    hi, lo = jnp.asarray(hi, jnp.uint32), jnp.asarray(lo, jnp.uint32)
    if _JAX_THREEFRY is not None:
        x0, x1 = _JAX_THREEFRY.bind(key_data[0], key_data[1], hi, lo)
    else:
        x0, x1 = threefry2x32(key_data[0], key_data[1], hi, lo)
    return (x0.astype(jnp.uint64) << np.uint64(32)) | x1.astype(jnp.uint64)


def _is_typed(key) -> bool:
    dtype = getattr(key, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def default_counters_supported() -> bool:
    """Whether JAX's default generator draws threefry words in the partitionable layout (:func:`counter_bits`).

    Returns
    -------
    bool
        True when the default PRNG is ``threefry2x32`` and ``jax_threefry_partitionable`` is on.
    """
    return str(jax.config.jax_default_prng_impl) == "threefry2x32" and bool(jax.config.jax_threefry_partitionable)


def counters_supported(key: jax.Array) -> bool:
    """Whether ``key`` draws JAX's threefry words in the partitionable layout, so that :func:`counter_bits` gives them.

    A typed threefry key, or a legacy ``(2,)`` uint32 key under the threefry default.

    Parameters
    ----------
    key : jax.Array
        A typed or legacy JAX key.

    Returns
    -------
    bool
    """
    if _is_typed(key):
        return bool(jax.config.jax_threefry_partitionable) and str(jax.random.key_impl(key)) == "threefry2x32"
    return default_counters_supported() and jnp.shape(key) == (2,) and jnp.asarray(key).dtype == jnp.uint32


def key_words(key: jax.Array) -> jax.Array:
    """The ``(2,)`` uint32 words of a threefry key, typed or legacy.

    Parameters
    ----------
    key : jax.Array
        A typed threefry key or a legacy ``(2,)`` uint32 key.

    Returns
    -------
    jax.Array
        uint32, shape ``(2,)``.
    """
    return jax.random.key_data(key) if _is_typed(key) else jnp.asarray(key, jnp.uint32)
