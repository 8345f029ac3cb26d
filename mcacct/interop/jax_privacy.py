r"""jax-privacy interop: its batch selection objects as mcacct schemes, and back.

jax-privacy (2.0) describes how a training loop forms its batches with a frozen dataclass of
``jax_privacy.batch_selection``; mcacct accounts the same sampling with a scheme. The mapping (field by field in
``docs/interop.md``):

================================================  ==========================================================
jax-privacy                                        mcacct
================================================  ==========================================================
``BMinSepSampling(p, n, b, warm_start)``           ``BMinSep(p, b, n, warm_start)``
``BMinSepSampling(..., truncated_batch_size=B)``   ``TruncatedBMinSep(p, b, n, M, B, warm_start)``
``CyclicPoissonSampling(q, n, cycle_length=b)``    ``CyclicPoisson(q, b, n, random_phase)``
``BallsInBinsSampling(n, b)``                      ``BallsInBins(b, n)``
================================================  ==========================================================

The batch selection is not the mechanism: the strategy ``C`` (``c_col``) and, for truncation, the dataset size
``M`` come from the caller. ``CyclicPoissonSampling``'s ``partition_type`` decides what the adversary may know
of an example's part: ``EQUAL_SPLIT`` (jax-privacy's default) splits a random permutation into parts of equal
size, so the part of one example is tied to the others' and mcacct analyses the public-partition worst case
(``random_phase=False``, the composition of :math:`\lceil n/b \rceil` Poisson-subsampled Gaussians that
jax-privacy's own PLD accounting uses); ``INDEPENDENT`` draws every example's part uniformly and independently,
a secret shift (``random_phase=True``). Whatever mcacct does not model is refused by name: truncated cyclic
Poisson, a field this module does not know (a newer jax-privacy), any other class or subclass.

Noise multipliers. mcacct's mechanism is :math:`y = C x + \sigma z` with ``C`` as given (``c_col`` not
normalised) and the clip norm as unit, so :math:`\sigma` is the noise standard deviation of the ``C``-domain
per unit of clip norm. jax-privacy's BandMF noise multiplier :math:`\sigma_{jp}` assumes a strategy with
largest column norm 1: its privatizer adds :math:`C^{-1}` applied to noise of standard deviation
:math:`\sigma_{jp}\,\Delta\,\|c\|_2` (``Delta`` the clipped sum's sensitivity). Hence

.. math::  \sigma_{\mathrm{mcacct}} = \sigma_{jp}\, \|c\|_2 ,

equal when :math:`\|c\|_2 = 1` (mcacct's optimised strategies); :func:`noise_multiplier_to_jax_privacy` and
:func:`noise_multiplier_from_jax_privacy` convert. jax-privacy's ``column_normalize=True`` rescales the
truncated last columns of ``C`` up to norm 1: that ``C`` is not banded Toeplitz and mcacct's accounting of
``BandedToeplitz(c_col)`` does not cover it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

from mcacct.engine.problem import Problem
from mcacct.core.precision import float64
from mcacct.schemes import registry
from mcacct.schemes.base import AccountedScheme
from mcacct.schemes.entry import JaxPrivacyEntry, SchemeInfo
from mcacct.strategies.banded import BandedToeplitz, parse_c_col
from mcacct.core.validate import check_count, check_real

__all__ = ["from_jax_privacy", "to_jax_privacy", "problem_from_jax_privacy", "noise_multiplier_to_jax_privacy",
           "noise_multiplier_from_jax_privacy", "supported_batch_selections"]

_MODULE = "jax_privacy.batch_selection"

#: Why some other jax-privacy classes are refused (added to the message).
_HINTS = {
    "FixedBatchSampling": "fixed-size batches drawn without regard to earlier batches are not modelled by mcacct",
    "UserSelectionStrategy": ("user-level sampling: if each user's rows are clipped together, account the users "
                              "as examples with from_jax_privacy(selection.base_strategy)"),
}


def _mappings() -> tuple[tuple[SchemeInfo, JaxPrivacyEntry], ...]:
    """``(info, info.jax_privacy)`` of every registered scheme with a jax-privacy batch selection."""
    return tuple((e, e.jax_privacy) for e in registry.schemes() if e.jax_privacy is not None)


@float64
def supported_batch_selections() -> tuple[str, ...]:
    """The ``jax_privacy.batch_selection`` classes :func:`from_jax_privacy` accepts: those of the registered schemes'
    entries (:attr:`mcacct.schemes.entry.SchemeInfo.jax_privacy`), in registry order.

    Returns
    -------
    tuple of str
        Class names without duplicates (e.g. ``"BMinSepSampling"``).
    """
    return tuple(dict.fromkeys(m.selection for _, m in _mappings()))


def _class_name(selection: Any) -> str | None:
    """The supported class ``selection`` is an instance of (exactly, not a subclass), or ``None``."""
    cls = type(selection)
    if cls.__module__ == _MODULE and cls.__qualname__ in supported_batch_selections():
        return cls.__qualname__
    return None


def _check_fields(selection: Any, name: str) -> None:
    """Refuse a field this module does not know: it might change the sampling, hence the privacy analysis."""
    if not dataclasses.is_dataclass(selection):
        return
    known = tuple(dict.fromkeys(f for _, m in _mappings() if m.selection == name for f in m.fields))
    extra = [f.name for f in dataclasses.fields(selection) if f.name not in known]
    if extra:
        raise ValueError(f"batch_selection.{extra[0]} is not modelled by mcacct: {name} has fields {extra} beyond "
                         f"jax-privacy 2.0's {list(known)}, and mcacct does not know how they change the sampling")


@float64
def from_jax_privacy(batch_selection: Any, c_col: Sequence[float] | None = None,
                     dataset_size: int | None = None) -> AccountedScheme:
    r"""The mcacct scheme that accounts a jax-privacy batch selection.

    Parameters
    ----------
    batch_selection : jax_privacy.batch_selection object
        A ``BMinSepSampling`` (with or without ``truncated_batch_size``), ``CyclicPoissonSampling`` (without
        truncation) or ``BallsInBinsSampling`` of jax-privacy 2.0; anything else, a subclass included, raises
        ``ValueError`` naming the class and listing these.
    c_col : sequence of float, optional
        The strategy's first-column non-zeros. Not part of the batch selection; when given it is checked
        against the scheme now (e.g. ``len(c_col) <= min_sep``), so that a mismatch surfaces here. The return
        value is the scheme either way: :func:`problem_from_jax_privacy` builds the :class:`~mcacct.Problem`.
    dataset_size : int, optional
        ``M``, the ``num_examples`` the training loop gives ``batch_iterator``. Required with truncation
        (``BMinSepSampling(..., truncated_batch_size=B)`` is ``TruncatedBMinSep(p, b, n, M, B)``) and refused
        without it (``ValueError``: no other scheme has a dataset size, so it would be ignored).

    Returns
    -------
    BMinSep, TruncatedBMinSep, CyclicPoisson or BallsInBins
        The same sampling law: b-min-sep with the stationary participation rate
        :math:`p_0 = 1/(1/p + b - 1)`; cyclic Poisson with ``random_phase = (partition_type is INDEPENDENT)``
        and rate :math:`q/b`; balls-in-bins with rate :math:`1/b`.

    Raises
    ------
    ValueError
        An unsupported class, an option mcacct does not model (named), a value outside mcacct's ranges
        (``"batch_selection.FIELD must be in RANGE; got VALUE"``), or a missing or unused ``dataset_size``.
    """
    name = _class_name(batch_selection)
    if name is None:
        cls = type(batch_selection)
        hint = _HINTS.get(cls.__qualname__) if cls.__module__ == _MODULE else None
        raise ValueError(f"batch_selection must be one of jax-privacy's {', '.join(supported_batch_selections())}; "
                         f"got {cls.__module__}.{cls.__qualname__}" + (f" ({hint})" if hint else ""))
    _check_fields(batch_selection, name)
    if dataset_size is not None:
        dataset_size = check_count("dataset_size", dataset_size)
    scheme = next((s for s in (m.from_selection(batch_selection, dataset_size) for _, m in _mappings()
                               if m.selection == name) if s is not None), None)
    if scheme is None:
        raise ValueError(f"batch_selection {batch_selection!r} is not modelled by any registered scheme")
    if c_col is not None:
        scheme.check_strategy(BandedToeplitz(c_col))
    return scheme


@float64
def problem_from_jax_privacy(batch_selection: Any, c_col: Sequence[float] | None,
                             dataset_size: int | None = None) -> Problem:
    """``Problem(from_jax_privacy(batch_selection, c_col, dataset_size), BandedToeplitz(c_col))``.

    ``c_col`` is required: jax-privacy's batch selection does not carry the strategy, and accounting with
    another ``C`` than the one training uses certifies nothing. Pass the Toeplitz coefficients the privatizer
    is built from (e.g. ``BandMFExecutionPlanConfig.strategy``; ``(1.0,)`` for DP-SGD); ``sigma`` then follows
    the convention of the module docstring (``noise_multiplier_to_jax_privacy`` for jax-privacy's).

    Parameters
    ----------
    batch_selection : jax_privacy.batch_selection object
        As for :func:`from_jax_privacy`.
    c_col : sequence of float
        The strategy's first-column non-zeros (``None`` is refused).
    dataset_size : int, optional
        As for :func:`from_jax_privacy`.

    Returns
    -------
    Problem
        The scheme of :func:`from_jax_privacy` with the strategy ``BandedToeplitz(c_col)``.

    Raises
    ------
    ValueError
        If ``c_col`` is ``None`` (``"c_col is required: ..."``), ``c_col`` is not a valid strategy column, or
        :func:`from_jax_privacy` refuses the batch selection.
    """
    if c_col is None:
        raise ValueError("c_col is required: jax-privacy's batch selection does not carry the strategy matrix C; "
                         "pass the Toeplitz coefficients the training loop's privatizer uses ((1.0,) for DP-SGD)")
    strategy = BandedToeplitz(c_col)
    return Problem(from_jax_privacy(batch_selection, strategy.c_col, dataset_size), strategy)


def _jax_privacy_batch_selection():
    try:
        from jax_privacy import batch_selection
    except ImportError as err:
        raise ImportError("mcacct.to_jax_privacy needs jax-privacy, which is not installed: "
                          "pip install jax-privacy") from err
    return batch_selection


@float64
def to_jax_privacy(scheme: AccountedScheme | Problem) -> Any:
    """The jax-privacy batch selection that samples as ``scheme`` does (the training side of the account).

    Parameters
    ----------
    scheme : AccountedScheme or Problem
        A registered scheme whose entry has a jax-privacy batch selection
        (:attr:`mcacct.schemes.entry.SchemeInfo.jax_privacy`): among the built-in ones ``BMinSep``,
        ``TruncatedBMinSep``, ``CyclicPoisson`` and ``BallsInBins``. A :class:`~mcacct.Problem` stands for its
        scheme. The scheme's own class must be registered: a subclass may sample differently from its base, so
        it does not borrow its base's mapping.

    Returns
    -------
    jax_privacy.batch_selection object
        ``BMinSepSampling`` (``truncated_batch_size = max_batch_size`` for a truncated scheme: call its
        ``batch_iterator`` with ``num_examples = scheme.dataset_size``), ``CyclicPoissonSampling``
        (``partition_type`` ``INDEPENDENT`` for a random phase, else ``EQUAL_SPLIT``) or
        ``BallsInBinsSampling``. :func:`from_jax_privacy` maps it back to ``scheme``, except that
        a scheme with ``min_sep = 1`` is returned with ``warm_start=False`` (for ``b = 1`` the warm start
        changes nothing, and jax-privacy 2.0's warm start needs ``min_sep >= 2``).

    Raises
    ------
    ValueError
        A scheme without a jax-privacy counterpart (``MultiAttribution``, ``BandedInverse``, an unregistered
        class, ...), naming the schemes that have one.
    ImportError
        jax-privacy is not installed (``pip install jax-privacy``); it is imported only here.
    """
    if isinstance(scheme, Problem):
        scheme = scheme.scheme
    info = registry.entry_for(scheme)
    if info is None or info.cls is not type(scheme) or info.jax_privacy is None:
        names = ", ".join(e.cls.__name__ for e, _ in _mappings())
        raise ValueError(f"scheme must be one of mcacct's {names} (the registered schemes with a jax-privacy batch "
                         f"selection); got {type(scheme).__name__}")
    return info.jax_privacy.to_selection(scheme, _jax_privacy_batch_selection())


def _column_norm(c_col: Sequence[float]) -> float:
    return math.sqrt(math.fsum(v * v for v in parse_c_col(c_col)))


@float64
def noise_multiplier_to_jax_privacy(sigma: float, c_col: Sequence[float]) -> float:
    r"""jax-privacy's BandMF noise multiplier for mcacct's :math:`\sigma` and strategy ``c_col``:
    :math:`\sigma_{jp} = \sigma / \|c\|_2` (module docstring; its privatizer's ``stddev`` is then
    :math:`\sigma_{jp} \Delta \|c\|_2 = \sigma \Delta`).

    Parameters
    ----------
    sigma : float
        mcacct's noise multiplier, ``> 0``.
    c_col : sequence of float
        The strategy's first-column non-zeros :math:`c` (checked as :func:`~mcacct.strategies.banded.parse_c_col`
        does).

    Returns
    -------
    float
        :math:`\sigma / \|c\|_2`.

    Raises
    ------
    ValueError
        Naming ``sigma`` if it is not a finite number ``> 0``, or ``c_col`` if it is not a valid strategy column.
    """
    return check_real("sigma", sigma, low=0.0, low_open=True) / _column_norm(c_col)


@float64
def noise_multiplier_from_jax_privacy(noise_multiplier: float, c_col: Sequence[float]) -> float:
    r"""mcacct's :math:`\sigma` for jax-privacy's BandMF noise multiplier: :math:`\sigma_{jp} \|c\|_2`.

    Parameters
    ----------
    noise_multiplier : float
        jax-privacy's noise multiplier :math:`\sigma_{jp}`, ``> 0``.
    c_col : sequence of float
        The strategy's first-column non-zeros :math:`c` (checked as :func:`~mcacct.strategies.banded.parse_c_col`
        does).

    Returns
    -------
    float
        :math:`\sigma_{jp} \|c\|_2`.

    Raises
    ------
    ValueError
        Naming ``noise_multiplier`` if it is not a finite number ``> 0``, or ``c_col`` if it is not a valid strategy
        column.
    """
    return check_real("noise_multiplier", noise_multiplier, low=0.0, low_open=True) * _column_norm(c_col)
