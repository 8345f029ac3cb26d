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
    """Unnormalised ``Binom(trials, num/den)`` pmf in fixed point around the mode.

    Parameters
    ----------
    trials : int
        Number of trials, ``>= 0``.
    num, den : int
        The success probability as the exact fraction ``num/den`` (``0 <= num <= den``).
    max_values : int or None, optional
        If given, keep only the values from the mode up, at most ``max_values`` of them; ``None`` (default) keeps
        every value down to ``2^-KEEP`` of the mode's on both sides.

    Returns
    -------
    k_lo : int
        The value that ``u[0]`` belongs to.
    u : list of int
        ``u[j]`` is the pmf at ``k_lo + j`` in units of ``2^-FRAC`` of the mode's value.
    tail_rel : float
        A bound on the mass left out, relative to the mode's value.
    """
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
    """Alias table of ``Binom(trials, p)``, ``p`` the exact value of the float ``sampling_prob``.

    A draw picks cell ``j`` uniformly and keeps ``j`` if a uniform ``(64-L)``-bit integer is below the threshold
    ``t_j``, else takes the alias ``a_j``; so value ``offset + v`` has probability ``w_v / 2^64`` with integer
    weights ``w`` summing to ``2^64``.

    Parameters
    ----------
    trials : int
        Number of trials, ``>= 0``.
    sampling_prob : float
        ``p`` in ``[0, 1]``, used at its exact float value.
    cell_bits : int or None, optional
        ``L``: the table has ``2^L`` cells. ``None`` (default): the fewest that hold every value kept.
    max_values : int or None, optional
        Keep only the values from the mode up, at most this many (used for the remainder, whose mode is 0;
        :func:`pmf_weights`). ``None`` (default): every value kept on both sides.

    Returns
    -------
    offset : int
        Value ``offset + j`` sits in cell ``j``.
    packed : numpy.ndarray
        ``uint64``, shape ``(2^L,)``: ``packed[j] = (t_j << L) | a_j`` with threshold ``t_j < 2^(64-L)`` and
        alias ``a_j``.
    tv : float
        A bound on the total variation to the exact law (module docstring).

    Raises
    ------
    ValueError
        If the values kept need more than ``2^cell_bits`` cells.
    """
    num, den = float(sampling_prob).as_integer_ratio()
    k_lo, u, tail_rel = pmf_weights(int(trials), num, den, max_values)
    if cell_bits is None:
        cell_bits = max(1, (len(u) - 1).bit_length())
    return alias_table(k_lo, u, tail_rel, cell_bits, f"Binom({trials}, {sampling_prob})")


