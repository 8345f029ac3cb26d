r"""Sampling schemes: how the participation vector ``x`` of one example is drawn.

b-min-sep subsampling (Dong & Ganesh 2026 [arXiv:2602.09338], Alg. 1) runs Poisson sampling with probability ``p`` at every
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
from functools import partial

import jax
import jax.numpy as jnp

from mcacct.kernels.output import gaussian_output, standardised_draws_t
from mcacct.kernels.participation import (participation_cap, participation_mask, participation_blocks_t,
                                          participation_mask_t)
from mcacct.kernels.recursion import RECURSIONS, ladder_losses_t, recursion_log_ratio, recursion_log_ratio_t
from mcacct.kernels.sliding import (mean_shift, mean_shift_from_blocks_t, participation_log_ratios,
                                    participation_log_ratios_t)
from mcacct.schemes.base import MinSepAccounting
from mcacct.schemes.strategy import BandedToeplitz
from mcacct.validate import (check_bool, check_call, check_count, check_fields, check_int, check_prob, check_real,
                              check_sigma)
from mcacct.precision import float64

__all__ = ["BMinSep", "sampling_prob_from_batch_size", "expected_participation_rate", "sample_participation",
           "sample_participation_t", "sample_y", "sample_y_t", "privacy_loss", "log_ratio_from_terms",
           "log_ratio_from_terms_t"]


@float64
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
        check_call(self, strategy=strategy, sigma=sigma, num_samples=num_samples, positive=positive, dtype=dtype,
                   dot_method=dot_method, recursion=recursion)
        # time-major throughout: the recursion and the sliding sums run along axis 0 with no transposes
        y_t = sample_y_t(key, self, strategy, sigma, num_samples, positive, jnp.float64).astype(dtype)
        ell_t = participation_log_ratios_t(y_t, jnp.asarray(sigma, dtype), strategy.c_col, dot_method)
        loss = log_ratio_from_terms_t(ell_t, self, recursion)
        return loss if positive else -loss

    def ladder_losses(self, key, sigmas, strategy, num_samples: int, dtype, dot_method: str = "auto",
                      recursion: str = "auto"):
        """``(J, 2, num_samples)`` losses for every noise multiplier of ``sigmas`` and both directions on one
        set of draws (the draws of :meth:`loss_kernel` for the same key): draws, participation and sliding
        sums once, the recursion per candidate (:func:`mcacct.kernels.recursion.ladder_losses_t`)."""
        check_call(self, strategy=strategy, num_samples=num_samples, dtype=dtype, dot_method=dot_method,
                   recursion=recursion)
        m_t, z_t = standardised_draws_t(key, self.iterations, self.min_sep, self.sampling_prob, self.warm_start,
                                        self.participation_rate, strategy.c_col, num_samples, jnp.float64)
        return ladder_losses_t(m_t.astype(dtype), z_t.astype(dtype), sigmas, self.min_sep, self.sampling_prob,
                               self.warm_start, strategy.c_col, dot_method, recursion)


@float64
def expected_participation_rate(sampling_prob: float, min_sep: int) -> float:
    """``p0 = 1 / (1/p + b - 1)``, the stationary participation rate of b-min-sep subsampling."""
    p = check_real("sampling_prob", sampling_prob, low=0.0, high=1.0, low_open=True)
    b = check_int("min_sep", min_sep, low=1)
    return 1.0 / (1.0 / p + b - 1)


@float64
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


# -- sampling and loss of the b-min-sep mechanism (the kernels with the scheme's fields) -------------------------
@float64
@partial(jax.jit, static_argnames=("scheme", "num_samples"))
def sample_participation(key: jax.Array, scheme: BMinSep, num_samples: int) -> jax.Array:
    """Participation vectors ``x`` of shape ``(num_samples, n)`` (bool) under b-min-sep subsampling."""
    return participation_mask(key, scheme.iterations, scheme.min_sep, scheme.sampling_prob, scheme.warm_start,
                              num_samples)


@float64
@partial(jax.jit, static_argnames=("scheme", "num_samples"))
def sample_participation_t(key: jax.Array, scheme: BMinSep, num_samples: int) -> jax.Array:
    """Time-major participation vectors, shape ``(n, num_samples)`` (bool), by the renewal process for every
    ``b`` (:func:`mcacct.kernels.participation.participation_mask_t`)."""
    cap = participation_cap(scheme.iterations, scheme.min_sep, scheme.participation_rate)
    return participation_mask_t(key, scheme.iterations, scheme.min_sep, scheme.sampling_prob, scheme.warm_start,
                                num_samples, cap)


def _check_output_args(scheme: BMinSep, strategy: BandedToeplitz, sigma, num_samples) -> None:
    check_sigma("sigma", sigma)
    check_int("num_samples", num_samples, low=1)
    strategy.check_min_sep(scheme.min_sep)


@float64
def sample_y(key: jax.Array, scheme: BMinSep, strategy: BandedToeplitz, sigma: float | jax.Array,
             num_samples: int, positive: bool = True, dtype=jnp.float64) -> jax.Array:
    """Draw ``num_samples`` outputs ``y`` of shape ``(num_samples, n)`` under ``P`` or ``Q``.

    Parameters
    ----------
    key: a ``jax.random`` key; the same key gives the same samples.
    scheme: the sampling scheme (static).
    strategy: the banded Toeplitz strategy ``C`` (static); needs ``len(c_col) <= min_sep``.
    sigma: noise standard deviation (noise multiplier).
    positive: ``True`` samples ``P`` (``y = Cx + z``), ``False`` samples ``Q`` (``y = z``).
    """
    _check_output_args(scheme, strategy, sigma, num_samples)
    return _sample_y(key, scheme, strategy, sigma, num_samples, bool(positive), dtype)


@partial(jax.jit, static_argnames=("scheme", "strategy", "num_samples", "positive", "dtype"))
def _sample_y(key, scheme, strategy, sigma, num_samples, positive, dtype):
    return gaussian_output(key, (num_samples, scheme.iterations), sigma, dtype, positive,
                           lambda k: mean_shift(sample_participation(k, scheme, num_samples), strategy.c_col, dtype))


@float64
def sample_y_t(key: jax.Array, scheme: BMinSep, strategy: BandedToeplitz, sigma: float | jax.Array,
               num_samples: int, positive: bool = True, dtype=jnp.float64) -> jax.Array:
    """Like :func:`sample_y` but time-major, shape ``(n, num_samples)`` (the engine's layout; for the same
    key the draws differ from :func:`sample_y`'s, the law is the same)."""
    _check_output_args(scheme, strategy, sigma, num_samples)
    return _sample_y_t(key, scheme, strategy, sigma, num_samples, bool(positive), dtype)


@partial(jax.jit, static_argnames=("scheme", "strategy", "num_samples", "positive", "dtype"))
def _sample_y_t(key, scheme, strategy, sigma, num_samples, positive, dtype):
    cap = participation_cap(scheme.iterations, scheme.min_sep, scheme.participation_rate)

    def mean(k):  # C x from the participation per block (the draws of sample_participation_t), no mask formed
        tau = participation_blocks_t(k, scheme.iterations, scheme.min_sep, scheme.sampling_prob, scheme.warm_start,
                                     num_samples, cap)
        return mean_shift_from_blocks_t(tau, scheme.iterations, scheme.min_sep, strategy.c_col, dtype)

    return gaussian_output(key, (scheme.iterations, num_samples), sigma, dtype, positive, mean)


@float64
def log_ratio_from_terms(ell: jax.Array, scheme: BMinSep, recursion: str = "auto") -> jax.Array:
    """Run the recursion of Theorem 5.1 on the per-iteration terms ``ell`` (shape ``(..., n)``) with the
    scheme's ``min_sep``, ``sampling_prob`` and ``warm_start``; ``recursion`` as in
    :func:`mcacct.kernels.recursion.recursion_log_ratio`. Returns ``ln P(y)/Q(y)`` with the leading shape."""
    return recursion_log_ratio(ell, scheme.min_sep, scheme.sampling_prob, scheme.warm_start, recursion)


@float64
def log_ratio_from_terms_t(ell_t: jax.Array, scheme: BMinSep, recursion: str = "auto") -> jax.Array:
    """:func:`log_ratio_from_terms` for time-major terms ``ell_t`` of shape ``(n, ...)``."""
    return recursion_log_ratio_t(ell_t, scheme.min_sep, scheme.sampling_prob, scheme.warm_start, recursion)


@partial(jax.jit, static_argnames=("scheme", "c_col", "dot_method", "recursion"))
def _privacy_loss(y, sigma, scheme, c_col, dot_method, recursion):
    ell = participation_log_ratios(y, sigma, c_col, dot_method)
    return log_ratio_from_terms(ell, scheme, recursion)


@float64
def privacy_loss(scheme: BMinSep, y: jax.Array, sigma: float | jax.Array, c_col=(1.0,),
                 dot_method: str = "auto", recursion: str = "auto") -> jax.Array:
    r"""Privacy loss :math:`\ln P(y)/Q(y)` for each row of ``y``.

    Parameters
    ----------
    scheme: the b-min-sep scheme (``iterations`` must equal ``y.shape[-1]``).
    y: outputs of shape ``(num_samples, n)`` (or ``(n,)``); float64 or float32.
    sigma: noise multiplier, ``> 0``.
    c_col: non-zeros of the first column of ``C`` (``len(c_col) <= min_sep``), or a
        :class:`~mcacct.schemes.strategy.BandedToeplitz`.
    dot_method: how the sliding dot products are computed (:func:`mcacct.kernels.sliding.sliding_dot`).
    recursion: one of ``RECURSIONS`` (:func:`mcacct.kernels.recursion.recursion_log_ratio`).

    Returns
    -------
    Array of shape ``y.shape[:-1]``.
    """
    strategy = c_col if isinstance(c_col, BandedToeplitz) else BandedToeplitz(c_col)
    strategy.check_min_sep(scheme.min_sep)
    if recursion not in RECURSIONS:
        raise ValueError(f"recursion must be one of {RECURSIONS}; got {recursion!r}")
    y = jnp.asarray(y)
    if y.shape[-1] != scheme.iterations:
        raise ValueError(f"y must have {scheme.iterations} columns (scheme.iterations); got shape {y.shape}")
    if not jnp.issubdtype(y.dtype, jnp.floating):
        y = y.astype(jnp.float64)
    check_sigma("sigma", sigma)
    return _privacy_loss(y, sigma, scheme, strategy.c_col, dot_method, recursion)
