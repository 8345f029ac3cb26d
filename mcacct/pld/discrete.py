r"""Discrete privacy-loss distributions on a uniform loss grid, and their composition.

A :class:`DirectionPLD` holds the masses :math:`\omega_j` at losses :math:`\ell_j=(\mathrm{offset}+j)h` and a
mass :math:`\omega_\infty` at :math:`+\infty`; a :class:`DiscretePLD` holds one per adjacency direction
(``"remove"``: :math:`y\sim P`, loss :math:`\ln P/Q`; ``"add"``: :math:`y\sim Q`, loss :math:`\ln Q/P`).
:func:`mechanism_pld` gives the pessimistic, self-composed PLD of an :mod:`mcacct.pld` ``*Spec`` (the same
discretisation, window and FFT power as :func:`mcacct.pld.pld_delta`), :func:`privacy_parameters_pld` the
dominating PLD of any :math:`(\varepsilon,\delta)`-DP mechanism, and :meth:`DiscretePLD.compose` /
:func:`compose` the PLD of a composition (independent noise): a linear convolution per direction.

Round-off (every value stays an upper bound)
--------------------------------------------
* **Convolution** (:func:`mcacct.pld.convolution.convolve_with_bound`, re-exported here): a rigorous bound on the
  :math:`\ell_1` norm of each convolution's round-off (its module docstring). The bound (plus
  :data:`~mcacct.pld.constants.UNDERFLOW`) is **added to the mass at** :math:`+\infty` of the result: for every
  :math:`\varepsilon`, :math:`\delta(\varepsilon)=\sum_jw_j\omega_j+\omega_\infty` with weights :math:`w_j\in[0,1]`, so
  this dominates the error of every later query, and it composes (a later convolution with a sub-probability
  vector cannot enlarge an :math:`\ell_1` error).
* **Queries**. :meth:`DirectionPLD.delta` sums :math:`n` non-negative products (each with relative error at
  most :math:`2u`, ``expm1`` included) and multiplies by :math:`1+(n+4)u`; :meth:`DirectionPLD.epsilon`
  uses the certified query of :mod:`mcacct.pld.kernels` with the same relative term (suffix sums inflated,
  the solution rounded up).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from mcacct.pld.constants import DEFAULT_H, U, UNDERFLOW
from mcacct.pld.convolution import convolve_with_bound, same_grid
from mcacct.pld.kernels import compose_arrays_batch, query_one_jit, single_batch
from mcacct.pld.plan import bucket, check_grid, plan, solver_for
from mcacct.pld.specs import SPEC_TYPES, canonical
from mcacct.core.validate import DIRECTIONS
from mcacct.pld.checks import (check_delta, check_discretization, check_epsilon, check_value_interval, is_real_number,
                                plain)
from mcacct.core.precision import float64

__all__ = ["DIRECTIONS", "DirectionPLD", "DiscretePLD", "identity_pld", "compose", "mechanism_pld",
           "privacy_parameters_pld", "convolve_with_bound", "same_grid"]

# --------------------------------------------------------------------------
# Discrete PLDs
# --------------------------------------------------------------------------
@float64
@dataclasses.dataclass(frozen=True, eq=False)
class DirectionPLD:
    r"""One direction of a discrete privacy-loss distribution.

    Mass ``pmf[i]`` sits at loss :math:`(\mathrm{offset}+i)\,h`, ``infinity_mass`` at
    :math:`+\infty`; the total may be below 1 only through mass at :math:`-\infty` (which never
    contributes to :math:`\delta`). ``certified`` is ``False`` when any Monte Carlo data went in.
    """

    value_discretization_interval: float
    offset: int
    pmf: np.ndarray
    infinity_mass: float
    certified: bool

    def __post_init__(self) -> None:
        pmf = np.asarray(self.pmf, dtype=np.float64)
        if pmf.ndim != 1 or pmf.size == 0 or not np.all(np.isfinite(pmf)) or np.any(pmf < 0):
            raise ValueError("pmf must be a non-empty 1-D array of finite masses >= 0")
        pmf = pmf.copy()
        pmf.setflags(write=False)
        object.__setattr__(self, "pmf", pmf)
        h = check_value_interval(self.value_discretization_interval)
        object.__setattr__(self, "value_discretization_interval", h)
        inf = float(self.infinity_mass)
        if not 0.0 <= inf <= 1.0:
            raise ValueError(f"infinity_mass must be in [0, 1], got {plain(self.infinity_mass)!r}")
        object.__setattr__(self, "infinity_mass", inf)
        object.__setattr__(self, "offset", int(self.offset))

    @property
    def losses(self) -> np.ndarray:
        """The grid losses of ``pmf``."""
        return (self.offset + np.arange(self.pmf.size)) * self.value_discretization_interval

    def compose(self, other: "DirectionPLD") -> "DirectionPLD":
        """The PLD of the composition (same direction; independent noise): a convolution.

        Parameters
        ----------
        other : DirectionPLD

        Returns
        -------
        DirectionPLD

        Raises
        ------
        ValueError
            If ``other`` is not a :class:`DirectionPLD` or lies on another grid.
        """
        if not isinstance(other, DirectionPLD):
            raise ValueError(f"can only compose with a DirectionPLD, got {type(other).__name__}")
        h = self.value_discretization_interval
        if not same_grid(h, other.value_discretization_interval):
            raise ValueError(
                "cannot compose PLDs on different grids: value_discretization_interval "
                f"{h!r} vs {other.value_discretization_interval!r}")
        # mass at +inf of the product measure: (+inf, anything) or (finite, +inf); equals
        # 1 - (1 - a)(1 - b) for probability measures, and stays linear for empirical (sub/super) ones
        a, b = self.infinity_mass, other.infinity_mass
        inf = a * (float(other.pmf.sum()) + b) + float(self.pmf.sum()) * b
        pmf, roundoff = convolve_with_bound(self.pmf, other.pmf)
        return DirectionPLD(h, self.offset + other.offset, pmf, min(inf + roundoff, 1.0),
                            self.certified and other.certified)

    def _roundoff(self) -> tuple[float, float]:
        """``(rho, slack)`` of a query: the relative round-off of its sum (``n`` products with relative error
        <= 2u, summed in any order) and an absolute slack for the rounding of the computed grid losses
        (``|l_j| u`` moves a weight ``1 - e^(eps - l_j)`` by at most ``|l_j| u``); both 0 for an empirical
        (uncertified) PLD, whose queries are estimates."""
        if not self.certified:  # an empirical (Monte Carlo) PLD: a plain estimate, no round-off terms
            return 0.0, 0.0
        top = float(np.max(np.abs(self.losses)))
        return (self.pmf.size + 4) * U, (top + 1.0) * U * (1.0 + 1e-6) * float(np.sum(self.pmf))

    def delta(self, epsilon: float | np.ndarray) -> np.ndarray:
        r""":math:`\delta(\varepsilon)=\sum_j\omega_j(1-e^{\varepsilon-\ell_j})_++\omega_\infty` per epsilon.

        Summed directly (no suffix-sum cancellation) and certified: :math:`(1+\rho)(\cdot)` plus the slack of
        the grid's rounding (:meth:`_roundoff`), capped at 1.

        Parameters
        ----------
        epsilon : float or numpy.ndarray

        Returns
        -------
        numpy.ndarray
        """
        eps = np.atleast_1d(np.asarray(epsilon, dtype=np.float64))
        l = self.losses
        rho, slack = self._roundoff()
        out = np.empty_like(eps)
        for i, e in enumerate(eps):
            k = int(np.searchsorted(l, e, side="right"))
            out[i] = (1.0 + rho) * (float(np.sum(self.pmf[k:] * -np.expm1(e - l[k:]))) + self.infinity_mass) + slack
        return np.minimum(out, 1.0)

    def epsilon(self, delta: float) -> float:
        r"""Smallest :math:`\varepsilon\ge0` with :math:`\delta(\varepsilon)\le` ``delta``, certified; ``inf`` if none.

        The query of :mod:`mcacct.pld.kernels` with the relative round-off of :meth:`delta` (suffix sums inflated,
        solution rounded up) against ``delta`` less the grid slack.

        Parameters
        ----------
        delta : float

        Returns
        -------
        float
        """
        rho, slack = self._roundoff()
        target = float(delta) - slack
        if target <= 0.0:
            return math.inf
        _, e = query_one_jit(jnp.asarray(self.pmf), jnp.asarray(self.infinity_mass), jnp.asarray(self.offset),
                         self.value_discretization_interval, 0.0, target, rho=rho if self.certified else None)
        return float(e)


@float64
@dataclasses.dataclass(frozen=True, eq=False)
class DiscretePLD:
    """A discrete PLD per direction (``"remove"``: y ~ P, loss ln P/Q; ``"add"``: y ~ Q, loss ln Q/P)."""

    directions: Mapping[str, DirectionPLD]

    def __post_init__(self) -> None:
        if not isinstance(self.directions, Mapping) or not self.directions:
            raise ValueError("directions must be a non-empty mapping direction -> DirectionPLD")
        hs = set()
        for d, p in self.directions.items():
            if d not in DIRECTIONS:
                raise ValueError(f"direction must be one of {DIRECTIONS}; got {d!r}")
            if not isinstance(p, DirectionPLD):
                raise ValueError(f"directions[{d!r}] must be a DirectionPLD, got {type(p).__name__}")
            hs.add(p.value_discretization_interval)
        h0 = next(iter(hs))
        if not all(same_grid(h0, h) for h in hs):
            raise ValueError("all directions must share one value_discretization_interval")
        object.__setattr__(self, "directions", dict(self.directions))

    @property
    def value_discretization_interval(self) -> float:
        """The loss grid spacing :math:`h` of every direction."""
        return next(iter(self.directions.values())).value_discretization_interval

    @property
    def certified(self) -> bool:
        """``True`` iff no Monte Carlo data went into this PLD (then it is a pessimistic bound)."""
        return all(p.certified for p in self.directions.values())

    def __getitem__(self, direction: str) -> DirectionPLD:
        return self.directions[direction]

    def compose(self, other: "DiscretePLD") -> "DiscretePLD":
        """Composition, direction by direction (directions present in both); ``ValueError`` if there are none."""
        if not isinstance(other, DiscretePLD):
            raise ValueError(f"can only compose with a DiscretePLD, got {type(other).__name__}")
        common = [d for d in DIRECTIONS if d in self.directions and d in other.directions]
        if not common:
            raise ValueError("the two PLDs have no direction in common")
        return DiscretePLD({d: self.directions[d].compose(other.directions[d]) for d in common})

    def delta(self, epsilon: float) -> float:
        """Max over directions of :meth:`DirectionPLD.delta` at ``epsilon`` (checked, ``>= 0``)."""
        eps = check_epsilon(epsilon)
        return max(float(p.delta(eps)[0]) for p in self.directions.values())

    def epsilon(self, delta: float) -> float:
        """Max over directions of :meth:`DirectionPLD.epsilon` at ``delta`` (checked, in ``(0, 1)``)."""
        dl = check_delta(delta)
        return max(p.epsilon(dl) for p in self.directions.values())


@float64
def identity_pld(value_discretization_interval: float = DEFAULT_H) -> DiscretePLD:
    """The no-op mechanism: loss 0 with probability 1 in both directions (neutral for composition)."""
    h = check_value_interval(value_discretization_interval)
    return DiscretePLD({d: DirectionPLD(h, 0, np.ones(1), 0.0, True) for d in DIRECTIONS})


@float64
def compose(*plds: DiscretePLD) -> DiscretePLD:
    """Composition of several :class:`DiscretePLD` (at least one, else ``ValueError``)."""
    if not plds:
        raise ValueError("compose needs at least one DiscretePLD")
    return functools.reduce(lambda a, b: a.compose(b), plds)


# --------------------------------------------------------------------------
# PLD-analysed mechanisms (adapter to mcacct.pld internals)
# --------------------------------------------------------------------------
@functools.lru_cache(maxsize=32)
def _mechanism_pld_cached(spec, h: float, method: str) -> DiscretePLD:
    canon = canonical(spec)
    sigma = float(spec.sigma)
    n_lo, kk = plan(canon, sigma, h)
    k_stat = bucket(kk)
    steps = jnp.asarray(canon.steps, dtype=jnp.int64)
    pmfs, infs, offs, x_lo, x_hi, lms = single_batch(
        jnp.asarray(canon.c[None, :] / sigma), jnp.asarray(np.log(canon.p)), jnp.asarray(canon.p),
        jnp.asarray([n_lo]), steps, h, K=k_stat, method=method, solver=solver_for(canon.c))
    x_lo, x_hi = np.asarray(x_lo), np.asarray(x_hi)
    a_start = np.floor(x_lo / h).astype(np.int64) - 1
    n_fft = bucket(int(np.max(np.ceil(x_hi / h).astype(np.int64) - a_start + 2)))
    check_grid(n_fft, h, sigma=sigma)  # before the composition is allocated
    # window [a_start, a_start + n_fft): mass above it is added to `inf`, mass below aliases upwards
    out, inf, _, _, _ = compose_arrays_batch(pmfs, offs, infs, lms, jnp.asarray(a_start), steps, h, N=n_fft)
    out, inf = np.asarray(out)[0], np.asarray(inf)[0]
    if not (np.all(np.isfinite(out)) and np.all(np.isfinite(inf))):  # a numerical failure, never a PLD
        raise ValueError(
            f"the composed PLD of {type(spec).__name__} at sigma={sigma:g} with value_discretization_interval={h:g} "
            "is not finite (a numerical failure of the discretisation or composition, not a bound); try another "
            "value_discretization_interval or a larger sigma")
    return DiscretePLD({d: DirectionPLD(h, int(a_start[0, i]), out[i], float(min(inf[i], 1.0)), True)
                        for i, d in enumerate(DIRECTIONS)})


@float64
def mechanism_pld(spec: Any, value_discretization_interval: float = DEFAULT_H,
                  discretization: str = "connect_dots") -> DiscretePLD:
    """The pessimistic, already self-composed PLD of an :mod:`mcacct.pld` ``*Spec`` (both directions).

    Built with the internals of :mod:`mcacct.pld` (same discretisation, FFT power and Chernoff
    window as :func:`mcacct.pld.pld_delta`, whose value it reproduces), returned on its window
    instead of being queried.

    Parameters
    ----------
    spec : MechanismSpec
    value_discretization_interval : float, default 1e-4
    discretization : {"connect_dots", "round_up"}

    Returns
    -------
    DiscretePLD

    Raises
    ------
    ValueError
        For a non-spec, an argument out of range, a grid above the memory budget or a non-finite result.
    """
    if isinstance(spec, DiscretePLD):
        raise ValueError("mechanism_pld expects a *Spec; a DiscretePLD can be composed directly")
    if not isinstance(spec, SPEC_TYPES):
        raise ValueError("PLD mechanisms must be mcacct.pld *Spec instances (GaussianSpec, PoissonGaussianSpec, "
                         f"...) or DiscretePLD; got {type(spec).__name__}")
    h = check_value_interval(value_discretization_interval)
    method = check_discretization(discretization)
    try:
        hash(spec)
    except TypeError:  # pragma: no cover - specs are frozen dataclasses
        return _mechanism_pld_cached.__wrapped__(spec, h, method)
    return _mechanism_pld_cached(spec, h, method)


def _atom(x: float, a: float, h: float, method: str) -> dict[int, float]:
    """A loss atom at ``x`` with P-mass ``a`` (Q-mass ``a e^{-x}``) moved pessimistically onto the grid."""
    j1 = math.ceil(x / h)
    if method == "round_up" or j1 * h == x:
        return {j1: a}
    j0 = j1 - 1
    # connect-the-dots: keep the P- and Q-mass of the atom on its cell's end points (chord bound)
    beta = a * (-math.expm1(j0 * h - x)) / (-math.expm1(-h))
    beta = min(max(beta, 0.0), a)
    return {j1: beta, j0: a - beta}


@float64
def privacy_parameters_pld(epsilon: float, delta: float, value_discretization_interval: float = DEFAULT_H,
                           discretization: str = "connect_dots") -> DiscretePLD:
    r"""Pessimistic PLD of *any* :math:`(\varepsilon,\delta)`-DP mechanism (a certificate).

    The four-point dominating pair (Kairouz et al. 2015; ``dp_accounting``'s ``from_privacy_parameters``): loss
    :math:`+\infty` w.p. :math:`\delta`, :math:`+\varepsilon` w.p. :math:`(1-\delta)/(1+e^{-\varepsilon})`,
    :math:`-\varepsilon` w.p. :math:`(1-\delta)/(1+e^{\varepsilon})`; the pair is symmetric, so both directions
    agree. The two atoms are put on the grid by ``"connect_dots"`` (default; keeps their P- and Q-mass, a chord
    bound, slightly tighter) or ``"round_up"`` (``dp_accounting``'s rule: loss rounded up).

    Parameters
    ----------
    epsilon : float
        :math:`\varepsilon\ge0`.
    delta : float
        :math:`\delta\in[0,1)`.
    value_discretization_interval, discretization : float, {"connect_dots", "round_up"}
        The grid spacing :math:`h \in (0, 0.1]` (default ``1e-4``) and the rule above.

    Returns
    -------
    DiscretePLD
        Both directions the same pmf, with ``infinity_mass`` :math:`\delta` (plus ``UNDERFLOW``, Notes).

    Notes
    -----
    The masses are formed with :math:`e^{-\varepsilon}` only, :math:`(1-\delta)/(1+e^{-\varepsilon})` and
    :math:`(1-\delta)e^{-\varepsilon}/(1+e^{-\varepsilon})`, so a large :math:`\varepsilon` cannot overflow
    (:math:`e^{\varepsilon}` did beyond 709.78, an ``OverflowError``). Where the mass of the :math:`-\varepsilon` atom
    underflows to 0 (:math:`\varepsilon>745`), that atom is left out and :data:`~mcacct.pld.constants.UNDERFLOW` (far
    above its true mass, below :math:`e^{-745}`) is added to the mass at :math:`+\infty` instead: moving mass up is
    pessimistic. The grid spans both atoms (about :math:`2\varepsilon/h` points), so it is checked against the memory
    budget before it is allocated (``ValueError`` naming ``value_discretization_interval``).

    Raises
    ------
    ValueError
        For arguments out of range, a grid larger than the memory budget, or :math:`\varepsilon/h\ge2^{52}`
        (grid indices beyond exact integers).
    """
    eps = check_epsilon(epsilon)
    if not is_real_number(delta) or not math.isfinite(delta) or not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {plain(delta)!r}")
    dl = float(delta)
    h = check_value_interval(value_discretization_interval)
    method = check_discretization(discretization)
    if eps / h >= 2.0 ** 52:
        raise ValueError(f"epsilon / value_discretization_interval must be below 2^52 (grid indices); got epsilon="
                         f"{eps:g} and value_discretization_interval={h:g}")
    w = math.exp(-eps)  # e^{-eps} <= 1: no overflow (the former 1 + e^{eps} overflowed beyond eps = 709.78)
    atoms = [(eps, (1.0 - dl) / (1.0 + w)), (-eps, (1.0 - dl) * w / (1.0 + w))]
    inf = dl
    if atoms[1][1] == 0.0:  # e^{-eps} underflowed: move that atom (< 1e-323) to +inf, which is pessimistic
        atoms, inf = atoms[:1], min(dl + UNDERFLOW, 1.0)
    check_grid(2 * math.ceil(eps / h) + 3 if len(atoms) == 2 else 3, h,
               what=f"the PLD of an (epsilon={eps:g}, delta) pair (two atoms {2 * eps:g} apart)")
    masses: dict[int, float] = {}
    for x, a in atoms:
        for j, m in _atom(x, a, h, method).items():
            masses[j] = masses.get(j, 0.0) + m
    lo, hi = min(masses), max(masses)
    pmf = np.zeros(hi - lo + 1)
    for j, m in masses.items():
        pmf[j - lo] += m
    return DiscretePLD({d: DirectionPLD(h, lo, pmf, inf, True) for d in DIRECTIONS})
