r"""The JSON form of a DPIS run (:class:`mcacct.dpis.events.DPISRun`), read by ``mcacct dpis epsilon --run``.

Format (one JSON object; only ``n_tilde``, ``batch_size``, ``clip`` and ``epochs`` are required)::

    {
      "n_tilde": 60012.4,          # released count N~ (> 0)
      "batch_size": 256,           # expected batch size b (> 0)
      "clip": 0.1,                 # clip bound C (> 0), the default of every entry
      "sigma_n": 1200,             # noise std of N~ (sensitivity 1); null/absent: N~ not released
      "sigma_k": 1200,             # sigma_K of K' (noise std sigma_K * C); null/absent: no K' release
      "p_k": 0.004266,             # sampling rate of K'; absent: batch_size / n_tilde (the paper)
      "k_releases": 40,            # number of K' releases (one per epoch); absent: counted from
                                   #   "iterations_per_epoch", or one per entry when no entry has more than
                                   #   one iteration (else refused: an entry may span several epochs)
      "iterations_per_epoch": 234, # the fixed public T of every epoch; locates the epochs (K' count)
      "k_star_releases": 0,        # adaptive-clipping releases K*_e (each Gaussian, sigma_K); default 0
      "rejection_k": 5,            # rejection-sampling multiplier k: refuse any k_tilde < k * b * C
      "epochs": [                  # one entry per epoch (or per iteration: "iterations": 1)
        {"iterations": 234, "k_tilde": 6001.2, "sigma_g": 0.81},
        {"iterations": 234, "k_tilde": 4100.0, "sigma_g": 0.62, "clip": 0.1}
      ]
    }

With ``sigma_k`` set, a file whose entries have more than one iteration must give ``k_releases`` or
``iterations_per_epoch``: an entry may cover several epochs, and Alg. 1 releases one :math:`K'` per epoch.

Every error is a ``ValueError`` naming the file and the entry (``epochs[3].k_tilde``).
"""

from __future__ import annotations

import math
import os
from typing import Any

from mcacct.dpis.events import DPISEpoch, DPISRun
from mcacct.core.validate import read_json
from mcacct.core.precision import float64

__all__ = ["RUN_FIELDS", "EPOCH_FIELDS", "run_from_dict", "run_to_dict", "load_run"]

#: top-level fields of a run file: name -> (required, kind)
RUN_FIELDS = {"n_tilde": (True, "number"), "batch_size": (True, "number"), "clip": (True, "number"),
              "epochs": (True, "list"), "sigma_n": (False, "number"), "sigma_k": (False, "number"),
              "p_k": (False, "number"), "k_releases": (False, "integer"), "k_star_releases": (False, "integer"),
              "rejection_k": (False, "number"), "iterations_per_epoch": (False, "integer")}
#: fields of one entry of ``epochs``
EPOCH_FIELDS = {"iterations": (True, "integer"), "k_tilde": (True, "number"), "sigma_g": (True, "number"),
                "clip": (False, "number")}


def _value(where: str, name: str, value: Any, kind: str) -> Any:
    if value is None:
        return None
    ok_number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "integer" and not (ok_number and float(value) == int(value)):
        raise ValueError(f"{where}{name} must be an integer; got {value!r}")
    if kind == "number" and not ok_number:
        raise ValueError(f"{where}{name} must be a finite number; got {value!r}")
    if kind == "list" and not isinstance(value, list):
        raise ValueError(f"{where}{name} must be a JSON list of entries; got {type(value).__name__}")
    return int(value) if kind == "integer" else value


def _fields(where: str, data: Any, spec: dict) -> dict:
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'run'} must be a JSON object; got {type(data).__name__}")
    unknown = sorted(set(data) - set(spec))
    if unknown:
        raise ValueError(f"{where}unknown field(s) {unknown}; allowed: {sorted(spec)}")
    out = {}
    for name, (required, kind) in spec.items():
        if name not in data or (required and data[name] is None):
            if required:
                raise ValueError(f"{where}{name} is required")
            continue
        out[name] = _value(where, name, data[name], kind)
    return out


@float64
def run_from_dict(data: Any, source: str = "run") -> DPISRun:
    """A :class:`DPISRun` from its JSON object (module docstring).

    Parameters
    ----------
    data : Any
        The decoded JSON object.
    source : str, default "run"
        Name of the source, used as the prefix of messages.

    Returns
    -------
    DPISRun
        The run.

    Raises
    ------
    ValueError
        Naming ``source`` and the entry for a missing, unknown or out-of-range field.
    """
    top = _fields(f"{source}: ", data, RUN_FIELDS)
    entries = top.pop("epochs")
    if not entries:
        raise ValueError(f"{source}: epochs must hold at least one entry")
    epochs = []
    for i, entry in enumerate(entries):
        where = f"{source}: epochs[{i}]."
        fields = _fields(where, entry, EPOCH_FIELDS)
        try:
            epochs.append(DPISEpoch(**fields))
        except ValueError as err:
            raise ValueError(f"{where}{err}") from None
    try:
        return DPISRun(epochs=tuple(epochs), **top)
    except ValueError as err:
        raise ValueError(f"{source}: {err}") from None


@float64
def run_to_dict(run: DPISRun) -> dict:
    """The JSON object of ``run`` (inverse of :func:`run_from_dict`).

    Parameters
    ----------
    run : DPISRun
        The run.

    Returns
    -------
    dict
        The fields that are not ``None``, ``epochs`` as a list of objects.
    """
    out = {k: getattr(run, k) for k in RUN_FIELDS if k != "epochs" and getattr(run, k) is not None}
    out["epochs"] = [{k: getattr(e, k) for k in EPOCH_FIELDS if getattr(e, k) is not None} for e in run.epochs]
    return out


@float64
def load_run(path: str | os.PathLike) -> DPISRun:
    """Read a run file (module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The JSON run file.

    Returns
    -------
    DPISRun
        The run.

    Raises
    ------
    ValueError
        If the file cannot be read or is not valid JSON, or as :func:`run_from_dict` (messages name the file).
    """
    name = os.fspath(path)
    return run_from_dict(read_json(name, "run file"), f"run file {name!r}")
