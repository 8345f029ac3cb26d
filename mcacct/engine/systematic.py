r"""Bounds on the systematic (non-statistical) errors between the mathematics and the computed statistics.

The Monte Carlo bounds of :mod:`mcacct.statistics.accumulators` and :mod:`mcacct.statistics.confidence` are about the mean of the
*computed* contributions :math:`g(\hat L) = \max(0, 1 - e^{\varepsilon - \hat L})` of the *simulated*
outputs. Three things separate that mean from the hockey-stick divergence of the mechanism itself; each is
bounded here, and the bounds enter every reported number (``docs/soundness.md`` has the arguments):

1. **Floating-point error of the loss** (sliding sums, recursion, logs): :math:`|\hat L - L| \le \eta`
   for every sample, with ``eta`` from :func:`loss_error_bound`. Every loss is shifted up by ``eta`` before
   its contribution is taken (``g`` increases with ``L``), so each contribution is an upper bound of the
   exact one, sample by sample.
2. **The law of the normal draws** (:mod:`mcacct.kernels.normal`) is not exactly Gaussian: uniforms are quantised to
   cells of width ``2^-53`` and ``Phi^{-1}`` is a rational approximation. Couple each draw with an exact
   ``Z = \pm\Phi^{-1}(U)``, ``U`` uniform on the cell: :math:`E|z - Z| \le \tau` per coordinate
   (:data:`NORMAL_COUPLING_L1`). :math:`g \circ L` is Lipschitz in the standardised noise, with
   :math:`|\partial (g\circ L)/\partial z_j| \le M_\infty / \sigma` (:math:`\partial L/\partial y_j` is a
   posterior mean of :math:`(Cx)_j / \sigma^2 \in [0, M_\infty/\sigma^2]`, :math:`M_\infty` a bound on the
   output mean's coordinates; ``g`` is 1-Lipschitz), so the expectations differ by at most
   :math:`n \tau M_\infty / \sigma` (:func:`normal_coupling_delta`), added to every reported delta.
3. **Discrete participation draws** from 52-bit float64 uniforms (geometric gaps by inversion, the warm
   start's coin and offset): couple each with an exact uniform; a draw can differ only when the exact
   uniform falls within ``2^-51`` of one of the outcome boundaries that matter (those inside the horizon),
   so the pattern differs with probability at most :func:`participation_mismatch_bound`, added to every
   reported delta (contributions lie in ``[0, 1]``).

The float64 sums of a chunk's contributions carry a relative error of at most ``(count + 8) 2^-53`` (sums
of non-negative terms in any order, plus the ``expm1``): :func:`chunk_sum_slack` inflates each chunk sum by
that before its fixed-point round-up (:meth:`mcacct.statistics.accumulators.DirectionStats.add_chunk`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mcacct.core.validate import check_sigma_range
from mcacct.kernels.fft_size import sliding_fft_size

__all__ = ["SystematicBound", "systematic_bound", "loss_error_bound", "term_error_bound", "normal_coupling_delta", 
           "participation_mismatch_bound", "applied_loss_shift", "NORMAL_COUPLING_L1", "NORMAL_MAX_ABS",
           "NDTRI_REL_ERROR", "UNIFORM_BOUNDARY_MASS"]

#: largest |z| the sampler can return: -Phi^{-1}(2^-54) (mpmath: 8.29236107581359...), rounded up
NORMAL_MAX_ABS = 8.2924
#: bound on the relative error of the float64 AS 241 inversion over (0, 1/2); measured maximum 6.7e-16
#: (6 ulps) against mpmath on ~40k points spanning every branch and both ends (tests/engine/test_systematic.py)
NDTRI_REL_ERROR = 1.5e-15
#: E|Phi^{-1}(U) - Phi^{-1}(cell midpoint)| for U uniform on (0, 1/2), cells of width w = 2^-53:
#: 2 (w/4)(|z_1| + w/phi(z_1)) over cells k >= 1 (Phi^{-1} is concave there, so its slope on a cell is at
#: most the slope at the cell's left end, and the slopes sum to at most an integral) plus
#: 2 (2 phi(z_0) - phi(z_1)) for the first cell (closed form), z_0 = Phi^{-1}(2^-54), z_1 = Phi^{-1}(2^-53):
#: 4.8053e-16 (mpmath), rounded up
_NORMAL_QUANT_L1 = 4.81e-16
#: per-coordinate E|z - Z| of the coupling: quantisation + approximation (E|z| <= 0.8)
NORMAL_COUPLING_L1 = _NORMAL_QUANT_L1 + 0.8 * NDTRI_REL_ERROR
#: probability that a 52-bit float64 uniform and the exact uniform it quantises fall on different sides of
#: one outcome boundary of a discrete draw, computed-boundary rounding included: 2^-52 + 2^-52
UNIFORM_BOUNDARY_MASS = 2.0**-51


def _c_stats(strategy) -> tuple[int, float, float, float]:
    c = np.asarray(strategy.c_col, np.float64)
    return len(c), float(np.sum(np.abs(c))), float(np.sum(c * c)), float(np.max(np.abs(c)))


def output_coordinate_bound(scheme, strategy) -> float:
    r""":math:`M_\infty \ge \max_x \|C x\|_\infty` over the scheme's patterns: the scheme's own statement
    (``bounds(strategy).output_coordinate``, with its proof in the scheme's docstring).

    Parameters
    ----------
    scheme : AccountedScheme
        The scheme (its ``bounds(strategy)`` record).
    strategy : BandedToeplitz
        The strategy ``C``.

    Returns
    -------
    float
        :math:`M_\infty`.
    """
    return float(scheme.bounds(strategy).output_coordinate)


def normal_coupling_delta(scheme, strategy, sigma: float) -> float:
    r"""Additive bound :math:`n\,\tau\,M_\infty / \sigma` (times the scheme's mixture factor: 2 for
    mixture-vs-mixture losses) on how much the sampler's normal law can move the mean of any contribution
    (module docstring, item 2).

    Parameters
    ----------
    scheme : AccountedScheme
        The scheme (its ``bounds(strategy)`` record).
    strategy : BandedToeplitz
        The strategy ``C``.
    sigma : float
        The noise multiplier, in ``[SIGMA_MIN, SIGMA_MAX]`` (:func:`mcacct.core.validate.check_sigma_range`).

    Returns
    -------
    float
        The additive delta term.

    Raises
    ------
    TypeError
        If ``sigma`` is not a real number.
    ValueError
        Naming ``sigma`` if it is outside ``[SIGMA_MIN, SIGMA_MAX]`` (``[1e-100, 1e100]``).
    """
    bounds = scheme.bounds(strategy)
    factor = float(bounds.loss_error.mixture_factor)
    sigma = check_sigma_range("sigma", sigma)
    return scheme.iterations * NORMAL_COUPLING_L1 * factor * bounds.output_coordinate / sigma


def participation_mismatch_bound(scheme, strategy) -> float:
    r"""Probability bound that the discrete participation draws of one sample differ from an exact coupling:
    the scheme's count of uniform-draw boundaries that matter (``bounds(strategy).participation_boundaries``,
    argued in each scheme's docstring), each costing :data:`UNIFORM_BOUNDARY_MASS`.

    Plus the scheme's ``draw_law_tv`` (of the same record): the total-variation bound of its auxiliary draws
    (the truncated scheme's counts of other examples come from integer alias tables,
    :mod:`mcacct.schemes.truncated.counts`, off their band and for the warm start's virtual history from the exact
    digit tables of :mod:`mcacct.schemes.truncated.digits`; every discrete draw and its charge is listed in
    ``docs/soundness.md``).

    Parameters
    ----------
    scheme : AccountedScheme
        The scheme (its ``bounds(strategy)`` record).
    strategy : BandedToeplitz
        The strategy ``C``.

    Returns
    -------
    float
        :math:`B \cdot 2^{-51} + \mathrm{TV}`, ``B`` the scheme's ``participation_boundaries`` and
        :math:`\mathrm{TV}` its ``draw_law_tv``.
    """
    bounds = scheme.bounds(strategy)
    return int(bounds.participation_boundaries) * UNIFORM_BOUNDARY_MASS + float(bounds.draw_law_tv)


def _term_error(problem, sigma: float) -> tuple[float, float]:
    """``(e_ell, Lambda)`` of :func:`loss_error_bound`: the float error bound of every computed term and the bound
    of every term's magnitude."""
    scheme, strategy = problem.scheme, problem.strategy
    u = float(np.finfo(np.dtype(problem.dtype)).eps) / 2.0
    n = scheme.iterations
    k, c1, c2sq, _ = _c_stats(strategy)
    m_inf = output_coordinate_bound(scheme, strategy)
    y_max = NORMAL_MAX_ABS * sigma + m_inf
    lam = (c1 * y_max + 0.5 * c2sq) / sigma**2
    size = sliding_fft_size(n, k)   # the exact path's transforms (kernels.sliding.sliding_dot_t)
    e_dot = max((3 * k + 4) * c1 * y_max, 10.0 * math.log2(size) * math.sqrt(c2sq * n) * y_max) * u
    e_dot += 2.0 * u * c1 * y_max
    return e_dot / sigma**2 + 4.0 * u * lam, lam


def term_error_bound(problem, sigma: float) -> float:
    r"""Twice :math:`e_\ell` of :func:`loss_error_bound`: a bound on :math:`|\hat\ell_i - \ell_i|`, the float
    error of every computed per-iteration term against the exact one, doubled for the remove bound's own
    arrangement of the same sums (:mod:`mcacct.kernels.bound`), which raises every block maximum by it.

    Parameters
    ----------
    problem : Problem
        Scheme, strategy and kernel dtype.
    sigma : float
        The noise multiplier, in ``[SIGMA_MIN, SIGMA_MAX]`` (:func:`mcacct.core.validate.check_sigma_range`).

    Returns
    -------
    float
        :math:`2 e_\ell` (nats).

    Raises
    ------
    TypeError
        If ``sigma`` is not a real number.
    ValueError
        Naming ``sigma`` if it is outside ``[SIGMA_MIN, SIGMA_MAX]`` (``[1e-100, 1e100]``).
    """
    return 2.0 * _term_error(problem, check_sigma_range("sigma", sigma))[0]


def loss_error_bound(problem, sigma: float) -> float:
    r"""A bound ``eta`` on :math:`|\hat L - L|` for every sample the engine can draw (nats).

    With :math:`u` the unit round-off of the kernel dtype, :math:`Y = 8.2924\sigma + M_\infty` a bound on
    every :math:`|y_j|` (the draws are bounded by construction), :math:`\Lambda = (\|c\|_1 Y + \|c\|^2/2)/\sigma^2`
    a bound on every :math:`|\ell_i|`, ``J`` the most participations:

    * sliding sums (absolute, before the division by :math:`\sigma^2`): ``direct`` ``(k + 3) u ||c||_1 Y``,
      ``prefix`` ``(3k + 4) u ||c||_1 Y``, ``fft`` ``10 log2(N) u ||c||_2 sqrt(n) Y`` (standard FFT bounds);
      the rounding of ``y`` itself adds ``2 u ||c||_1 Y``; so :math:`e_\ell \le e_{dot}/\sigma^2 + 4u\Lambda`;
    * the scheme's loss-error model (``bounds(strategy).loss_error``, a
      :class:`~mcacct.schemes.base.LossErrorModel`) turns :math:`e_\ell` and :math:`\Lambda` into the bound on the
      loss; for the §5 recursion (:class:`~mcacct.schemes.base.LossErrorParams`):
      :math:`|\partial L/\partial \ell_i|` are posterior participation probabilities summing to at most ``J``,
      so the terms contribute ``J e_ell``; every one of at most ``n`` steps (or ``n/b`` blocks of ``b``) multiplies
      the relative error by at most :math:`1 + u (8 + 4\Xi)` with :math:`\Xi = \Lambda + |\ln p| + b|\ln(1-p)| + 1`
      bounding the exponents' magnitude, and the log-scale / log-space additions add :math:`4 n u L_{max}` with
      :math:`L_{max} = J \Lambda + n |\ln(1-p)| + b |\ln p| + 1`; times the mixture factor.

    Deliberately generous (1e-8 nats at production sizes in float64, where it moves delta by a relative
    ~1e-8); in float32 it is too large to be useful, which is why certificates need float64.

    Parameters
    ----------
    problem : Problem
        Scheme, strategy and kernel dtype.
    sigma : float
        The noise multiplier, in ``[SIGMA_MIN, SIGMA_MAX]`` (:func:`mcacct.core.validate.check_sigma_range`).

    Returns
    -------
    float
        ``eta`` (nats), from the scheme's ``loss_error.eta(n, e_ell, Lambda, u)``.

    Raises
    ------
    TypeError
        If ``sigma`` is not a real number.
    ValueError
        Naming ``sigma`` if it is outside ``[SIGMA_MIN, SIGMA_MAX]`` (``[1e-100, 1e100]``).
    """
    scheme = problem.scheme
    u = float(np.finfo(np.dtype(problem.dtype)).eps) / 2.0
    sigma = check_sigma_range("sigma", sigma)
    e_ell, lam = _term_error(problem, sigma)
    return float(scheme.bounds(problem.strategy).loss_error.eta(scheme.iterations, e_ell, lam, u))


def applied_loss_shift(problem, sigma: float) -> float:
    """The shift the engine adds to every loss: :func:`loss_error_bound` for float64 kernels; 0 for float32,
    whose bound (several nats) would swamp the estimate. float32 results are therefore not certified:
    :func:`mcacct.evr.calibrate.calibrate` refuses float32 and estimates say ``certified: false``.

    Parameters
    ----------
    problem : Problem
        Scheme, strategy and kernel dtype.
    sigma : float
        The noise multiplier, in ``[SIGMA_MIN, SIGMA_MAX]`` (:func:`mcacct.core.validate.check_sigma_range`).

    Returns
    -------
    float
        ``eta`` of :func:`loss_error_bound` (float64) or ``0.0`` (float32).

    Raises
    ------
    TypeError
        If ``sigma`` is not a real number.
    ValueError
        Naming ``sigma`` if it is outside ``[SIGMA_MIN, SIGMA_MAX]`` (``[1e-100, 1e100]``).
    """
    return loss_error_bound(problem, sigma) if np.dtype(problem.dtype) == np.float64 else 0.0


@dataclass(frozen=True)
class SystematicBound:
    """The systematic terms of one ``(problem, sigma)``: ``loss_shift`` (nats, added to every loss) and the
    additive delta terms; ``delta`` is their sum, added to every reported delta."""

    loss_shift: float
    normal_coupling: float
    participation: float

    @property
    def delta(self) -> float:
        """The additive delta term: ``normal_coupling + participation``."""
        return self.normal_coupling + self.participation

    def to_dict(self) -> dict:
        """The three terms and ``delta`` as a JSON-ready dict."""
        return {"loss_shift": self.loss_shift, "normal_coupling": self.normal_coupling,
                "participation": self.participation, "delta": self.delta}


def systematic_bound(problem, sigma: float) -> SystematicBound:
    """All systematic terms for ``problem`` at noise multiplier ``sigma`` (module docstring).

    Parameters
    ----------
    problem : Problem
        Scheme, strategy and kernel dtype.
    sigma : float
        The noise multiplier, in ``[SIGMA_MIN, SIGMA_MAX]`` (:func:`mcacct.core.validate.check_sigma_range`).

    Returns
    -------
    SystematicBound
        ``loss_shift`` (:func:`applied_loss_shift`), ``normal_coupling`` (:func:`normal_coupling_delta`) and
        ``participation`` (:func:`participation_mismatch_bound`).

    Raises
    ------
    TypeError
        If ``sigma`` is not a real number.
    ValueError
        Naming ``sigma`` if it is outside ``[SIGMA_MIN, SIGMA_MAX]`` (``[1e-100, 1e100]``).
    """
    sigma = check_sigma_range("sigma", sigma)
    return SystematicBound(applied_loss_shift(problem, sigma),
                           normal_coupling_delta(problem.scheme, problem.strategy, sigma),
                           participation_mismatch_bound(problem.scheme, problem.strategy))
