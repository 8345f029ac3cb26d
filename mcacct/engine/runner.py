r"""The one Monte Carlo runner: a ladder of noise multipliers, both directions, on shared draws, over a mesh.

A *run* is a plan of ``ceil(num_samples / chunk_size)`` chunks. Chunk ``c`` draws its outputs from
``fold_in(key, c)`` (cut into cache-sized blocks, :func:`mcacct.engine.problem.block_keys`), and **one set of
draws serves every candidate and both directions** (common random numbers): the output mean ``m = C x`` and
the standard noise ``z`` give ``y = m + sigma_j z`` (remove, ``y ~ P``) and ``y = sigma_j z`` (add, ``y ~ Q``)
for every ``sigma_j`` of the ladder. A scheme's mechanism (``Problem.mechanism()``) that shares ladder work (its
``ladder``: draws, participation and sliding sums once) runs only the recursion per candidate; other mechanisms
run the generic loss kernel (:mod:`mcacct.engine.losses`) per candidate and direction on the same key, which draws
the same ``x`` and ``z``.

Why sharing draws is sound for Alg. 5 is written out in ``docs/soundness.md`` ("Shared draws").

Chunks are spread over a :class:`jax.sharding.Mesh` of devices (``shard_map``, one chunk per device per
step; one device is a mesh of one), and under ``jax.distributed`` over processes (chunk ``c`` on process
``c mod P``, exact integer all-reduce). Every chunk's statistics are computed by the same program whatever
the device, process or shard count, and integer statistics merge exactly, so results are bit-identical for a
given backend and kernel.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Callable, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from mcacct.core.validate import check_int, check_real
from mcacct.engine.compile_notice import CompileNotice
from mcacct.engine.distributed import allreduce_stats
from mcacct.engine.kernel_choice import fused_block_ladder, resolve_loss_kernel
from mcacct.engine.losses import ladder_losses
from mcacct.engine.problem import DEFAULT_CHUNK_SIZE, Problem, batch_blocks, block_keys, block_size
from mcacct.kernels.blocks import map_blocks
from mcacct.engine.progress import Progress
from mcacct.engine.widths import GroupClock, Programs, next_width, padded_width
from mcacct.statistics.accumulators import (DIRECTIONS, DirectionStats, HistogramSpec, chunk_statistics,
                                      nonfinite_loss_message)
from mcacct.engine.skips import remove_skip_arrays, skip_bound
from mcacct.engine.systematic import applied_loss_shift
from mcacct.kernels.shortcuts import RemoveSkip
from mcacct.core.platform import ensure_compilation_cache, target_platform
from mcacct.core.precision import float64

__all__ = ["LadderStats", "block_ladder_losses", "ladder_chunk_statistics", "run_ladder", "local_mesh", "padded_width",
           "AXIS"]

AXIS = "chunks"


def local_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A one-axis mesh (``'chunks'``) over the given devices (default: all local devices).

    Parameters
    ----------
    devices : sequence of jax.Device, optional
        The devices, in mesh order.

    Returns
    -------
    jax.sharding.Mesh
        One axis, :data:`AXIS`, of ``len(devices)`` devices.

    Raises
    ------
    ValueError
        If ``devices`` is empty.
    """
    devs = list(jax.local_devices() if devices is None else devices)
    if not devs:
        raise ValueError("devices must contain at least one device")
    return Mesh(np.array(devs), (AXIS,))


def block_ladder_losses(key, sigmas, problem: Problem, num_samples: int, add_bound: float | None = None,
                        remove_skip: RemoveSkip | None = None, prepared=None) -> jax.Array:
    """``(J, 2, num_samples)`` losses of one block: the fused kernel where ``problem.loss_kernel`` resolves to it
    (:func:`mcacct.engine.kernel_choice.resolve_loss_kernel`), else :func:`mcacct.engine.losses.ladder_losses`
    (with ``add_bound``: :func:`~mcacct.engine.skips.skip_bound`; ``remove_skip``:
    :func:`~mcacct.engine.skips.remove_skip_arrays`).

    Parameters
    ----------
    key : jax.Array
        The block's key.
    sigmas : array_like
        The ``J`` noise multipliers.
    problem : Problem
        Scheme, strategy and kernel.
    num_samples : int
        Samples of the block.
    add_bound : float, optional
        As above; ``None`` computes every add loss.
    remove_skip : RemoveSkip, optional
        As above; ``None`` computes every remove loss.
    prepared : pytree, optional
        The block's draws made ahead by the mechanism's ``prepare`` (:func:`map_chunk_blocks`).

    Returns
    -------
    jax.Array
        Shape ``(J, 2, num_samples)``: per candidate, the remove and add losses on shared draws.
    """
    if resolve_loss_kernel(problem).kernel == "fused":
        return fused_block_ladder(problem, key, sigmas, num_samples)
    return ladder_losses(problem.mechanism(), key, sigmas, num_samples, add_bound, remove_skip, prepared)


