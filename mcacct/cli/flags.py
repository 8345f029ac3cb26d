"""Flags and report fields shared by the ``mcacct`` subcommands (:mod:`mcacct.cli.commands`, :mod:`mcacct.cli.jobs`).

Both command modules import this one and neither imports the other's flags, so the command-line modules form
no import cycle. The scheme flags themselves come from :mod:`mcacct.cli.schemes`, and the flags' value types from
:mod:`mcacct.cli.values` (re-exported here).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from mcacct.cli.schemes import add_scheme_flags, all_flags, problem_from_args
from mcacct.engine.kernel_choice import resolve_loss_kernel
from mcacct.core.platform import ENV_CACHE, compilation_cache_dir, enable_compilation_cache  # the API uses them too
from mcacct.jobs.problem_file import scheme_to_dict
from mcacct.core.validate import LOSS_KERNELS
from mcacct.cli.values import (CPU_DEVICES_MAX, c_col_arg, chunk_size_type, coordinator_address_type, cpu_devices_type,
                               float_list, int_in, real_in, sample_count, sigma_list, sigma_value)

__all__ = ["add_problem_flags", "add_monte_carlo_flags", "cpu_devices_type", "configure_cpu_devices",
           "chunk_size_type", "resolve_chunk_size", "problem_from_args",
           "scheme_json", "device_info",
           "float_list", "sigma_list", "sample_count", "add_distributed_flags", "join_distributed", "compilation_cache_dir",
           "enable_compilation_cache", "ENV_CACHE", "Parser", "real_in", "int_in", "SEED_MAX", "check_out_file",
           "given_options", "refuse_options", "problem_options", "record_given", "flag_message", "PARAMETER_FLAGS",
           "c_col_arg", "sigma_value", "coordinator_address_type", "CPU_DEVICES_MAX", "json_text", "check_out_dir"]

#: The largest root seed (``jax.random.key`` takes a 64-bit integer).
SEED_MAX = 2**63 - 1


class Parser(argparse.ArgumentParser):
    """An ``argparse`` parser whose errors end in one line ``error: --flag must be in RANGE; got VALUE`` (after the
    usage lines), exit status 2, as every other refusal of the command line."""

    #: ``dest -> --option`` of every option added to any parser of this class (messages name flags).
    options_by_dest: dict[str, str] = {}

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # options are spelled out: `given_options` reads them exactly
        super().__init__(*args, **kwargs)

    def _add_action(self, action):  # argparse's hook, called for options of groups too
        longs = [o for o in action.option_strings if o.startswith("--")]
        if longs and action.dest not in ("help",):
            Parser.options_by_dest.setdefault(action.dest, longs[0])
        return super()._add_action(action)

    def error(self, message: str):  # noqa: D401 - argparse's hook
        """Print the usage and ``error: MESSAGE`` to stderr and exit with status 2; argparse's message
        ``argument --flag: TEXT`` becomes ``--flag TEXT`` (``--flag: TEXT`` after argparse's own words)."""
        m = re.match(r"argument ([^:]+): (.*)", message, re.S)
        if m:
            flag = m.group(1).split("/")[-1]
            text = m.group(2)
            plain = text.startswith(("invalid", "expected", "ignored", "one of", "not allowed"))
            message = f"{flag}: {text}" if plain else f"{flag} {text}"
        self.print_usage(sys.stderr)
        self.exit(2, f"error: {message}\n")


def resolve_chunk_size(args: Any, problem: Any) -> int:
    """``args.chunk_size`` as a number (``"auto"``: :func:`mcacct.engine.problem.auto_chunk_size` of ``problem``
    on this process's first device), stored back into ``args``."""
    if args.chunk_size == "auto":
        from mcacct.engine.problem import auto_chunk_size
        args.chunk_size = auto_chunk_size(problem)
    return args.chunk_size


#: Library parameter names whose flag is not their dest (messages of the library name parameters).
PARAMETER_FLAGS = {"num_samples": "--samples", "expected_batch_size": "--batch-size", "steps": "--steps"}


def flag_message(message: str) -> str:
    """A library error message in command-line terms: its subject (``min_sep must ...``, ``num_samples=...``)
    and any snake_case parameter become the flag (``--min-sep``), and a NumPy repr (``np.float64(nan)``) the
    plain number."""
    flags = {**Parser.options_by_dest, **PARAMETER_FLAGS}
    message = re.sub(r"np\.(?:float|int)\d+\(([^()]*)\)", r"\1", message)
    m = re.match(r"(\w+)(?=[ =\[])", message)
    if m and m.group(1) in flags:
        message = flags[m.group(1)] + message[m.end():]
    return re.sub(r"(?<![\w.\-'])([a-z]+_[a-z_]+)\b(?!\()",
                  lambda mm: flags.get(mm.group(1), mm.group(1)), message)


def given_options(args: argparse.Namespace) -> frozenset[str]:
    """The long options written on the command line (``--seed`` for ``--seed 3`` or ``--seed=3``), recorded by
    :func:`mcacct.cli.commands.main` (abbreviations are off, so the spelling is exact); empty when the
    arguments did not come from it."""
    return getattr(args, "given_options", frozenset())


def problem_options() -> tuple[str, ...]:
    """The options that define a problem and its Monte Carlo run: ``--scheme``, ``--seed``, ``--chunk-size``,
    ``--dtype``, ``--loss-kernel`` and every scheme flag (refused where a plan fixes them)."""
    return (("--scheme", "--seed", "--chunk-size", "--dtype", "--loss-kernel", "--no-skip")
            + tuple(f.option for f in all_flags()))


def refuse_options(args: argparse.Namespace, options, why: str) -> None:
    """``ValueError`` naming the first of ``options`` that was given: ``"--sigma does not apply {why}"``."""
    given = given_options(args)
    for opt in options:
        if opt in given:
            raise ValueError(f"{opt} does not apply {why}")


def record_given(args: argparse.Namespace, argv) -> None:
    """Store on ``args`` the long options of ``argv`` (for :func:`given_options`)."""
    args.given_options = frozenset(t.split("=", 1)[0] for t in argv if t.startswith("--") and len(t) > 2)


def _checked_url(flag: str, path: str, urls: bool, kind: str, probe) -> Any:
    """A URL given to ``flag``: refused unless ``urls``, else checked through :mod:`mcacct.jobs.storage` (its
    package installed, a store that writes whole files atomically) and ``probe(path)`` returned; every failure a
    ``ValueError`` naming ``flag``."""
    from mcacct.jobs import storage
    if not urls:
        raise ValueError(f"{flag} must be a local {kind} path; got the URL {path!r} (this option writes local "
                         "files only)")
    try:
        storage.check_url(path, write=True)
        return probe(path)
    except (ValueError, OSError) as err:
        raise ValueError(f"{flag}: {err}") from None


def check_out_file(flag: str, path: str | None, suffixes: tuple[str, ...] = (), exist_ok: bool = True,
                   urls: bool = False) -> None:
    """Refuse an output path before any work: its directory must exist, its suffix be one of ``suffixes`` (when
    given), and, unless ``exist_ok``, the file must not exist yet. A URL (``gs://...``) is refused unless ``urls``
    (a command that writes through :mod:`mcacct.jobs.storage`), and then checked there: its protocol's package
    installed, its store one that writes whole files atomically (an object store has no directory to check).
    ``ValueError`` naming ``flag``.

    Parameters
    ----------
    flag : str
    path : str or None
    suffixes : tuple of str
    exist_ok, urls : bool
    """
    if path is None:
        return
    from mcacct.jobs import storage
    if storage.is_url(path):
        there = _checked_url(flag, path, urls, "file", storage.exists)
        if suffixes and os.path.splitext(path)[1].lower() not in suffixes:
            raise ValueError(f"{flag} must end in one of {', '.join(suffixes)}; got {path!r}")
        if not exist_ok and there:
            raise ValueError(f"{flag}: {path!r} exists already (give a new path)")
        return
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ValueError(f"{flag}: directory {os.path.dirname(path) or '.'!r} does not exist; got {path!r}")
    if suffixes and os.path.splitext(path)[1].lower() not in suffixes:
        raise ValueError(f"{flag} must end in one of {', '.join(suffixes)}; got {path!r}")
    if not exist_ok and os.path.exists(path):
        raise ValueError(f"{flag}: {path!r} exists already (give a new path)")


def add_monte_carlo_flags(p: argparse.ArgumentParser) -> None:
    """``--seed --chunk-size --dtype --loss-kernel --json --quiet``."""
    r = p.add_argument_group("Monte Carlo")
    r.add_argument("--seed", type=int_in(0, SEED_MAX), default=0,
                   help="root seed of jax.random, in [0, 2^63 - 1] (default 0)")
    r.add_argument("--chunk-size", type=chunk_size_type, default="auto",
                   help="samples per chunk: an integer >= 1 (memory ~ chunk x n) or 'auto' (4096 on CPU; on an "
                        "accelerator the largest power of two up to 131072 that its memory holds); the resolved "
                        "number is what results and job files record (default auto)")
    r.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="precision of the loss kernel (sums are always float64); only float64 certifies: "
                        "calibrate refuses float32, estimates report certified: false")
    r.add_argument("--loss-kernel", choices=list(LOSS_KERNELS), default="auto",
                   help="kernel of the shared-draw ladder: 'fused' (draws, sliding sums and recursion in one pass; "
                        "b-min-sep only), 'unfused', or 'auto' (what the last measurement on this kind of device "
                        "found faster); the resolved kernel is recorded in job files (default auto)")
    r.add_argument("--no-skip", action="store_true",
                   help="compute every loss, also those whose contribution is provably 0 at the run's epsilons "
                        "(by default the add direction of b-min-sep skips them where epsilon exceeds its bound: the "
                        "sums are the same bit for bit; for A/B timing)")
    r.add_argument("--cpu-devices", type=cpu_devices_type, default="auto",
                   help="on CPU: devices of JAX's CPU backend, one chunk each at a time: an integer >= 1 or 'auto' "
                        "(one per core, at most 16, unless JAX_NUM_CPU_DEVICES or XLA_FLAGS already say); at most "
                        f"{CPU_DEVICES_MAX} (each device costs memory, about 4 MB, before any work); the results "
                        "are the same bit for bit whatever the count (default auto)")
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    r.add_argument("--quiet", action="store_true", help="no progress on stderr")


