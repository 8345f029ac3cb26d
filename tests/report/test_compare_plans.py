"""``mcacct compare``'s rows come from one table of plans keyed by registry name
(:mod:`mcacct.report.compare_plans`); row names and defaults from the registry, optional-row flags from the
command line's scheme table."""

from __future__ import annotations

import argparse

import pytest

from mcacct.cli import compare as compare_cli
from mcacct.cli import schemes as cli_schemes
from mcacct.report import compare
from mcacct.report import compare_plans as cp
from mcacct.schemes import registry
from mcacct.strategies.banded import BandedToeplitz


def test_plans_are_keyed_by_registry_name():
    built_in = [e for e in registry.schemes() if e.cls.__module__.startswith("mcacct.")]
    assert set(cp.COMPARE_PLANS) == {e.name for e in built_in}  # every built-in scheme has a row
    assert [e.name for e, _ in cp.compare_schemes_info()] == [e.name for e in built_in]  # registry order
    assert compare.row_names() == tuple(e.label for e in built_in)
    assert [e.name for e in compare.parse_schemes("bminsep,truncated-b-min-sep,balls-in-bins")] == [
        "bminsep", "truncated", "balls-in-bins"]
    assert compare.parse_schemes(None) is None
    with pytest.raises(ValueError, match="schemes must be a non-empty list"):
        compare.parse_schemes("shuffling")


def test_every_plan_builds_its_registered_class_at_the_expected_batch_size():
    setting = cp.CompareSetting(8, 2, 2.0, 16, BandedToeplitz((1.0, 0.5)),
                                {"max_batch_size": 3, "inverse_bands": (1.0, -0.5)})
    for info, entry in cp.compare_schemes_info():
        plan = entry.plan(setting)
        assert plan.skip is None and type(plan.problem.scheme) is info.cls and plan.problem.scheme.iterations == 8
        rate = getattr(plan.problem.scheme, "participation_rate", None)
        if rate is not None and info.name != "multi-attribution":  # equal expected batch size 2/16
            assert rate == pytest.approx(2 / 16)
    plans = cp.COMPARE_PLANS
    assert plans["banded-inverse"].plan(
        cp.CompareSetting(8, 2, 2.0, 16, BandedToeplitz((1.0,)))).skip == "inverse_bands not given"
    assert "integer number of bins" in plans["balls-in-bins"].plan(
        cp.CompareSetting(8, 2, 3.0, 16, BandedToeplitz((1.0,)))).skip


def test_optional_rows_and_their_flags():
    options = cp.compare_options()
    assert [(e.name, dest) for e, dest, _ in options] == [
        ("truncated", "max_batch_size"), ("multi-attribution", "max_examples_per_user"),
        ("banded-inverse", "inverse_bands")]
    # each option is offered by its scheme's command-line flag, with the same check
    for info, dest, check in options:
        flag = cli_schemes.flag_for(dest)
        assert flag is not None and flag.check is check
        assert flag in cli_schemes.SCHEME_CLI[info.name].flags
    assert compare_cli.compare_flags() == tuple(cli_schemes.flag_for(d) for _, d, _ in options)
    parser = argparse.ArgumentParser(prog="mcacct")
    compare_cli.add_compare_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", "--max-batch-size", "5", "--inverse-bands", "1,-0.5"])
    assert args.max_batch_size == 5 and args.inverse_bands == (1.0, -0.5) and args.max_examples_per_user is None
    with pytest.raises(ValueError, match="max_batch_size"):
        compare.compare_schemes(1.0, 0.05, 8, 2, 2, 16, max_batch_size=0)
    with pytest.raises(ValueError, match="options must be among"):
        compare.compare_schemes(1.0, 0.05, 8, 2, 2, 16, options={"nope": 1})
