r"""A stateful PLD accountant that is a ``dp_accounting.PrivacyAccountant``.

Code written against ``dp_accounting`` composes events into an accountant object and asks it for
:math:`\varepsilon` or :math:`\delta` as training goes on, or hands a factory of fresh accountants to
``dp_accounting.calibrate_dp_mechanism``. :class:`PLDAccountant` subclasses ``dp_accounting.PrivacyAccountant``
on top of mcacct's certified composition of events (:mod:`mcacct.pld.events`), so it fits both::

    acc = mcacct.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(mcacct.pld.PoissonGaussianSpec(sampling_prob=0.01, sigma=1.0), count=1000)
    acc.compose(dp_event)                  # a dp_accounting DpEvent is accepted too
    acc.get_epsilon(target_delta=1e-6)     # a float, rounded up

    sigma = dp_accounting.calibrate_dp_mechanism(
        lambda: mcacct.pld.PLDAccountant(), lambda s: dp_accounting.GaussianDpEvent(s), 2.0, 1e-6)

What it keeps and computes
--------------------------
* :attr:`~PLDAccountant.ledger` is ``dp_accounting``'s: one ``DpEvent`` of everything composed
  (``NoOpDpEvent`` when nothing was, a ``ComposedDpEvent`` of several), built by ``dp_accounting``'s
  ``DpEventBuilder`` from the ``DpEvent``\ s as given and from the mcacct events as :func:`~mcacct.pld.to_dp_event`
  exports them (``dominating=True``: the group and cyclic-Poisson BandMF specs appear as the dominating pair their
  analysis reduces them to, the same privacy curve). ``calibrate_dp_mechanism`` reads it to check that a
  fresh accountant is empty. An event that composes no mechanism (``count=0``, a ``NoOpDpEvent`` or a
  composite of them, sampling probability 0) leaves it unchanged (``dp_accounting`` records such composites,
  and refuses ``count=0``).
* :attr:`~PLDAccountant.ledger_events` lists the mcacct :class:`~mcacct.pld.events.Event`\ s in the order they
  were composed (``DpEvent``\ s converted on arrival by :func:`~mcacct.pld.interop.dp_event_parts`; ``count``
  multiplies their counts); :attr:`~PLDAccountant.events` is the same list with equal mechanisms merged: what
  is accounted.
* A mechanism without privacy (``NonPrivateDpEvent``, or a Gaussian, Poisson-sampled Gaussian or mixture with
  zero noise, as ``dp_accounting`` reads them) makes every later query :math:`\varepsilon=\infty`,
  :math:`\delta=1` (:attr:`~PLDAccountant.non_private`); ``calibrate_dp_mechanism``'s default bracket starts
  at noise 0.
* Queries compose :attr:`~PLDAccountant.events` with :func:`~mcacct.pld.events.composed_pld` (pessimistic
  discretisation, FFT powers and convolutions with their round-off added to the mass at :math:`+\infty`) and read
  the certified curve of the larger of the two adjacency directions (add and remove one example), so every
  returned ``delta`` is an upper bound and every ``epsilon`` is rounded up (its query runs on the pmf padded with
  zeros to a power of two, so a calibration compiles it once per size bucket). The composed PLD is kept until the
  next :meth:`~PLDAccountant.compose` that adds something, so repeated queries of an unchanged ledger cost one
  query each, not a composition.
* :meth:`~PLDAccountant.get_epsilon_result` / :meth:`~PLDAccountant.get_delta_result` return the typed
  :class:`~mcacct.pld.events.EventsResult` of :func:`~mcacct.pld.events.events_epsilon` /
  :func:`~mcacct.pld.events.events_delta` (per-direction values, mass at :math:`+\infty`, and by default the
  Koskela-Jälkö-Honkela error estimate, which composes again at half the grid spacing).

Conventions (where ``dp_accounting`` is the model)
-------------------------------------------------
* ``neighboring_relation`` is ``NeighboringRelation.ADD_OR_REMOVE_ONE``, the only relation accepted (keyword
  only: the first positional parameter is ``value_discretization_interval``); group specs bound their group's
  add-or-remove adjacency. ``REPLACE_ONE`` and ``REPLACE_SPECIAL`` raise ``ValueError``.
* An empty ledger is the no-op mechanism, whose privacy curve is :math:`\delta(\varepsilon)=0` for every
  :math:`\varepsilon\ge0`: ``get_delta`` returns ``0.0`` and ``get_epsilon`` returns ``0.0``, as
  ``dp_accounting``'s PLD accountant does.
* :meth:`~PLDAccountant.supports` says whether :meth:`~PLDAccountant.compose` would accept an event, without
  composing it. An unsupported ``DpEvent`` (e.g. ``LaplaceDpEvent``) raises :class:`UnsupportedEventError`, which
  is both ``dp_accounting``'s ``UnsupportedEventError`` and a ``ValueError``, naming the offending sub-event;
  nothing of it is composed. Other bad arguments raise ``ValueError`` naming them; a Monte Carlo sampling scheme
  (``mcacct.BMinSep(...)``) gets a ``ValueError`` naming the Monte Carlo route
  (:func:`~mcacct.pld.interop.refuse_monte_carlo`).
* ``count`` may be 0 (nothing is composed); ``target_delta`` must be in ``(0, 1)`` and ``target_epsilon`` in
  ``[0, inf)``.
* The round-off bounds of the composition are absolute and sit in the mass at :math:`+\infty` (about
  ``1e-10`` after a few thousand Poisson steps), so ``get_epsilon`` of a smaller ``target_delta`` is ``inf``
  (:mod:`mcacct.pld.events`); for such deltas of one homogeneous mechanism use :func:`mcacct.pld.pld_epsilon`,
  whose round-off is relative to the tail.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
from dp_accounting import dp_event as dpe
from dp_accounting import privacy_accountant as dppa

from mcacct.pld.checks import check_discretization, check_value_interval
from mcacct.pld.constants import DEFAULT_H
from mcacct.pld.discrete import DirectionPLD, DiscretePLD
from mcacct.pld.events import (Event, EventsResult, as_events, composed_pld, event_to_dict, events_delta,
                               events_epsilon, merge_events)
from mcacct.pld.interop import dp_event_parts, is_dp_event, refuse_monte_carlo, to_dp_event
from mcacct.pld.plan import bucket
from mcacct.core.precision import float64
from mcacct.core.validate import check_bool, check_int, check_real

__all__ = ["PLDAccountant", "UnsupportedEventError", "NEIGHBORING_RELATIONS"]

#: The neighbouring relations :class:`PLDAccountant` accepts: add or remove one example (every mechanism is
#: accounted as the larger of its add and remove directions).
NEIGHBORING_RELATIONS = (dppa.NeighboringRelation.ADD_OR_REMOVE_ONE,)


class UnsupportedEventError(dppa.UnsupportedEventError, ValueError):
    """A ``DpEvent`` that :class:`PLDAccountant` cannot account: ``dp_accounting``'s ``UnsupportedEventError``
    (what code written for ``dp_accounting`` catches) and a ``ValueError`` (what mcacct raises for bad input)."""


def _target_delta(value: Any) -> float:
    return check_real("target_delta", value, low=0.0, high=1.0, low_open=True, high_open=True, strict=True)


def _target_epsilon(value: Any) -> float:
    return check_real("target_epsilon", value, low=0.0, strict=True)


def _neighboring_relation(value: Any) -> dppa.NeighboringRelation:
    if isinstance(value, dppa.NeighboringRelation) and value in NEIGHBORING_RELATIONS:
        return value
    allowed = ", ".join(f"NeighboringRelation.{r.name}" for r in NEIGHBORING_RELATIONS)
    raise ValueError(f"neighboring_relation must be one of {allowed} (mcacct's PLD accountant bounds the larger of "
                     f"the add and remove directions; for REPLACE_ONE or REPLACE_SPECIAL use "
                     f"dp_accounting.pld.PLDAccountant); got {value!r}")


def _bucketed(p: DirectionPLD) -> DirectionPLD:
    """``p`` with zero masses appended up to a power of two (:func:`~mcacct.pld.plan.bucket`): the same
    distribution, so the same certified query, its round-off terms those of the longer sum (more pessimistic by
    about ``n * 2**-53`` relative). The epsilon query compiles once per bucket instead of once per pmf length: a
    calibration composes a new length at every noise multiplier it tries."""
    n = p.pmf.size
    size = bucket(n)
    if size == n:
        return p
    return DirectionPLD(p.value_discretization_interval, p.offset, np.pad(p.pmf, (0, size - n)), p.infinity_mass,
                        p.certified)


def _children(event: Any) -> list[Any]:
    name = type(event).__name__
    if name == "ComposedDpEvent":
        return list(event.events)
    if name == "SelfComposedDpEvent":
        return [event.event]
    return []


def _refused_part(event: Any, err: ValueError) -> tuple[Any, str]:
    """The innermost part of ``event`` under its compositions (``ComposedDpEvent``, ``SelfComposedDpEvent``) that
    is refused on its own, and why (a sampled event counts as one part: ``PoissonSampledDpEvent`` of a
    ``LaplaceDpEvent``)."""
    for child in _children(event):
        try:
            dp_event_parts(child)
        except ValueError as inner:
            return _refused_part(child, inner)
    return event, str(err)


@float64
class PLDAccountant(dppa.PrivacyAccountant):
    r"""Stateful FFT PLD accountant, a ``dp_accounting.PrivacyAccountant``: :meth:`compose` events, then
    :meth:`get_epsilon` / :meth:`get_delta`.

    Parameters
    ----------
    value_discretization_interval : float, default 1e-4
        Loss grid spacing :math:`h\in(0, 0.1]` of every composition (mcacct's ``DEFAULT_H``).
    discretization : {"connect_dots", "round_up"}
        Pessimistic discretisation rule of every event (:mod:`mcacct.pld`).
    neighboring_relation : dp_accounting.NeighboringRelation, default ADD_OR_REMOVE_ONE
        Keyword only; ``ADD_OR_REMOVE_ONE`` is the only relation accepted (:data:`NEIGHBORING_RELATIONS`).

    Raises
    ------
    ValueError
        For a bad argument, named with its allowed values.
    """

    def __init__(self, value_discretization_interval: float = DEFAULT_H, discretization: str = "connect_dots", *,
                 neighboring_relation: dppa.NeighboringRelation = dppa.NeighboringRelation.ADD_OR_REMOVE_ONE
                 ) -> None:
        if isinstance(value_discretization_interval, dppa.NeighboringRelation):
            raise ValueError("value_discretization_interval must be a real number in (0, 0.1]; got "
                             f"{value_discretization_interval!r}: mcacct's PLDAccountant takes "
                             "value_discretization_interval first and neighboring_relation by keyword "
                             "(neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE)")
        self._h = check_value_interval(value_discretization_interval)
        self._method = check_discretization(discretization)
        super().__init__(_neighboring_relation(neighboring_relation))
        self._entries: list[Event] = []
        self._non_private = False
        self._pld: DiscretePLD | None = None  # the composition of the current entries, once queried

    def __repr__(self) -> str:
        extra = ", non-private" if self._non_private else ""
        return (f"PLDAccountant(value_discretization_interval={self._h!r}, discretization={self._method!r}, "
                f"ledger={len(self._entries)} events{extra})")

    @property
    def value_discretization_interval(self) -> float:
        """Loss grid spacing :math:`h` of the compositions."""
        return self._h

    @property
    def discretization(self) -> str:
        """Discretisation rule of every event."""
        return self._method

    @property
    def ledger(self) -> Any:
        r"""Everything composed, as one ``dp_accounting`` ``DpEvent`` (``NoOpDpEvent`` when nothing was).

        The ``DpEvent``\ s as given, the mcacct events as :func:`~mcacct.pld.to_dp_event` exports them
        (``dominating=True``)."""
        return self._ledger.build()

    @property
    def ledger_events(self) -> list[Event]:
        r"""The composed mcacct events in the order they were composed (a copy).

        ``DpEvent``\ s converted; a mechanism without privacy is not among them: :attr:`non_private`."""
        return list(self._entries)

    @property
    def events(self) -> list[Event]:
        """:attr:`ledger_events` with equal mechanisms merged (counts added): the composition that is accounted."""
        return merge_events(self._entries)

    @property
    def non_private(self) -> bool:
        """Whether a mechanism without privacy was composed (then ``epsilon = inf`` and ``delta = 1``)."""
        return self._non_private

    def _mcacct_events(self, event: Any) -> list[Event]:
        refuse_monte_carlo(event, "PLDAccountant.compose")
        return as_events(event)

    def _add(self, events: list[Event], count: int, non_private: bool) -> None:
        added = [Event(e.spec, e.count * count) for e in events if e.count * count > 0]
        if added:
            self._entries.extend(added)
            self._pld = None
        self._non_private = self._non_private or (non_private and count > 0)

    def _maybe_compose(self, event: Any, count: int, do_compose: bool
                       ) -> Optional[dppa.PrivacyAccountant.CompositionErrorDetails]:
        """``dp_accounting``'s traversal hook: check a ``DpEvent`` and, with ``do_compose``, account ``count``
        runs of it (the ledger is updated by :meth:`compose`). Returns ``None`` where it is supported, else the
        refused sub-event and why."""
        try:
            events, non_private = dp_event_parts(event)
        except ValueError as err:
            bad, why = _refused_part(event, err)
            return self.CompositionErrorDetails(invalid_event=bad, error_message=why)
        if do_compose:
            self._add(events, count, non_private)
        return None

    def supports(self, event: Any) -> bool:
        """Whether :meth:`compose` accepts ``event`` (nothing is composed).

        Parameters
        ----------
        event : Any
            A ``dp_accounting`` ``DpEvent``, or an mcacct :class:`~mcacct.pld.events.Event`, ``*Spec``,
            ``(spec, count)`` pair, JSON-style dict or a sequence of these.

        Returns
        -------
        bool
            ``True`` where the event converts to mcacct events or is a mechanism without privacy
            (``NoOpDpEvent`` and ``NonPrivateDpEvent`` included), else ``False``.
        """
        if is_dp_event(event):
            return self._maybe_compose(event, 0, False) is None
        try:
            self._mcacct_events(event)
        except (ValueError, TypeError):
            return False
        return True

    def compose(self, event: Any, count: int = 1) -> "PLDAccountant":
        """Add ``count`` compositions of ``event`` to the ledger.

        Parameters
        ----------
        event : Any
            As :meth:`supports`.
        count : int, default 1
            How many times ``event`` runs (an integer ``>= 0``; 0 composes nothing).

        Returns
        -------
        PLDAccountant
            ``self``, so calls chain: ``PLDAccountant().compose(a).compose(b, 10).get_epsilon(1e-6)``.

        Raises
        ------
        UnsupportedEventError
            For an unsupported ``DpEvent`` (the offending sub-event named); nothing of it is composed.
        ValueError
            For an unsupported or malformed mcacct event (named) or a bad ``count``.
        """
        n = check_int("count", count, low=0, strict=True)
        if is_dp_event(event):
            refused = self._maybe_compose(event, n, False)
            if refused is not None:
                raise UnsupportedEventError(f"unsupported event {event!r}: {refused.error_message} (sub-event "
                                            f"{refused.invalid_event!r})")
            events, non_private = dp_event_parts(event)
            if n and (events or non_private):  # the ledger records what composes a mechanism
                self._ledger.compose(event, n)
                self._add(events, n, non_private)
            return self
        added = [Event(e.spec, e.count * n) for e in self._mcacct_events(event) if e.count * n > 0]
        for e in added:
            self._ledger.compose(to_dp_event(e, dominating=True))
        self._add(added, 1, False)
        return self

    def _composed(self) -> DiscretePLD:
        if self._pld is None:
            self._pld = composed_pld(self._entries, self._h, self._method)
        return self._pld

    def get_epsilon(self, target_delta: float) -> float:
        r"""Upper bound on :math:`\varepsilon(\delta)` of the ledger (rounded up; ``inf`` when ``target_delta``
        is below the mass at :math:`+\infty` or a mechanism without privacy was composed; ``0.0`` for an empty
        ledger).

        Parameters
        ----------
        target_delta : float
            :math:`\delta\in(0, 1)`.
        """
        dl = _target_delta(target_delta)
        if self._non_private:
            return math.inf
        if not self._entries:
            return 0.0
        return max(float(_bucketed(p).epsilon(dl)) for p in self._composed().directions.values())

    def get_delta(self, target_epsilon: float) -> float:
        r"""Upper bound on :math:`\delta(\varepsilon)` of the ledger (``0.0`` for an empty ledger, ``1.0`` once a
        mechanism without privacy was composed).

        Parameters
        ----------
        target_epsilon : float
            :math:`\varepsilon\ge0`.
        """
        eps = _target_epsilon(target_epsilon)
        if self._non_private:
            return 1.0
        if not self._entries:
            return 0.0
        return float(self._composed().delta(eps))

    def _exact_result(self, epsilon: float, delta: float, estimate_error: bool) -> EventsResult:
        """The result of an empty ledger (delta 0 at every epsilon) or of one without privacy (delta 1, all of the
        mass at infinity): exact, so the error estimate is 0."""
        events = tuple(event_to_dict(e) for e in self.events)
        inf = 0.0
        if self._non_private:
            events += ({"mechanism": "non_private"},)
            inf = 1.0
        return EventsResult(epsilon, delta, epsilon, epsilon, delta, delta, inf, 0.0 if estimate_error else math.nan,
                            self._h, self._method, events)

    def get_epsilon_result(self, target_delta: float, *, estimate_error: bool = True) -> EventsResult:
        r""":meth:`get_epsilon` as an :class:`~mcacct.pld.events.EventsResult`.

        :func:`~mcacct.pld.events_epsilon` of :attr:`events`, with the error estimate unless ``estimate_error=False``;
        the same ``epsilon`` up to the round-off terms of :meth:`get_epsilon`'s longer (bucketed) query, about
        ``1e-12`` relative.

        Parameters
        ----------
        target_delta : float
            :math:`\delta\in(0, 1)`.
        estimate_error : bool, default True

        Returns
        -------
        EventsResult

        Raises
        ------
        ValueError
            For an argument out of range.
        """
        dl, est = _target_delta(target_delta), check_bool("estimate_error", estimate_error)
        if self._non_private:
            return self._exact_result(math.inf, dl, est)
        if not self._entries:
            return self._exact_result(0.0, dl, est)
        return events_epsilon(self.events, dl, value_discretization_interval=self._h, discretization=self._method,
                              estimate_error=est)

    def get_delta_result(self, target_epsilon: float, *, estimate_error: bool = True) -> EventsResult:
        r""":meth:`get_delta` as an :class:`~mcacct.pld.events.EventsResult`.

        :func:`~mcacct.pld.events_delta` of :attr:`events`, with the error estimate unless ``estimate_error=False``;
        the same ``delta``.

        Parameters
        ----------
        target_epsilon : float
            :math:`\varepsilon\ge0`.
        estimate_error : bool, default True

        Returns
        -------
        EventsResult

        Raises
        ------
        ValueError
            For an argument out of range.
        """
        eps, est = _target_epsilon(target_epsilon), check_bool("estimate_error", estimate_error)
        if self._non_private:
            return self._exact_result(eps, 1.0, est)
        if not self._entries:
            return self._exact_result(eps, 0.0, est)
        return events_delta(self.events, eps, value_discretization_interval=self._h, discretization=self._method,
                            estimate_error=est)

    def to_dp_event(self, *, dominating: bool = False) -> Any:
        """:attr:`ledger_events` as a ``dp_accounting`` ``DpEvent`` (:func:`~mcacct.pld.interop.to_dp_event`).

        ``NoOpDpEvent`` when empty, the entry's own event for one entry, else a ``ComposedDpEvent`` in ledger order; a
        mechanism without privacy adds a ``NonPrivateDpEvent`` at the end. :attr:`ledger` is the ``DpEvent`` as
        composed.

        Parameters
        ----------
        dominating : bool, default False

        Returns
        -------
        dp_accounting.DpEvent

        Raises
        ------
        ValueError
            For an entry without a ``dp_accounting`` counterpart (unless ``dominating``).
        """
        if len(self._entries) == 1:
            out = to_dp_event(self._entries[0], dominating=dominating)
        else:
            out = to_dp_event(self._entries, dominating=dominating)
        if not self._non_private:
            return out
        if not self._entries:
            return dpe.NonPrivateDpEvent()
        parts = list(out.events) if isinstance(out, dpe.ComposedDpEvent) else [out]
        return dpe.ComposedDpEvent(parts + [dpe.NonPrivateDpEvent()])
