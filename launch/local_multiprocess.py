"""Start P local processes of ``launch/accelerator_host.py`` (or, with ``--mcacct``, of the ``mcacct`` command)
joined by ``jax.distributed`` on 127.0.0.1.

A single-machine rehearsal of a multi-host run (CPU collectives through gloo): every process gets
``--devices_per_process`` virtual CPU devices (or, on a GPU host, use ``--gpus_per_process`` to give each
process its own GPUs), takes the chunks ``c % P == process_id``, and the statistics are reduced exactly
across processes. Flags after ``--`` go to every ``accelerator_host.py`` process unchanged.

Example::

    python launch/local_multiprocess.py --num_processes 2 --devices_per_process 2 -- \
        --sigma 0.9 --epsilon 1 --samples 100000 --iterations 32 --min_sep 4 --sampling_prob 0.2

With ``--mcacct`` the flags after ``--`` are an ``mcacct`` command line (``calibrate``, ``delta`` or
``epsilon``), run by every process with ``--coordinator-address --num-processes --process-id`` added::

    python launch/local_multiprocess.py --num_processes 2 --devices_per_process 2 --mcacct -- \
        calibrate --epsilon 2 --delta 1e-4 --iterations 128 --min-sep 4 --json

Process 0's output is printed on stdout (and written to ``--out``); the exit status is non-zero if any
process fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_processes", 2, "number of local processes (>= 1)")
flags.DEFINE_integer("port", 0, "coordinator port on 127.0.0.1 (0: pick a free one)")
flags.DEFINE_integer("devices_per_process", 1, "virtual CPU devices per process (CPU only)")
flags.DEFINE_integer("gpus_per_process", None, "on a GPU host: give process i the GPUs "
                     "[i*g, (i+1)*g) through CUDA_VISIBLE_DEVICES instead of virtual CPU devices")
flags.DEFINE_string("out", None, "write process 0's JSON result to this file")
flags.DEFINE_integer("timeout", 3600, "seconds before all processes are killed")
flags.DEFINE_bool("mcacct", False, "the flags after -- are an mcacct command line (calibrate, delta, epsilon)")

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "accelerator_host.py")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str]) -> int:
    forwarded = argv[1:]
    if FLAGS.num_processes < 1:
        print(f"error: num_processes must be >= 1; got {FLAGS.num_processes}", file=sys.stderr)
        return 2
    if FLAGS.devices_per_process < 1:
        print(f"error: devices_per_process must be >= 1; got {FLAGS.devices_per_process}", file=sys.stderr)
        return 2
    port = FLAGS.port or free_port()
    procs = []
    if FLAGS.mcacct and not forwarded:
        print("error: --mcacct needs an mcacct command line after --", file=sys.stderr)
        return 2
    for i in range(FLAGS.num_processes):
        env = dict(os.environ)
        if FLAGS.mcacct:
            cmd = [sys.executable, "-m", "mcacct", *forwarded,
                   f"--coordinator-address=127.0.0.1:{port}", f"--num-processes={FLAGS.num_processes}",
                   f"--process-id={i}"]
        else:
            cmd = [sys.executable, HOST, f"--coordinator_address=127.0.0.1:{port}",
                   f"--num_processes={FLAGS.num_processes}", f"--process_id={i}", *forwarded]
        if FLAGS.gpus_per_process:
            g = FLAGS.gpus_per_process
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i * g + k) for k in range(g))
        else:
            env["JAX_PLATFORMS"] = "cpu"
            if FLAGS.mcacct:
                env["JAX_NUM_CPU_DEVICES"] = str(FLAGS.devices_per_process)
            else:
                cmd.append(f"--cpu_devices={FLAGS.devices_per_process}")
        if i == 0 and FLAGS.out and not FLAGS.mcacct:
            cmd.append(f"--out={FLAGS.out}")
        out0 = subprocess.PIPE if (i == 0 and FLAGS.mcacct and FLAGS.out) else None
        procs.append(subprocess.Popen(cmd, env=env, stdout=out0 if i == 0 else subprocess.DEVNULL,
                                      text=True))
    deadline = time.monotonic() + FLAGS.timeout
    status = 0
    try:
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed or time.monotonic() > deadline:
                status = failed[0].returncode if failed else 124
                break
            time.sleep(0.1)
        else:
            status = next((p.returncode for p in procs if p.returncode != 0), 0)
    finally:
        for p in procs:  # only our own children, by handle
            if p.poll() is None:
                p.kill()
                p.wait()
    if status:
        print(f"error: a process failed (exit status {status})", file=sys.stderr)
    elif procs[0].stdout is not None:  # --mcacct with --out: process 0's output to the file and stdout
        text = procs[0].stdout.read()
        with open(FLAGS.out, "w") as f:
            f.write(text)
        sys.stdout.write(text)
    return status


if __name__ == "__main__":
    app.run(main)
