"""mcacct.core.rates: the b-min-sep conversions p0 = 1/(1/p + b - 1) <-> p = p0/(1 - p0 (b - 1)), the one place both the
accounted schemes and the training samplers take them from."""

import math

import pytest

import mcacct.training.batching as bt
from mcacct.core import rates


@pytest.mark.parametrize("p,b", [(0.3, 1), (0.05, 4), (1.0, 4), (0.5, 10), (1e-6, 256), (0.9, 10**6)])
def test_participation_rate_is_the_stationary_formula_and_the_inverse_undoes_it(p, b):
    p0 = rates.participation_rate(p, b)
    assert p0 == 1.0 / (1.0 / p + b - 1)
    assert 0 < p0 <= 1.0 / b * (1 + 1e-15)
    assert rates.sampling_prob_from_rate(p0, b) == pytest.approx(p, rel=1e-9)


def test_one_bin_is_poisson_and_monotone_in_p():
    assert rates.participation_rate(0.37, 1) == 0.37
    assert rates.sampling_prob_from_rate(0.37, 1) == 0.37
    ps = [0.01, 0.1, 0.5, 0.9, 1.0]
    r0 = [rates.participation_rate(p, 7) for p in ps]
    assert r0 == sorted(r0) and len(set(r0)) == len(r0)


@pytest.mark.parametrize("b", [1, 2, 3, 7, 256, 10**6, 2**40])
def test_rate_one_over_b_is_probability_one(b):
    """p0 = 1/b is p = 1 (balls-in-bins): exactly where 1/b is a float (b a power of 2), else within rounding;
    never p > 1 (nor a division by ~0)."""
    for p in (rates.sampling_prob_from_rate(1.0 / b, b), rates.sampling_prob_from_batch_size(1000 / b, 1000, b)):
        assert p <= 1.0 and p == pytest.approx(1.0, rel=0, abs=4e-16 * b)  # 1 - p0 (b - 1) cancels
        if b & (b - 1) == 0:
            assert p == 1.0


def test_batch_size_is_the_rate_times_the_dataset_size():
    p = rates.sampling_prob_from_batch_size(1793, 14_745_600, 256)
    p0 = 1793 / 14_745_600
    assert p == p0 / (1 - p0 * 255)
    assert p == rates.sampling_prob_from_rate(p0, 256)
    assert rates.participation_rate(p, 256) == pytest.approx(p0, rel=1e-12)


@pytest.mark.parametrize("call,message", [
    (lambda: rates.participation_rate(0.0, 2), "sampling_prob must be in (0, 1]; got 0"),
    (lambda: rates.participation_rate(1.5, 2), "sampling_prob must be in (0, 1]; got 1.5"),
    (lambda: rates.participation_rate(0.5, 0), "min_sep must be an integer in [1, inf); got 0"),
    (lambda: rates.participation_rate(0.5, 2.5), "min_sep must be an integer in [1, inf); got 2.5"),
    (lambda: rates.sampling_prob_from_rate(0.3, 4), "rate must be in (0, 0.25]; got 0.3"),
    (lambda: rates.sampling_prob_from_rate(0.0, 4), "rate must be in (0, 0.25]; got 0"),
    (lambda: rates.sampling_prob_from_rate(float("nan"), 4), "rate must be a finite real number in (0, 0.25]; got nan"),
    (lambda: rates.sampling_prob_from_batch_size(600, 1000, 2), "expected_batch_size must be in (0, 500]; got 600"),
    (lambda: rates.sampling_prob_from_batch_size(10, 0, 2), "dataset_size must be an integer in [1, inf); got 0"),
])
def test_out_of_range_names_the_parameter_and_range(call, message):
    with pytest.raises(ValueError) as err:
        call()
    assert str(err.value) == message


def test_training_samplers_use_these_conversions():
    assert bt.participation_rate.__wrapped__ is rates.participation_rate  # wrapped in float64 only
    assert bt.sampling_prob_from_rate.__wrapped__ is rates.sampling_prob_from_rate
    s = bt.BMinSepSampler.from_participation_rate(1000, 0.02, 5)
    assert s.sampling_prob == rates.sampling_prob_from_rate(0.02, 5)
    assert s.participation_rate == rates.participation_rate(s.sampling_prob, 5)
    assert math.isclose(s.expected_batch_size, 20.0)
