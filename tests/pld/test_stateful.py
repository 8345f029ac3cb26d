"""The stateful PLD accountant (mcacct.pld.stateful) and the export of mcacct events to dp_accounting events
(mcacct.pld.interop.to_dp_event). Oracle: dp_accounting's own PLD accountant (test-only), on the exported events.

Cost: the PLD comparisons run at h = 1e-3 and mostly query delta (NumPy only); each new composition shape
compiles once (seconds on CPU)."""

import math
import sys

import pytest

import mcacct  # noqa: F401  (float64)
from mcacct import pld
from mcacct.pld import stateful
from mcacct.pld.interop import is_dp_event
from mcacct.pld.specs import canonical

de = pytest.importorskip("dp_accounting.dp_event")
ppa = pytest.importorskip("dp_accounting.pld.pld_privacy_accountant")

H = 1e-3


def _oracle(event, *, delta=None, epsilon=None):
    acc = ppa.PLDAccountant(value_discretization_interval=H)
    acc.compose(event)
    return acc.get_epsilon(delta) if delta is not None else acc.get_delta(epsilon)


# ---------------------------------------------------------------- to_dp_event and the round trip
MAPPABLE = [
    pld.Event(pld.GaussianSpec(2.0), 1),
    pld.Event(pld.GaussianSpec(0.7), 9),
    pld.Event(pld.PoissonGaussianSpec(0.01, 1.1), 250),
    pld.Event(pld.PoissonGaussianSpec(1.0, 3.0), 2),
    pld.Event(pld.MixtureOfGaussiansSpec(2.0, (0.0, 1.0, 2.5), (0.5, 0.3, 0.2)), 4),
]


@pytest.mark.parametrize("event", MAPPABLE, ids=lambda e: type(e.spec).__name__)
def test_round_trip_of_each_mappable_spec(event):
    assert pld.from_dp_event(pld.to_dp_event(event)) == [event]
    if event.count == 1:
        assert pld.from_dp_event(pld.to_dp_event(event.spec)) == [event]


def test_exported_event_types():
    g = pld.to_dp_event(pld.GaussianSpec(2.0))
    assert g == de.GaussianDpEvent(2.0)
    assert pld.to_dp_event(pld.Event(pld.PoissonGaussianSpec(0.1, 1.5), 7)) == de.SelfComposedDpEvent(
        de.PoissonSampledDpEvent(0.1, de.GaussianDpEvent(1.5)), 7)
    mog = pld.to_dp_event(pld.MixtureOfGaussiansSpec(2.0, (0.0, 1.0), (0.25, 0.75)))
    assert isinstance(mog, de.MixtureOfGaussiansDpEvent) and mog.standard_deviation == 2.0
    assert list(mog.sensitivities) == [0.0, 1.0] and list(mog.sampling_probs) == [0.25, 0.75]
    # a sequence: a ComposedDpEvent in the order given, not merged
    seq = pld.to_dp_event([pld.GaussianSpec(2.0), pld.Event(pld.GaussianSpec(3.0), 2), pld.GaussianSpec(2.0)])
    assert seq == de.ComposedDpEvent([g, de.SelfComposedDpEvent(de.GaussianDpEvent(3.0), 2), g])
    assert pld.from_dp_event(seq) == [pld.Event(pld.GaussianSpec(2.0), 2), pld.Event(pld.GaussianSpec(3.0), 2)]
    assert pld.to_dp_event(pld.Event(pld.GaussianSpec(2.0), 0)) == de.NoOpDpEvent()
    assert pld.to_dp_event([]) == de.NoOpDpEvent()


def test_sensitivity_and_steps_become_the_noise_multiplier_and_the_count():
    ev = pld.to_dp_event(pld.Event(pld.GaussianSpec(sigma=3.0, sensitivity=2.0, steps=4), 5))
    assert ev == de.SelfComposedDpEvent(de.GaussianDpEvent(1.5), 20)
    assert pld.from_dp_event(ev) == [pld.Event(pld.GaussianSpec(1.5), 20)]
    ev = pld.to_dp_event(pld.PoissonGaussianSpec(0.2, sigma=2.0, steps=3, sensitivity=4.0))
    assert ev == de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.2, de.GaussianDpEvent(0.5)), 3)


