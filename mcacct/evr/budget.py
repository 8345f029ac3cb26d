"""What a calibration fixes before any draw (Dong & Ganesh 2026, arXiv:2602.09338, App. A; steps 1-3 of
:mod:`mcacct.evr.calibrate`): the checked arguments, the sample budget and base delta, the certified top of the
ladder, the pilot's size and sigma range, and the ladder's shape. The plan (:func:`mcacct.evr.calibrate.
plan_calibration`) and the cost estimate (:mod:`mcacct.evr.cost`) both start here, so they describe the same
calibration.
"""

from __future__ import annotations

from typing import NamedTuple

from mcacct.engine.problem import Problem
from mcacct.statistics import confidence as evr
from mcacct.pld import pld_calibrate
from mcacct.core.precision import float64
from mcacct.core.validate import check_int, check_real

__all__ = ["PILOT_GRID", "Budget", "calibration_budget", "check_calibration_dtype", "pilot_size", "explicit_ladder",
           "top_sigma", "ladder_exponents", "pilot_range", "bracket_from_baselines"]

#: sigma points of each of the pilot's two grids (step 3 of the module docstring)
PILOT_GRID = 16


@float64
def top_sigma(problem: Problem, epsilon: float, delta: float) -> tuple[float, str]:
    """(sigma, certifier) of the Monte-Carlo-free top candidate, the tightest certified bound that is valid
    for the mechanism actually run:

    * always: the unamplified Gaussian mechanism with the scheme's worst-case sensitivity (exact, Balle & Wang);
    * where the scheme has an exact PLD (``scheme.exact_pld(strategy)``; b-min-sep with ``b = 1`` is Poisson
      subsampling with ``C = c_0 I``): the pessimistic PLD accountant of :mod:`mcacct.pld` for it.

    Parameters
    ----------
    problem : Problem
        The scheme and strategy.
    epsilon : float
        Target epsilon, in ``[0, EPSILON_MAX]``.
    delta : float
        The delta the top must meet, in ``(0, 1)`` (the calibration passes its base delta).

    Returns
    -------
    sigma : float
        The smaller of the two sigmas (the Gaussian one when the scheme has no exact PLD).
    certifier : str
        ``"gaussian-worst-case-sensitivity"`` or ``"pld-poisson-subsampled-gaussian"``.

    Raises
    ------
    ValueError
        If an argument is out of range (from the Gaussian or PLD calibration).
    """
    sens = problem.scheme.bounds(problem.strategy).sensitivity
    best = (evr.gaussian_sigma(sens, epsilon, delta), "gaussian-worst-case-sensitivity")
    spec = problem.scheme.exact_pld(problem.strategy)  # the scheme's exact PLD at sigma = 1, where it has one
    if spec is not None:
        sig = pld_calibrate(spec, epsilon, delta)
        if sig < best[0]:
            best = (sig, "pld-poisson-subsampled-gaussian")
    return best


class Budget(NamedTuple):
    """The checked arguments of a calibration and what follows from them before any draw (step 1 and 2 of the
    module docstring): the sample budget, the base delta and the certified top (:func:`calibration_budget`).

    Attributes
    ----------
    epsilon, target_delta, ladder_ratio, above, below, chunk_size : float or int
        The checked arguments of :func:`calibration_budget`.
    reserve_fraction : float
        ``systematic_reserve``: the fraction of ``target_delta`` set aside for systematic error.
    num_samples : int
        Samples per direction and candidate.
    base_delta : float
        The delta each candidate is verified against.
    top_sigma : float
        The certified top candidate (:func:`top_sigma` at ``base_delta``).
    top_certifier : str
        What certifies it.
    """

    epsilon: float
    target_delta: float
    ladder_ratio: float
    above: int
    below: int
    chunk_size: int
    reserve_fraction: float
    num_samples: int
    base_delta: float
    top_sigma: float
    top_certifier: str


def check_calibration_dtype(dtype: str) -> None:
    """Only float64 kernels calibrate: ``ValueError`` for any other ``dtype`` (the CLI asks before any work).

    Parameters
    ----------
    dtype : str
        The problem's kernel dtype.

    Raises
    ------
    ValueError
        If ``dtype`` is not ``"float64"`` (``"dtype must be 'float64' to calibrate; got ..."``).
    """
    if dtype != "float64":
        raise ValueError(f"dtype must be 'float64' to calibrate; got {dtype!r}: float32 privacy losses "
                         "differ from float64 ones by up to ~1e-3 nats (0.1 in extreme cases) and that round-off "
                         "is not bounded, so a float32 run cannot certify a noise multiplier (use it for "
                         "estimates only)")


