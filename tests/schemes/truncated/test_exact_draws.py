"""Every discrete draw of the truncated counts comes from integer tables (#37, item 2): the digit tables of
mcacct.schemes.truncated.digits (the warm start's root T ~ Binom(N, C q), its splits off the band, count draws off the band,
counts where no band tables exist) and the level-0 split tables of the virtual history.

* the tables at the §7.4 size against the exact pmf (mpmath, exact rational p), deterministically: a chi-square
  test cannot see a total variation of 1e-10; the total TV is printed and stays below what is charged;
* the law of a digits draw, composed exactly from its tables, against the exact Binom(A, p) (small A);
* the draw itself against a word-by-word reference (hypothesis);
* no floating-point binomial sampler (``jax.random.binomial``) is left in the package.
"""

from __future__ import annotations

import pathlib
from fractions import Fraction

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mcacct.schemes.truncated.counts import count_tables, other_counts_t
from mcacct.schemes.truncated.digits import DigitTables, digit_tables, digits_draw
from mcacct.schemes.truncated.virtual import stationary_blocked_prob, virtual_history, virtual_plan
from mcacct.core.rates import sampling_prob_from_batch_size
from mcacct.schemes.truncated import TruncatedBMinSep

from helpers import ROOT, table_weights
from oracles import exact_binomial_pmf

M74, B74, N74, BMAX74 = 14_745_600, 256, 7200, 2048
P74 = sampling_prob_from_batch_size(1793, M74, B74)


def _digit_table(tables: DigitTables, j: int) -> tuple[int, list]:
    lo = int(tables.base[j])
    cells = 1 << int(tables.cell_bits[j])
    w = table_weights(tables.packed[lo:lo + cells], int(tables.cell_bits[j]))
    assert sum(w) == 1 << 64                                       # exactly a probability law
    return int(tables.offset[j]), list(w)


def _exact_pmf(trials: int, p: Fraction, ks) -> list:
    """Binom(trials, p) at ``ks`` in 40 digits, consecutive cells by the exact pmf ratio at 60 digits
    (:func:`oracles.exact_binomial_pmf`: far below the tables' 2^-64 units over the longest run here)."""
    mpmath.mp.dps = 40
    return exact_binomial_pmf(trials, p, ks, 40, 60)


def _table_tv(offset: int, w: list, trials: int, p: Fraction) -> float:
    """Total variation between a table's law (integer weights / 2^64) and the exact Binom(trials, p)."""
    pmf = _exact_pmf(trials, p, range(offset, offset + len(w)))
    inside = mpmath.fsum(pmf)
    return float((mpmath.fsum(abs(mpmath.mpf(int(x)) / 2**64 - q) for x, q in zip(w, pmf)) + (1 - inside)) / 2)


def _digits_tv(tables: DigitTables, p: Fraction, every: int = 1) -> float:
    total = 0.0
    for j in range(0, tables.bits, every):
        offset, w = _digit_table(tables, j)
        total += _table_tv(offset, w, 1 << j, p)
    return total


