r"""Processes: chunk plans per process, joining a ``jax.distributed`` runtime, and the exact all-reduce.

Process ``p`` of ``P`` takes the chunks ``c`` with ``c % P == p`` (:func:`process_chunk_ids`) on its local
devices (:func:`mcacct.engine.runner.run_ladder`); :func:`allreduce_stats` then gathers every process's
integer statistics with :func:`jax.experimental.multihost_utils.process_allgather` and adds them exactly
(arbitrary-precision fixed-point sums travel as 32-bit limbs), so a run's statistics do not depend on the
process count. :func:`initialize_distributed` calls :func:`jax.distributed.initialize` (CPU collectives through
gloo) from arguments or the ``MCACCT_*`` environment variables the launchers set.
"""

from __future__ import annotations

import os
from typing import Sequence

import jax
import numpy as np

from mcacct.statistics.accumulators import DirectionStats, HistogramSpec
from mcacct.core.validate import check_int

__all__ = ["num_chunks", "process_chunk_ids", "initialize_distributed", "check_coordinator_address",
           "allreduce_stats", "stats_to_array",
           "stats_from_array", "ENV_COORDINATOR", "ENV_NUM_PROCESSES", "ENV_PROCESS_ID"]

ENV_COORDINATOR = "MCACCT_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "MCACCT_NUM_PROCESSES"
ENV_PROCESS_ID = "MCACCT_PROCESS_ID"
_LIMB_BITS = 32
_LIMBS = 8  # fixed-point sums < count * 2**80 < 2**143 fit easily into 256 bits


