"""mcacct.pld.PLDAccountant as a dp_accounting.PrivacyAccountant (issue #41): calibrate_dp_mechanism, the DpEvent
ledger, mixed mcacct/DpEvent compositions, refusals, mechanisms without privacy, and to_dp_event of a Monte Carlo
scheme. Oracles: dp_accounting's own PLD accountant (test-only) and the closed-form Gaussian calibration.

Cost: every composition runs at h = 0.05, where every pmf of these mechanisms fits the smallest size bucket (1024),
so the whole file compiles a handful of programs (about 10 s on the 2-core box)."""

import math

import pytest

import mcacct
from mcacct import pld
from mcacct.pld.interop import dp_event_parts
from mcacct.pld.stateful import NEIGHBORING_RELATIONS, UnsupportedEventError

dpa = pytest.importorskip("dp_accounting")
de = pytest.importorskip("dp_accounting.dp_event")
ppa = pytest.importorskip("dp_accounting.pld.pld_privacy_accountant")
mc = pytest.importorskip("dp_accounting.mechanism_calibration")

NR = dpa.NeighboringRelation
H = 0.05        # mcacct's grid and dp_accounting's, for the comparisons on the same grid
H_FINE = 2e-3   # dp_accounting's grid as a near-exact reference (its pessimistic bias is O(H_FINE^2) ~ 4e-6)
TOL = 1e-6      # calibrate_dp_mechanism's default tolerance on the parameter (brentq's xtol)

# Tolerances. Both accountants discretise pessimistically by connecting the dots of the same grid, so on one grid
# they bound the same discretised curve and differ only in their tails and round-off: mcacct moves the noise beyond
# 10 standard deviations and its certified FFT/convolution round-off (<= 1e-10 here) to the mass at +inf,
# dp_accounting truncates tails of mass 1e-15. Measured at H = 0.05: calibrated sigmas within 1.4e-8, eps and delta
# of the mixed composition above dp_accounting's by 1e-4..3e-3 relative (mcacct's mixture discretisation). Hence:
# * "not below": ours >= theirs - 1e-9 (eps, sigma: 2 * TOL more for the two root finders), delta >= theirs (1 -
#   1e-9); anything lower would mean mcacct dropped mass;
# * "close": within 4 h^2 = 1e-2 relative, the order of the connect-the-dots error of a grid of spacing h for the
#   few mechanisms composed here (the chord of e^l between grid points is off by at most h^2 / 8 of the curve).
CLOSE = 4 * H ** 2


def _theirs(h=H):
    return ppa.PLDAccountant(value_discretization_interval=h)


def _ours():
    return pld.PLDAccountant(H)


# ---------------------------------------------------------------- the dp_accounting interface
def test_is_a_dp_accounting_privacy_accountant():
    acc = pld.PLDAccountant()
    assert isinstance(acc, dpa.PrivacyAccountant)
    assert acc.neighboring_relation is NR.ADD_OR_REMOVE_ONE and NEIGHBORING_RELATIONS == (NR.ADD_OR_REMOVE_ONE,)
    assert pld.PLDAccountant(neighboring_relation=NR.ADD_OR_REMOVE_ONE).neighboring_relation is NR.ADD_OR_REMOVE_ONE
    assert acc.ledger == de.NoOpDpEvent() and acc.ledger_events == [] and not acc.non_private
    assert acc.supports(de.GaussianDpEvent(1.0)) and acc.supports(pld.GaussianSpec(1.0))
    assert acc._maybe_compose(de.GaussianDpEvent(1.0), 3, False) is None and acc.ledger_events == []
    assert issubclass(UnsupportedEventError, dpa.UnsupportedEventError) and issubclass(UnsupportedEventError,
                                                                                       ValueError)


