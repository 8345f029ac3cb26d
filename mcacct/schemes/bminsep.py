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

from mcacct.kernels.output import gaussian_output, ladder_losses_of_block_t
from mcacct.kernels.participation import (participation_cap, participation_mask, participation_blocks_t,
                                          participation_mask_t)
from mcacct.kernels.recursion import recursion_log_ratio, recursion_log_ratio_t
from mcacct.kernels.shortcuts import add_loss_bound
from mcacct.kernels.mean_shift import mean_shift, mean_shift_from_blocks_t
from mcacct.kernels.sliding import participation_log_ratios, participation_log_ratios_t
from mcacct.pld.accountant import pld_calibrate
from mcacct.core.rates import participation_rate
from mcacct.core.rates import sampling_prob_from_batch_size as rates_sampling_prob_from_batch_size
from mcacct.pld.specs import CyclicPoissonBandMFSpec, PoissonGaussianSpec
from mcacct.schemes.base import (Draws, LossErrorParams, MinSepAccounting, SchemeSummary, check_direction,
                                 check_scheme_fields)
from mcacct.strategies.banded import BandedToeplitz
from mcacct.core.validate import check_bool, check_call, check_count, check_int, check_prob, check_sigma
from mcacct.schemes.entry import (CompareRow, ComparePlan, CompareSetting, JaxPrivacyEntry, SchemeInfo,
                                  refuse_dataset_size, selection_field)
from mcacct.schemes.flags import SchemeArgs, SchemeCLI
from mcacct.core.precision import float64

__all__ = ["BMinSep", "sampling_prob_from_batch_size", "expected_participation_rate", "sample_participation",
           "sample_participation_t", "sample_y_t", "log_ratio_from_terms", "log_ratio_from_terms_t", "INFO",
           "BMINSEP_SELECTION_FIELDS", "bminsep_selection", "bminsep_to_selection"]