@float64
def calibration_budget(problem: Problem, epsilon: float, delta: float, num_samples: int | None,
                       ladder_ratio: float, above: int, below: int, chunk_size: int,
                       systematic_reserve: float) -> Budget:
    """Check the arguments of :func:`calibrate` (float64 only) and fix the sample budget, the base delta for the
    statistical target ``delta * (1 - systematic_reserve)`` and the certified top. Shared by the plan and by the
    cost estimate (:mod:`mcacct.evr.cost`), so both see the same calibration.

    Parameters
    ----------
    problem : Problem
        The scheme and strategy; its dtype must be float64.
    epsilon : float
        Target epsilon, ``>= 0``.
    delta : float
        Target overall delta, in ``(0, 1)``.
    num_samples : int or None
        Samples per direction and candidate, ``>= 1``; ``None``: the fewest that meet the statistical target
        with base delta half of it (:func:`mcacct.statistics.confidence.sample_budget`).
    ladder_ratio : float
        Ratio of neighbouring ladder sigmas, ``> 1``.
    above, below : int
        Fine ladder steps above and below the pilot estimate, ``>= 0``.
    chunk_size : int
        Samples per chunk, ``>= 1``.
    systematic_reserve : float
        Fraction of ``delta`` set aside for systematic error, in ``(0, 0.5]``.

    Returns
    -------
    Budget
        The checked values, the sample count, the base delta and the top (:func:`top_sigma` at the base delta).

    Raises
    ------
    ValueError
        Naming the argument out of range, a dtype other than float64, or a ``num_samples`` too small for the
        statistical target (the message gives the number needed).
    """
    check_calibration_dtype(problem.dtype)
    eps = check_real("epsilon", epsilon, low=0.0)
    target = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    ratio = check_real("ladder_ratio", ladder_ratio, low=1.0, low_open=True)
    above = check_int("above", above, low=0)
    below = check_int("below", below, low=0)
    chunk_size = check_int("chunk_size", chunk_size, low=1)
    reserve_frac = check_real("systematic_reserve", systematic_reserve, low=0.0, high=0.5, low_open=True)
    s, base = evr.sample_budget(target - reserve_frac * target, num_samples)
    sig_top, certifier = top_sigma(problem, eps, base)
    return Budget(eps, target, ratio, above, below, chunk_size, reserve_frac, s, base, sig_top, certifier)


