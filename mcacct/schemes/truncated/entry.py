"""The entry of truncated b-min-sep (:mod:`mcacct.schemes.entry`): its command line, compare row and jax-privacy
batch selection (``BMinSepSampling`` with ``truncated_batch_size``)."""

from __future__ import annotations

import math

from mcacct.core.validate import check_count
from mcacct.schemes.bminsep import (BMINSEP_SELECTION_FIELDS, bminsep_selection, bminsep_to_selection,
                                    expected_participation_rate, sampling_prob_from_batch_size)
from mcacct.schemes.entry import CompareRow, ComparePlan, CompareSetting, JaxPrivacyEntry, SchemeInfo, selection_field
from mcacct.schemes.flags import Flag, SchemeArgs, SchemeCLI
from mcacct.schemes.truncated.scheme import TruncatedBMinSep

__all__ = ["INFO"]


def _default_max_batch_size(expected_batch_size: float) -> int:
    return int(math.ceil(1.25 * expected_batch_size))


def _build_cli(a: SchemeArgs):
    b = a.min_sep
    sp, bs, m = a.rate(dataset_size_with_prob=True)
    if sp is not None:
        m = a.get("dataset_size")
        if m is None:
            raise ValueError("--dataset-size is required for --scheme truncated (an integer >= 1, the number "
                             "of examples M)")
        p = sp
        expected = expected_participation_rate(p, b) * check_count("dataset_size", m)
    else:
        p = sampling_prob_from_batch_size(bs, m, b)
        expected = bs
    bmax = a.get("max_batch_size")
    if bmax is None:
        bmax = _default_max_batch_size(expected)
    return TruncatedBMinSep(p, b, a.iterations, m, bmax, a.warm_start), a.strategy()


def _compare_plan(s: CompareSetting) -> ComparePlan:
    bmax = s.option("max_batch_size", _default_max_batch_size(s.expected_batch_size))
    return ComparePlan(TruncatedBMinSep(s.sampling_prob, s.min_sep, s.iterations, s.dataset_size, bmax, True),
                       s.strategy)


def _from_jax_privacy(selection, dataset_size: int | None) -> TruncatedBMinSep | None:
    p, n, b, warm = bminsep_selection(selection)
    b_max = selection.truncated_batch_size
    if b_max is None:
        return None  # b-min-sep's
    b_max = check_count(selection_field("truncated_batch_size"), b_max)
    if dataset_size is None:
        raise ValueError("dataset_size is required for BMinSepSampling with truncated_batch_size (mcacct."
                         "TruncatedBMinSep counts the other examples drawn): pass dataset_size=M, the num_examples "
                         "given to batch_iterator")
    return TruncatedBMinSep(p, b, n, dataset_size, b_max, warm_start=warm)


def _to_jax_privacy(scheme: TruncatedBMinSep, batch_selection):
    # call its batch_iterator with num_examples = scheme.dataset_size
    return bminsep_to_selection(scheme, batch_selection, int(scheme.max_batch_size))


_MAX_BATCH_SIZE = Flag("--max-batch-size", int, "truncated: maximum batch size B_max (>= 1; default ceil(1.25 x "
                                                "expected batch size)); compare: adds the truncated row",
                       check=check_count)

#: The scheme's entry (:mod:`mcacct.schemes.registry` lists it).
INFO = SchemeInfo("truncated", TruncatedBMinSep, "b-min-sep truncated to a maximum batch size (App. D)",
                  label="truncated-b-min-sep",
                  cli=SchemeCLI(_build_cli, flags=(_MAX_BATCH_SIZE,)),
                  compare=CompareRow(_compare_plan, {"max_batch_size": check_count}),
                  jax_privacy=JaxPrivacyEntry("BMinSepSampling", BMINSEP_SELECTION_FIELDS, _from_jax_privacy,
                                              _to_jax_privacy))
