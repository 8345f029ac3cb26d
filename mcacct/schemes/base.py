r"""The scheme contract: everything the engine, EVR and the job files read from a sampling scheme.

A scheme is a frozen dataclass of parameters that implements :class:`AccountedScheme`. The contract has four
parts:

* **sampling and loss** -- :meth:`~AccountedScheme.sample` returns :class:`Draws` (the outputs ``y`` and any
  auxiliary data, e.g. truncation's counts ``r``); :meth:`~AccountedScheme.log_ratio` is
  :math:`\ln P(y)/Q(y)` of those draws (row-major, checked: the public API);
* **the mechanism** -- :meth:`~AccountedScheme.mechanism` gives, once per strategy and kernel options, the
  :class:`~mcacct.schemes.mechanism.Mechanism` the engine runs: pure time-major functions (``sample``,
  ``log_ratio``, ``losses``), the optional shared-draw ``ladder`` and the bounds that let provably zero
  contributions go uncomputed (``add_loss_bound``, ``bounds_remove_losses``). The scheme itself stays data;
* **the bounds** -- one record, :class:`Bounds`, from :meth:`~AccountedScheme.bounds`: the sensitivity bound (the
  Monte-Carlo-free top of the EVR ladder) and the inputs of every systematic term (:mod:`mcacct.engine.systematic`):
  the output-coordinate bound, the number of uniform-draw boundaries of the participation sampler, the
  total-variation bound of any auxiliary draws and the scheme's loss-error model (:class:`LossErrorModel`; the
  recursion's is :class:`LossErrorParams`). No field has a default;
* **what reports read** -- :meth:`~AccountedScheme.summary` and the PLD hooks.

Each scheme states its own values, with the proof in its docstring; nothing is guessed. :class:`Scheme` is the
base class that gives the public methods (argument checks, row-major/time-major forms, the
:meth:`Scheme.mechanism` that binds its engine hooks ``sample_t``, ``log_ratio_t``, ``losses_t`` and
``ladder_losses``) and the capabilities a scheme has only where it says so (no exact PLD, no baselines, no fused
kernel, no loss bounds); it defaults no bound: its :meth:`Scheme.bounds` gathers the five bounds its subclass
states, one method each (with its proof), and :func:`mcacct.schemes.registry.register` refuses a subclass that
lacks one. A scheme becomes known to the command line and the job files through
:func:`mcacct.schemes.registry.register`.

The adjacency directions are named as everywhere in mcacct: ``"remove"`` (``y ~ P``, loss
:math:`\ln P/Q`) and ``"add"`` (``y ~ Q``, loss :math:`\ln Q/P`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.precision import float64
from mcacct.schemes.mechanism import KernelOptions, Mechanism
from mcacct.schemes.records import BOUND_HOOKS, Bounds, Draws, LossErrorModel, LossErrorParams, SchemeSummary
from mcacct.strategies.banded import BandedToeplitz, check_strategy_type
from mcacct.core.validate import DIRECTIONS, check_call, check_choice, check_fields, is_real_scalar

__all__ = ["AccountedScheme", "Scheme", "MinSepAccounting", "Draws", "Bounds", "LossErrorModel", "LossErrorParams",
           "SchemeSummary", "BOUND_HOOKS", "jit_method",
           "as_strategy", "check_direction", "check_field_types", "check_scheme_fields", "FieldTypeError"]


class FieldTypeError(TypeError, ValueError):
    """A scheme field of the wrong type (text, a bool for a number, ``None``, a sequence, ...). A ``TypeError``,
    and a ``ValueError`` as well so that every caller that answers bad input by catching ``ValueError`` (the
    command line, job files) still does."""


#: the annotation of a scheme field -> (accepts the value, what the message says it must be)
_FIELD_KINDS = {
    "float": (is_real_scalar, "a real number (int or float)"),
    "int": (is_real_scalar, "an integer"),
    "bool": (lambda v: isinstance(v, (bool, np.bool_)), "a bool (True or False)"),
}


def check_field_types(obj: Any) -> None:
    """Refuse, before any value check, a field of the frozen dataclass ``obj`` whose value is not of its
    annotated kind (``float``, ``int``: a number, never text or a bool; ``bool``: a bool): :class:`FieldTypeError`
    naming the field (``BMinSep("0.1", "4", 16)``: ``"sampling_prob must be a real number (int or float)
    (BMinSep.sampling_prob); got str '0.1'"``). Value ranges stay with the scheme's
    ``check_fields``; fields of other annotations are not looked at. Text is refused here rather than parsed so
    that a scheme is always built from numbers (the command line parses its flags first).

    Parameters
    ----------
    obj : dataclass instance
        The scheme (a frozen dataclass) whose fields are checked.

    Raises
    ------
    FieldTypeError
        Naming the first field whose value is not of its annotated kind.
    """
    for f in dataclasses.fields(obj):
        kind = _FIELD_KINDS.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", None))
        if kind is None:
            continue
        ok, what = kind
        value = getattr(obj, f.name)
        if not ok(value):
            raise FieldTypeError(f"{f.name} must be {what} ({type(obj).__name__}.{f.name}); got "
                                 f"{type(value).__name__} {value!r}")


def check_scheme_fields(obj: Any, **checkers) -> None:
    """A scheme's ``__post_init__`` check: :func:`check_field_types` (wrong types refused by type), then
    :func:`mcacct.core.validate.check_fields` with ``checkers`` (ranges checked, values normalised).

    Parameters
    ----------
    obj : dataclass instance
        The scheme being built.
    **checkers : callable
        ``field=checker``; each ``checker(name, value)`` returns the normalised value or raises ``ValueError``.

    Raises
    ------
    ValueError
        A :class:`FieldTypeError` from :func:`check_field_types`, or a checker's error naming the field.
    """
    check_field_types(obj)
    check_fields(obj, **checkers)


@runtime_checkable
class AccountedScheme(Protocol):
    """What the engine, EVR and the job files read from a sampling scheme (nothing else is read).

    ``isinstance(scheme, AccountedScheme)`` checks the members exist; the meaning below is the contract.
    :class:`~mcacct.schemes.bminsep.BMinSep` is the reference implementation.
    """

    @property
    def iterations(self) -> int:
        """The horizon ``n`` (``>= 1``)."""
        ...

    def check_strategy(self, strategy: Any) -> None:
        """Raise ``ValueError`` (naming the parameter) if ``strategy`` (``C``) is not admissible."""
        ...

    def sample(self, key: Any, strategy: Any, sigma: Any, num_samples: int, direction: str = "remove",
               dtype: Any = jnp.float64) -> Draws:
        """``num_samples`` outputs under ``P`` (``"remove"``) or ``Q`` (``"add"``), row-major, with their
        auxiliary data."""
        ...

    def log_ratio(self, y: Any, strategy: Any, sigma: Any, aux: Any = None, direction: str = "remove",
                  dot_method: str = "auto", recursion: str = "auto") -> Any:
        r""":math:`\ln P(y)/Q(y)` per row (a scheme that bounds it states which bound serves which direction:
        an upper bound for ``"remove"``, a lower bound for ``"add"``)."""
        ...

    def mechanism(self, strategy: Any, options: KernelOptions = KernelOptions()) -> Mechanism:
        """The mechanism the engine runs, bound to ``strategy`` and the kernel ``options`` (:class:`Mechanism`:
        pure, traceable functions over time-major arrays, the optional shared-draw ladder and skip bounds);
        unchecked (the engine checks the strategy once, when its problem is built)."""
        ...

    def bounds(self, strategy: Any) -> Bounds:
        """The scheme's proven bounds with ``strategy`` (:class:`Bounds`); ``ValueError`` naming the parameter if
        ``strategy`` is not admissible."""
        ...

    def summary(self) -> SchemeSummary:
        """What reports, plots and the default strategy read about the scheme (:class:`SchemeSummary`)."""
        ...

    def exact_pld(self, strategy: Any) -> Any:
        """An :mod:`mcacct.pld` spec at ``sigma = 1`` whose PLD is exactly the scheme's privacy curve, or
        ``None`` (then EVR certifies its top candidate by the sensitivity of :meth:`bounds`)."""
        ...

    def pld_baselines(self, strategy: Any, epsilon: float, delta: float) -> dict:
        """Sigmas of deterministic (PLD) baselines at the same expected batch size (``{}``: none)."""
        ...


def check_direction(direction: Any) -> str:
    """``"remove"`` or ``"add"``; ``ValueError`` naming ``direction`` otherwise."""
    return check_choice("direction", direction, DIRECTIONS)


def as_strategy(strategy: Any) -> BandedToeplitz:
    """A :class:`~mcacct.strategies.banded.BandedToeplitz`, or ``c_col`` values turned into one.

    Parameters
    ----------
    strategy : BandedToeplitz or sequence of float or str or float
        A strategy, or the ``c_col`` values :class:`BandedToeplitz` accepts.

    Returns
    -------
    BandedToeplitz
        ``strategy`` itself, or ``BandedToeplitz(strategy)``.

    Raises
    ------
    ValueError
        As :class:`BandedToeplitz` for invalid ``c_col`` values.
    """
    return strategy if isinstance(strategy, BandedToeplitz) else BandedToeplitz(strategy)


@float64
class Scheme:
    """Base class of mcacct's schemes: the public, checked forms of the contract; no bound is defaulted.

    A subclass (a frozen dataclass with field ``iterations``) implements ``check_strategy``, the bounds
    :data:`BOUND_HOOKS` -- ``sensitivity_bound(strategy)``, ``output_coordinate_bound(strategy)``,
    ``participation_boundaries()``, ``draw_law_tv()`` and ``loss_error_params()``, gathered by :meth:`bounds` (no
    defaults for bounds: a scheme states each, e.g. that its discrete draws are exact) -- ``summary``
    and the two row-major hooks
    ``draw(key, strategy, sigma, num_samples, direction, dtype) -> Draws`` and
    ``loss_rows(y, strategy, sigma, aux, direction, dot_method, recursion)`` (traceable, unchecked). The
    time-major forms default to transposes of those (the same draws, the same values); a scheme with a native
    time-major path overrides ``sample_t``/``log_ratio_t``.
    """

    #: no shared-work ladder unless the scheme implements one
    shares_ladder_work = False
    #: no remove-loss bound unless the scheme gives one (:attr:`AccountedScheme.bounds_remove_losses`)
    bounds_remove_losses = False
    #: the smallest engine block (samples) the scheme wants (:func:`mcacct.engine.problem.block_size`)
    block_floor = 16
    #: ``(key, num_samples) -> pytree`` or ``None``: draws the engine may make ahead for many blocks (``Mechanism.prepare``)
    prepare_draws = None

    # -- public, checked ---------------------------------------------------------------------------------
    def sample(self, key, strategy, sigma, num_samples: int, direction: str = "remove",
               dtype=jnp.float64) -> Draws:
        """``num_samples`` outputs ``y`` (shape ``(num_samples, n)``) under ``P`` (``direction="remove"``:
        ``y = C x + sigma z``) or ``Q`` (``"add"``: the scheme's null distribution), with the auxiliary data
        :meth:`log_ratio` needs. The same key gives the same draws.

        Parameters
        ----------
        key, strategy, sigma : jax.Array, BandedToeplitz, float
            The ``jax.random`` key, the strategy ``C`` and the noise multiplier.
        num_samples, direction, dtype : int, {"remove", "add"}, dtype
            Rows ``>= 1``, the distribution, and float64 or float32 for ``y``.

        Returns
        -------
        Draws
            ``y`` of shape ``(num_samples, n)`` and ``aux`` (``None`` for schemes without auxiliary data).

        Raises
        ------
        ValueError
            Naming ``strategy`` (not admissible), ``sigma``, ``num_samples``, ``dtype`` or ``direction``.
        """
        check_call(self, strategy=strategy, sigma=sigma, num_samples=num_samples, dtype=dtype)
        return self.draw(key, strategy, sigma, num_samples, check_direction(direction), jnp.dtype(dtype))

    def log_ratio(self, y, strategy, sigma, aux=None, direction: str = "remove", dot_method: str = "auto",
                  recursion: str = "auto"):
        r""":math:`\ln P(y)/Q(y)` for each row of ``y`` (shape ``(..., n)``), given the draws' ``aux``.

        Parameters
        ----------
        y, strategy, sigma, aux : array_like, BandedToeplitz, float, array_like or None
            Outputs of shape ``(..., n)``, the strategy, the noise multiplier and the draws' auxiliary data.
        direction, dot_method, recursion : str
            ``"remove"``/``"add"`` and the kernels (:data:`mcacct.core.validate.DOT_METHODS`, ``RECURSIONS``).

        Returns
        -------
        jax.Array
            Shape ``(...)``: one loss per row.

        Raises
        ------
        ValueError
            Naming ``y``, ``sigma``, ``strategy``, ``dot_method``, ``recursion``, ``aux`` or ``direction``.
        """
        y = check_call(self, y=y, sigma=sigma, strategy=strategy, dot_method=dot_method, recursion=recursion)
        self.check_aux(aux, y)
        return self.loss_rows(y, strategy, sigma, aux, check_direction(direction), dot_method, recursion)

    def bounds(self, strategy) -> Bounds:
        """The :class:`Bounds` the subclass states, one method each (:data:`BOUND_HOOKS`), for ``strategy``.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        Bounds
            ``sensitivity``, ``output_coordinate``, ``participation_boundaries``, ``draw_law_tv``, ``loss_error``.

        Raises
        ------
        ValueError
            As the subclass's ``check_strategy``.
        """
        self.check_strategy(strategy)
        return Bounds(float(self.sensitivity_bound(strategy)), float(self.output_coordinate_bound(strategy)),
                      int(self.participation_boundaries()), float(self.draw_law_tv()), self.loss_error_params())

    def mechanism(self, strategy, options: KernelOptions = KernelOptions()) -> Mechanism:
        """The :class:`Mechanism` of this scheme's engine hooks (``sample_t``, ``log_ratio_t``, ``losses_t``, and
        ``ladder_losses``, ``add_loss_bound``, ``fused_ladder_args`` where it has them), bound to ``strategy`` and
        ``options``: the same functions with the strategy and options fixed, so the same draws and values.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy (not checked here).
        options : KernelOptions, default KernelOptions()
            Kernel dtype, sliding-sum method and recursion.

        Returns
        -------
        Mechanism
            ``ladder`` only when :attr:`shares_ladder_work`.
        """
        dtype, dot, rec = jnp.dtype(options.dtype), options.dot_method, options.recursion

        def sample(key, sigma, num_samples, direction):
            return self.sample_t(key, strategy, sigma, num_samples, direction, jnp.float64)

        def log_ratio(draws, sigma, direction):
            return self.log_ratio_t(draws.y.astype(dtype), strategy, sigma, draws.aux, direction, dot, rec)

        def losses(key, sigma, num_samples, direction):
            return self.losses_t(key, strategy, sigma, num_samples, direction, dtype, dot, rec)

        def ladder(key, sigmas, num_samples, add_bound=None, remove_skip=None, prepared=None):
            extra = {} if prepared is None else {"prepared": prepared}
            return self.ladder_losses(key, strategy, sigmas, num_samples, dtype, dot, rec, add_bound, remove_skip,
                                      **extra)

        shared = self.shares_ladder_work
        prepare = self.prepare_draws if shared else None
        return Mechanism(sample, log_ratio, losses, ladder if shared else None, self.add_loss_bound(),
                         bool(self.bounds_remove_losses), self.fused_ladder_args(strategy), int(self.block_floor),
                         prepare)

    def check_aux(self, aux, y) -> None:
        """Refuse auxiliary data for a scheme that has none (schemes with ``aux`` override this)."""
        if aux is not None:
            raise ValueError(f"aux must be None for {type(self).__name__} (its draws carry no auxiliary data)")

    # -- the engine's forms (traceable, unchecked) -------------------------------------------------------
    def sample_t(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        """Time-major :meth:`sample`: the draws of ``draw`` transposed, ``y`` of shape ``(n, num_samples)``."""
        d = self.draw(key, strategy, sigma, num_samples, direction, dtype)
        return Draws(d.y.T, None if d.aux is None else d.aux.T)

    def log_ratio_t(self, y_t, strategy, sigma, aux_t, direction: str, dot_method: str, recursion: str):
        """Time-major :meth:`log_ratio`: ``loss_rows`` of the transposed ``y_t`` and ``aux_t``."""
        return self.loss_rows(y_t.T, strategy, sigma, None if aux_t is None else aux_t.T, direction, dot_method,
                              recursion)

    def losses_t(self, key, strategy, sigma, num_samples: int, direction: str, dtype, dot_method: str,
                 recursion: str):
        """Losses of one block: :meth:`sample_t` then :meth:`log_ratio_t`, negated for ``"add"`` (``ln Q/P``)."""
        draws = self.sample_t(key, strategy, sigma, num_samples, direction, jnp.float64)
        loss = self.log_ratio_t(draws.y.astype(dtype), strategy, sigma, draws.aux, direction, dot_method, recursion)
        return loss if direction == "remove" else -loss

    def ladder_losses(self, key, strategy, sigmas, num_samples: int, dtype, dot_method: str = "auto",
                      recursion: str = "auto", add_bound: float | None = None, remove_skip=None):
        """Shared-work ladder; the base class has none (``NotImplementedError``)."""
        raise NotImplementedError(f"{type(self).__name__} shares no work between ladder candidates "
                                  "(shares_ladder_work is False): the engine runs its generic loss kernel")

    def add_loss_bound(self) -> float | None:
        """``None``: no proven bound of the add losses, so none is skipped (schemes with one say so)."""
        return None

    # -- capabilities a scheme has only where it says so ---------------------------------------------------
    def fused_ladder_args(self, strategy):
        """``None``: no fused kernel."""
        return None

    def exact_pld(self, strategy):
        """``None``: no exact PLD is known for the scheme."""
        return None

    def pld_baselines(self, strategy, epsilon: float, delta: float) -> dict:
        """``{}``: no baselines."""
        return {}


@float64
class MinSepAccounting(Scheme):
    """Shared pieces of the schemes in which an example participates at most once in any ``min_sep``
    consecutive iterations (fields ``min_sep`` and ``iterations``)."""

    @property
    def max_participations(self) -> int:
        """``ceil(n / b)``: the most participations that fit into ``n`` iterations."""
        return -(-self.iterations // self.min_sep)

    def check_strategy(self, strategy) -> None:
        """``strategy`` must be a :class:`~mcacct.strategies.banded.BandedToeplitz` with ``len(c_col) <= min_sep``.

        Parameters
        ----------
        strategy : object
            The value to check.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`, or if ``len(c_col) > min_sep``.
        """
        check_strategy_type("strategy", strategy)
        strategy.check_min_sep(self.min_sep)

    def sensitivity_bound(self, strategy) -> float:
        r"""``sqrt(ceil(n/b)) ||c||``: at most ``ceil(n/b)`` participations, touching disjoint rows.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``, ``len(c_col) <= min_sep``.

        Returns
        -------
        float
            :math:`\sqrt{\lceil n/b \rceil}\,\|c\|`.
        """
        self.check_strategy(strategy)
        return strategy.worst_case_sensitivity(self.iterations, self.min_sep)

    def output_coordinate_bound(self, strategy) -> float:
        r"""``max |c|``: participations are at least ``min_sep >= len(c_col)`` apart, so each output coordinate
        receives at most one entry of ``c`` (amplitude 1).

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``, ``len(c_col) <= min_sep``.

        Returns
        -------
        float
            :math:`\max_j |c_j|`.
        """
        self.check_strategy(strategy)
        return float(max(abs(v) for v in strategy.c_col))


def jit_method(*static: str):
    """``jax.jit`` a method of a hashable (frozen) scheme: ``self`` and the named arguments are static."""
    def deco(fn):
        jitted = jax.jit(fn, static_argnames=("self",) + static)

        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            return jitted(self, *args, **kwargs)
        return wrapper
    return deco