GROUPS = [pld.GroupPoissonSpec(3, 0.05, 2.0, steps=6), pld.GroupFixedBatchSpec(2, 4, 100, 3.0, steps=5),
          pld.CyclicPoissonBandMFSpec(iterations=10, min_sep=3, sampling_prob=0.1, c_col=(0.6, 0.8), sigma=2.0)]


@pytest.mark.parametrize("spec", GROUPS, ids=lambda s: type(s).__name__)
def test_specs_without_a_counterpart_are_refused_or_exported_as_their_dominating_pair(spec):
    with pytest.raises(ValueError, match=f"{type(spec).__name__} has no dp_accounting counterpart .*"
                                         "GaussianSpec, PoissonGaussianSpec, MixtureOfGaussiansSpec"):
        pld.to_dp_event(spec)
    (back,) = pld.from_dp_event(pld.to_dp_event(spec, dominating=True))
    ours, theirs = canonical(spec), canonical(back.spec)
    assert back.count * theirs.steps == ours.steps
    assert ours.c / spec.sigma == pytest.approx(theirs.c / back.spec.sigma, rel=1e-15)
    assert ours.p == pytest.approx(theirs.p, rel=1e-12, abs=1e-300)


def test_to_dp_event_without_dp_accounting_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(ImportError, match="pip install dp-accounting"):
        pld.to_dp_event(pld.GaussianSpec(1.0))


def test_is_dp_event_recognises_dp_accounting_classes_only():
    class GaussianDpEvent:  # the name alone is not enough
        noise_multiplier = 1.0

    assert is_dp_event(de.GaussianDpEvent(1.0)) and is_dp_event(de.NoOpDpEvent())
    assert not any(is_dp_event(x) for x in (GaussianDpEvent(), pld.GaussianSpec(1.0), pld.Event(pld.GaussianSpec(1.0)),
                                            {"mechanism": "gaussian"}, None))


def test_to_dp_event_bad_arguments():
    with pytest.raises(ValueError, match="dominating must be a bool"):
        pld.to_dp_event(pld.GaussianSpec(1.0), dominating="yes")
    with pytest.raises(ValueError, match="expected an Event"):
        pld.to_dp_event([1.0])


# ---------------------------------------------------------------- the stateful accountant
def test_supports_says_what_compose_accepts_without_composing():
    acc = pld.PLDAccountant(H)
    for ok in (pld.GaussianSpec(1.0), pld.Event(pld.PoissonGaussianSpec(0.1, 1.0), 3), de.GaussianDpEvent(1.0),
               de.NoOpDpEvent(), de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.1, de.GaussianDpEvent(1.0)), 5),
               [pld.GaussianSpec(1.0), pld.GaussianSpec(2.0)], {"mechanism": "gaussian", "sigma": 1.0, "count": 2}):
        assert acc.supports(ok), ok
    assert acc.supports(de.NonPrivateDpEvent())  # accounted as epsilon = inf, as dp_accounting does
    for bad in (de.LaplaceDpEvent(1.0), de.UnsupportedDpEvent(),
                de.PoissonSampledDpEvent(0.1, de.LaplaceDpEvent(1.0)), "gaussian", 3.0, object(), []):
        assert not acc.supports(bad), bad
    assert acc.ledger_events == [] and acc.ledger == de.NoOpDpEvent()
    with pytest.raises(ValueError, match="LaplaceDpEvent is not supported"):
        acc.compose(de.ComposedDpEvent([de.GaussianDpEvent(1.0), de.LaplaceDpEvent(1.0)]))
    assert acc.ledger_events == [] and acc.ledger == de.NoOpDpEvent()  # nothing of a refused event is composed


