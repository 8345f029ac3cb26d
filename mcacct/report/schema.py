"""The one JSON schema of the ``mcacct`` command line: every ``--json`` report (and ``mse-study``'s ``study.json``)
goes through :func:`report` and :func:`json_text` (documented in docs/json.md).

What this module does to a command's result, in one place for every command:

* stamps the version: ``schema`` (:data:`SCHEMA`), ``command`` (``"pld epsilon"``) and ``mcacct_version``;
* spells the common keys one way, in every object of the report (rows of ``compare``, calibrations of
  ``mse-study`` included): ``notes`` (a list of strings), ``certified`` / ``certified_by`` (a calibration),
  ``scheme`` (an object whose ``name`` is the registry name); results of the library that still use an old
  spelling are read through :data:`RENAMES`;
* keeps each old key (``note``, ``verified``, ``mu``, ``epsilon_gdp``) one more schema version beside the new
  one, and lists those present in ``deprecated`` (old key -> what replaces it);
* encodes non-finite numbers as strict JSON: ``null``, with the JSON Pointer (RFC 6901) of each one in
  ``nonfinite`` (``"inf"``, ``"-inf"`` or ``"nan"``) and, beside a key ``K`` of an object, ``K_reason`` in words.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["SCHEMA", "COMMON_KEYS", "DEVICE_KEYS", "RENAMES", "Rename", "report", "plain", "nonfinite_pointers",
           "json_text", "nonfinite_name"]

#: The schema version of every report; the number grows when a key is removed or changes meaning.
SCHEMA = "mcacct/1"
#: Keys every report carries (docs/json.md, "Common keys").
COMMON_KEYS = ("schema", "command", "mcacct_version", "notes", "nonfinite", "deprecated")
#: Keys of every report of a command that draws Monte Carlo samples (:func:`mcacct.cli.flags.device_info`).
DEVICE_KEYS = ("device", "platform", "device_kind", "devices", "global_devices", "processes")

#: The keys :func:`report` writes itself (a result's own are replaced: reporting a report again is the same).
_STAMPED = ("schema", "command", "mcacct_version", "nonfinite", "deprecated")
_MISSING = object()
#: Values :func:`_canonical` keeps as they are, and those :func:`plain` writes as they are (long lists of numbers
#: are the common case: no call per item).
_SCALARS = (float, int, str, bool, type(None))
_PLAIN = (int, str, bool, type(None))


@dataclass(frozen=True)
class Rename:
    """A key spelled ``new`` in schema :data:`SCHEMA` and ``old`` before it.

    Parameters
    ----------
    old, new:
        The two spellings.
    replaced_by:
        What ``deprecated`` says about ``old`` (which key to read instead, and how they relate).
    upgrade:
        The value of ``new`` from an object that has only ``old`` (a result of the library still written the old
        way), or the module's "missing" sentinel to leave the object without ``new``.
    downgrade:
        The value of ``old`` from an object that has only ``new``, or the sentinel to leave ``old`` out.
    commands:
        The commands whose reports use the key (``None``: every command).
    """

    old: str
    new: str
    replaced_by: str
    upgrade: Callable[[dict], Any]
    downgrade: Callable[[dict], Any]
    commands: tuple[str, ...] | None = None


def _notes_from_note(d: dict) -> Any:
    note = d["note"]
    if note is None or note == "":
        return []
    return [note] if isinstance(note, str) else _MISSING


def _note_from_notes(d: dict) -> Any:
    notes = d["notes"]
    return "; ".join(str(n) for n in notes) if isinstance(notes, list) and notes else _MISSING


def _certified_by_from_verified(d: dict) -> Any:
    if not isinstance(d["verified"], bool):
        return _MISSING
    if d.get("method") == "pld":  # calibrate's PLD route (a scheme with an exact PLD)
        return "pld"
    return "monte-carlo" if d["verified"] else "top-candidate"


def _verified_from_certified_by(d: dict) -> Any:
    by = d["certified_by"]
    return by in ("monte-carlo", "pld") if by in ("monte-carlo", "top-candidate", "pld") else _MISSING


def _epsilon_gdp(d: dict) -> Any:
    # the old key existed only for q = 1, where it is the run's own epsilon
    return d["epsilon_full_batch"] if d.get("sampling_prob") == 1 else _MISSING


#: Every key whose spelling changed with schema ``mcacct/1`` (old keys are written one more schema version).
RENAMES: tuple[Rename, ...] = (
    Rename("note", "notes", "notes (a list of strings); note is the notes joined by '; ', present only when there "
                            "are notes", _notes_from_note, _note_from_notes),
    Rename("verified", "certified_by",
           "certified_by ('monte-carlo': a ladder candidate passed Estimate-Verify-Release; 'top-candidate': the "
           "Monte-Carlo-free top of the ladder, analysis in top_certifier; 'pld': the PLD accountant) and "
           "certified; verified is certified_by != 'top-candidate'", _certified_by_from_verified,
           _verified_from_certified_by),
    Rename("mu", "mu_full_batch", "mu_full_batch (the GDP mu of the same norms at q = 1, no subsampling)",
           lambda d: d["mu"], lambda d: d["mu_full_batch"], ("individual",)),
    Rename("epsilon_gdp", "epsilon_full_batch",
           "epsilon_full_batch (epsilon(delta) of mu_full_batch, for every q; epsilon_gdp was written for q = 1 "
           "only)", lambda d: d["epsilon_gdp"], _epsilon_gdp, ("individual",)),
)


def _scheme_object(value: Any) -> Any:
    """``scheme`` as an object ``{"name": registry name, "label": ...}``: a string (a row label or registry name)
    becomes one; an object with a ``name`` gains its ``label``. Anything else (a job file's config, an unknown
    name) is left as it is."""
    from mcacct.schemes.registry import get
    if isinstance(value, str):
        try:
            entry = get(value)
        except ValueError:
            return value
        return {"name": entry.name, "label": entry.label}
    if isinstance(value, dict) and isinstance(value.get("name"), str) and "label" not in value:
        try:
            entry = get(value["name"])
        except ValueError:
            return value
        return {"name": value["name"], "label": entry.label, **{k: v for k, v in value.items() if k != "name"}}
    return value


def _canonical(obj: Any, renames: tuple[Rename, ...], deprecated: dict) -> Any:
    """``obj`` with every object spelled the schema's way by ``renames`` (a copy; lists and objects
    recursively); the old keys present go into ``deprecated``."""
    if isinstance(obj, (list, tuple)):
        return [v if isinstance(v, _SCALARS) else _canonical(v, renames, deprecated) for v in obj]
    if not isinstance(obj, dict):
        return obj
    d = {k: _canonical(v, renames, deprecated) for k, v in obj.items()}
    if "scheme" in d:
        d["scheme"] = _scheme_object(d["scheme"])
    for r in renames:  # results of the library written the old way: the new key from the old one
        if r.old in d and r.new not in d:
            v = r.upgrade(d)
            if v is not _MISSING:
                d[r.new] = v
    if "certified_by" in d and "certified" not in d:  # a calibration's sigma is certified, whichever way
        d["certified"] = True
    for r in renames:  # the old key beside the new one, one more schema version
        if r.new in d and r.old not in d:
            v = r.downgrade(d)
            if v is not _MISSING:
                d[r.old] = v
        if r.old in d:
            deprecated[r.old] = f"use {r.replaced_by}; {r.old} is written until schema mcacct/2"
    return d


def nonfinite_name(x: float) -> str:
    """``"inf"``, ``"-inf"`` or ``"nan"``: how ``nonfinite`` names a non-finite number (``float()`` reads it
    back).

    Parameters
    ----------
    x : float
        A non-finite number.

    Returns
    -------
    str
        ``"nan"``, ``"inf"`` or ``"-inf"``.
    """
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _pointer_token(key: Any) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def nonfinite_pointers(obj: Any, prefix: str = "") -> dict[str, str]:
    """The JSON Pointer (RFC 6901) of every non-finite number in ``obj`` (NumPy scalars and arrays included),
    mapped to :func:`nonfinite_name` of it.

    Parameters
    ----------
    obj : Any
        A result made of dicts, lists, tuples, numbers, strings and NumPy values.
    prefix : str
        Pointer of ``obj`` itself (``""`` for the document's root); keys are escaped (``~`` as ``~0``, ``/`` as
        ``~1``).

    Returns
    -------
    dict of str to str
        Pointer to ``"inf"``, ``"-inf"`` or ``"nan"``; empty when every number is finite.
    """
    import numpy as np
    obj = obj.tolist() if isinstance(obj, (np.ndarray, np.generic)) else obj
    if isinstance(obj, float):
        return {} if math.isfinite(obj) else {prefix: nonfinite_name(obj)}
    out: dict[str, str] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(nonfinite_pointers(v, f"{prefix}/{_pointer_token(k)}"))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            if isinstance(v, float):  # the common case, a long list of numbers: no pointer built
                if not math.isfinite(v):
                    out[f"{prefix}/{i}"] = nonfinite_name(v)
            elif not isinstance(v, (int, str, bool)) and v is not None:
                out.update(nonfinite_pointers(v, f"{prefix}/{i}"))
    return out


def report(command: str, result: dict) -> dict:
    """The versioned report of ``command`` (``"calibrate"``, ``"pld epsilon"``, ...) from its ``result``.

    Parameters
    ----------
    command:
        The subcommand as typed, sub-commands joined by a space.
    result:
        What the command returned (not changed: the report is a copy).

    Returns
    -------
    dict
        ``schema``, ``command``, ``mcacct_version``, then the result with every key spelled the schema's way
        (old keys beside the new ones), ``notes`` (``[]`` when the result has none), ``nonfinite`` (JSON Pointer
        -> ``"inf"``/``"-inf"``/``"nan"`` of every non-finite number, written ``null``) and ``deprecated`` (old
        key -> its replacement, for the old keys present). Non-finite numbers are still floats here:
        :func:`json_text` writes them.
    """
    import mcacct
    deprecated: dict[str, str] = {}
    body = {k: v for k, v in result.items() if k not in _STAMPED}
    renames = tuple(r for r in RENAMES if r.commands is None or command in r.commands)
    body = _canonical(body, renames, deprecated)
    body.setdefault("notes", [])
    if isinstance(body["notes"], tuple):
        body["notes"] = list(body["notes"])
    out = {"schema": SCHEMA, "command": command, "mcacct_version": mcacct.__version__, **body}
    out["nonfinite"] = nonfinite_pointers(out)
    out["deprecated"] = dict(sorted(deprecated.items()))
    return out


def plain(obj: Any) -> Any:
    """``obj`` with NumPy scalars and arrays made plain, every non-finite float ``None`` and, in an object, a
    ``K_reason`` beside each key ``K`` made ``None`` (unless the object has one).

    Parameters
    ----------
    obj : Any
        A result made of dicts, lists, tuples, numbers, strings and NumPy values.

    Returns
    -------
    Any
        The same structure (tuples become lists), with only JSON-representable values; ``K_reason`` reads
        ``"not a finite number (+inf)"``, ``(-inf)`` or ``(nan)``.
    """
    import numpy as np
    obj = obj.tolist() if isinstance(obj, (np.ndarray, np.generic)) else obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (list, tuple)):
        return [v if isinstance(v, _PLAIN) or (type(v) is float and math.isfinite(v)) else plain(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {}
    for k, v in obj.items():
        v = v.tolist() if isinstance(v, np.generic) else v
        out[k] = plain(v)
        if isinstance(v, float) and not math.isfinite(v) and f"{k}_reason" not in obj:
            out[f"{k}_reason"] = f"not a finite number ({'+inf' if v > 0 else '-inf' if v < 0 else 'nan'})"
    return out


def json_text(obj: Any, **kwargs) -> str:
    """Strict JSON (RFC 8259, which has no ``Infinity`` or ``NaN``) of ``obj``: :func:`plain` of it, so a
    non-finite number is ``null`` (``nonfinite`` of a :func:`report` says which it was). ``json.loads`` of the
    text, even with ``parse_constant`` refusing ``Infinity``/``NaN``, always succeeds; ``kwargs`` go to
    :func:`json.dumps`.

    Parameters
    ----------
    obj : Any
        The object to write.
    **kwargs
        Keyword arguments of :func:`json.dumps` (``indent``, ``sort_keys``, ...), except ``allow_nan``.

    Returns
    -------
    str
        The JSON text.
    """
    return json.dumps(plain(obj), allow_nan=False, **kwargs)
