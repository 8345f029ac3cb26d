r"""The exact merge of statistics files (``mcacct merge``): shard files of one plan, or merged files, added chunk range
by chunk range.

A plan's chunks are split into contiguous shard ranges (:func:`mcacct.jobs.files.shard_chunk_range`), each run by
:func:`mcacct.jobs.shards.run_shard` on its own keys (chunk ``c`` drawn with ``fold_in(root, c)``). Their integer
statistics (count, fixed-point sums, histogram; :class:`mcacct.statistics.accumulators.DirectionStats`) add exactly,
so the merge of any set of files whose planned ranges do not overlap is the statistics of the union of their chunks,
whatever the order. :func:`merge` refuses files of different configurations (naming the differing field), duplicate
shards and overlapping ranges, and reports the chunks that no file covers; :func:`write_merged` writes the result
as a file that can be merged again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from mcacct.core.precision import float64
from mcacct.core.validate import check_real
from mcacct.engine.estimate import Estimate, certification_notes
from mcacct.jobs import storage
from mcacct.jobs.config import JobConfig, config_difference, describe_difference
from mcacct.jobs.files import (MERGED_NAME, SHARD_GLOB, StatsFile, atomic_write_json, file_json, load_stats_file,
                               normalise_ranges, shard_chunk_range)
from mcacct.statistics.accumulators import DirectionStats

__all__ = ["MergeResult", "find_stats_files", "merge", "write_merged"]


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

