r"""Independent shard jobs with exact merging, for clusters without a shared JAX runtime.

A *plan* is a :class:`JobConfig`: scheme, strategy, sigma, epsilons, samples per direction, chunk size, seed,
EVR candidate, directions, histogram binning and kernel dtype. Its chunks (``ceil(num_samples /
chunk_size)``, chunk ``c`` drawn with ``fold_in(root, c)`` for both directions on shared draws by
:func:`mcacct.engine.runner.run_ladder`, exactly as :func:`mcacct.engine.estimate.estimate`; root the seed's key or
:func:`mcacct.evr.calibrate.candidate_key` of it) are split into ``num_shards`` contiguous ranges;
:func:`run_shard` computes one range and :func:`merge` (:mod:`mcacct.jobs.merge`, re-exported here) adds shards
exactly.

Files (JSON; Python integers are arbitrary precision, so the fixed-point sums are stored exactly)::

    DIR/shard-00002-of-00008.json   one shard: config, fingerprint, per direction its planned chunk range,
                                    the chunks done so far, count, fixed-point sums and the sparse histogram
    DIR/merged.json                 written by ``mcacct merge --out DIR``: same layout, ``kind = "merged"``

``DIR`` is a local path or a URL of an object store (``gs://``, ``s3://``, ... through fsspec). Every write is whole
and atomic (:mod:`mcacct.jobs.storage`: a temporary file, fsync and :func:`os.replace` on a local path, one
whole-object upload on an object store), so a file is always either the previous or the next complete state. A
shard writes its file after every group of chunks (one chunk per device); a killed shard restarted with the same
arguments resumes after its last recorded chunk: chunks are deterministic in their key, so nothing is lost and
nothing is counted twice.
"""

from __future__ import annotations

import json
import re
import time

import jax
import numpy as np

from mcacct.core.validate import check_int, check_real
from mcacct.engine.runner import run_ladder
from mcacct.statistics.accumulators import DIRECTIONS, DirectionStats
from mcacct.jobs import storage
from mcacct.jobs.problem_file import KERNEL_VERSION, check_format
from mcacct.core.precision import float64
from mcacct.jobs.config import (CANDIDATE_MAX, FORMAT, SEED_MAX, JobConfig, config_difference, config_fingerprint,
                                describe_difference)
from mcacct.jobs.files import (MERGED_NAME, SHARD_GLOB, STALE_TMP_SECONDS, StatsFile, atomic_write_json, file_json,
                               load_stats_file, shard_chunk_range, shard_filename, stats_from_json, stats_to_json)
from mcacct.jobs.merge import MergeResult, find_stats_files, merge, write_merged

__all__ = ["FORMAT", "JobConfig", "StatsFile", "MergeResult", "config_difference", "shard_chunk_range",
           "shard_filename", "run_shard", "load_stats_file", "find_stats_files", "merge", "write_merged",
           "atomic_write_json", "stats_to_json", "stats_from_json", "config_fingerprint", "KERNEL_VERSION",
           "SEED_MAX", "CANDIDATE_MAX", "MERGED_NAME", "STALE_TMP_SECONDS"]


