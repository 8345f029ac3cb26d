"""The group specs' mixture weights (Ganesh 2024, arXiv:2401.10294, Thm 3.1 and 3.3) against 50-digit binomials: the
hypergeometric weights from ratios of small integers and the binomial ones from exact integers are within 1e-12
relative, where differences of ``math.lgamma`` had lost 1.5e-10 at n = 50,000 (an audit's figure, stop 75)."""

import mpmath
import pytest

from mcacct.pld.specs import GroupFixedBatchSpec, GroupPoissonSpec

mpmath.mp.dps = 50


@pytest.mark.parametrize("k,b,n", [(4, 500, 50_000), (16, 500, 50_000), (64, 25_000, 50_000), (20, 3, 100),
                                   (5, 6, 6), (1, 1, 1), (8, 1793, 14_745_600)])
def test_fixed_batch_weights_are_the_exact_hypergeometric(k, b, n):
    sens, p = GroupFixedBatchSpec(k, b, n, 2.0).mixture()
    for s, w in zip(sens, p):
        m = int(s) // 2
        exact = mpmath.binomial(k, m) * mpmath.binomial(n, b - m) / mpmath.binomial(n + k, b)
        assert abs(w - exact) <= 1e-12 * exact


@pytest.mark.parametrize("k,q", [(8, 0.02), (64, 0.3), (200, 1e-4)])
def test_poisson_group_weights_are_the_exact_binomial(k, q):
    j, p = GroupPoissonSpec(k, q, 2.0).mixture()
    for i, w in zip(j, p):
        i = int(i)
        exact = mpmath.binomial(k, i) * mpmath.mpf(q) ** i * (1 - mpmath.mpf(q)) ** (k - i)
        if exact > 1e-300:
            assert abs(w - exact) <= 1e-12 * exact
