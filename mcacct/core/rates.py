r"""Sampling-rate conversions of b-min-sep subsampling (Dong & Ganesh 2026, arXiv:2602.09338).

Under b-min-sep subsampling every example not in the last :math:`b - 1` batches joins the next batch
independently with probability :math:`p` (the *sampling probability*). Per example this is a Markov chain on the
number :math:`s \in \{0, \dots, b-1\}` of iterations it is still barred for: from :math:`0` it goes to
:math:`b - 1` with probability :math:`p` (it participates), else stays; from :math:`s > 0` it goes to
:math:`s - 1` (their Fig. 1). The time between two participations is :math:`b - 1` plus a geometric wait of
mean :math:`1/p`, so the stationary *participation rate* (the expected fraction of the dataset in a batch) is

.. math:: p_0 = \frac{1}{1/p + b - 1}, \qquad\text{inverted by}\qquad p = \frac{p_0}{1 - p_0 (b - 1)}.

:math:`p_0` increases with :math:`p` from :math:`0` to :math:`1/b` (at :math:`p = 1`), so a rate is feasible iff
:math:`0 < p_0 \le 1/b`: no example takes part in more than one of any :math:`b` consecutive iterations.
``b = 1`` is Poisson subsampling (:math:`p_0 = p`).

This is the one place of these formulas: the accounted schemes (:mod:`mcacct.schemes`) and the training samplers
(:mod:`mcacct.training.batching`) both call it.
"""

from __future__ import annotations

from typing import Any

from mcacct.core.validate import check_int, check_prob, check_real

__all__ = ["participation_rate", "sampling_prob_from_rate", "sampling_prob_from_batch_size",
           "stationary_available_prob"]


def stationary_available_prob(sampling_prob: Any, min_sep: Any) -> Any:
    r"""The stationary probability that an example is available (state :math:`s = 0` of the chain above):

    .. math:: \pi(0) = \frac{1}{1 + (b - 1) p},

    the others states :math:`1, \dots, b - 1` having :math:`p/(1 + (b-1)p)` each: the warm start's law (Alg. 2).
    Unchecked and traceable (both samplers of that law call it: the accounted one,
    :func:`mcacct.kernels.participation.participation_times`, and the training one,
    :func:`mcacct.training.batching.transitions.warm_blocked`).

    Parameters
    ----------
    sampling_prob : float or array
        :math:`p \in (0, 1]`, in the caller's precision.
    min_sep : int or array
        :math:`b \ge 1`.

    Returns
    -------
    float or array
        :math:`\pi(0)`, of ``sampling_prob``'s type.
    """
    return 1.0 / (1.0 + (min_sep - 1) * sampling_prob)


def participation_rate(sampling_prob: Any, min_sep: Any) -> float:
    r"""The stationary participation rate :math:`p_0` of b-min-sep subsampling.

    .. math:: p_0 = \frac{1}{1/p + b - 1},

    the reciprocal of the expected time :math:`b - 1 + 1/p` between two participations of one example
    (Dong & Ganesh 2026, arXiv:2602.09338, Fig. 1).

    Parameters
    ----------
    sampling_prob : float
        The sampling probability :math:`p \in (0, 1]` of an available example.
    min_sep : int
        The minimum separation :math:`b \ge 1`.

    Returns
    -------
    float
        :math:`p_0 \in (0, 1/b]`.

    Raises
    ------
    ValueError
        If a parameter is outside its range.
    """
    p = check_prob("sampling_prob", sampling_prob)
    b = check_int("min_sep", min_sep, low=1)
    return 1.0 / (1.0 / p + b - 1)


def sampling_prob_from_rate(rate: Any, min_sep: Any) -> float:
    r"""The sampling probability :math:`p` whose stationary participation rate is ``rate``: the inverse of
    :func:`participation_rate`,

    .. math:: p = \frac{p_0}{1 - p_0 (b - 1)}, \qquad 0 < p_0 \le 1/b

    (at :math:`p_0 = 1/b`, :math:`p = 1`; a result that rounds above 1 is returned as 1).

    Parameters
    ----------
    rate : float
        The participation rate :math:`p_0 \in (0, 1/b]`.
    min_sep : int
        The minimum separation :math:`b \ge 1`.

    Returns
    -------
    float
        :math:`p \in (0, 1]`.

    Raises
    ------
    ValueError
        If ``min_sep < 1`` or ``rate`` is not in ``(0, 1/min_sep]`` (no example can take part in more than one
        of every ``b`` iterations).
    """
    b = check_int("min_sep", min_sep, low=1)
    p0 = check_real("rate", rate, low=0.0, high=1.0 / b, low_open=True)
    return _inverse(p0, b)


def sampling_prob_from_batch_size(expected_batch_size: Any, dataset_size: Any, min_sep: Any) -> float:
    r"""The sampling probability :math:`p` that gives an expected batch size :math:`B` on a dataset of :math:`M`
    examples: :func:`sampling_prob_from_rate` of :math:`p_0 = B / M`,

    .. math:: p = \frac{p_0}{1 - p_0 (b - 1)}, \qquad p_0 = \frac{B}{M} \le \frac{1}{b}.

    Parameters
    ----------
    expected_batch_size : float
        :math:`B \in (0, M/b]` (at most one example in ``b`` can be in a batch).
    dataset_size : int
        :math:`M \ge 1`.
    min_sep : int
        The minimum separation :math:`b \ge 1`.

    Returns
    -------
    float
        :math:`p \in (0, 1]`.

    Raises
    ------
    ValueError
        If a parameter is outside its range (``expected_batch_size`` not in ``(0, dataset_size/min_sep]``).
    """
    m = check_int("dataset_size", dataset_size, low=1)
    b = check_int("min_sep", min_sep, low=1)
    bs = check_real("expected_batch_size", expected_batch_size, low=0.0, high=m / b, low_open=True)
    return _inverse(bs / m, b)


def _inverse(p0: float, b: int) -> float:
    """``p0 / (1 - p0 (b - 1))`` for a checked ``0 < p0 <= 1/b`` (up to rounding), capped at 1."""
    den = 1.0 - p0 * (b - 1)
    return 1.0 if den <= p0 else p0 / den