def configure_cpu_devices(args: Any) -> int | None:
    """Apply ``--cpu-devices`` (:func:`mcacct.core.platform.use_cpu_cores`) before the first JAX computation; commands
    without the flag leave JAX alone."""
    from mcacct.core.platform import use_cpu_cores
    value = getattr(args, "cpu_devices", None)
    if value is None:
        return None
    return use_cpu_cores(None if value == "auto" else value)


def add_problem_flags(p: argparse.ArgumentParser) -> None:
    """``--scheme``, every scheme flag of :mod:`mcacct.cli.schemes` and the Monte Carlo flags."""
    add_scheme_flags(p)
    add_monte_carlo_flags(p)


def scheme_json(problem) -> dict:
    """The report's ``scheme`` object: the registry name, the class (``type``; job files store the registry name
    there) and every field, the participation rate, ``c_col`` and the kernel dtype."""
    s = problem.scheme
    fields = scheme_to_dict(s)  # its "type" is the registry name (an unregistered scheme is refused, named)
    out = {"name": fields["type"], **fields}
    out["type"] = type(s).__name__
    summary = s.summary()
    if summary.participation_rate is not None:
        out["participation_rate"] = float(summary.participation_rate)
    out["c_col"] = list(problem.strategy.c_col)
    out["dtype"] = problem.dtype
    out["loss_kernel"] = resolve_loss_kernel(problem).kernel
    if summary.count_sampler is not None:  # truncated b-min-sep: how its counts are drawn here
        out["count_sampler"] = summary.count_sampler
    return out


