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
from dataclasses import dataclass, field
from typing import Any, Sequence

import jax
import numpy as np

from mcacct.core.validate import check_int, check_real
from mcacct.engine.problem import DEFAULT_CHUNK_SIZE, Problem
from mcacct.engine.estimate import Estimate, certification_notes
from mcacct.evr.calibrate import candidate_key
from mcacct.engine.runner import run_ladder
from mcacct.core.validate import check_sigma_range
from mcacct.statistics.accumulators import DIRECTIONS, DirectionStats, HistogramSpec
from mcacct.jobs import integrity, storage
from mcacct.jobs.problem_file import (KERNEL_VERSION, check_format, fingerprint, problem_from_dict, problem_to_dict,
                                      scheme_to_dict)
from mcacct.core.precision import float64

__all__ = ["FORMAT", "JobConfig", "StatsFile", "MergeResult", "config_difference", "shard_chunk_range",
           "shard_filename", "run_shard", "load_stats_file", "find_stats_files", "merge", "write_merged",
           "atomic_write_json", "stats_to_json", "stats_from_json", "config_fingerprint", "KERNEL_VERSION",
           "SEED_MAX", "CANDIDATE_MAX"]

#: The format of statistics files. Version 4: the scheme is named by its registry name (was its class name).
#: Version 3: every file carries the digest (and, with a key, the MAC) of :mod:`mcacct.jobs.integrity`. Version 2 stored the problem by :mod:`mcacct.jobs.problem_file` (cyclic Poisson's
#: and balls-in-bins' ``min_sep`` became ``cycle_length``). Files of earlier versions are refused, naming both
#: versions.
FORMAT = "mcacct-stats/4"
MERGED_NAME = "merged.json"
#: The largest root seed (``jax.random.key`` takes a signed 64-bit integer) and EVR candidate index
#: (``jax.random.fold_in`` takes a uint32).
SEED_MAX = 2**63 - 1
CANDIDATE_MAX = 2**32 - 1
_SHARD_GLOB = "shard-*-of-*.json"


