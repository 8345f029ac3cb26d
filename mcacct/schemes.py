r"""Sampling schemes: how the participation vector ``x`` of one example is drawn.

b-min-sep subsampling (paper 003, Alg. 1) runs Poisson sampling with probability ``p`` at every
iteration but excludes examples that participated in the previous ``b - 1`` iterations. Per example this
is a renewal process: the gap between consecutive participations is ``(b - 1) + G`` with
``G ~ Geometric(p)`` on ``{1, 2, ...}``. The stationary participation rate is

.. math::  p_0 = \frac{1}{1/p + b - 1}, \qquad p = \frac{p_0}{1 - p_0 (b - 1)}.

The warm start (Alg. 2) draws the initial state from the stationary law: available with probability
``1 / (1 + (b-1) p)``, otherwise blocked for a further ``A ~ Uniform{1..b-1}`` iterations, so the first
participation is at iteration ``A + G`` (``A = 0`` when available). ``b = 1`` is Poisson sampling;
``p = 1`` with the warm start is balls-in-bins with ``b`` bins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from mcacct.validate import (check_bool, check_call, check_count, check_fields, check_int, check_prob, check_real,
                              check_strategy_type)

__all__ = ["BMinSep", "sampling_prob_from_batch_size", "expected_participation_rate", "AccountedScheme"]


@runtime_checkable
class AccountedScheme(Protocol):
    """What the Monte Carlo engine needs from a sampling scheme (implemented by frozen dataclasses).

    ``isinstance(scheme, AccountedScheme)`` checks that the four members exist (it is runtime-checkable);
    the meaning below is the contract. :class:`BMinSep` is the reference implementation; the registry of
    every scheme the command line, the job files and ``mcacct compare`` know is :mod:`mcacct.registry`.
    """

    @property
    def iterations(self) -> int:
        """The horizon ``n`` (``>= 1``)."""
        ...

    def check_strategy(self, strategy: Any) -> None:
        """Raise ``ValueError`` (naming the parameter) if ``strategy`` (``C``) is not admissible for the scheme."""
        ...

    def loss_kernel(self, key: Any, sigma: Any, strategy: Any, num_samples: int, positive: bool, dtype: Any,
                    dot_method: str = "auto", recursion: str = "auto") -> Any:
        """A pure, jit-traceable function returning ``num_samples`` privacy losses: ``ln P/Q`` of ``y ~ P``
        when ``positive`` and ``ln Q/P`` of ``y ~ Q`` otherwise (randomness drawn in float64)."""
        ...

    def sensitivity_bound(self, strategy: Any) -> float:
        """An upper bound on ``||C x||`` over every participation pattern the scheme can produce (it certifies
        the Monte-Carlo-free top of the EVR ladder)."""
        ...


class MinSepAccounting:
    """The :class:`AccountedScheme` pieces shared by every scheme in which an example participates at most once
    in any ``min_sep`` consecutive iterations (fields ``min_sep`` and ``iterations``)."""

    @property
    def max_participations(self) -> int:
        """``ceil(n / b)``: the most participations that fit into ``n`` iterations."""
        return -(-self.iterations // self.min_sep)

    def check_strategy(self, strategy) -> None:
        """``strategy`` must be a :class:`~mcacct.strategy.BandedToeplitz` with ``len(c_col) <= min_sep``."""
        check_strategy_type("strategy", strategy)
        strategy.check_min_sep(self.min_sep)

    def sensitivity_bound(self, strategy) -> float:
        """``sqrt(ceil(n/b)) ||c||``: at most ``ceil(n/b)`` participations, touching disjoint rows."""
        self.check_strategy(strategy)
        return strategy.worst_case_sensitivity(self.iterations, self.min_sep)


@dataclass(frozen=True)
class BMinSep(MinSepAccounting):
    """b-min-sep subsampling of one example over ``iterations`` steps.

    Parameters
    ----------
    sampling_prob:
        ``p`` in ``(0, 1]``: the probability that an *available* example is included.
    min_sep:
        ``b >= 1``: no example participates in two iterations closer than ``b``. ``b = 1`` is Poisson.
    iterations:
        ``n >= 1``: the number of training iterations.
    warm_start:
        Start from the stationary distribution (Alg. 2, default) rather than all-available (Alg. 1).
    """

    sampling_prob: float
    min_sep: int
    iterations: int
    warm_start: bool = True

    def __post_init__(self) -> None:
        check_fields(self, sampling_prob=check_prob, min_sep=check_count, iterations=check_count,
                     warm_start=check_bool)

    @property
    def participation_rate(self) -> float:
        """Stationary expected participation rate ``p0 = 1 / (1/p + b - 1)``."""
        return expected_participation_rate(self.sampling_prob, self.min_sep)

    # -- AccountedScheme (check_strategy, sensitivity_bound: MinSepAccounting) ------------------------------
    def loss_kernel(self, key, sigma, strategy, num_samples: int, positive: bool, dtype,
                    dot_method: str = "auto", recursion: str = "auto"):
        import jax.numpy as jnp
        from mcacct.loss import log_ratio_from_terms_t, participation_log_ratios_t
        from mcacct.sample import sample_y_t
        check_call(self, strategy=strategy, sigma=sigma, num_samples=num_samples, positive=positive, dtype=dtype,
                   dot_method=dot_method, recursion=recursion)
        # time-major throughout: the recursion and the sliding sums run along axis 0 with no transposes
        y_t = sample_y_t(key, self, strategy, sigma, num_samples, positive, jnp.float64).astype(dtype)
        ell_t = participation_log_ratios_t(y_t, jnp.asarray(sigma, dtype), strategy, dot_method)
        loss = log_ratio_from_terms_t(ell_t, self, recursion)
        return loss if positive else -loss

    def ladder_losses(self, key, sigmas, strategy, num_samples: int, dtype, dot_method: str = "auto",
                      recursion: str = "auto"):
        """``(J, 2, num_samples)`` losses for every noise multiplier of ``sigmas`` and both directions on one
        set of draws (the draws of :meth:`loss_kernel` for the same key): draws, participation and sliding
        sums once, the recursion per candidate (:func:`mcacct.loss.ladder_losses_t`)."""
        import jax.numpy as jnp
        from mcacct.loss import ladder_losses_t
        from mcacct.sample import standardised_draws_t
        check_call(self, strategy=strategy, num_samples=num_samples, dtype=dtype, dot_method=dot_method,
                   recursion=recursion)
        m_t, z_t = standardised_draws_t(key, self, strategy, num_samples, jnp.float64)
        return ladder_losses_t(m_t.astype(dtype), z_t.astype(dtype), sigmas, self.min_sep, self.sampling_prob,
                               self.warm_start, strategy.c_col, dot_method, recursion)


def expected_participation_rate(sampling_prob: float, min_sep: int) -> float:
    """``p0 = 1 / (1/p + b - 1)``, the stationary participation rate of b-min-sep subsampling."""
    p = check_real("sampling_prob", sampling_prob, low=0.0, high=1.0, low_open=True)
    b = check_int("min_sep", min_sep, low=1)
    return 1.0 / (1.0 / p + b - 1)


def sampling_prob_from_batch_size(expected_batch_size: float, dataset_size: int, min_sep: int) -> float:
    r"""The ``p`` that gives an expected batch size ``B`` on a dataset of ``M`` examples.

    With :math:`p_0 = B / M`, :math:`p = p_0 / (1 - p_0 (b - 1))`, feasible only when
    :math:`p_0 \le 1/b` (each example can take part in at most one in ``b`` iterations).

    Raises
    ------
    ValueError
        If ``B / M`` is not in ``(0, 1/b]``.
    """
    m = check_int("dataset_size", dataset_size, low=1)
    b = check_int("min_sep", min_sep, low=1)
    bs = check_real("expected_batch_size", expected_batch_size, low=0.0, high=m / b, low_open=True)
    p0 = bs / m
    p = p0 / (1.0 - p0 * (b - 1))
    return min(p, 1.0)
