"""Flags and report fields shared by the ``mcacct`` subcommands (:mod:`mcacct.cli.commands`, :mod:`mcacct.cli.jobs`).

Both command modules import this one and neither imports the other's flags, so the command-line modules form
no import cycle. The scheme flags themselves come from :mod:`mcacct.registry`.
"""

from __future__ import annotations

import argparse

from mcacct.registry import add_scheme_flags, entry_for, problem_from_args, scheme_to_dict
from mcacct.validate import parse_floats

__all__ = ["add_problem_flags", "add_monte_carlo_flags", "problem_from_args", "scheme_json", "device_info",
           "float_list", "sample_count", "add_distributed_flags", "join_distributed", "compilation_cache_dir",
           "enable_compilation_cache", "ENV_CACHE"]


def add_monte_carlo_flags(p: argparse.ArgumentParser) -> None:
    """``--seed --chunk-size --dtype --json --quiet``."""
    r = p.add_argument_group("Monte Carlo")
    r.add_argument("--seed", type=int, default=0, help="root seed of jax.random (default 0)")
    r.add_argument("--chunk-size", type=int, default=4096, help="samples per chunk (memory ~ chunk x n)")
    r.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="precision of the loss kernel (sums are always float64); only float64 certifies: "
                        "calibrate refuses float32, estimates report certified: false")
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    r.add_argument("--quiet", action="store_true", help="no progress on stderr")


def add_problem_flags(p: argparse.ArgumentParser) -> None:
    """``--scheme``, every scheme flag of :mod:`mcacct.registry` and the Monte Carlo flags."""
    add_scheme_flags(p)
    add_monte_carlo_flags(p)


def scheme_json(problem) -> dict:
    """The report's ``scheme`` object: the registry name, the class and every field, the participation rate,
    ``c_col`` and the kernel dtype."""
    s = problem.scheme
    entry = entry_for(s)
    out = {"name": entry.name if entry is not None else type(s).__name__, **scheme_to_dict(s)}
    rate = getattr(s, "participation_rate", None)
    if rate is not None:
        out["participation_rate"] = float(rate)
    out["c_col"] = list(problem.strategy.c_col)
    out["dtype"] = problem.dtype
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


def sample_count(text: str) -> int:
    """``argparse`` type of a sample count: an integer, also written as ``7.5e9`` or ``1_000_000``, ``>= 1``."""
    try:
        v = float(text.replace("_", ""))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected a whole number of samples >= 1; got {text!r}") from err
    if not (v >= 1 and v == int(v) and v < 2**63):
        raise argparse.ArgumentTypeError(f"expected a whole number of samples >= 1; got {text!r}")
    return int(v)


def float_list(text: str) -> list[float]:
    """``argparse`` type: numbers separated by commas."""
    try:
        return list(parse_floats("list", text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas; got {text!r}") from err


ENV_CACHE = "MCACCT_CACHE_DIR"


def compilation_cache_dir() -> str | None:
    """Where compiled XLA programs are kept between runs: ``$MCACCT_CACHE_DIR`` (``off``, ``0`` or empty: no
    cache), else ``$XDG_CACHE_HOME/mcacct/jax`` (default ``~/.cache/mcacct/jax``)."""
    import os
    v = os.environ.get(ENV_CACHE)
    if v is not None:
        return None if v.strip().lower() in ("", "0", "off", "none", "false") else v
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mcacct", "jax")


def enable_compilation_cache() -> str | None:
    """Turn on JAX's persistent compilation cache in :func:`compilation_cache_dir` (programs that took at least
    0.2 s to compile), so repeated commands and shard jobs skip most of their start-up. Entries are keyed by the
    program, the compile options, the backend and the JAX/XLA versions, and written atomically, so concurrent
    jobs may share the directory; a cached program is the same executable, so results are bit-identical with or
    without it. Returns the directory, or ``None`` when disabled or not writable (the run goes on without)."""
    import os
    d = compilation_cache_dir()
    if d is None:
        return None
    try:
        os.makedirs(d, exist_ok=True)
    except OSError:
        return None
    import jax
    jax.config.update("jax_compilation_cache_dir", d)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    return d


def add_distributed_flags(p: argparse.ArgumentParser) -> None:
    """``--coordinator-address --num-processes --process-id``: run as one process of a ``jax.distributed``
    job (each process runs its share of the chunks on its local devices; statistics are reduced exactly).
    Defaults come from ``MCACCT_COORDINATOR_ADDRESS``, ``MCACCT_NUM_PROCESSES``, ``MCACCT_PROCESS_ID``."""
    g = p.add_argument_group("multi-process (jax.distributed)")
    g.add_argument("--coordinator-address", default=None,
                   help="host:port of process 0; every process gets the same flags except --process-id")
    g.add_argument("--num-processes", type=int, default=None, help="number of processes (>= 1)")
    g.add_argument("--process-id", type=int, default=None, help="this process, in [0, num-processes)")


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