def test_calibrate_gaussian_matches_dp_accounting_and_the_closed_form():
    # the default bracket starts at noise 0: GaussianDpEvent(0) is accounted as non-private (epsilon inf)
    eps, delta = 2.0, 1e-5
    ours = dpa.calibrate_dp_mechanism(_ours, de.GaussianDpEvent, eps, delta)
    theirs = dpa.calibrate_dp_mechanism(_theirs, de.GaussianDpEvent, eps, delta)
    exact = dpa.get_sigma_gaussian(eps, delta)  # Balle & Wang's analytic calibration
    assert ours >= theirs - 1e-9 - 2 * TOL and abs(ours - theirs) <= CLOSE * theirs, (ours, theirs)
    assert ours >= exact - TOL and ours <= exact * (1 + CLOSE), (ours, exact)  # never less noise than exact
    assert _ours().compose(de.GaussianDpEvent(ours)).get_epsilon(delta) <= eps  # the calibrator's guarantee


def test_calibrate_poisson_sampled_gaussian_matches_dp_accounting():
    eps, delta = 1.0, 1e-5

    def make_event(sigma):
        return de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.05, de.GaussianDpEvent(sigma)), 20)

    bracket = mc.ExplicitBracketInterval(0.5, 3.0)
    ours = dpa.calibrate_dp_mechanism(_ours, make_event, eps, delta, bracket_interval=bracket)
    theirs = dpa.calibrate_dp_mechanism(_theirs, make_event, eps, delta, bracket_interval=bracket)
    fine = dpa.calibrate_dp_mechanism(lambda: _theirs(H_FINE), make_event, eps, delta, bracket_interval=bracket)
    assert ours >= theirs - 1e-9 - 2 * TOL and abs(ours - theirs) <= CLOSE * theirs, (ours, theirs)
    assert ours >= fine * (1 - 1e-5) - 2 * TOL, (ours, fine)  # at least the near-exact noise (soundness)
    assert _ours().compose(make_event(ours)).get_epsilon(delta) <= eps


def test_calibrate_a_discrete_parameter_and_compose_its_mcacct_spec():
    # the number of steps, an integer parameter (discrete=True); then the same run as an mcacct spec
    def make_event(steps):
        return de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.05, de.GaussianDpEvent(1.0)), steps)

    bracket = mc.ExplicitBracketInterval(1, 64)
    ours = dpa.calibrate_dp_mechanism(_ours, make_event, 2.0, 1e-5, bracket_interval=bracket, discrete=True)
    theirs = dpa.calibrate_dp_mechanism(_theirs, make_event, 2.0, 1e-5, bracket_interval=bracket, discrete=True)
    assert isinstance(ours, int) and abs(ours - theirs) <= 1 and ours <= theirs, (ours, theirs)
    acc = _ours().compose(pld.PoissonGaussianSpec(0.05, 1.0), count=ours)
    assert acc.get_epsilon(1e-5) <= 2.0
    assert acc.ledger == make_event(ours)  # exported as the DpEvent it is


# ---------------------------------------------------------------- mixed compositions
def _mixed():
    """The same composition given as mcacct events and DpEvents (ours) and as DpEvents (the oracle's)."""
    mog = de.MixtureOfGaussiansDpEvent(2.0, [0.0, 1.0], [0.5, 0.5])
    acc = _ours()
    acc.compose(pld.PoissonGaussianSpec(0.05, 1.0), count=20)                                  # mcacct spec
    acc.compose(de.GaussianDpEvent(3.0))                                                          # DpEvent
    acc.compose(de.ComposedDpEvent([de.SelfComposedDpEvent(mog, 3), de.NoOpDpEvent()]), count=2)  # composite
    acc.compose(pld.Event(pld.GaussianSpec(sigma=6.0, sensitivity=2.0), 2))                      # sigma / c = 3
    expected = de.ComposedDpEvent([
        de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.05, de.GaussianDpEvent(1.0)), 20),
        de.GaussianDpEvent(3.0),
        de.SelfComposedDpEvent(de.ComposedDpEvent([de.SelfComposedDpEvent(mog, 3), de.NoOpDpEvent()]), 2),
        de.SelfComposedDpEvent(de.GaussianDpEvent(3.0), 2)])
    return acc, expected


