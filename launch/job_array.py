"""One task of a scheduler job array: run ``mcacct sample`` for this task's shard.

The shard index comes from ``--shard`` or, by default, from the environment variable named by
``--shard_env`` (``SLURM_ARRAY_TASK_ID``) minus ``--shard_offset`` (use 1 for 1-based arrays such as SGE's
``SGE_TASK_ID``); the number of shards from ``--num_shards`` or ``SLURM_ARRAY_TASK_COUNT``. Flags after
``--`` are passed to ``mcacct sample`` unchanged (scheme, ``--sigma``, ``--epsilon``, ``--samples``,
``--candidate`` ...). Re-running a task (e.g. after pre-emption, ``sbatch --requeue``) resumes its shard.

Example (SLURM, 8 shards)::

    sbatch --array=0-7 --wrap "python launch/job_array.py --out runs/s1 -- --sigma 1.1 --epsilon 2 \
        --samples 10000000 --iterations 1024 --min-sep 8 --sampling-prob 0.004 --quiet"
    mcacct merge runs/s1 --out runs/s1-merged
"""

from __future__ import annotations

import os
import sys

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("shard", None, "shard index (default: $SHARD_ENV - shard_offset)")
flags.DEFINE_integer("num_shards", None, "number of shards (default: $SLURM_ARRAY_TASK_COUNT)")
flags.DEFINE_string("shard_env", "SLURM_ARRAY_TASK_ID", "environment variable holding the array task id")
flags.DEFINE_integer("shard_offset", 0, "subtracted from the task id (1 for 1-based arrays)")
flags.DEFINE_string("out", None, "output directory shared by the array's shards", required=True)


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer; got {v!r}") from None


def shard_command(argv: list[str]) -> list[str]:
    """The ``mcacct`` argument list of this task."""
    shard = FLAGS.shard
    if shard is None:
        task = _env_int(FLAGS.shard_env)
        if task is None:
            raise ValueError(f"shard: give --shard or set {FLAGS.shard_env}")
        shard = task - FLAGS.shard_offset
    num = FLAGS.num_shards if FLAGS.num_shards is not None else _env_int("SLURM_ARRAY_TASK_COUNT")
    if num is None:
        raise ValueError("num_shards: give --num_shards or set SLURM_ARRAY_TASK_COUNT")
    if not 0 <= shard < num:
        raise ValueError(f"shard must be an integer in [0, {num - 1}]; got {shard}")
    return ["sample", "--shard", str(shard), "--num-shards", str(num), "--out", FLAGS.out, *argv]


def main(argv: list[str]) -> int:
    try:
        cmd = shard_command(argv[1:])
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("mcacct " + " ".join(cmd), file=sys.stderr, flush=True)
    from mcacct.cli.commands import main as mcacct_main
    return mcacct_main(cmd)


if __name__ == "__main__":
    app.run(main)