def alias_table(k_lo: int, u: list[int], tail_rel: float, cell_bits: int, what: str) -> tuple[int, np.ndarray, float]:
    """Alias table with ``2^cell_bits`` cells of the law proportional to the integer weights ``u``.

    The weights are rescaled to integers that sum to exactly ``2^64`` (the largest takes the rounding rest) and
    paired into cells by Walker's and Vose's method, all in integer arithmetic.

    Parameters
    ----------
    k_lo : int
        The value of ``u[0]``, returned as the table's offset.
    u : list of int
        Non-negative fixed-point weights (e.g. from :func:`pmf_weights`), at most ``2^cell_bits`` of them.
    tail_rel : float
        A bound on the mass left out of ``u``, relative to a weight of ``2^FRAC`` (the mode's in
        :func:`pmf_weights`).
    cell_bits : int
        ``L``: the table has ``2^L`` cells.
    what : str
        The law's name, for the error message.

    Returns
    -------
    offset : int
        ``k_lo``: value ``offset + j`` sits in cell ``j``.
    packed : numpy.ndarray
        ``uint64``, shape ``(2^L,)``: ``(t_j << L) | a_j`` per cell, as in :func:`binomial_alias`.
    tv : float
        A bound on the total variation to the exact law (the rounding of the weights, the mass left out and a
        float allowance).

    Raises
    ------
    ValueError
        If ``u`` has more than ``2^cell_bits`` entries.
    """
    cells = 1 << cell_bits
    if len(u) > cells:
        raise ValueError(f"{what} needs {len(u)} cells; the table has {cells}")
    total = sum(u)
    scale = 1 << 64
    w = [(x << 64) // total for x in u]
    w[max(range(len(w)), key=w.__getitem__)] += scale - sum(w)
    packed = _vose_cells(w, cell_bits)
    # the mode's value relative to the total is at most 1, so tail_rel bounds the left-out mass
    tv = cells * 2.0**-64 + tail_rel * (1 << FRAC) / total + cells * 2.0**-200
    return k_lo, packed, tv


def _vose_cells(w: list[int], cell_bits: int) -> np.ndarray:
    r"""The packed cells of Vose's pairing of the integer weights ``w`` (summing to exactly :math:`2^{64}`, at most
    ``2^cell_bits`` of them; the rest of the cells weigh 0), in closed form.

    Vose's stack order: the light cells (:math:`w_j < c`, :math:`c = 2^{64 - L}`) are taken from the highest index
    down, each filled from the current heavy cell (the highest heavy index not yet exhausted); a heavy cell whose
    weight falls below :math:`c` is the next light cell, filled from the next heavy one. With the light cells'
    deficits :math:`d_i = c - w_{s_i}` in that order, the heavy cells' excesses :math:`e_t = w_{b_t} - c` and the
    prefix sums :math:`D_i = \sum_{j \le i} d_j`, :math:`C_t = \sum_{u \le t} e_u` (all below :math:`2^{64}`, as
    :math:`\sum_i d_i = \sum_t e_t` when the weights sum to :math:`2^{64}`), light cell :math:`s_i` keeps
    :math:`w_{s_i}` with alias :math:`b_t`, :math:`t = \min\{t : C_t \ge D_{i-1}\}` (the heavy cell still holding
    weight when it comes); heavy cell :math:`b_t` with :math:`C_t < D_{\rm last}` is exhausted by the first
    :math:`i` with :math:`D_i > C_t` and keeps :math:`c + C_t - D_i` with alias :math:`b_{t+1}`; every other cell is
    full. The same cells, bit for bit, as the pairing loop (``tests/kernels/test_alias.py`` checks it against one),
    in array operations: the host builds hundreds of tables of 8,192 cells per truncated §7.4 process.

    Returns
    -------
    numpy.ndarray
        ``uint64`` ``(2^L,)``: ``(t_j << L) | a_j``, or ``j`` for a full cell (:func:`binomial_alias`).
    """
    cells, cap = 1 << cell_bits, 1 << (64 - cell_bits)
    if max(w) >= 1 << 64:         # one value holds all the mass: every other cell is empty, aliased to it
        return np.full(cells, w.index(max(w)), np.uint64)
    weights = np.zeros(cells, np.uint64)
    weights[:len(w)] = np.asarray(w, np.uint64)
    light = np.flatnonzero(weights < np.uint64(cap))[::-1]
    heavy = np.flatnonzero(weights >= np.uint64(cap))[::-1]
    thr = np.full(cells, cap, np.uint64)
    alias = np.arange(cells, dtype=np.uint64)
    if light.size and heavy.size:
        d = np.cumsum(np.uint64(cap) - weights[light], dtype=np.uint64)    # D_1..D_m
        c = np.cumsum(weights[heavy] - np.uint64(cap), dtype=np.uint64)    # C_1..C_r
        before = np.concatenate([np.zeros(1, np.uint64), d[:-1]])           # D_{i-1}
        thr[light] = weights[light]
        alias[light] = heavy[np.searchsorted(c, before, side="left")]
        done = np.flatnonzero(c < d[-1])                                   # exhausted heavy cells (never the last)
        at = np.searchsorted(d, c[done], side="right")
        thr[heavy[done]] = np.uint64(cap) + c[done] - d[at]
        alias[heavy[done]] = heavy[done + 1]
    full = thr >= np.uint64(cap)          # a full cell still has alias j: packed as j
    return np.where(full, alias, (thr << np.uint64(cell_bits)) | alias)


def rational_alias(weights, what: str) -> tuple[np.ndarray, int, float]:
    """Alias table of the law proportional to the exact non-negative rationals ``weights``.

    The weights are taken to fixed point relative to the largest (rounded down) and passed to :func:`alias_table`
    with the fewest cells that hold them all.

    Parameters
    ----------
    weights : sequence
        Non-negative weights of the values ``0..K-1``, not all zero; anything ``fractions.Fraction`` reads
        exactly (int, float, Fraction).
    what : str
        The law's name, for error messages.

    Returns
    -------
    packed : numpy.ndarray
        ``uint64`` table of ``2^cell_bits`` cells (:func:`alias_table`).
    cell_bits : int
        ``max(1, ceil(log2 K))``.
    tv : float
        A bound on the total variation to the exact law (the weights' rounding to integers summing to ``2^64``;
        :func:`alias_table`).

    Raises
    ------
    ValueError
        If a weight is negative or all are zero.
    """
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
    """The value (int32) of one alias table for every 64-bit word of ``words``.

    The cell comes from the top ``cell_bits`` bits; it is kept when the other ``64 - cell_bits`` bits, compared in
    full, are below its threshold, else its alias is taken. Exactly the table's law for uniform words.

    Parameters
    ----------
    words : jax.Array
        ``uint64`` words, any shape.
    packed : array_like
        ``uint64`` table of ``2^cell_bits`` cells (:func:`alias_table`).
    cell_bits : int
        ``L``, the table's cell bits.

    Returns
    -------
    jax.Array
        int32 of the shape of ``words``: the drawn cell index ``j`` (the law's value is the table's offset plus
        ``j``).
    """
    L = int(cell_bits)
    cell = words >> u64(64 - L)
    entry = jnp.asarray(packed)[cell.astype(jnp.int32)]
    thr, alias = entry >> u64(L), entry & u64((1 << L) - 1)
    return jnp.where((words & u64((1 << (64 - L)) - 1)) < thr, cell, alias).astype(jnp.int32)


def u64(x: int) -> jax.Array:
    """``x`` as a 0-d ``uint64`` JAX array.

    Parameters
    ----------
    x : int
        An integer in ``[0, 2^64)``.

    Returns
    -------
    jax.Array
        A ``uint64`` scalar.
    """
    return jnp.asarray(np.uint64(x))


def alias_pick(cell, top, entry, cell_bits: int, top_bits: int, low_bits_fresh=None):
    """Alias decision from a cell index and the top ``top_bits`` bits of the ``(64 - L)``-bit comparand.

    Where those bits equal the top bits of the cell's threshold the low bits must decide: such lanes are returned
    as ``tie``. With ``low_bits_fresh`` the full comparand is formed and the decision is exact.

    Parameters
    ----------
    cell : jax.Array
        ``uint64`` cell indices.
    top : jax.Array
        ``uint64``, the comparand's top ``top_bits`` bits, broadcast against ``cell``.
    entry : jax.Array
        ``uint64`` table entries of the cells, ``(t << L) | a`` (:func:`alias_table`).
    cell_bits : int
        ``L``, the table's cell bits.
    top_bits : int
        Bits in ``top``.
    low_bits_fresh : jax.Array or None, optional
        ``uint64`` words whose top ``64 - L - top_bits`` bits complete the comparand (needed on ``tie`` lanes);
        ``None`` (default): decide from ``top`` alone.

    Returns
    -------
    value : jax.Array
        ``uint64``: the cell where kept, else its alias.
    tie : jax.Array
        bool: lanes whose ``top`` equals the threshold's top bits, where only the low bits decide.
    """
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
    """Alias tables of ``Binom(a_lo + k h, p)``, ``k < bins``, all with one cell count.

    Parameters
    ----------
    a_lo : int
        Trials of the first table, ``>= 0``.
    bins : int
        Number of tables, ``>= 1``.
    h : int
        Step in trials from one table to the next.
    p : float
        Success probability in ``[0, 1]``, used at its exact float value.

    Returns
    -------
    tuple or None
        ``(main, offset, cell_bits, tv)``: ``main`` the ``uint64`` tables ``(bins, 2^cell_bits)``
        (:func:`alias_table`), ``offset`` their int32 offsets ``(bins,)``, ``cell_bits`` the common cell bits (the
        fewest that hold every table's values) and ``tv`` the largest total-variation bound of a table; or ``None``
        when larger than the limits (more than :data:`MAX_BINS` tables, more than ``2^13`` cells per table or more
        than ``2^20`` entries in all).
    """
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
