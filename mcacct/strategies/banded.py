r"""The correlated-noise strategy of DP-BandMF: a banded, lower-triangular Toeplitz matrix.

For iterations :math:`1..n` the strategy matrix is

.. math::
    C_{ij} = c_{i-j} \quad (0 \le i - j < k), \qquad C_{ij} = 0 \text{ otherwise},

given by the ``k`` non-zeros ``c_col = (c_0, ..., c_{k-1})`` of its first column.  ``c_col = [1.0]`` is
the identity, i.e. plain DP-SGD.  Privacy accounting needs ``C`` to be non-negative and at most
``min_sep``-banded (``k <= b``): then repeated participations of one example never touch the same row
of ``C x`` (Dong & Ganesh 2026 [arXiv:2602.09338], §4) and

.. math::  \|C x\|^2 = \sum_{t:\,x_t = 1} \|c^{(t)}\|^2,

where :math:`c^{(t)}` is column ``t`` (truncated at row ``n``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from mcacct.core.validate import check_int, parse_floats, shown
from mcacct.core.precision import float64

__all__ = ["BandedToeplitz", "parse_c_col"]


#: the largest entry of ``c_col`` (its square, summed over the columns, must stay finite in float64)
C_COL_MAX = 1e100


@float64
def parse_c_col(c_col: Sequence[float] | np.ndarray | str | float, name: str = "c_col") -> tuple[float, ...]:
    """Turn ``c_col`` (sequence, array, scalar or ``"v1,v2,..."`` string) into a validated tuple: finite entries
    in ``[0, C_COL_MAX]``, at least one positive; ``ValueError`` naming ``name``.

    Parameters
    ----------
    c_col : sequence of float, numpy.ndarray, str or float
        The first-column non-zeros ``c_0, ..., c_{k-1}``; a scalar is one entry, a string is comma-separated.
    name : str, optional
        The parameter's name, for messages (default ``"c_col"``).

    Returns
    -------
    tuple of float
        The entries as Python floats, in order.

    Raises
    ------
    ValueError
        Naming ``name`` if an item is not a number (or a string has an empty item), if there is no entry, if the
        array is not one-dimensional, if an entry is negative or not finite, if no entry is positive, or if an
        entry exceeds ``C_COL_MAX`` (``1e100``).
    """
    if isinstance(c_col, str):
        values = list(parse_floats(name, c_col))
    else:
        values = np.atleast_1d(np.asarray(c_col, dtype=np.float64)).tolist()
    if len(values) == 0:
        raise ValueError(f"{name} must contain at least one entry")
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} entries must be in [0, inf); got {','.join(shown(v) for v in values)}")
    if not np.any(arr > 0):
        raise ValueError(f"{name} must have at least one positive entry; got {','.join(shown(v) for v in values)}")
    if np.any(arr > C_COL_MAX):
        raise ValueError(f"{name} entries must be at most {C_COL_MAX:g} (the squared norms of C's columns must stay "
                         f"finite in float64); got {','.join(shown(v) for v in values)}")
    return tuple(float(v) for v in arr)


def check_strategy_type(name: str, strategy: Any) -> "BandedToeplitz":
    """A :class:`BandedToeplitz` (anything else has no validated ``c_col``); ``ValueError`` naming ``name``.

    Parameters
    ----------
    name : str
        The parameter's name, for messages.
    strategy : object
        The value to check.

    Returns
    -------
    BandedToeplitz
        ``strategy`` itself.

    Raises
    ------
    ValueError
        If ``strategy`` is not a :class:`BandedToeplitz` (the message names ``name`` and the type received).
    """
    if not isinstance(strategy, BandedToeplitz):
        raise ValueError(f"{name} must be a mcacct.BandedToeplitz; got {type(strategy).__name__}")
    return strategy


@float64
@dataclass(frozen=True)
class BandedToeplitz:
    """Banded lower-triangular Toeplitz strategy ``C`` given by its first-column non-zeros.

    Parameters
    ----------
    c_col:
        Non-negative, finite entries ``c_0..c_{k-1}``; the band width is ``k = len(c_col)``.
    """

    c_col: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        object.__setattr__(self, "c_col", parse_c_col(self.c_col))

    @property
    def bands(self) -> int:
        """Number of bands ``k``."""
        return len(self.c_col)

    def padded(self, min_sep: int) -> np.ndarray:
        """``c_col`` as a float64 array zero-padded to length ``min_sep`` (requires ``k <= min_sep``).

        Parameters
        ----------
        min_sep : int
            The minimum separation ``b >= 1`` between two participations of one example.

        Returns
        -------
        numpy.ndarray
            Shape ``(min_sep,)``, float64: ``c_0, ..., c_{k-1}`` followed by ``min_sep - k`` zeros.

        Raises
        ------
        ValueError
            As :meth:`check_min_sep`.
        """
        self.check_min_sep(min_sep)
        out = np.zeros(min_sep, dtype=np.float64)
        out[: self.bands] = self.c_col
        return out

    def check_min_sep(self, min_sep: int) -> None:
        """Raise ``ValueError`` unless the band width fits the minimum separation (``k <= b``).

        Parameters
        ----------
        min_sep : int
            The minimum separation ``b`` between two participations of one example.

        Raises
        ------
        ValueError
            If ``min_sep`` is not an integer ``>= 1``, or if ``len(c_col) > min_sep``.
        """
        b = check_int("min_sep", min_sep, low=1)
        if self.bands > b:
            raise ValueError(
                f"c_col has {self.bands} entries but min_sep is {b}: the accountant needs "
                f"len(c_col) <= min_sep (a {self.bands}-banded C with {b}-min-sep participation)")

    def column_sq_norms(self, iterations: int) -> np.ndarray:
        r"""Squared norms :math:`\|c^{(t)}\|^2` of the ``n`` columns, truncated at row ``n``.

        Column ``t`` (0-based) keeps the first :math:`\min(k, n - t)` entries of ``c_col``, so
        :math:`\|c^{(t)}\|^2 = \sum_{j < \min(k,\, n - t)} c_j^2`.

        Parameters
        ----------
        iterations : int
            The number of iterations ``n >= 1``.

        Returns
        -------
        numpy.ndarray
            Shape ``(n,)``, float64; non-increasing in ``t`` (only the last ``k - 1`` columns are truncated).

        Raises
        ------
        ValueError
            If ``iterations`` is not an integer ``>= 1``.
        """
        n = check_int("iterations", iterations, low=1)
        c2 = np.asarray(self.c_col, dtype=np.float64) ** 2
        # column t (0-based) keeps rows t..min(n, t+k)-1, i.e. the first min(k, n-t) entries
        cums = np.concatenate([[0.0], np.cumsum(c2)])
        lengths = np.minimum(self.bands, n - np.arange(n))
        return cums[lengths]

    def worst_case_sensitivity(self, iterations: int, min_sep: int) -> float:
        r"""An upper bound on :math:`\|C x\|` over every ``min_sep``-separated participation pattern.

        At most :math:`\lceil n/b \rceil` participations fit into ``n`` iterations with separation ``b``,
        they touch disjoint rows, and every column norm is at most :math:`\|c\|`, so
        :math:`\|Cx\|^2 \le \lceil n/b \rceil\,\|c\|^2`.

        Parameters
        ----------
        iterations : int
            The number of iterations ``n >= 1``.
        min_sep : int
            The minimum separation ``b >= k``.

        Returns
        -------
        float
            :math:`\sqrt{\lceil n/b \rceil\,\|c\|^2}`.

        Raises
        ------
        ValueError
            As :meth:`check_min_sep`, or if ``iterations`` is not an integer ``>= 1``.
        """
        self.check_min_sep(min_sep)
        n = check_int("iterations", iterations, low=1)
        count = -(-n // int(min_sep))
        return math.sqrt(count * float(np.sum(np.square(self.c_col))))

    def matrix(self, iterations: int) -> np.ndarray:
        """The dense ``n x n`` matrix (for tests and small examples).

        Parameters
        ----------
        iterations : int
            The size ``n >= 1``.

        Returns
        -------
        numpy.ndarray
            Shape ``(n, n)``, float64, with ``c_d`` on the ``d``-th subdiagonal for ``d < min(k, n)``.

        Raises
        ------
        ValueError
            If ``iterations`` is not an integer ``>= 1``.
        """
        n = check_int("iterations", iterations, low=1)
        m = np.zeros((n, n))
        for d, v in enumerate(self.c_col):
            if d < n:
                m += np.diag(np.full(n - d, v), -d)
        return m
