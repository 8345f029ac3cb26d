"""Scheme constructors refuse fields of the wrong type (text, bools for numbers, None, sequences) by type, naming
the field, instead of coercing them (issue #37: ``BMinSep("0.1", "4")``); numbers of any Python or NumPy kind
are still accepted and normalised."""

from __future__ import annotations

import re

import numpy as np
import pytest

from mcacct import BallsInBins, BandedInverse, BMinSep, CyclicPoisson, MultiAttribution, TruncatedBMinSep
from mcacct.schemes.base import FieldTypeError


@pytest.mark.parametrize("make,field,got", [
    (lambda: BMinSep("0.1", "4", 16), "sampling_prob", "str '0.1'"),
    (lambda: BMinSep(0.1, "4", 16), "min_sep", "str '4'"),
    (lambda: BMinSep(True, 4, 16), "sampling_prob", "bool True"),
    (lambda: BMinSep(0.1, 4, None), "iterations", "NoneType None"),
    (lambda: BMinSep(0.1, 4, 16, warm_start=1), "warm_start", "int 1"),
    (lambda: BMinSep(0.1, 4, 16, warm_start="yes"), "warm_start", "str 'yes'"),
    (lambda: TruncatedBMinSep(0.1, 2, 10, "100", 5), "dataset_size", "str '100'"),
    (lambda: TruncatedBMinSep(0.1, 2, 10, 100, np.array([5])), "max_batch_size", "ndarray"),
    (lambda: CyclicPoisson(0.5, False, 10), "cycle_length", "bool False"),
    (lambda: CyclicPoisson(0.5, 2, 10, random_phase="no"), "random_phase", "str 'no'"),
    (lambda: MultiAttribution(0.1, 2, 10, True), "max_examples_per_user", "bool True"),
    (lambda: BandedInverse(0.2, [2], 10), "min_sep", "list [2]"),
    (lambda: BallsInBins("4", 16), "cycle_length", "str '4'"),
])
def test_wrong_types_are_refused_naming_the_field(make, field, got):
    with pytest.raises(TypeError, match=rf"^{field} must be .*; got {re.escape(got)}") as exc:
        make()
    assert isinstance(exc.value, FieldTypeError) and isinstance(exc.value, ValueError)  # the CLI still answers it


def test_numbers_of_every_kind_are_accepted_and_normalised():
    s = BMinSep(np.float32(0.5), np.int64(2), 4.0, np.True_)
    assert s == BMinSep(0.5, 2, 4, True)
    assert type(s.sampling_prob) is float and type(s.min_sep) is int and type(s.iterations) is int
    assert BMinSep(np.asarray(0.5), np.asarray(2), 4).min_sep == 2  # 0-d arrays of a real dtype
    assert TruncatedBMinSep(0.1, 2, 10, np.int32(100), 5).dataset_size == 100


def test_values_out_of_range_are_still_value_errors():
    with pytest.raises(ValueError, match=r"min_sep must be an integer in \[1, inf\); got 2.5"):
        BMinSep(0.1, 2.5, 16)
    with pytest.raises(ValueError, match=r"sampling_prob must be in \(0, 1\]"):
        BMinSep(1.5, 2, 16)