def test_mixed_events_close_to_and_not_below_dp_accounting():
    acc, expected = _mixed()
    assert acc.ledger == expected
    assert acc.events == [pld.Event(pld.PoissonGaussianSpec(0.05, 1.0), 20), pld.Event(pld.GaussianSpec(3.0), 1),
                          pld.Event(pld.MixtureOfGaussiansSpec(2.0, (0.0, 1.0), (0.5, 0.5)), 6),
                          pld.Event(pld.GaussianSpec(sigma=6.0, sensitivity=2.0), 2)]
    theirs, fine = _theirs().compose(expected), _theirs(H_FINE).compose(expected)
    for delta in (1e-5, 1e-8):
        ours, t, f = acc.get_epsilon(delta), theirs.get_epsilon(delta), fine.get_epsilon(delta)
        assert t - 1e-9 <= ours <= t * (1 + CLOSE), (delta, ours, t)
        assert ours >= f * (1 - 1e-5), (delta, ours, f)  # above the near-exact value: an upper bound
    for eps in (0.5, 2.0):
        ours, t, f = acc.get_delta(eps), theirs.get_delta(eps), fine.get_delta(eps)
        assert t * (1 - 1e-9) <= ours <= t * (1 + CLOSE), (eps, ours, t)
        assert ours >= f * (1 - 1e-5), (eps, ours, f)
    assert acc.get_delta_result(2.0, estimate_error=False).delta == acc.get_delta(2.0)  # the same composition


def test_the_dp_ledger_reaccounted_by_dp_accounting_is_what_mcacct_accounts():
    # cyclic-Poisson BandMF (and the group specs) have no DpEvent: the ledger holds the dominating pair of their
    # analysis, the same privacy curve: ceil(n / b) = 2 Poisson-sampled Gaussians of noise sigma / ||c|| = 2, twice
    spec = pld.CyclicPoissonBandMFSpec(iterations=6, min_sep=3, sampling_prob=0.1, c_col=(0.6, 0.8), sigma=2.0)
    acc = _ours().compose(spec, count=2)
    assert acc.ledger == de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.1, de.GaussianDpEvent(2.0)), 4)
    assert dp_event_parts(acc.ledger) == ([pld.Event(pld.PoissonGaussianSpec(0.1, 2.0), 4)], False)
    ours, theirs = acc.get_delta(1.0), _theirs().compose(acc.ledger).get_delta(1.0)
    assert theirs * (1 - 1e-9) <= ours <= theirs * (1 + CLOSE), (ours, theirs)


# ---------------------------------------------------------------- refusals
UNSUPPORTED = [
    de.LaplaceDpEvent(1.0),  # dp_accounting's PLD accountant has it; mcacct's mechanisms are Gaussian mixtures
    de.PoissonSampledDpEvent(0.1, de.LaplaceDpEvent(1.0)),
    de.RandomizedResponseDpEvent(0.5, 4),
    de.DiscreteLaplaceDpEvent(1.0, 1),
    de.SampledWithoutReplacementDpEvent(100, 10, de.GaussianDpEvent(1.0)),
    de.ZCDpEvent(0.1),
    de.UnsupportedDpEvent(),
]


