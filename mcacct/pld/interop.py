"""``dp_accounting`` interoperability: its ``DpEvent`` descriptions as mcacct events, and back.

Users who already describe a training run as a ``dp_accounting`` ``DpEvent`` get mcacct's JAX PLD accountant
by one call (``dp_accounting`` is a dependency of mcacct; this module itself never imports it at import time)::

    events = mcacct.pld.from_dp_event(event)
    eps = mcacct.pld.events_epsilon(events, delta=1e-6).epsilon

or compose it into :class:`mcacct.pld.PLDAccountant`, a ``dp_accounting.PrivacyAccountant``.

:func:`from_dp_event` supports ``GaussianDpEvent`` (sensitivity 1, noise multiplier as sigma),
``PoissonSampledDpEvent`` of a ``GaussianDpEvent``, ``MixtureOfGaussiansDpEvent`` (non-negative sensitivities;
all of them 0 is no mechanism), ``SelfComposedDpEvent``, ``ComposedDpEvent`` and ``NoOpDpEvent``; it never
imports ``dp_accounting`` (the classes are recognised by name). Anything else raises ``ValueError`` naming the
event; so does a mixture with a negative sensitivity (its privacy loss is not monotone, which the accountant
needs). A mechanism without privacy (``NonPrivateDpEvent``, or one of the above with zero noise) has no mcacct
event: :func:`from_dp_event` refuses it, :func:`dp_event_parts` reports it (the accountant's epsilon is then
``inf``, as ``dp_accounting``'s).

:func:`to_dp_event` goes the other way, for the specs with a ``dp_accounting`` counterpart: ``GaussianSpec`` ->
``GaussianDpEvent`` (noise multiplier ``sigma / sensitivity``), ``PoissonGaussianSpec`` ->
``PoissonSampledDpEvent`` of a ``GaussianDpEvent``, ``MixtureOfGaussiansSpec`` -> ``MixtureOfGaussiansDpEvent``;
``steps`` times ``count`` compositions become one ``SelfComposedDpEvent`` and a sequence a ``ComposedDpEvent``.
The group and cyclic-Poisson BandMF specs have no ``dp_accounting`` mechanism; ``dominating=True`` exports the
dominating pair their analysis reduces them to instead (same privacy curve, mechanism and adjacency not named).
A Monte Carlo sampling scheme (``mcacct.BMinSep(...)``, an ``mcacct.Problem``) has neither an mcacct event nor a
``DpEvent``: :func:`refuse_monte_carlo` says so and names the Monte Carlo calls and commands that account it.
It imports ``dp_accounting`` when called (``ImportError`` saying how to install it where it is missing).
"""

from __future__ import annotations

import sys
from typing import Any

from mcacct.pld.vocabulary import Event, as_events, merge_events
from mcacct.pld.specs import (SPEC_TYPES, CyclicPoissonBandMFSpec, GaussianSpec, GroupFixedBatchSpec,
                              GroupPoissonSpec, MixtureOfGaussiansSpec, PoissonGaussianSpec)
from mcacct.core.precision import float64
from mcacct.core.validate import check_bool, check_int

__all__ = ["from_dp_event", "to_dp_event", "is_dp_event", "dp_event_parts", "refuse_monte_carlo"]

_EXPORTED = "GaussianSpec, PoissonGaussianSpec, MixtureOfGaussiansSpec"


def _name(event: Any) -> str:
    return type(event).__name__


def _non_private(event: Any, found: list[Any] | None) -> list[Event]:
    """A mechanism without privacy (``NonPrivateDpEvent``, or zero noise): recorded in ``found`` where the caller
    accounts it (its epsilon is ``inf``), else refused."""
    if found is None:
        raise ValueError(f"{_name(event)} is not private (no noise: epsilon = inf), so it has no mcacct event; "
                         "mcacct.pld.PLDAccountant accounts it (get_epsilon gives inf, get_delta 1)")
    found.append(event)
    return []


