r"""Sharded Monte Carlo: the sample dimension spread over every local device, and over processes.

Chunks (``chunk_size`` samples each, chunk ``c`` of a direction drawn with
``fold_in(direction_key(key, direction), c)``) are processed in *groups* of ``D`` chunks, one chunk per
device of a one-dimensional :class:`jax.sharding.Mesh` with axis ``'chunks'``. Each device runs exactly the
single-chunk program of :func:`mcacct.accountant.run_direction` inside :func:`jax.shard_map`, so its
float64 chunk sums are bit-for-bit the ones a single device computes; the per-chunk results are then
folded into :class:`~mcacct.estimate.DirectionStats` (fixed-point integer sums, integer histogram), which
is exact and order-independent. Hence every result depends on ``(key, chunk_size)`` only, never on the
number of devices, processes or jobs.

Multi-host (multi-controller) runs: :func:`initialize_distributed` calls :func:`jax.distributed.initialize`
(CPU collectives through gloo). Process ``p`` of ``P`` takes chunks ``c`` with ``c % P == p`` on its local
devices; :func:`allreduce_stats` then gathers every process's integer statistics with
:func:`jax.experimental.multihost_utils.process_allgather` and adds them exactly (arbitrary-precision
fixed-point sums travel as 32-bit limbs).

Peak memory is that of one group (``D`` chunks in flight, plus one group dispatched ahead), independent of
``num_samples``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Callable, Iterable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from mcacct.validate import check_int, check_real
from mcacct.accountant import DEFAULT_CHUNK_SIZE, Estimate, Problem, Progress, chunk_losses, direction_key
from mcacct.estimate import DIRECTIONS, DirectionStats, HistogramSpec, chunk_statistics
from mcacct.systematic import applied_loss_shift, systematic_bound

__all__ = ["AXIS", "local_mesh", "num_chunks", "process_chunk_ids", "run_chunks", "run_direction_sharded",
           "estimate_sharded", "initialize_distributed", "allreduce_stats", "stats_to_array",
           "stats_from_array", "ENV_COORDINATOR", "ENV_NUM_PROCESSES", "ENV_PROCESS_ID"]

AXIS = "chunks"
ENV_COORDINATOR = "MCACCT_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "MCACCT_NUM_PROCESSES"
ENV_PROCESS_ID = "MCACCT_PROCESS_ID"
_LIMB_BITS = 32
_LIMBS = 8  # fixed-point sums < count * 2**80 < 2**143 fit easily into 256 bits


# -- mesh and chunk plans ----------------------------------------------------------------------------------
def local_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-dimensional mesh with axis ``'chunks'`` over ``devices`` (default: all local devices).

    Parameters
    ----------
    devices:
        Devices of this process to use; all of :func:`jax.local_devices` when ``None``.

    Returns
    -------
    jax.sharding.Mesh
        The mesh; its size is the number of chunks processed at once.
    """
    devs = list(jax.local_devices() if devices is None else devices)
    if not devs:
        raise ValueError("devices must contain at least one device")
    return Mesh(np.array(devs), (AXIS,))


