r"""The one list of accounted sampling schemes, read by every consumer.

Each :class:`~mcacct.schemes.entry.SchemeInfo` is one scheme's whole entry: its registry name (the command line's
``--scheme NAME`` and the ``type`` of a scheme in job files), its class (a frozen dataclass implementing
:class:`mcacct.schemes.base.AccountedScheme`: the mechanism), a one-line summary and the optional facets through
which mcacct offers it -- its command line (``cli``), its ``mcacct compare`` row (``compare``) and its jax-privacy
batch selection (``jax_privacy``). Each built-in scheme's module declares its entry (``INFO``) next to its class;
the command line, ``mcacct compare``, the interop, the job files and the plots read this registry, and no other
table keyed by a scheme's name exists.

**Adding a scheme**: write its module (the dataclass) and call :func:`register` with its
:class:`~mcacct.schemes.entry.SchemeInfo` (at run time, or through an entry point, below). :func:`register`
refuses a class that lacks a member of the contract, naming it (:func:`missing_members`).

**Installed schemes** (entry points): a package that declares, in its metadata, an entry point of the group
:data:`ENTRY_POINT_GROUP` (``mcacct.schemes``) whose object is a :class:`SchemeInfo` (or a function returning one)
is registered the first time the registry is read, in every process -- so the shard jobs and the merge of a scheme
defined outside mcacct run in fresh processes (``mcacct sample``, ``mcacct merge``) without any code of the caller's.
Job files name a scheme only by its registry name: reading one never imports a module that a file names (shard
files travel through shared storage, and a named module would run code chosen by whoever wrote the file).

This module imports the scheme classes and nothing from the engine, the jobs, EVR or the command line.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from mcacct.core.precision import float64
from mcacct.schemes import balls_in_bins, banded_inverse, bminsep, cyclic_poisson, multi_attribution
from mcacct.schemes.entry import SCHEME_HOOKS, SchemeInfo, missing_members
from mcacct.schemes.truncated import entry as truncated

__all__ = ["SchemeInfo", "register", "unregister", "schemes", "names", "get", "entry_for", "classes",
           "missing_members", "ENTRY_POINT_GROUP", "SCHEME_HOOKS"]

#: the entry-point group of installed schemes (module docstring)
ENTRY_POINT_GROUP = "mcacct.schemes"


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

    Parameters
    ----------
    info : SchemeInfo
        The entry (its class is checked against the contract when the entry is built).

    Returns
    -------
    SchemeInfo
        ``info`` itself.

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

    Parameters
    ----------
    name : str
        Registry name or compare label.

    Returns
    -------
    SchemeInfo
        The removed entry.

    Raises
    ------
    ValueError
        Listing the registry names, when none matches.
    """
    info = get(name)
    _SCHEMES.remove(info)
    return info


def schemes() -> tuple[SchemeInfo, ...]:
    """Every registered scheme, in registration order.

    Returns
    -------
    tuple of SchemeInfo

    Raises
    ------
    ValueError
        On the first read of the registry, if an installed entry point cannot be loaded or gives no
        :class:`SchemeInfo` under its own name.
    """
    return tuple(_registry())


def names() -> tuple[str, ...]:
    """Registry names of every scheme, in registration order.

    Returns
    -------
    tuple of str

    Raises
    ------
    ValueError
        On the first read of the registry, if an installed entry point cannot be loaded or gives no
        :class:`SchemeInfo` under its own name.
    """
    return tuple(e.name for e in _registry())


def get(name: str) -> SchemeInfo:
    """The scheme called ``name`` (its registry name or its compare label).

    Parameters
    ----------
    name : str
        Registry name or compare label.

    Returns
    -------
    SchemeInfo

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
    registered scheme finds its base's entry), or ``None``.

    Parameters
    ----------
    scheme : object or type
        A scheme instance, or its class.

    Returns
    -------
    SchemeInfo or None

    Raises
    ------
    ValueError
        On the first read of the registry, if an installed entry point cannot be loaded or gives no
        :class:`SchemeInfo` under its own name.
    """
    cls = scheme if isinstance(scheme, type) else type(scheme)
    by_cls = {e.cls: e for e in _registry()}
    for c in cls.__mro__:
        if c in by_cls:
            return by_cls[c]
    return None


def classes() -> dict[str, type]:
    """``registry name -> class`` of every registered scheme (the ``type`` of a scheme in a job file).

    Returns
    -------
    dict of str to type

    Raises
    ------
    ValueError
        On the first read of the registry, if an installed entry point cannot be loaded or gives no
        :class:`SchemeInfo` under its own name.
    """
    return {e.name: e.cls for e in _registry()}


for _info in (bminsep.INFO, truncated.INFO, multi_attribution.INFO, cyclic_poisson.INFO, balls_in_bins.INFO,
              banded_inverse.INFO):
    register(_info)
del _info
