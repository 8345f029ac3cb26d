r"""Heterogeneous composition: a list of mechanism events, each with a ``count``, accounted by the FFT PLD.

A training run rarely composes one mechanism with itself: schedules change :math:`q` and :math:`\sigma`,
evaluation releases add Gaussian queries. An :class:`Event` is one ``*Spec`` of :mod:`mcacct.pld` and a
``count``; a list of events is the (non-adaptive) composition of all of them, in both adjacency directions.

Method (pessimistic at every step)
----------------------------------
1. Equal events are merged (their counts add), so each *distinct* event is transformed once: its pessimistic,
   discretised single-step PLD is raised to its total count :math:`T_e` by one FFT power on a Chernoff window
   (:func:`mcacct.pld.discrete.mechanism_pld`, the same discretisation, window and round-off bound as
   :func:`mcacct.pld.pld_delta`; the :math:`\ell_1` round-off of the power is added to the mass at
   :math:`+\infty`). Specs without a ``steps`` field (cyclic-Poisson BandMF) are self-composed by binary
   powering of the composed PLD.
2. The per-event PLDs are convolved (zero-padded FFTs, :func:`mcacct.pld.convolution.convolve_with_bound`, whose
   :math:`\ell_1` round-off is again added to the mass at :math:`+\infty`), direction by direction; before each
   convolution the far tails are trimmed pessimistically (:func:`trim`: mass above the kept range goes to
   :math:`+\infty`, mass below it is moved *up* to the lowest kept loss), at most ``1e-30`` per side.
3. Queries (:func:`events_delta`, :func:`events_epsilon`) take the maximum over the two directions of the
   certified :meth:`~mcacct.pld.discrete.DirectionPLD.delta` / ``epsilon`` (relative and grid round-off
   included, epsilon rounded up). Dominating pairs compose (Ganesh 2024 [arXiv:2401.10294], Lemma 2.6), so the
   result is an upper bound on the privacy curve of the composition.

The error estimate of Koskela, Jälkö & Honkela 2020 (arXiv:1906.03049, eq. 7.4),
:math:`2|x_h-x_{h/2}|`, comes from a second run with half the grid spacing. The :math:`\ell_1` round-off terms
are absolute (about ``1e-10`` for a few thousand Poisson steps at ``h = 1e-4``), so a delta below the mass at
:math:`+\infty` gives ``epsilon = inf`` (the CLI refuses it, naming the level); for tinier deltas use
:func:`mcacct.pld.pld_epsilon` on a homogeneous composition, whose round-off is relative to the tail.

The events themselves, their JSON form and :func:`merge_events` are :mod:`mcacct.pld.vocabulary` (re-exported
here).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from mcacct.pld.constants import DEFAULT_H
from mcacct.pld.discrete import DIRECTIONS, DirectionPLD, DiscretePLD, compose, identity_pld, mechanism_pld
from mcacct.pld.checks import (check_answer, check_delta, check_discretization, check_epsilon, check_value_interval,
                               half_step)
from mcacct.core.precision import float64
from mcacct.pld.vocabulary import (EVENT_KINDS, Event, as_events, event_from_dict, event_to_dict, load_events,
                                   merge_events)

__all__ = ["EVENT_KINDS", "Event", "EventsResult", "as_events", "event_from_dict", "event_to_dict", "load_events",
           "merge_events", "composed_pld", "events_delta", "events_epsilon", "trim"]

TRIM_MASS = 1e-30


@float64
def trim(p: DirectionPLD, mass: float = TRIM_MASS) -> DirectionPLD:
    """Drop the far tails of ``p`` pessimistically.

    At most ``mass`` from the top goes to ``+inf`` and at most ``mass`` from the bottom is moved up to the lowest
    kept loss (both only raise every ``delta``).

    Parameters
    ----------
    p : DirectionPLD
        The PLD to trim.
    mass : float, default 1e-30
        Largest mass dropped on each side (:data:`TRIM_MASS`).

    Returns
    -------
    DirectionPLD
        The trimmed PLD (``p`` itself when nothing is dropped).
    """
    pmf = p.pmf
    csum = np.cumsum(pmf)
    lo = int(np.searchsorted(csum, mass, side="right"))            # pmf[:lo].sum() <= mass
    rsum = np.cumsum(pmf[::-1])
    hi = pmf.size - int(np.searchsorted(rsum, mass, side="right"))  # pmf[hi:].sum() <= mass
    lo, hi = min(lo, pmf.size - 1), max(hi, min(lo, pmf.size - 1) + 1)
    if lo == 0 and hi == pmf.size:
        return p
    kept = pmf[lo:hi].copy()
    kept[0] += float(pmf[:lo].sum())
    inf = min(1.0, p.infinity_mass + float(pmf[hi:].sum()))
    return DirectionPLD(p.value_discretization_interval, p.offset + lo, kept, inf, p.certified)


def _power(p: DiscretePLD, count: int) -> DiscretePLD:
    out, base = None, p
    while count:
        if count & 1:
            out = base if out is None else _trimmed_compose(out, base)
        count >>= 1
        if count:
            base = _trimmed_compose(base, base)
    return out


def _trimmed_compose(a: DiscretePLD, b: DiscretePLD) -> DiscretePLD:
    return compose(DiscretePLD({d: trim(a[d]) for d in DIRECTIONS}), DiscretePLD({d: trim(b[d]) for d in DIRECTIONS}))


@float64
def composed_pld(events: Any, value_discretization_interval: float = DEFAULT_H,
                 discretization: str = "connect_dots") -> DiscretePLD:
    r"""The pessimistic PLD (both directions) of the composition of ``events`` (module docstring).

    Parameters
    ----------
    events : Any
        The composed mechanisms, in any form :func:`as_events` accepts.
    value_discretization_interval : float, default 1e-4
        Loss grid spacing :math:`h\in(0, 0.1]`.
    discretization : {"connect_dots", "round_up"}
        Pessimistic discretisation rule of every event.

    Returns
    -------
    DiscretePLD

    Raises
    ------
    ValueError
        For invalid events or arguments, or a grid above the memory budget.
    """
    evs = as_events(events)
    h = check_value_interval(value_discretization_interval)
    method = check_discretization(discretization)
    out = identity_pld(h)
    for spec, count in ((e.spec, e.count) for e in merge_events(evs)):
        if "steps" in {f.name for f in dataclasses.fields(spec)}:
            part = mechanism_pld(dataclasses.replace(spec, steps=spec.steps * count), h, method)
        else:
            part = _power(mechanism_pld(spec, h, method), count)
        out = _trimmed_compose(out, part)
    return out


@float64
@dataclasses.dataclass(frozen=True)
class EventsResult:
    """A certified point of the privacy curve of a composition of events: ``(epsilon, delta)`` (the larger of
    the two directions), the per-direction values, the mass at ``+inf`` (round-off bounds and window tails
    included), the error estimate of Koskela, Jälkö & Honkela (arXiv:1906.03049) of the reported quantity
    (``nan`` when not requested), the grid, and the events (merged) as JSON objects."""

    epsilon: float
    delta: float
    epsilon_remove: float
    epsilon_add: float
    delta_remove: float
    delta_add: float
    infinity_mass: float
    error_estimate: float
    value_discretization_interval: float
    discretization: str
    events: tuple
    certified: bool = True

    def __post_init__(self) -> None:
        check_answer(self)  # never a nan epsilon / delta, nor an infinite delta

    def to_dict(self) -> dict:
        """JSON-serialisable fields (infinities as strings, nan as None).

        Returns
        -------
        dict
        """
        out = {}
        for k, v in dataclasses.asdict(self).items():
            if isinstance(v, float) and not math.isfinite(v):
                v = None if math.isnan(v) else ("inf" if v > 0 else "-inf")
            out[k] = v
        out["events"] = [dict(e) for e in self.events]
        return out


def _query(evs: list[Event], h: float, method: str, eps: float | None, dl: float | None) -> dict[str, float]:
    pld = composed_pld(evs, h, method)
    if eps is not None:
        return {d: float(pld[d].delta(eps)[0]) for d in DIRECTIONS} | {"inf": max(pld[d].infinity_mass
                                                                               for d in DIRECTIONS)}
    return {d: pld[d].epsilon(dl) for d in DIRECTIONS} | {"inf": max(pld[d].infinity_mass for d in DIRECTIONS)}


def _result(events: Any, eps: float | None, dl: float | None, h: float, method: str,
            estimate_error: bool) -> EventsResult:
    evs = as_events(events)
    h = check_value_interval(h)
    method = check_discretization(method)
    r = _query(evs, h, method, eps, dl)
    merged = tuple(event_to_dict(e) for e in merge_events(evs))
    err = math.nan
    if estimate_error:
        r2 = half_step(lambda: _query(evs, h / 2, method, eps, dl), h)
        top, top2 = max(r[d] for d in DIRECTIONS), max(r2[d] for d in DIRECTIONS)
        err = 2 * abs(top - top2) if math.isfinite(top) and math.isfinite(top2) else math.nan
    if eps is not None:
        return EventsResult(eps, max(r["remove"], r["add"]), eps, eps, r["remove"], r["add"], r["inf"], err, h,
                            method, merged)
    return EventsResult(max(r["remove"], r["add"]), dl, r["remove"], r["add"], dl, dl, r["inf"], err, h, method,
                        merged)


@float64
def events_delta(events: Any, epsilon: float, *, value_discretization_interval: float = DEFAULT_H,
                 discretization: str = "connect_dots", estimate_error: bool = True) -> EventsResult:
    r"""Upper bound on :math:`\delta(\varepsilon)` of the composition of ``events`` (max over add and remove).

    Parameters
    ----------
    events : sequence of Event, ``*Spec``, ``(spec, count)`` or dict
        The composed mechanisms (:func:`as_events`).
    epsilon : float
        :math:`\varepsilon\ge0`.
    value_discretization_interval, discretization : float, {"connect_dots", "round_up"}
        Loss grid spacing :math:`h\in(0, 0.1]` (default 1e-4); pessimistic discretisation rule of every event.
    estimate_error : bool, default True
        Also compose on :math:`h/2` and report :math:`2|\delta_h-\delta_{h/2}|`.

    Returns
    -------
    EventsResult
    """
    return _result(events, check_epsilon(epsilon), None, value_discretization_interval, discretization,
                   estimate_error)


@float64
def events_epsilon(events: Any, delta: float, *, value_discretization_interval: float = DEFAULT_H,
                   discretization: str = "connect_dots", estimate_error: bool = True) -> EventsResult:
    r"""Upper bound on :math:`\varepsilon(\delta)` of the composition of ``events`` (max over add and remove).

    ``inf`` when ``delta`` is below the mass at :math:`+\infty`.

    Parameters
    ----------
    events : sequence of Event, ``*Spec``, ``(spec, count)`` or dict
        The composed mechanisms (:func:`as_events`).
    delta : float
        :math:`\delta\in(0,1)`.
    value_discretization_interval, discretization, estimate_error
        As in :func:`events_delta` (the error estimate is :math:`2|\varepsilon_h-\varepsilon_{h/2}|`).

    Returns
    -------
    EventsResult
        The certified point of the privacy curve.

    Raises
    ------
    ValueError
        For invalid events or arguments.
    """
    return _result(events, None, check_delta(delta), value_discretization_interval, discretization,
                   estimate_error)
