r"""What a Monte Carlo run of one sigma concludes: :class:`Estimate`, the (1 - alpha) confidence bounds on delta(epsilon)
of both directions from their accumulated statistics (:mod:`mcacct.statistics.accumulators`), with the sampler's
systematic term added to every upper bound, and its typed answers :class:`DeltaAt` and :class:`EpsilonAt`.

:func:`mcacct.engine.estimate.estimate` runs the draws and returns one (re-exported there);
:meth:`mcacct.jobs.merge.MergeResult.estimate` builds one from merged shard files.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from mcacct.core.precision import float64
from mcacct.core.validate import DIRECTIONS, check_real
from mcacct.statistics.accumulators import DirectionStats, delta_bounds, epsilon_from_delta_curve

__all__ = ["Estimate", "DeltaAt", "EpsilonAt", "kl_up", "certification_notes", "FLOAT32_NOTE"]


class DeltaAt(NamedTuple):
    """delta at one epsilon (:meth:`Estimate.delta_at`), the larger of the directions present.

    ``exact`` is true when ``epsilon`` is on the run's grid (the epsilons whose delta was summed exactly): then
    the bounds come from the exact fixed-point sums, as :meth:`Estimate.delta`. Off the grid they come from the
    loss histogram, whose bins round every loss up (so the mean is at or above the exact empirical mean) and
    ``delta_lower`` is ``None`` (the histogram gives no lower bound). ``delta_upper`` includes the systematic
    terms either way; ``by_direction`` holds each direction's ``(delta_estimate, delta_upper)``."""

    epsilon: float
    delta_estimate: float
    delta_upper: float
    delta_lower: float | None
    exact: bool
    by_direction: dict



class EpsilonAt(NamedTuple):
    """epsilon at one delta (:meth:`Estimate.epsilon_at`): the smallest epsilon whose estimated (resp.
    upper-bounded) delta is at most ``delta``, both directions. It always comes from the loss histogram (bins
    round every loss up) and its Chernoff-KL bound plus the systematic terms, so ``epsilon_upper`` is a
    certified upper bound at the run's confidence; ``exact`` is ``False`` to say so (no epsilon grid is summed
    exactly for a delta query)."""

    delta: float
    epsilon_estimate: float
    epsilon_upper: float
    exact: bool


#: Why a float32 result is not a certificate (``mcacct delta``/``epsilon``/``merge`` print it after ``note: ``).
FLOAT32_NOTE = ("float32 kernel: its round-off is not bounded, so the upper bound holds for the float32 "
                "computation, not as a privacy certificate (use --dtype float64)")


@float64
def certification_notes(dtype: str, directions: Sequence[str]) -> list[str]:
    r"""Why an estimate of kernel ``dtype`` over ``directions`` is not a certificate of the mechanism (empty: it
    is one, up to its stated confidence).

    A mechanism is :math:`(\varepsilon, \delta)`-DP only if *both* directions of the divergence are at most
    :math:`\delta`; an estimate of one direction bounds that direction alone (and spends all of ``alpha`` on it,
    so its bound is also not comparable with a two-direction bound on the same draws). A float32 kernel's
    round-off is not bounded.

    Parameters
    ----------
    dtype : str
        The kernel's dtype name (``"float64"`` or ``"float32"``).
    directions : sequence of str
        The directions the estimate holds, names from ``("remove", "add")``.

    Returns
    -------
    list of str
        One sentence per reason, in the order: missing direction(s), then the float32 note (:data:`FLOAT32_NOTE`).
    """
    notes = []
    missing = [d for d in DIRECTIONS if d not in tuple(directions)]
    if missing:
        ran = ", ".join(d for d in DIRECTIONS if d in tuple(directions)) or "no"
        notes.append(f"{ran} direction only: the upper bound covers only delta of the {ran} direction, so it is "
                     f"not a certificate of the mechanism (that needs both directions; the {', '.join(missing)} "
                     "direction is not in this result: run --direction both)")
    if dtype != "float64":
        notes.append(FLOAT32_NOTE)
    return notes


