"""absl flags shared by the launchers, spelled as the ``mcacct`` command line spells them (``--min-sep``,
``--chunk-size``, ``--num-shards``).

The scheme flags are generated from :mod:`mcacct.cli.schemes` (``--scheme`` plus every common and per-scheme flag,
under the option name of the command line), so the launchers know every scheme the command line knows.

Until version 0.2 every flag with a dash also answers to its former absl spelling with underscores (``--min_sep``,
``--nocold_start``): :func:`add_underscore_aliases` defines those as absl aliases, and :func:`run` prints a
deprecation note on stderr for each one given. Flags after ``--`` are not the launcher's and are left alone.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from absl import app, flags

FLAGS = flags.FLAGS

_DEFINE = {int: flags.DEFINE_integer, float: flags.DEFINE_float, str: flags.DEFINE_string}
#: The deprecated underscore spellings defined so far, each with the flag it stands for.
ALIASES: dict[str, str] = {}
#: The release that drops the underscore spellings.
ALIASES_UNTIL = "0.2"


def define_scheme_flags() -> None:
    """``--scheme`` and the scheme/strategy flags, with the same names, meaning and defaults as the ``mcacct``
    command line (flags that do not apply to the chosen scheme are refused when the problem is built)."""
    from mcacct.cli import schemes

    flags.DEFINE_enum("scheme", schemes.DEFAULT_SCHEME, list(schemes.cli_names()), "sampling scheme (as `mcacct`)")
    for f in schemes.all_flags():
        name = f.option.lstrip("-")
        if f.kind is bool:
            flags.DEFINE_bool(name, False, f.help)
        else:
            _DEFINE[f.kind](name, None, f.help)
    flags.DEFINE_enum("dtype", "float64", ["float64", "float32"], "precision of the loss kernel")
    add_underscore_aliases()


def define_mc_flags() -> None:
    """Monte Carlo flags."""
    flags.DEFINE_float("sigma", None, "noise multiplier (> 0)", required=True)
    flags.DEFINE_list("epsilon", ["1.0"], "epsilon(s) >= 0, comma-separated")
    flags.DEFINE_integer("samples", 100_000, "samples per direction")
    flags.DEFINE_integer("chunk-size", 4096, "samples per chunk (memory ~ chunk x n per device)")
    flags.DEFINE_integer("seed", 0, "root seed")
    flags.DEFINE_integer("candidate", None, "EVR ladder candidate index (keys from candidate_key)")
    flags.DEFINE_float("alpha", 0.01, "1 - confidence of the upper bounds")
    flags.DEFINE_enum("direction", "both", ["both", "remove", "add"], "directions to sample")
    add_underscore_aliases()


def value(name: str) -> Any:
    """The parsed value of the flag ``name`` (its command-line spelling without the dashes, e.g. ``"min-sep"``)."""
    return FLAGS[name].value


def add_underscore_aliases() -> None:
    """Define ``--a_b`` as a deprecated alias of every defined flag ``--a-b`` that has none yet (absl matches
    only a flag's defined name)."""
    for name in list(FLAGS):
        old = name.replace("-", "_")
        if "-" in name and old not in FLAGS:
            flags.DEFINE_alias(old, name)
            FLAGS[old].help = f"deprecated spelling of --{name} (accepted until mcacct {ALIASES_UNTIL})"
            ALIASES[old] = name


def deprecation_notes() -> list[str]:
    """One line for each deprecated spelling given on the parsed command line."""
    return [f"note: --{old} is deprecated: use --{new}, the spelling of the mcacct command line (the underscore "
            f"spelling is accepted until mcacct {ALIASES_UNTIL})" for old, new in ALIASES.items()
            if old in FLAGS and FLAGS[old].present]


def _parse(argv: list[str]) -> list[str]:
    rest = app.parse_flags_with_usage(argv)
    for line in deprecation_notes():
        print(line, file=sys.stderr)
    return rest


def run(main: Callable[[list[str]], int]) -> None:
    """:func:`absl.app.run` of ``main``, with the underscore aliases defined and their use noted on stderr."""
    add_underscore_aliases()
    app.run(main, flags_parser=_parse)


def problem_from_flags():
    """The :class:`mcacct.engine.problem.Problem` the same ``mcacct`` flags would give
    (:func:`mcacct.cli.schemes.problem_from_args`)."""
    from mcacct.cli import schemes

    ns = argparse.Namespace(scheme=FLAGS.scheme, dtype=FLAGS.dtype,
                            **{f.dest: value(f.option.lstrip("-")) for f in schemes.all_flags()})
    return schemes.problem_from_args(ns)