@float64
@dataclass(frozen=True)
class BMinSep(MinSepAccounting):
    """b-min-sep subsampling of one example over ``iterations`` steps.

    Parameters
    ----------
    sampling_prob : float
        ``p`` in ``(0, 1]``: the probability that an *available* example is included.
    min_sep : int
        ``b >= 1``: no example participates in two iterations closer than ``b``. ``b = 1`` is Poisson.
    iterations : int
        ``n >= 1``: the number of training iterations.
    warm_start : bool, default True
        Start from the stationary distribution (Alg. 2, default) rather than all-available (Alg. 1).
    """

    sampling_prob: float
    min_sep: int
    iterations: int
    warm_start: bool = True

    def __post_init__(self) -> None:
        check_scheme_fields(self, sampling_prob=check_prob, min_sep=check_count, iterations=check_count,
                            warm_start=check_bool)

    @property
    def participation_rate(self) -> float:
        """Stationary expected participation rate ``p0 = 1 / (1/p + b - 1)``."""
        return expected_participation_rate(self.sampling_prob, self.min_sep)

    # -- the contract (check_strategy, sensitivity_bound, output_coordinate_bound: MinSepAccounting) -------
    shares_ladder_work = True
    #: remove losses bounded first (:mod:`mcacct.kernels.bound`), the exact recursion only where needed
    bounds_remove_losses = True

    def draw(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        """Row-major outputs (:func:`sample_y`'s draws); no auxiliary data."""
        return Draws(_sample_y(key, self, strategy, sigma, num_samples, direction == "remove", dtype))

    def loss_rows(self, y, strategy, sigma, aux, direction: str, dot_method: str, recursion: str):
        r"""Row-major :math:`\ln P(y)/Q(y)` by Theorem 5.1's recursion (``aux`` and ``direction`` unused)."""
        ell = participation_log_ratios(y, jnp.asarray(sigma, y.dtype), strategy.c_col, dot_method)
        return log_ratio_from_terms(ell, self, recursion)

    def sample_t(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        """Time-major outputs from the per-block participation (the engine's draws)."""
        return Draws(_sample_y_t(key, self, strategy, sigma, num_samples, direction == "remove", dtype))

    def log_ratio_t(self, y_t, strategy, sigma, aux_t, direction: str, dot_method: str, recursion: str):
        # time-major throughout: the recursion and the sliding sums run along axis 0 with no transposes
        """Time-major :meth:`loss_rows`: ``y_t`` of shape ``(n, num_samples)``, losses ``(num_samples,)``."""
        ell_t = participation_log_ratios_t(y_t, jnp.asarray(sigma, y_t.dtype), strategy.c_col, dot_method)
        return log_ratio_from_terms_t(ell_t, self, recursion)

    def ladder_losses(self, key, strategy, sigmas, num_samples: int, dtype, dot_method: str = "auto",
                      recursion: str = "auto", add_bound: float | None = None, remove_skip=None):
        """``(J, 2, num_samples)`` losses for every noise multiplier of ``sigmas`` and both directions on one
        set of draws (the draws of :meth:`sample_t` for the same key): draws, participation and sliding
        sums once (the mean's from a table), the recursion per candidate
        (:func:`mcacct.kernels.output.ladder_losses_of_block_t`: with both skips, the sums only for a batch with a
        draw that is not skipped; on CPUs the bound reads table normals by key and the float64 noise is redrawn
        only for such a batch, :mod:`mcacct.kernels.normal_table`).

        Parameters
        ----------
        key, strategy, sigmas : jax.Array, BandedToeplitz, jax.Array
            The block's key, the strategy and the ``J`` noise multipliers.
        num_samples, dtype, dot_method, recursion : int, dtype, str, str
            Samples of the block, the kernel dtype and the kernels.
        add_bound, remove_skip : float or None, RemoveSkip or None
            The skips of provably zero contributions (:mod:`mcacct.kernels.shortcuts`).

        Returns
        -------
        jax.Array
            Shape ``(J, 2, num_samples)``: the remove and add losses per candidate.

        Raises
        ------
        ValueError
            Naming ``strategy``, ``num_samples``, ``dtype``, ``dot_method`` or ``recursion``.
        """
        check_call(self, strategy=strategy, num_samples=num_samples, dtype=dtype, dot_method=dot_method,
                   recursion=recursion)
        return ladder_losses_of_block_t(key, self.iterations, sigmas, self.min_sep, self.sampling_prob,
                                        self.warm_start, self.participation_rate, strategy.c_col, num_samples, dtype,
                                        dot_method, recursion, add_bound, remove_skip)

    def add_loss_bound(self) -> float:
        """``-ln`` of the probability of never participating, rounded up (:mod:`mcacct.kernels.shortcuts`)."""
        return add_loss_bound(self.iterations, self.min_sep, self.sampling_prob, self.warm_start)

    def fused_ladder_args(self, strategy) -> dict:
        """The fused kernel draws :meth:`ladder_losses`'s outputs (:func:`mcacct.kernels.output.standardised_draws_t`)
        and evaluates the same recursion."""
        return {"iterations": self.iterations, "min_sep": self.min_sep, "sampling_prob": self.sampling_prob,
                "warm_start": self.warm_start, "participation_rate": self.participation_rate,
                "c_col": tuple(strategy.c_col)}

    def draw_law_tv(self) -> float:
        """``0.0``: the participation is the only random draw besides the noise, and its uniform-draw boundaries are
        counted by :meth:`participation_boundaries`."""
        return 0.0

    def participation_boundaries(self) -> int:
        """Uniform-draw boundaries of the renewal sampler (:mod:`mcacct.kernels.participation`): gap draw
        ``k`` (``k = 1, 2, ...``) matters only if ``k - 1`` participations happened, hence only for gaps up to
        the remaining horizon ``n - (k - 1) b``, one boundary per value; the warm start adds its coin (1) and
        its offset (``b - 2``). ``p = 1`` (no gap draw) is exact."""
        n, b, p = self.iterations, self.min_sep, self.sampling_prob
        boundaries = 0
        if p < 1.0:
            k_max = -(-n // b) + 1
            boundaries = sum(max(0, n - (k - 1) * b) for k in range(1, k_max + 1))
        if self.warm_start and b > 1:
            boundaries += 1 + max(0, b - 2)
        return boundaries

    def summary(self) -> SchemeSummary:
        """``b`` = ``min_sep``, ``q``, the participation rate (:class:`~mcacct.schemes.base.SchemeSummary`)."""
        return SchemeSummary(self.min_sep, self.sampling_prob, self.participation_rate, None)

    def loss_error_params(self) -> LossErrorParams:
        """Theorem 5.1's recursion with ``b`` and ``p``; at most ``ceil(n/b)`` participations; ``Q`` is the
        plain Gaussian (mixture factor 1)."""
        return LossErrorParams(self.min_sep, self.sampling_prob, self.max_participations, 1.0)

    def exact_pld(self, strategy):
        """``b = 1`` is Poisson subsampling with ``C = c_0 I``: ``n`` Poisson-subsampled Gaussians of
        sensitivity ``c_0`` (:class:`mcacct.pld.PoissonGaussianSpec`); ``None`` for ``b > 1``."""
        if self.min_sep != 1:
            return None
        return PoissonGaussianSpec(sampling_prob=self.sampling_prob, sigma=1.0, steps=self.iterations,
                                   sensitivity=strategy.c_col[0])

    def pld_baselines(self, strategy, epsilon: float, delta: float) -> dict:
        """Poisson DP-SGD (``C = I``, ``q = p0``, ``n`` steps) and cyclic-Poisson BandMF (``b`` parts,
        ``q = b p0``, ``ceil(n/b)`` compositions, sensitivity ``||c||``) at the same expected batch size, from
        the PLD accountant at the target delta.

        Parameters
        ----------
        strategy, epsilon, delta : BandedToeplitz, float, float
            The strategy and the privacy target.

        Returns
        -------
        dict
            ``poisson_dpsgd_sigma``, ``cyclic_poisson_bandmf_sigma`` (floats) and ``note`` (text).
        """
        p0 = self.participation_rate
        b, n = self.min_sep, self.iterations
        out = {"poisson_dpsgd_sigma": pld_calibrate(PoissonGaussianSpec(p0, 1.0, steps=n), epsilon, delta)}
        out["cyclic_poisson_bandmf_sigma"] = pld_calibrate(
            CyclicPoissonBandMFSpec(n, b, min(1.0, b * p0), tuple(strategy.c_col), 1.0), epsilon, delta)
        out["note"] = ("PLD (FFT) accountant at the target delta; equal expected batch size p0 = "
                       f"{p0:.6g} of the dataset per iteration")
        return out


@float64
def expected_participation_rate(sampling_prob: float, min_sep: int) -> float:
    r"""``p0 = 1 / (1/p + b - 1)``, the stationary participation rate of b-min-sep subsampling
    (:func:`mcacct.core.rates.participation_rate`).

    Parameters
    ----------
    sampling_prob, min_sep : float, int
        :math:`p \in (0, 1]` and :math:`b \ge 1`.

    Returns
    -------
    float
        :math:`p_0 \in (0, 1/b]`.

    Raises
    ------
    ValueError
        Naming ``sampling_prob`` or ``min_sep`` out of range.
    """
    return participation_rate(sampling_prob, min_sep)


#: The ``p`` that gives an expected batch size ``B`` on ``M`` examples (:func:`mcacct.core.rates.sampling_prob_from_batch_size`).
sampling_prob_from_batch_size = float64(rates_sampling_prob_from_batch_size)


# -- sampling and loss of the b-min-sep mechanism (the kernels with the scheme's fields) -------------------------
@float64
@partial(jax.jit, static_argnames=("scheme", "num_samples"))
def sample_participation(key: jax.Array, scheme: BMinSep, num_samples: int) -> jax.Array:
    """Participation vectors ``x`` of shape ``(num_samples, n)`` (bool) under b-min-sep subsampling.

    Parameters
    ----------
    key, scheme, num_samples : jax.Array, BMinSep, int
        The key, the scheme (static) and the rows (static).

    Returns
    -------
    jax.Array
        bool ``(num_samples, n)``.
    """
    return participation_mask(key, scheme.iterations, scheme.min_sep, scheme.sampling_prob, scheme.warm_start,
                              num_samples)


@float64
@partial(jax.jit, static_argnames=("scheme", "num_samples"))
def sample_participation_t(key: jax.Array, scheme: BMinSep, num_samples: int) -> jax.Array:
    """Time-major participation vectors, shape ``(n, num_samples)`` (bool), by the renewal process for every
    ``b`` (:func:`mcacct.kernels.participation.participation_mask_t`).

    Parameters
    ----------
    key, scheme, num_samples : jax.Array, BMinSep, int
        The key, the scheme (static) and the columns (static).

    Returns
    -------
    jax.Array
        bool ``(n, num_samples)``.
    """
    cap = participation_cap(scheme.iterations, scheme.min_sep, scheme.participation_rate)
    return participation_mask_t(key, scheme.iterations, scheme.min_sep, scheme.sampling_prob, scheme.warm_start,
                                num_samples, cap)


def _check_output_args(scheme: BMinSep, strategy: BandedToeplitz, sigma, num_samples) -> None:
    check_sigma("sigma", sigma)
    check_int("num_samples", num_samples, low=1)
    strategy.check_min_sep(scheme.min_sep)


@partial(jax.jit, static_argnames=("scheme", "strategy", "num_samples", "positive", "dtype"))
def _sample_y(key, scheme, strategy, sigma, num_samples, positive, dtype):
    return gaussian_output(key, (num_samples, scheme.iterations), sigma, dtype, positive,
                           lambda k: mean_shift(sample_participation(k, scheme, num_samples), strategy.c_col, dtype))


@float64
def sample_y_t(key: jax.Array, scheme: BMinSep, strategy: BandedToeplitz, sigma: float | jax.Array,
               num_samples: int, direction: str = "remove", dtype=jnp.float64) -> jax.Array:
    """Time-major outputs, shape ``(n, num_samples)`` (the engine's layout, ``BMinSep.sample_t``; for the same
    key the draws differ from the row-major :meth:`BMinSep.sample`'s, the law is the same).

    Parameters
    ----------
    key, scheme, strategy, sigma : jax.Array, BMinSep, BandedToeplitz, float
        The key, the scheme, the strategy ``C`` and the noise multiplier (checked here).
    num_samples, direction, dtype : int, {"remove", "add"}, dtype
        Rows, ``P`` or ``Q``, and the dtype of ``y``.

    Returns
    -------
    jax.Array
        ``(n, num_samples)`` of ``dtype``.

    Raises
    ------
    ValueError
        Naming ``sigma``, ``num_samples`` or ``direction``, or if ``len(c_col) > min_sep``.
    """
    _check_output_args(scheme, strategy, sigma, num_samples)
    return _sample_y_t(key, scheme, strategy, sigma, num_samples, check_direction(direction) == "remove", dtype)


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
    :func:`mcacct.kernels.recursion.recursion_log_ratio`. Returns ``ln P(y)/Q(y)`` with the leading shape.

    Parameters
    ----------
    ell, scheme, recursion : jax.Array, BMinSep, str
        Terms ``(..., n)``, the scheme and the recursion method.

    Returns
    -------
    jax.Array
        Shape ``(...)``.
    """
    return recursion_log_ratio(ell, scheme.min_sep, scheme.sampling_prob, scheme.warm_start, recursion)


@float64
def log_ratio_from_terms_t(ell_t: jax.Array, scheme: BMinSep, recursion: str = "auto") -> jax.Array:
    """:func:`log_ratio_from_terms` for time-major terms ``ell_t`` of shape ``(n, ...)``."""
    return recursion_log_ratio_t(ell_t, scheme.min_sep, scheme.sampling_prob, scheme.warm_start, recursion)


# -- the entry: how mcacct offers the scheme (mcacct.schemes.entry) ---------------------------------------------
#: jax-privacy 2.0's ``BMinSepSampling`` fields (with and without truncation), all of which enter the mapping.
BMINSEP_SELECTION_FIELDS = ("sampling_prob", "iterations", "min_sep", "warm_start", "truncated_batch_size")


@float64
def bminsep_selection(selection) -> tuple[float, int, int, bool]:
    """``(p, n, b, warm_start)`` of a jax-privacy ``BMinSepSampling``, each checked (a refusal names
    ``batch_selection.FIELD``).

    Parameters
    ----------
    selection : object
        A ``BMinSepSampling`` (its fields are read by name).

    Returns
    -------
    tuple
        ``(p, n, b, warm_start)``.

    Raises
    ------
    ValueError
        Naming ``batch_selection.FIELD`` when a field is out of range.
    """
    return (check_prob(selection_field("sampling_prob"), selection.sampling_prob),
            check_count(selection_field("iterations"), selection.iterations),
            check_count(selection_field("min_sep"), selection.min_sep),
            check_bool(selection_field("warm_start"), selection.warm_start))


def _from_jax_privacy(selection, dataset_size: int | None) -> BMinSep | None:
    p, n, b, warm = bminsep_selection(selection)
    if selection.truncated_batch_size is not None:
        return None  # truncated b-min-sep's
    refuse_dataset_size(dataset_size, "BMinSepSampling without truncated_batch_size")
    return BMinSep(p, b, n, warm_start=warm)


@float64
def bminsep_to_selection(scheme, batch_selection, truncated_batch_size: int | None = None):
    """jax-privacy's ``BMinSepSampling`` of the b-min-sep fields of ``scheme`` (``sampling_prob``, ``iterations``,
    ``min_sep``, ``warm_start``) and ``truncated_batch_size`` (``None``: untruncated). jax-privacy 2.0's warm start
    needs ``min_sep >= 2``; for ``b = 1`` it changes nothing, so it is passed as ``False`` there.

    Parameters
    ----------
    scheme, batch_selection : object, module
        A scheme with the four fields, and the ``batch_selection`` module that defines ``BMinSepSampling``.
    truncated_batch_size : int, optional
        The truncation (default ``None``).

    Returns
    -------
    object
        ``batch_selection.BMinSepSampling(...)``.
    """
    return batch_selection.BMinSepSampling(sampling_prob=float(scheme.sampling_prob),
                                           iterations=int(scheme.iterations), min_sep=int(scheme.min_sep),
                                           warm_start=bool(scheme.warm_start and scheme.min_sep > 1),
                                           truncated_batch_size=truncated_batch_size)


def _to_jax_privacy(scheme: BMinSep, batch_selection):
    return bminsep_to_selection(scheme, batch_selection)


def _build_cli(a: SchemeArgs):
    b = a.min_sep
    return BMinSep(a.min_sep_prob(b), b, a.iterations, a.warm_start), a.strategy()


def _compare_plan(s: CompareSetting) -> ComparePlan:
    scheme = BMinSep(s.sampling_prob, s.min_sep, s.iterations, True)
    return ComparePlan(scheme, s.strategy, pld_spec=scheme.exact_pld(s.strategy))  # Poisson's PLD when b = 1


#: The scheme's entry (:mod:`mcacct.schemes.registry` lists it).
INFO = SchemeInfo("bminsep", BMinSep, "b-min-sep subsampling (Alg. 1/2)", label="b-min-sep", compare_default=True,
                  cli=SchemeCLI(_build_cli), compare=CompareRow(_compare_plan),
                  jax_privacy=JaxPrivacyEntry("BMinSepSampling", BMINSEP_SELECTION_FIELDS, _from_jax_privacy,
                                              _to_jax_privacy))