def test_production_root_and_split_tables_are_exact_up_to_the_charged_bound(capsys):
    """§7.4 (N = 14,745,599, b = 256): T ~ Binom(N, C q) with C = 256 and q = p / (1 + 255 p) exact; every digit
    table of the root, the digit tables of the splits off the band (every fourth: the largest ones, 8,192 to
    65,536 cells), and the level-0 split tables (146 bins of 8,192 cells before; now bins of 128) against the exact
    pmf."""
    plan = virtual_plan(M74 - 1, B74, P74)
    q = stationary_blocked_prob(B74, P74)
    assert plan.q == q and plan.cells == 256 and plan.levels == 8 and not plan.sequential
    assert all(t is not None for t in plan.tables)               # level 0 included (it drew with BTRS before)
    tv_root = _digits_tv(plan.root, 256 * q)
    tv_half = _digits_tv(plan.half, Fraction(1, 2), every=4)
    assert tv_root <= plan.root.tv_per_draw and tv_half <= plan.half.tv_per_draw
    level0 = plan.tables[0]
    assert level0.bin_bits == 7 and level0.bins << level0.cell_bits <= 1 << 20
    tv_level0 = 0.0
    for k in (0, level0.bins // 2, level0.bins - 1):
        trials = level0.a_lo + k * (1 << level0.bin_bits)
        w = table_weights(level0.main[k], level0.cell_bits)
        assert sum(w) == 1 << 64
        tv_level0 = max(tv_level0, _table_tv(int(level0.offset[k]), list(w), trials, Fraction(1, 2)))
    assert tv_level0 <= level0.tv_per_draw
    total = tv_root + tv_half + tv_level0
    with capsys.disabled():
        print(f"\n§7.4 exact-table TV: root {tv_root:.3e} (charged {plan.root.tv_per_draw:.3e}), split digits "
              f"{tv_half:.3e} (charged {plan.half.tv_per_draw:.3e}), level-0 split {tv_level0:.3e} (charged "
              f"{level0.tv_per_draw:.3e}); measured sum {total:.3e}; the virtual history charges {plan.tv:.3e}")
    # what a §7.4 sample is charged for its counts, against the 1% systematic reserve of delta = 1.301e-8
    tv = TruncatedBMinSep(P74, B74, N74, M74, BMAX74).draw_law_tv()
    assert plan.tv < tv < 0.01 * 1.301e-8 / 5


def test_production_count_digits_are_exact():
    tables = count_tables(M74 - 1, B74, P74)
    assert tables.digits.bits == (M74 - 1).bit_length()
    tv = _digits_tv(tables.digits, Fraction(P74))
    assert tv <= tables.digits.tv_per_draw and tables.tv_per_draw > tables.digits.tv_per_draw


def _composed_law(tables: DigitTables, trials: int) -> dict[int, Fraction]:
    """The exact law of ``digits_draw`` at ``trials``: the convolution of the tables of its binary digits."""
    law = {0: Fraction(1)}
    for j in range(tables.bits):
        if not trials >> j & 1:
            continue
        offset, w = _digit_table(tables, j)
        nxt: dict[int, Fraction] = {}
        for a, pa in law.items():
            for v, x in enumerate(w):
                if x:
                    nxt[a + offset + v] = nxt.get(a + offset + v, 0) + pa * Fraction(int(x), 1 << 64)
        law = nxt
    return law


@pytest.mark.parametrize("trials,p", [(0, 0.3), (1, 0.5), (13, 0.5), (37, 0.01), (100, 0.9), (255, 1.0),
                                      (90, Fraction(3, 7))])
def test_digits_law_is_the_binomial(trials, p):
    pf = p if isinstance(p, Fraction) else Fraction(p)
    tables = digit_tables(255, p)
    law = _composed_law(tables, trials)
    mpmath.mp.dps = 40
    pmf = _exact_pmf(trials, pf, range(trials + 1)) if pf < 1 else [0] * trials + [1]
    tv = sum(abs(mpmath.mpf(law.get(k, 0).numerator) / law.get(k, 0).denominator - pmf[k])
             for k in range(trials + 1)) / 2 + sum(float(v) for k, v in law.items() if not 0 <= k <= trials)
    assert float(tv) <= tables.tv_per_draw, (float(tv), tables.tv_per_draw)


@settings(max_examples=40, deadline=None)
@given(trials=st.lists(st.integers(0, 1000), min_size=8, max_size=8), seed=st.integers(0, 2**31 - 1),
       p=st.sampled_from([0.5, 0.02, 0.37, Fraction(1, 3)]))
def test_digits_draw_is_its_word_by_word_reference(trials, seed, p):
    tables = digit_tables(1000, p)
    key = jax.random.key(seed)
    got = np.asarray(digits_draw(key, jnp.asarray(trials, jnp.int32), tables))
    words = np.asarray(jax.random.bits(key, (tables.bits, len(trials)), jnp.uint64))
    for i, t in enumerate(trials):
        want = 0
        for j in range(tables.bits):
            if t >> j & 1:
                L, u = int(tables.cell_bits[j]), int(words[j, i])
                cell, low = u >> (64 - L), u & ((1 << (64 - L)) - 1)
                e = int(tables.packed[int(tables.base[j]) + cell])
                thr, alias = e >> L, e & ((1 << L) - 1)
                want += (cell if low < thr else alias) + int(tables.offset[j])
        assert got[i] == want


def test_virtual_history_and_counts_keep_their_law():
    """Means of the draws that moved from jax.random.binomial to digit tables: the root (cells of q), the
    sequential fallback (C q > 1) and the chain without band tables (within 5 standard errors)."""
    others, samples = 4000, 5000
    for b, p in ((5, 0.01), (6, 0.45)):           # tree (C = 4, C q < 1) and sequential (C = 8, C q > 1)
        plan = virtual_plan(others, b, p)
        assert bool(plan.sequential) == (b == 6)
        # jitted: one program (run eagerly, the history and the chain below compiled ~200 programs)
        h = np.asarray(jax.jit(virtual_history, static_argnums=range(1, 5))(jax.random.key(3), others, b, p,
                                                                            samples)).astype(float)
        q = float(stationary_blocked_prob(b, p))
        assert h.shape == (b - 1, samples)
        assert np.all(np.abs(h.mean(axis=1) - others * q) <= 5 * np.sqrt(others * q * (1 - q) / samples))
    r = np.asarray(jax.jit(other_counts_t, static_argnums=range(1, 7))(jax.random.key(4), 10**6, 2, 0.4, True, 3,
                                                                         1000), float)
    q = float(stationary_blocked_prob(2, 0.4))
    mean = (10**6) * 0.4 * (1 - q)                   # Binom(A, p) with E A = N (1 - q) in stationarity
    assert np.all(np.abs(r.mean(axis=1) - mean) <= 5 * np.sqrt(r.var(axis=1) / 1000) + 1)


def test_no_floating_point_binomial_sampler_is_left():
    offenders = [str(f) for f in (pathlib.Path(ROOT) / "mcacct").rglob("*.py")
                 if "random.binomial(" in f.read_text()]
    assert offenders == []
