"""mcacct.kernels.alias.alias_table: the pairing in closed form gives the cells of Vose's stack loop bit for bit
(the loop written out here as the oracle), for weights of every shape: one value with all the mass, equal weights,
empty padding cells, exact fills, and random ones; and each table's law is its weights exactly."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcacct.kernels.alias import FRAC, alias_table


def _loop_cells(u: list[int], cell_bits: int) -> np.ndarray:
    """Vose's pairing as a stack loop: light cells taken from the highest index down, each filled from the highest
    heavy cell left; a heavy cell that falls below the cap is the next light one."""
    cells, total, scale = 1 << cell_bits, sum(u), 1 << 64
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
    return np.array([j if thr[j] >= cap else (thr[j] << cell_bits) | alias[j] for j in range(cells)], np.uint64)


def _law(packed: np.ndarray, cell_bits: int) -> list[int]:
    """Each value's probability in units of 2^-64: cell ``j`` keeps ``j`` below its threshold, else takes its alias
    (a full cell, packed as ``j``, reads as threshold 0 and alias ``j``)."""
    cells, cap = len(packed), 1 << (64 - cell_bits)
    mass = [0] * cells
    for j, e in enumerate(int(x) for x in packed):
        thr, a = e >> cell_bits, e & (cells - 1)
        mass[j] += thr
        mass[a] += cap - thr
    return mass


def _check(u: list[int], cell_bits: int) -> None:
    _, packed, _ = alias_table(0, u, 0.0, cell_bits, "test")
    assert packed.dtype == np.uint64
    np.testing.assert_array_equal(packed, _loop_cells(u, cell_bits))


@pytest.mark.parametrize("u,bits", [([1], 1), ([1], 5), ([0, 0, 7], 2), ([0, 7, 0, 0], 3), ([3, 3, 3, 3], 2),
                                    ([1] * 8, 4), ([1, 2**70], 1), ([2**70, 1], 3), ([5, 0, 0, 0, 0], 3),
                                    ([1 << FRAC] * 5 + [1], 3), ([7, 1, 1, 1], 2)])
def test_closed_form_equals_the_loop_on_edge_shapes(u, bits):
    _check(u, bits)


@settings(max_examples=300, deadline=None)
@given(u=st.lists(st.integers(0, 2**330), min_size=1, max_size=64).filter(lambda v: sum(v) > 0),
       extra=st.integers(0, 2))
def test_closed_form_equals_the_loop(u, extra):
    _check(u, max(1, (len(u) - 1).bit_length()) + extra)


@settings(max_examples=60, deadline=None)
@given(u=st.lists(st.integers(0, 2**40), min_size=1, max_size=16).filter(lambda v: sum(v) > 0))
def test_the_table_holds_the_weights_law(u):
    bits = max(1, (len(u) - 1).bit_length())
    _, packed, _ = alias_table(0, u, 0.0, bits, "test")
    mass = _law(packed, bits)
    assert sum(mass) == 1 << 64
    total = sum(u)
    for j, x in enumerate(u):       # each weight rounded down, the largest holding the rest: within one part in 2^64
        assert abs(mass[j] - (x << 64) // total) <= len(u)
    assert all(m == 0 for m in mass[len(u):])