def test_compose_with_count_keeps_a_ledger_and_merges_for_the_composition():
    g, p = pld.GaussianSpec(2.0), pld.PoissonGaussianSpec(0.1, 1.0)
    acc = pld.PLDAccountant(H)
    assert acc.compose(g, count=3) is acc
    acc.compose(pld.Event(g, 2), count=2).compose(de.SelfComposedDpEvent(de.GaussianDpEvent(2.0), 5), count=2)
    acc.compose(p, count=0).compose(de.NoOpDpEvent()).compose([p, (g, 1)])
    assert acc.ledger_events == [pld.Event(g, 3), pld.Event(g, 4), pld.Event(g, 10), pld.Event(p, 1),
                                 pld.Event(g, 1)]
    assert acc.events == [pld.Event(g, 18), pld.Event(p, 1)]
    ledger = acc.ledger_events
    ledger.clear()  # a copy
    assert len(acc.ledger_events) == 5
    # dp_accounting's ledger: consecutive equal events merged by its DpEventBuilder, counts multiplied out
    assert acc.ledger == de.ComposedDpEvent([de.SelfComposedDpEvent(de.GaussianDpEvent(2.0), 17),
                                             de.PoissonSampledDpEvent(0.1, de.GaussianDpEvent(1.0)),
                                             de.GaussianDpEvent(2.0)])
    assert acc.to_dp_event() == de.ComposedDpEvent([de.SelfComposedDpEvent(de.GaussianDpEvent(2.0), n)
                                                    for n in (3, 4, 10)]
                                                   + [de.PoissonSampledDpEvent(0.1, de.GaussianDpEvent(1.0)),
                                                      de.GaussianDpEvent(2.0)])
    assert pld.PLDAccountant().compose(g, 2).to_dp_event() == de.SelfComposedDpEvent(de.GaussianDpEvent(2.0), 2)
    assert pld.PLDAccountant().to_dp_event() == de.NoOpDpEvent()
    assert "ledger=5 events" in repr(acc)


def test_empty_ledger_is_the_no_op_mechanism_like_dp_accounting():
    acc = pld.PLDAccountant()
    theirs = ppa.PLDAccountant()
    assert acc.get_epsilon(1e-6) == theirs.get_epsilon(1e-6) == 0.0
    assert acc.get_delta(0.5) == theirs.get_delta(0.5) == 0.0
    assert acc.get_delta(0.0) == 0.0
    r = acc.get_epsilon_result(1e-6)
    assert (r.epsilon, r.delta, r.infinity_mass, r.error_estimate, r.events) == (0.0, 1e-6, 0.0, 0.0, ())
    r = acc.get_delta_result(2.0, estimate_error=False)
    assert (r.epsilon, r.delta, r.delta_add, r.delta_remove) == (2.0, 0.0, 0.0, 0.0) and math.isnan(r.error_estimate)
    acc.compose(de.NoOpDpEvent(), count=10)
    assert acc.ledger_events == [] and acc.ledger == de.NoOpDpEvent() and acc.get_delta(0.0) == 0.0


@pytest.mark.parametrize("call, match", [
    (lambda a: a.compose(pld.GaussianSpec(1.0), count=-1), r"count must be an integer in \[0, inf\); got -1"),
    (lambda a: a.compose(pld.GaussianSpec(1.0), count=2.0), r"count must be an integer in \[0, inf\); got 2.0"),
    (lambda a: a.get_epsilon(0.0), r"target_delta must be in \(0, 1\); got 0"),
    (lambda a: a.get_epsilon(1.0), r"target_delta must be in \(0, 1\); got 1"),
    (lambda a: a.get_epsilon(float("nan")), r"target_delta must be a finite real number in \(0, 1\); got nan"),
    (lambda a: a.get_epsilon_result(1.5), r"target_delta must be in \(0, 1\); got 1.5"),
    (lambda a: a.get_delta(-0.1), r"target_epsilon must be in \[0, inf\); got -0.1"),
    (lambda a: a.get_delta_result(math.inf), r"target_epsilon must be a finite real number in \[0, inf\); got inf"),
    (lambda a: a.get_delta_result(1.0, estimate_error=1), "estimate_error must be a bool"),
    (lambda a: a.compose("gaussian"), "events must be a sequence of events"),
])
def test_bad_input_names_the_parameter_and_range(call, match):
    acc = pld.PLDAccountant()
    with pytest.raises(ValueError, match=match):
        call(acc)
    acc.compose(pld.GaussianSpec(1.0))  # also with a ledger (checked before anything is composed)
    with pytest.raises(ValueError, match=match):
        call(acc)


