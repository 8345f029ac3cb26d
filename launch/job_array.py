"""One task of a scheduler job array (SLURM, SGE) or one pod of a Kubernetes Indexed Job: run ``mcacct sample``
for this task's shard.

The shard index is ``--shard``; else the environment variable named by ``--shard-env`` minus ``--shard-offset``
(use ``--shard-env SGE_TASK_ID --shard-offset 1`` for SGE's 1-based arrays); else it is detected:

========================  ==========================  =================================================
scheduler                 shard index                 number of shards
========================  ==========================  =================================================
SLURM job array           ``SLURM_ARRAY_TASK_ID``     ``SLURM_ARRAY_TASK_COUNT``
Kubernetes Indexed Job    ``JOB_COMPLETION_INDEX``    ``MCACCT_NUM_SHARDS`` (set by the manifest: a pod
                                                      cannot see its Job's ``completions``)
========================  ==========================  =================================================

The number of shards is ``--num-shards``, else ``MCACCT_NUM_SHARDS``, else the scheduler's count. Flags after
``--`` are passed to ``mcacct sample`` unchanged (scheme, ``--sigma``, ``--epsilon``, ``--samples``,
``--candidate`` ...). ``--out`` is a directory shared by every task: a mounted volume, or a URL of an object store
(``gs://bucket/runs/s1`` with gcsfs installed, ``s3://...`` with s3fs; :mod:`mcacct.jobs.storage`). Re-running a
task (pre-emption, ``sbatch --requeue``, a pod retried by the Job) resumes its shard.

Example (SLURM, 8 shards)::

    sbatch --array=0-7 --wrap "python launch/job_array.py --out runs/s1 -- --sigma 1.1 --epsilon 2 \\
        --samples 10000000 --iterations 1024 --min-sep 8 --sampling-prob 0.004 --quiet"
    mcacct merge runs/s1 --out runs/s1-merged

Kubernetes: ``launch/kubernetes/indexed-job.yaml``. The flags were spelled with underscores (``--num_shards``)
before; that spelling still works until mcacct 0.2, with a deprecation note.
"""

from __future__ import annotations

import os
import sys

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("shard", None, "shard index (default: from --shard-env, or detected: SLURM_ARRAY_TASK_ID, "
                     "JOB_COMPLETION_INDEX)")
flags.DEFINE_integer("num-shards", None, "number of shards (default: $MCACCT_NUM_SHARDS, else "
                     "$SLURM_ARRAY_TASK_COUNT)")
flags.DEFINE_string("shard-env", None, "environment variable holding the task id (default: detected)")
flags.DEFINE_integer("shard-offset", 0, "subtracted from the task id (1 for 1-based arrays such as SGE's)")
flags.DEFINE_string("out", None, "output directory or object-store URL shared by the array's shards",
                    required=True)
_flags.add_underscore_aliases()  # --a_b: the deprecated absl spelling of --a-b, until mcacct 0.2

#: The environment variable with the number of shards, for schedulers that do not tell a task the array's size
#: (a Kubernetes Indexed Job: the manifest sets it to the Job's ``completions``).
NUM_SHARDS_ENV = "MCACCT_NUM_SHARDS"
#: Detected schedulers, in this order: (name, variable of the shard index, variable of the count or None).
SCHEDULERS = (("SLURM job array", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"),
              ("Kubernetes Indexed Job", "JOB_COMPLETION_INDEX", None))


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer; got {v!r}") from None


def shard_and_count() -> tuple[int, int, str]:
    """``(shard, num_shards, source)`` of this task; ``source`` says where they came from."""
    offset = _flags.value("shard-offset")
    scheduler = None
    if FLAGS.shard is not None:
        shard, source = FLAGS.shard, "--shard"
    elif _flags.value("shard-env") is not None:
        name = _flags.value("shard-env")
        task = _env_int(name)
        if task is None:
            raise ValueError(f"shard: --shard-env names {name}, which is not set")
        shard, source = task - offset, f"${name}"
    else:
        scheduler = next((s for s in SCHEDULERS if _env_int(s[1]) is not None), None)
        if scheduler is None:
            raise ValueError("shard: give --shard, or --shard-env NAME, or run as a SLURM array task "
                             "(SLURM_ARRAY_TASK_ID) or a pod of a Kubernetes Indexed Job (JOB_COMPLETION_INDEX)")
        shard, source = _env_int(scheduler[1]) - offset, f"${scheduler[1]} ({scheduler[0]})"
    count_env = scheduler[2] if scheduler is not None else "SLURM_ARRAY_TASK_COUNT"
    num = _flags.value("num-shards")
    for name in (NUM_SHARDS_ENV, count_env):
        if num is None and name is not None:
            num = _env_int(name)
    if num is None:
        where = (f" (in the manifest: a pod of a Kubernetes Indexed Job cannot see its Job's completions; "
                 "launch/kubernetes/indexed-job.yaml)" if count_env is None else f" (or {count_env})")
        raise ValueError(f"num_shards: give --num-shards or set {NUM_SHARDS_ENV}{where}")
    if num < 1:
        raise ValueError(f"num_shards must be >= 1; got {num}")
    if not 0 <= shard < num:
        raise ValueError(f"shard must be an integer in [0, {num - 1}]; got {shard} (from {source}"
                         f"{f' minus --shard-offset {offset}' if offset and source != '--shard' else ''})")
    return shard, num, source


def shard_command(argv: list[str]) -> list[str]:
    """The ``mcacct`` argument list of this task."""
    shard, num, _ = shard_and_count()
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
    _flags.run(main)
