r"""The plan file of a calibration run as shard jobs (``DIR/plan.json``): everything fixed before any verification
draw, written once by ``mcacct calibrate --plan-only --out DIR`` and read by every shard and by ``calibrate --from``.

It holds the problem (:mod:`mcacct.jobs.problem_file`), the :class:`~mcacct.evr.result.CalibrationPlan` (target,
base delta, sample budget, the sorted ladder with its systematic terms, the seed's key, the chunking), the report's
PLD baselines, a fingerprint that every shard file of the plan carries, and the seals of
:mod:`mcacct.jobs.integrity`. :mod:`mcacct.jobs.calibration` runs its shards and applies Alg. 5 to them.
"""

from __future__ import annotations

import dataclasses

from mcacct.engine.problem import Problem
from mcacct.evr.result import CalibrationPlan
from mcacct.jobs import integrity, storage
from mcacct.jobs.problem_file import check_format, fingerprint, problem_from_dict, problem_to_dict

__all__ = ["PLAN_NAME", "FORMAT", "write_plan", "load_plan", "plan_baselines", "plan_fingerprint"]

PLAN_NAME = "plan.json"
#: The format of plan files. Version 4: the scheme is named by its registry name (was its class name). Version 3:
#: the file carries the digest (and, with a key, the MAC) of
#: :mod:`mcacct.jobs.integrity`. Version 2 stored the problem by :mod:`mcacct.jobs.problem_file` (cyclic Poisson's
#: and balls-in-bins' ``min_sep`` became ``cycle_length``). Plans of earlier versions are refused, naming both
#: versions.
FORMAT = "mcacct-calibration-plan/4"


#: plan file entries outside the fingerprint: the file's format and seals, and ``baselines`` (the report's PLD
#: baselines, which the plan's content determines; sealed by ``integrity`` like every entry)
_NOT_FINGERPRINTED = ("format", "fingerprint", "integrity", "baselines")


def plan_fingerprint(d: dict) -> str:
    """The fingerprint of a plan file's dict ``d`` (without its ``fingerprint``):
    :func:`mcacct.jobs.problem_file.fingerprint` of :data:`FORMAT` and the rest of ``d`` (without its
    ``integrity`` entry, which covers the fingerprint, and the report-only ``baselines``).

    Parameters
    ----------
    d : dict
        A plan file's content; its ``format``, ``fingerprint``, ``integrity`` and ``baselines`` entries are left
        out.

    Returns
    -------
    str
        32 hexadecimal characters.
    """
    return fingerprint(FORMAT, {k: v for k, v in d.items() if k not in _NOT_FINGERPRINTED})


def _plan_dict(plan: CalibrationPlan, problem: Problem) -> dict:
    body = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(plan).items()
            if k not in ("pilot_seconds", "pilot_samples_drawn")}
    return {"format": FORMAT, **problem_to_dict(problem), "plan": body}