@pytest.mark.parametrize("event", UNSUPPORTED, ids=lambda e: type(e).__name__)
def test_unsupported_events_are_refused_naming_the_sub_event(event):
    acc = _ours()
    assert not acc.supports(event)
    assert not acc.supports(de.ComposedDpEvent([de.GaussianDpEvent(1.0), de.SelfComposedDpEvent(event, 3)]))
    details = acc._maybe_compose(de.ComposedDpEvent([de.GaussianDpEvent(1.0), event]), 1, False)
    assert details.invalid_event == event and type(event).__name__ in details.error_message
    for exc in (UnsupportedEventError, dpa.UnsupportedEventError, ValueError):  # dp_accounting's and mcacct's
        with pytest.raises(exc, match=f"{type(event).__name__}.* is not supported.*sub-event {type(event).__name__}"):
            acc.compose(de.ComposedDpEvent([de.GaussianDpEvent(1.0), de.SelfComposedDpEvent(event, 3)]))
    assert acc.ledger == de.NoOpDpEvent() and acc.ledger_events == []  # nothing of a refused event


@pytest.mark.parametrize("relation", [NR.REPLACE_ONE, NR.REPLACE_SPECIAL, "ADD_OR_REMOVE_ONE", 1, None])
def test_other_neighboring_relations_are_refused(relation):
    with pytest.raises(ValueError, match=r"neighboring_relation must be one of NeighboringRelation\.ADD_OR_REMOVE_ONE"
                                         r" .*dp_accounting\.pld\.PLDAccountant\); got "):
        pld.PLDAccountant(neighboring_relation=relation)


def test_a_positional_neighboring_relation_says_to_pass_it_by_keyword():
    # dp_accounting's PLDAccountant takes the relation first; mcacct's takes value_discretization_interval first
    with pytest.raises(ValueError, match=r"value_discretization_interval must be a real number in \(0, 0\.1\]; got "
                                         r"<NeighboringRelation\.ADD_OR_REMOVE_ONE: 1>.*by keyword"):
        pld.PLDAccountant(NR.ADD_OR_REMOVE_ONE)


def test_non_empty_accountant_error_mirrors_dp_accounting():
    def calibrate(factory):
        return dpa.calibrate_dp_mechanism(factory, de.GaussianDpEvent, 1.0, 1e-5)

    for cls in (pld.PLDAccountant, ppa.PLDAccountant):
        with pytest.raises(mc.NonEmptyAccountantError):
            calibrate(lambda: cls().compose(de.GaussianDpEvent(1.0)))
        # composing nothing keeps the ledger empty: what calibrate_dp_mechanism checks before composing
        assert cls().compose(de.NoOpDpEvent()).ledger == de.NoOpDpEvent()
        assert cls().compose(de.SelfComposedDpEvent(de.NoOpDpEvent(), 5)).ledger == de.NoOpDpEvent()
    with pytest.raises(mc.NonEmptyAccountantError):  # an mcacct event fills the ledger too
        calibrate(lambda: pld.PLDAccountant().compose(pld.GaussianSpec(1.0)))
    assert pld.PLDAccountant().compose(pld.GaussianSpec(1.0), count=0).ledger == de.NoOpDpEvent()


# ---------------------------------------------------------------- mechanisms without privacy
@pytest.mark.parametrize("event", [
    de.NonPrivateDpEvent(), de.GaussianDpEvent(0.0), de.PoissonSampledDpEvent(0.1, de.GaussianDpEvent(0.0)),
    de.MixtureOfGaussiansDpEvent(0.0, [0.0, 1.0], [0.5, 0.5]),
], ids=lambda e: type(e).__name__)
def test_mechanisms_without_privacy_give_infinite_epsilon_like_dp_accounting(event):
    acc = _ours().compose(pld.GaussianSpec(2.0)).compose(event)
    theirs = _theirs().compose(de.GaussianDpEvent(2.0)).compose(event)
    assert acc.non_private and acc.get_epsilon(1e-5) == theirs.get_epsilon(1e-5) == math.inf
    assert acc.get_delta(5.0) == theirs.get_delta(5.0) == 1.0
    assert acc.ledger == de.ComposedDpEvent([de.GaussianDpEvent(2.0), event])
    assert acc.to_dp_event() == de.ComposedDpEvent([de.GaussianDpEvent(2.0), de.NonPrivateDpEvent()])
    r = acc.get_epsilon_result(1e-5)
    assert (r.epsilon, r.delta, r.infinity_mass, r.error_estimate) == (math.inf, 1e-5, 1.0, 0.0)
    assert r.events[-1] == {"mechanism": "non_private"}
    assert acc.get_delta_result(5.0, estimate_error=False).delta == 1.0
    assert "non-private" in repr(acc)
    with pytest.raises(ValueError, match="is not private .*epsilon = inf.*PLDAccountant accounts it"):
        pld.from_dp_event(event)


