"""mcacct.get_noise_multiplier as a drop-in for Opacus' call (issue #41): ``sample_rate``, ``epochs``,
``accountant`` and ``epsilon_tolerance`` accepted, ``float(result)`` the noise multiplier, the b-min-sep rate
converted to its sampling probability, unknown names refused with a suggestion. Cheap: PLD calls on a coarse
grid (one compiled program), the Monte Carlo route stopped before its cost probe."""

import math
import operator

import jax
import pytest

import mcacct
import mcacct.noise_multiplier
from mcacct.interop.opacus import OPACUS_KEYWORDS, sampling_prob_from_sample_rate, steps_from_epochs
from mcacct.noise_multiplier import KEYWORDS, NoiseMultiplier

# a cheap Poisson DP-SGD target (as tests/evr/test_noise.py): one compiled PLD program, then milliseconds a call
H = dict(value_discretization_interval=2e-3)
TARGET = dict(target_epsilon=1.0, target_delta=1e-3)


def _own(sampling_prob=0.2, steps=20):
    """mcacct's own call, positional as before."""
    return mcacct.get_noise_multiplier(1.0, 1e-3, sampling_prob, steps, **H)


@pytest.mark.parametrize("accountant", [None, "pld", "prv"])
def test_opacus_call_returns_a_float_equal_to_mcacct_own_call(accountant):
    r = mcacct.get_noise_multiplier(**TARGET, sample_rate=0.2, steps=20, epochs=None, accountant=accountant,
                                    epsilon_tolerance=0.01, **H)
    ref = _own()
    assert isinstance(float(r), float) and float(r) == r.sigma == ref.sigma
    assert r.method == "pld" and r.scheme == ref.scheme and r.scheme.sampling_prob == 0.2  # Poisson: p = rate
    assert r.delta <= r.target_delta == 1e-3


def test_float_is_sigma_and_there_is_no_index():
    r = _own()
    assert float(r) == r.sigma and type(float(r)) is float
    assert not hasattr(NoiseMultiplier, "__index__")
    with pytest.raises(TypeError):
        operator.index(r)
    # every attribute kept
    d = r.to_dict()
    assert d["sigma"] == r.sigma and d["method"] == "pld" and r.failure_probability == 0.0 and r.verified


@pytest.mark.parametrize("epochs, rate, steps", [
    (4, 0.2, 20), (3, 0.1, 30), (7, 0.7, 10),  # exact quotients, whatever the floating point rounding
    (3.9, 0.2, 20), (1, 0.3, 4), (2.5, 0.2, 13), (1e-9, 0.5, 1),  # rounded up, at least 1
])
def test_steps_from_epochs_round_up(epochs, rate, steps):
    assert steps_from_epochs(epochs, rate) == steps
    assert steps * rate >= epochs * (1 - 1e-9)


def test_epochs_give_the_steps_rounded_up():
    ref = _own(0.2, 20)
    for kw in (dict(sample_rate=0.2, epochs=3.9), dict(sample_rate=0.2, epochs=4),
               dict(sampling_prob=0.2, epochs=3.9),  # Poisson: the probability is the rate
               dict(batch_size=20, dataset_size=100, epochs=3.9)):
        r = mcacct.get_noise_multiplier(**TARGET, **kw, **H)
        assert r.scheme.steps == 20 and float(r) == ref.sigma, kw
    # one step more than 20 * 0.2 = 4 epochs: 21 steps, not truncated to 20
    assert mcacct.get_noise_multiplier(**TARGET, sample_rate=0.2, epochs=4.01, **H).scheme.steps == 21


@pytest.mark.parametrize("b", [1, 2, 3, 8, 32])
def test_sample_rate_to_sampling_prob_round_trips(b):
    for r in (1e-4, 0.01 / b, 0.3 / b, 0.999 / b, 1.0 / b):
        p = sampling_prob_from_sample_rate(r, b)
        assert 0 < p <= 1
        assert mcacct.expected_participation_rate(p, b) == pytest.approx(r, rel=1e-12)
        assert p > r if b > 1 else p == r  # treating the rate as p would be optimistic
        assert p == pytest.approx(mcacct.sampling_prob_from_batch_size(r * 10_000, 10_000, b), rel=1e-12)
    assert sampling_prob_from_sample_rate(1.0 / b, b) == pytest.approx(1.0, rel=1e-15)  # the largest rate: p = 1
    assert sampling_prob_from_sample_rate(0.25, None) == 0.25