def device_info() -> dict:
    """``device`` (``"platform:kind xN"``, N the global device count), ``platform``, ``device_kind`` and
    ``devices`` (:func:`jax.local_device_count`)."""
    import jax
    d = jax.devices()[0]
    kind = getattr(d, "device_kind", "")
    return {"device": f"{d.platform}:{kind} x{jax.device_count()}", "platform": d.platform, "device_kind": kind,
            "devices": jax.local_device_count(), "global_devices": jax.device_count(),
            "processes": jax.process_count()}


def add_distributed_flags(p: argparse.ArgumentParser) -> None:
    """``--coordinator-address --num-processes --process-id``: run as one process of a ``jax.distributed``
    job (each process runs its share of the chunks on its local devices; statistics are reduced exactly).
    Defaults come from ``MCACCT_COORDINATOR_ADDRESS``, ``MCACCT_NUM_PROCESSES``, ``MCACCT_PROCESS_ID``."""
    g = p.add_argument_group("multi-process (jax.distributed)")
    g.add_argument("--coordinator-address", type=coordinator_address_type, default=None,
                   help="host:port of process 0 (port in [1, 65535]; an IPv6 host in brackets, [::1]:1234); every "
                        "process gets the same flags except --process-id")
    g.add_argument("--num-processes", type=int_in(1), default=None, help="number of processes (>= 1)")
    g.add_argument("--process-id", type=int_in(0), default=None, help="this process, in [0, num-processes)")


