r"""The second ladder of a noise calibration, placed where the first one says the target is crossed.

:func:`mcacct.pld.pld_calibrate` looks for the smallest :math:`\sigma` with :math:`\delta_\sigma(\varepsilon)\le\delta`
by evaluating ladders of noise levels. The first ladder that brackets the target, rungs
:math:`\sigma_1<\dots<\sigma_n` a few percent apart, also gives :math:`\delta` at every rung, and
:math:`\log\delta_\sigma` is a smooth function of :math:`\log\sigma`: a cubic through the four rungs nearest the
bracket places the crossing :math:`\hat\sigma` to within a few :math:`10^{-6}` (relative) on the accountant's
mechanisms (Poisson compositions of 50 to 1,000 steps, cyclic Poisson at 128, the Gaussian, :math:`\varepsilon`
from 1 to 8, :math:`\delta` from :math:`10^{-3}` to :math:`10^{-6}`). :func:`guided_ladder` then puts the next
ladder's rungs geometrically around :math:`\hat\sigma`, adjacent rungs a factor :math:`1/(1-0.9\,\mathrm{rtol})`
apart, so that the crossing falls between two of them and the search ends after two ladders instead of the four
that uniform re-laddering of the bracket needs at ``rtol = 1e-4``.

The guess only places rungs. Every rung is evaluated by the accountant, and the calibration returns a rung whose
pessimistic :math:`\delta` was checked, whatever the guess was: a wrong guess costs the uniform passes that follow,
never soundness (docs/pld.md, "Guided second ladder").
"""

from __future__ import annotations

import math
import warnings

import numpy as np

__all__ = ["crossing", "guided_ladder"]


def crossing(sigmas: np.ndarray, deltas: np.ndarray, target: float, lo: float, hi: float) -> float | None:
    r"""The noise level in ``(lo, hi)`` where the interpolated :math:`\log\delta` meets :math:`\log` ``target``.

    A polynomial of degree up to 3 in :math:`\log\sigma` is fitted to :math:`\log\delta` at the (up to) four rungs
    nearest the bracket's geometric centre (the bracket's ends among them, so the fit changes sign between them),
    and its root in ``[lo, hi]`` found by bisection; where rounding in an ill-conditioned fit (rungs closer than
    float resolution) loses the sign change, the straight line through the bracket's ends (log-log) gives the root.

    Parameters
    ----------
    sigmas, deltas : numpy.ndarray
        A ladder, increasing, and its :math:`\delta` values (rungs with :math:`\delta\le0` are left out).
    target : float
        The target :math:`\delta > 0`.
    lo, hi : float
        Adjacent rungs with :math:`\delta(lo) > target \ge \delta(hi)`.

    Returns
    -------
    float or None
        The estimate; ``None`` when ``lo`` or ``hi`` is not a rung of ``sigmas``, when ``deltas`` there is not
        positive and finite (rungs with a non-finite or non-positive delta are left out of the fit), or when they
        do not straddle ``target``.
    """
    x = np.asarray(sigmas, dtype=float)
    y = np.asarray(deltas, dtype=float)
    keep = np.isfinite(y) & (y > 0)
    if not (keep[x == lo].any() and keep[x == hi].any()):
        return None
    ya, yb = (math.log(float(y[x == v][0])) - math.log(target) for v in (lo, hi))
    x, y = np.log(x[keep]), np.log(y[keep]) - math.log(target)
    a, b = math.log(lo), math.log(hi)
    mid = 0.5 * (a + b)
    near = np.argsort(np.abs(x - mid))[:4]
    with warnings.catch_warnings():  # rungs closer than float resolution: an ill-conditioned fit, then the chord
        warnings.simplefilter("ignore")
        coef = np.polyfit(x[near] - mid, y[near], min(3, len(near) - 1))
    f_a, f_b = np.polyval(coef, a - mid), np.polyval(coef, b - mid)
    if not (np.isfinite(f_a) and np.isfinite(f_b) and f_a > 0 >= f_b):  # no crossing on the bracket: the chord
        return math.exp(a + (b - a) * ya / (ya - yb)) if ya > 0 >= yb else None
    u, v = a - mid, b - mid
    for _ in range(64):
        w = 0.5 * (u + v)
        if np.polyval(coef, w) > 0:
            u = w
        else:
            v = w
    return math.exp(mid + 0.5 * (u + v))


def guided_ladder(guess: float, lo: float, hi: float, size: int, rtol: float) -> np.ndarray | None:
    r"""``size`` rungs around ``guess``, adjacent ones a factor :math:`r = 1/(1-0.9\,\mathrm{rtol})` apart, inside
    ``(lo, hi)``.

    Two adjacent rungs :math:`\sigma_{i-1} < \sigma_i` then satisfy :math:`\sigma_i-\sigma_{i-1} = 0.9\,\mathrm{rtol}
    \,\sigma_i`, so a crossing between them ends the search. The rungs are shifted, not shrunk, to fit the bracket.

    Parameters
    ----------
    guess : float
        The estimated crossing (:func:`crossing`).
    lo, hi : float
        The current bracket.
    size : int
        Rungs per ladder.
    rtol : float
        The calibration's relative bracket width.

    Returns
    -------
    numpy.ndarray or None
        The rungs, increasing; ``None`` when the bracket is too narrow to hold them with a rung's spacing to spare
        at each end (the uniform ladder then usually ends the search in one pass).
    """
    r = 1.0 / (1.0 - 0.9 * rtol)
    if hi / lo <= r ** (size + 1):
        return None
    rungs = guess * r ** (np.arange(size) - 0.5 * (size - 1))
    if rungs[0] < lo * r:
        rungs = rungs * (lo * r / rungs[0])
    if rungs[-1] > hi / r:
        rungs = rungs * (hi / r / rungs[-1])
    return rungs
