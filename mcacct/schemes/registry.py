r"""The one list of accounted sampling schemes, read by every consumer.

Each :class:`SchemeInfo` holds a scheme's metadata only: its registry name (the command line's ``--scheme
NAME``), its class (a frozen dataclass implementing :class:`mcacct.schemes.base.AccountedScheme`), a one-line
summary, its row label in ``mcacct compare`` and whether that row runs by default. Everything a scheme does
(sampling, losses, bounds, its exact PLD and PLD baselines) is a method of the class; everything else about it
is keyed by its registry name in the layer that needs it:

* command-line flags and builders: :data:`mcacct.cli.schemes.SCHEME_CLI` (optional: a scheme without an entry
  there is not offered by the command line);
* ``mcacct compare`` rows: :data:`mcacct.report.compare_plans.COMPARE_PLANS` (optional too);
* job files store a scheme by its registry name (:func:`classes`) and fields
  (:func:`mcacct.jobs.problem_file.scheme_to_dict`): every registered scheme works there, and with the Python
  API and calibration, without further entries.

**Adding a scheme**: write its module (the dataclass) and call :func:`register` with its :class:`SchemeInfo`
(below for the built-in schemes; at run time for others), optionally with a command-line entry in
:mod:`mcacct.cli.schemes` and a compare plan in :mod:`mcacct.report.compare_plans`. :func:`register` refuses a
class that lacks a member of the contract, naming it (:func:`missing_members`).

**Installed schemes** (entry points): a package that declares, in its metadata, an entry point of the group
:data:`ENTRY_POINT_GROUP` (``mcacct.schemes``) whose object is a :class:`SchemeInfo` (or a function returning one)
is registered the first time the registry is read, in every process -- so the shard jobs and the merge of a scheme
defined outside mcacct run in fresh processes (``mcacct sample``, ``mcacct merge``) without any code of the caller's.
Job files name a scheme only by its registry name: reading one never imports a module that a file names (shard
files travel through shared storage, and a named module would run code chosen by whoever wrote the file).

This module imports the scheme classes and nothing from the engine, the jobs, EVR or the command line.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from dataclasses import dataclass
from typing import Any

from mcacct.core.precision import float64
from mcacct.schemes.base import AccountedScheme, Scheme
from mcacct.schemes.banded_inverse import BandedInverse
from mcacct.schemes.balls_in_bins import BallsInBins
from mcacct.schemes.bminsep import BMinSep
from mcacct.schemes.cyclic_poisson import CyclicPoisson
from mcacct.schemes.multi_attribution import MultiAttribution
from mcacct.schemes.truncated import TruncatedBMinSep

__all__ = ["SchemeInfo", "register", "unregister", "schemes", "names", "get", "entry_for", "classes",
           "missing_members", "ENTRY_POINT_GROUP"]

#: the entry-point group of installed schemes (module docstring)
ENTRY_POINT_GROUP = "mcacct.schemes"
#: the hooks through which :class:`~mcacct.schemes.base.Scheme`'s public forms draw and compute losses
SCHEME_HOOKS = ("draw", "loss_rows")


def missing_members(cls: type) -> list[str]:
    """The members of the scheme contract (:class:`~mcacct.schemes.base.AccountedScheme`; for a subclass of
    :class:`~mcacct.schemes.base.Scheme` also its hooks ``draw`` and ``loss_rows``) that ``cls`` neither defines
    nor inherits, in the contract's order. A dataclass field counts as defined."""
    required = [m for m in vars(AccountedScheme) if not m.startswith("_")]
    if isinstance(cls, type) and issubclass(cls, Scheme):
        required += list(SCHEME_HOOKS)
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    return [m for m in required if m not in fields and not hasattr(cls, m)]


@float64
@dataclass(frozen=True)
class SchemeInfo:
    """The metadata of one accounted scheme.

    Parameters
    ----------
    name:
        Registry name, also the command line's ``--scheme NAME`` (e.g. ``"bminsep"``).
    cls:
        The scheme's class: a frozen dataclass implementing :class:`~mcacct.schemes.base.AccountedScheme`; job
        files name it by its class name.
    summary:
        One line (``--scheme``'s help).
    label:
        Name of the scheme's row in ``mcacct compare`` (default ``name``); accepted wherever ``name`` is.
    compare_default:
        Whether ``mcacct compare`` runs the row by default (otherwise only when one of its options is given
        or it is named in ``--schemes``).
    """

    name: str
    cls: type
    summary: str = ""
    label: str | None = None
    compare_default: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"SchemeInfo.name must be a non-empty string; got {self.name!r}")
        if not isinstance(self.cls, type) or not dataclasses.is_dataclass(self.cls):
            raise ValueError(f"SchemeInfo.cls must be a dataclass (job files store its fields); got {self.cls!r}")
        if not self.cls.__dataclass_params__.frozen:
            raise ValueError(f"SchemeInfo.cls must be a frozen dataclass (schemes are static arguments of "
                             f"jitted kernels); {self.cls.__name__} is not frozen")
        missing = missing_members(self.cls)
        if missing:
            raise ValueError(f"SchemeInfo.cls {self.cls.__name__} does not implement the scheme contract "
                             f"(mcacct.schemes.base.AccountedScheme): missing {', '.join(missing)}")
        if self.label is None:
            object.__setattr__(self, "label", self.name)
        elif not isinstance(self.label, str) or not self.label.strip():
            raise ValueError(f"SchemeInfo.label must be a non-empty string; got {self.label!r}")


