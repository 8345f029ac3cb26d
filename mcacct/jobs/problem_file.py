r"""A :class:`~mcacct.engine.problem.Problem` in a job file, and the one fingerprint of job files.

Both kinds of job file -- the statistics files of :mod:`mcacct.jobs.shards` (in their ``config``) and the
calibration plans of :mod:`mcacct.jobs.calibration` (at their top level) -- store a problem as the same fields
(:func:`problem_to_dict`)::

    "scheme":     {"type": registry name, field: value, ...}   every dataclass field (scheme_to_dict)
    "strategy":   {"c_col": [...]}
    "dtype", "dot_method", "recursion"                      the kernel's precision and methods
    "loss_kernel", "loss_kernel_resolved"                   the ladder's loss kernel as asked ("auto", ...)
                                                            and as resolved ("fused" or "unfused")
    "kernel":     KERNEL_VERSION                            the Monte Carlo kernel that draws the samples
    "rng":        rng_identity()                            the random-number generator

and read it back with :func:`problem_from_dict`, which refuses a file of another kernel or generator (its
numbers would differ for the same keys). A scheme is named by its registry name
(:func:`mcacct.schemes.registry.classes`), never by a module or class path: reading a file imports nothing it
names. Its fields are read generically (:func:`dataclasses.fields`), so every registered scheme can be stored,
including one registered at run time or installed through an entry point (:mod:`mcacct.schemes.registry`). A file's fingerprint is
:func:`fingerprint` of its format and content: the SHA-256 of their canonical JSON.

The stored form of a scheme is its fields, so renaming a field changes the format: the files' format strings
(:data:`mcacct.jobs.shards.FORMAT`, :data:`mcacct.jobs.plan_file.FORMAT`) then get a new version, and files of
another version are refused naming both versions (:func:`check_format`), never misread.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import numpy as np

from mcacct.engine.kernel_choice import resolve_loss_kernel
from mcacct.engine.problem import Problem, rng_identity
from mcacct.schemes.registry import classes
from mcacct.strategies.banded import BandedToeplitz

__all__ = ["KERNEL_VERSION", "scheme_to_dict", "scheme_from_dict", "problem_to_dict", "problem_from_dict",
           "PROBLEM_FIELDS", "fingerprint", "check_format"]

#: Identity of the Monte Carlo kernel whose draws a job file holds: the normal sampler
#: (:func:`mcacct.kernels.normal.standard_normal`), every scheme's participation sampler and loss evaluation, the
#: chunk/block key layout and the statistics kept per chunk. It is part of every fingerprint: bump it whenever
#: a change makes the same key and configuration give other samples, losses or sums, so that files of the old
#: kernel can no longer be resumed or merged with new ones.
#: Kernel 11: the truncated scheme's sub-blocks are cache-sized at n > 2048 (other keys per sub-block there).
#: Kernel 13: the remove skip's bound for any column and draws settled on a narrower batch (issue #39): the same
#: sums, but skipped draws record other bounds in the histogram.
#: Kernel 14: on CPUs the truncated scheme's samples with a truncated round are patched at most 16 rows per round
#: (:data:`mcacct.schemes.truncated.scheme.PATCH_ROWS_MAX`): their losses change in the last bits at chunks above 256.
#: Kernel 15: the ladder's float32 screen reads the noise lane-major (the same draws) with transforms of length
#: :func:`mcacct.kernels.fft_size.screen_fft_size` (7680, not 8192, at §7.4): the same sums, but skipped draws
#: record bounds that differ in their last bits.
#: Kernel 16: on GPUs the remove skip runs (the blocks that need the exact recursions gathered:
#: :func:`mcacct.kernels.control.rare_cond`) with a float32 screen of power-of-two length: the same sums, but
#: skipped draws record bounds in the histogram there. CPU results are those of kernel 15, bit for bit.
#: Kernel 17: on CPUs the float32 screen of a non-constant column reads table normals within ``alpha`` of the draws
#: (:mod:`mcacct.kernels.normal_table`) and the draws it does not let go are redrawn by column: the same counts and
#: sums, but skipped draws record other bounds in the histogram. GPU results are those of kernel 16.
#: Kernel 18: on CPUs a constant column's remove bound takes the prefix sums of the same table normals (the fused
#: pass off): the same counts and sums, but skipped draws record other bounds in the histogram.
KERNEL_VERSION = "mcacct-kernel/18"

#: The keys :func:`problem_to_dict` writes.
PROBLEM_FIELDS = ("scheme", "strategy", "dtype", "dot_method", "recursion", "loss_kernel", "loss_kernel_resolved",
                  "kernel", "rng", "skip_zero")


def scheme_to_dict(scheme: Any) -> dict:
    """``{"type": registry name, field: value, ...}`` with every dataclass field of a registered scheme.

    Parameters
    ----------
    scheme : Any
        An instance of a registered scheme class (exactly that class, not a subclass).

    Returns
    -------
    dict
        ``type`` and each field as a plain ``bool``, ``int`` or ``float`` (NumPy scalars converted).

    Raises
    ------
    ValueError
        If the scheme's class is not registered (:func:`mcacct.schemes.registry.register`) or a field is not
        a bool, an integer or a float.
    """
    known = classes()
    name = next((k for k, cls in known.items() if cls is type(scheme)), None)
    if name is None or not dataclasses.is_dataclass(scheme):
        raise ValueError(f"problem.scheme must be one of {sorted(known)} for a job file (the registered schemes: "
                         f"mcacct.register); got {type(scheme).__name__}")
    out: dict[str, Any] = {"type": name}
    for f in dataclasses.fields(scheme):
        v = getattr(scheme, f.name)
        if isinstance(v, (bool, np.bool_)):
            v = bool(v)
        elif isinstance(v, (int, np.integer)):
            v = int(v)
        elif isinstance(v, (float, np.floating)):
            v = float(v)
        else:
            raise ValueError(f"problem.scheme.{f.name} = {v!r} cannot be stored in a job file")
        out[f.name] = v
    return out


def scheme_from_dict(d: Any, where: str = "config.scheme"):
    """Inverse of :func:`scheme_to_dict` (the fields must be exactly those of the named class); ``where`` names
    the entry in messages.

    Parameters
    ----------
    d : Any
        A dict as :func:`scheme_to_dict` writes it.
    where : str
        The entry's name in messages.

    Returns
    -------
    Scheme
        An instance of the registered class named by ``d["type"]``, built from the other keys.

    Raises
    ------
    ValueError
        Naming ``where``: ``d`` is not a dict with ``type`` (a file of an older mcacct), the type is not
        registered, or the keys are not exactly the class's fields; or the scheme refuses a value.
    """
    known = classes()
    if not isinstance(d, dict) or "type" not in d:
        raise ValueError(f"{where} has no 'type': the file was written by an older mcacct whose fingerprint "
                         "did not identify the scheme and kernel; rerun the shards with this version")
    cls = known.get(d["type"])
    if cls is None:
        raise ValueError(f"{where}.type must be one of {sorted(known)} (registered schemes: a scheme defined "
                         "outside mcacct must be registered in this process, or installed with an entry point of "
                         f"group 'mcacct.schemes'); got {d['type']!r}")
    fields = {f.name for f in dataclasses.fields(cls)}
    given = set(d) - {"type"}
    if given != fields:
        raise ValueError(f"{where}: {cls.__name__} has fields {sorted(fields)}; got {sorted(given)}")
    return cls(**{k: d[k] for k in fields})


def problem_to_dict(problem: Problem) -> dict:
    """The problem's fields of a job file (:data:`PROBLEM_FIELDS`): scheme, strategy, dtype, dot method,
    recursion, the loss kernel as asked and as resolved (``"fused"`` or ``"unfused"``, :func:`resolve_loss_kernel`:
    the two differ in their float rounding, so a file says which one drew it, and the fingerprint covers it), and the
    identity of the kernel and of the random-number generator that draw its samples.

    Parameters
    ----------
    problem : Problem

    Returns
    -------
    dict
        The keys of :data:`PROBLEM_FIELDS`, with JSON-able values.

    Raises
    ------
    ValueError
        If the scheme cannot be stored (:func:`scheme_to_dict`).
    """
    return {"scheme": scheme_to_dict(problem.scheme), "strategy": {"c_col": list(problem.strategy.c_col)},
            "dtype": problem.dtype, "dot_method": problem.dot_method, "recursion": problem.recursion,
            "loss_kernel": problem.loss_kernel, "loss_kernel_resolved": resolve_loss_kernel(problem).kernel,
            "kernel": KERNEL_VERSION, "rng": rng_identity(), "skip_zero": problem.skip_zero}


def problem_from_dict(d: dict, where: str = "config", remedy: str = "rerun the shards with this version") -> Problem:
    """Inverse of :func:`problem_to_dict` (reads the keys :data:`PROBLEM_FIELDS` of ``d``, ignores others).

    Parameters
    ----------
    d:
        A dict holding the problem's fields.
    where:
        Names ``d`` in messages (``"config"``, ``"plan DIR/plan.json"``).
    remedy:
        The advice ending a refusal of another kernel or generator.

    Raises
    ------
    ValueError
        When the file was drawn by another kernel (:data:`KERNEL_VERSION`) or random-number generator
        (:func:`mcacct.engine.problem.rng_identity`), or a field is missing or malformed.
    """
    if d.get("kernel") != KERNEL_VERSION:
        raise ValueError(f"{where}: kernel is {d.get('kernel')!r} but this mcacct runs {KERNEL_VERSION!r}: its "
                         f"samples were drawn by another kernel; {remedy}")
    if d.get("rng") != rng_identity():
        raise ValueError(f"{where}: rng is {d.get('rng')!r} but this process draws with the generator "
                         f"{rng_identity()!r}: the same keys give other numbers; {remedy}")
    try:
        problem = Problem(scheme_from_dict(d["scheme"], f"{where}.scheme"),
                          BandedToeplitz(tuple(d["strategy"]["c_col"])), d["dtype"], d["dot_method"], d["recursion"],
                          d["loss_kernel"], d["skip_zero"])
        drawn_by = d["loss_kernel_resolved"]
    except (KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{where} is missing or has a malformed problem field: {err!r}") from err
    if drawn_by not in ("fused", "unfused"):
        raise ValueError(f"{where}.loss_kernel_resolved must be 'fused' or 'unfused'; got {drawn_by!r}")
    if resolve_loss_kernel(problem).kernel != drawn_by:  # "auto" resolves otherwise here: keep the file's kernel
        problem = dataclasses.replace(problem, loss_kernel=drawn_by)
    return problem


def fingerprint(file_format: str, content: dict) -> str:
    """The fingerprint of a job file: SHA-256 (hex, first 32 characters) of the canonical JSON (sorted keys, no
    spaces) of ``{"format": file_format, "content": content}``.

    Parameters
    ----------
    file_format : str
        The file's format string.
    content : dict
        The content fingerprinted (JSON-able).

    Returns
    -------
    str
        32 hexadecimal characters.
    """
    text = json.dumps({"format": file_format, "content": content}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def check_format(got: Any, expected: str, what: str) -> None:
    """Refuse a file whose ``format`` is not ``expected`` (``"mcacct-stats/2"``); ``what`` names the file and
    its kind (``"DIR/shard-...json is not an mcacct statistics file"``). A file of the same kind in another
    version is named as such: written by another version of mcacct, never read under this one's layout.

    Parameters
    ----------
    got : Any
        The file's ``format`` entry.
    expected : str
        The format this mcacct reads, ``"FAMILY/VERSION"``.
    what : str
        The start of the message.

    Raises
    ------
    ValueError
        ``"{what} (format {expected!r})"``, or for another version of the format ``"{what} of format {expected!r}:
        it has format {got!r} (written by another version of mcacct; ...)"``.
    """
    if got == expected:
        return
    family = expected.rsplit("/", 1)[0]
    if isinstance(got, str) and got.rsplit("/", 1)[0] == family:
        raise ValueError(f"{what} of format {expected!r}: it has format {got!r} (written by another version of "
                         "mcacct, whose job files stored other fields; rerun it with this version)")
    raise ValueError(f"{what} (format {expected!r})")
