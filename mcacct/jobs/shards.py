r"""Independent shard jobs with exact merging, for clusters without a shared JAX runtime.

A *plan* is a :class:`JobConfig`: scheme, strategy, sigma, epsilons, samples per direction, chunk size, seed,
EVR candidate, directions, histogram binning and kernel dtype. Its chunks (``ceil(num_samples /
chunk_size)``, chunk ``c`` drawn with ``fold_in(root, c)`` for both directions on shared draws by
:func:`mcacct.engine.runner.run_ladder`, exactly as :func:`mcacct.engine.estimate.estimate`; root the seed's key or
:func:`mcacct.evr.calibrate.candidate_key` of it) are split into ``num_shards`` contiguous ranges;
:func:`run_shard` computes one range and :func:`merge` adds shards exactly.

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
from dataclasses import dataclass
from typing import Sequence

import jax
import numpy as np

from mcacct.core.validate import check_int, check_real
from mcacct.engine.estimate import Estimate, certification_notes
from mcacct.engine.runner import run_ladder
from mcacct.statistics.accumulators import DIRECTIONS, DirectionStats
from mcacct.jobs import storage
from mcacct.jobs.problem_file import KERNEL_VERSION, check_format
from mcacct.core.precision import float64
from mcacct.jobs.config import (CANDIDATE_MAX, FORMAT, SEED_MAX, JobConfig, config_difference, config_fingerprint,
                                describe_difference)
from mcacct.jobs.files import (MERGED_NAME, SHARD_GLOB, STALE_TMP_SECONDS, StatsFile, atomic_write_json, file_json,
                               load_stats_file, normalise_ranges, shard_chunk_range, shard_filename, stats_from_json,
                               stats_to_json)

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


# -- merging -----------------------------------------------------------------------------------------------
def find_stats_files(paths: Sequence[str]) -> list[str]:
    """Statistics files named by ``paths`` (local paths or URLs, :mod:`mcacct.jobs.storage`): files as given; in a
    directory its ``shard-*-of-*.json``, or ``merged.json`` when it holds no shard files. Duplicate paths (same
    real path or URL) are dropped."""
    out: list[str] = []
    seen: set[str] = set()
    for p in paths:
        if storage.isdir(p):
            files = [storage.join(p, n) for n in storage.list_names(p, SHARD_GLOB)]
            if not files and storage.exists(storage.join(p, MERGED_NAME)):
                files = [storage.join(p, MERGED_NAME)]
            if not files:
                raise ValueError(f"dirs: no statistics files ({SHARD_GLOB} or {MERGED_NAME}) in {p}")
        elif storage.isfile(p):
            files = [p]
        else:
            raise ValueError(f"dirs: {p} does not exist")
        for f in files:
            r = storage.identity(f)
            if r not in seen:
                seen.add(r)
                out.append(f)
    return out


@float64
@dataclass
class MergeResult:
    """Exact merge of statistics files: one :class:`DirectionStats` per direction and the coverage report."""

    config: JobConfig
    stats: dict[str, DirectionStats]
    files: list[StatsFile]
    missing_shards: list[str]
    incomplete_shards: list[str]
    missing_chunks: dict[str, list[tuple[int, int]]]
    seconds: float

    @property
    def complete(self) -> bool:
        """No chunk of any direction is missing."""
        return not any(self.missing_chunks.values())

    @property
    def integrity(self) -> str:
        """``"mac"`` when every file's MAC was checked under :data:`mcacct.jobs.integrity.KEY_ENV`, else
        ``"digest"`` (:func:`mcacct.jobs.integrity.verify`)."""
        return "mac" if all(f.integrity == "mac" for f in self.files) else "digest"

    def estimate(self, alpha: float = 0.01) -> Estimate:
        """An :class:`~mcacct.engine.estimate.Estimate` over the merged statistics.

        Parameters
        ----------
        alpha : float
            Error probability of its confidence bounds, in ``(0, 1)`` (``ValueError`` naming ``alpha`` otherwise).
        """
        from mcacct.engine.systematic import systematic_bound  # as mcacct.engine.estimate.estimate: same bounds as `delta`
        alpha = check_real("alpha", alpha, low=0.0, high=1.0, low_open=True, high_open=True)
        problem, sigma = self.config.problem, self.config.sigma
        notes = certification_notes(problem.dtype, self.config.directions)
        est = Estimate(sigma, alpha, systematic=systematic_bound(problem, sigma).delta, certified=not notes,
                       notes=notes)
        est.stats = dict(self.stats)
        return est

    def report(self, alpha: float = 0.01) -> dict:
        """``mcacct delta``-style summary for every configured epsilon (first one also at top level).

        ``directions_run`` lists the directions sampled; ``certified`` is false, with a ``note`` saying why
        (:func:`mcacct.engine.estimate.certification_notes`), for a float32 kernel and for a run of one
        direction (``--direction add``), whose bound covers that direction only and is no certificate of the
        mechanism.

        Parameters
        ----------
        alpha : float
            As for :meth:`estimate`; the summary's ``confidence`` is ``1 - alpha``.
        """
        est = self.estimate(alpha)
        results = []
        for j, e in enumerate(self.config.epsilons):
            d = est.delta(j)
            results.append({"epsilon": e, "delta_estimate": d["delta_estimate"], "delta_upper": d["delta_upper"],
                            "directions": {k: d[k] for k in self.config.directions}})
        total = sum(s.count for s in self.stats.values())
        return {"sigma": self.config.sigma, **results[0], "confidence": 1 - alpha,
                "num_samples": est.num_samples, "results": results, "systematic_delta": est.systematic,
                "certified": est.certified, **({"note": "; ".join(est.notes)} if est.notes else {}),
                "notes": list(est.notes), "directions_run": list(self.config.directions),
                "config": self.config.to_dict(),
                "fingerprint": self.config.fingerprint(), "seed": self.config.seed,
                "candidate": self.config.candidate, "complete": self.complete, "integrity": self.integrity,
                "files": len(self.files), "missing_shards": self.missing_shards,
                "incomplete_shards": self.incomplete_shards,
                "missing_chunks": {d: [list(r) for r in v] for d, v in self.missing_chunks.items() if v},
                "shard_seconds": self.seconds,
                "samples_per_second": total / self.seconds if self.seconds > 0 else 0.0}


@float64
def merge(paths: Sequence[str], allow_partial: bool = False) -> MergeResult:
    """Combine shard (or merged) statistics files exactly.

    Parameters
    ----------
    paths:
        Directories and/or files (see :func:`find_stats_files`).
    allow_partial:
        Merge even when chunks are missing (shards absent or unfinished); they are reported.

    Raises
    ------
    ValueError
        On mixed configurations (naming the differing field, e.g. ``sigma``), duplicated shards,
        overlapping chunk/key ranges, and — unless ``allow_partial`` — missing or unfinished shards.
    """
    if isinstance(paths, str):
        paths = [paths]
    if not paths:
        raise ValueError("dirs: give at least one directory or file")
    files = [load_stats_file(p) for p in find_stats_files(paths)]
    ref = files[0]
    for f in files[1:]:
        if f.fingerprint != ref.fingerprint:
            diff = config_difference(ref.config, f.config)
            raise ValueError("cannot merge statistics of different configurations: "
                             + describe_difference(diff, ref.path, f.path))
    config = JobConfig.from_dict(ref.config)
    seen: dict[tuple[int, int], str] = {}
    for f in files:
        if f.kind == "shard":
            sk = (f.shard, f.num_shards)
            if sk in seen:
                raise ValueError(f"duplicate shard {f.shard} of {f.num_shards}: {seen[sk]} and {f.path}")
            seen[sk] = f.path
    # overlapping planned ranges (chunks = keys) between any two files
    for d in config.directions:
        spans = sorted((a, b, f.path) for f in files for a, b in normalise_ranges(f.planned[d]))
        for (a1, b1, p1), (a2, b2, p2) in zip(spans, spans[1:]):
            if a2 < b1:
                raise ValueError(f"overlapping key ranges in direction {d}: {p1} has chunks [{a1}, {b1}) "
                                 f"and {p2} has chunks [{a2}, {b2})")
    stats = {d: DirectionStats(config.epsilons, config.spec) for d in config.directions}
    for f in files:
        for d in config.directions:
            stats[d] = stats[d].merge(f.stats[d])
    missing_chunks = {}
    for d in config.directions:
        covered = normalise_ranges([r for f in files for r in f.done[d]])
        gaps, pos = [], 0
        for a, b in covered + [(config.num_chunks, config.num_chunks)]:
            if a > pos:
                gaps.append((pos, a))
            pos = max(pos, b)
        missing_chunks[d] = gaps
    missing_shards = []
    planned_cover = {d: normalise_ranges([r for f in files for r in f.planned[d]]) for d in config.directions}
    for k in sorted({f.num_shards for f in files if f.kind == "shard"}):
        have = {f.shard for f in files if f.kind == "shard" and f.num_shards == k}
        for i in range(k):
            a, b = shard_chunk_range(config.num_chunks, i, k)
            # a shard is missing when no file has it and some of its chunks are planned by no file
            if i not in have and a < b and any(_uncovered(a, b, planned_cover[d]) for d in config.directions):
                missing_shards.append(f"{i}/{k}")
    incomplete = [f"{f.shard}/{f.num_shards} ({storage.basename(f.path)})" for f in files
                  if f.kind == "shard" and not f.complete]
    res = MergeResult(config, stats, files, missing_shards, incomplete, missing_chunks,
                      sum(f.seconds for f in files))
    if not res.complete and not allow_partial:
        parts = []
        if missing_shards:
            parts.append(f"missing shards {', '.join(missing_shards)}")
        if incomplete:
            parts.append(f"unfinished shards {', '.join(incomplete)}")
        gaps = "; ".join(f"{d}: " + ", ".join(f"[{a}, {b})" for a, b in v)
                         for d, v in missing_chunks.items() if v)
        parts.append(f"chunks not covered: {gaps} of [0, {config.num_chunks})")
        raise ValueError("dirs: incomplete plan: " + "; ".join(parts)
                         + " (run or resume them, or pass --allow-partial)")
    return res


def _uncovered(a: int, b: int, cover: list[tuple[int, int]]) -> bool:
    """Whether some chunk of ``[a, b)`` lies outside the normalised ranges ``cover``."""
    pos = a
    for lo, hi in cover:
        if lo > pos:
            break
        pos = max(pos, hi)
        if pos >= b:
            return False
    return pos < b


def write_merged(result: MergeResult, out_dir: str) -> str:
    """Write ``out_dir/merged.json`` (atomically; ``out_dir`` is created if needed and must not be a file); it
    can be merged again or plotted.

    Returns
    -------
    str
        The path written; ``ValueError`` naming ``out`` when ``out_dir`` is a file or cannot be written.
    """
    storage.check_url(out_dir, write=True)
    if storage.exists(out_dir) and not storage.isdir(out_dir):
        raise ValueError(f"out {out_dir} is not a directory")
    cfg = result.config
    done = {d: normalise_ranges([r for f in result.files for r in f.done[d]]) for d in cfg.directions}
    planned = {d: normalise_ranges([r for f in result.files for r in f.planned[d]]) for d in cfg.directions}
    sources = [{"path": storage.absolute(f.path), "kind": f.kind, "shard": f.shard, "num_shards": f.num_shards}
               for f in result.files]
    path = storage.join(out_dir, MERGED_NAME)
    atomic_write_json(path, file_json("merged", cfg, planned, done, result.stats, seconds=result.seconds,
                                       sources=sources))
    return path

