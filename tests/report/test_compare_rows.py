"""``mcacct compare``'s rows come from each scheme's entry (``SchemeInfo.compare``, declared in the scheme's
module): plans, row names, defaults and the optional-row options, whose flags are the scheme's own command-line
flags (``SchemeInfo.cli``)."""

from __future__ import annotations

import argparse

import pytest

from mcacct.cli import compare as compare_cli
from mcacct.cli import schemes as cli_schemes
from mcacct.report import compare
from mcacct.schemes.entry import CompareSetting
from mcacct.schemes import registry
from mcacct.strategies.banded import BandedToeplitz


def test_rows_come_from_the_entries():
    built_in = [e for e in registry.schemes() if e.cls.__module__.startswith("mcacct.")]
    assert all(e.compare is not None for e in built_in)  # every built-in scheme has a row
    assert [e.name for e, _ in compare.compare_schemes_info()] == [e.name for e in built_in]  # registry order
    assert compare.row_names() == tuple(e.label for e in built_in)
    assert [e.name for e in compare.parse_schemes("bminsep,truncated-b-min-sep,balls-in-bins")] == [
        "bminsep", "truncated", "balls-in-bins"]
    assert compare.parse_schemes(None) is None
    with pytest.raises(ValueError, match="schemes must be a non-empty list"):
        compare.parse_schemes("shuffling")


def test_every_plan_builds_its_registered_class_at_the_expected_batch_size():
    setting = CompareSetting(8, 2, 2.0, 16, BandedToeplitz((1.0, 0.5)),
                             {"max_batch_size": 3, "inverse_bands": (1.0, -0.5)})
    for info, row in compare.compare_schemes_info():
        plan = row.plan(setting)
        assert plan.skip is None and type(plan.scheme) is info.cls and plan.scheme.iterations == 8
        rate = plan.scheme.summary().participation_rate
        if rate is not None and info.name != "multi-attribution":  # equal expected batch size 2/16
            assert rate == pytest.approx(2 / 16)
    assert registry.get("banded-inverse").compare.plan(
        CompareSetting(8, 2, 2.0, 16, BandedToeplitz((1.0,)))).skip == "inverse_bands not given"
    skipped = registry.get("balls-in-bins").compare.plan(CompareSetting(8, 2, 3.0, 16, BandedToeplitz((1.0,))))
    assert skipped.scheme is None and "integer number of bins" in skipped.skip


def test_pld_columns_are_the_schemes_own_specs():
    """b-min-sep's PLD column is its exact PLD (b = 1); cyclic Poisson's is the public partition's composition."""
    from mcacct.pld import CyclicPoissonBandMFSpec, PoissonGaussianSpec
    s1 = CompareSetting(8, 1, 2.0, 16, BandedToeplitz((0.5,)))
    plan = registry.get("bminsep").compare.plan(s1)
    assert plan.pld_spec == PoissonGaussianSpec(sampling_prob=2 / 16, sigma=1.0, steps=8, sensitivity=0.5)
    assert registry.get("bminsep").compare.plan(CompareSetting(8, 2, 2.0, 16, BandedToeplitz((1.0,)))).pld_spec is None
    plan = registry.get("cyclic-poisson").compare.plan(CompareSetting(8, 2, 2.0, 16, BandedToeplitz((1.0, 0.5))))
    assert plan.scheme.random_phase and plan.pld_spec == CyclicPoissonBandMFSpec(8, 2, 0.25, (1.0, 0.5), 1.0)


def test_optional_rows_and_their_flags():
    options = compare.compare_options()
    assert [(e.name, dest) for e, dest, _ in options] == [
        ("truncated", "max_batch_size"), ("multi-attribution", "max_examples_per_user"),
        ("banded-inverse", "inverse_bands")]
    # each option is offered by its scheme's command-line flag, with the same check
    for info, dest, check in options:
        flag = cli_schemes.flag_for(dest)
        assert flag is not None and flag.check is check
        assert flag in info.cli.flags
    assert compare_cli.compare_flags() == tuple(cli_schemes.flag_for(d) for _, d, _ in options)
    parser = argparse.ArgumentParser(prog="mcacct")
    compare_cli.add_compare_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", "--max-batch-size", "5", "--inverse-bands", "1,-0.5"])
    assert args.max_batch_size == 5 and args.inverse_bands == (1.0, -0.5) and args.max_examples_per_user is None
    with pytest.raises(ValueError, match="max_batch_size"):
        compare.compare_schemes(1.0, 0.05, 8, 2, 2, 16, max_batch_size=0)
    with pytest.raises(ValueError, match="options must be among"):
        compare.compare_schemes(1.0, 0.05, 8, 2, 2, 16, options={"nope": 1})
