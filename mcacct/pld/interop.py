"""``dp_accounting`` interoperability: its ``DpEvent`` descriptions as mcacct events, and back.

Users who already describe a training run as a ``dp_accounting`` ``DpEvent`` get mcacct's JAX PLD accountant
by one call (``dp_accounting`` is an optional extra: ``pip install dp-accounting``)::

    events = mcacct.pld.from_dp_event(event)
    eps = mcacct.pld.events_epsilon(events, delta=1e-6).epsilon

:func:`from_dp_event` supports ``GaussianDpEvent`` (sensitivity 1, noise multiplier as sigma),
``PoissonSampledDpEvent`` of a ``GaussianDpEvent``, ``MixtureOfGaussiansDpEvent`` (non-negative sensitivities),
``SelfComposedDpEvent``, ``ComposedDpEvent`` and ``NoOpDpEvent``; it never imports ``dp_accounting`` (the classes
are recognised by name). Anything else raises ``ValueError`` naming the event; so does a mixture with a negative
sensitivity (its privacy loss is not monotone, which the accountant needs).

:func:`to_dp_event` goes the other way, for the specs with a ``dp_accounting`` counterpart: ``GaussianSpec`` ->
``GaussianDpEvent`` (noise multiplier ``sigma / sensitivity``), ``PoissonGaussianSpec`` ->
``PoissonSampledDpEvent`` of a ``GaussianDpEvent``, ``MixtureOfGaussiansSpec`` -> ``MixtureOfGaussiansDpEvent``;
``steps`` times ``count`` compositions become one ``SelfComposedDpEvent`` and a sequence a ``ComposedDpEvent``.
The group and cyclic-Poisson BandMF specs have no ``dp_accounting`` mechanism; ``dominating=True`` exports the
dominating pair their analysis reduces them to instead (same privacy curve, mechanism and adjacency not named).
It imports ``dp_accounting`` when called (``ImportError`` saying how to install it where it is missing).
"""

from __future__ import annotations

import sys
from typing import Any

from mcacct.pld.events import Event, as_events, merge_events
from mcacct.pld.specs import (SPEC_TYPES, CyclicPoissonBandMFSpec, GaussianSpec, GroupFixedBatchSpec,
                              GroupPoissonSpec, MixtureOfGaussiansSpec, PoissonGaussianSpec)
from mcacct.precision import float64
from mcacct.validate import check_bool

__all__ = ["from_dp_event", "to_dp_event", "is_dp_event"]

_EXPORTED = "GaussianSpec, PoissonGaussianSpec, MixtureOfGaussiansSpec"


def _name(event: Any) -> str:
    return type(event).__name__


def _walk(event: Any, mult: int) -> list[Event]:
    name = _name(event)
    if name == "NoOpDpEvent":
        return []
    if name == "GaussianDpEvent":
        return [Event(GaussianSpec(sigma=float(event.noise_multiplier)), mult)]
    if name == "PoissonSampledDpEvent":
        inner = event.event
        if _name(inner) != "GaussianDpEvent":
            raise ValueError(f"PoissonSampledDpEvent of {_name(inner)} is not supported (only of GaussianDpEvent)")
        q = float(event.sampling_probability)
        if q == 0.0:
            return []
        return [Event(PoissonGaussianSpec(sampling_prob=q, sigma=float(inner.noise_multiplier)), mult)]
    if name == "MixtureOfGaussiansDpEvent":
        c = tuple(float(v) for v in event.sensitivities)
        if any(v < 0 for v in c):
            raise ValueError(f"MixtureOfGaussiansDpEvent with a negative sensitivity is not supported: {c!r}")
        return [Event(MixtureOfGaussiansSpec(sigma=float(event.standard_deviation), sensitivities=c,
                                             probs=tuple(float(v) for v in event.sampling_probs)), mult)]
    if name == "SelfComposedDpEvent":
        count = int(event.count)
        if count < 0:
            raise ValueError(f"SelfComposedDpEvent count must be >= 0; got {event.count!r}")
        return _walk(event.event, mult * count) if count else []
    if name == "ComposedDpEvent":
        return [e for sub in event.events for e in _walk(sub, mult)]
    raise ValueError(f"{name} is not supported by mcacct's PLD accountant (supported: GaussianDpEvent, "
                     "PoissonSampledDpEvent(GaussianDpEvent), MixtureOfGaussiansDpEvent, SelfComposedDpEvent, "
                     "ComposedDpEvent, NoOpDpEvent)")


