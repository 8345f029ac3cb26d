r"""The event vocabulary of :mod:`mcacct.pld.events`: an :class:`Event` is ``count`` compositions of one mechanism
(an :mod:`mcacct.pld` ``*Spec``), in the spirit of dp_accounting's ``DpEvent`` s; a composition is a list of them.

Event vocabulary (JSON, :func:`event_from_dict`): ``{"mechanism": KIND, ..., "count": N}`` with ``KIND`` one of
:data:`EVENT_KINDS` and the fields of the corresponding spec (``count`` is required; ``steps``, where the
spec has it, may be given too: the event is then ``steps * count`` compositions).

:func:`as_events` accepts every form a caller may hold (an event, a spec, a dict, a list of these),
:func:`load_events` reads a JSON file, :func:`event_to_dict` writes an event back, and :func:`merge_events` adds the
counts of equal mechanisms. Nothing here computes a PLD.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

from mcacct.core.precision import float64
from mcacct.core.validate import check_int, read_json
from mcacct.pld.specs import (SPEC_TYPES, CyclicPoissonBandMFSpec, GaussianSpec, GroupFixedBatchSpec,
                              GroupPoissonSpec, MechanismSpec, MixtureOfGaussiansSpec, PoissonGaussianSpec)

__all__ = ["EVENT_KINDS", "Event", "as_events", "event_from_dict", "event_to_dict", "load_events", "merge_events"]

#: JSON ``mechanism`` name -> spec class.
EVENT_KINDS: dict[str, type] = {
    "gaussian": GaussianSpec,
    "poisson_gaussian": PoissonGaussianSpec,
    "mixture_of_gaussians": MixtureOfGaussiansSpec,
    "group_poisson": GroupPoissonSpec,
    "group_fixed_batch": GroupFixedBatchSpec,
    "cyclic_poisson_bandmf": CyclicPoissonBandMFSpec,
}
_KIND_OF = {cls: name for name, cls in EVENT_KINDS.items()}


@float64
@dataclasses.dataclass(frozen=True)
class Event:
    """``count`` (>= 0) compositions of the mechanism ``spec`` (an :mod:`mcacct.pld` ``*Spec``)."""

    spec: MechanismSpec
    count: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.spec, SPEC_TYPES):
            raise ValueError(f"event spec must be an mcacct.pld *Spec; got {type(self.spec).__name__}")
        object.__setattr__(self, "count", check_int("event count", self.count, low=0, strict=True))


@float64
def as_events(events: Any) -> list[Event]:
    """Normalise ``events`` to a list of :class:`Event`.

    Accepts an :class:`Event`, a ``*Spec`` (count 1), a ``(spec, count)`` pair, a JSON-style dict
    (:func:`event_from_dict`), or a sequence of these.

    Parameters
    ----------
    events : Any
        The events in one of the forms above.

    Returns
    -------
    list of Event
        The events, in the given order (not merged).

    Raises
    ------
    ValueError
        If ``events`` is not a sequence of events, an entry has none of the forms above (its index named), or the
        sequence is empty.
    """
    if isinstance(events, (Event, dict, tuple)) or isinstance(events, SPEC_TYPES):
        events = [events]
    if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
        raise ValueError(f"events must be a sequence of events; got {type(events).__name__}")
    out = []
    for i, e in enumerate(events):
        if isinstance(e, Event):
            out.append(e)
        elif isinstance(e, SPEC_TYPES):
            out.append(Event(e, 1))
        elif isinstance(e, dict):
            out.append(event_from_dict(e, i))
        elif isinstance(e, tuple) and len(e) == 2:
            out.append(Event(e[0], e[1]))
        else:
            raise ValueError(f"event {i}: expected an Event, a *Spec, a (spec, count) pair or a dict; got {e!r}")
    if not out:
        raise ValueError("events must contain at least one event")
    return out


@float64
def event_from_dict(entry: Any, index: int | None = None) -> Event:
    """An :class:`Event` from ``{"mechanism": KIND, <spec fields>, "count": N}``.

    Parameters
    ----------
    entry : dict
        The JSON object; ``KIND`` is one of :data:`EVENT_KINDS` and ``count`` is required.
    index : int, optional
        Position of the entry in its list, named in messages.

    Returns
    -------
    Event
        The event.

    Raises
    ------
    ValueError
        Naming the entry (``index``) for an unknown mechanism, unknown or missing fields (``count`` included: it is
        required), bad values or a negative count.
    """
    where = "event" if index is None else f"event {index}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: must be a JSON object; got {entry!r}")
    fields = dict(entry)
    kind = fields.pop("mechanism", None)
    if not isinstance(kind, str) or kind not in EVENT_KINDS:
        raise ValueError(f"{where}: unknown mechanism {kind!r}; expected one of {sorted(EVENT_KINDS)}")
    cls = EVENT_KINDS[kind]
    has_count = "count" in fields
    try:
        count = check_int("count", fields.pop("count", 0), low=0, strict=True)
    except ValueError as err:
        raise ValueError(f"{where} ({kind}): {err}") from None
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(fields) - names)
    if unknown:
        raise ValueError(f"{where} ({kind}): unknown field(s) {unknown}; allowed: {sorted(names)} and count")
    for k in ("sensitivities", "probs", "c_col"):
        if k in fields and isinstance(fields[k], list):
            fields[k] = tuple(fields[k])
    try:
        spec = cls(**fields)
    except TypeError as err:
        raise ValueError(f"{where} ({kind}): {err}") from None
    except ValueError as err:
        raise ValueError(f"{where} ({kind}): {err}") from None
    if not has_count:  # no default: a forgotten count would silently account one run
        raise ValueError(f"{where} ({kind}): count is required (how many times the mechanism runs, an integer "
                         ">= 0)")
    return Event(spec, count)


@float64
def event_to_dict(event: Event) -> dict:
    """The JSON form of an :class:`Event` (inverse of :func:`event_from_dict`).

    Parameters
    ----------
    event : Event
        The event.

    Returns
    -------
    dict
        ``{"mechanism": KIND, <spec fields>, "count": N}``, tuples as lists.
    """
    d = {"mechanism": _KIND_OF[type(event.spec)]}
    for f in dataclasses.fields(event.spec):
        v = getattr(event.spec, f.name)
        d[f.name] = list(v) if isinstance(v, tuple) else v
    d["count"] = event.count
    return d


@float64
def load_events(path: str | os.PathLike) -> list[Event]:
    """Events from a JSON file holding a list of event objects (:func:`event_from_dict`).

    Parameters
    ----------
    path : str or os.PathLike
        The events file.

    Returns
    -------
    list of Event
        The events, in file order.

    Raises
    ------
    ValueError
        If the file cannot be read, is not a JSON list, or an entry is invalid.
    """
    data = read_json(path, "events file")
    if not isinstance(data, list):
        raise ValueError(f"events file {os.fspath(path)!r} must hold a JSON list of events")
    return as_events([event_from_dict(e, i) for i, e in enumerate(data)])


@float64
def merge_events(events: Sequence[Event]) -> list[Event]:
    """Equal mechanisms merged (their counts add, first-seen order kept); events of count 0 dropped.

    Parameters
    ----------
    events : sequence of Event
        The events.

    Returns
    -------
    list of Event
    """
    totals: dict[Any, int] = {}
    for e in events:
        totals[e.spec] = totals.get(e.spec, 0) + e.count
    return [Event(s, c) for s, c in totals.items() if c > 0]
