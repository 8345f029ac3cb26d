r"""Statistics files of shard jobs: their names, the chunk range of a shard, the JSON form of statistics (fixed-point
sums stored exactly as Python integers, sparse histograms), and reading a file back with every check
(:func:`load_stats_file`: format, digest or MAC, fingerprint, consistency of the statistics)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from mcacct.core.validate import check_int
from mcacct.statistics.accumulators import DirectionStats, HistogramSpec
from mcacct.jobs import integrity, storage
from mcacct.jobs.problem_file import check_format
from mcacct.jobs.config import FORMAT, JobConfig, config_fingerprint

__all__ = ["MERGED_NAME", "SHARD_GLOB", "shard_chunk_range", "shard_filename", "stats_to_json", "stats_from_json",
           "StatsFile", "load_stats_file", "atomic_write_json", "STALE_TMP_SECONDS", "normalise_ranges", "file_json",
           "range_samples"]

MERGED_NAME = "merged.json"
SHARD_GLOB = "shard-*-of-*.json"


def shard_chunk_range(num_chunks: int, shard: int, num_shards: int) -> tuple[int, int]:
    """Contiguous chunk range ``[start, stop)`` of shard ``shard`` of ``num_shards`` (sizes differ by <= 1).

    Parameters
    ----------
    num_chunks : int
        Total number of chunks, ``>= 0``.
    shard : int
        Shard index in ``[0, num_shards - 1]``.
    num_shards : int
        Number of shards, ``>= 1``.

    Returns
    -------
    tuple of (int, int)
        ``(start, stop)``.

    Raises
    ------
    ValueError
        If an argument is out of range.
    """
    n = check_int("num_chunks", num_chunks, low=0)
    k = check_int("num_shards", num_shards, low=1)
    i = check_int("shard", shard, low=0, high=k - 1)
    return i * n // k, (i + 1) * n // k


def shard_filename(shard: int, num_shards: int) -> str:
    """The file name of a shard: ``shard-{shard:05d}-of-{num_shards:05d}.json``.

    Parameters
    ----------
    shard : int
        Shard index.
    num_shards : int
        Number of shards.

    Returns
    -------
    str
        The file name.
    """
    return f"shard-{shard:05d}-of-{num_shards:05d}.json"


# -- (de)serialisation -------------------------------------------------------------------------------------
def stats_to_json(stats: DirectionStats) -> dict:
    """Exact JSON form of statistics: integer count and sums, histogram as sparse (index, count) lists.

    Parameters
    ----------
    stats : DirectionStats
        The statistics of one direction.

    Returns
    -------
    dict
        ``{"count": ..., "sums": [...], "hist": {"size": ..., "index": [...], "count": [...]}}``.
    """
    nz = np.flatnonzero(stats.hist)
    return {"count": int(stats.count), "sums": [int(v) for v in stats.sums],
            "hist": {"size": int(stats.hist.shape[0]), "index": nz.tolist(),
                     "count": stats.hist[nz].astype(np.int64).tolist()}}


def _int_list(v: Any, what: str) -> list[int]:
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise ValueError(f"{what} must be a list of integers")
    return v


def stats_from_json(d: dict, epsilons: Sequence[float], spec: HistogramSpec, where: str = "statistics") -> DirectionStats:
    """Inverse of :func:`stats_to_json`, refusing statistics that no run can produce.

    Refused: histogram indices not sorted, repeated or out of range, zero or negative sparse counts, a histogram
    total other than ``count``, and sums outside what the histogram allows
    (:func:`mcacct.jobs.integrity.check_statistics`).

    Parameters
    ----------
    d : dict
        The JSON form.
    epsilons : sequence of float
        The configured epsilons (one sum each).
    spec : HistogramSpec
        The configured histogram.
    where : str, default "statistics"
        Names the file and direction in messages.

    Returns
    -------
    DirectionStats
        The statistics.

    Raises
    ------
    ValueError
        For the cases above, or statistics that do not match ``spec`` or ``epsilons``.
    """
    size = spec.bins + 2
    h = d["hist"]
    sums = _int_list(d["sums"], f"{where}: sums")
    count = d["count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"{where}: count must be a non-negative integer; got {count!r}")
    if int(h["size"]) != size or len(sums) != len(epsilons):
        raise ValueError(f"{where}: statistics do not match the configured histogram or epsilons")
    idx = np.asarray(_int_list(h["index"], f"{where}: histogram index"), np.int64)
    cnt = np.asarray(_int_list(h["count"], f"{where}: histogram count"), np.int64)
    if idx.shape != cnt.shape:
        raise ValueError(f"{where}: histogram index and count lists differ in length")
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise ValueError(f"{where}: histogram index out of range [0, {size})")
    if np.any(np.diff(idx) <= 0):
        raise ValueError(f"{where}: histogram indices must be sorted and unique (file edited or corrupt)")
    if np.any(cnt <= 0):
        raise ValueError(f"{where}: sparse histogram counts must be positive (file edited or corrupt)")
    hist = np.zeros(size, np.int64)
    hist[idx] = cnt
    integrity.check_statistics(count, sums, hist, epsilons, spec.width, spec.bins, where)
    return DirectionStats(tuple(epsilons), spec, count, list(sums), hist)


#: The writer of every job file (kept under this name for callers of earlier versions): whole and atomic, on a local
#: path or an object store (:func:`mcacct.jobs.storage.write_json`).
atomic_write_json = storage.write_json
#: A temporary file of a local write older than this (seconds) was left by a killed writer
#: (:data:`mcacct.jobs.storage.STALE_TMP_SECONDS`).
STALE_TMP_SECONDS = storage.STALE_TMP_SECONDS


@dataclass
class StatsFile:
    """A shard or merged statistics file, loaded and validated.

    ``done[d]`` lists the chunk ranges ``[a, b)`` of direction ``d`` whose samples are in ``stats[d]``;
    ``planned[d]`` the ranges the file is responsible for (equal to ``done`` once complete).
    """

    path: str
    kind: str
    config: dict
    fingerprint: str
    shard: int | None
    num_shards: int | None
    planned: dict[str, list[tuple[int, int]]]
    done: dict[str, list[tuple[int, int]]]
    stats: dict[str, DirectionStats]
    seconds: float = 0.0
    sources: list = field(default_factory=list)
    integrity: str = "digest"

    @property
    def complete(self) -> bool:
        """Whether every planned chunk range is done.

        Returns
        -------
        bool
            ``True`` when ``done`` covers ``planned`` in every direction.
        """
        return all(normalise_ranges(self.done[d]) == normalise_ranges(self.planned[d]) for d in self.planned)


def normalise_ranges(ranges) -> list[tuple[int, int]]:
    """Chunk ranges sorted, with empty ones dropped and overlapping or adjacent ones merged.

    Parameters
    ----------
    ranges : iterable of (int, int)
        Half-open ranges ``[a, b)``.

    Returns
    -------
    list of tuple of (int, int)
        The normalised ranges.
    """
    out: list[tuple[int, int]] = []
    for a, b in sorted((int(a), int(b)) for a, b in ranges if int(b) > int(a)):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def file_json(kind: str, cfg: JobConfig | dict, planned, done, stats, shard=None, num_shards=None,
               seconds: float = 0.0, sources=None, key_data=None) -> dict:
    """The sealed JSON document of a shard or merged statistics file.

    Parameters
    ----------
    kind : str
        ``"shard"`` or ``"merged"``.
    cfg : JobConfig or dict
        The job configuration.
    planned, done : dict
        Chunk ranges per direction: those the file is responsible for, and those whose samples are in ``stats``.
    stats : dict of str to DirectionStats
        Statistics per direction.
    shard, num_shards : int, optional
        Shard index and count (recorded for ``kind="shard"``).
    seconds : float, default 0.0
        Wall-clock seconds of the work the file records.
    sources : list, optional
        The files merged into this one.
    key_data : dict, optional
        Per-direction key data, recorded as ``direction_key``.

    Returns
    -------
    dict
        The document, with its digest or MAC (:func:`mcacct.jobs.integrity.seal`).
    """
    cfg_d = cfg.to_dict() if isinstance(cfg, JobConfig) else cfg
    dirs = {}
    for d in cfg_d["directions"]:
        entry = {"planned": [list(r) for r in planned[d]], "done": [list(r) for r in done[d]],
                 **stats_to_json(stats[d])}
        if key_data is not None:
            entry["direction_key"] = key_data[d]
        dirs[d] = entry
    complete = all(normalise_ranges(done[d]) == normalise_ranges(planned[d]) for d in cfg_d["directions"])
    out = {"format": FORMAT, "kind": kind, "fingerprint": config_fingerprint(cfg_d), "config": cfg_d,
           "complete": complete, "directions": dirs, "seconds": seconds}
    if kind == "shard":
        out["shard"] = {"index": shard, "num_shards": num_shards}
    if sources is not None:
        out["sources"] = sources
    out["written"] = time.time()
    return integrity.seal(out)


def load_stats_file(path: str) -> StatsFile:
    """Read and validate one statistics file (shard or merged).

    Parameters
    ----------
    path : str
        A local path or a URL.

    Returns
    -------
    StatsFile
        The loaded file.

    Raises
    ------
    ValueError
        If the file is unreadable, of another format, carries no digest or one (or, with
        :data:`mcacct.jobs.integrity.KEY_ENV` set, a MAC) that does not match its content, its fingerprint does
        not match its config, or its statistics are inconsistent (:func:`stats_from_json`).
    """
    d = storage.read_json(path, "statistics file")
    check_format(d.get("format") if isinstance(d, dict) else None, FORMAT, f"{path} is not an mcacct statistics file")
    level = integrity.verify(d, path)
    try:
        cfg_d = d["config"]
        try:
            cfg = JobConfig.from_dict(cfg_d)
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err
        if config_fingerprint(cfg_d) != d["fingerprint"] or cfg.to_dict() != cfg_d:
            raise ValueError(f"{path}: fingerprint does not match its config (file edited or corrupt)")
        planned, done, stats = {}, {}, {}
        for dname in cfg.directions:
            e = d["directions"][dname]
            planned[dname] = [(int(a), int(b)) for a, b in e["planned"]]
            done[dname] = [(int(a), int(b)) for a, b in e["done"]]
            for a, b in planned[dname] + done[dname]:
                if not 0 <= a <= b <= cfg.num_chunks:
                    raise ValueError(f"{path}: chunk range [{a}, {b}) outside the plan [0, {cfg.num_chunks})")
            stats[dname] = stats_from_json(e, cfg.epsilons, cfg.spec, f"{path}: direction {dname}")
            expect = sum(range_samples(cfg, a, b) for a, b in normalise_ranges(done[dname]))
            if stats[dname].count != expect:
                raise ValueError(f"{path}: direction {dname} counts {stats[dname].count} samples but its "
                                 f"done chunks hold {expect}")
        sh = d.get("shard") or {}
        return StatsFile(path, d["kind"], cfg_d, d["fingerprint"], sh.get("index"), sh.get("num_shards"),
                         planned, done, stats, float(d.get("seconds", 0.0)), d.get("sources", []), level)
    except (KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: malformed statistics file ({err!r})") from err


def range_samples(cfg: JobConfig, a: int, b: int) -> int:
    """Number of samples in the chunks ``[a, b)`` of a job.

    Parameters
    ----------
    cfg : JobConfig
        The job configuration (chunk size and total samples).
    a, b : int
        Chunk range.

    Returns
    -------
    int
        The samples, the last chunk possibly shorter; 0 for an empty range.
    """
    if b <= a:
        return 0
    return min(b * cfg.chunk_size, cfg.num_samples) - a * cfg.chunk_size


# -- running a shard ---------------------------------------------------------------------------------------