def write_plan(out_dir: str, plan: CalibrationPlan, problem: Problem, baselines: dict | None = None) -> str:
    """Write ``out_dir/plan.json`` (atomically; ``out_dir`` a local path or a URL of an object store,
    :mod:`mcacct.jobs.storage`); refuse to overwrite a different plan, and an ``out_dir`` that is a file.

    Writing the same plan again (same fingerprint) replaces the file with an equal one (its ``baselines`` as given
    this time).

    Parameters
    ----------
    out_dir : str
        The plan directory (created when missing).
    plan : CalibrationPlan
        The plan (its pilot's time and draws are not stored).
    problem : Problem
        The problem the plan calibrates.
    baselines : dict, optional
        The report's PLD baselines at the plan's target (:func:`mcacct.evr.calibrate.baseline_sigmas`), kept for
        ``mcacct calibrate --from`` (:func:`plan_baselines`) so that the merge step need not compute them again.
        They are report-only: not part of the fingerprint, sealed by ``integrity``. Left out when not given, or
        when an entry is not a finite JSON number.

    Returns
    -------
    str
        The path of the plan file.

    Raises
    ------
    ValueError
        Naming ``out``: the directory is a file or cannot be written, or ``plan.json`` there cannot be read as a
        plan or holds another plan.
    """
    storage.check_url(out_dir, write=True)
    if storage.exists(out_dir) and not storage.isdir(out_dir):
        raise ValueError(f"out {out_dir} is not a directory")
    path = storage.join(out_dir, PLAN_NAME)
    d = _plan_dict(plan, problem)
    d["fingerprint"] = plan_fingerprint(d)
    if storage.exists(path):
        try:
            old = storage.read_json(path, "plan")
        except ValueError as err:
            raise ValueError(f"out {path} exists and cannot be read as a plan ({err}); use another --out") from None
        if not isinstance(old, dict) or old.get("fingerprint") != d["fingerprint"]:
            raise ValueError(f"out {path} already holds another calibration plan; use another --out")
    sealed = None
    if baselines:
        try:
            sealed = integrity.seal({**d, "baselines": baselines})
        except (TypeError, ValueError):  # a non-finite or non-JSON entry: the plan goes without them
            pass
    d = sealed or integrity.seal(d)
    try:
        storage.write_json(path, d)
    except OSError as err:
        raise ValueError(f"out {out_dir}: cannot write the plan ({err})") from err
    return path


def load_plan(plan_dir: str) -> tuple[CalibrationPlan, Problem, str]:
    """``(plan, problem, fingerprint)`` from ``plan_dir/plan.json``, refusing files of another kernel.

    Parameters
    ----------
    plan_dir : str
        The plan directory (local path or object store URL).

    Returns
    -------
    plan : CalibrationPlan
    problem : Problem
    fingerprint : str
        The plan's fingerprint (:func:`plan_fingerprint`), which its shard files carry.

    Raises
    ------
    ValueError
        Naming the file: it is missing or unreadable, not a plan of :data:`FORMAT`, fails
        :func:`mcacct.jobs.integrity.verify`, its fingerprint does not match its content, it was drawn by another
        kernel or generator, or its ``plan`` entry is malformed.
    """
    d, path = _read_plan(plan_dir)
    fp = d["fingerprint"]
    problem = problem_from_dict(d, f"plan {path}", "write the plan again")
    try:
        body = dict(d["plan"])
        for k in ("ladder", "systematic", "seed_key_data"):
            body[k] = tuple(body[k])
        plan = CalibrationPlan(**body)
    except (KeyError, TypeError) as err:
        raise ValueError(f"plan {path}: malformed plan entry ({err!r})") from err
    return plan, problem, fp


def _read_plan(plan_dir: str) -> tuple[dict, str]:
    """``(content, path)`` of ``plan_dir/plan.json``, its format, integrity and fingerprint checked (the errors of
    :func:`load_plan`)."""
    path = storage.join(plan_dir, PLAN_NAME)
    try:
        d = storage.read_json(path, "plan")
    except ValueError as err:
        raise ValueError(f"{err}; write it with `mcacct calibrate --plan-only --out DIR`") from None
    fmt = d.get("format") if isinstance(d, dict) else None
    check_format(fmt, FORMAT, f"plan {path} is not a calibration plan")
    integrity.verify(d, f"plan {path}")
    if d.get("fingerprint") != plan_fingerprint(d):
        raise ValueError(f"plan {path}: fingerprint does not match its content (file edited or corrupt)")
    return d, path


def plan_baselines(plan_dir: str) -> dict | None:
    """The PLD baselines stored with the plan in ``plan_dir`` (:func:`write_plan`), or ``None`` when it has none
    (written with ``--no-baselines``, with ``--sigmas``, or by an earlier version).

    Parameters
    ----------
    plan_dir : str
        As for :func:`load_plan`.

    Returns
    -------
    dict or None
        The report's baselines at the plan's target.

    Raises
    ------
    ValueError
        As :func:`load_plan`, for a plan file that cannot be trusted.
    """
    base = _read_plan(plan_dir)[0].get("baselines")
    return base if isinstance(base, dict) else None
