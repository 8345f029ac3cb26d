"""``dp_accounting`` interoperability: its ``DpEvent`` descriptions as mcacct events.

Users who already describe a training run as a ``dp_accounting`` ``DpEvent`` get mcacct's JAX PLD accountant
by one call (``dp_accounting`` is an optional extra: ``pip install dp-accounting``; it is imported only to
recognise its classes)::

    events = mcacct.pld.from_dp_event(event)
    eps = mcacct.pld.events_epsilon(events, delta=1e-6).epsilon

Supported: ``GaussianDpEvent`` (sensitivity 1, noise multiplier as sigma), ``PoissonSampledDpEvent`` of a
``GaussianDpEvent``, ``MixtureOfGaussiansDpEvent`` (non-negative sensitivities), ``SelfComposedDpEvent``,
``ComposedDpEvent`` and ``NoOpDpEvent``. Anything else raises ``ValueError`` naming the event; so does a
mixture with a negative sensitivity (its privacy loss is not monotone, which the accountant needs).
"""

from __future__ import annotations

from typing import Any

from mcacct.pld.events import Event, merge_events
from mcacct.pld.specs import GaussianSpec, MixtureOfGaussiansSpec, PoissonGaussianSpec
from mcacct.precision import float64

__all__ = ["from_dp_event"]


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
def from_dp_event(event: Any) -> list[Event]:
    """The mcacct events of a ``dp_accounting`` ``DpEvent`` (equal mechanisms merged, counts multiplied out).

    Raises
    ------
    ValueError
        For an unsupported event (named), or an event that composes nothing (e.g. only ``NoOpDpEvent``).
    """
    out = merge_events(_walk(event, 1))
    if not out:
        raise ValueError(f"{_name(event)} composes no mechanism (nothing to account)")
    return out
