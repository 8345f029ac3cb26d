r"""Composition of a Monte Carlo-analysed mechanism with PLD-analysed mechanisms.

A training run may consist of one part whose privacy is only known through the Monte Carlo
accountant (e.g. DP-BandMF with b-min-sep sampling, :mod:`mcacct.accountant`) and further parts
that the FFT PLD accountant handles exactly (:mod:`mcacct.pld`: Gaussian, Poisson-subsampled
Gaussian, ...). This module composes them, in the two ways the reference library
(``dp_accounting``) allows.

Two kinds of output -- do not mix them up
-----------------------------------------
**Estimates** (:func:`compose_mc_with_pld` -> :class:`CompositionEstimate`, ``certified=False``).
The Monte Carlo loss histogram of one noise level ``sigma`` is turned into an *empirical* privacy
loss distribution (:func:`empirical_pld_from_stats`) and FFT-convolved with the pessimistic PLDs
of the other mechanisms. With
:math:`f(x)=\mathbb E[(1-e^{\varepsilon-x-L_{\rm PLD}})_+]\in[0,1]` the composed
:math:`\delta(\varepsilon)` is exactly an empirical mean of :math:`[0,1]`-valued terms (one or
two sample sets -- the two directions share one key, see below), so besides the point estimate Chernoff-KL
:math:`(1-\alpha)` *confidence* bounds are reported (``delta_upper``, ``delta_lower``,
``epsilon_upper``), as :meth:`mcacct.accountant.Estimate.delta` does for the MC part alone. They
are statistical statements about one fixed ``sigma`` and a query fixed before sampling -- **not**
Estimate-Verify-Release certificates.

**Certificates** (:func:`certified_composition` -> :class:`CompositionCertificate`,
``certified=True``). Input: an :math:`(\varepsilon_1,\delta_1)` pair for which the MC-analysed
mechanism is *certified* DP, e.g. ``(result.epsilon, result.overall_delta)`` from
:func:`mcacct.calibrate` (EVR, Theorem A.1 of Dong & Ganesh 2026 [arXiv:2602.09338]: the released mechanism as a
whole is
:math:`(\varepsilon_1,\delta_1)`-DP). Two rules:

* ``method="dominating_pair"`` (default, what ``dp_accounting`` allows through
  ``PrivacyLossDistribution.from_privacy_parameters``): every
  :math:`(\varepsilon_1,\delta_1)`-DP mechanism is dominated by the four-point pair of Kairouz,
  Oh & Viswanath (2015) whose PLD (both directions) is :math:`+\infty` w.p. :math:`\delta_1`,
  :math:`+\varepsilon_1` w.p. :math:`(1-\delta_1)/(1+e^{-\varepsilon_1})` and
  :math:`-\varepsilon_1` w.p. :math:`(1-\delta_1)/(1+e^{\varepsilon_1})`
  (:func:`privacy_parameters_pld`). Dominating pairs compose (Zhu, Dong & Wang 2022; Ganesh 2024 [arXiv:2401.10294],
  Lemma 2.6), so the FFT composition of this PLD with the pessimistic PLDs of the other
  mechanisms is an upper bound on the privacy curve of the composition (up to float round-off).
* ``method="basic"``: basic composition -- if :math:`M_1` is :math:`(\varepsilon_1,\delta_1)`-DP
  and :math:`M_2` is :math:`(\varepsilon_2,\delta_2)`-DP then :math:`(M_1,M_2)` (even adaptively)
  is :math:`(\varepsilon_1+\varepsilon_2,\delta_1+\delta_2)`-DP, with
  :math:`(\varepsilon_2,\delta_2)` read off the composed PLD of the other mechanisms. Never
  tighter than ``"dominating_pair"``; kept as a simple, independent cross-check.

The empirical PLD, its negative part and its grid: :mod:`mcacct.composition.empirical`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

from mcacct.pld.constants import DEFAULT_H
from mcacct.pld.discrete import (DirectionPLD, DiscretePLD, compose, identity_pld, mechanism_pld,
                                 privacy_parameters_pld, same_grid)
from mcacct.pld.specs import SPEC_TYPES
from mcacct.pld.checks import check_discretization, check_epsilon, is_real_number, plain
from mcacct.statistics.accumulators import DIRECTIONS, epsilon_from_delta_curve
from mcacct.statistics.confidence import kl_lower_confidence, kl_upper_confidence
from mcacct.core.precision import float64
from mcacct.composition.empirical import (add_parts, check_h, check_query, empirical_parts, negative_mode,
                                          opposite_direction, stats_of)

__all__ = ["CompositionEstimate", "CompositionCertificate", "compose_mc_with_pld", "certified_composition"]

def _pld_part(pld_mechanisms: Any, h: float, method: str) -> DiscretePLD:
    """Composed PLD of the (certified) PLD mechanisms; the identity for an empty sequence."""
    if isinstance(pld_mechanisms, (DiscretePLD,) + SPEC_TYPES):
        pld_mechanisms = [pld_mechanisms]
    if isinstance(pld_mechanisms, (str, bytes)) or not isinstance(pld_mechanisms, Sequence):
        raise ValueError("pld_mechanisms must be a sequence of mcacct.pld *Spec or DiscretePLD objects, "
                         f"got {type(pld_mechanisms).__name__}")
    parts = []
    for m in pld_mechanisms:
        if isinstance(m, DiscretePLD):
            if not m.certified:
                raise ValueError("pld_mechanisms must be certified PLDs; an empirical (Monte Carlo) PLD "
                                 "cannot be composed here (its sampling error would not be accounted)")
            if not same_grid(m.value_discretization_interval, h):
                raise ValueError(
                    f"DiscretePLD has value_discretization_interval {m.value_discretization_interval!r}, "
                    f"expected {h!r}")
            if any(d not in m.directions for d in DIRECTIONS):
                raise ValueError("DiscretePLD in pld_mechanisms must have both directions")
            parts.append(m)
        else:
            parts.append(mechanism_pld(m, h, method))
    return compose(identity_pld(h), *parts)


def _is_identity(p: DiscretePLD) -> bool:
    return all(q.offset == 0 and q.pmf.size == 1 and q.pmf[0] == 1.0 and q.infinity_mass == 0.0
               for q in p.directions.values())


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------
@float64
@dataclasses.dataclass(frozen=True)
class CompositionEstimate:
    r"""Monte Carlo *estimate* of the composition (``certified`` is always ``False``).

    Attributes
    ----------
    epsilon, delta : float
        Point estimate (max over directions); one of them is the query.
    epsilon_upper, delta_upper : float
        :math:`(1-\alpha)` Chernoff-KL upper *confidence* bound (``alpha`` split over the
        directions); the query field repeats the query. Not an EVR certificate.
    delta_lower : float
        Matching lower confidence bound on :math:`\delta` for an ``epsilon`` query (``nan`` otherwise).
    per_direction : dict
        ``{direction: {"epsilon", "delta", "epsilon_upper", "delta_upper", "num_samples",
        "negative_mass"}}`` where ``negative_mass`` is the empirical :math:`\Pr[L\le0]` collapsed to 0.
    alpha : float
    num_samples : int
        Smallest per-direction sample count.
    infinity_mass : float
        Mass at :math:`+\infty` of the composed PLD (max over directions).
    value_discretization_interval : float
    """

    epsilon: float
    delta: float
    epsilon_upper: float
    delta_upper: float
    delta_lower: float
    per_direction: dict
    alpha: float
    num_samples: int
    infinity_mass: float
    value_discretization_interval: float
    certified: bool = False


@float64
@dataclasses.dataclass(frozen=True)
class CompositionCertificate:
    r"""Certified (pessimistic) :math:`(\varepsilon,\delta)` of the composition (``certified=True``).

    Valid whenever the Monte Carlo-analysed mechanism is :math:`(\varepsilon_1,\delta_1)`-DP
    (``mc_epsilon``, ``mc_delta``) -- e.g. by EVR -- up to float round-off (about 1e-12 absolute).

    Attributes
    ----------
    epsilon, delta : float
        The certified pair (one is the query).
    method : str
        ``"dominating_pair"`` or ``"basic"``.
    mc_epsilon, mc_delta : float
        The input certificate of the MC part.
    pld_epsilon, pld_delta : float
        For ``"basic"``: the split used for the PLD part (``epsilon - mc_epsilon``,
        ``delta - mc_delta``); ``nan`` for ``"dominating_pair"``.
    epsilon_remove, epsilon_add, delta_remove, delta_add : float
        Per direction (for ``"basic"`` those of the PLD part plus the MC pair).
    infinity_mass : float
    value_discretization_interval : float
    discretization : str
    """

    epsilon: float
    delta: float
    method: str
    mc_epsilon: float
    mc_delta: float
    pld_epsilon: float
    pld_delta: float
    epsilon_remove: float
    epsilon_add: float
    delta_remove: float
    delta_add: float
    infinity_mass: float
    value_discretization_interval: float
    discretization: str
    certified: bool = True


# --------------------------------------------------------------------------
# Public composition API
# --------------------------------------------------------------------------
@float64
def compose_mc_with_pld(estimate_or_stats: Any, pld_mechanisms: Any = (), epsilon: float | None = None,
                        delta: float | None = None, *, alpha: float | None = None,
                        negative_part: str = "auto", value_discretization_interval: float | None = None,
                        discretization: str = "connect_dots", direction: str = "remove") -> CompositionEstimate:
    r"""Point *estimate* (plus confidence bounds) of :math:`\delta(\varepsilon)` or :math:`\varepsilon(\delta)`
    of the Monte Carlo-analysed mechanism composed with PLD-analysed mechanisms.

    Per direction, the empirical PLD of the MC histogram (:func:`empirical_pld_from_stats`) is
    FFT-convolved with the pessimistic PLD of every mechanism in ``pld_mechanisms``; the reported
    value is the max over the directions present.

    Confidence bounds. With :math:`f(x)=\mathbb E[(1-e^{\varepsilon-x-L_{\rm PLD}})_+]\in[0,1]`
    (:math:`f(+\infty)=1`) the composed :math:`\delta(\varepsilon)` is

    * ``negative_part="zero"``: the mean of :math:`f(\lceil L_i\rceil^+)` over this direction's
      samples;
    * ``negative_part="mirror"``: the mean of :math:`f(\lceil L_i\rceil)1[L_i>0]` over this
      direction's samples *plus* the mean of :math:`e^{-L'_j}f(-L'_j)1[L'_j>0]` (rounded up) over
      the opposite direction's samples -- an unbiased estimate up to the bin rounding, without the
      bias :math:`\le\Pr[L\le0]\,\delta_{\rm PLD}(\varepsilon)` of ``"zero"``. The two
      directions of an :func:`mcacct.estimate` are drawn on the same keys (chunk ``c`` of the run:
      ``fold_in(key, c)`` for both, :mod:`mcacct.engine.runner`), so the two sample sets are
      dependent; each mean is still over i.i.d. samples of its own direction, which is all its
      bound needs.

    Each mean is of :math:`[0,1]`-valued i.i.d. terms, so :func:`mcacct.evr.kl_upper_confidence` /
    ``kl_lower_confidence`` bound it; ``alpha`` is split (union bound) over the directions and,
    for ``"mirror"``, over the two means. The union bound needs no independence between them: each
    bound holds with its share of ``alpha`` marginally, whatever the dependence, so all hold at
    once with probability at least ``1 - alpha`` (docs/soundness.md, "Shared draws").
    ``delta_upper`` is then a :math:`(1-\alpha)` upper confidence bound for this noise level and
    a query fixed in advance; ``epsilon_upper`` is the smallest :math:`\varepsilon` (to 1e-6,
    rounded up) where that bound meets ``delta``. These are statistical statements, not
    certificates; for a certificate use :func:`certified_composition`.

    Parameters
    ----------
    estimate_or_stats : Estimate, DirectionStats or mapping direction -> DirectionStats
        The Monte Carlo result (:func:`mcacct.accountant.estimate`).
    pld_mechanisms : sequence of mcacct.pld ``*Spec`` or certified :class:`DiscretePLD`
        The other mechanisms (each spec is already its ``steps``-fold composition); empty =
        no composition (reproduces the MC histogram estimate).
    epsilon, delta : float
        Exactly one: the query.
    alpha : float, optional
        Confidence level of the bounds; default the estimate's ``alpha`` (or 0.01).
    negative_part : {"auto", "mirror", "zero"}
        How the collapsed :math:`L\le0` bin is treated (``"auto"``: ``"mirror"`` when both
        directions are present, else ``"zero"``).
    value_discretization_interval : float, optional
        Grid spacing; default histogram width / 8.
    discretization : {"connect_dots", "round_up"}
        For the PLD mechanisms.
    direction : str
        Direction of a bare ``DirectionStats``.

    Returns
    -------
    CompositionEstimate
    """
    stats, est_alpha = stats_of(estimate_or_stats, direction)
    eps_q, dl_q = check_query(epsilon, delta)
    mirror = negative_mode(negative_part, stats)
    if alpha is None:
        alpha = est_alpha if est_alpha is not None else 0.01
    if not is_real_number(alpha) or not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {plain(alpha)!r}")
    alpha = float(alpha)
    method = check_discretization(discretization)
    h = value_discretization_interval
    if h is None:
        h = min(float(s.spec.width) for s in stats.values()) / 8
    h = check_h(h)
    part = _pld_part(pld_mechanisms, h, method)
    if _is_identity(part) and negative_part == "auto":
        mirror = False  # nothing to compose: L <= 0 contributes 0 at every epsilon >= 0 either way
    a_one = alpha / (len(stats) * (2 if mirror else 1))
    # per direction: list of (composed part, number of samples behind it); delta is their sum
    parts: dict[str, list[tuple[DirectionPLD, int]]] = {}
    per: dict[str, dict] = {}
    for d, s in stats.items():
        opp = stats[opposite_direction(d)] if mirror else None
        pos, neg = empirical_parts(s, h, opp)
        parts[d] = [(pos.compose(part[d]), s.count)]
        if neg is not None:
            parts[d].append((neg.compose(part[d]), opp.count))
        per[d] = {"num_samples": int(s.count), "negative_mass": float(s.hist[0]) / s.count,
                  "negative_part": "mirror" if mirror else "zero"}

    def point(d: str, e: float) -> float:
        return min(1.0, sum(float(c.delta(e)[0]) for c, _ in parts[d]))

    def upper(d: str, e: float) -> float:
        return min(1.0, sum(kl_upper_confidence(min(float(c.delta(e)[0]), 1.0), n, a_one) for c, n in parts[d]))

    def lower(d: str, e: float) -> float:
        return sum(kl_lower_confidence(min(float(c.delta(e)[0]), 1.0), n, a_one) for c, n in parts[d])

    low = float("nan")
    if eps_q is not None:
        for d in stats:
            per[d].update(epsilon=eps_q, delta=point(d, eps_q), epsilon_upper=eps_q,
                          delta_upper=upper(d, eps_q), delta_lower=lower(d, eps_q))
        e_out, e_up = eps_q, eps_q
        d_out = max(v["delta"] for v in per.values())
        d_up = max(v["delta_upper"] for v in per.values())
        low = max(v["delta_lower"] for v in per.values())
    else:
        eps_hi = max(float(c.losses[-1]) for d in parts for c, _ in parts[d]) + h
        for d in stats:
            merged = functools.reduce(add_parts, [c for c, _ in parts[d]])
            eu = epsilon_from_delta_curve(lambda e, _d=d: upper(_d, e), dl_q, eps_hi)
            per[d].update(delta=dl_q, epsilon=merged.epsilon(dl_q), delta_upper=dl_q, epsilon_upper=eu)
        d_out, d_up = dl_q, dl_q
        e_out = max(v["epsilon"] for v in per.values())
        e_up = max(v["epsilon_upper"] for v in per.values())
    inf = max(sum(c.infinity_mass for c, _ in parts[d]) for d in parts)
    return CompositionEstimate(
        epsilon=float(e_out), delta=float(d_out), epsilon_upper=float(e_up), delta_upper=float(d_up),
        delta_lower=float(low), per_direction=per, alpha=alpha,
        num_samples=min(s.count for s in stats.values()),
        infinity_mass=float(min(inf, 1.0)), value_discretization_interval=h)


@float64
def certified_composition(mc_epsilon: float, mc_delta: float, pld_mechanisms: Any = (),
                          epsilon: float | None = None, delta: float | None = None, *,
                          method: str = "dominating_pair",
                          value_discretization_interval: float = DEFAULT_H,
                          discretization: str = "connect_dots",
                          pair_discretization: str | None = None) -> CompositionCertificate:
    r"""*Certified* :math:`\delta(\varepsilon)` or :math:`\varepsilon(\delta)` of an
    :math:`(\varepsilon_1,\delta_1)`-DP mechanism composed with PLD-analysed mechanisms.

    ``method="dominating_pair"`` (default): FFT composition of the four-point PLD
    (:func:`privacy_parameters_pld`) with the pessimistic PLDs of ``pld_mechanisms`` --
    ``dp_accounting``'s ``from_privacy_parameters(...).compose(...)``.

    ``method="basic"``: basic composition,
    :math:`(\varepsilon_1+\varepsilon_2,\ \delta_1+\delta_2)`, with
    :math:`\delta_2=\delta_{\rm PLD}(\varepsilon-\varepsilon_1)` (query ``epsilon``, needs
    :math:`\varepsilon\ge\varepsilon_1`) or
    :math:`\varepsilon_2=\varepsilon_{\rm PLD}(\delta-\delta_1)` (query ``delta``, needs
    :math:`\delta>\delta_1`). Always at least the ``"dominating_pair"`` value.

    Parameters
    ----------
    mc_epsilon, mc_delta : float
        A certified pair of the MC-analysed mechanism (e.g. ``CalibrationResult.epsilon`` and
        ``.overall_delta``): :math:`\varepsilon_1\ge0`, :math:`\delta_1\in[0,1)`.
    pld_mechanisms : sequence of mcacct.pld ``*Spec`` or certified :class:`DiscretePLD`
    epsilon, delta : float
        Exactly one: the query.
    method : {"dominating_pair", "basic"}
    value_discretization_interval : float, default 1e-4
    discretization : {"connect_dots", "round_up"}
        Used for the PLD mechanisms.
    pair_discretization : {"connect_dots", "round_up"}, optional
        For the two finite atoms of the four-point PLD; default ``discretization``.
        ``"round_up"`` is ``dp_accounting``'s rule (``from_privacy_parameters``).

    Returns
    -------
    CompositionCertificate
    """
    e1 = check_epsilon(mc_epsilon)
    if not is_real_number(mc_delta) or not math.isfinite(mc_delta) or not 0.0 <= mc_delta < 1.0:
        raise ValueError(f"mc_delta must be in [0, 1), got {plain(mc_delta)!r}")
    d1 = float(mc_delta)
    eps_q, dl_q = check_query(epsilon, delta)
    if method not in ("dominating_pair", "basic"):
        raise ValueError(f"method must be 'dominating_pair' or 'basic', got {method!r}")
    h = check_h(value_discretization_interval)
    disc = check_discretization(discretization)
    pair_disc = disc if pair_discretization is None else check_discretization(pair_discretization)
    part = _pld_part(pld_mechanisms, h, disc)
    nan = float("nan")
    if method == "dominating_pair":
        comp = privacy_parameters_pld(e1, d1, h, pair_disc).compose(part)
        if eps_q is not None:
            dd = {d: float(comp[d].delta(eps_q)[0]) for d in DIRECTIONS}
            ee = {d: eps_q for d in DIRECTIONS}
        else:
            ee = {d: comp[d].epsilon(dl_q) for d in DIRECTIONS}
            dd = {d: dl_q for d in DIRECTIONS}
        pe, pd = nan, nan
        inf = max(comp[d].infinity_mass for d in DIRECTIONS)
    else:
        if eps_q is not None:
            if eps_q < e1:
                raise ValueError(f"basic composition needs epsilon >= mc_epsilon ({eps_q!r} < {e1!r})")
            pe = eps_q - e1
            dd = {d: min(1.0, d1 + float(part[d].delta(pe)[0])) for d in DIRECTIONS}
            ee = {d: eps_q for d in DIRECTIONS}
            pd = max(dd.values()) - d1
        else:
            if dl_q <= d1:
                raise ValueError(f"basic composition needs delta > mc_delta ({dl_q!r} <= {d1!r})")
            pd = dl_q - d1
            ee = {d: e1 + part[d].epsilon(pd) for d in DIRECTIONS}
            dd = {d: dl_q for d in DIRECTIONS}
            pe = max(ee.values()) - e1
        inf = max(part[d].infinity_mass for d in DIRECTIONS)
    return CompositionCertificate(
        epsilon=float(max(ee.values())), delta=float(max(dd.values())), method=method,
        mc_epsilon=e1, mc_delta=d1, pld_epsilon=float(pe), pld_delta=float(pd),
        epsilon_remove=float(ee["remove"]), epsilon_add=float(ee["add"]),
        delta_remove=float(dd["remove"]), delta_add=float(dd["add"]), infinity_mass=float(inf),
        value_discretization_interval=h, discretization=disc)
