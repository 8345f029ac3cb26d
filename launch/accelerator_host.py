"""Full Monte Carlo verification on every local device of one host (one process of a multi-host run).

The sample dimension is sharded over all local devices (:func:`mcacct.engine.runner.run_ladder`); with
``--coordinator-address`` (or ``MCACCT_COORDINATOR_ADDRESS``) the process joins a multi-process JAX runtime,
takes the chunks ``c % num_processes == process_id`` and the statistics are reduced exactly across
processes. Results are identical, key for key, to ``mcacct delta`` with the same flags on one device.

Examples::

    python launch/accelerator_host.py --sigma 1.1 --epsilon 2 --samples 10000000 \
        --iterations 1024 --min-sep 8 --sampling-prob 0.004 --base-delta 5e-6 --out result.json
    # one process per host of a 4-host job (run on every host, process id 0..3):
    python launch/accelerator_host.py --coordinator-address host0:12345 --num-processes 4 --process-id $ID ...

Process 0 prints one JSON object (delta estimates and upper bounds per epsilon and direction, the EVR verdict
when ``--base-delta`` is given, exact statistics, throughput; with ``--out`` without the statistics, which are
in the file) and writes it to ``--out`` if given (a local path or
a URL of an object store, :mod:`mcacct.jobs.storage`). Flags are spelled as the ``mcacct`` command line spells
them; the former underscore spellings (``--min_sep``) still work until mcacct 0.2, with a deprecation note.
"""

from __future__ import annotations

import json
import os
import sys
import time

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _flags  # noqa: E402

FLAGS = flags.FLAGS
_flags.define_scheme_flags()
_flags.define_mc_flags()
flags.DEFINE_float("base-delta", None, "verify: pass when every direction's delta estimate at the first "
                   "epsilon is <= base-delta (EVR verifier); also reports the overall delta of Fact 4.2")
flags.DEFINE_string("coordinator-address", None, "host:port of process 0 (multi-process run); default env "
                    "MCACCT_COORDINATOR_ADDRESS")
flags.DEFINE_integer("num-processes", None, "number of processes (default env MCACCT_NUM_PROCESSES)")
flags.DEFINE_integer("process-id", None, "this process's id (default env MCACCT_PROCESS_ID)")
flags.DEFINE_bool("auto-distributed", False, "let jax.distributed detect the cluster (SLURM, MPI, TPU)")
flags.DEFINE_integer("cpu-devices", None, "on CPU: number of (virtual) devices of this process, for tests")
flags.DEFINE_string("out", None, "also write the JSON result to this file or URL (process 0)")
flags.DEFINE_bool("quiet", False, "no progress on stderr")
flags.DEFINE_bool("include-stats", True, "include the exact statistics (count, fixed-point sums, histogram)")
V = _flags.value
_flags.add_underscore_aliases()  # --a_b: the deprecated absl spelling of --a-b, until mcacct 0.2


def run() -> dict | None:
    import jax

    if V("cpu-devices") is not None:
        jax.config.update("jax_num_cpu_devices", V("cpu-devices"))
    jax.config.update("jax_enable_x64", True)  # an application: float64 globally (mcacct leaves it alone)
    import mcacct  # noqa: F401
    from mcacct import evr
    from mcacct.engine import distributed as dist
    from mcacct.engine.estimate import estimate
    from mcacct.engine.runner import local_mesh
    from mcacct.evr.calibrate import candidate_key, candidate_passes
    from mcacct.statistics.accumulators import DIRECTIONS
    from mcacct.jobs import storage
    from mcacct.jobs.shards import stats_to_json

    if FLAGS.out:
        storage.check_url(FLAGS.out, write=True)  # a URL whose package is missing: refused before the run
    distributed = bool(V("coordinator-address") or os.environ.get(dist.ENV_COORDINATOR) or V("auto-distributed"))
    if distributed:
        dist.initialize_distributed(V("coordinator-address"), V("num-processes"), V("process-id"),
                                    auto=V("auto-distributed"))
    problem = _flags.problem_from_flags()
    epsilons = tuple(float(e) for e in FLAGS.epsilon)
    key = jax.random.key(FLAGS.seed)
    if FLAGS.candidate is not None:
        key = candidate_key(key, FLAGS.candidate)
    directions = DIRECTIONS if FLAGS.direction == "both" else (FLAGS.direction,)
    mesh = local_mesh()
    t0 = time.perf_counter()
    est = estimate(problem, FLAGS.sigma, key, FLAGS.samples, epsilons, FLAGS.alpha, directions, V("chunk-size"),
                   mesh=mesh, progress=not FLAGS.quiet, distributed=distributed)
    seconds = time.perf_counter() - t0
    results = []
    for j, e in enumerate(epsilons):
        d = est.delta(j)
        results.append({"epsilon": e, "delta_estimate": d["delta_estimate"], "delta_upper": d["delta_upper"],
                        "directions": {k: d[k] for k in directions}})
    total = sum(s.count for s in est.stats.values())
    out = {"sigma": FLAGS.sigma, **results[0], "results": results, "confidence": 1 - FLAGS.alpha,
           "num_samples": est.num_samples, "seed": FLAGS.seed, "candidate": FLAGS.candidate,
           "chunk_size": V("chunk-size"), "seconds": seconds, "samples_per_second": total / seconds,
           "process_count": jax.process_count(), "local_devices": mesh.size, "devices": jax.device_count(),
           "platform": jax.devices()[0].platform}
    if V("base-delta") is not None:
        base = V("base-delta")
        out["base_delta"] = base
        out["verified"] = candidate_passes(est.stats, FLAGS.samples, base)
        out["overall_delta"] = evr.overall_delta(FLAGS.samples, base)
    if V("include-stats"):
        out["stats"] = {d: stats_to_json(s) for d, s in est.stats.items()}
    leader = jax.process_index() == 0
    if distributed:
        jax.distributed.shutdown()
    return out if leader else None


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print(f"error: unexpected arguments {argv[1:]}", file=sys.stderr)
        return 2
    try:
        out = run()
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if out is not None:
        shown = out
        if FLAGS.out:
            from mcacct.jobs import storage
            storage.write_json(FLAGS.out, out)
            # stdout gets the result without its exact statistics (~70 KB of histogram): they are in the file
            shown = {**{k: v for k, v in out.items() if k != "stats"}, "stats": f"in {FLAGS.out}"}
        print(json.dumps(shown), flush=True)
    return 0


if __name__ == "__main__":
    _flags.run(main)
