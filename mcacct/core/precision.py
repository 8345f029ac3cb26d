r"""Float64 for every public entry point, whatever the caller's ``jax_enable_x64``.

mcacct certifies only what it computes in float64 (README, "Precision policy"; docs/soundness.md). Importing
mcacct does **not** change JAX's global configuration: the caller's ``jax_enable_x64`` (default ``False``) stays
as it is for the caller's own arrays. Instead every public entry point -- the functions and the methods of the
classes of ``mcacct.__all__``, ``mcacct.pld``, ``mcacct.individual``, ``mcacct.dpis``, ``mcacct.evr``,
``mcacct.strategies``, ``mcacct.training``, the schemes, and the documented Python entry points ``run_ladder``,
``jobs.shards.run_shard``/``merge``, ``jobs.calibration``, ``report.compare_schemes``, ``report.run_study`` -- is
decorated with :func:`float64`, which runs it inside JAX's scoped x64 context ``jax.enable_x64(True)`` (JAX >= 0.8;
the pre-0.8 name ``jax.experimental.enable_x64`` is removed in 0.10). The command line (:func:`mcacct.cli.main`)
runs each command in the same scope. Internal kernels (``mcacct.kernels``, ``mcacct.engine`` internals,
``mcacct.pld.kernels``) are not decorated: they run inside a decorated caller; an application that calls them
directly sets ``jax_enable_x64`` itself (the benchmarks, the example, ``launch/``, the test suite do).

What the scope does and does not do
-----------------------------------
* Inside it ``jnp`` creates float64/int64 arrays, and ``jax.jit`` keys its caches on the flag (a function
  jitted once outside the scope and once inside gives float32 then float64, never a stale program).
* It is thread-local: a thread started inside the scope sees the global setting (mcacct starts no threads).
* It is re-entrant and free when x64 is already on (the decorator then calls the function directly), so a
  decorated function called from another, or inside a trace of one, costs nothing.
* Inside a *caller's* ``jax.jit`` trace with x64 off, NumPy and Python-float arguments were already traced as
  float32 before mcacct was called (jax float64 arrays stay float64): call mcacct outside ``jit``, or trace
  under :func:`x64_scope` yourself.

What the caller gets back
-------------------------
* Certifying results (``EventsResult``, ``PLDResult``, ``Estimate.delta``/``epsilon``, ``CalibrationResult``,
  individual epsilons, ...) are Python floats and NumPy float64 arrays: unaffected by the caller's flag.
* Samplers and kernels (``sample_y``, ``privacy_loss``, ``sliding_dot``, a scheme's ``loss_kernel``, the
  training transforms) return **jax float64 arrays**. With x64 off in the caller, such an array keeps its
  float64 dtype, but the caller's next ``jnp`` operation on it (outside the scope) computes in float32 --
  convert with ``np.asarray(x)`` first, or keep working inside ``with mcacct.core.precision.x64_scope():``.
  The pytree states of the jit-compatible training transforms and of the GDP filter are float64 jax arrays
  too: step them with mcacct's functions (decorated) or inside the scope.

This module imports only ``jax`` (layer 0: everything may use it).
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, TypeVar

import jax

__all__ = ["float64", "x64_scope", "x64_enabled", "is_float64"]

_F = TypeVar("_F")

# the marker set on every wrapper (checked by tests/test_precision.py through is_float64)
_MARK = "__mcacct_float64__"
# dunder methods of a class that may build arrays: wrapped with the public methods
_CONSTRUCTORS = ("__init__", "__post_init__", "__call__")


def x64_enabled() -> bool:
    """Whether JAX computes in 64 bits here (the global flag, or a scope around this call).

    Returns
    -------
    bool
        The current value of ``jax.config.jax_enable_x64``.
    """
    return bool(jax.config.jax_enable_x64)


def x64_scope():
    """``with x64_scope(): ...``: float64 for the block (``jax.enable_x64(True)``; thread-local, re-entrant);
    the caller's global ``jax_enable_x64`` is unchanged after it.

    Returns
    -------
    contextlib.AbstractContextManager
        The context manager ``jax.enable_x64(True)``.
    """
    return jax.enable_x64(True)


def _wrap_function(fn: Callable) -> Callable:
    if getattr(fn, _MARK, False):
        return fn

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if jax.config.jax_enable_x64:  # already float64 (global flag, or an enclosing scope): no switch
            return fn(*args, **kwargs)
        with jax.enable_x64(True):
            return fn(*args, **kwargs)

    setattr(wrapper, _MARK, True)
    return wrapper


def _wrap_member(value: Any) -> Any:
    if isinstance(value, staticmethod):
        return staticmethod(_wrap_function(value.__func__))
    if isinstance(value, classmethod):
        return classmethod(_wrap_function(value.__func__))
    if isinstance(value, property):
        wrap = (lambda f: None if f is None else _wrap_function(f))
        return property(wrap(value.fget), wrap(value.fset), wrap(value.fdel), value.__doc__)
    if inspect.isfunction(value):
        return _wrap_function(value)
    return value


def _wrap_class(cls: type) -> type:
    for name, value in list(vars(cls).items()):
        if name.startswith("_") and name not in _CONSTRUCTORS:
            continue
        new = _wrap_member(value)
        if new is not value:
            setattr(cls, name, new)
    setattr(cls, _MARK, True)
    return cls


def float64(obj: _F) -> _F:
    """Decorator: run a function -- or every public method, property and constructor of a class -- in float64
    (:func:`x64_scope`), whatever the caller's ``jax_enable_x64``.

    On a class put it above ``@dataclass`` (it wraps the methods the class body and the dataclass define;
    inherited methods are wrapped where their own class is decorated). Decorating twice is harmless.

    Parameters
    ----------
    obj : callable or type
        A function, or a class: its public methods, static and class methods, properties and ``__init__``,
        ``__post_init__`` and ``__call__`` are wrapped in place.

    Returns
    -------
    callable or type
        The wrapper (a function that enters :func:`x64_scope` unless x64 is already on), or the class itself;
        either is marked for :func:`is_float64`.

    Raises
    ------
    TypeError
        If ``obj`` is neither a class nor callable.
    """
    if isinstance(obj, type):
        return _wrap_class(obj)  # type: ignore[return-value]
    if not callable(obj):
        raise TypeError(f"float64 decorates functions and classes; got {type(obj).__name__}")
    return _wrap_function(obj)  # type: ignore[return-value]


def is_float64(obj: Any) -> bool:
    """Whether ``obj`` (a function, method or class) was decorated with :func:`float64`.

    Parameters
    ----------
    obj : object
        A function, a ``staticmethod``/``classmethod`` object (its function is checked), a property (its getter;
        a property without one counts as decorated) or a class (the mark in its own ``__dict__``).

    Returns
    -------
    bool
    """
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        return obj.fget is None or is_float64(obj.fget)
    if isinstance(obj, type):
        return bool(vars(obj).get(_MARK, False))
    return bool(getattr(obj, _MARK, False))
