"""absl flags shared by the launchers: the scheme and Monte Carlo flags of ``mcacct`` (underscored names)."""

from __future__ import annotations

import argparse

from absl import flags

FLAGS = flags.FLAGS


def define_scheme_flags() -> None:
    """Scheme/strategy flags, with the same meaning and defaults as the ``mcacct`` command line."""
    flags.DEFINE_integer("iterations", 128, "training iterations n (>= 1)")
    flags.DEFINE_integer("min_sep", 4, "minimum separation b (>= 1; 1 = Poisson)")
    flags.DEFINE_float("sampling_prob", None, "sampling probability p in (0, 1] of an available example")
    flags.DEFINE_float("batch_size", None, "expected batch size (with --dataset_size)")
    flags.DEFINE_integer("dataset_size", None, "dataset size (with --batch_size)")
    flags.DEFINE_string("c_col", None, "comma-separated non-zeros of C's first column (default as `mcacct`)")
    flags.DEFINE_bool("cold_start", False, "Alg. 1 instead of the warm start of Alg. 2")
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
    """The :class:`mcacct.accountant.Problem` the same ``mcacct`` flags would give."""
    from mcacct.cli import _problem

    ns = argparse.Namespace(iterations=FLAGS.iterations, min_sep=FLAGS.min_sep, sampling_prob=FLAGS.sampling_prob,
                            batch_size=FLAGS.batch_size, dataset_size=FLAGS.dataset_size, c_col=FLAGS.c_col,
                            cold_start=FLAGS.cold_start, dtype=FLAGS.dtype)
    return _problem(ns)