def num_chunks(num_samples: int, chunk_size: int) -> int:
    """Number of chunks of the plan: ``ceil(num_samples / chunk_size)``."""
    n = check_int("num_samples", num_samples, low=1)
    c = check_int("chunk_size", chunk_size, low=1)
    return -(-n // c)


def process_chunk_ids(n_chunks: int, process_id: int | None = None, num_processes: int | None = None) -> range:
    """Chunk ids of one process in a multi-process run: ``c`` with ``c % num_processes == process_id``.

    Defaults to :func:`jax.process_index` and :func:`jax.process_count`.
    """
    n_chunks = check_int("n_chunks", n_chunks, low=0)
    num_processes = check_int("num_processes", jax.process_count() if num_processes is None else num_processes,
                              low=1)
    process_id = check_int("process_id", jax.process_index() if process_id is None else process_id,
                           low=0, high=num_processes - 1)
    return range(process_id, n_chunks, num_processes)


@lru_cache(maxsize=64)
def _group_fn(mesh: Mesh, problem: Problem, chunk_size: int, positive: bool, spec: HistogramSpec):
    """Jitted ``(dkey, chunk_ids[D], valid[D], sigma, eps) -> (sums[D, E], hist[D, bins + 2])``."""

    def per_device(dkey, cids, valid, sigma, eps, shift):
        # exactly the single-chunk program of run_direction: same key, same shapes, same ops
        losses = chunk_losses(jax.random.fold_in(dkey, cids[0]), sigma, problem, chunk_size, positive)
        sums, hist = chunk_statistics(losses, valid[0], eps, spec, shift)
        return sums[None], hist[None]

    rep, shd = PartitionSpec(), PartitionSpec(AXIS)
    fn = jax.shard_map(per_device, mesh=mesh, in_specs=(rep, shd, shd, rep, rep, rep), out_specs=(shd, shd),
                       check_vma=False)
    return jax.jit(fn)


def _batches(ids: Iterable[int], size: int) -> Iterator[list[int]]:
    batch: list[int] = []
    for c in ids:
        batch.append(int(c))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def run_chunks(problem: Problem, sigma: float, key: jax.Array, direction: str, num_samples: int, epsilons,
               chunk_ids: Iterable[int] | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
               spec: HistogramSpec = HistogramSpec(), stats: DirectionStats | None = None,
               mesh: Mesh | None = None, on_chunk: Callable[[int, DirectionStats], None] | None = None,
               on_group: Callable[[list[int], DirectionStats], None] | None = None,
               stop_when: Callable[[DirectionStats], bool] | None = None, progress: bool = False,
               label: str | None = None) -> DirectionStats:
    """Accumulate the statistics of the given chunks of one direction, ``mesh.size`` chunks at a time.

    Parameters
    ----------
    problem, sigma, key, direction, num_samples, epsilons, chunk_size, spec:
        As in :func:`mcacct.accountant.run_direction`; together they define the chunk plan.
    chunk_ids:
        Chunks of the plan to process, in this order (default: all, ``range(num_chunks)``). Any iterable
        of distinct ids in ``[0, num_chunks)``; a ``range`` keeps memory constant.
    stats:
        Statistics to continue (resume); a new :class:`DirectionStats` when ``None``.
    mesh:
        Mesh with axis ``'chunks'`` (default :func:`local_mesh`).
    on_chunk:
        Called as ``on_chunk(c, stats)`` after chunk ``c`` has been folded in.
    on_group:
        Called as ``on_group(ids, stats)`` after each group of chunks (e.g. to checkpoint).
    stop_when:
        Stop after the first group after which ``stop_when(stats)`` is true.
    progress:
        Print samples done, rate and ETA on stderr.

    Returns
    -------
    DirectionStats
        ``stats`` with the chunks folded in; equal, key for key, to :func:`run_direction` on the same chunks.
    """
    sigma = check_real("sigma", sigma, low=0.0, low_open=True)
    n_total = check_int("num_samples", num_samples, low=1)
    chunk_size = check_int("chunk_size", chunk_size, low=1)
    n_chunks = -(-n_total // chunk_size)
    if n_chunks >= 2**31:
        raise ValueError(f"num_samples / chunk_size must be < 2**31 chunks; got {n_chunks} chunks")
    eps = tuple(float(e) for e in np.atleast_1d(epsilons))
    stats = stats if stats is not None else DirectionStats(eps, spec)
    if tuple(stats.epsilons) != eps or stats.spec != spec:
        raise ValueError("stats must have the same epsilons and histogram spec as the run")
    ids = range(n_chunks) if chunk_ids is None else chunk_ids
    mesh = local_mesh() if mesh is None else mesh
    if tuple(mesh.axis_names) != (AXIS,):
        raise ValueError(f"mesh must have the single axis {AXIS!r}; got {mesh.axis_names}")
    width = mesh.size
    fn = _group_fn(mesh, problem, chunk_size, direction == "remove", spec)
    dkey = direction_key(key, direction)
    eps_arr = jnp.asarray(eps, jnp.float64)
    shift = jnp.asarray(applied_loss_shift(problem, sigma), jnp.float64)
    shd = NamedSharding(mesh, PartitionSpec(AXIS))

    def valid_of(c: int) -> int:
        if not 0 <= c < n_chunks:
            raise ValueError(f"chunk_ids must lie in [0, {n_chunks}); got {c}")
        return min(chunk_size, n_total - c * chunk_size)

    todo = None
    if isinstance(ids, range):
        short = n_chunks * chunk_size - n_total  # the last chunk is masked down to its valid samples
        todo = len(ids) * chunk_size - (short if (n_chunks - 1) in ids else 0)
    elif hasattr(ids, "__len__"):
        todo = sum(valid_of(int(c)) for c in ids)
    prog = Progress(label or f"sigma={sigma:.6g} {direction}", todo or 0, progress and todo is not None)
    done = 0

    def dispatch(group: list[int]):
        valid = [valid_of(c) for c in group]
        pad = width - len(group)
        cids = np.asarray(group + [group[-1]] * pad, np.int32)
        vals = np.asarray(valid + [0] * pad, np.int32)
        out = fn(dkey, jax.device_put(cids, shd), jax.device_put(vals, shd), sigma, eps_arr, shift)
        return group, valid, out

    def fold(item) -> bool:
        nonlocal done
        group, valid, (sums, hist) = item
        sums, hist = np.asarray(sums), np.asarray(hist)
        for j, c in enumerate(group):
            stats.add_chunk(valid[j], sums[j], hist[j])
            done += valid[j]
            if on_chunk is not None:
                on_chunk(c, stats)
        if on_group is not None:
            on_group(group, stats)
        prog.update(done)
        return stop_when is not None and stop_when(stats)

    pending = None
    stopped = False
    for group in _batches(ids, width):
        item = dispatch(group)  # asynchronous: the devices work on this group while the host folds the last
        if pending is not None and fold(pending):
            stopped = True
            pending = None
            break
        pending = item
    if pending is not None and not stopped:
        fold(pending)
    prog.update(done, force=progress and done > 0)
    return stats


def run_direction_sharded(problem: Problem, sigma: float, key: jax.Array, direction: str, num_samples: int,
                          epsilons, chunk_size: int = DEFAULT_CHUNK_SIZE, spec: HistogramSpec = HistogramSpec(),
                          mesh: Mesh | None = None, progress: bool = False,
                          distributed: bool | None = None) -> DirectionStats:
    """All ``num_samples`` samples of one direction on every local device (and every process).

    With ``distributed`` (default: ``jax.process_count() > 1``) this process runs the chunks
    ``c % process_count == process_index`` and the statistics are summed exactly over all processes, so
    every process returns the statistics of the whole run. Equal to
    :func:`mcacct.accountant.run_direction` with the same arguments, count for count and bit for bit.
    """
    n_chunks = num_chunks(num_samples, chunk_size)
    distributed = jax.process_count() > 1 if distributed is None else bool(distributed)
    ids = process_chunk_ids(n_chunks) if distributed else range(n_chunks)
    label = f"sigma={float(sigma):.6g} {direction}"
    if distributed:
        label += f" [process {jax.process_index()}/{jax.process_count()}]"
    stats = run_chunks(problem, sigma, key, direction, num_samples, epsilons, ids, chunk_size, spec,
                       mesh=mesh, progress=progress, label=label)
    return allreduce_stats(stats) if distributed else stats


def estimate_sharded(problem: Problem, sigma: float, key: jax.Array, num_samples: int, epsilons=(1.0,),
                     alpha: float = 0.01, directions: Sequence[str] = DIRECTIONS,
                     chunk_size: int = DEFAULT_CHUNK_SIZE, spec: HistogramSpec = HistogramSpec(),
                     mesh: Mesh | None = None, progress: bool = False,
                     distributed: bool | None = None) -> Estimate:
    """:func:`mcacct.accountant.estimate` on a given mesh and under ``jax.distributed`` (identical results, any
    device or process count: both run :func:`mcacct.runner.run_ladder`).

    Parameters
    ----------
    problem, sigma, key, num_samples, epsilons, alpha, directions, chunk_size, spec, progress:
        As in :func:`mcacct.accountant.estimate`.
    mesh:
        Mesh with axis ``'chunks'``; default all local devices.
    distributed:
        Split the chunks over all JAX processes and reduce exactly (default: when
        ``jax.process_count() > 1``).

    Returns
    -------
    Estimate
        Both directions (or ``directions``), with ``alpha`` split over them.
    """
    sigma = check_real("sigma", sigma, low=0.0, low_open=True)
    alpha = check_real("alpha", alpha, low=0.0, high=1.0, low_open=True, high_open=True)
    for e in np.atleast_1d(epsilons):
        check_real("epsilon", e, low=0.0)
    for d in directions:
        if d not in DIRECTIONS:
            raise ValueError(f"directions must be a subset of {DIRECTIONS}; got {d!r}")
    from mcacct.runner import run_ladder  # the one runner (it builds on this module's collectives)
    est = Estimate(sigma, alpha, systematic=systematic_bound(problem, sigma).delta,
                   certified=problem.dtype == "float64")
    run = run_ladder(problem, [sigma], key, num_samples, epsilons, chunk_size, spec, mesh=mesh,
                     distributed=distributed, progress=progress, label=f"sigma={sigma:.6g}")
    if run.errors:
        raise FloatingPointError(run.errors[0])
    est.stats = {d: run.stats[0][d] for d in directions}
    return est


# -- multi-process ---------------------------------------------------------------------------------------
def initialize_distributed(coordinator_address: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None, local_device_ids: Sequence[int] | None = None,
                           auto: bool = False) -> tuple[int, int]:
    """Join a multi-process JAX runtime (:func:`jax.distributed.initialize`); CPU collectives use gloo.

    Parameters
    ----------
    coordinator_address:
        ``host:port`` of process 0 (default: environment ``MCACCT_COORDINATOR_ADDRESS``).
    num_processes:
        Number of processes (default: ``MCACCT_NUM_PROCESSES``).
    process_id:
        This process's id in ``[0, num_processes)`` (default: ``MCACCT_PROCESS_ID``).
    local_device_ids:
        Restrict this process to these local devices (e.g. one GPU per process).
    auto:
        With no address anywhere, let JAX detect the cluster (SLURM, Open MPI, TPU pods, ...).

    Returns
    -------
    tuple of int
        ``(process_index, process_count)``.

    Must be called before any other JAX computation in the process.
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
    if addr is None:
        if not auto:
            raise ValueError("coordinator_address must be given (or set "
                             f"{ENV_COORDINATOR}; or pass auto=True for cluster auto-detection)")
        jax.distributed.initialize(local_device_ids=local_device_ids)
    else:
        if ":" not in addr:
            raise ValueError(f"coordinator_address must be host:port; got {addr!r}")
        num_processes = check_int("num_processes", num_processes, low=1)
        process_id = check_int("process_id", process_id, low=0, high=num_processes - 1)
        jax.distributed.initialize(addr, num_processes, process_id, local_device_ids=local_device_ids)
    return jax.process_index(), jax.process_count()


def stats_to_array(stats: DirectionStats) -> np.ndarray:
    """Flat int64 encoding ``[count, sums as 32-bit limbs (little end first), hist]`` for collectives."""
    limbs = []
    for v in stats.sums:
        if v < 0 or v.bit_length() > _LIMB_BITS * _LIMBS:
            raise ValueError(f"fixed-point sum out of range for the exchange format: {v}")
        limbs.extend((v >> (_LIMB_BITS * i)) & ((1 << _LIMB_BITS) - 1) for i in range(_LIMBS))
    head = np.asarray([stats.count] + limbs, np.int64)
    return np.concatenate([head, np.asarray(stats.hist, np.int64)])


def stats_from_array(arr: np.ndarray, epsilons, spec: HistogramSpec) -> DirectionStats:
    """Inverse of :func:`stats_to_array`."""
    eps = tuple(float(e) for e in epsilons)
    a = np.asarray(arr, np.int64)
    k = len(eps) * _LIMBS
    sums = []
    for j in range(len(eps)):
        limbs = a[1 + j * _LIMBS: 1 + (j + 1) * _LIMBS]
        sums.append(sum(int(x) << (_LIMB_BITS * i) for i, x in enumerate(limbs)))
    return DirectionStats(eps, spec, int(a[0]), sums, a[1 + k:].copy())


def allreduce_stats(stats: DirectionStats) -> DirectionStats:
    """Exact sum of every process's statistics (identity with one process); all processes get the total."""
    if jax.process_count() == 1:
        return DirectionStats(stats.epsilons, stats.spec, stats.count, list(stats.sums), stats.hist.copy())
    from jax.experimental import multihost_utils

    gathered = np.asarray(multihost_utils.process_allgather(stats_to_array(stats)))
    total = DirectionStats(stats.epsilons, stats.spec)
    for row in gathered.reshape(jax.process_count(), -1):
        total = total.merge(stats_from_array(row, stats.epsilons, stats.spec))
    return total
