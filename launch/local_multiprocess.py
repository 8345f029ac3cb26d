"""Start P local processes of ``launch/accelerator_host.py`` (or, with ``--mcacct``, of the ``mcacct`` command)
joined by ``jax.distributed`` on 127.0.0.1.

A single-machine rehearsal of a multi-host run (CPU collectives through gloo): every process gets
``--devices-per-process`` virtual CPU devices (or, on a GPU host, use ``--gpus-per-process`` to give each
process its own GPUs), takes the chunks ``c % P == process_id``, and the statistics are reduced exactly
across processes. Flags after ``--`` go to every ``accelerator_host.py`` process unchanged.

Example::

    python launch/local_multiprocess.py --num-processes 2 --devices-per-process 2 -- \
        --sigma 0.9 --epsilon 1 --samples 100000 --iterations 32 --min-sep 4 --sampling-prob 0.2

With ``--mcacct`` the flags after ``--`` are an ``mcacct`` command line (``calibrate``, ``delta`` or
``epsilon``), run by every process with ``--coordinator-address --num-processes --process-id`` added::

    python launch/local_multiprocess.py --num-processes 2 --devices-per-process 2 --mcacct -- \
        calibrate --epsilon 2 --delta 1e-4 --iterations 128 --min-sep 4 --json

Process 0's output is printed on stdout; with ``--out`` it is written to that file whole, and stdout gets a short
summary instead (:func:`summary`: the result without its long entries, such as the exact statistics' histogram of
~70 KB). The exit status is non-zero if any process fails. The flags were spelled with underscores
(``--num_processes``) before; that spelling still works until mcacct 0.2, with a deprecation note.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time

from absl import flags

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _flags  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_integer("num-processes", 2, "number of local processes (>= 1)")
flags.DEFINE_integer("port", 0, "coordinator port on 127.0.0.1 (0: pick a free one)")
flags.DEFINE_integer("devices-per-process", 1, "virtual CPU devices per process (CPU only)")
flags.DEFINE_integer("gpus-per-process", None, "on a GPU host: give process i the GPUs "
                     "[i*g, (i+1)*g) through CUDA_VISIBLE_DEVICES instead of virtual CPU devices")
flags.DEFINE_string("out", None, "write process 0's output to this file (stdout then gets a short summary)")
flags.DEFINE_integer("timeout", 3600, "seconds before all processes are killed")
flags.DEFINE_bool("mcacct", False, "the flags after -- are an mcacct command line (calibrate, delta, epsilon)")
_flags.add_underscore_aliases()  # --a_b: the deprecated absl spelling of --a-b, until mcacct 0.2

HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "accelerator_host.py")
#: With ``--out``: entries of process 0's JSON result longer than this (characters of JSON) are left out of the
#: summary on stdout (they are in the file).
SUMMARY_ENTRY_CHARS = 1000
#: With ``--out``: the most lines of a text (not JSON) output printed on stdout.
SUMMARY_LINES = 40


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def summary(text: str, out: str) -> str:
    """What stdout gets when ``--out`` holds process 0's whole output ``text``: its last line, when that is a
    JSON object, without the entries longer than :data:`SUMMARY_ENTRY_CHARS` (named in ``omitted``, with the
    file); other text up to :data:`SUMMARY_LINES` lines."""
    lines = text.strip().splitlines()
    try:
        obj = json.loads(lines[-1]) if lines else None
    except ValueError:
        obj = None
    if isinstance(obj, dict):
        short = {k: v for k, v in obj.items() if len(json.dumps(v)) <= SUMMARY_ENTRY_CHARS}
        left = [k for k in obj if k not in short]
        if left:
            short["omitted"] = {"entries": left, "file": out}
        return json.dumps(short) + "\n"
    if len(lines) <= SUMMARY_LINES:
        return text
    return "\n".join(lines[:SUMMARY_LINES]) + f"\n... ({len(lines) - SUMMARY_LINES} more lines in {out})\n"


def main(argv: list[str]) -> int:
    forwarded = argv[1:]
    nproc, per = _flags.value("num-processes"), _flags.value("devices-per-process")
    gpus = _flags.value("gpus-per-process")
    if nproc < 1:
        print(f"error: num-processes must be >= 1; got {nproc}", file=sys.stderr)
        return 2
    if per < 1:
        print(f"error: devices-per-process must be >= 1; got {per}", file=sys.stderr)
        return 2
    port = FLAGS.port or free_port()
    procs = []
    if FLAGS.mcacct and not forwarded:
        print("error: --mcacct needs an mcacct command line after --", file=sys.stderr)
        return 2
    # with --out, process 0's stdout goes to a file (a pipe read only at the end would block a child whose
    # output outgrows the pipe's buffer), and stdout gets its summary
    captured = tempfile.TemporaryFile("w+") if FLAGS.out else None
    for i in range(nproc):
        env = dict(os.environ)
        if FLAGS.mcacct:
            cmd = [sys.executable, "-m", "mcacct", *forwarded,
                   f"--coordinator-address=127.0.0.1:{port}", f"--num-processes={nproc}", f"--process-id={i}"]
        else:
            cmd = [sys.executable, HOST, f"--coordinator-address=127.0.0.1:{port}", f"--num-processes={nproc}",
                   f"--process-id={i}", *forwarded]
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i * gpus + k) for k in range(gpus))
        else:
            env["JAX_PLATFORMS"] = "cpu"
            if FLAGS.mcacct:
                env["JAX_NUM_CPU_DEVICES"] = str(per)
            else:
                cmd.append(f"--cpu-devices={per}")
        if i == 0 and FLAGS.out and not FLAGS.mcacct:
            cmd.append(f"--out={FLAGS.out}")
        stdout = captured if i == 0 else subprocess.DEVNULL
        procs.append(subprocess.Popen(cmd, env=env, stdout=stdout, text=True))
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
    elif captured is not None:
        captured.seek(0)
        text = captured.read()
        if FLAGS.mcacct:  # the mcacct command's output to --out (accelerator_host.py writes --out itself)
            with open(FLAGS.out, "w") as f:
                f.write(text)
        sys.stdout.write(summary(text, FLAGS.out))
    if captured is not None:
        captured.close()
    return status


if __name__ == "__main__":
    _flags.run(main)
