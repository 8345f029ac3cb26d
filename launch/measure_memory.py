"""Peak resident memory of streaming runs of different sizes (same chunk size): it should not grow.

Each size runs ``mcacct sample`` (one shard, one direction by default) in a fresh child process and reports
the child's ``ru_maxrss``. Example (n = 1024, b = 8, the benchmark configuration)::

    python launch/measure_memory.py --sizes 10000,1000000 --iterations 1024 --min-sep 8 \
        --sampling-prob 0.004016064257028112 --chunk-size 4096

The flags were spelled with underscores (``--min_sep``) before; that spelling still works until mcacct 0.2, with a
deprecation note.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_list("sizes", ["10000", "1000000"], "samples per direction, one child run each")
flags.DEFINE_integer("iterations", 1024, "n")
flags.DEFINE_integer("min-sep", 8, "b")
flags.DEFINE_float("sampling-prob", 0.004016064257028112, "p")
flags.DEFINE_string("c-col", None, "c_col (default ones(b)/sqrt(b))")
flags.DEFINE_integer("chunk-size", 4096, "samples per chunk")
flags.DEFINE_float("sigma", 1.0, "noise multiplier")
flags.DEFINE_enum("direction", "remove", ["both", "remove", "add"], "directions")
flags.DEFINE_float("checkpoint-seconds", 10.0, "seconds between checkpoints")
V = _flags.value
_flags.add_underscore_aliases()  # --a_b: the deprecated absl spelling of --a-b, until mcacct 0.2

CHILD = """
import json, resource, sys, time
from mcacct.cli.commands import main
t0 = time.perf_counter()
rc = main(sys.argv[1:])
print(json.dumps({"rc": rc, "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "seconds": time.perf_counter() - t0}), file=sys.stderr)
"""


def main(argv: list[str]) -> int:
    b = V("min-sep")
    c_col = V("c-col") or ",".join([repr(b ** -0.5)] * b)
    rows = []
    for size in (int(s) for s in FLAGS.sizes):
        with tempfile.TemporaryDirectory() as out:
            cmd = [sys.executable, "-c", CHILD, "sample", "--out", out, "--sigma", str(FLAGS.sigma),
                   "--epsilon", "1", "--samples", str(size), "--chunk-size", str(V("chunk-size")),
                   "--iterations", str(FLAGS.iterations), "--min-sep", str(b),
                   "--sampling-prob", repr(V("sampling-prob")), "--c-col", c_col,
                   "--direction", FLAGS.direction, "--checkpoint-seconds", str(V("checkpoint-seconds")),
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
    _flags.run(main)