def _walk(event: Any, mult: int, found: list[Any] | None) -> list[Event]:
    name = _name(event)
    if name == "NoOpDpEvent":
        return []
    if name == "NonPrivateDpEvent":
        return _non_private(event, found)
    if name == "GaussianDpEvent":
        if float(event.noise_multiplier) == 0.0:
            return _non_private(event, found)
        return [Event(GaussianSpec(sigma=float(event.noise_multiplier)), mult)]
    if name == "PoissonSampledDpEvent":
        inner = event.event
        if _name(inner) != "GaussianDpEvent":
            raise ValueError(f"PoissonSampledDpEvent of {_name(inner)} is not supported (only of GaussianDpEvent)")
        q = float(event.sampling_probability)
        if q == 0.0:
            return []
        if float(inner.noise_multiplier) == 0.0:
            return _non_private(event, found)
        return [Event(PoissonGaussianSpec(sampling_prob=q, sigma=float(inner.noise_multiplier)), mult)]
    if name == "MixtureOfGaussiansDpEvent":
        c = tuple(float(v) for v in event.sensitivities)
        if any(v < 0 for v in c):
            raise ValueError(f"MixtureOfGaussiansDpEvent with a negative sensitivity is not supported: {c!r}")
        if c and all(v == 0.0 for v in c):  # P = Q: no privacy loss at all
            return []
        if float(event.standard_deviation) == 0.0:
            return _non_private(event, found)
        return [Event(MixtureOfGaussiansSpec(sigma=float(event.standard_deviation), sensitivities=c,
                                             probs=tuple(float(v) for v in event.sampling_probs)), mult)]
    if name == "SelfComposedDpEvent":
        # an integer, as dp_accounting requires: int() would cut 2.7 compositions down to 2 (an audit, stop 75)
        count = check_int("SelfComposedDpEvent count", event.count, low=0, strict=True)
        return _walk(event.event, mult * count, found) if count else []
    if name == "ComposedDpEvent":
        return [e for sub in event.events for e in _walk(sub, mult, found)]
    raise ValueError(f"{name} is not supported by mcacct's PLD accountant (supported: GaussianDpEvent, "
                     "PoissonSampledDpEvent(GaussianDpEvent), MixtureOfGaussiansDpEvent, SelfComposedDpEvent, "
                     "ComposedDpEvent, NoOpDpEvent; PLDAccountant also NonPrivateDpEvent)")


@float64
def from_dp_event(event: Any, *, allow_empty: bool = False) -> list[Event]:
    """The mcacct events of a ``dp_accounting`` ``DpEvent`` (equal mechanisms merged, counts multiplied out).

    The neighbouring relation is add-or-remove (dp_accounting's ``ADD_OR_REMOVE_ONE``); for ``REPLACE_ONE`` double
    the sensitivities first (``SampledWithoutReplacementDpEvent`` is refused).

    Parameters
    ----------
    event : dp_accounting.DpEvent
        The event (module docstring for the supported kinds).
    allow_empty : bool, default False
        Return ``[]`` for an event that composes nothing (e.g. ``NoOpDpEvent``) instead of raising.

    Returns
    -------
    list of Event
        One :class:`~mcacct.pld.events.Event` per distinct mechanism: a ``SelfComposedDpEvent`` of count ``k``
        multiplies the counts under it by ``k`` and equal mechanisms are merged (counts added).

    Raises
    ------
    ValueError
        For an unsupported event (named), a mixture with a negative sensitivity, a ``SelfComposedDpEvent`` whose count
        is not an integer ``>= 0`` (Python or NumPy integer, as dp_accounting requires), a mechanism without privacy (``NonPrivateDpEvent`` or zero noise: it has no mcacct event),
        a non-bool ``allow_empty``, or (without ``allow_empty``) an event that composes nothing.
    """
    out = merge_events(_walk(event, 1, None))
    if not out and not check_bool("allow_empty", allow_empty):
        raise ValueError(f"{_name(event)} composes no mechanism (nothing to account)")
    return out


@float64
def dp_event_parts(event: Any) -> tuple[list[Event], bool]:
    """What :class:`~mcacct.pld.stateful.PLDAccountant` accounts of a ``DpEvent``.

    Its mcacct events (as :func:`from_dp_event`, possibly none) and whether it runs a mechanism without privacy
    (``NonPrivateDpEvent``, or a Gaussian, Poisson-sampled Gaussian or mixture with zero noise, as ``dp_accounting``
    reads them), whose epsilon is ``inf``.

    Parameters
    ----------
    event : dp_accounting.DpEvent
        The event (module docstring for the supported kinds).

    Returns
    -------
    events : list of Event
        The mcacct events, equal mechanisms merged (possibly empty).
    non_private : bool
        Whether the event runs a mechanism without privacy.

    Raises
    ------
    ValueError
        For an unsupported event (named), as :func:`from_dp_event`.
    """
    found: list[Any] = []
    out = merge_events(_walk(event, 1, found))
    return out, bool(found)


def _monte_carlo_scheme(obj: Any) -> Any:
    """The sampling scheme ``obj`` is or holds (an ``mcacct.Problem``'s), else ``None``: recognised by the
    methods of the scheme contract, never by importing :mod:`mcacct.schemes` (a layer above this one)."""
    for cand in (obj, getattr(obj, "scheme", None)):
        if cand is not None and not isinstance(cand, type) and all(
                callable(getattr(cand, m, None)) for m in ("exact_pld", "sample", "losses_t")):
            return cand
    return None


