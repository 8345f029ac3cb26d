r"""A stateful PLD accountant with the method names of ``dp_accounting``'s accountants.

Code written against ``dp_accounting`` composes events into an accountant object and asks it for
:math:`\varepsilon` or :math:`\delta` as training goes on. :class:`PLDAccountant` offers the same shape on top of
mcacct's certified composition of events (:mod:`mcacct.pld.events`)::

    acc = mcacct.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(mcacct.pld.PoissonGaussianSpec(sampling_prob=0.01, sigma=1.0), count=1000)
    acc.compose(dp_event)                  # a dp_accounting DpEvent is accepted too
    acc.get_epsilon(target_delta=1e-6)     # a float, rounded up

What it keeps and computes
--------------------------
* The **ledger** is a list of mcacct :class:`~mcacct.pld.events.Event`\ s in the order they were composed
  (``DpEvent``\ s are converted on arrival by :func:`~mcacct.pld.interop.from_dp_event`; ``count`` multiplies
  their counts). :attr:`PLDAccountant.events` is the same list with equal mechanisms merged: what is accounted.
* Queries compose the ledger with :func:`~mcacct.pld.events.composed_pld` (pessimistic discretisation, FFT
  powers and convolutions with their round-off added to the mass at :math:`+\infty`) and read the certified
  curve of the larger of the two adjacency directions (add and remove one example), so every returned
  ``delta`` is an upper bound and every ``epsilon`` is rounded up. The composed PLD is kept until the next
  :meth:`~PLDAccountant.compose` that adds something, so repeated queries of an unchanged ledger cost one
  query each, not a composition.
* :meth:`~PLDAccountant.get_epsilon_result` / :meth:`~PLDAccountant.get_delta_result` return the typed
  :class:`~mcacct.pld.events.EventsResult` of :func:`~mcacct.pld.events.events_epsilon` /
  :func:`~mcacct.pld.events.events_delta` (per-direction values, mass at :math:`+\infty`, and by default the
  Koskela-Jälkö-Honkela error estimate, which composes again at half the grid spacing).

Conventions (where ``dp_accounting`` is the model)
-------------------------------------------------
* An empty ledger is the no-op mechanism, whose privacy curve is :math:`\delta(\varepsilon)=0` for every
  :math:`\varepsilon\ge0`: ``get_delta`` returns ``0.0`` and ``get_epsilon`` returns ``0.0``, as
  ``dp_accounting``'s PLD accountant does.
* :meth:`~PLDAccountant.supports` says whether :meth:`~PLDAccountant.compose` would accept an event, without
  composing it. Unsupported events (e.g. ``LaplaceDpEvent``, ``NonPrivateDpEvent``) and bad arguments raise
  ``ValueError`` naming them (``dp_accounting`` raises its own ``UnsupportedEventError`` or ``TypeError``).
* ``count`` may be 0 (nothing is composed); ``target_delta`` must be in ``(0, 1)`` and ``target_epsilon`` in
  ``[0, inf)``. Adjacency is add-or-remove (group specs: their group adjacency); there is no
  ``neighboring_relation`` argument.
* The round-off bounds of the composition are absolute and sit in the mass at :math:`+\infty` (about
  ``1e-10`` after a few thousand Poisson steps), so ``get_epsilon`` of a smaller ``target_delta`` is ``inf``
  (:mod:`mcacct.pld.events`); for such deltas of one homogeneous mechanism use :func:`mcacct.pld.pld_epsilon`,
  whose round-off is relative to the tail.
"""

from __future__ import annotations

import math
from typing import Any

from mcacct.pld.checks import check_discretization, check_value_interval
from mcacct.pld.constants import DEFAULT_H
from mcacct.pld.discrete import DiscretePLD
from mcacct.pld.events import (Event, EventsResult, as_events, composed_pld, events_delta, events_epsilon,
                               merge_events)
from mcacct.pld.interop import from_dp_event, is_dp_event, to_dp_event
from mcacct.precision import float64
from mcacct.validate import check_bool, check_int, check_real

__all__ = ["PLDAccountant"]


def _target_delta(value: Any) -> float:
    return check_real("target_delta", value, low=0.0, high=1.0, low_open=True, high_open=True, strict=True)


def _target_epsilon(value: Any) -> float:
    return check_real("target_epsilon", value, low=0.0, strict=True)


