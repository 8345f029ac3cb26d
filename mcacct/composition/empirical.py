r"""The empirical privacy-loss distribution of a Monte Carlo estimate, on the PLD grid.

The loss histogram of one noise level becomes a discretised PLD (:func:`empirical_pld_from_stats`,
:func:`empirical_pld`) that :mod:`mcacct.composition.mc_pld` FFT-convolves with the pessimistic PLDs of other
mechanisms.

The negative part of the MC loss
--------------------------------
The MC histogram keeps every loss :math:`L\le0` in one bin (index 0), but for a composition the
negative part matters: a negative loss of the MC part offsets positive losses of the others. Every
other sample sits at the upper edge of its bin. Two rules (``negative_part``):

* ``"zero"``: bin 0 is placed at :math:`L=0`. This is *pessimistic*: for independent components
  :math:`\delta(\varepsilon)=\mathbb E[(1-e^{\varepsilon-L_1-L_2})_+]` (plus the mass at
  :math:`+\infty`) and the integrand is non-decreasing in :math:`L_1`, so replacing :math:`L_1` by
  a first-order stochastically larger variable (here :math:`\max(\lceil L_1\rceil,0)\ge L_1`
  sample by sample) can only increase :math:`\delta` for every :math:`\varepsilon`, hence also
  :math:`\varepsilon(\delta)`. The bias is at most :math:`\Pr[L_1\le0]\cdot\delta_{\rm
  PLD}(\varepsilon)` (plus the bin-width rounding), since :math:`0\le f(0)-f(x)\le
  f(0)=\delta_{\rm PLD}(\varepsilon)`. (Keeping instead the bin's :math:`Q`-mass by a point mass
  at the :math:`x^*<0` with the same :math:`E[e^{-L}]` would be *optimistic*: :math:`f` is convex
  in :math:`e^{-x}`, so by Jensen such a point mass underestimates.) This is the only rule
  available from one direction's statistics.
* ``"mirror"`` (default when both directions were sampled): both directions are estimated for the
  same pair :math:`(P,Q)`, and :math:`\Pr_P[L\in dx]=e^{x}\Pr_Q[L\in dx]`. So the negative part of
  the remove-direction loss (:math:`L=\ln P/Q`, :math:`y\sim P`) is :math:`e^{x}` times the law of
  the add-direction loss (:math:`-L`, :math:`y\sim Q`) at :math:`-x>0`, which the add histogram
  measures -- and vice versa. :math:`\delta(\varepsilon)` becomes
  :math:`\mathbb E_P[f(L);L>0]+\mathbb E_Q[e^{-L'}f(-L');L'>0]`, two means of :math:`[0,1]`-valued
  terms over the two directions' samples (drawn on one shared key), each rounded up (an add sample in bin :math:`k` gives weight
  :math:`e^{-(k-1)w}` at loss :math:`-(k-1)w`, where both factors are largest). Unbiased up to
  the rounding, assuming :math:`\Pr[L=0]=0` (true for the Gaussian-noise mechanisms here); the
  confidence bounds add the bounds of the two means (``alpha`` split between them): each mean's bound holds
  with probability at least ``1 - alpha/2`` on its own, whatever the dependence between the two sample sets,
  so the union bound needs no independence (docs/soundness.md, "Shared draws").

Grid
----
Everything lives on the PLD grid :math:`\ell_j=jh` (``value_discretization_interval``). For MC
input the default is :math:`h=w/8` with :math:`w` the histogram bin width (``2**-10``), so every
upper bin edge is a grid point; for other :math:`h` the edges are rounded *up* to the grid.
Convolutions are linear (zero-padded) FFTs with a rigorous round-off bound added to the mass at
:math:`+\infty` (:mod:`mcacct.pld.discrete`); the mass at :math:`+\infty` composes as
:math:`1-\prod_i(1-\omega_{\infty,i})` (for probability measures; the linear extension for the
empirical "mirror" measures, whose total mass is only approximately 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from mcacct.pld.discrete import DirectionPLD, DiscretePLD
from mcacct.pld.checks import check_delta, check_epsilon, check_value_interval
from mcacct.statistics.accumulators import DIRECTIONS, DirectionStats
from mcacct.core.precision import float64

#: the public names; the helpers (checks, parts, directions) serve mcacct.composition.mc_pld
__all__ = ["empirical_pld_from_stats", "empirical_pld"]



# --------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------
def check_h(h: Any) -> float:
    """Check a grid spacing (:func:`mcacct.pld.checks.check_value_interval`).

    Parameters
    ----------
    h : Any
        The loss grid spacing.

    Returns
    -------
    float
        ``h`` in :math:`(0, 0.1]`.

    Raises
    ------
    ValueError
        If ``h`` is out of range.
    """
    return check_value_interval(h)


def check_query(epsilon: Any, delta: Any) -> tuple[float | None, float | None]:
    r"""Check a query: exactly one of ``epsilon`` and ``delta``.

    Parameters
    ----------
    epsilon : float or None
        :math:`\varepsilon\ge0`, to get delta.
    delta : float or None
        :math:`\delta\in(0,1)`, to get epsilon.

    Returns
    -------
    tuple of (float or None, float or None)
        ``(epsilon, None)`` or ``(None, delta)``, checked.

    Raises
    ------
    ValueError
        If both or neither are given, or the given one is out of range.
    """
    if (epsilon is None) == (delta is None):
        raise ValueError("give exactly one of epsilon (to get delta) or delta (to get epsilon)")
    if epsilon is not None:
        return check_epsilon(epsilon), None
    return None, check_delta(delta)


# --------------------------------------------------------------------------
# Monte Carlo histogram -> empirical PLD
# --------------------------------------------------------------------------
def _edge_indices(k: np.ndarray, width: float, h: float, sign: int = 1) -> np.ndarray:
    """Grid index of the loss ``sign * k * width``: exact when ``width / h`` is an integer, else rounded up."""
    k = np.asarray(k, dtype=np.int64)
    if _is_multiple(width, h):
        return sign * k * int(round(width / h))
    x = sign * k.astype(np.float64) * (width / h)
    return np.ceil(x + 1e-9 * np.abs(x)).astype(np.int64)


def _measure(idx: np.ndarray, mass: np.ndarray, inf: float, h: float) -> DirectionPLD:
    """Atoms ``mass`` at grid indices ``idx`` as a DirectionPLD (empirical, ``certified=False``)."""
    if idx.size == 0:
        return DirectionPLD(h, 0, np.zeros(1), inf, False)
    lo, hi = int(idx.min()), int(idx.max())
    pmf = np.zeros(hi - lo + 1)
    np.add.at(pmf, idx - lo, mass)
    return DirectionPLD(h, lo, pmf, inf, False)


def add_parts(a: DirectionPLD, b: DirectionPLD) -> DirectionPLD:
    r"""Sum of two measures on the same grid (not a composition).

    Parameters
    ----------
    a, b : DirectionPLD
        The measures.

    Returns
    -------
    DirectionPLD
        Pointwise sum of the pmfs and of the masses at :math:`+\infty` (capped at 1); certified only if both are.
    """
    lo = min(a.offset, b.offset)
    hi = max(a.offset + a.pmf.size, b.offset + b.pmf.size)
    pmf = np.zeros(hi - lo)
    pmf[a.offset - lo: a.offset - lo + a.pmf.size] += a.pmf
    pmf[b.offset - lo: b.offset - lo + b.pmf.size] += b.pmf
    return DirectionPLD(a.value_discretization_interval, lo, pmf, min(a.infinity_mass + b.infinity_mass, 1.0),
                        a.certified and b.certified)


def _check_stats(stats: Any, name: str = "stats") -> tuple[np.ndarray, float, int]:
    if not isinstance(stats, DirectionStats):
        raise ValueError(f"{name} must be a DirectionStats, got {type(stats).__name__}")
    if stats.count <= 0:
        raise ValueError(f"{name} has no samples (count == 0)")
    width, bins = float(stats.spec.width), int(stats.spec.bins)
    hist = np.asarray(stats.hist, dtype=np.int64)
    if hist.shape != (bins + 2,) or np.any(hist < 0):
        raise ValueError(f"{name}.hist must hold bins + 2 = {bins + 2} non-negative counts")
    if int(hist.sum()) != int(stats.count):
        raise ValueError(f"{name}.hist sums to {int(hist.sum())} but {name}.count is {stats.count}")
    return hist, width, bins


def empirical_parts(stats: DirectionStats, h: float,
                     opposite: DirectionStats | None) -> tuple[DirectionPLD, DirectionPLD | None]:
    """The two parts of an empirical PLD; see :func:`empirical_pld_from_stats`.

    Parameters
    ----------
    stats : DirectionStats
        Statistics of this direction.
    h : float
        Loss grid spacing.
    opposite : DirectionStats or None
        Statistics of the opposite direction, for the negative part.

    Returns
    -------
    positive : DirectionPLD
        The part from ``stats`` (bin 0 left out when ``opposite`` is given).
    negative : DirectionPLD or None
        The negative part from ``opposite``, or ``None``.

    Raises
    ------
    ValueError
        If a statistics object is malformed or has no samples.
    """
    hist, width, bins = _check_stats(stats)
    n = stats.count
    k = np.flatnonzero(hist[: bins + 1])
    if opposite is not None:
        k = k[k >= 1]  # L <= 0 comes from the opposite direction
    pos = _measure(_edge_indices(k, width, h), hist[k] / n, float(hist[bins + 1]) / n, h)
    if opposite is None:
        return pos, None
    ho, wo, bo = _check_stats(opposite, "opposite")
    no = opposite.count
    ko = np.flatnonzero(ho[1:]) + 1  # opposite-direction bins k >= 1 (incl. overflow k = bo + 1)
    # opposite loss L' in ((k-1)w, kw]  <->  this direction's loss -L' in [-kw, -(k-1)w), P-weight e^{-L'};
    # e^{-L'} f(-L') is largest at L' = (k-1)w: atom of weight e^{-(k-1)w} at loss -(k-1)w
    neg = _measure(_edge_indices(ko - 1, wo, h, sign=-1), ho[ko] / no * np.exp(-(ko - 1) * wo), 0.0, h)
    return pos, neg


def _is_multiple(width: float, h: float) -> bool:
    ratio = width / h
    m = round(ratio)
    return m >= 1 and abs(ratio - m) <= 1e-9 * m


@float64
def empirical_pld_from_stats(stats: DirectionStats, value_discretization_interval: float | None = None, *,
                             opposite: DirectionStats | None = None) -> DirectionPLD:
    r"""Empirical PLD of one direction from the Monte Carlo loss histogram (an *estimate*).

    Bin :math:`k\ge1` of width :math:`w` (losses in :math:`((k-1)w, kw]`) puts mass
    ``hist[k] / count`` at its upper edge :math:`kw` (rounded up to the grid when :math:`w/h` is
    not an integer) and the overflow bin goes to :math:`+\infty`. Every sample's loss is thus
    replaced by a larger one.

    The negative part (bin 0 holds all :math:`L\le0`):

    * ``opposite=None`` (per-direction, as the histogram allows): bin 0 is put at :math:`L=0`.
      Pessimistic: for independent components
      :math:`\delta(\varepsilon)=\mathbb E[(1-e^{\varepsilon-L_1-L_2})_+]` is non-decreasing in
      :math:`L_1`, i.e. monotone under first-order stochastic dominance of each component's loss,
      and :math:`\lceil L_1\rceil\ge L_1` sample by sample. The cost is at most
      :math:`\Pr[L_1\le0]\,\delta_2(\varepsilon)` (see the module docstring).
    * ``opposite=`` the statistics of the *other* direction of the same pair: the negative part is
      reconstructed from it with the change of measure
      :math:`\Pr_P[L\in dx]=e^{x}\Pr_Q[L\in dx]`, i.e. the law of this direction's loss at
      :math:`x<0` is :math:`e^{x}` times the law of the opposite loss at :math:`-x>0`. An opposite
      sample in bin :math:`k\ge1` becomes an atom of weight :math:`e^{-(k-1)w}` at loss
      :math:`-(k-1)w` (both factors of :math:`e^{-L'}f(-L')` are largest there, so this is again
      rounded up). Unbiased up to that rounding, assuming :math:`\Pr[L=0]=0` (true for the
      Gaussian-noise mechanisms of this package); the total mass is then only approximately 1.

    With no composition (the identity) both variants reproduce
    :meth:`DirectionStats.histogram_delta` exactly for every :math:`\varepsilon\ge0`.

    Parameters
    ----------
    stats : DirectionStats
        Statistics of one direction (``count >= 1``).
    value_discretization_interval : float, optional
        Grid spacing :math:`h`; default ``stats.spec.width / 8`` (every bin edge on the grid).
    opposite : DirectionStats, optional
        Statistics of the opposite direction (samples of the same pair; the runner draws both directions
        from one key, which the union bound of the confidence bounds allows).

    Returns
    -------
    DirectionPLD
        ``certified=False`` (Monte Carlo data).
    """
    if not isinstance(stats, DirectionStats):
        raise ValueError(f"stats must be a DirectionStats, got {type(stats).__name__}")
    h = check_h(float(stats.spec.width) / 8 if value_discretization_interval is None
                 else value_discretization_interval)
    pos, neg = empirical_parts(stats, h, opposite)
    return pos if neg is None else add_parts(pos, neg)


def stats_of(estimate_or_stats: Any, direction: str) -> tuple[dict[str, DirectionStats], float | None]:
    """The Monte Carlo statistics by direction, and the estimate's alpha.

    Parameters
    ----------
    estimate_or_stats : Estimate, DirectionStats or mapping
        An ``Estimate``, a bare :class:`DirectionStats` (taken as ``direction``) or a mapping direction ->
        :class:`DirectionStats`.
    direction : str
        Direction of a bare :class:`DirectionStats`.

    Returns
    -------
    stats : dict of str to DirectionStats
        The statistics, in the order of ``DIRECTIONS``.
    alpha : float or None
        The estimate's alpha, or ``None`` when no ``Estimate`` was given.

    Raises
    ------
    ValueError
        For another type, an unknown direction or an empty mapping.
    """
    from mcacct.engine.estimate import Estimate

    if isinstance(estimate_or_stats, Estimate):
        stats, alpha = dict(estimate_or_stats.stats), float(estimate_or_stats.alpha)
    elif isinstance(estimate_or_stats, DirectionStats):
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
        stats, alpha = {direction: estimate_or_stats}, None
    elif isinstance(estimate_or_stats, Mapping):
        stats, alpha = dict(estimate_or_stats), None
    else:
        raise ValueError("estimate_or_stats must be an accountant.Estimate, a DirectionStats or a mapping "
                         f"direction -> DirectionStats; got {type(estimate_or_stats).__name__}")
    if not stats:
        raise ValueError("no Monte Carlo statistics given")
    for d, s in stats.items():
        if d not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}; got {d!r}")
        if not isinstance(s, DirectionStats):
            raise ValueError(f"stats[{d!r}] must be a DirectionStats, got {type(s).__name__}")
    return {d: stats[d] for d in DIRECTIONS if d in stats}, alpha


def negative_mode(negative_part: str, stats: Mapping[str, DirectionStats]) -> bool:
    """True when the negative part is reconstructed from the opposite direction.

    Parameters
    ----------
    negative_part : {"auto", "mirror", "zero"}
        The rule (``"auto"``: mirror when both directions are present).
    stats : mapping of str to DirectionStats
        The statistics by direction.

    Returns
    -------
    bool
        Whether to mirror.

    Raises
    ------
    ValueError
        For an unknown rule, or ``"mirror"`` without both directions.
    """
    if negative_part not in ("auto", "mirror", "zero"):
        raise ValueError(f"negative_part must be 'auto', 'mirror' or 'zero', got {negative_part!r}")
    both = all(d in stats for d in DIRECTIONS)
    if negative_part == "mirror" and not both:
        raise ValueError("negative_part='mirror' needs the statistics of both directions")
    return negative_part == "mirror" or (negative_part == "auto" and both)


def opposite_direction(d: str) -> str:
    """The other adjacency direction (``"remove"`` <-> ``"add"``).

    Parameters
    ----------
    d : str
        One of ``DIRECTIONS``.

    Returns
    -------
    str
        The other one.
    """
    return DIRECTIONS[1 - DIRECTIONS.index(d)]


@float64
def empirical_pld(estimate_or_stats: Any, value_discretization_interval: float | None = None, *,
                  negative_part: str = "auto", direction: str = "remove") -> DiscretePLD:
    r""":func:`empirical_pld_from_stats` for every direction of an ``Estimate`` (or mapping of stats).

    ``negative_part``: ``"zero"`` puts all :math:`L\le0` at 0, ``"mirror"`` reconstructs it from the
    opposite direction, ``"auto"`` (default) mirrors when both directions are present. A bare
    :class:`DirectionStats` is taken as ``direction``. The default grid is the smallest histogram
    width / 8.

    Parameters
    ----------
    estimate_or_stats : Estimate, DirectionStats or mapping
        The Monte Carlo statistics (:func:`stats_of`).
    value_discretization_interval : float, optional
        Grid spacing :math:`h`; default the smallest histogram width / 8.
    negative_part : {"auto", "mirror", "zero"}, default "auto"
        Rule for the losses :math:`L\le0`.
    direction : str, default "remove"
        Direction of a bare :class:`DirectionStats`.

    Returns
    -------
    DiscretePLD
        The empirical PLD, ``certified=False``.

    Raises
    ------
    ValueError
        For invalid statistics or arguments.
    """
    stats, _ = stats_of(estimate_or_stats, direction)
    mirror = negative_mode(negative_part, stats)
    h = value_discretization_interval
    if h is None:
        h = min(float(s.spec.width) for s in stats.values()) / 8
    return DiscretePLD({d: empirical_pld_from_stats(s, h, opposite=stats[opposite_direction(d)] if mirror else None)
                        for d, s in stats.items()})