def map_chunk_blocks(per_block: Callable, keys: jax.Array, problem: Problem, bsize: int):
    """``per_block(key, prepared=...)`` over a chunk's block keys, stacked: on CPU one block after another
    (:func:`mcacct.kernels.blocks.map_blocks`); on accelerators batched, and where the mechanism draws part of a
    block ahead (``Mechanism.prepare``, e.g. the truncated scheme's screened counts: a sequential chain) that part
    for every block of the chunk in one batch first, then the blocks' losses :func:`~mcacct.engine.problem.
    batch_blocks` at a time (``lax.map`` over batches). The same draws either way: a chunk may then be larger than
    the losses' memory allows at once, and the chain's rounds run once for all its blocks' flagged samples."""
    mech = problem.mechanism()
    if target_platform() == "cpu" or mech.prepare is None or resolve_loss_kernel(problem).kernel == "fused":
        return map_blocks(lambda k: per_block(k), keys)
    prepared = jax.vmap(lambda k: mech.prepare(k, bsize))(keys)
    return jax.lax.map(lambda kp: per_block(kp[0], prepared=kp[1]), (keys, prepared),
                       batch_size=min(keys.shape[0], batch_blocks(problem, bsize)))


@partial(jax.jit, static_argnames=("problem", "chunk_size", "spec", "add_bound"))
def ladder_chunk_statistics(key, sigmas, shifts, valid, epsilons, problem: Problem, chunk_size: int,
                            spec: HistogramSpec, add_bound: float | None = None, remove_skip=None):
    r"""Statistics of one chunk for every candidate and direction: ``sums`` ``(J, 2, E)`` (float64) and
    ``hist`` ``(J, 2, bins + 2)`` (int32), over the first ``valid`` samples; candidate ``j``'s losses are
    raised by ``shifts[j]`` (:func:`mcacct.engine.systematic.applied_loss_shift`). On CPU the blocks run one after
    another (``lax.map``: a block's arrays stay in cache); on accelerators they are batched. ``add_bound``: the
    run's :func:`~mcacct.engine.skips.skip_bound`; ``remove_skip``: a :class:`~mcacct.kernels.shortcuts.RemoveSkip`
    of the candidates' arrays (:func:`~mcacct.engine.skips.remove_skip_arrays`) or ``None``.

    Parameters
    ----------
    key : jax.Array
        The chunk's key.
    sigmas, shifts : jax.Array
        float64 ``(J,)``: the candidates and their loss shifts.
    valid : int or jax.Array
        Samples of the chunk that count (the rest are masked).
    epsilons : jax.Array
        float64 ``(E,)``.
    problem, chunk_size, spec, add_bound : Problem, int, HistogramSpec, float or None
        Static: the problem, the chunk size, the histogram and the add skip's bound.
    remove_skip : RemoveSkip, optional
        The remove skip's arrays.

    Returns
    -------
    sums : jax.Array
        float64 ``(J, 2, E)``: per candidate and direction (remove, add), the sum over the chunk of
        :math:`\max(0, 1 - e^{\varepsilon - L})`, ``L`` the loss raised by the candidate's shift.
    hist : jax.Array
        int32 ``(J, 2, bins + 2)``: the loss histograms.
    """
    bsize = block_size(problem, chunk_size)
    keys = block_keys(key, problem, chunk_size)
    per_block = partial(block_ladder_losses, sigmas=sigmas, problem=problem, num_samples=bsize, add_bound=add_bound,
                        remove_skip=remove_skip)
    out = map_chunk_blocks(per_block, keys, problem, bsize)
    losses = jnp.moveaxis(out, 0, 2).reshape(out.shape[1], 2, -1)[:, :, :chunk_size]  # (J, 2, chunk)

    # candidate by candidate (lax.map, not vmap): each candidate's reductions then run the same program
    # whatever the ladder's length, so its statistics equal those of a run of that candidate alone
    j = losses.shape[0]
    flat = losses.reshape(j * 2, -1)
    sh = jnp.repeat(shifts, 2)
    sums, hist = jax.lax.map(lambda a: chunk_statistics(a[0], valid, epsilons, spec, a[1]), (flat, sh))
    return sums.reshape(j, 2, -1), hist.reshape(j, 2, -1)