@float64
class Estimate:
    """Monte Carlo estimate of delta(epsilon) in both directions with (1 - alpha) confidence bounds.

    ``alpha`` is split between the directions present (union bound), so ``delta_upper`` bounds the larger of
    their divergences with confidence ``1 - alpha``. ``systematic`` (:mod:`mcacct.engine.systematic`: the
    sampler's normal and participation draws against exact ones) is added to every upper bound.

    ``certified`` is decided here, from what the estimate holds: it is false

    * for float32 kernels, whose round-off is not bounded (the bounds then hold for the float32 computation, not
      for the mechanism), and for estimates of one direction only (a bound on one direction is not a bound on the
      mechanism): the caller's ``certified``/``notes`` (:func:`certification_notes`);
    * where a bound certifies nothing: when the systematic term alone is at least 1 (every upper bound is then at
      least 1), and when the total upper bound (statistical bound plus systematic term) at one of the run's
      epsilons is at least 1.

    ``notes`` says why, one sentence per reason. Both are read-only properties computed from the statistics, so
    every report built on an estimate (``mcacct delta``/``epsilon``, merged shards) states the same.
    """

    def __init__(self, sigma: float, alpha: float, stats: dict[str, DirectionStats] | None = None,
                 systematic: float = 0.0, certified: bool = True, notes: Sequence[str] = ()) -> None:
        self.sigma = sigma
        self.alpha = alpha
        self.stats: dict[str, DirectionStats] = dict(stats or {})
        self.systematic = systematic
        self._certified = bool(certified)
        self._notes = list(notes)

    def __repr__(self) -> str:
        return (f"Estimate(sigma={self.sigma!r}, alpha={self.alpha!r}, directions={tuple(self.stats)}, "
                f"num_samples={self.num_samples if self.stats else 0}, systematic={self.systematic!r}, "
                f"certified={self.certified})")

    def _vacuous_notes(self) -> list[str]:
        """Why a bound of this estimate certifies nothing (empty: every bound is below 1)."""
        if not self.systematic < 1.0:
            return [f"the systematic term {self.systematic:.3g} (the proven bound on the sampler's departures from "
                    f"exact draws at sigma={self.sigma:g}, which grows like 1/sigma) is at least 1, so every upper "
                    "bound is at least 1 and certifies nothing: use a larger sigma"]
        if not self.stats:
            return []
        out = []
        for j, e in enumerate(self._any_stats().epsilons):
            total = max(delta_bounds(s.mean_at(j), s.count, self._alpha_dir())[1] + self.systematic
                        for s in self.stats.values())
            if not total < 1.0:
                out.append(f"at epsilon={e:g} the upper bound on delta (statistical bound plus systematic term) is "
                           f"{total:.4g} >= 1, which certifies nothing")
        return out

    @property
    def notes(self) -> list[str]:
        """Why the estimate is not a certificate (empty: it is one, up to its stated confidence)."""
        return self._notes + self._vacuous_notes()

    @property
    def certified(self) -> bool:
        """Whether every bound of the estimate is a certificate of the mechanism (class docstring)."""
        return self._certified and not self._vacuous_notes()

    @property
    def num_samples(self) -> int:
        """Samples per direction: the smallest count of the directions present (``ValueError`` if none)."""
        return min(s.count for s in self._stats_present().values())

    def _stats_present(self) -> dict[str, DirectionStats]:
        if not self.stats:
            raise ValueError("stats must hold at least one direction's statistics (this estimate has none)")
        return self.stats

    def _any_stats(self) -> DirectionStats:
        return next(iter(self._stats_present().values()))

    def _alpha_dir(self) -> float:
        return self.alpha / len(self._stats_present())

    def delta(self, j: int = 0) -> dict:
        r"""Point estimate and bounds at ``epsilons[j]`` (exact float64 sums); :meth:`delta_at` takes an epsilon.

        The bounds use the fixed-point mean, rounded up by a few units per chunk; the point estimate is the
        smaller of that mean and the histogram's (both at or above the exact empirical mean), so an estimate
        of zero prints as 0 rather than as the round-up (e.g. ``2e-28``), which stays in the bounds.

        Each direction's bounds are the Chernoff-KL bounds :math:`(\ell, u)` of its fixed-point mean :math:`m` at
        confidence :math:`1 - \alpha/D` (``D`` directions present); with the systematic term :math:`s` they become
        :math:`\max(0, \ell - s)` and :math:`\min(1, u + s)`. The top-level entries are the maxima over the
        directions.

        Parameters
        ----------
        j : int, default 0
            Index into the run's ``epsilons``.

        Returns
        -------
        dict
            One entry per direction (``"remove"``/``"add"``), each a dict with ``delta_estimate``, ``delta_lower`` and
            ``delta_upper``, plus those three keys at the top level (the larger over the directions).

        Raises
        ------
        ValueError
            If the estimate holds no statistics.
        """
        out = {}
        for d, s in self.stats.items():
            m = s.mean_at(j)
            lo, hi = delta_bounds(m, s.count, self._alpha_dir())
            point = min(m, float(s.histogram_delta(s.epsilons[j])[0]))
            out[d] = {"delta_estimate": point, "delta_lower": max(0.0, lo - self.systematic),
                      "delta_upper": min(1.0, hi + self.systematic)}
        out["delta_estimate"] = max(v["delta_estimate"] for v in out.values())
        out["delta_upper"] = max(v["delta_upper"] for k, v in out.items() if isinstance(v, dict))
        out["delta_lower"] = max(v["delta_lower"] for k, v in out.items() if isinstance(v, dict))
        return out

    def delta_at(self, epsilon: float) -> DeltaAt:
        r"""delta at ``epsilon`` (a value, not an index): exact where ``epsilon`` is one of the run's epsilons,
        else from the rounded-up histogram (:class:`DeltaAt` says which).

        Off the grid, each direction's upper bound is :math:`\min(1, \mathrm{kl\_up}(m_h, N, \alpha/D) + s)` with
        :math:`m_h` the histogram's mean (:func:`kl_up`).

        Parameters
        ----------
        epsilon : float
            :math:`\varepsilon \ge 0`.

        Returns
        -------
        DeltaAt
            The larger of the directions' values; ``exact`` tells whether ``epsilon`` was on the run's grid.

        Raises
        ------
        ValueError
            Naming ``epsilon`` if it is not a finite real number ``>= 0``, or if the estimate holds no statistics.
        """
        epsilon = check_real("epsilon", epsilon, low=0.0)
        grid = self._any_stats().epsilons
        hits = [j for j, e in enumerate(grid) if float(e) == epsilon]
        if hits:
            d = self.delta(hits[0])
            per = {k: (v["delta_estimate"], v["delta_upper"]) for k, v in d.items() if isinstance(v, dict)}
            return DeltaAt(epsilon, d["delta_estimate"], d["delta_upper"], d["delta_lower"], True, per)
        per = {}
        for k, s in self.stats.items():
            m = float(s.histogram_delta(epsilon)[0])
            per[k] = (m, min(1.0, kl_up(m, s.count, self._alpha_dir()) + self.systematic))
        return DeltaAt(epsilon, max(v[0] for v in per.values()), max(v[1] for v in per.values()), None, False, per)

    def delta_curve(self, epsilons) -> dict[str, np.ndarray]:
        r"""Histogram-based estimate and upper bound of delta over an array of epsilons (both directions).

        Parameters
        ----------
        epsilons : array_like
            The epsilons (a scalar is one).

        Returns
        -------
        dict
            ``"epsilon"`` (the float64 epsilons), ``"delta_estimate"`` and ``"delta_upper"`` (same shape): the maxima
            over the directions of :math:`m_h` and :math:`\min(1, \mathrm{kl\_up}(m_h, N, \alpha/D) + s)`.
        """
        eps = np.atleast_1d(np.asarray(epsilons, np.float64))
        est = np.zeros_like(eps)
        up = np.zeros_like(eps)
        for s in self.stats.values():
            m = s.histogram_delta(eps)
            est = np.maximum(est, m)
            up = np.maximum(up, [min(1.0, kl_up(v, s.count, self._alpha_dir()) + self.systematic) for v in m])
        return {"epsilon": eps, "delta_estimate": est, "delta_upper": up}

    def epsilon_at(self, delta: float, eps_hi: float | None = None) -> EpsilonAt:
        r""":meth:`epsilon` as an :class:`EpsilonAt` (typed; the JSON of ``mcacct epsilon`` keeps the dict).

        Parameters
        ----------
        delta : float
            :math:`\delta \in (0, 1)`.
        eps_hi : float, optional
            Largest epsilon searched (default: the smallest histogram ``max_loss`` of the directions).

        Returns
        -------
        EpsilonAt
            ``exact`` is always ``False``.

        Raises
        ------
        ValueError
            Naming ``delta`` if it is not a finite real number in ``(0, 1)``.
        """
        delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
        e = self.epsilon(delta, eps_hi)
        return EpsilonAt(delta, e["epsilon_estimate"], e["epsilon_upper"], False)

    def epsilon(self, delta: float, eps_hi: float | None = None) -> dict:
        r"""Smallest epsilon whose estimated (resp. upper-bounded) delta is at most ``delta``.

        Both curves are maxima over the directions: the estimate is the histogram mean :math:`m_h(\varepsilon)`, the
        upper curve :math:`\mathrm{kl\_up}(m_h(\varepsilon), N, \alpha/D) + s`; each is inverted by bisection to
        :math:`10^{-6}` (:func:`~mcacct.statistics.accumulators.epsilon_from_delta_curve`).

        Parameters
        ----------
        delta : float
            The target delta (not checked here; :meth:`epsilon_at` checks it).
        eps_hi : float, optional
            Largest epsilon searched (default: the smallest histogram ``max_loss`` of the directions).

        Returns
        -------
        dict
            ``{"epsilon_estimate": float, "epsilon_upper": float}``; ``0.0`` if met at epsilon 0, ``inf`` if not met
            below ``eps_hi``.
        """
        eps_hi = eps_hi or min(s.spec.max_loss for s in self.stats.values())

        def est(e):
            return max(float(s.histogram_delta(e)[0]) for s in self.stats.values())

        def upper(e):
            return max(kl_up(float(s.histogram_delta(e)[0]), s.count, self._alpha_dir()) + self.systematic
                       for s in self.stats.values())

        return {"epsilon_estimate": epsilon_from_delta_curve(est, delta, eps_hi),
                "epsilon_upper": epsilon_from_delta_curve(upper, delta, eps_hi)}


@float64
def kl_up(mean: float, count: int, alpha: float) -> float:
    r"""The upper confidence bound of :func:`mcacct.statistics.accumulators.delta_bounds`.

    The largest :math:`d \in [m, 1]` with :math:`N\,\mathrm{KL}(m \,\|\, d) \le \ln(1/\alpha)` (Bernoulli KL),
    raised by a small relative safety factor and capped at 1.

    Parameters
    ----------
    mean, count, alpha : float, int, float
        The empirical mean :math:`m` (clipped to ``[0, 1]``), the sample count :math:`N` (``<= 0`` gives 1) and
        :math:`\alpha \in (0, 1)`, the probability with which the bound may fail.

    Returns
    -------
    float
        The upper confidence bound, in ``[mean, 1]``.
    """
    return delta_bounds(mean, count, alpha)[1]
