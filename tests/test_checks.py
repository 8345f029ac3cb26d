"""The one validator family of mcacct.core.validate (check_real, check_int, check_prob, check_count, check_bool): one
wording ("NAME must be in RANGE; got VALUE"), numbers' text accepted by default (the command line) and refused with
strict=True (the PLD specs, which keep their fields as given)."""

import numpy as np
import pytest

from mcacct import pld
from mcacct.pld import checks
from mcacct.core.validate import check_bool, check_count, check_int, check_prob, check_real, is_number


def _message(call) -> str:
    with pytest.raises(ValueError) as err:
        call()
    return str(err.value)


@pytest.mark.parametrize("call,message", [
    (lambda: check_real("sigma", 0.0, low=0.0, low_open=True), "sigma must be in (0, inf); got 0"),
    (lambda: check_real("sigma", np.float64("nan"), low=0.0),
     "sigma must be a finite real number in [0, inf); got nan"),
    (lambda: check_real("x", "one", low=0.0), "x must be a finite real number in [0, inf); got 'one'"),
    (lambda: check_real("x", 10**400), "x must be a finite real number in (-inf, inf); got " + str(10**400)),
    (lambda: check_real("delta", 1.0, low=0.0, high=1.0, low_open=True, high_open=True),
     "delta must be in (0, 1); got 1"),
    (lambda: check_real("x", True), "x must be a finite real number in (-inf, inf); got True"),
    (lambda: check_real("x", np.True_), "x must be a finite real number in (-inf, inf); got True"),
    (lambda: check_prob("sampling_prob", 1.5), "sampling_prob must be in (0, 1]; got 1.5"),
    (lambda: check_int("steps", 2.5, low=1), "steps must be an integer in [1, inf); got 2.5"),
    (lambda: check_int("steps", np.int64(0), low=1), "steps must be an integer in [1, inf); got 0"),
    (lambda: check_int("steps", True, low=1), "steps must be an integer in [1, inf); got True"),
    (lambda: check_count("num_samples", 0), "num_samples must be an integer in [1, inf); got 0"),
    (lambda: check_bool("positive", 1), "positive must be a bool; got 1"),
])
def test_messages_read_name_range_value(call, message):
    assert _message(call) == message


def test_text_is_read_by_default_and_refused_when_strict():
    assert check_real("x", " 0.5 ") == 0.5 and check_prob("p", "1") == 1.0
    assert check_int("seed", "9223372036854775807") == 2**63 - 1  # exact, not through a float
    assert check_int("n", "1_000") == 1000 and check_int("n", 3.0) == 3 and check_int("n", np.float32(4)) == 4
    assert _message(lambda: check_prob("sampling_prob", "0.5", strict=True)) == \
        "sampling_prob must be a finite real number in (0, 1]; got '0.5'"
    assert _message(lambda: check_int("steps", 2.0, low=1, strict=True)) == \
        "steps must be an integer in [1, inf); got 2.0"
    assert check_int("steps", np.int32(3), strict=True) == 3 and check_real("x", np.float32(0.5), strict=True) == 0.5
    assert check_bool("flag", np.True_) is True


def test_is_number():
    assert all(is_number(x) for x in (1, 0.5, np.int8(1), np.float32(2.0), float("nan")))
    assert not any(is_number(x) for x in (True, np.False_, "1", None, np.array(1.0), [1.0]))


def test_pld_checks_are_the_family_and_strict():
    assert checks.check_probability("q", np.float64(0.5)) == 0.5
    assert checks.check_integer("ladder_size", 3, 2) == 3
    assert _message(lambda: checks.check_integer("ladder_size", 1, 2)) == \
        "ladder_size must be an integer in [2, inf); got 1"
    assert _message(lambda: checks.check_value_interval(0.5)) == \
        "value_discretization_interval must be in (0, 0.1]; got 0.5"
    assert _message(lambda: checks.check_discretization("nearest")) == \
        "discretization must be one of ('connect_dots', 'round_up'); got 'nearest'"
    assert _message(lambda: pld.GaussianSpec("1.0")) == "sigma must be a finite real number in (0, inf); got '1.0'"
    assert _message(lambda: pld.GaussianSpec(1.0, steps=np.float64(3))) == \
        "steps must be an integer in [1, inf); got 3.0"