#: per compiled group function (:func:`_group_fn`): its widths and compile time in this process (weak keys: an entry
#: leaves with its function, when ``_group_fn``'s cache lets it go)
_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@lru_cache(maxsize=64)
def _group_fn(mesh: Mesh, problem: Problem, chunk_size: int, spec: HistogramSpec, add_bound: float | None = None,
              remove: bool = False):
    """Jitted ``(key, chunk_ids[D], valid[D], sigmas, shifts, eps, skip) -> (sums[D, J, 2, E], hist[D, J, 2, H])``;
    ``skip`` ``(J, 3)``: :func:`~mcacct.engine.skips.remove_skip_arrays` (read only with ``remove``)."""

    def per_device(key, cids, valid, sigmas, shifts, eps, skip):
        # exactly the single-chunk program: same key, same shapes, same ops on every device count
        rskip = RemoveSkip(*skip.T) if remove else None
        sums, hist = ladder_chunk_statistics(jax.random.fold_in(key, cids[0]), sigmas, shifts, valid[0], eps,
                                             problem, chunk_size, spec, add_bound, rskip)
        return sums[None], hist[None]

    rep, shd = PartitionSpec(), PartitionSpec(AXIS)
    fn = jax.shard_map(per_device, mesh=mesh, in_specs=(rep, shd, shd, rep, rep, rep, rep), out_specs=(shd, shd),
                       check_vma=False)
    return jax.jit(fn)


@dataclass
class LadderStats:
    """Statistics of a run: ``stats[j][direction]`` for candidate ``j`` (``sigmas[j]``), ``active``, the candidates
    still running (one leaves when a ``drop`` rule removes it, or with an entry in ``errors`` when its kernel refused
    a chunk), and the steady rate ``steady_draws / steady_seconds`` (:class:`~mcacct.engine.widths.GroupClock`)."""

    sigmas: tuple[float, ...]
    stats: list[dict[str, DirectionStats]] = field(default_factory=list)
    active: list[int] = field(default_factory=list)
    chunks_done: int = 0
    errors: dict[int, str] = field(default_factory=dict)
    steady_draws: int = 0
    steady_seconds: float = 0.0


