"""Peak resident memory of streaming runs of different sizes (same chunk size): it should not grow.

Each size runs ``mcacct sample`` (one shard, one direction by default) in a fresh child process and reports
the child's ``ru_maxrss``. Example (n = 1024, b = 8, the benchmark configuration)::

    python launch/measure_memory.py --sizes 10000,1000000 --iterations 1024 --min_sep 8 \
        --sampling_prob 0.004016064257028112 --chunk_size 4096
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["10000", "1000000"], "samples per direction, one child run each")
flags.DEFINE_integer("iterations", 1024, "n")
flags.DEFINE_integer("min_sep", 8, "b")
flags.DEFINE_float("sampling_prob", 0.004016064257028112, "p")
flags.DEFINE_string("c_col", None, "c_col (default ones(b)/sqrt(b))")
flags.DEFINE_integer("chunk_size", 4096, "samples per chunk")
flags.DEFINE_float("sigma", 1.0, "noise multiplier")
flags.DEFINE_enum("direction", "remove", ["both", "remove", "add"], "directions")
flags.DEFINE_float("checkpoint_seconds", 10.0, "seconds between checkpoints")

CHILD = """
import json, resource, sys, time
from mcacct.cli.commands import main
t0 = time.perf_counter()
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "seconds": time.perf_counter() - t0}), file=sys.stderr)
"""


def main(argv: list[str]) -> int:
    c_col = FLAGS.c_col or ",".join([repr(FLAGS.min_sep ** -0.5)] * FLAGS.min_sep)
    rows = []
    for size in (int(s) for s in FLAGS.sizes):
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-c", CHILD, "sample", "--out", out, "--sigma", str(FLAGS.sigma),
                   "--epsilon", "1", "--samples", str(size), "--chunk-size", str(FLAGS.chunk_size),
                   "--iterations", str(FLAGS.iterations), "--min-sep", str(FLAGS.min_sep),
                   "--sampling-prob", repr(FLAGS.sampling_prob), "--c-col", c_col,
                   "--direction", FLAGS.direction, "--checkpoint-seconds", str(FLAGS.checkpoint_seconds),
                   "--json", "--quiet"]
            r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
            info = json.loads(r.stderr.strip().splitlines()[-1])
            summary = json.loads(r.stdout.strip().splitlines()[-1]) if info["rc"] == 0 else {}
            row = {"samples": size, "peak_rss_mib": info["maxrss_kib"] / 1024, "seconds": info["seconds"],
                   "samples_per_second": summary.get("samples_per_second"), "rc": info["rc"]}
            rows.append(row)
            print(json.dumps(row), flush=True)
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    app.run(main)
