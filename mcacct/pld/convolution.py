r"""The linear convolution of two discrete PLDs' mass vectors, with a rigorous bound on its round-off
(:func:`convolve_with_bound`), and the test that two loss grids agree (:func:`same_grid`).

Direct sums (one operand of at most 64 entries): each output
is a sum of at most :math:`m` non-negative products, so :math:`\|\hat y-y\|_1\le\gamma_{m+1}\|a\|_1\|b\|_1`,
:math:`\gamma_k=ku/(1-ku)` (Higham 2002, §3.1). Zero-padded FFT of power-of-two length :math:`N`: with the
transform model of :mod:`mcacct.pld` ("FFT round-off": :math:`\|\mathrm{fl}(Fv)-Fv\|_2\le\epsilon_F\|Fv\|_2`,
:math:`\epsilon_F=c_F(\log_2N+1)u`, and complex products with relative error :math:`\le c_\times u`),
:math:`|(Fa)_k|\le\|a\|_1` and :math:`\|Fv\|_2=\sqrt N\|v\|_2` give

.. math::

    \|\hat y-y\|_2\le(1+10^{-6})\big[\epsilon_F\|a\|_2\|b\|_1+(2\epsilon_F+c_\times u)\|a\|_1\|b\|_2\big]

(transform errors of each operand, of the product and of the inverse transform, whose output has norm
:math:`\le\min(X,Y)` by Young's inequality; either operand may play either role; second-order terms absorbed
by the factor, valid for :math:`N\le2^{40}`), and the kept :math:`n` entries
have :math:`\|\hat y-y\|_1\le\sqrt n\|\hat y-y\|_2`; negative outputs are set to 0, which only moves
them towards the true non-negative values. The bound (plus :data:`~mcacct.pld.constants.UNDERFLOW`) is
**added to the mass at** :math:`+\infty` of the result: for every :math:`\varepsilon`,
:math:`\delta(\varepsilon)=\sum_jw_j\omega_j+\omega_\infty` with weights :math:`w_j\in[0,1]`, so this
dominates the error of every later query, and it composes (a later convolution with a sub-probability
vector cannot enlarge an :math:`\ell_1` error).
"""

from __future__ import annotations

import math

import numpy as np

from mcacct.core.precision import float64
from mcacct.pld.constants import CMUL_C, FFT_C, U, UNDERFLOW
from mcacct.pld.plan import check_grid

__all__ = ["convolve_with_bound", "same_grid"]

# Below this length a direct convolution is used.
_DIRECT_CONV = 64


@float64
def same_grid(a: float, b: float) -> bool:
    """Whether two grid spacings ``a`` and ``b`` agree to a relative ``1e-12``."""
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


@float64
def convolve_with_bound(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, float]:
    """Linear convolution of two non-negative vectors and a rigorous bound on the l1 norm of its round-off.

    Direct sums when one operand has at most 64 entries, else a zero-padded power-of-two FFT (negative outputs set
    to 0); see the module docstring.

    Parameters
    ----------
    a, b : numpy.ndarray
        Non-negative 1-D vectors.

    Returns
    -------
    out : numpy.ndarray
    bound : float
    """
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    n = a.size + b.size - 1
    l1a, l1b = float(np.sum(a)), float(np.sum(b))
    if a.size == 1 and a[0] == 1.0 or b.size == 1 and b[0] == 1.0:  # the identity: exact
        return (b if a.size == 1 and a[0] == 1.0 else a).copy(), 0.0
    check_grid(1 << (n - 1).bit_length(), None, directions=1,  # its (padded) output, before allocating it
               what="the convolution of two PLDs")
    if min(a.size, b.size) <= _DIRECT_CONV:
        m = min(a.size, b.size) + 1
        return np.convolve(a, b), (m * U / (1.0 - m * U)) * l1a * l1b * (1.0 + 4 * U) + n * UNDERFLOW
    import scipy.fft  # here, not at the top: scipy (0.2-0.4 s) is imported by the processes that convolve only
    nfft = 1 << (n - 1).bit_length()
    out = scipy.fft.irfft(scipy.fft.rfft(a, nfft) * scipy.fft.rfft(b, nfft), nfft)[:n]
    eps_f = FFT_C * (math.log2(nfft) + 1) * U
    l2a, l2b = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    x, y = l2a * l1b, l1a * l2b  # the two Young-type products; the cheaper assignment is taken
    e2 = (1.0 + 1e-6) * (eps_f * max(x, y) + (2 * eps_f + CMUL_C * U) * min(x, y))
    return np.maximum(out, 0.0), math.sqrt(n) * e2 * (1.0 + 1e-6) + n * UNDERFLOW
