r"""Calibration as shard jobs: a fixed plan, resumable shards of every candidate and direction, Alg. 5 on merge.

``mcacct calibrate ... --plan-only --out DIR`` runs the pilot (or takes ``--sigmas``) and writes ``DIR/plan.json``
(:mod:`mcacct.jobs.plan_file`, re-exported here): scheme, strategy, kernel, target, base delta, sample budget, the
sorted ladder with its systematic terms, the seed's key and the chunking — everything fixed before any verification
draw. ``mcacct sample --plan DIR --shard i
--num-shards k`` runs the contiguous chunk range ``i`` of the verification plan for every candidate and both
directions on shared draws (:func:`mcacct.engine.runner.run_ladder`, key ``verification_key(root)``, exactly the draws of
the in-process run), checkpointing atomically after every group of chunks, so a killed shard resumes without
losing or double-counting a chunk. ``mcacct calibrate --from DIR`` merges the shards exactly and applies Alg. 5
(:func:`mcacct.evr.calibrate.apply_verdicts`): the same verdicts and sigma as :func:`mcacct.evr.calibrate.calibrate`
with the same flags and seed, and bit-identical statistics for every candidate that ran to completion.

Within a shard a candidate leaves once its shard-local sum already exceeds ``base * s`` (sums only grow, so it
fails globally too), together with every candidate below it; its statistics are then incomplete, and Alg. 5
treats it as failed, as it would anyway.
"""

from __future__ import annotations

import re
import time

import jax
import numpy as np

from mcacct.core.validate import check_int, check_real
from mcacct.evr.calibrate import CalibrationPlan, CalibrationResult, verification_key
from mcacct.evr.verdicts import apply_verdicts, verdict_drop, verification_spec
from mcacct.statistics.accumulators import DIRECTIONS, DirectionStats
from mcacct.jobs import integrity, storage
from mcacct.jobs.problem_file import check_format
from mcacct.jobs.shards import shard_chunk_range, shard_filename, stats_from_json, stats_to_json
from mcacct.engine.runner import LadderStats, run_ladder
from mcacct.core.precision import float64
from mcacct.jobs.plan_file import FORMAT, PLAN_NAME, load_plan, plan_baselines, plan_fingerprint, write_plan

__all__ = ["PLAN_NAME", "FORMAT", "SHARD_FORMAT", "write_plan", "load_plan", "plan_baselines", "plan_fingerprint",
           "run_plan_shard", "calibrate_from"]

#: The format of a plan's shard files. Version 3: the scheme is named by its registry name. Version 2: digest and optional MAC (:mod:`mcacct.jobs.integrity`), and
#: statistics checked for consistency on reading.
SHARD_FORMAT = "mcacct-calibration-shard/3"


def _root_key(plan: CalibrationPlan) -> jax.Array:
    return jax.random.wrap_key_data(np.asarray(plan.seed_key_data, np.uint32))