def join_distributed(args) -> bool:
    """Join the ``jax.distributed`` job described by the flags or the environment, before any computation;
    ``True`` when running as one of several processes (only process 0 then prints)."""
    import os

    from mcacct.engine.distributed import ENV_COORDINATOR, initialize_distributed
    addr = getattr(args, "coordinator_address", None) or os.environ.get(ENV_COORDINATOR)
    if not addr:
        if getattr(args, "num_processes", None) is not None or getattr(args, "process_id", None) is not None:
            raise ValueError("--num-processes and --process-id go with --coordinator-address host:port")
        return False
    initialize_distributed(addr, args.num_processes, args.process_id)
    return True


def check_out_dir(flag: str, path: str, urls: bool = False) -> None:
    """Refuse, before any work, a directory the command cannot write into: ``path`` must be an existing
    directory or one that can be created, and a file can be created in it (tried with a temporary file, which is
    removed at once: the permission bits alone do not say so for root, nor on a read-only file system).
    A URL (``gs://bucket/runs``) is refused unless ``urls`` (a command that writes through
    :mod:`mcacct.jobs.storage`), and then checked there without writing: its protocol's package installed, its
    store one that writes whole files atomically, and the URL not an existing file.
    ``ValueError`` naming ``flag``; nothing is left behind.

    Parameters
    ----------
    flag, path : str
    urls : bool
    """
    import tempfile
    if not path:
        raise ValueError(f"{flag} must be a directory path; got {path!r}")
    from mcacct.jobs import storage
    if storage.is_url(path):
        if _checked_url(flag, path, urls, "directory", storage.isfile):
            raise ValueError(f"{flag} must be a directory; {path!r} is an existing file (give a directory path)")
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{flag} must be a directory; {path!r} is an existing file (give a directory path)")
    probe = os.path.abspath(path)
    while not os.path.exists(probe):  # the nearest existing ancestor: where the directory would be created
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not os.path.isdir(probe):
        raise ValueError(f"{flag}: {path!r} cannot be created: {probe!r} is a file, not a directory")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as err:
        where = "is not writable" if probe == os.path.abspath(path) else f"cannot be created in {probe!r}"
        raise ValueError(f"{flag}: directory {path!r} {where} ({err.strerror or err})") from None


def json_text(obj: Any, **kwargs) -> str:
    """The one JSON writer of the command line (``--json`` of every command, and the files commands write):
    :func:`mcacct.report.schema.json_text`, always valid JSON (RFC 8259), which has no ``Infinity`` or ``NaN``.

    Decision (docs/json.md): a non-finite number is written as ``null``; a report of
    :func:`mcacct.report.schema.report` lists the JSON Pointer of each one in ``nonfinite`` (``"inf"``,
    ``"-inf"`` or ``"nan"``), and where it is the value of an object's key ``K``, a field ``K_reason`` beside it
    says why in words, unless the command set one itself (``"epsilon_upper": null, "epsilon_upper_reason":
    "..."``; by default ``"not a finite number (+inf)"``). NumPy scalars and arrays become plain numbers and
    lists. ``json.loads`` of the text, even with ``parse_constant`` refusing ``Infinity``/``NaN``, always
    succeeds."""
    from mcacct.report.schema import json_text as strict_json_text
    return strict_json_text(obj, **kwargs)
