r"""One entry per scheme: :class:`SchemeInfo`, everything mcacct knows about a scheme besides its mechanism.

A scheme's class (a frozen dataclass implementing :class:`~mcacct.schemes.base.AccountedScheme`) is the mechanism:
sampling, losses, bounds, its exact PLD. Its entry says how the rest of mcacct offers it, each facet optional:

* ``cli`` -- its flags and builder on the command line (:class:`~mcacct.schemes.flags.SchemeCLI`);
* ``compare`` -- its row of ``mcacct compare`` (:class:`CompareRow`: a plan from a :class:`CompareSetting`);
* ``jax_privacy`` -- its jax-privacy batch selection, both ways (:class:`JaxPrivacyEntry`).

Each scheme module declares its entry next to the class (``INFO``); :mod:`mcacct.schemes.registry` lists them, and
every consumer (the command line, ``mcacct compare``, the interop, the job files, the plots) reads the registry:
no table keyed by a scheme's name exists anywhere else. The entry's types are data only: they import nothing
above the schemes (a compare plan gives a scheme and a strategy, and the report builds the problem).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from mcacct.core.precision import float64
from mcacct.core.rates import sampling_prob_from_batch_size
from mcacct.schemes.base import BOUND_HOOKS, AccountedScheme, Scheme
from mcacct.schemes.flags import SchemeCLI
from mcacct.strategies.banded import BandedToeplitz

__all__ = ["SchemeInfo", "CompareSetting", "ComparePlan", "CompareRow", "JaxPrivacyEntry", "missing_members",
           "selection_field", "refuse_dataset_size", "SCHEME_HOOKS"]

#: the hooks through which :class:`~mcacct.schemes.base.Scheme`'s public forms draw and compute losses, and through
#: which its :meth:`~mcacct.schemes.base.Scheme.bounds` gathers the bounds its subclass states (needed unless the
#: subclass gives ``bounds`` itself)
SCHEME_HOOKS = ("draw", "loss_rows") + BOUND_HOOKS


def missing_members(cls: type) -> list[str]:
    """The members of the scheme contract (:class:`~mcacct.schemes.base.AccountedScheme`; for a subclass of
    :class:`~mcacct.schemes.base.Scheme` also its hooks :data:`SCHEME_HOOKS`, the bound hooks only where it does
    not give ``bounds`` itself) that ``cls`` neither defines
    nor inherits, in the contract's order. A dataclass field counts as defined.

    Parameters
    ----------
    cls : type
        The class to inspect.

    Returns
    -------
    list of str
        The missing member names (empty: the contract is complete).
    """
    required = [m for m in vars(AccountedScheme) if not m.startswith("_")]
    if isinstance(cls, type) and issubclass(cls, Scheme):
        own_bounds = cls.bounds is not Scheme.bounds
        required += [m for m in SCHEME_HOOKS if not (own_bounds and m in BOUND_HOOKS)]
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    return [m for m in required if m not in fields and not hasattr(cls, m)]


# -- mcacct compare ----------------------------------------------------------------------------------------
@float64
@dataclass(frozen=True)
class CompareSetting:
    """One ``mcacct compare`` configuration: every row gets the parameters that give this expected batch size.

    Parameters
    ----------
    iterations : int
        ``n``.
    min_sep : int
        ``b``: b-min-sep's separation and cyclic Poisson's cycle length.
    expected_batch_size : float
        ``B``.
    dataset_size : int
        ``M``.
    strategy : BandedToeplitz
        ``C``.
    options : mapping of str to object
        The values of the rows' options (``max_batch_size``, ...) by dest name, ``None`` if not given.
    """

    iterations: int
    min_sep: int
    expected_batch_size: float
    dataset_size: int
    strategy: BandedToeplitz
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def participation_rate(self) -> float:
        """``p0 = B / M``."""
        return self.expected_batch_size / self.dataset_size

    @property
    def sampling_prob(self) -> float:
        """b-min-sep's ``p = p0 / (1 - p0 (b-1))`` (checks ``B / M <= 1/b``).

        Returns
        -------
        float
            :math:`p = p_0 / (1 - p_0 (b - 1))` with :math:`p_0 = B / M`, capped at 1.

        Raises
        ------
        ValueError
            Naming ``expected_batch_size`` if :math:`B / M > 1/b` (or a field out of range).
        """
        return sampling_prob_from_batch_size(self.expected_batch_size, self.dataset_size, self.min_sep)

    def option(self, dest: str, default: Any = None) -> Any:
        """The value of option ``dest``, or ``default`` when not given.

        Parameters
        ----------
        dest : str
            The option's dest name.
        default : object, optional
            Returned when the option is absent or ``None``.

        Returns
        -------
        object
            The option's value, or ``default``.
        """
        v = self.options.get(dest)
        return default if v is None else v


@float64
@dataclass(frozen=True)
class ComparePlan:
    """A scheme's row of ``mcacct compare`` for one :class:`CompareSetting`.

    Parameters
    ----------
    scheme, strategy : object
        What the row calibrates (``scheme=None``: the row is skipped, ``skip`` says why).
    params : dict
        Extra parameters reported next to the scheme's fields.
    pld_spec : object or None
        An :mod:`mcacct.pld` spec at ``sigma = 1`` when the scheme itself has a PLD analysis at this setting; the
        row's PLD sigma is ``pld_scale * pld_calibrate(pld_spec, epsilon, delta)``.
    pld_scale : float
        See ``pld_spec``.
    skip : str or None
        Why the row does not apply (with ``scheme=None``).
    """

    scheme: Any
    strategy: BandedToeplitz | None = None
    params: dict = field(default_factory=dict)
    pld_spec: Any = None
    pld_scale: float = 1.0
    skip: str | None = None

    @classmethod
    def skipped(cls, reason: str) -> "ComparePlan":
        """A row that does not apply, with the reason.

        Parameters
        ----------
        reason : str
            Why the row does not apply.

        Returns
        -------
        ComparePlan
            ``scheme=None``, ``skip=reason``.
        """
        return cls(None, skip=reason)


@dataclass(frozen=True)
class CompareRow:
    """A scheme's row of ``mcacct compare`` (:attr:`SchemeInfo.compare`).

    Parameters
    ----------
    plan : callable
        ``plan(setting: CompareSetting) -> ComparePlan``.
    options : mapping of str to callable
        ``dest -> check(name, value)`` of the row's options: giving one adds the row (the command line offers the
        scheme flag of the same ``dest``).
    """

    plan: Callable[[CompareSetting], ComparePlan]
    options: Mapping[str, Callable[[str, Any], Any]] = field(default_factory=dict)


# -- jax-privacy -------------------------------------------------------------------------------------------
def selection_field(name: str) -> str:
    """How a refusal names a field of the jax-privacy batch selection (``batch_selection.min_sep``).

    Parameters
    ----------
    name : str
        The field's name.

    Returns
    -------
    str
        ``'batch_selection.' + name``.
    """
    return f"batch_selection.{name}"


def refuse_dataset_size(dataset_size: int | None, what: str) -> None:
    """Refuse a ``dataset_size`` that the scheme would not use (only truncation counts the other examples).

    Parameters
    ----------
    dataset_size : int or None
        The value given.
    what : str
        The selection it was given with, for the message.

    Raises
    ------
    ValueError
        If ``dataset_size`` is not ``None`` (the message names ``dataset_size`` and ``what``).
    """
    if dataset_size is not None:
        raise ValueError(f"dataset_size does not apply to {what} (mcacct's scheme has no dataset size; it is "
                         "needed only with BMinSepSampling(..., truncated_batch_size=B)); got "
                         f"{dataset_size!r}")


@dataclass(frozen=True)
class JaxPrivacyEntry:
    """A scheme's jax-privacy 2.0 batch selection (:attr:`SchemeInfo.jax_privacy`), read by
    :mod:`mcacct.interop.jax_privacy`.

    Parameters
    ----------
    selection : str
        The class name in ``jax_privacy.batch_selection`` (``"BMinSepSampling"``). Several schemes may share one
        class (b-min-sep with and without truncation).
    fields : tuple of str
        That class's jax-privacy 2.0 fields, all of which enter the mapping (a selection with another field is
        refused: it might change the sampling).
    from_selection : callable
        ``from_selection(selection, dataset_size) -> scheme``, or ``None`` when the selection is another scheme's
        (of the same class); refusals name ``batch_selection.FIELD`` (:func:`selection_field`).
    to_selection : callable
        ``to_selection(scheme, batch_selection_module) -> selection``: the training side of the account.
    """

    selection: str
    fields: tuple[str, ...]
    from_selection: Callable[[Any, int | None], Any]
    to_selection: Callable[[Any, Any], Any]


# -- the entry ---------------------------------------------------------------------------------------------
@float64
@dataclass(frozen=True)
class SchemeInfo:
    """The entry of one accounted scheme: its name, class and how mcacct offers it.

    Parameters
    ----------
    name : str
        Registry name, also the command line's ``--scheme NAME`` and the ``type`` of the scheme in job files
        (e.g. ``"bminsep"``).
    cls : type
        The scheme's class: a frozen dataclass implementing :class:`~mcacct.schemes.base.AccountedScheme`
        (checked: a missing member is named).
    summary : str
        One line (``--scheme``'s help).
    label : str, optional
        Name of the scheme's row in ``mcacct compare`` (default ``name``); accepted wherever ``name`` is.
    compare_default : bool
        Whether ``mcacct compare`` runs the row by default (otherwise only when one of its options is given or it
        is named in ``--schemes``); needs ``compare``.
    cli : SchemeCLI, optional
        Its command line; without one the scheme is not offered by the command line (the Python API, job files
        and calibration take it all the same).
    compare : CompareRow, optional
        Its row of ``mcacct compare``; without one it has no row.
    jax_privacy : JaxPrivacyEntry, optional
        Its jax-privacy batch selection; without one :func:`mcacct.to_jax_privacy` refuses it.
    """

    name: str
    cls: type
    summary: str = ""
    label: str | None = None
    compare_default: bool = False
    cli: SchemeCLI | None = None
    compare: CompareRow | None = None
    jax_privacy: JaxPrivacyEntry | None = None

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
        for facet, kind in (("cli", SchemeCLI), ("compare", CompareRow), ("jax_privacy", JaxPrivacyEntry)):
            value = getattr(self, facet)
            if value is not None and not isinstance(value, kind):
                raise ValueError(f"SchemeInfo.{facet} must be a {kind.__name__} or None; got {type(value).__name__}")
        if self.compare_default and self.compare is None:
            raise ValueError(f"SchemeInfo.compare_default needs a compare row (SchemeInfo.compare) for {self.name!r}")
