r"""Exact alias tables of binomial laws with 64-bit integer thresholds (Walker 1977; Vose 1991), and the lazy
alias decision of a 64-bit word.

A table is built on the host in integer arithmetic from the exact rational ``p`` (the float's value): the
unnormalised pmf by the ratio recurrence in fixed point with :data:`FRAC` fraction bits, normalised to integer
weights that sum to exactly ``2^64``; a draw then picks value ``v`` with probability ``w_v / 2^64`` exactly. The
total-variation bound of a table to the exact binomial is derived in :mod:`mcacct.schemes.truncated.counts`, which builds
the tables of truncated b-min-sep's counts from these pieces. Plain numbers and arrays; no scheme is imported.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["FRAC", "KEEP", "BAND_SDS", "MAX_BINS", "bin_tables", "pmf_weights", "binomial_alias", "alias_table", "u64",
           "alias_pick", "alias_draw", "rational_alias"]

#: fixed-point fraction bits of the unnormalised pmf
FRAC = 320
#: values down to ``2^-KEEP`` of the mode's are kept
KEEP = 100
#: half-width of a band of trials covered by tables, in standard deviations of the trials' stationary law
BAND_SDS = 7.0
#: at most this many bins of tables per band (:func:`bin_tables`); at most 8192 cells per table, 2^20 entries
MAX_BINS = 512
_MAX_CELL_BITS = 13
_MAX_ENTRIES = 1 << 20


def pmf_weights(trials: int, num: int, den: int, max_values: int | None = None) -> tuple[int, list[int], float]:
    """Unnormalised Binom(trials, num/den) pmf in fixed point around the mode: ``(k_lo, u, tail_rel)``, with
    ``u[j]`` the value at ``k_lo + j`` in units of ``2^-FRAC`` of the mode's and ``tail_rel`` a bound on the
    mass left out relative to the mode's value."""
    one = 1 << FRAC
    if num == 0 or trials == 0:
        return 0, [one], 0.0
    if num == den:
        return trials, [one], 0.0
    qn = den - num
    mode = min(trials, (trials + 1) * num // den)
    cut = one >> KEEP
    up, k, u = [], mode, one
    tail_rel = 0.0
    while k < trials:
        nxt = u * (trials - k) * num // ((k + 1) * qn)
        if nxt < cut or (max_values is not None and len(up) + 1 >= max_values):
            rho = (trials - k) * num / ((k + 1) * qn)  # ratio at the first value left out: < 1, decreasing
            tail_rel += (nxt + len(up) + 2) / one / max(1e-300, 1.0 - rho) if rho < 1.0 else math.inf
            break
        up.append(nxt)
        u, k = nxt, k + 1
    down, k, u = [], mode, one
    while k > 0 and max_values is None:
        nxt = u * k * qn // ((trials - k + 1) * num)
        if nxt < cut:
            rho = k * qn / ((trials - k + 1) * num)
            tail_rel += (nxt + len(down) + 2) / one / max(1e-300, 1.0 - rho) if rho < 1.0 else math.inf
            break
        down.append(nxt)
        u, k = nxt, k - 1
    return mode - len(down), down[::-1] + [one] + up, tail_rel


def binomial_alias(trials: int, sampling_prob: float, cell_bits: int | None = None,
                   max_values: int | None = None) -> tuple[int, np.ndarray, float]:
    """Alias table of ``Binom(trials, p)`` (``p`` the float's exact value) with ``2^cell_bits`` cells (``None``:
    the fewest that hold every value kept).

    Returns ``(offset, packed, tv)``: value ``offset + j`` sits in cell ``j``; ``packed[j] = (t_j << L) | a_j``
    (``uint64``) with threshold ``t_j < 2^(64-L)`` and alias ``a_j``: a draw picks cell ``j`` uniformly and keeps
    ``j`` if a uniform ``(64-L)``-bit integer is below ``t_j``, else takes ``a_j``; so value ``offset + v`` has
    probability ``w_v / 2^64`` with integer weights ``w`` summing to ``2^64``. ``tv`` bounds the total variation
    to the exact law (module docstring). ``max_values`` keeps only the values from the mode up (used for the
    remainder, whose mode is 0)."""
    num, den = float(sampling_prob).as_integer_ratio()
    k_lo, u, tail_rel = pmf_weights(int(trials), num, den, max_values)
    if cell_bits is None:
        cell_bits = max(1, (len(u) - 1).bit_length())
    return alias_table(k_lo, u, tail_rel, cell_bits, f"Binom({trials}, {sampling_prob})")


def alias_table(k_lo: int, u: list[int], tail_rel: float, cell_bits: int, what: str) -> tuple[int, np.ndarray, float]:
    cells = 1 << cell_bits
    if len(u) > cells:
        raise ValueError(f"{what} needs {len(u)} cells; the table has {cells}")
    total = sum(u)
    scale = 1 << 64
    w = [x * scale // total for x in u]
    w[max(range(len(w)), key=w.__getitem__)] += scale - sum(w)
    w += [0] * (cells - len(w))
    cap = 1 << (64 - cell_bits)
    thr, alias = [cap] * cells, list(range(cells))
    small = [j for j in range(cells) if w[j] < cap]
    large = [j for j in range(cells) if w[j] >= cap]
    while small and large:
        s, big = small.pop(), large[-1]
        thr[s], alias[s] = w[s], big
        w[big] -= cap - w[s]
        if w[big] < cap:
            small.append(large.pop())
    # a full cell: never below 0, alias itself
    packed = np.array([j if thr[j] >= cap else (thr[j] << cell_bits) | alias[j] for j in range(cells)], np.uint64)
    # the mode's value relative to the total is at most 1, so tail_rel bounds the left-out mass
    tv = cells * 2.0**-64 + tail_rel * (1 << FRAC) / total + cells * 2.0**-200
    return k_lo, packed, tv


def rational_alias(weights, what: str) -> tuple[np.ndarray, int, float]:
    """Alias table of the law proportional to the exact non-negative rationals ``weights`` (values ``0..K-1``):
    ``(packed, cell_bits, tv)``, ``tv`` bounding the total variation to the exact law (the weights' rounding to
    integers summing to ``2^64``; :func:`alias_table`)."""
    from fractions import Fraction
    w = [Fraction(x) for x in weights]
    top = max(w)
    if top <= 0 or any(x < 0 for x in w):
        raise ValueError(f"{what}: weights must be non-negative and not all zero")
    u = [int(x * (1 << FRAC) / top) for x in w]             # fixed point relative to the largest, rounded down
    cell_bits = max(1, (len(u) - 1).bit_length())
    _, packed, tv = alias_table(0, u, 0.0, cell_bits, what)
    return packed, cell_bits, tv


def alias_draw(words: jax.Array, packed, cell_bits: int) -> jax.Array:
    """The value (int32) of one alias table (``packed``, :func:`alias_table`) for every 64-bit word of ``words``:
    the cell from the top ``cell_bits`` bits, kept when the other ``64 - cell_bits`` bits, compared in full, are
    below its threshold, else its alias. Exactly the table's law for uniform words."""
    L = int(cell_bits)
    cell = words >> u64(64 - L)
    entry = jnp.asarray(packed)[cell.astype(jnp.int32)]
    thr, alias = entry >> u64(L), entry & u64((1 << L) - 1)
    return jnp.where((words & u64((1 << (64 - L)) - 1)) < thr, cell, alias).astype(jnp.int32)


def u64(x: int) -> jax.Array:
    return jnp.asarray(np.uint64(x))


def alias_pick(cell, top, entry, cell_bits: int, top_bits: int, low_bits_fresh=None):
    """Alias decision from a cell index and the top ``top_bits`` bits of the ``(64 - L)``-bit comparand;
    returns ``(value, tie)``: ``tie`` lanes need the low bits (``low_bits_fresh``) to decide."""
    thr = entry >> u64(cell_bits)
    alias = entry & u64((1 << cell_bits) - 1)
    low = 64 - cell_bits - top_bits
    thr_top = thr >> u64(low)
    keep = top < thr_top
    tie = top == thr_top
    if low_bits_fresh is not None:
        full = (top << u64(low)) | (low_bits_fresh >> u64(64 - low))
        keep = full < thr
    return jnp.where(keep, cell, alias), tie


def bin_tables(a_lo: int, bins: int, h: int, p: float):
    """Alias tables of ``Binom(a_lo + k h, p)``, ``k < bins``, with one cell count: ``(main, offset, cell_bits,
    tv)``, or ``None`` when larger than the limits."""
    if bins > MAX_BINS:
        return None
    num, den = float(p).as_integer_ratio()
    weights = [pmf_weights(a_lo + k * h, num, den) for k in range(bins)]
    cell_bits = max(1, (max(len(u) for _, u, _ in weights) - 1).bit_length())
    if cell_bits > _MAX_CELL_BITS or bins << cell_bits > _MAX_ENTRIES:
        return None
    main = np.zeros((bins, 1 << cell_bits), np.uint64)
    offset = np.zeros(bins, np.int32)
    tv_main = 0.0
    for k, (k_lo, u, tail_rel) in enumerate(weights):
        offset[k], main[k], tv = alias_table(k_lo, u, tail_rel, cell_bits, f"Binom({a_lo + k * h}, {p})")
        tv_main = max(tv_main, tv)
    return main, offset, cell_bits, tv_main
