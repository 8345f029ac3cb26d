r"""The default strategy ``C``: mcacct's MSE-optimised banded Toeplitz matrix (:func:`default_strategy`).

Read by the Python API (:func:`mcacct.get_noise_multiplier`), the command line's scheme flags
(:meth:`mcacct.schemes.flags.SchemeArgs.strategy`) and ``mcacct compare``, so that one setting gets one ``C``
wherever it is given. Callers look the function up on this module at call time (``default.default_strategy``), so
that a test can replace the fit in one place.
"""

from __future__ import annotations

import functools

from mcacct.core.precision import float64
from mcacct.core.validate import check_count
from mcacct.strategies.banded import BandedToeplitz

__all__ = ["default_strategy"]


@functools.lru_cache(maxsize=64)
@float64
def _optimised_c_col(iterations: int, bands: int) -> tuple[float, ...]:
    from mcacct.strategies.toeplitz import optimize_banded_toeplitz
    return optimize_banded_toeplitz(iterations, bands).c_col


@float64
def default_strategy(iterations: int, bands: int) -> BandedToeplitz:
    r"""mcacct's default strategy over ``iterations`` steps with ``min(bands, iterations)`` bands.

    The banded Toeplitz ``C`` that minimises the mean squared error of the prefix sums at :math:`\|c\|_2 = 1`
    (:func:`mcacct.strategies.optimize_banded_toeplitz`). Remembered per shape in the process: the fit is an
    L-BFGS run compiled per shape (a few seconds), and the persistent compilation cache keeps the program between
    processes.

    Parameters
    ----------
    iterations : int
        The horizon ``n >= 1``.
    bands : int
        The bands wanted (``>= 1``): the scheme's separation of participations (b-min-sep's ``b``, cyclic Poisson's
        and balls-in-bins' cycle length), capped at ``n``.

    Returns
    -------
    BandedToeplitz
    """
    n, k = check_count("iterations", iterations), check_count("bands", bands)
    return BandedToeplitz(_optimised_c_col(n, min(k, n)))