@float64
def run_ladder(problem: Problem, sigmas: Sequence[float], key: jax.Array, num_samples: int, epsilons,
               chunk_size: int = DEFAULT_CHUNK_SIZE, spec: HistogramSpec = HistogramSpec(),
               mesh: Mesh | None = None, drop: Callable[[LadderStats], Iterable[int]] | None = None,
               chunk_ids: Iterable[int] | None = None, distributed: bool | None = None,
               progress: bool = False, label: str = "ladder",
               stats: list[dict[str, DirectionStats]] | None = None,
               on_group: Callable[[list[int], LadderStats], None] | None = None,
               active: Sequence[int] | None = None) -> LadderStats:
    """Accumulate statistics of ``num_samples`` samples per direction for every ``sigma`` on shared draws.

    Parameters
    ----------
    problem : Problem
        Scheme, strategy and kernel.
    sigmas : sequence of float
        The ladder (any order; each candidate keeps its index).
    key : jax.Array
        Key of the run: chunk ``c`` uses ``fold_in(key, c)`` for every candidate and direction.
    num_samples, epsilons, chunk_size, spec : int, sequence of float, int, HistogramSpec
        The plan (``ceil(num_samples / chunk_size)`` chunks, the last one masked to ``num_samples``), the
        epsilons whose deltas are summed exactly (fixed point) and the histogram of the losses.
    mesh : jax.sharding.Mesh, optional
        Devices (default: every local device).
    drop : callable, optional
        Called after each group of chunks with the statistics so far; returns candidate indices that leave
        the run (e.g. candidates whose verification already failed). Not used in distributed runs, where
        every candidate runs to the end (dropping is only a saving: the verdicts are the same).
    chunk_ids : iterable of int, optional
        Restrict the run to these chunks of the plan (shard jobs); default all.
    distributed : bool, optional
        Split the chunks over every JAX process and sum exactly (default: when ``jax.process_count() > 1``).
    progress, label : bool, str
        Samples, rate and ETA on stderr (default off), each line prefixed by ``label`` (default ``"ladder"``).
    stats : list of dict, optional
        Statistics to continue, one dict per candidate (resumed shard jobs); fresh ones when ``None``.
    on_group : callable, optional
        Called as ``on_group(chunk_ids, run)`` after each group of chunks has been folded in (checkpoints).
    active : sequence of int, optional
        Candidates to run (default all); the others keep ``stats`` as given (resumed runs).

    Returns
    -------
    LadderStats
        ``stats[j][direction]`` per candidate, summed over every process when ``distributed``; a candidate whose
        sums were not finite has an ``errors`` entry and leaves ``active``; this process's steady rate.

    Raises
    ------
    ValueError
        Naming ``sigmas`` (empty, or an entry not a finite number > 0), ``num_samples``, ``chunk_size`` (not an
        integer >= 1, or ``2**31`` chunks or more), ``chunk_ids`` (outside ``[0, n_chunks)``), ``mesh`` (not the
        single axis ``"chunks"``), ``stats`` (not both directions with the run's epsilons and spec per sigma) or
        ``active`` (an index outside ``[0, J)``).
    """
    ensure_compilation_cache()  # the Python API's persistent cache (a no-op where the application set its own)
    sig = tuple(check_real("sigmas", s, low=0.0, low_open=True) for s in sigmas)
    if not sig:
        raise ValueError("sigmas must contain at least one noise multiplier")
    n_total = check_int("num_samples", num_samples, low=1)
    chunk_size = check_int("chunk_size", chunk_size, low=1)
    n_chunks = -(-n_total // chunk_size)
    if n_chunks >= 2**31:
        raise ValueError(f"num_samples / chunk_size must be < 2**31 chunks; got {n_chunks} chunks")
    eps = tuple(float(e) for e in np.atleast_1d(epsilons))
    distributed = jax.process_count() > 1 if distributed is None else bool(distributed)
    ids = list(range(n_chunks) if chunk_ids is None else chunk_ids)
    for c in ids:
        if not 0 <= c < n_chunks:
            raise ValueError(f"chunk_ids must be in [0, {n_chunks}); got {c}")
    if distributed:
        ids = [c for c in ids if c % jax.process_count() == jax.process_index()]
        drop = None
    mesh = local_mesh() if mesh is None else mesh
    if tuple(mesh.axis_names) != (AXIS,):
        raise ValueError(f"mesh must have the single axis {AXIS!r}; got {mesh.axis_names}")
    width = mesh.size
    shd = NamedSharding(mesh, PartitionSpec(AXIS))
    # provably zero contributions are skipped for the whole run (the same sums; mcacct.kernels.shortcuts, .bound)
    rskip = remove_skip_arrays(problem, sig, eps)
    fn = _group_fn(mesh, problem, chunk_size, spec, skip_bound(problem, sig, eps), rskip is not None)
    rskip_all = np.zeros((len(sig), 3)) if rskip is None else rskip   # RemoveSkip's three fields
    eps_arr = jnp.asarray(eps, jnp.float64)
    shifts_all = np.asarray([applied_loss_shift(problem, s) for s in sig], np.float64)
    if stats is None:
        stats = [{d: DirectionStats(eps, spec) for d in DIRECTIONS} for _ in sig]
    elif len(stats) != len(sig) or any(set(st) != set(DIRECTIONS) or st[d].epsilons != eps or st[d].spec != spec
                                       for st in stats for d in st):
        raise ValueError("stats must hold, for every sigma, both directions with the run's epsilons and spec")
    out = LadderStats(sig, stats, list(range(len(sig))) if active is None else sorted(int(j) for j in active))
    if any(not 0 <= j < len(sig) for j in out.active):
        raise ValueError(f"active must list candidate indices in [0, {len(sig)}); got {out.active}")

    def valid_of(c: int) -> int:
        return min(chunk_size, n_total - c * chunk_size)

    todo = sum(valid_of(c) for c in ids)
    prog = Progress(f"{label}: {len(sig)} candidate(s) x 2 directions", todo, progress)
    notice = CompileNotice(label, bool(progress) and bool(ids)).start()  # a line if compiling takes > 10 s
    done = 0
    clock, programs = GroupClock(), _PROGRAMS.setdefault(fn, Programs())
    width_now = 0

    def dispatch(group: list[int], active: list[int], remaining: int):
        nonlocal width_now
        pad = width - len(group)
        cids = np.asarray(group + [group[-1]] * pad, np.int32)
        vals = np.asarray([valid_of(c) for c in group] + [0] * pad, np.int32)
        # the candidate axis is padded to a size of padded_width (repeating the last candidate, whose extra results
        # are ignored): a shrinking ladder compiles about 2 log2(J) programs, and no program has a one-trip
        # candidate loop, which XLA would unroll and fuse differently (a last-ulp difference), so a candidate's
        # statistics do not depend on how many others run beside it; a smaller program is compiled only where the
        # work it saves is worth its compilation (mcacct.engine.widths)
        w = next_width(width_now, len(active), remaining, clock.group_seconds, programs.compile_seconds,
                       padded_width(len(active)) in programs.widths)
        if width_now and w != width_now:
            clock.switched(w / width_now)
        width_now = w
        padded = list(active) + [active[-1]] * (w - len(active))
        t0 = time.perf_counter()
        res = fn(key, jax.device_put(cids, shd), jax.device_put(vals, shd),
                 jnp.asarray([sig[j] for j in padded], jnp.float64), jnp.asarray(shifts_all[padded]), eps_arr,
                 jnp.asarray(rskip_all[padded], jnp.float64))
        if w not in programs.widths:
            programs.widths.add(w)
            programs.compile_seconds = time.perf_counter() - t0
        return group, list(active), res

    def fold(item) -> None:
        """Fold a group in for the candidates it ran that are still active (a candidate dropped while the
        group was in flight keeps its statistics as they were)."""
        nonlocal done
        group, active, (sums, hist) = item
        sums, hist = np.asarray(sums), np.asarray(hist)
        clock.arrived(sum(valid_of(c) for c in group))
        notice.done()
        live = set(out.active)
        for g, c in enumerate(group):
            v = valid_of(c)
            for a, j in enumerate(active):
                if j in live:
                    try:
                        for d_i, d in enumerate(DIRECTIONS):
                            out.stats[j][d].add_chunk(v, sums[g, a, d_i], hist[g, a, d_i])
                    except FloatingPointError:  # this candidate's kernel left its range: it leaves
                        out.errors[j] = nonfinite_loss_message(problem.dtype, sig[j])
                        live.discard(j)
            done += v
        out.chunks_done += len(group)
        prog.update(done)
        out.active = [j for j in out.active if j in live]
        if on_group is not None:
            on_group(list(group), out)
        if drop is not None:
            gone = {int(j) for j in drop(out)}
            out.active = [j for j in out.active if j not in gone]

    pending = None
    for i in range(0, len(ids), width):
        if not out.active:
            break
        # asynchronous: devices work while the host folds
        item = dispatch(ids[i:i + width], out.active, -(-(len(ids) - i) // width))
        if pending is not None:
            fold(pending)
        pending = item
    if pending is not None and out.active:
        fold(pending)
    notice.done()
    prog.close(done)
    out.steady_draws, out.steady_seconds = clock.steady_draws, clock.steady_seconds
    if distributed:
        out.stats = [{d: allreduce_stats(st[d]) for d in DIRECTIONS} for st in out.stats]
    return out