#: The registry, in registration order (the command line's order): read it through the functions below.
_SCHEMES: list[SchemeInfo] = []
#: whether the installed schemes (entry points) have been registered in this process
_ENTRY_POINTS_LOADED = False


def _registry() -> list[SchemeInfo]:
    """The registry, with the installed schemes (entry points of :data:`ENTRY_POINT_GROUP`) registered on the first
    read. An entry point that gives no :class:`SchemeInfo`, or one under another name, is refused naming it."""
    global _ENTRY_POINTS_LOADED
    if not _ENTRY_POINTS_LOADED:
        _ENTRY_POINTS_LOADED = True  # before loading: a package that reads the registry as it loads sees the rest
        try:
            _load_entry_points()
        except Exception:
            _ENTRY_POINTS_LOADED = False  # every later read fails the same way, never with a partial registry
            raise
    return _SCHEMES


def _load_entry_points() -> None:
    """Register every installed scheme (:func:`_registry`)."""
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {ep.name!r} = {ep.value!r} of group {ENTRY_POINT_GROUP!r}"
        try:
            obj = ep.load()
            info = obj if isinstance(obj, SchemeInfo) else obj() if callable(obj) else obj
        except Exception as err:  # noqa: BLE001 - an installed package's failure, named with its entry point
            raise ValueError(f"{where} could not be loaded ({type(err).__name__}: {err}); fix or uninstall "
                             f"the package that declares it") from err
        if not isinstance(info, SchemeInfo):
            raise ValueError(f"{where} must give a SchemeInfo (or a function returning one); got "
                             f"{type(info).__name__}")
        if info.name != ep.name:
            raise ValueError(f"{where} gives scheme {info.name!r}: the entry point's name must be the scheme's "
                             "registry name")
        if not any(e.cls is info.cls and e.name == info.name for e in _SCHEMES):
            register(info)


@float64
def register(info: SchemeInfo) -> SchemeInfo:
    """Add a scheme to the registry (returns ``info``).

    Raises
    ------
    ValueError
        If ``info`` is not a :class:`SchemeInfo`, or its name or label is already a name or label of a
        registered scheme, or its class is already registered.
    """
    if not isinstance(info, SchemeInfo):
        raise ValueError(f"register takes a SchemeInfo; got {type(info).__name__}")
    for e in _SCHEMES:  # not _registry(): the built-in schemes register before any installed one is loaded
        taken = {info.name, info.label} & {e.name, e.label}
        if taken:
            raise ValueError(f"scheme name {sorted(taken)[0]!r} is already registered (by {e.cls.__name__})")
        if e.cls is info.cls:
            raise ValueError(f"class {info.cls.__name__} is already registered as scheme {e.name!r}")
    _SCHEMES.append(info)
    return info


def unregister(name: str) -> SchemeInfo:
    """Remove the scheme called ``name`` (registry name or compare label) from the registry; returns its entry.

    Raises
    ------
    ValueError
        Listing the registry names, when none matches.
    """
    info = get(name)
    _SCHEMES.remove(info)
    return info


def schemes() -> tuple[SchemeInfo, ...]:
    """Every registered scheme, in registration order."""
    return tuple(_registry())


def names() -> tuple[str, ...]:
    """Registry names of every scheme, in registration order."""
    return tuple(e.name for e in _registry())


def get(name: str) -> SchemeInfo:
    """The scheme called ``name`` (its registry name or its compare label).

    Raises
    ------
    ValueError
        Listing the registry names, when none matches.
    """
    for e in _registry():
        if name in (e.name, e.label):
            return e
    raise ValueError(f"scheme must be one of {list(names())}; got {name!r}")


def entry_for(scheme: Any) -> SchemeInfo | None:
    """The entry of a scheme instance or class: the nearest registered class in its MRO (a subclass of a
    registered scheme finds its base's entry), or ``None``."""
    cls = scheme if isinstance(scheme, type) else type(scheme)
    by_cls = {e.cls: e for e in _registry()}
    for c in cls.__mro__:
        if c in by_cls:
            return by_cls[c]
    return None


def classes() -> dict[str, type]:
    """``registry name -> class`` of every registered scheme (the ``type`` of a scheme in a job file)."""
    return {e.name: e.cls for e in _registry()}


for _info in (
    SchemeInfo("bminsep", BMinSep, "b-min-sep subsampling (Alg. 1/2)", label="b-min-sep", compare_default=True),
    SchemeInfo("truncated", TruncatedBMinSep, "b-min-sep truncated to a maximum batch size (App. D)",
               label="truncated-b-min-sep"),
    SchemeInfo("multi-attribution", MultiAttribution, "user-level multi-attribution b-min-sep (Alg. 3), cold start"),
    SchemeInfo("cyclic-poisson", CyclicPoisson, "cyclic Poisson over min-sep parts (q = b B / M)",
               compare_default=True),
    SchemeInfo("balls-in-bins", BallsInBins, "balls-in-bins with T bins (T = M / B)", compare_default=True),
    SchemeInfo("banded-inverse", BandedInverse, "r-min-sep with a non-banded C from banded C^-1 (App. B)"),
):
    register(_info)
del _info