@float64
def run_shard(config: JobConfig, shard: int, num_shards: int, out_dir: str, progress: bool = False,
              checkpoint_seconds: float = 0.0, mesh=None, max_chunks: int | None = None) -> dict:
    """Run (or resume) shard ``shard`` of ``num_shards`` of ``config`` and write ``out_dir/shard-...json``.

    Parameters
    ----------
    config:
        The plan.
    shard, num_shards:
        This shard takes the contiguous chunk range :func:`shard_chunk_range` of every direction.
    out_dir:
        Directory of the shard file (created if needed): a local path or a URL of an object store
        (:mod:`mcacct.jobs.storage`). An existing file for the same shard is resumed
        when its fingerprint matches, and refused otherwise. Shard files of the directory belong to one plan
        and one split: a file of another configuration or of another ``num_shards`` there is refused (merging
        the directory would fail on it), before anything is written.
    progress:
        Samples, rate and ETA on stderr.
    checkpoint_seconds:
        Minimum seconds between checkpoints (``0``: after every group of chunks, i.e. every chunk on one
        device). The file is always written when a direction finishes.
    mesh:
        Device mesh for :func:`mcacct.engine.runner.run_ladder` (default all local devices).
    max_chunks:
        Stop after this many new chunks (the shard stays resumable), e.g. to split a long shard over
        time-limited jobs.

    Returns
    -------
    dict
        Summary: path, shard, ranges, samples computed now and in all, seconds, samples per second, complete.
    """
    k = check_int("num_shards", num_shards, low=1)
    if k > config.num_chunks:  # a shard without a chunk would plan nothing: refused rather than defined
        raise ValueError(f"num_shards must be in [1, chunks={config.num_chunks}]; got {k} (the plan has "
                         f"{config.num_chunks} chunk(s) of {config.chunk_size} samples)")
    i = check_int("shard", shard, low=0, high=k - 1)
    checkpoint_seconds = check_real("checkpoint_seconds", checkpoint_seconds, low=0.0)
    if max_chunks is not None:
        max_chunks = check_int("max_chunks", max_chunks, low=1)
    _check_out_dir(out_dir, config, k)
    path = storage.join(out_dir, shard_filename(i, k))
    a, b = shard_chunk_range(config.num_chunks, i, k)
    planned = {d: [(a, b)] for d in config.directions}
    done = {d: [(a, a)] for d in config.directions}
    stats = {d: DirectionStats(config.epsilons, config.spec) for d in config.directions}
    seconds_before = 0.0
    resumed = 0
    if storage.exists(path):
        old = load_stats_file(path)
        if old.fingerprint != config.fingerprint():
            diff = config_difference(old.config, config.to_dict())
            raise ValueError(f"out {path} already holds this shard for another configuration: "
                             + describe_difference(diff, "the file", "this run") + "; use another --out")
        if old.planned != planned:
            raise ValueError(f"out {path} plans chunks {old.planned} but this shard plans {planned}")
        done = {d: [tuple(r) for r in old.done[d]] for d in config.directions}
        for d in config.directions:
            if len(done[d]) != 1 or done[d][0][0] != a or not a <= done[d][0][1] <= b:
                raise ValueError(f"out {path}: done chunks {done[d]} of direction {d} are not a prefix of "
                                 f"the shard's range [{a}, {b})")
        stats = old.stats
        seconds_before = old.seconds
        resumed = sum(s.count for s in stats.values())
    summary_base = {"path": path, "shard": i, "num_shards": k, "fingerprint": config.fingerprint(),
                    "chunks": [a, b]}
    if resumed and all(done[d] == planned[d] for d in config.directions):
        return {**summary_base, "done": {d: [list(r) for r in done[d]] for d in config.directions},
                "samples_resumed": resumed, "samples_computed": 0, "samples_total": resumed, "complete": True,
                "seconds": 0.0, "samples_per_second": 0.0}
    root = config.root_key()
    key_data = {d: np.asarray(jax.random.key_data(root)).astype(np.uint32).tolist() for d in config.directions}
    t0 = time.perf_counter()
    last_write = [time.perf_counter()]

    def write(force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - last_write[0] < checkpoint_seconds:
            return
        atomic_write_json(path, file_json("shard", config, planned, done, stats, i, k,
                                           seconds_before + (now - t0), key_data=key_data))
        last_write[0] = now

    # both directions advance together on shared draws (mcacct.engine.runner): chunk c of the plan is keyed
    # fold_in(root, c) for both, exactly as `mcacct delta` with the same seed
    starts = {done[d][0][1] for d in config.directions}
    if len(starts) != 1:
        raise ValueError(f"out {path}: directions have done different chunk ranges {done}; rerun the shard")
    start = starts.pop()
    write(force=True)  # the plan is on disk before any work (merge can report it as incomplete)
    stop = b if max_chunks is None else min(b, start + max_chunks)
    if stop > start:
        full = {d: stats[d] if d in stats else DirectionStats(config.epsilons, config.spec) for d in DIRECTIONS}

        def on_group(ids: list[int], run) -> None:
            for d in config.directions:
                done[d] = [(a, ids[-1] + 1)]
            write()

        run = run_ladder(config.problem, [config.sigma], root, config.num_samples, config.epsilons,
                         config.chunk_size, config.spec, mesh=mesh, chunk_ids=range(start, stop),
                         distributed=False, progress=progress, label=f"shard {i}/{k} sigma={config.sigma:.6g}",
                         stats=[full], on_group=on_group)
        if run.errors:
            raise FloatingPointError(run.errors[0])
        write(force=True)
    seconds = time.perf_counter() - t0
    now_samples = sum(s.count for s in stats.values()) - resumed
    return {**summary_base, "done": {d: [list(r) for r in done[d]] for d in config.directions},
            "samples_resumed": resumed, "samples_computed": now_samples,
            "samples_total": sum(s.count for s in stats.values()),
            "complete": all(done[d] == planned[d] for d in config.directions),
            "seconds": seconds, "samples_per_second": now_samples / seconds if seconds > 0 else 0.0}


_SHARD_NAME = re.compile(r"shard-(\d+)-of-(\d+)\.json")
_HEAD_FIELD = re.compile(r'"(format|fingerprint)":"([^"\\]*)"')


def _file_head(path: str, whole: bool = False) -> dict | None:
    """``format`` and ``fingerprint`` of a statistics file, read from its first kilobytes (they are written
    first) without parsing the histogram; the whole file when ``whole`` or when they are not there. ``None``
    when unreadable."""
    try:
        if not whole:
            head = storage.read_bytes(path, 4096).decode("utf-8", "replace")
            found: dict[str, str] = {}
            for k, v in _HEAD_FIELD.findall(head):
                found.setdefault(k, v)  # the top-level fields come first
            if "format" in found and ("fingerprint" in found or found["format"] != FORMAT):
                return found
        d = json.loads(storage.read_bytes(path))
    except (OSError, ValueError, RecursionError):
        return None
    return d if isinstance(d, dict) else {"format": None}


def _check_out_dir(out_dir: str, config: JobConfig, num_shards: int) -> None:
    """Refuse ``out_dir`` when it is not a directory, holds a calibration plan, or holds shard files of another
    kind, of another configuration or of another split than ``num_shards`` (merging the directory would then
    fail). Files that cannot be read are left to :func:`merge` to name."""
    storage.check_url(out_dir, write=True)
    if storage.exists(out_dir) and not storage.isdir(out_dir):
        raise ValueError(f"out {out_dir} is not a directory")
    if storage.exists(storage.join(out_dir, "plan.json")):
        raise ValueError(f"out {out_dir} holds a calibration plan (plan.json): run its shards with "
                         f"`mcacct sample --plan {out_dir}`, or use another --out")
    fp, cfg = config.fingerprint(), None
    for name in storage.list_names(out_dir, SHARD_GLOB):
        m = _SHARD_NAME.fullmatch(name)
        if m is None:
            continue
        d = _file_head(storage.join(out_dir, name))
        if d is None:
            continue
        try:
            check_format(d.get("format"), FORMAT, f"out {out_dir} holds {name}, which is not an mcacct statistics "
                                                  "file")
        except ValueError as err:
            raise ValueError(f"{err}; use another --out") from None
        if d.get("fingerprint") != fp:
            full = _file_head(storage.join(out_dir, name), whole=True) or {}
            other_cfg = full.get("config")
            cfg = config.to_dict() if cfg is None else cfg
            diff = config_difference(other_cfg, cfg) if isinstance(other_cfg, dict) else []
            why = describe_difference(diff, name, "this run") if diff else "another fingerprint"
            raise ValueError(f"out {out_dir} already holds shards of another configuration: {why}; a directory "
                             "holds the shards of one plan (use another --out)")
        other_k = int(m.group(2))
        if other_k != num_shards:
            raise ValueError(f"out {out_dir} already holds shards of a split into {other_k} "
                             f"({name}); this shard is of a split into {num_shards}: use "
                             f"--num-shards {other_k} there, or another --out for the other split")
