r"""Tamper evidence for job files: a digest of every file, an optional keyed MAC, and consistency checks of the
statistics a shard carries.

Shard files travel through shared and object storage before :func:`mcacct.jobs.merge.merge` or
``mcacct calibrate --from`` turns their sums into a privacy certificate, so a merge refuses what it cannot trust.
Three layers, each catching what the one before cannot:

1. **Consistency** (:func:`check_statistics`): the histogram total equals ``count``; indices are sorted, unique and
   in range; counts are non-negative; every fixed-point sum lies within what the histogram allows. A sample whose
   (shifted) loss ``L`` was placed in bin ``k >= 1`` satisfies ``(k-1) w < L <= k w`` (the bin index is
   ``ceil(L / w)``, exact for a power-of-two width), so its contribution ``g(L) = max(0, 1 - e^{eps - L})`` lies in
   ``[g((k-1) w), g(k w)]``; bin 0 (``L <= 0``) contributes 0 and the overflow bin between ``g(bins w)`` and 1.
   The stored sum (rounded up, :meth:`mcacct.statistics.accumulators.DirectionStats.add_chunk`) must therefore lie in
   ``[2^80 (1 - 10^{-9}) S_lo,  2^80 ((1 + 10^{-9}) S_hi + 10^{-9} count) + 3 count]``; the slack covers the
   float64 rounding of each term and each chunk sum (relative ``<< 10^{-9}``) and the ``+ 2`` units that every
   chunk adds per sum. This catches accidents such as a zeroed or truncated sum wherever the histogram is fine
   enough to bound it from below, but not a sum moved within the bracket.
2. **Digest** (:func:`seal`, :func:`verify`): the SHA-256 of the canonical JSON of the whole file (sorted keys, no
   spaces, the ``integrity`` entry left out), written with it. Any edit of the statistics, the ranges, the shard
   index or the configuration that does not also recompute the digest is refused. It catches accidents (a
   truncated upload, a hand edit, bit rot), not a writer who recomputes it.
3. **MAC** (optional): with the environment variable :data:`KEY_ENV` set, every file written carries an
   HMAC-SHA-256 of the same canonical JSON under that key, and every file read must carry a valid one: unsigned
   files are refused. Only the MAC stops a writer who has access to the storage but not to the key. Give every job
   and the merging process the same key (a Kubernetes or Slurm secret); files written without a key can be merged
   under a key only after they are written again.

Files of earlier formats carry no digest and are refused by their format name
(:func:`mcacct.jobs.problem_file.check_format`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
import numpy as np

from mcacct.statistics.accumulators import FIXED_BITS

__all__ = ["KEY_ENV", "MIN_KEY_BYTES", "seal", "verify", "shard_key", "check_statistics", "describe", "SUM_REL_SLACK"]

#: The environment variable holding the shared MAC key (any string of at least :data:`MIN_KEY_BYTES` bytes in
#: UTF-8; a random hex string of 64 characters is a good choice).
KEY_ENV = "MCACCT_SHARD_KEY"
MIN_KEY_BYTES = 16
#: Relative slack of the sum bracket of :func:`check_statistics` (covers float64 rounding of terms and sums).
SUM_REL_SLACK = 1e-9
_FIXED_ONE = 2**FIXED_BITS


def shard_key() -> bytes | None:
    """The MAC key from :data:`KEY_ENV` (``None`` when unset or empty).

    Returns
    -------
    bytes or None
        The variable's value encoded in UTF-8.

    Raises
    ------
    ValueError
        If the key is shorter than :data:`MIN_KEY_BYTES` bytes.
    """
    raw = os.environ.get(KEY_ENV, "")
    if not raw:
        return None
    key = raw.encode("utf-8")
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"{KEY_ENV} must hold at least {MIN_KEY_BYTES} bytes (a random secret shared by every "
                         f"shard job and the merge); got {len(key)}")
    return key


def _canonical(obj: dict) -> bytes:
    body = {k: v for k, v in obj.items() if k != "integrity"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def seal(obj: dict, key: bytes | None = None) -> dict:
    """``obj`` with its ``integrity`` entry: ``{"digest": "sha256:<hex>"}``, plus ``"mac": "hmac-sha256:<hex>"``
    under ``key`` (``None``: :func:`shard_key`, from the environment; ``b""``: no MAC). The entry covers every other
    field of ``obj``.

    Parameters
    ----------
    obj : dict
        The file's content (JSON-able, finite numbers only); an ``integrity`` entry already there is replaced.
    key : bytes or None
        The MAC key.

    Returns
    -------
    dict
        A new dict: ``obj`` without its old ``integrity`` entry, plus the new one. Both hashes are taken over
        the canonical JSON (sorted keys, no spaces) of that content.

    Raises
    ------
    ValueError
        If ``key`` is ``None`` and :data:`KEY_ENV` holds too short a key, or ``obj`` holds a non-finite number.
    """
    key = shard_key() if key is None else key
    text = _canonical(obj)
    entry = {"digest": "sha256:" + hashlib.sha256(text).hexdigest()}
    if key:
        entry["mac"] = "hmac-sha256:" + hmac.new(key, text, hashlib.sha256).hexdigest()
    return {**{k: v for k, v in obj.items() if k != "integrity"}, "integrity": entry}


def verify(obj: dict, where: str, key: bytes | None = None) -> str:
    """Check the ``integrity`` entry of a file's dict ``obj``; ``where`` names the file in messages; ``key`` as
    in :func:`seal`.

    Returns
    -------
    str
        ``"mac"`` when a key is set (:data:`KEY_ENV`) and the MAC holds, ``"digest"`` when no key is set and the
        digest holds (a MAC present in the file is then not checked).

    Raises
    ------
    ValueError
        No digest, a digest or MAC that does not match (edited or corrupt), or, with a key set, a file without a
        MAC.
    """
    key = shard_key() if key is None else key
    entry = obj.get("integrity")
    if not isinstance(entry, dict) or not isinstance(entry.get("digest"), str):
        raise ValueError(f"{where} carries no digest of its statistics (integrity.digest); it cannot be trusted: "
                         "write it again with this version of mcacct")
    text = _canonical(obj)
    if not hmac.compare_digest(entry["digest"], "sha256:" + hashlib.sha256(text).hexdigest()):
        raise ValueError(f"{where}: the digest does not match the file's content (file edited or corrupt); "
                         "write it again")
    if not key:
        return "digest"
    mac = entry.get("mac")
    if not isinstance(mac, str):
        raise ValueError(f"{where} is not signed (no integrity.mac) but {KEY_ENV} is set: refusing an unsigned "
                         f"file; write it again with {KEY_ENV} set, or unset {KEY_ENV} to trust digests only")
    if not hmac.compare_digest(mac, "hmac-sha256:" + hmac.new(key, text, hashlib.sha256).hexdigest()):
        raise ValueError(f"{where}: the MAC does not match under the key in {KEY_ENV} (file edited, or signed "
                         "with another key)")
    return "mac"


def _contribution(epsilon: float, loss: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, -np.expm1(epsilon - loss))


def check_statistics(count: int, sums: list[int], hist: np.ndarray, epsilons, width: float, bins: int,
                     where: str) -> None:
    r"""Refuse statistics that no run can produce.

    Parameters
    ----------
    count:
        Samples.
    sums:
        Fixed-point sums (units of ``2^{-80}``), one per epsilon.
    hist:
        Dense histogram of ``bins + 2`` integer cells (bin 0: ``L <= 0``; ``bins + 1``: overflow).
    epsilons, width, bins:
        The configuration's epsilons and binning.
    where:
        Names the file and direction in messages.

    Raises
    ------
    ValueError
        A negative count, a histogram whose total is not ``count``, or a sum outside the bracket
        ``[S_lo, S_hi]`` (module docstring) that the histogram allows.
    """
    hist = np.asarray(hist, np.int64)
    if count < 0 or np.any(hist < 0):
        raise ValueError(f"{where}: negative sample or histogram count (file edited or corrupt)")
    total = int(hist.sum())
    if total != count:
        raise ValueError(f"{where}: the histogram holds {total} samples but count is {count} (file edited or "
                         "corrupt)")
    nz = np.flatnonzero(hist[1:]) + 1  # bin 0 contributes nothing
    upper_edges = np.minimum(nz, bins) * float(width)
    lower_edges = (np.minimum(nz, bins + 1) - 1) * float(width)
    weights = hist[nz].astype(np.float64)
    over = float(hist[bins + 1])
    for e, s in zip(epsilons, sums):
        s_lo = float(_contribution(float(e), lower_edges) @ weights)
        s_hi = float(_contribution(float(e), upper_edges[nz <= bins]) @ weights[nz <= bins]) + over
        lo = math.floor(_FIXED_ONE * s_lo * (1.0 - SUM_REL_SLACK))
        hi = math.ceil(_FIXED_ONE * (s_hi * (1.0 + SUM_REL_SLACK) + SUM_REL_SLACK * count)) + 3 * count
        if not lo <= int(s) <= hi:
            raise ValueError(f"{where}: the sum at epsilon {e} is {int(s) / _FIXED_ONE:.10g} samples' worth, "
                             f"outside [{s_lo:.10g}, {s_hi:.10g}] that its histogram allows (file edited or corrupt)")


def describe(level: str) -> str:
    """What a verified file's ``level`` (:func:`verify`) guarantees, for reports.

    Parameters
    ----------
    level : str
        ``"mac"`` or ``"digest"``.

    Returns
    -------
    str
        A short phrase; any other ``level`` is returned unchanged.
    """
    return {"mac": f"MAC under {KEY_ENV} (authenticated)",
            "digest": "SHA-256 digest (accidents caught; not authenticated)"}.get(level, level)