@float64
def pilot_size(num_samples: int, pilot_samples: int | None, chunk_size: int) -> tuple[int, int]:
    r"""Samples of each pilot grid (``pilot_samples``, default ``num_samples / 20`` and at least 1000) and the
    pilot's chunk size: the pilot only places the ladder, so its chunks need not be the verification's; they are
    no larger than its sample count rounded up to a power of two, so a small pilot does not compute a mostly
    masked chunk.

    Parameters
    ----------
    num_samples : int
        The verification's samples per direction and candidate.
    pilot_samples : int or None
        Samples of each pilot grid, ``>= 1``; ``None`` (or 0): :math:`\max(1000, \min(s, \lfloor s/20 \rfloor))`
        with ``s = num_samples``.
    chunk_size : int
        The verification's chunk size.

    Returns
    -------
    n_pilot : int
        Samples of each pilot grid.
    chunk : int
        :math:`\min(\mathrm{chunk\_size}, 2^{\lceil \log_2 n_{pilot} \rceil})`.

    Raises
    ------
    ValueError
        Naming ``pilot_samples`` if it is not an integer ``>= 1``.
    """
    n_pilot = (check_int("pilot_samples", pilot_samples, low=1) if pilot_samples
               else max(1000, min(num_samples, num_samples // 20)))
    return n_pilot, min(chunk_size, 1 << (n_pilot - 1).bit_length())


@float64
def explicit_ladder(sigmas, top: float) -> list[float]:
    """An explicit ladder: finite positive sigmas, sorted and deduplicated, those at or above the certified
    ``top`` dropped (the top needs no verification).

    Parameters
    ----------
    sigmas : iterable of float
        The candidates, each a finite number ``> 0``.
    top : float
        The certified top sigma.

    Returns
    -------
    list of float
        The candidates below ``top``, increasing (possibly empty).

    Raises
    ------
    ValueError
        Naming ``sigmas`` if an entry is not a finite number ``> 0`` or there is none.
    """
    explicit = sorted({check_real("sigmas", v, low=0.0, low_open=True) for v in sigmas})
    if not explicit:
        raise ValueError("sigmas must contain at least one noise multiplier")
    return [v for v in explicit if v < top]


@float64
def ladder_exponents(below: int, above: int, reach: int, reach_down: int | None = None) -> list[int]:
    """Exponents ``j`` of the ladder ``sigma_hat * ratio**j`` (sorted): ``-below..above`` one by one; above them
    ``above + 2, above + 4, above + 8, ...`` while below ``reach``, and ``reach`` itself when beyond ``above``;
    below them, the mirror image down to ``-reach_down`` (default ``4 * below``).

    Cost: every candidate above the answer runs all its samples, and one a step below it nearly all; a
    candidate ``k`` fine steps below the crossing leaves after about ``1.2**-k`` of the run (its running sum
    exceeds the budget). Coarse steps far from the pilot estimate keep the safety margin at a few candidates.

    A coarse point :math:`s + 2^k` that lies closer to the end than to the point before it is replaced by the end.

    Parameters
    ----------
    below, above : int
        Fine steps below and above the pilot estimate (exponent 0).
    reach : int
        The largest exponent (coarse steps up to it when ``reach > above``).
    reach_down : int or None
        Minus the smallest exponent; default ``4 * below``.

    Returns
    -------
    list of int
        The exponents without duplicates, increasing.
    """
    def coarse(start: int, end: int) -> list[int]:
        out, k = [], 1
        while start + 2**k < end:
            out.append(start + 2**k)
            k += 1
        if out and end - out[-1] < out[-1] - (out[-2] if len(out) > 1 else start):
            out.pop()  # the end is closer to the last point than that point to the one before: the end replaces it
        return out + ([end] if end > start else [])

    down = 4 * below if reach_down is None else reach_down
    return sorted({*(-j for j in coarse(below, down)), *range(-below, above + 1), *coarse(above, reach)})


@float64
def pilot_range(top: float, bracket: tuple[float, float] | None = None) -> tuple[float, float]:
    r"""The sigma range of the pilot's first grid: ``[top / 64, top]``, narrowed by ``bracket`` (e.g. the PLD
    sigmas of the scheme's baselines, :func:`bracket_from_baselines`) when given. The bracket only *places* the
    ladder: nothing is certified from it, and a bracket that misses the crossing only costs resolution (the
    pilot then widens downwards, and the ladder reaches up to the pilot's 90%-safe sigma).

    Parameters
    ----------
    top : float
        The certified top sigma.
    bracket : tuple of float, optional
        ``(low, high)`` with ``0 < low <= high``.

    Returns
    -------
    tuple of float
        ``(lo, hi)``: :math:`\mathrm{lo} = \max(\mathrm{top}/64, \min(\mathrm{low}, \mathrm{top}))` and
        :math:`\mathrm{hi} = \min(\mathrm{top}, \max(\mathrm{high}, \mathrm{lo}))`, or ``(top / 64, top)`` without a
        bracket or when these give ``hi <= lo``.

    Raises
    ------
    ValueError
        Naming ``bracket[0]`` if it is not a finite number ``> 0``, or ``bracket[1]`` if it is below ``bracket[0]``.
    """
    lo, hi = top / 64, top
    if bracket is not None:
        b_lo = check_real("bracket[0]", bracket[0], low=0.0, low_open=True)
        b_hi = check_real("bracket[1]", bracket[1], low=b_lo)
        lo, hi = max(lo, min(b_lo, top)), min(hi, max(b_hi, lo))
        if hi <= lo:
            lo, hi = top / 64, top
    return lo, hi


@float64
def bracket_from_baselines(baselines: dict) -> tuple[float, float] | None:
    """``(min / 2, 1.25 max)`` of the baseline sigmas (keys ending in ``_sigma``), or ``None`` without any:
    b-min-sep needs less noise than cyclic Poisson at the same batch size (Dong & Ganesh 2026,
    arXiv:2602.09338, §7), and the factors leave room for schemes that need more.

    Parameters
    ----------
    baselines : dict
        The scheme's baselines; only positive values of keys ending in ``_sigma`` count (``None`` is skipped).

    Returns
    -------
    tuple of float or None
        ``(min / 2, 1.25 * max)`` of those values, or ``None`` when there is none.
    """
    vals = [float(v) for k, v in baselines.items() if k.endswith("_sigma") and v is not None and v > 0]
    return (min(vals) / 2, 1.25 * max(vals)) if vals else None