@float64
def refuse_monte_carlo(obj: Any, where: str) -> None:
    """Raise a ``ValueError`` pointing to the Monte Carlo route where ``obj`` is, or a list or tuple ``obj`` holds, a
    sampling scheme such as ``mcacct.BMinSep(...)`` or an ``mcacct.Problem`` (nothing for anything else).

    Such a scheme has no exact PLD in general, hence no mcacct PLD event and no ``dp_accounting`` ``DpEvent``;
    the message names the scheme, the Python calls and the commands that account it, and the exact PLD where a
    ``Problem``'s scheme has one (``scheme.exact_pld(strategy)``).

    Parameters
    ----------
    obj : Any
        What the caller was given.
    where : str
        The caller, named in the message (e.g. ``"mcacct.pld.to_dp_event"``).

    Raises
    ------
    ValueError
        If ``obj`` (or an element of a list or tuple ``obj``, recursively) is an object, not a class, with callable
        ``exact_pld``, ``sample`` and ``losses_t`` methods, or holds one as its ``scheme`` attribute.
    """
    if isinstance(obj, (list, tuple)):  # a sequence of events (or a (spec, count) pair): each element
        for item in obj:
            refuse_monte_carlo(item, where)
        return
    scheme = _monte_carlo_scheme(obj)
    if scheme is None:
        return
    name = type(scheme).__name__
    strategy = getattr(obj, "strategy", None) if scheme is not obj else None
    if strategy is not None:
        try:
            spec = scheme.exact_pld(strategy)
        except ValueError:
            spec = None
        if spec is not None:
            raise ValueError(
                f"{where} takes mcacct.pld events, not a Problem: this {name} with this strategy has an exact PLD, "
                f"{spec!r} (at noise multiplier 1): pass dataclasses.replace(spec, sigma=<noise multiplier>) "
                f"instead (Problem.scheme.exact_pld(Problem.strategy))")
    raise ValueError(
        f"{name} is a sampling scheme of mcacct's Monte Carlo accountant: it has no exact PLD (b-min-sep BandMF "
        f"and the other schemes in general), hence no mcacct.pld event and no dp_accounting DpEvent for {where}. "
        "Account it by Monte Carlo: mcacct.get_noise_multiplier(target_epsilon, target_delta, "
        "problem=mcacct.Problem(scheme, strategy), key=key) calibrates the noise multiplier, "
        "mcacct.estimate(mcacct.Problem(scheme, strategy), sigma, key, num_samples, epsilons=(epsilon,)) bounds "
        "delta(epsilon), mcacct.calibrate runs Estimate-Verify-Release; on the command line `mcacct calibrate`, "
        "`mcacct delta` and `mcacct epsilon` (--scheme ...). The exceptions with an exact PLD (b-min-sep with "
        "min_sep = 1, cyclic Poisson with a public partition and complete columns) give it by "
        "scheme.exact_pld(strategy): an mcacct.pld spec at noise multiplier 1, accepted here once its sigma is set")


@float64
def is_dp_event(obj: Any) -> bool:
    """Whether ``obj`` is a ``dp_accounting`` ``DpEvent``.

    Never imports ``dp_accounting``: an object can only be one once its module is loaded.

    Parameters
    ----------
    obj : Any
        The object to test.

    Returns
    -------
    bool
        ``True`` for an instance of ``dp_accounting.dp_event.DpEvent``.
    """
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

    Returns
    -------
    dp_accounting.DpEvent
        Per spec, a ``GaussianDpEvent`` (noise multiplier ``sigma / sensitivity``), a ``PoissonSampledDpEvent``
        or a ``MixtureOfGaussiansDpEvent``, wrapped in a ``SelfComposedDpEvent`` of count ``steps * count`` when
        that exceeds 1; with ``dominating``, a cyclic-Poisson BandMF spec becomes ``compositions`` Poisson-sampled
        Gaussians of noise multiplier ``sigma / col_norm`` and a group spec the mixture of its ``mixture()``.

    Raises
    ------
    ValueError
        For a spec without a ``dp_accounting`` counterpart (named, with the supported ones), a malformed event, a
        non-bool ``dominating``, or a Monte Carlo sampling scheme (:func:`refuse_monte_carlo`).
    ImportError
        Where ``dp_accounting`` is not installed.
    """
    dom = check_bool("dominating", dominating)
    refuse_monte_carlo(events, "mcacct.pld.to_dp_event")
    single = isinstance(events, (Event, dict, tuple)) or isinstance(events, SPEC_TYPES)
    if isinstance(events, list) and not events:
        return _dp_event_module().NoOpDpEvent()
    evs = as_events(events)
    de = _dp_event_module()
    out = [_export(e.spec, e.count, de, dom) for e in evs]
    return out[0] if single else de.ComposedDpEvent(events=out)