@float64
def from_dp_event(event: Any, *, allow_empty: bool = False) -> list[Event]:
    """The mcacct events of a ``dp_accounting`` ``DpEvent`` (equal mechanisms merged, counts multiplied out).

    Parameters
    ----------
    event : dp_accounting.DpEvent
        The event (module docstring for the supported kinds).
    allow_empty : bool, default False
        Return ``[]`` for an event that composes nothing (e.g. ``NoOpDpEvent``) instead of raising.

    Raises
    ------
    ValueError
        For an unsupported event (named), or (without ``allow_empty``) an event that composes nothing.
    """
    out = merge_events(_walk(event, 1))
    if not out and not check_bool("allow_empty", allow_empty):
        raise ValueError(f"{_name(event)} composes no mechanism (nothing to account)")
    return out


@float64
def is_dp_event(obj: Any) -> bool:
    """Whether ``obj`` is a ``dp_accounting`` ``DpEvent`` (never imports ``dp_accounting``: an object can only be
    one once its module is loaded)."""
    mod = sys.modules.get("dp_accounting.dp_event")
    return mod is not None and isinstance(obj, mod.DpEvent)


def _dp_event_module() -> Any:
    try:
        from dp_accounting import dp_event
    except ImportError as err:
        raise ImportError("mcacct.pld.to_dp_event needs the optional dp_accounting package: "
                          "pip install dp-accounting") from err
    return dp_event


def _export(spec: Any, count: int, de: Any, dominating: bool) -> Any:
    if isinstance(spec, GaussianSpec):
        base, n = de.GaussianDpEvent(noise_multiplier=spec.sigma / spec.sensitivity), spec.steps
    elif isinstance(spec, PoissonGaussianSpec):
        base = de.PoissonSampledDpEvent(sampling_probability=spec.sampling_prob,
                                        event=de.GaussianDpEvent(noise_multiplier=spec.sigma / spec.sensitivity))
        n = spec.steps
    elif isinstance(spec, MixtureOfGaussiansSpec):
        base = de.MixtureOfGaussiansDpEvent(standard_deviation=spec.sigma, sensitivities=list(spec.sensitivities),
                                            sampling_probs=list(spec.probs))
        n = spec.steps
    elif dominating and isinstance(spec, CyclicPoissonBandMFSpec):  # ceil(n/b) Poisson Gaussians (Dong & Ganesh)
        base = de.PoissonSampledDpEvent(sampling_probability=spec.sampling_prob,
                                        event=de.GaussianDpEvent(noise_multiplier=spec.sigma / spec.col_norm))
        n = spec.compositions
    elif dominating and isinstance(spec, (GroupPoissonSpec, GroupFixedBatchSpec)):
        c, p = spec.mixture()
        base = de.MixtureOfGaussiansDpEvent(standard_deviation=spec.sigma, sensitivities=c.tolist(),
                                            sampling_probs=p.tolist())
        n = spec.steps
    else:
        raise ValueError(f"{_name(spec)} has no dp_accounting counterpart (exported: {_EXPORTED}; "
                         "dominating=True also exports GroupPoissonSpec, GroupFixedBatchSpec and "
                         "CyclicPoissonBandMFSpec as the dominating pair of their analysis)")
    total = int(n) * count
    if total == 0:
        return de.NoOpDpEvent()
    return base if total == 1 else de.SelfComposedDpEvent(event=base, count=total)


@float64
def to_dp_event(events: Any, *, dominating: bool = False) -> Any:
    """The ``dp_accounting`` ``DpEvent`` of mcacct events (the inverse of :func:`from_dp_event` where one exists).

    Parameters
    ----------
    events : Event, ``*Spec``, ``(spec, count)``, dict, or a sequence of these
        One event gives its own ``DpEvent`` (``SelfComposedDpEvent`` when it composes more than once,
        ``NoOpDpEvent`` for count 0); a sequence gives a ``ComposedDpEvent`` of them, in order (not merged),
        and an empty list ``NoOpDpEvent``.
    dominating : bool, default False
        Also export the specs without a ``dp_accounting`` mechanism (group, cyclic-Poisson BandMF) as the
        dominating pair of their analysis: a ``MixtureOfGaussiansDpEvent``, resp. Poisson-sampled Gaussians.

    Raises
    ------
    ValueError
        For a spec without a ``dp_accounting`` counterpart (named, with the supported ones) or a malformed event.
    ImportError
        Where ``dp_accounting`` is not installed.
    """
    dom = check_bool("dominating", dominating)
    single = isinstance(events, (Event, dict, tuple)) or isinstance(events, SPEC_TYPES)
    if isinstance(events, list) and not events:
        return _dp_event_module().NoOpDpEvent()
    evs = as_events(events)
    de = _dp_event_module()
    out = [_export(e.spec, e.count, de, dom) for e in evs]
    return out[0] if single else de.ComposedDpEvent(events=out)