# -- configuration (the problem is stored by mcacct.jobs.problem_file) -----------------------------------
@dataclass(frozen=True)
class JobConfig:
    """Everything that determines the statistics of a sharded run (and hence its fingerprint).

    Parameters
    ----------
    problem:
        Scheme (any registered in :mod:`mcacct.schemes.registry`), strategy, kernel dtype, dot-product method
        and recursion.
    sigma:
        Noise multiplier ``> 0``.
    epsilons:
        Epsilons ``>= 0`` at which the fixed-point sums are kept.
    num_samples:
        Samples per direction of the whole plan (all shards together), ``>= 1``.
    chunk_size:
        Samples per chunk, ``>= 1``.
    seed:
        Root seed (``jax.random.key(seed)``), in ``[0, 2**63 - 1]``.
    candidate:
        EVR ladder candidate in ``[0, 2**32 - 1]``: keys from :func:`mcacct.evr.calibrate.candidate_key`
        (``None``: the root key, as in ``mcacct delta``).
    directions:
        ``('remove', 'add')`` by default.
    spec:
        Histogram binning.
    """

    problem: Problem
    sigma: float
    epsilons: tuple[float, ...]
    num_samples: int
    chunk_size: int = DEFAULT_CHUNK_SIZE
    seed: int = 0
    candidate: int | None = None
    directions: tuple[str, ...] = DIRECTIONS
    spec: HistogramSpec = HistogramSpec()

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_sigma_range("sigma", self.sigma))  # before any file is written
        eps = tuple(check_real("epsilon", e, low=0.0) for e in np.atleast_1d(self.epsilons))
        if not eps:
            raise ValueError("epsilon must be given at least once")
        object.__setattr__(self, "epsilons", eps)
        object.__setattr__(self, "num_samples", check_int("num_samples", self.num_samples, low=1))
        object.__setattr__(self, "chunk_size", check_int("chunk_size", self.chunk_size, low=1))
        object.__setattr__(self, "seed", check_int("seed", self.seed, low=0, high=SEED_MAX))
        if self.candidate is not None:  # jax.random.fold_in takes a uint32
            object.__setattr__(self, "candidate", check_int("candidate", self.candidate, low=0, high=CANDIDATE_MAX))
        dirs = tuple(self.directions)
        if not dirs or any(d not in DIRECTIONS for d in dirs) or len(set(dirs)) != len(dirs):
            raise ValueError(f"directions must be distinct entries of {DIRECTIONS}; got {dirs}")
        object.__setattr__(self, "directions", dirs)
        if self.num_chunks >= 2**31:
            raise ValueError(f"num_samples / chunk_size must be < 2**31 chunks; got {self.num_chunks}")
        scheme_to_dict(self.problem.scheme)  # refuse a scheme that a job file cannot describe, now

    @property
    def num_chunks(self) -> int:
        """Chunks per direction of the whole plan."""
        return -(-self.num_samples // self.chunk_size)

    def root_key(self) -> jax.Array:
        """``jax.random.key(seed)``, or the key of EVR candidate ``candidate``."""
        root = jax.random.key(self.seed)
        return root if self.candidate is None else candidate_key(root, self.candidate)

    def to_dict(self) -> dict:
        """Canonical JSON-able description (the fingerprint hashes exactly this): the problem's fields
        (:func:`mcacct.jobs.problem_file.problem_to_dict`: the scheme's class name and every dataclass field, the
        strategy, kernel dtype, dot method, recursion, the kernel identity :data:`KERNEL_VERSION` and the
        random-number generator) and the run parameters."""
        return {**problem_to_dict(self.problem),
                "sigma": self.sigma, "epsilons": list(self.epsilons), "num_samples": self.num_samples,
                "chunk_size": self.chunk_size, "seed": self.seed, "candidate": self.candidate,
                "directions": list(self.directions),
                "histogram": {"width": self.spec.width, "bins": self.spec.bins}}

    @classmethod
    def from_dict(cls, d: dict) -> "JobConfig":
        """Inverse of :meth:`to_dict`. Refuses a config of another kernel (:data:`KERNEL_VERSION`) or random-number
        generator."""
        try:
            problem = problem_from_dict(d, "config")
            spec = HistogramSpec(float(d["histogram"]["width"]), int(d["histogram"]["bins"]))
            return cls(problem, d["sigma"], tuple(d["epsilons"]), d["num_samples"], d["chunk_size"], d["seed"],
                       d["candidate"], tuple(d["directions"]), spec)
        except (KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"config is missing or has a malformed field: {err!r}") from err

    def fingerprint(self) -> str:
        """:func:`config_fingerprint` of :meth:`to_dict`."""
        return config_fingerprint(self.to_dict())


def config_fingerprint(cfg: dict) -> str:
    """The fingerprint of a statistics file with config ``cfg`` (:func:`mcacct.jobs.problem_file.fingerprint`
    of :data:`FORMAT` and ``cfg``)."""
    return fingerprint(FORMAT, cfg)


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k in sorted(d):
            out.update(_flatten(d[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def config_difference(a: dict, b: dict) -> list[tuple[str, Any, Any]]:
    """Fields (dotted names, e.g. ``sigma`` or ``scheme.min_sep``) where two config dicts differ."""
    fa, fb = _flatten(a), _flatten(b)
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]


def _describe_difference(diff: list[tuple[str, Any, Any]], where_a: str, where_b: str) -> str:
    parts = [f"{k} differs ({va!r} in {where_a}, {vb!r} in {where_b})" for k, va, vb in diff[:4]]
    more = f" and {len(diff) - 4} more field(s)" if len(diff) > 4 else ""
    return "; ".join(parts) + more


# -- plans -------------------------------------------------------------------------------------------------
def shard_chunk_range(num_chunks: int, shard: int, num_shards: int) -> tuple[int, int]:
    """Contiguous chunk range ``[start, stop)`` of shard ``shard`` of ``num_shards`` (sizes differ by <= 1)."""
    n = check_int("num_chunks", num_chunks, low=0)
    k = check_int("num_shards", num_shards, low=1)
    i = check_int("shard", shard, low=0, high=k - 1)
    return i * n // k, (i + 1) * n // k


def shard_filename(shard: int, num_shards: int) -> str:
    """``shard-{shard:05d}-of-{num_shards:05d}.json``."""
    return f"shard-{shard:05d}-of-{num_shards:05d}.json"


# -- (de)serialisation -------------------------------------------------------------------------------------
def stats_to_json(stats: DirectionStats) -> dict:
    """Exact JSON form: integer count and sums, histogram as sparse (index, count) lists."""
    nz = np.flatnonzero(stats.hist)
    return {"count": int(stats.count), "sums": [int(v) for v in stats.sums],
            "hist": {"size": int(stats.hist.shape[0]), "index": nz.tolist(),
                     "count": stats.hist[nz].astype(np.int64).tolist()}}


def _int_list(v: Any, what: str) -> list[int]:
    if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
        raise ValueError(f"{what} must be a list of integers")
    return v


def stats_from_json(d: dict, epsilons: Sequence[float], spec: HistogramSpec, where: str = "statistics") -> DirectionStats:
    """Inverse of :func:`stats_to_json`, refusing statistics that no run can produce: histogram indices not
    sorted, repeated or out of range, zero or negative sparse counts, a histogram total other than ``count``, and
    sums outside what the histogram allows (:func:`mcacct.jobs.integrity.check_statistics`). ``where`` names the
    file and direction in messages."""
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
        return all(_normalise(self.done[d]) == _normalise(self.planned[d]) for d in self.planned)


def _normalise(ranges) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted((int(a), int(b)) for a, b in ranges if int(b) > int(a)):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _file_json(kind: str, cfg: JobConfig | dict, planned, done, stats, shard=None, num_shards=None,
               seconds: float = 0.0, sources=None, key_data=None) -> dict:
    cfg_d = cfg.to_dict() if isinstance(cfg, JobConfig) else cfg
    dirs = {}
    for d in cfg_d["directions"]:
        entry = {"planned": [list(r) for r in planned[d]], "done": [list(r) for r in done[d]],
                 **stats_to_json(stats[d])}
        if key_data is not None:
            entry["direction_key"] = key_data[d]
        dirs[d] = entry
    complete = all(_normalise(done[d]) == _normalise(planned[d]) for d in cfg_d["directions"])
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
            expect = sum(_range_samples(cfg, a, b) for a, b in _normalise(done[dname]))
            if stats[dname].count != expect:
                raise ValueError(f"{path}: direction {dname} counts {stats[dname].count} samples but its "
                                 f"done chunks hold {expect}")
        sh = d.get("shard") or {}
        return StatsFile(path, d["kind"], cfg_d, d["fingerprint"], sh.get("index"), sh.get("num_shards"),
                         planned, done, stats, float(d.get("seconds", 0.0)), d.get("sources", []), level)
    except (KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: malformed statistics file ({err!r})") from err


def _range_samples(cfg: JobConfig, a: int, b: int) -> int:
    if b <= a:
        return 0
    return min(b * cfg.chunk_size, cfg.num_samples) - a * cfg.chunk_size


# -- running a shard ---------------------------------------------------------------------------------------
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
                             + _describe_difference(diff, "the file", "this run") + "; use another --out")
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
        atomic_write_json(path, _file_json("shard", config, planned, done, stats, i, k,
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
    for name in storage.list_names(out_dir, _SHARD_GLOB):
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
            why = _describe_difference(diff, name, "this run") if diff else "another fingerprint"
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
            files = [storage.join(p, n) for n in storage.list_names(p, _SHARD_GLOB)]
            if not files and storage.exists(storage.join(p, MERGED_NAME)):
                files = [storage.join(p, MERGED_NAME)]
            if not files:
                raise ValueError(f"dirs: no statistics files ({_SHARD_GLOB} or {MERGED_NAME}) in {p}")
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
        return not any(self.missing_chunks.values())

    @property
    def integrity(self) -> str:
        """``"mac"`` when every file's MAC was checked under :data:`mcacct.jobs.integrity.KEY_ENV`, else
        ``"digest"`` (:func:`mcacct.jobs.integrity.verify`)."""
        return "mac" if all(f.integrity == "mac" for f in self.files) else "digest"

    def estimate(self, alpha: float = 0.01) -> Estimate:
        """An :class:`~mcacct.engine.estimate.Estimate` over the merged statistics."""
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
        mechanism."""
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
                             + _describe_difference(diff, ref.path, f.path))
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
        spans = sorted((a, b, f.path) for f in files for a, b in _normalise(f.planned[d]))
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
        covered = _normalise([r for f in files for r in f.done[d]])
        gaps, pos = [], 0
        for a, b in covered + [(config.num_chunks, config.num_chunks)]:
            if a > pos:
                gaps.append((pos, a))
            pos = max(pos, b)
        missing_chunks[d] = gaps
    missing_shards = []
    planned_cover = {d: _normalise([r for f in files for r in f.planned[d]]) for d in config.directions}
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
    can be merged again or plotted."""
    storage.check_url(out_dir, write=True)
    if storage.exists(out_dir) and not storage.isdir(out_dir):
        raise ValueError(f"out {out_dir} is not a directory")
    cfg = result.config
    done = {d: _normalise([r for f in result.files for r in f.done[d]]) for d in cfg.directions}
    planned = {d: _normalise([r for f in result.files for r in f.planned[d]]) for d in cfg.directions}
    sources = [{"path": storage.absolute(f.path), "kind": f.kind, "shard": f.shard, "num_shards": f.num_shards}
               for f in result.files]
    path = storage.join(out_dir, MERGED_NAME)
    atomic_write_json(path, _file_json("merged", cfg, planned, done, result.stats, seconds=result.seconds,
                                       sources=sources))
    return path