def test_sample_rate_with_min_sep_builds_the_scheme_of_the_converted_p(monkeypatch):
    """The Monte Carlo route, stopped where its cost probe would start: the scheme has p, not the rate."""
    seen = {}

    class Stop(Exception):
        pass

    def probe(problem, *args, **kwargs):
        seen["scheme"] = problem.scheme
        raise Stop

    monkeypatch.setattr(mcacct.noise_multiplier, "estimate_cost", probe)
    with pytest.raises(Stop):
        mcacct.get_noise_multiplier(1.0, 1e-3, sample_rate=0.1, epochs=2, min_sep=4, c_col=(0.6, 0.4),
                                    key=jax.random.key(0), progress=False)
    p = 0.1 / (1 - 0.1 * 3)
    assert seen["scheme"] == mcacct.BMinSep(seen["scheme"].sampling_prob, 4, 20)
    assert seen["scheme"].sampling_prob == pytest.approx(p, rel=1e-14) and p > 0.1
    assert mcacct.expected_participation_rate(seen["scheme"].sampling_prob, 4) == pytest.approx(0.1, rel=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(sample_rate=0.2, steps=16, min_sep=8), r"sample_rate must be in \(0, 1/min_sep\] = \(0, 0.125\]"),
    (dict(sample_rate=0.0, steps=16), r"sample_rate must be in \(0, 1\]"),
    (dict(sample_rate=1.5, steps=16), r"sample_rate must be in \(0, 1\]"),
    (dict(sample_rate=0.1, sampling_prob=0.1, steps=16), "give sample_rate .* or sampling_prob, not both"),
    (dict(sample_rate=0.1, batch_size=10, dataset_size=100, steps=16), "give sample_rate .* or batch_size"),
    (dict(sample_rate=0.1, dataset_size=100, steps=16), "dataset_size does not apply with sample_rate"),
    (dict(sample_rate=0.1, steps=16, epochs=2), "give steps or epochs, not both"),
    (dict(sample_rate=0.1, epochs=0), r"epochs must be in \(0, inf\)"),
    (dict(sample_rate=0.1, epochs=-1.0), r"epochs must be in \(0, inf\)"),
    (dict(epochs=2), "epochs needs .* sample_rate"),
    (dict(sampling_prob=0.1, epochs=2, min_sep=2), "epochs needs .* sample_rate"),
    (dict(sample_rate=0.1, steps=16, accountant="rdp"), "accountant='rdp' .* PLD accountant.* accountant='pld'"),
    (dict(sample_rate=0.1, steps=16, accountant="gdp"), "accountant='gdp' .* GDP"),
    (dict(sample_rate=0.1, steps=16, accountant="moments"), "accountant must be None, 'pld' or 'prv'"),
    (dict(sample_rate=0.1, steps=16, accountant="pld", min_sep=2), "accountant='pld' .* with min_sep"),
    (dict(sample_rate=0.1, steps=16, accountant="prv", min_sep=2), "accountant='prv' .* Monte Carlo"),
    (dict(sample_rate=0.1, steps=16, epsilon_tolerance=0.0), r"epsilon_tolerance must be in \(0, inf\)"),
    (dict(sample_rate=0.1, steps=16, epsilon_tolerance=-0.01), "epsilon_tolerance must be"),
    (dict(sample_rate=0.1, steps=16, epsilon_tolerance="0.01"), "epsilon_tolerance must be"),
    (dict(sample_rate=0.1, steps=16, epsilon_tolerance=math.inf), "epsilon_tolerance must be"),
])
def test_refusals_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mcacct.get_noise_multiplier(**TARGET, **kwargs)


def test_a_problem_fixes_rate_steps_and_accountant():
    prob = mcacct.Problem(mcacct.BMinSep(0.2, 2, 16), mcacct.BandedToeplitz((0.6, 0.4)))
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="sample_rate comes from problem"):
        mcacct.get_noise_multiplier(**TARGET, problem=prob, sample_rate=0.1, key=key)
    with pytest.raises(ValueError, match="epochs comes from problem"):
        mcacct.get_noise_multiplier(**TARGET, problem=prob, epochs=1, key=key)
    with pytest.raises(ValueError, match="accountant='pld' .* with problem"):
        mcacct.get_noise_multiplier(**TARGET, problem=prob, accountant="pld", key=key)


@pytest.mark.parametrize("name, suggestion", [
    ("sample_rat", "sample_rate"), ("epoch", "epochs"), ("accountnt", "accountant"),
    ("epsilon_tolerence", "epsilon_tolerance"), ("sampling_probability", "sampling_prob"),
    ("ladder_raito", "ladder_ratio"),
])
def test_unknown_names_suggest_the_close_one(name, suggestion):
    for route in (dict(steps=16), dict(steps=16, min_sep=2, key=jax.random.key(0))):  # both routes, before work
        with pytest.raises(ValueError, match=f"unknown keyword argument '{name}' \\(did you mean '{suggestion}'\\?\\)"):
            mcacct.get_noise_multiplier(**TARGET, sample_rate=0.1, **route, **{name: 0.1})


def test_unknown_names_without_a_close_one_list_the_accepted_names():
    with pytest.raises(ValueError, match="unknown keyword arguments 'alphas', 'zzz'; it takes .*sample_rate") as e:
        mcacct.get_noise_multiplier(**TARGET, sample_rate=0.1, steps=16, zzz=1, alphas=(2, 3))
    assert "did you mean" not in str(e.value)
    assert set(OPACUS_KEYWORDS) <= set(KEYWORDS)


def test_options_of_the_other_route_keep_their_messages():
    with pytest.raises(ValueError, match="ladder_ratio: Monte Carlo options; Poisson DP-SGD uses the PLD"):
        mcacct.get_noise_multiplier(**TARGET, sample_rate=0.1, steps=16, ladder_ratio=1.1)
    with pytest.raises(ValueError, match="value_discretization_interval: options of the PLD accountant"):
        mcacct.get_noise_multiplier(**TARGET, sample_rate=0.1, steps=16, min_sep=2, key=jax.random.key(0), **H)


def test_the_opacus_call_certifies_by_dp_accounting():
    """Opacus' documented example values: dp_accounting's PLD accountant agrees that the sigma is 2-DP at 1e-5."""
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant
    sigma = float(mcacct.get_noise_multiplier(target_epsilon=2, target_delta=1e-5, sample_rate=0.01, steps=100))
    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(sigma)), 100)
    assert acc.get_epsilon(1e-5) <= 2 + 1e-3
