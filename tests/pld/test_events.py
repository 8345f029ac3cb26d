"""Heterogeneous composition of events (mcacct.pld.events), dp_accounting interop, and the round-off bound of
discrete PLD convolutions. Oracles: dp_accounting's PLD accountant (test-only) and mcacct's homogeneous path."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

import mcacct  # noqa: F401  (float64)
from mcacct import pld
from mcacct.pld.discrete import DirectionPLD, convolve_with_bound, mechanism_pld
from mcacct.pld.events import event_to_dict, trim

de = pytest.importorskip("dp_accounting.dp_event")
ppa = pytest.importorskip("dp_accounting.pld.pld_privacy_accountant")

H = 1e-4


def _dpa_epsilon(event, delta, h=H):
    acc = ppa.PLDAccountant(value_discretization_interval=h)
    acc.compose(event)
    return acc.get_epsilon(delta)


def _check_against_oracle(ours, theirs):
    # ours is pessimistic: never below the oracle by more than its own discretisation error, and close to it
    assert ours >= theirs - 1e-6, (ours, theirs)
    assert ours <= theirs * (1 + 1e-4) + 1e-5, (ours, theirs)


def test_general_mixtures_composed_match_dp_accounting():
    event = de.ComposedDpEvent([
        de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.01, de.GaussianDpEvent(1.0)), 200),
        de.SelfComposedDpEvent(de.MixtureOfGaussiansDpEvent(2.0, [0.0, 2.0, 3.0], [0.33, 0.34, 0.33]), 2),
        de.MixtureOfGaussiansDpEvent(3.0, [0.5, 1.0], [0.5, 0.5])])
    # h = 1e-3: dp_accounting's mixture PLD takes ~30 s at 1e-4
    ours = pld.events_epsilon(pld.from_dp_event(event), 1e-6, estimate_error=False, value_discretization_interval=1e-3)
    _check_against_oracle(ours.epsilon, _dpa_epsilon(event, 1e-6, h=1e-3))
    assert ours.epsilon == max(ours.epsilon_remove, ours.epsilon_add)


def test_mixed_poisson_schedule_and_gaussian_release_match_dp_accounting():
    event = de.ComposedDpEvent([
        de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.01, de.GaussianDpEvent(1.0)), 150),
        de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.03, de.GaussianDpEvent(1.5)), 100),
        de.GaussianDpEvent(10.0)])
    ours = pld.events_epsilon(pld.from_dp_event(event), 1e-6, estimate_error=False)
    _check_against_oracle(ours.epsilon, _dpa_epsilon(event, 1e-6))


def test_one_event_equals_the_homogeneous_path():
    spec = pld.PoissonGaussianSpec(0.02, 1.2, steps=300)
    h = dict(estimate_error=False, value_discretization_interval=1e-3)  # the two paths agree at any grid spacing
    hom = pld.pld_epsilon(spec, 1e-5, **h).epsilon
    ev = pld.events_epsilon([pld.Event(pld.PoissonGaussianSpec(0.02, 1.2), 300)], 1e-5, **h)
    assert ev.epsilon >= hom
    assert ev.epsilon == pytest.approx(hom, rel=1e-6)
    # the same event split in pieces is merged into one transform: identical result
    split = pld.events_epsilon([(pld.PoissonGaussianSpec(0.02, 1.2), 100)] * 3, 1e-5, **h)
    assert split.epsilon == ev.epsilon and len(split.events) == 1 and split.events[0]["count"] == 300


def test_delta_direction_maximum_and_error_estimate():
    events = [pld.Event(pld.PoissonGaussianSpec(0.05, 1.0), 50), pld.Event(pld.GaussianSpec(4.0), 3)]
    r = pld.events_delta(events, 1.0)
    assert r.delta == max(r.delta_remove, r.delta_add) and 0 < r.delta < 1
    assert math.isfinite(r.error_estimate) and r.error_estimate < 1e-3 * r.delta
    # a composition has at least the delta of each part
    part = pld.events_delta(events[:1], 1.0, estimate_error=False)
    assert r.delta >= part.delta


def test_cyclic_poisson_without_steps_is_self_composed_by_powers():
    spec = pld.CyclicPoissonBandMFSpec(iterations=40, min_sep=4, sampling_prob=0.1, c_col=(1.0, 0.5), sigma=1.5)
    h = dict(estimate_error=False, value_discretization_interval=1e-3)  # the paths agree at any grid spacing
    three = pld.events_epsilon([pld.Event(spec, 3)], 1e-5, **h).epsilon
    once = pld.pld_epsilon(spec, 1e-5, **h).epsilon
    triple = pld.pld_epsilon(pld.PoissonGaussianSpec(0.1, 1.5 / math.hypot(1.0, 0.5), steps=30), 1e-5, **h).epsilon
    assert three > once
    assert three == pytest.approx(triple, rel=1e-4) and three >= triple - 1e-9


@pytest.mark.parametrize("entry, match", [
    ({"mechanism": "laplace", "scale": 1.0}, "event 0: unknown mechanism 'laplace'"),
    ({"mechanism": "mixture_of_gaussians", "sigma": 1.0, "sensitivities": [0, 1], "probs": [0.5, 0.6]},
     r"event 0 \(mixture_of_gaussians\): probs must .* sum to 1"),
    ({"mechanism": "gaussian", "sigma": 1.0, "count": -3},
     r"event 0 \(gaussian\): count must be an integer in \[0, inf\); got -3"),
    ({"mechanism": "gaussian", "sigma": 1.0, "noise": 2}, r"unknown field\(s\) \['noise'\]"),
    ({"mechanism": "poisson_gaussian", "sigma": 1.0}, r"event 0 \(poisson_gaussian\):.*sampling_prob"),
    ({"mechanism": "mixture_of_gaussians", "sigma": 1.0, "sensitivities": [-1, 1], "probs": [0.5, 0.5]},
     "sensitivities must be finite and >= 0"),
])
def test_bad_events_name_the_entry(entry, match):
    with pytest.raises(ValueError, match=match):
        pld.event_from_dict(entry, 0)


def test_events_round_trip_through_json(tmp_path):
    events = [pld.Event(pld.MixtureOfGaussiansSpec(2.0, (0.0, 1.0), (0.5, 0.5)), 4),
              pld.Event(pld.GaussianSpec(3.0, sensitivity=2.0), 1)]
    path = tmp_path / "e.json"
    path.write_text(json.dumps([event_to_dict(e) for e in events]))
    assert pld.load_events(path) == events
    path.write_text('{"mechanism": "gaussian"}')
    with pytest.raises(ValueError, match="must hold a JSON list"):
        pld.load_events(path)


def test_from_dp_event_refuses_unsupported_events_by_name():
    with pytest.raises(ValueError, match="LaplaceDpEvent is not supported"):
        pld.from_dp_event(de.LaplaceDpEvent(1.0))
    with pytest.raises(ValueError, match="PoissonSampledDpEvent of LaplaceDpEvent"):
        pld.from_dp_event(de.PoissonSampledDpEvent(0.1, de.LaplaceDpEvent(1.0)))
    with pytest.raises(ValueError, match="composes no mechanism"):
        pld.from_dp_event(de.NoOpDpEvent())
    ev = pld.from_dp_event(de.SelfComposedDpEvent(de.ComposedDpEvent([de.GaussianDpEvent(2.0)] * 2), 5))
    assert ev == [pld.Event(pld.GaussianSpec(2.0), 10)]
    assert pld.from_dp_event(de.SelfComposedDpEvent(de.GaussianDpEvent(1.0), np.int64(3))) == [
        pld.Event(pld.GaussianSpec(1.0), 3)]


@pytest.mark.parametrize("count", [2.7, 999.9999, 3.0, "3", True, -1])
def test_from_dp_event_refuses_a_count_that_is_not_an_integer(count):
    """int() had cut 2.7 compositions down to 2 (stop 75); dp_accounting refuses such counts too."""
    with pytest.raises(ValueError, match=r"^SelfComposedDpEvent count must be an integer in \[0, inf\)"):
        pld.from_dp_event(de.SelfComposedDpEvent(de.GaussianDpEvent(1.0), count))


@pytest.mark.slow
def test_cli_events(tmp_path):
    path = tmp_path / "events.json"
    path.write_text(json.dumps([{"mechanism": "poisson_gaussian", "sampling_prob": 0.01, "sigma": 1.0, "count": 100},
                                {"mechanism": "gaussian", "sigma": 8.0, "count": 1}]))
    run = lambda *a: subprocess.run([sys.executable, "-m", "mcacct", "pld", *a], capture_output=True,  # noqa: E731
                                    text=True)
    ok = run("epsilon", "--events", str(path), "--delta", "1e-5", "--json", "--no-error-estimate",
             "--value-discretization-interval", "1e-3")
    assert ok.returncode == 0, ok.stderr
    out = json.loads(ok.stdout)
    assert out["certified"] and out["epsilon"] > 0 and len(out["events"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"mechanism": "gaussian", "sigma": 1.0, "count": 1}, {"mechanism": "nope"}]))
    r = run("epsilon", "--events", str(bad), "--delta", "1e-5")
    assert r.returncode == 2 and "event 1: unknown mechanism 'nope'" in r.stderr and "Traceback" not in r.stderr


def test_convolution_roundoff_bound_dominates_the_observed_error():
    rng = np.random.default_rng(0)
    for n_a, n_b in ((40, 5000), (3000, 5000)):
        a = rng.random(n_a) ** 8
        b = rng.random(n_b) ** 8
        a, b = a / a.sum(), b / b.sum()
        got, bound = convolve_with_bound(a, b)
        want = np.convolve(a.astype(np.longdouble), b.astype(np.longdouble))
        err = float(np.sum(np.abs(got.astype(np.longdouble) - want)))
        assert err <= bound, (err, bound)
        assert bound < 1e-11


def test_composition_carries_the_roundoff_and_trim_is_pessimistic():
    p = mechanism_pld(pld.PoissonGaussianSpec(0.05, 1.0, steps=20), 1e-3)["remove"]
    q = p.compose(p)
    assert q.infinity_mass > 2 * p.infinity_mass - 1e-300  # the convolution's bound was added
    t = trim(q, 1e-12)
    assert t.pmf.size < q.pmf.size
    for eps in (0.0, 0.5, 1.0, 2.0):  # up to the certified queries' own round-off factor, (n + 4) u
        assert t.delta(eps)[0] >= q.delta(eps)[0] * (1 - (q.pmf.size + 4) * 2.0 ** -53)
    assert isinstance(t, DirectionPLD) and t.certified