@float64
class PLDAccountant:
    r"""Stateful FFT PLD accountant: :meth:`compose` events, then :meth:`get_epsilon` / :meth:`get_delta`.

    Parameters
    ----------
    value_discretization_interval : float, default 1e-4
        Loss grid spacing :math:`h\in(0, 0.1]` of every composition (mcacct's ``DEFAULT_H``).
    discretization : {"connect_dots", "round_up"}
        Pessimistic discretisation rule of every event (:mod:`mcacct.pld`).
    """

    def __init__(self, value_discretization_interval: float = DEFAULT_H,
                 discretization: str = "connect_dots") -> None:
        self._h = check_value_interval(value_discretization_interval)
        self._method = check_discretization(discretization)
        self._ledger: list[Event] = []
        self._pld: DiscretePLD | None = None  # the composition of the current ledger, once queried

    def __repr__(self) -> str:
        return (f"PLDAccountant(value_discretization_interval={self._h!r}, discretization={self._method!r}, "
                f"ledger={len(self._ledger)} events)")

    @property
    def value_discretization_interval(self) -> float:
        """Loss grid spacing :math:`h` of the compositions."""
        return self._h

    @property
    def discretization(self) -> str:
        """Discretisation rule of every event."""
        return self._method

    @property
    def ledger(self) -> list[Event]:
        """The composed events in the order they were composed (a copy; ``DpEvent``\\ s as mcacct events)."""
        return list(self._ledger)

    @property
    def events(self) -> list[Event]:
        """The ledger with equal mechanisms merged (counts added): the composition that is accounted."""
        return merge_events(self._ledger)

    @staticmethod
    def _as_events(event: Any) -> list[Event]:
        if is_dp_event(event):
            return from_dp_event(event, allow_empty=True)
        return as_events(event)

    def supports(self, event: Any) -> bool:
        """Whether :meth:`compose` accepts ``event`` (nothing is composed).

        Parameters
        ----------
        event : Any
            An mcacct :class:`~mcacct.pld.events.Event`, ``*Spec``, ``(spec, count)`` pair, JSON-style dict or a
            sequence of these, or a ``dp_accounting`` ``DpEvent``.

        Returns
        -------
        bool
            ``True`` where the event converts to mcacct events (``NoOpDpEvent`` included), else ``False``.
        """
        try:
            self._as_events(event)
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
        ValueError
            For an unsupported or malformed event (named) or a bad ``count``.
        """
        n = check_int("count", count, low=0, strict=True)
        added = [Event(e.spec, e.count * n) for e in self._as_events(event) if e.count * n > 0]
        if added:
            self._ledger.extend(added)
            self._pld = None
        return self

    def _composed(self) -> DiscretePLD:
        if self._pld is None:
            self._pld = composed_pld(self._ledger, self._h, self._method)
        return self._pld

    def get_epsilon(self, target_delta: float) -> float:
        r"""Upper bound on :math:`\varepsilon(\delta)` of the ledger (rounded up; ``inf`` when ``target_delta``
        is below the mass at :math:`+\infty`; ``0.0`` for an empty ledger).

        Parameters
        ----------
        target_delta : float
            :math:`\delta\in(0, 1)`.
        """
        dl = _target_delta(target_delta)
        if not self._ledger:
            return 0.0
        return float(self._composed().epsilon(dl))

    def get_delta(self, target_epsilon: float) -> float:
        r"""Upper bound on :math:`\delta(\varepsilon)` of the ledger (``0.0`` for an empty ledger).

        Parameters
        ----------
        target_epsilon : float
            :math:`\varepsilon\ge0`.
        """
        eps = _target_epsilon(target_epsilon)
        if not self._ledger:
            return 0.0
        return float(self._composed().delta(eps))

    def _empty_result(self, epsilon: float, delta: float, estimate_error: bool) -> EventsResult:
        return EventsResult(epsilon, delta, epsilon, epsilon, delta, delta, 0.0, 0.0 if estimate_error else math.nan,
                            self._h, self._method, ())

    def get_epsilon_result(self, target_delta: float, *, estimate_error: bool = True) -> EventsResult:
        """:meth:`get_epsilon` as an :class:`~mcacct.pld.events.EventsResult` (:func:`~mcacct.pld.events_epsilon`
        of :attr:`events`), with the error estimate unless ``estimate_error=False``; the same ``epsilon``."""
        dl, est = _target_delta(target_delta), check_bool("estimate_error", estimate_error)
        if not self._ledger:
            return self._empty_result(0.0, dl, est)
        return events_epsilon(self.events, dl, value_discretization_interval=self._h, discretization=self._method,
                              estimate_error=est)

    def get_delta_result(self, target_epsilon: float, *, estimate_error: bool = True) -> EventsResult:
        """:meth:`get_delta` as an :class:`~mcacct.pld.events.EventsResult` (:func:`~mcacct.pld.events_delta` of
        :attr:`events`), with the error estimate unless ``estimate_error=False``; the same ``delta``."""
        eps, est = _target_epsilon(target_epsilon), check_bool("estimate_error", estimate_error)
        if not self._ledger:
            return self._empty_result(eps, 0.0, est)
        return events_delta(self.events, eps, value_discretization_interval=self._h, discretization=self._method,
                            estimate_error=est)

    def to_dp_event(self, *, dominating: bool = False) -> Any:
        """The ledger as a ``dp_accounting`` ``DpEvent`` (:func:`~mcacct.pld.interop.to_dp_event`): ``NoOpDpEvent``
        when empty, the entry's own event for one entry, else a ``ComposedDpEvent`` in ledger order."""
        if len(self._ledger) == 1:
            return to_dp_event(self._ledger[0], dominating=dominating)
        return to_dp_event(self._ledger, dominating=dominating)
