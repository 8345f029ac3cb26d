"""absl flags shared by the launchers: the scheme and Monte Carlo flags of ``mcacct`` (underscored names).

The scheme flags are generated from :mod:`mcacct.cli.schemes` (``--scheme`` plus every common and per-scheme flag,
``--max-batch-size`` becoming ``--max_batch_size``), so the launchers know every scheme the command line knows.
"""

from __future__ import annotations

import argparse

from absl import flags

FLAGS = flags.FLAGS

_DEFINE = {int: flags.DEFINE_integer, float: flags.DEFINE_float, str: flags.DEFINE_string}


def define_scheme_flags() -> None:
    """``--scheme`` and the scheme/strategy flags, with the same meaning and defaults as the ``mcacct`` command
    line (flags that do not apply to the chosen scheme are refused when the problem is built)."""
    from mcacct.cli import schemes

    flags.DEFINE_enum("scheme", schemes.DEFAULT_SCHEME, list(schemes.cli_names()), "sampling scheme (as `mcacct`)")
    for f in schemes.all_flags():
        if f.kind is bool:
            flags.DEFINE_bool(f.dest, False, f.help)
        else:
            _DEFINE[f.kind](f.dest, None, f.help)
    flags.DEFINE_enum("dtype", "float64", ["float64", "float32"], "precision of the loss kernel")


def define_mc_flags() -> None:
    """Monte Carlo flags."""
    flags.DEFINE_float("sigma", None, "noise multiplier (> 0)", required=True)
    flags.DEFINE_list("epsilon", ["1.0"], "epsilon(s) >= 0, comma-separated")
    flags.DEFINE_integer("samples", 100_000, "samples per direction")
    flags.DEFINE_integer("chunk_size", 4096, "samples per chunk (memory ~ chunk x n per device)")
    flags.DEFINE_integer("seed", 0, "root seed")
    flags.DEFINE_integer("candidate", None, "EVR ladder candidate index (keys from candidate_key)")
    flags.DEFINE_float("alpha", 0.01, "1 - confidence of the upper bounds")
    flags.DEFINE_enum("direction", "both", ["both", "remove", "add"], "directions to sample")


def problem_from_flags():
    """The :class:`mcacct.engine.problem.Problem` the same ``mcacct`` flags would give
    (:func:`mcacct.cli.schemes.problem_from_args`)."""
    from mcacct.cli import schemes

    ns = argparse.Namespace(scheme=FLAGS.scheme, dtype=FLAGS.dtype,
                            **{f.dest: FLAGS[f.dest].value for f in schemes.all_flags()})
    return schemes.problem_from_args(ns)