# -- chunk plans ----------------------------------------------------------------------------------------
def num_chunks(num_samples: int, chunk_size: int) -> int:
    r"""Number of chunks of the plan: ``ceil(num_samples / chunk_size)``.

    Parameters
    ----------
    num_samples : int
        Total number of samples, ``>= 1``.
    chunk_size : int
        Samples per chunk, ``>= 1`` (the last chunk may be shorter).

    Returns
    -------
    int
        :math:`\lceil N / c \rceil` for ``N = num_samples`` and ``c = chunk_size``.

    Raises
    ------
    ValueError
        Naming ``num_samples`` or ``chunk_size`` if it is not an integer ``>= 1``.
    """
    n = check_int("num_samples", num_samples, low=1)
    c = check_int("chunk_size", chunk_size, low=1)
    return -(-n // c)


def process_chunk_ids(n_chunks: int, process_id: int | None = None, num_processes: int | None = None) -> range:
    """Chunk ids of one process in a multi-process run: ``c`` with ``c % num_processes == process_id``.

    Defaults to :func:`jax.process_index` and :func:`jax.process_count`.

    Parameters
    ----------
    n_chunks : int
        Number of chunks of the plan, ``>= 0``.
    process_id : int, optional
        This process's id in ``[0, num_processes - 1]`` (default :func:`jax.process_index`).
    num_processes : int, optional
        Number of processes, ``>= 1`` (default :func:`jax.process_count`).

    Returns
    -------
    range
        ``range(process_id, n_chunks, num_processes)``; empty when ``process_id >= n_chunks``.

    Raises
    ------
    ValueError
        Naming ``n_chunks``, ``num_processes`` or ``process_id`` if it is not an integer in its range.
    """
    n_chunks = check_int("n_chunks", n_chunks, low=0)
    num_processes = check_int("num_processes", jax.process_count() if num_processes is None else num_processes,
                              low=1)
    process_id = check_int("process_id", jax.process_index() if process_id is None else process_id,
                           low=0, high=num_processes - 1)
    return range(process_id, n_chunks, num_processes)


# -- multi-process ---------------------------------------------------------------------------------------
def check_coordinator_address(name: str, address) -> str:
    """``address`` if it reads ``host:port``: ``port`` a decimal integer in ``[1, 65535]``, ``host`` a non-empty
    name or IPv4 address without ``:``, or an IPv6 address in brackets (``[::1]:1234``). ``ValueError`` naming
    ``name`` otherwise. Checked before :func:`jax.distributed.initialize` is touched: a bad port made it raise a
    runtime error deep inside, and an address such as ``::::`` made it wait for a coordinator forever.

    Parameters
    ----------
    name : str
        The parameter's name, for messages.
    address : object
        The value to check.

    Returns
    -------
    str
        ``address`` with surrounding whitespace removed.

    Raises
    ------
    ValueError
        Naming ``name`` if ``address`` is not a string of the form above (the message shows the expected form and
        the value received).
    """
    form = "host:port (port an integer in [1, 65535]; an IPv6 host in brackets, [::1]:1234)"
    if not isinstance(address, str):
        raise ValueError(f"{name} must be {form}; got {address!r}")
    host, sep, port = address.strip().rpartition(":")
    inner = host[1:-1] if host.startswith("[") and host.endswith("]") else None  # an IPv6 address in brackets
    ok_host = (bool(inner) and "[" not in inner and "]" not in inner) if inner is not None else (
        bool(host) and ":" not in host and "[" not in host)
    ok_host = ok_host and not any(c.isspace() for c in host)
    ok_port = port.isdigit() and port.isascii() and 1 <= int(port) <= 65535
    if not (sep and ok_host and ok_port):
        raise ValueError(f"{name} must be {form}; got {address!r}")
    return address.strip()


def initialize_distributed(coordinator_address: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None, local_device_ids: Sequence[int] | None = None,
                           auto: bool = False) -> tuple[int, int]:
    """Join a multi-process JAX runtime (:func:`jax.distributed.initialize`); CPU collectives use gloo.

    Must be called before any other JAX computation in the process.

    Parameters
    ----------
    coordinator_address : str, optional
        ``host:port`` of process 0 (default: environment ``MCACCT_COORDINATOR_ADDRESS``).
    num_processes : int, optional
        Number of processes, ``>= 1`` (default: ``MCACCT_NUM_PROCESSES``).
    process_id : int, optional
        This process's id in ``[0, num_processes)`` (default: ``MCACCT_PROCESS_ID``).
    local_device_ids : sequence of int, optional
        Restrict this process to these local devices (e.g. one GPU per process).
    auto : bool, default False
        With no address anywhere, let JAX detect the cluster (SLURM, Open MPI, TPU pods, ...).

    Returns
    -------
    tuple of int
        ``(process_index, process_count)``.

    Raises
    ------
    ValueError
        Naming ``coordinator_address`` if it is malformed (:func:`check_coordinator_address`) or missing without
        ``auto``; naming ``num_processes`` or ``process_id`` if out of range when an address is given.
    """
    addr = coordinator_address or os.environ.get(ENV_COORDINATOR)
    if num_processes is None and os.environ.get(ENV_NUM_PROCESSES):
        num_processes = int(os.environ[ENV_NUM_PROCESSES])
    if process_id is None and os.environ.get(ENV_PROCESS_ID):
        process_id = int(os.environ[ENV_PROCESS_ID])
    try:  # gloo is the default CPU collectives in recent jax; older versions need it set explicitly
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except Exception:  # pragma: no cover - option absent
        pass
    if addr is not None:
        addr = check_coordinator_address("coordinator_address", addr)
    if addr is None:
        if not auto:
            raise ValueError("coordinator_address must be given (or set "
                             f"{ENV_COORDINATOR}; or pass auto=True for cluster auto-detection)")
        jax.distributed.initialize(local_device_ids=local_device_ids)
    else:
        num_processes = check_int("num_processes", num_processes, low=1)
        process_id = check_int("process_id", process_id, low=0, high=num_processes - 1)
        jax.distributed.initialize(addr, num_processes, process_id, local_device_ids=local_device_ids)
    return jax.process_index(), jax.process_count()


def stats_to_array(stats: DirectionStats) -> np.ndarray:
    r"""Flat int64 encoding ``[count, sums as 32-bit limbs (little end first), hist]`` for collectives.

    Parameters
    ----------
    stats : DirectionStats
        Statistics of one direction; every fixed-point sum must be non-negative and fit in 256 bits.

    Returns
    -------
    numpy.ndarray
        int64, length ``1 + 8 E + bins + 2`` for ``E`` epsilons: the count, then each sum as eight 32-bit limbs
        (:math:`s = \sum_{i<8} \ell_i 2^{32 i}`), then the histogram.

    Raises
    ------
    ValueError
        If a fixed-point sum is negative or longer than 256 bits ("fixed-point sum out of range for the exchange
        format").
    """
    limbs = []
    for v in stats.sums:
        if v < 0 or v.bit_length() > _LIMB_BITS * _LIMBS:
            raise ValueError(f"fixed-point sum out of range for the exchange format: {v}")
        limbs.extend((v >> (_LIMB_BITS * i)) & ((1 << _LIMB_BITS) - 1) for i in range(_LIMBS))
    head = np.asarray([stats.count] + limbs, np.int64)
    return np.concatenate([head, np.asarray(stats.hist, np.int64)])


def stats_from_array(arr: np.ndarray, epsilons, spec: HistogramSpec) -> DirectionStats:
    """Inverse of :func:`stats_to_array`.

    Parameters
    ----------
    arr : array_like
        One process's row as written by :func:`stats_to_array`.
    epsilons : sequence of float
        The run's epsilons, in the order the sums were written.
    spec : HistogramSpec
        The run's histogram binning.

    Returns
    -------
    DirectionStats
        The count, the sums rebuilt exactly from their limbs, and a copy of the histogram.
    """
    eps = tuple(float(e) for e in epsilons)
    a = np.asarray(arr, np.int64)
    k = len(eps) * _LIMBS
    sums = []
    for j in range(len(eps)):
        limbs = a[1 + j * _LIMBS: 1 + (j + 1) * _LIMBS]
        sums.append(sum(int(x) << (_LIMB_BITS * i) for i, x in enumerate(limbs)))
    return DirectionStats(eps, spec, int(a[0]), sums, a[1 + k:].copy())


def allreduce_stats(stats: DirectionStats) -> DirectionStats:
    """Exact sum of every process's statistics (identity with one process); all processes get the total.

    Parameters
    ----------
    stats : DirectionStats
        This process's statistics; every process must pass the same epsilons and histogram spec.

    Returns
    -------
    DirectionStats
        The exact total over all processes (a copy of ``stats`` with one process).

    Raises
    ------
    ValueError
        As :func:`stats_to_array` for a sum out of the exchange range, or as :meth:`DirectionStats.merge` when the
        rows do not match.
    """
    if jax.process_count() == 1:
        return DirectionStats(stats.epsilons, stats.spec, stats.count, list(stats.sums), stats.hist.copy())
    from jax.experimental import multihost_utils

    gathered = np.asarray(multihost_utils.process_allgather(stats_to_array(stats)))
    total = DirectionStats(stats.epsilons, stats.spec)
    for row in gathered.reshape(jax.process_count(), -1):
        total = total.merge(stats_from_array(row, stats.epsilons, stats.spec))
    return total