def test_events_that_run_no_mechanism_compose_nothing():
    acc = _ours()
    for event in (de.PoissonSampledDpEvent(0.0, de.GaussianDpEvent(0.0)),
                  de.MixtureOfGaussiansDpEvent(1.0, [0.0], [1.0])):
        assert acc.supports(event)
        acc.compose(event)
        assert _theirs().compose(event).get_delta(0.0) == 0.0  # dp_accounting agrees: no privacy loss
    acc.compose(de.SelfComposedDpEvent(de.NonPrivateDpEvent(), 0))  # dp_accounting's ledger refuses a count of 0
    acc.compose(de.NonPrivateDpEvent(), count=0)
    assert not acc.non_private and acc.ledger == de.NoOpDpEvent() and acc.get_delta(0.0) == 0.0
    assert acc.to_dp_event() == de.NoOpDpEvent()
    assert pld.PLDAccountant().compose(de.NonPrivateDpEvent()).to_dp_event() == de.NonPrivateDpEvent()


# ---------------------------------------------------------------- Monte Carlo schemes
def test_to_dp_event_of_a_monte_carlo_scheme_names_the_monte_carlo_route():
    scheme = mcacct.BMinSep(sampling_prob=0.1, min_sep=2, iterations=10)
    route = (r"BMinSep is a sampling scheme of mcacct's Monte Carlo accountant: it has no exact PLD .*no mcacct\.pld "
             r"event and no dp_accounting DpEvent for {where}\. Account it by Monte Carlo: "
             r"mcacct\.get_noise_multiplier\(.*problem=mcacct\.Problem\(scheme, strategy\), key=key\).*"
             r"mcacct\.estimate\(.*mcacct\.calibrate.*`mcacct calibrate`, `mcacct delta` and `mcacct epsilon`.*"
             r"scheme\.exact_pld\(strategy\)")
    for obj in (scheme, mcacct.Problem(scheme), [pld.GaussianSpec(1.0), scheme]):
        with pytest.raises(ValueError, match=route.format(where=r"mcacct\.pld\.to_dp_event")):
            pld.to_dp_event(obj)
    with pytest.raises(ValueError, match=route.format(where=r"PLDAccountant\.compose")):
        pld.PLDAccountant().compose(scheme)
    assert not pld.PLDAccountant().supports(scheme)
    # the names in the message exist
    from mcacct.cli.commands import build_parser
    commands = build_parser()._subparsers._group_actions[0].choices
    assert {"calibrate", "delta", "epsilon"} <= set(commands)
    assert all(callable(getattr(mcacct, n)) for n in ("get_noise_multiplier", "estimate", "calibrate", "Problem"))


def test_a_problem_with_an_exact_pld_names_its_spec():
    problem = mcacct.Problem(mcacct.BMinSep(sampling_prob=0.1, min_sep=1, iterations=10))
    spec = problem.scheme.exact_pld(problem.strategy)
    with pytest.raises(ValueError, match=r"has an exact PLD, PoissonGaussianSpec\(sampling_prob=0\.1, sigma=1\.0, "
                                         r"steps=10, sensitivity=1\.0\).*dataclasses\.replace\(spec, sigma="):
        pld.to_dp_event(problem)
    assert pld.to_dp_event(spec) == de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.1, de.GaussianDpEvent(1.0)), 10)