def _num_chunks(plan: CalibrationPlan) -> int:
    return -(-plan.num_samples // plan.chunk_size)


def _shard_json(fp: str, plan: CalibrationPlan, i: int, k: int, a: int, b: int, done: int, run: LadderStats,
                seconds: float) -> dict:
    return integrity.seal({"format": SHARD_FORMAT, "plan_fingerprint": fp, "shard": {"index": i, "num_shards": k},
                           "planned": [a, b], "done": [a, done], "seconds": seconds,
                           "errors": {str(j): e for j, e in run.errors.items()},
                           "candidates": [{d: stats_to_json(st[d]) for d in DIRECTIONS} for st in run.stats]})


def _load_shard(path: str, fp: str, plan: CalibrationPlan) -> dict:
    d = storage.read_json(path, "shard file")
    check_format(d.get("format") if isinstance(d, dict) else None, SHARD_FORMAT,
                 f"{path} is not a shard file of a calibration plan")
    integrity.verify(d, path)
    if d.get("plan_fingerprint") != fp:
        raise ValueError(f"{path} is not a shard of this plan (plan fingerprint {d.get('plan_fingerprint')!r}, "
                         f"expected {fp!r})")
    spec = verification_spec()
    try:
        d["stats"] = [{dd: stats_from_json(c[dd], (plan.epsilon,), spec, f"{path}: candidate {j} direction {dd}")
                       for dd in DIRECTIONS} for j, c in enumerate(d["candidates"])]
        if len(d["stats"]) != len(plan.ladder):
            raise ValueError(f"{path} holds {len(d['stats'])} candidates, the plan {len(plan.ladder)}")
        for key in ("planned", "done"):
            if not (isinstance(d[key], list) and len(d[key]) == 2 and all(isinstance(v, int) for v in d[key])):
                raise ValueError(f"{path}: malformed {key!r} range {d[key]!r}")
        if not isinstance(d["errors"], dict) or not all(isinstance(d["shard"][f], int) for f in ("index",
                                                                                                  "num_shards")):
            raise ValueError(f"{path}: malformed shard or errors entry")
        i, k = d["shard"]["index"], d["shard"]["num_shards"]
        if not 0 <= i < k <= _num_chunks(plan) or d["planned"] != list(shard_chunk_range(_num_chunks(plan), i, k)):
            raise ValueError(f"{path}: shard {i} of {k} with planned chunks {d['planned']} is not a shard of this "
                             f"plan's {_num_chunks(plan)} chunks (file edited or corrupt)")
        lo, hi = d["done"]
        if not d["planned"][0] == lo <= hi <= d["planned"][1]:
            raise ValueError(f"{path}: done chunks {d['done']} are not a prefix of the planned {d['planned']}")
        most = max(0, min(hi * plan.chunk_size, plan.num_samples) - lo * plan.chunk_size)
        for j, st in enumerate(d["stats"]):
            for dd in DIRECTIONS:
                if st[dd].count > most:
                    raise ValueError(f"{path}: candidate {j} direction {dd} counts {st[dd].count} samples, more "
                                     f"than its done chunks hold ({most}; file edited or corrupt)")
        d["seconds"] = float(d["seconds"])
    except (KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{path}: malformed calibration shard file ({err!r})") from err
    return d


def _check_plan_dir(plan_dir: str, num_shards: int) -> None:
    """Refuse a split other than the one whose shard files ``plan_dir`` already holds (``calibrate --from``
    would refuse the mix), and a directory that job files cannot be written to atomically
    (:func:`mcacct.jobs.storage.check_url`), before anything is written."""
    storage.check_url(plan_dir, write=True)
    for name in storage.list_names(plan_dir, "shard-*-of-*.json"):
        m = re.fullmatch(r"shard-(\d+)-of-(\d+)\.json", name)
        if m is None:
            continue
        try:  # the format is written first: read the head, not the candidates' histograms
            head = storage.read_bytes(storage.join(plan_dir, name), 4096).decode("utf-8", "replace")
            found = re.search(r'"format":\s*"([^"]*)"', head)
            fmt = found.group(1) if found else None
        except OSError:
            fmt = SHARD_FORMAT  # unreadable: calibrate --from names it
        if fmt != SHARD_FORMAT:
            raise ValueError(f"plan {plan_dir} holds {name}, which is not a shard of a calibration plan (format "
                             f"{fmt!r}): keep other runs out of the plan directory")
        if int(m.group(2)) != num_shards:
            raise ValueError(f"plan {plan_dir} already holds shards of a split into {int(m.group(2))} ({name}); "
                             f"this shard is of a split into {num_shards}: use --num-shards {int(m.group(2))}")


@float64
def run_plan_shard(plan_dir: str, shard: int, num_shards: int, progress: bool = False, mesh=None,
                   max_chunks: int | None = None, checkpoint_seconds: float = 0.0) -> dict:
    r"""Run (or resume) shard ``shard`` of ``num_shards`` of the verification plan in ``plan_dir``.

    Writes ``plan_dir/shard-IIIII-of-KKKKK.json`` after every group of chunks (atomic; at most every
    ``checkpoint_seconds``, and always at the end); a file of this shard is resumed after its last recorded
    chunk. ``max_chunks`` stops after that many new chunks (still resumable). ``num_shards`` is at most the
    plan's chunk count (a shard without a chunk is refused) and must match the split of the shard files
    already in ``plan_dir``. Returns a summary (chunks, samples, seconds, complete).

    Parameters
    ----------
    plan_dir : str
        The plan directory (:func:`write_plan`).
    shard : int
        Index of this shard, in ``[0, num_shards - 1]``.
    num_shards : int
        Number of shards, in ``[1, chunks]`` with ``chunks`` the plan's :math:`\lceil s / c \rceil`.
    progress : bool
        Progress on stderr.
    mesh : optional
        Device mesh passed to :func:`mcacct.engine.runner.run_ladder` (default: all local devices).
    max_chunks : int or None
        Stop after this many new chunks, ``>= 1``.
    checkpoint_seconds : float
        Least seconds between two intermediate writes, ``>= 0``.

    Returns
    -------
    dict
        ``path``, ``shard``, ``num_shards``, ``chunks`` (the planned range ``[a, b]``), ``done`` (``[a, last + 1]``),
        ``complete``, ``seconds`` (of this call) and ``steady_draws_per_second`` (the draws per second of its
        groups after the first, read from their arrivals: what :func:`mcacct.evr.cost.probe_rate` projects;
        ``None`` with fewer than two groups).

    Raises
    ------
    ValueError
        Naming the parameter out of range, a plan or shard file that cannot be trusted (:func:`load_plan`), a
        plan directory holding shards of another split or other files named like shards, or an existing shard
        file whose planned chunks differ.
    """
    plan, problem, fp = load_plan(plan_dir)
    k = check_int("num_shards", num_shards, low=1)
    if k > _num_chunks(plan):
        raise ValueError(f"num_shards must be in [1, chunks={_num_chunks(plan)}]; got {k} (the plan has "
                         f"{_num_chunks(plan)} chunk(s) of {plan.chunk_size} samples)")
    i = check_int("shard", shard, low=0, high=k - 1)
    if max_chunks is not None:
        max_chunks = check_int("max_chunks", max_chunks, low=1)
    checkpoint_seconds = check_real("checkpoint_seconds", checkpoint_seconds, low=0.0)
    _check_plan_dir(plan_dir, k)
    a, b = shard_chunk_range(_num_chunks(plan), i, k)
    path = storage.join(plan_dir, shard_filename(i, k))
    done, seconds_before = a, 0.0
    run = LadderStats(plan.ladder, [{d: DirectionStats((plan.epsilon,), verification_spec()) for d in DIRECTIONS}
                                    for _ in plan.ladder], list(range(len(plan.ladder))))
    if storage.exists(path):
        old = _load_shard(path, fp, plan)
        if old["planned"] != [a, b] or old["done"][0] != a or not a <= old["done"][1] <= b:
            raise ValueError(f"{path} plans chunks {old['planned']} (done {old['done']}), this shard [{a}, {b})")
        done, seconds_before = old["done"][1], old["seconds"]
        run.stats = old["stats"]
        run.errors = {int(j): e for j, e in old["errors"].items()}
    drop = verdict_drop(plan)
    gone = set(drop(run)) if done > a else set()
    t0 = time.perf_counter()
    state = {"done": done, "written": t0}

    def write(r: LadderStats, force: bool = True) -> None:
        now = time.perf_counter()
        if not force and now - state["written"] < checkpoint_seconds:
            return
        storage.write_json(path, _shard_json(fp, plan, i, k, a, b, state["done"], r, seconds_before + now - t0))
        state["written"] = now

    def on_group(ids: list[int], r: LadderStats) -> None:
        state["done"] = ids[-1] + 1
        write(r, force=False)

    write(run)
    stop = b if max_chunks is None else min(b, done + max_chunks)
    active = [j for j in range(len(plan.ladder)) if j not in gone and j not in run.errors]
    if stop > done and active:
        res = run_ladder(problem, plan.ladder, verification_key(_root_key(plan)), plan.num_samples,
                         (plan.epsilon,), plan.chunk_size, verification_spec(), mesh=mesh, drop=drop,
                         chunk_ids=range(done, stop), distributed=False, progress=progress,
                         label=f"plan shard {i}/{k}", stats=run.stats, on_group=on_group,
                         active=active)
        run.errors.update(res.errors)
        state["done"] = stop
        write(run)
        if res.steady_seconds > 0:
            state["steady"] = res.steady_draws / res.steady_seconds
    elif stop > done:  # every candidate has left: the remaining chunks cannot change a verdict
        state["done"] = stop
        write(run)
    return {"path": path, "shard": i, "num_shards": k, "chunks": [a, b], "done": [a, state["done"]],
            "complete": state["done"] == b, "seconds": time.perf_counter() - t0,
            "steady_draws_per_second": state.get("steady")}


@float64
def calibrate_from(plan_dir: str) -> CalibrationResult:
    """Merge every shard of the plan in ``plan_dir`` exactly and apply Alg. 5 (the in-process verdicts).

    Parameters
    ----------
    plan_dir : str
        The plan directory with every shard file complete.

    Returns
    -------
    CalibrationResult
        As :func:`mcacct.evr.calibrate.apply_verdicts` gives it, with ``seconds`` the shards' total time and
        ``samples_used`` the draws of both directions.

    Raises
    ------
    ValueError
        When the plan or a shard file cannot be trusted, there is no shard file, shards of different splits
        are mixed, or a shard is missing or unfinished (each named).
    """
    plan, _, fp = load_plan(plan_dir)
    names = storage.list_names(plan_dir, "shard-*.json")
    if not names:
        raise ValueError(f"{plan_dir} holds no shard files; run `mcacct sample --plan {plan_dir} --shard i "
                         "--num-shards k` first")
    shards = [_load_shard(storage.join(plan_dir, n), fp, plan) for n in names]
    counts = {s["shard"]["num_shards"] for s in shards}
    if len(counts) != 1:
        raise ValueError(f"{plan_dir} mixes shards of different splits: num_shards {sorted(counts)}")
    k = counts.pop()
    have = {s["shard"]["index"]: s for s in shards}
    missing = [f"{i}/{k}" for i in range(k) if i not in have]
    unfinished = [f"{i}/{k}" for i, s in sorted(have.items()) if s["done"] != s["planned"]]
    if missing or unfinished:
        raise ValueError(f"{plan_dir}: missing shards {missing} and unfinished shards {unfinished}; run them "
                         "(a killed shard resumes where it stopped)")
    total = [{d: DirectionStats((plan.epsilon,), verification_spec()) for d in DIRECTIONS} for _ in plan.ladder]
    errors: dict[int, str] = {}
    for s in shards:
        total = [{d: t[d].merge(st[d]) for d in DIRECTIONS} for t, st in zip(total, s["stats"])]
        errors.update({int(j): e for j, e in s["errors"].items()})
    run = LadderStats(plan.ladder, total, [], _num_chunks(plan), errors)
    result = apply_verdicts(plan, run)
    result.seconds = sum(s["seconds"] for s in shards)
    result.samples_used = 2 * sum(min(s["done"][1] * plan.chunk_size, plan.num_samples)
                                  - s["done"][0] * plan.chunk_size for s in shards)
    return result
