"""The values of the ``mcacct`` flags: ``argparse`` types that refuse a bad value at parse time, naming the flag and
the allowed range in the command line's one wording (``--flag must be in RANGE; got VALUE``, printed by
:class:`mcacct.cli.flags.Parser`; :mod:`mcacct.cli.flags` re-exports every type).

Each parses and checks one kind of value: a real or an integer in an interval, ``auto`` or a count (chunk size, CPU
devices), a sample count (``7.5e9``), a strategy column, comma lists of epsilons and of noise multipliers (within the
engine's sigma range), and a coordinator's ``host:port``.
"""

from __future__ import annotations

import argparse
import math

from mcacct.core.validate import check_int, check_real, interval, parse_floats

__all__ = ["real_in", "int_in", "chunk_size_type", "c_col_arg", "CPU_DEVICES_MAX", "cpu_devices_type", "sample_count",
           "float_list", "sigma_value", "sigma_list", "coordinator_address_type"]


def real_in(low: float | None = None, high: float | None = None, *, low_open: bool = False,
            high_open: bool = False):
    """``argparse`` type: a finite real number in the interval (refused at parse time with the flag's name)."""
    def real(text: str) -> float:
        try:
            return check_real("value", text, low=low, high=high, low_open=low_open, high_open=high_open)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err).split(" ", 1)[1]) from None
    real.__name__ = f"real in {interval(low, high, low_open, high_open)}"
    return real


def int_in(low: int | None = None, high: int | None = None):
    """``argparse`` type: an integer in ``[low, high]`` (refused at parse time with the flag's name)."""
    def integer(text: str) -> int:
        try:
            return check_int("value", text.replace("_", ""), low=low, high=high)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err).split(" ", 1)[1]) from None
    integer.__name__ = f"integer in {interval(low, high)}"
    return integer


def chunk_size_type(text: str) -> int | str:
    """``argparse`` type of ``--chunk-size``: ``"auto"`` or an integer >= 1."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int_in(1)(text)
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(str(err).replace("must be an integer", "must be 'auto' or an integer",
                                                          1)) from None


def c_col_arg(text: str) -> tuple[float, ...]:
    """``argparse`` type of ``--c-col``: finite entries in ``[0, inf)``, at least one positive, no empty item."""
    from mcacct.strategies.banded import parse_c_col
    try:
        return parse_c_col(text, "value")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).split(" ", 1)[1]) from None


#: The most JAX CPU devices ``--cpu-devices`` may ask for: each device costs JAX about 4 MB of host memory before
#: any work (1024 devices took 4.1 GB) and runs one chunk at a time, so more devices than cores only add memory;
#: 256 covers the largest CPU servers' cores.
CPU_DEVICES_MAX = 256


def cpu_devices_type(text: str) -> int | str:
    """``argparse`` type of ``--cpu-devices``: ``"auto"`` or an integer in ``[1, CPU_DEVICES_MAX]``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int_in(1, CPU_DEVICES_MAX)(text)
    except argparse.ArgumentTypeError as err:
        raise argparse.ArgumentTypeError(str(err).replace("must be an integer", "must be 'auto' or an integer",
                                                          1)) from None


def sample_count(text: str) -> int:
    """``argparse`` type of a sample count: an integer, also written as ``7.5e9`` or ``1_000_000``, ``>= 1``."""
    try:
        v = float(text.replace("_", ""))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"must be a whole number in [1, 2^63); got {text!r}") from err
    if not (math.isfinite(v) and v >= 1 and v == int(v) and v < 2**63):
        raise argparse.ArgumentTypeError(f"must be a whole number in [1, 2^63); got {text!r}")
    return int(v)


def _number_list(text: str, low_open: bool) -> list[float]:
    rng = "(0, inf)" if low_open else "[0, inf)"
    try:
        vals = list(parse_floats("list", text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"must be numbers in {rng} separated by commas; got {text!r}") from err
    if not vals or not all((v > 0 if low_open else v >= 0) and v < float("inf") for v in vals):
        raise argparse.ArgumentTypeError(f"must be numbers in {rng} separated by commas; got {text!r}")
    return vals


def float_list(text: str) -> list[float]:
    """``argparse`` type: finite numbers ``>= 0`` separated by commas (epsilons)."""
    return _number_list(text, low_open=False)


def _sigma_error(v: float, many: bool = False):
    """``None`` if ``v`` is within :mod:`mcacct.core.validate`'s sigma range, else the refusal (``many``: of
    a list)."""
    from mcacct.core.validate import SIGMA_MAX, SIGMA_MIN
    if SIGMA_MIN <= v <= SIGMA_MAX:
        return None
    rng = f"[{SIGMA_MIN:g}, {SIGMA_MAX:g}]" + (" separated by commas" if many else "")
    return argparse.ArgumentTypeError(f"must be {'numbers ' if many else ''}in {rng}; got {v:g} (the privacy loss "
                                      "grows like 1/sigma^2 and float64 cannot hold it outside this range)")


def sigma_value(text: str) -> float:
    """``argparse`` type of ``--sigma``: a finite number ``> 0`` (:func:`real_in`'s message) within
    ``[SIGMA_MIN, SIGMA_MAX]`` of :mod:`mcacct.core.validate`."""
    v = real_in(0, low_open=True)(text)
    if _sigma_error(v) is not None:
        raise _sigma_error(v)
    return v


def sigma_list(text: str) -> list[float]:
    """``argparse`` type: finite numbers ``> 0`` separated by commas (noise multipliers), each within
    ``[SIGMA_MIN, SIGMA_MAX]`` of :mod:`mcacct.core.validate`."""
    vals = _number_list(text, low_open=True)
    errors = [e for e in (_sigma_error(v, many=True) for v in vals) if e is not None]
    if errors:
        raise errors[0]
    return vals


def coordinator_address_type(text: str) -> str:
    """``argparse`` type of ``--coordinator-address``: ``host:port``
    (:func:`mcacct.engine.distributed.check_coordinator_address`), checked before JAX is touched."""
    from mcacct.engine.distributed import check_coordinator_address
    try:
        return check_coordinator_address("value", text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).split(" ", 1)[1]) from None