@pytest.mark.parametrize("kwargs, match", [
    ({"value_discretization_interval": 0.0}, r"value_discretization_interval must be in \(0, 0.1\]; got 0"),
    ({"value_discretization_interval": 0.5}, r"value_discretization_interval must be in \(0, 0.1\]; got 0.5"),
    ({"discretization": "exact"}, "discretization must be one of"),
])
def test_bad_constructor_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        pld.PLDAccountant(**kwargs)


def test_queries_reuse_the_events_path_and_cache_the_composition(monkeypatch):
    calls = []
    real = stateful.composed_pld
    monkeypatch.setattr(stateful, "composed_pld", lambda *a, **k: calls.append(1) or real(*a, **k))
    g = pld.GaussianSpec(2.0)
    acc = pld.PLDAccountant(H).compose(g, 3).compose(pld.Event(g, 4))
    d = acc.get_delta(1.0)
    assert acc.get_delta(1.0) == d and acc.get_delta(0.5) > d and len(calls) == 1  # unchanged ledger: cached
    assert d == pld.events_delta([pld.Event(g, 7)], 1.0, value_discretization_interval=H, estimate_error=False).delta
    r = acc.get_delta_result(1.0, estimate_error=False)
    assert r.delta == d and r.events == ({"mechanism": "gaussian", "sigma": 2.0,
                                                                          "sensitivity": 1.0, "steps": 1,
                                                                          "count": 7},)
    acc.compose(g, 0)
    acc.get_delta(1.0)
    assert len(calls) == 1  # count 0 changes nothing
    acc.compose(g)
    assert acc.get_delta(1.0) > d and len(calls) == 2  # a new event: composed again
    assert acc.get_delta(1.0) == pld.events_delta([pld.Event(g, 8)], 1.0, value_discretization_interval=H,
                                                  estimate_error=False).delta


# ---------------------------------------------------------------- against dp_accounting's accountant
def _check_delta(ours, theirs):
    # ours is pessimistic: not below dp_accounting's (itself pessimistic, discretised differently) beyond 1e-6
    # relative, and close to it; 1e-9 absolute for mcacct's certified round-off (in the mass at +inf: about
    # 1e-10 after thousands of Poisson steps), which dp_accounting does not bound
    assert theirs * (1 - 1e-6) <= ours <= theirs * (1 + 1e-4) + 1e-9, (ours, theirs)


def _check_epsilon(ours, theirs):
    assert theirs - 1e-6 <= ours <= theirs * (1 + 1e-3) + 1e-4, (ours, theirs)


# epsilon queries compile once per length of the composed PLD (seconds each): asked only of the Gaussian, whose
# two directions have one length; delta queries are NumPy sums
@pytest.mark.parametrize("event, epsilons, deltas", [
    (pld.Event(pld.GaussianSpec(0.5), 3), (1.0, 20.0), (1e-5, 1e-10)),       # small sigma, tiny delta
    (pld.Event(pld.PoissonGaussianSpec(0.9, 2.0), 10), (1.0, 8.0), ()),      # q near 1
    (pld.Event(pld.PoissonGaussianSpec(0.01, 1.0), 3000), (1.0, 4.0), ()),   # many steps
], ids=["small_sigma", "q_near_1", "many_steps"])
def test_upper_bounds_close_to_dp_accounting(event, epsilons, deltas):
    exported = pld.to_dp_event(event)
    acc = pld.PLDAccountant(H).compose(exported)
    assert acc.ledger_events == [event] and acc.ledger == exported
    for eps in epsilons:
        _check_delta(acc.get_delta(eps), _oracle(exported, epsilon=eps))
    for delta in deltas:
        _check_epsilon(acc.get_epsilon(delta), _oracle(exported, delta=delta))


def test_heterogeneous_ledger_close_to_dp_accounting():
    # a Poisson phase and a Gaussian release, composed as a spec and as a dp event, exported back as one event
    acc = pld.PLDAccountant(H).compose(pld.PoissonGaussianSpec(0.05, 1.0), 200)
    acc.compose(de.GaussianDpEvent(1.5), count=2)
    exported = acc.to_dp_event()
    assert pld.from_dp_event(exported) == acc.events
    for eps in (1.0, 5.0):
        _check_delta(acc.get_delta(eps), _oracle(exported, epsilon=eps))
