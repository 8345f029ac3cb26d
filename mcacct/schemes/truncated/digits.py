r"""Exact binomial draws for any number of trials up to a bound, by the binary digits of the trials.

Binomials with one success probability ``p`` add, so for ``A = \sum_j a_j 2^j`` (``a_j \in \{0, 1\}``)

.. math::  \mathrm{Binom}(A, p) = \sum_{j:\, a_j = 1} X_j, \qquad X_j \sim \mathrm{Binom}(2^j, p)
           \text{ independent},

and each ``X_j`` is one lookup in an exact alias table of :mod:`mcacct.kernels.alias` (integer weights summing to
``2^64``, built on the host from the exact rational ``p``), decided by one 64-bit word with no lazy comparison: the
cell index is the word's top ``L_j`` bits and the comparand its other ``64 - L_j`` bits, in full. A draw therefore
costs ``J = bit_length(max_trials)`` lookups and words, whatever ``A``, and its law is within total variation
:attr:`DigitTables.tv_per_draw` (the sum of the ``J`` tables' bounds, each the table's rounding to integer weights
and the mass of the values it leaves out, :func:`mcacct.kernels.alias.alias_table`) of the exact
``Binom(A, p)``: a coupling of every ``X_j`` with its exact law fails with at most the table's bound.

This is the exact sampler behind the rare paths of the count chains (a trial count off the band of the
fast tables of :mod:`mcacct.schemes.truncated.counts`, the cold start's first rounds) and the warm start's virtual history
(:mod:`mcacct.schemes.truncated.virtual`), which before drew with ``jax.random.binomial`` (BTRS, a rejection sampler in
floating point whose law is not exact; its rounding was not charged). Plain numbers and arrays; no scheme is
imported.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.alias import alias_table, pmf_weights, u64

__all__ = ["DigitTables", "digit_tables", "digits_draw", "MAX_DIGIT_CELLS"]

#: refuse tables of more cells than this in all (8 MiB of uint64 entries)
MAX_DIGIT_CELLS = 1 << 20


class DigitTables(NamedTuple):
    """Alias tables of ``Binom(2^j, p)``, ``j < bits``, laid end to end: table ``j`` has ``2^cell_bits[j]`` cells
    starting at ``base[j]`` of ``packed`` (entries as :func:`mcacct.kernels.alias.alias_table` packs them) and
    smallest value ``offset[j]``; ``tv_per_draw`` bounds one draw's total variation (all ``bits`` tables)."""

    packed: np.ndarray
    base: np.ndarray
    cell_bits: np.ndarray
    offset: np.ndarray
    bits: int
    tv_per_draw: float


def _rational(p) -> tuple[int, int]:
    """``(num, den)`` of ``p``: a :class:`fractions.Fraction` as it is, a float by its exact value."""
    f = p if isinstance(p, Fraction) else Fraction(float(p))
    if not 0 <= f <= 1:
        raise ValueError(f"the success probability must be in [0, 1]; got {p}")
    return f.numerator, f.denominator


@functools.lru_cache(maxsize=64)
def digit_tables(max_trials: int, p) -> DigitTables:
    """The tables drawing ``Binom(A, p)`` exactly (up to ``tv_per_draw``) for every ``A`` in ``[0, max_trials]``;
    ``p`` a float (its exact value) or a :class:`fractions.Fraction`. Cached per process.

    Parameters
    ----------
    max_trials : int
        The largest ``A``, ``>= 0``; ``bits = max(1, max_trials.bit_length())`` tables are built.
    p : float or fractions.Fraction
        The success probability, in ``[0, 1]``.

    Returns
    -------
    DigitTables
        ``tv_per_draw`` is the sum of the ``bits`` tables' bounds.

    Raises
    ------
    ValueError
        If ``p`` is outside ``[0, 1]``, ``max_trials < 0``, or the tables would exceed :data:`MAX_DIGIT_CELLS`.
    """
    n = int(max_trials)
    if n < 0:
        raise ValueError(f"max_trials must be >= 0; got {max_trials}")
    num, den = _rational(p)
    bits = max(1, n.bit_length())
    parts, tv = [], 0.0
    for j in range(bits):
        k_lo, u, tail_rel = pmf_weights(1 << j, num, den)
        cell_bits = max(1, (len(u) - 1).bit_length())
        offset, packed, tv_j = alias_table(k_lo, u, tail_rel, cell_bits, f"Binom(2^{j}, {num}/{den})")
        parts.append((offset, packed, cell_bits))
        tv += tv_j
    sizes = [len(packed) for _, packed, _ in parts]
    if sum(sizes) > MAX_DIGIT_CELLS:
        raise ValueError(f"exact binomial tables for up to {n} trials at p = {num}/{den} need {sum(sizes)} cells, "
                         f"more than {MAX_DIGIT_CELLS}")
    base = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
    return DigitTables(np.concatenate([packed for _, packed, _ in parts]), base,
                       np.asarray([c for _, _, c in parts], np.int32), np.asarray([o for o, _, _ in parts], np.int32),
                       bits, tv)


def digits_draw(key: jax.Array, trials: jax.Array, tables: DigitTables) -> jax.Array:
    r"""``Binom(trials, p)`` for every entry of ``trials`` (integers in ``[0, 2^bits)``, any shape), int32, from
    ``tables.bits`` 64-bit words per entry drawn from ``key`` (module docstring).

    Parameters
    ----------
    key : jax.Array
        The key of the words.
    trials : array_like
        Trial counts ``A``, in ``[0, 2^bits)``.
    tables : DigitTables
        From :func:`digit_tables`.

    Returns
    -------
    jax.Array
        int32 of ``trials``' shape: :math:`\sum_{j:\ a_j = 1} X_j`, :math:`X_j \sim \mathrm{Binom}(2^j, p)`
        from table ``j``, :math:`a_j` the binary digits of ``A``.
    """
    shape = jnp.shape(trials)
    t = jnp.asarray(trials).astype(jnp.int32)
    u = jax.random.bits(key, (tables.bits,) + shape, jnp.uint64)
    expand = (slice(None),) + (None,) * len(shape)
    L = jnp.asarray(tables.cell_bits.astype(np.uint64))[expand]
    cell = u >> (u64(64) - L)
    low = u & ((u64(1) << (u64(64) - L)) - u64(1))
    entry = jnp.asarray(tables.packed)[jnp.asarray(tables.base)[expand] + cell.astype(jnp.int32)]
    thr, alias = entry >> L, entry & ((u64(1) << L) - u64(1))
    value = jnp.where(low < thr, cell, alias).astype(jnp.int32) + jnp.asarray(tables.offset)[expand]
    digit = (t[None] >> jnp.arange(tables.bits, dtype=jnp.int32)[expand]) & 1
    return jnp.sum(jnp.where(digit == 1, value, 0), axis=0).astype(jnp.int32)
