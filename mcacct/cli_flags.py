"""Flags and report fields shared by the ``mcacct`` subcommands (:mod:`mcacct.cli`, :mod:`mcacct.jobs_cli`).

Both command modules import this one and neither imports the other's flags, so the command-line modules form
no import cycle. The scheme flags themselves come from :mod:`mcacct.registry`.
"""

from __future__ import annotations

import argparse

from mcacct.registry import add_scheme_flags, entry_for, problem_from_args, scheme_to_dict

__all__ = ["add_problem_flags", "add_monte_carlo_flags", "problem_from_args", "scheme_json", "device_info",
           "float_list"]


def add_monte_carlo_flags(p: argparse.ArgumentParser) -> None:
    """``--seed --chunk-size --dtype --json --quiet``."""
    r = p.add_argument_group("Monte Carlo")
    r.add_argument("--seed", type=int, default=0, help="root seed of jax.random (default 0)")
    r.add_argument("--chunk-size", type=int, default=4096, help="samples per chunk (memory ~ chunk x n)")
    r.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                   help="precision of the loss kernel (sums are always float64); only float64 certifies: "
                        "calibrate refuses float32, estimates report certified: false")
    r.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    r.add_argument("--quiet", action="store_true", help="no progress on stderr")


def add_problem_flags(p: argparse.ArgumentParser) -> None:
    """``--scheme``, every scheme flag of :mod:`mcacct.registry` and the Monte Carlo flags."""
    add_scheme_flags(p)
    add_monte_carlo_flags(p)


def scheme_json(problem) -> dict:
    """The report's ``scheme`` object: the registry name, the class and every field, the participation rate,
    ``c_col`` and the kernel dtype."""
    s = problem.scheme
    entry = entry_for(s)
    out = {"name": entry.name if entry is not None else type(s).__name__, **scheme_to_dict(s)}
    rate = getattr(s, "participation_rate", None)
    if rate is not None:
        out["participation_rate"] = float(rate)
    out["c_col"] = list(problem.strategy.c_col)
    out["dtype"] = problem.dtype
    return out


def device_info() -> dict:
    """``device`` (``"platform:kind xN"``, N the global device count), ``platform``, ``device_kind`` and
    ``devices`` (:func:`jax.local_device_count`)."""
    import jax
    d = jax.devices()[0]
    kind = getattr(d, "device_kind", "")
    return {"device": f"{d.platform}:{kind} x{jax.device_count()}", "platform": d.platform, "device_kind": kind,
            "devices": jax.local_device_count()}


def float_list(text: str) -> list[float]:
    """``argparse`` type: numbers separated by commas."""
    try:
        return [float(v) for v in text.split(",") if v.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas; got {text!r}") from err
