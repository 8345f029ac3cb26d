r"""Balls-in-bins sampling for DP-BandMF (Dong & Ganesh 2026 [arXiv:2602.09338], §3).

Like cyclic Poisson (:mod:`mcacct.schemes.cyclic_poisson`, whose notation this module uses), the example
belongs to one of ``b = cycle_length`` residue classes; here it takes every opportunity of its class.

* **Balls-in-bins** (Chua et al.): ``q = 1`` and a uniformly random secret shift, i.e. the example takes part
  in iterations ``s, s + b, s + 2b, ...``:

  .. math::  L(y) = \ln \frac{1}{b} \sum_{s=0}^{b-1} \exp\Big(\sum_{t \equiv s} \ell_t\Big).

  Here ``b`` is the epoch length; at equal expected batch size ``b = M / B``. For ``k <= b`` it coincides
  with warm-start b-min-sep with ``p = 1`` (:class:`mcacct.schemes.bminsep.BMinSep`) and with random-phase cyclic
  Poisson with ``q = 1``.

  **More bands than bins** (``k > b``) is handled exactly too: columns of the same class then overlap, but
  given the shift the output is the single Gaussian :math:`N(C x_s, \sigma^2 I)`, so with
  :math:`S_s = \sum_{t \equiv s} \langle c^{(t)}, y\rangle = \langle C x_s, y \rangle` and
  :math:`N_s = \|C x_s\|^2`

  .. math::  L(y) = \ln \frac{1}{b} \sum_{s=0}^{b-1} \exp\big((S_s - N_s / 2)/\sigma^2\big).

  :math:`N_s` does not depend on ``y``: it is computed once (float64) from :math:`m = C x_0`, whose entry
  ``j`` is the sum of :math:`c_d` over ``d <= j``, ``d = j (mod b)`` (a cumulative sum per residue class);
  :math:`C x_s` is ``m`` moved ``s`` rows down, so :math:`N_s = \sum_{i < n - s} m_i^2`. For ``k <= b``,
  :math:`N_s = \sum_{t \equiv s} \|c^{(t)}\|^2` and this is the formula above. The sampler draws the shift
  and reads the mean from ``m`` (``O(n)`` per sample); the sensitivity bound is the exact
  :math:`\max_s \|C x_s\| = \sqrt{N_0}`.

"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.blocks import lanes_target
from mcacct.kernels.output import gaussian_output
from mcacct.kernels.sliding import sliding_dot
from mcacct.core.precision import float64
from mcacct.schemes.base import Draws, LossErrorParams, SchemeSummary, Scheme, check_scheme_fields, jit_method
from mcacct.schemes.cyclic_poisson import CyclicPoisson
from mcacct.strategies.banded import check_strategy_type
from mcacct.core.validate import check_call, check_count, check_real
from mcacct.schemes.entry import (CompareRow, ComparePlan, CompareSetting, JaxPrivacyEntry, SchemeInfo,
                                  refuse_dataset_size, selection_field)
from mcacct.schemes.flags import Flag, SchemeArgs, SchemeCLI

__all__ = ["BallsInBins", "max_bins", "bins_from_batch", "BIN_BYTES", "BIN_TERMS_PER_BLOCK", "INFO"]


#: Bytes per shift term of the loss kernel, temporaries included (measured: ``n = 64`` with 32768 bins, one block
#: of 4096 samples, raised the peak memory of a run by 2.6 GB; 2.6e9 / (4096 * 32768) = 19.4).
BIN_BYTES = 20
#: The most shift terms one block of the loss kernel may hold (``block * ceil(n/T) * T``): 2^25, about 0.6 GiB
#: per device at :data:`BIN_BYTES`.
BIN_TERMS_PER_BLOCK = 1 << 25


@float64
def max_bins(iterations: int) -> int:
    r"""The largest number of bins ``T`` for ``n = iterations``: ``T <= n`` always (then ``ceil(n/T) T < 2n``, the
    size of the engine's own arrays), and beyond ``n`` as many as keep the ``T`` shift terms of each sample of a
    block (:func:`mcacct.kernels.blocks.lanes_target` samples, the engine's largest block for ``n``) within
    :data:`BIN_TERMS_PER_BLOCK` (``--bins 1e12`` asked for 7.3 TiB on the host alone).

    Parameters
    ----------
    iterations : int
        The horizon ``n``.

    Returns
    -------
    int
        :math:`\max(n, \lfloor 2^{25} / \mathrm{lanes\_target}(n) \rfloor)`.
    """
    n = int(iterations)
    return max(n, BIN_TERMS_PER_BLOCK // lanes_target(n))


@functools.lru_cache(maxsize=64)
def _class0_mean(c_col: tuple[float, ...], iterations: int, bins: int) -> np.ndarray:
    """``m = C x_0`` (float64, length ``n``): ``m_j`` is the sum of ``c_d`` over ``d <= j``, ``d = j (mod b)``."""
    n, b = iterations, bins
    rows = -(-n // b)
    c = np.zeros(rows * b)
    k = min(len(c_col), rows * b)
    c[:k] = c_col[:k]
    m = np.cumsum(c.reshape(rows, b), axis=0).reshape(-1)[:n]
    m.setflags(write=False)
    return m


@functools.lru_cache(maxsize=64)
def _shift_sq_norms(c_col: tuple[float, ...], iterations: int, bins: int) -> np.ndarray:
    r""":math:`N_s = \|C x_s\|^2 = \sum_{i < n - s} m_i^2`, ``s = 0..b-1`` (zero for shifts ``s >= n``)."""
    m = _class0_mean(c_col, iterations, bins)
    cums = np.concatenate([[0.0], np.cumsum(m * m)])
    out = cums[np.maximum(iterations - np.arange(bins), 0)]
    out.setflags(write=False)
    return out


@float64
@dataclass(frozen=True)
class BallsInBins(Scheme):
    r"""Balls-in-bins subsampling (Chua et al.; Dong & Ganesh 2026 [arXiv:2602.09338], §3) of one example over ``iterations`` steps.

    The example is put in one of ``cycle_length = b`` bins uniformly at random and takes part in every
    iteration of its bin (``s, s + b, ...``, 0-based). The loss is the exact mixture over the ``b`` shifts
    (see the module docstring); for ``n < b`` shifts ``s >= n`` never participate. Any band width ``k`` is
    exact: with ``k > b`` the overlapping columns of a class add up in the mean ``C x_s``.

    Parameters
    ----------
    cycle_length : int
        ``b >= 1``, the number of bins (jax-privacy's ``cycle_length``) (epoch length; ``M / B`` at expected batch size ``B``).
    iterations : int
        ``n >= 1``.
    """

    cycle_length: int
    iterations: int

    def __post_init__(self) -> None:
        check_scheme_fields(self, cycle_length=check_count, iterations=check_count)
        limit = max_bins(self.iterations)
        if self.cycle_length > limit:
            block = lanes_target(self.iterations)
            raise ValueError(
                f"cycle_length must be an integer in [1, {limit}] for {self.iterations} iterations; got "
                f"{self.cycle_length}: the loss holds ceil(n/T)*T shift terms per sample (float64, about "
                f"{BIN_BYTES} bytes each with the kernel's temporaries) for blocks of up to {block} samples, and "
                f"at most {BIN_TERMS_PER_BLOCK:,} terms per block ({BIN_TERMS_PER_BLOCK * BIN_BYTES / 2**30:.2g} "
                "GiB per device) are allowed")

    @property
    def sampling_prob(self) -> float:
        """Always 1 (every opportunity is taken)."""
        return 1.0

    @property
    def participation_rate(self) -> float:
        """``1 / b``."""
        return 1.0 / self.cycle_length

    @property
    def max_participations(self) -> int:
        """``ceil(n / b)``: the participations of the example."""
        return -(-self.iterations // self.cycle_length)

    def _as_cyclic(self) -> CyclicPoisson:
        return CyclicPoisson(1.0, self.cycle_length, self.iterations, random_phase=True)

    def class_mean(self, strategy) -> np.ndarray:
        r"""``C x_0`` (float64, length ``n``), the output mean of shift 0; shift ``s`` is it moved ``s`` down.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        numpy.ndarray
            Read-only float64 ``(n,)``: :math:`m_j = \sum_{d \le j,\ d \equiv j \ (b)} c_d`.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`.
        """
        check_call(self, strategy=strategy)
        return _class0_mean(tuple(strategy.c_col), self.iterations, self.cycle_length)

    def shift_sq_norms(self, strategy) -> np.ndarray:
        r""":math:`\|C x_s\|^2` for ``s = 0..b-1`` (float64).

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        numpy.ndarray
            Read-only float64 ``(b,)``: :math:`N_s = \sum_{i < n - s} m_i^2` (0 for ``s >= n``).

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`.
        """
        check_call(self, strategy=strategy)
        return _shift_sq_norms(tuple(strategy.c_col), self.iterations, self.cycle_length)

    # -- the contract -----------------------------------------------------------------------------------
    def check_strategy(self, strategy) -> None:
        """Every non-negative banded Toeplitz ``C`` is admissible, any number of bands.

        Parameters
        ----------
        strategy : object
            The value to check.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`.
        """
        check_strategy_type("strategy", strategy)

    def sensitivity_bound(self, strategy) -> float:
        r"""The exact :math:`\max_s \|C x_s\| = \|C x_0\|` over the ``b`` participation patterns (the shift-0
        pattern has the most and the least truncated columns); ``<= sqrt(ceil(n/b)) ||c||`` when ``k <= b``.
        If ``C`` touches no row within the horizon (:math:`C x_0 = 0`, ``P = Q``) the positive
        ``sqrt(ceil(n/b)) ||c||`` is returned instead, which is still an upper bound.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        float
            :math:`\sqrt{\max_s N_s} = \sqrt{N_0}`, or the fallback above.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`.
        """
        norms = self.shift_sq_norms(strategy)
        exact = math.sqrt(float(np.max(norms)))
        if exact > 0.0:
            return exact
        return math.sqrt(self.max_participations * float(np.sum(np.square(strategy.c_col))))

    def sample_participation(self, key: jax.Array, num_samples: int) -> jax.Array:
        """Participation vectors, shape ``(num_samples, n)`` (bool).

        Parameters
        ----------
        key : jax.Array
            The key (split as the random-phase cyclic Poisson sampler with ``q = 1`` splits it).
        num_samples : int
            Rows.

        Returns
        -------
        jax.Array
            bool ``(num_samples, n)``: row ``i`` is true at iterations ``s_i, s_i + b, ...``.
        """
        return self._as_cyclic().sample_participation(key, num_samples)

    def draw(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        r"""Outputs ``y = C x + z`` (``"remove"``) or ``y = z`` (``"add"``), shape ``(num_samples, n)``.

        Parameters
        ----------
        key, strategy, sigma : jax.Array, BandedToeplitz, float
            The ``jax.random`` key, the strategy ``C`` and the noise multiplier (checked by :meth:`Scheme.sample`).
        num_samples, direction, dtype : int, {"remove", "add"}, dtype
            Rows, ``P`` or ``Q``, and the dtype of ``y``.

        Returns
        -------
        Draws
            ``y`` of ``dtype``, ``(num_samples, n)``, the mean :math:`C x_s` for a uniform shift ``s`` per
            row; ``aux`` is ``None``.
        """
        return Draws(self._sample_y(key, strategy, sigma, num_samples, direction == "remove", dtype))

    @jit_method("strategy", "num_samples", "positive", "dtype")
    def _sample_y(self, key, strategy, sigma, num_samples, positive, dtype):
        n, b = self.iterations, self.cycle_length
        m_pad = np.concatenate([[0.0], _class0_mean(tuple(strategy.c_col), n, b)])  # index 0: "above the shift"

        def mean(k):
            k_shift, _ = jax.random.split(k)  # the split of CyclicPoisson.sample_participation
            shift = jax.random.randint(k_shift, (num_samples, 1), 0, b, dtype=jnp.int32)
            idx = jnp.maximum(jnp.arange(n, dtype=jnp.int32)[None, :] - shift + 1, 0)
            return jnp.asarray(m_pad, dtype)[idx]

        return gaussian_output(key, (num_samples, n), sigma, dtype, positive, mean)

    def loss_rows(self, y, strategy, sigma, aux, direction: str, dot_method: str, recursion: str):
        r"""``ln P(y)/Q(y)`` for each row of ``y``: the exact mixture over the shifts (module docstring); a closed
        form, so ``recursion`` is not used.

        Parameters
        ----------
        y, strategy, sigma, aux : jax.Array, BandedToeplitz, float, jax.Array or None
            Outputs ``(..., n)``, the strategy, the noise multiplier and the draws' auxiliary data (checked by
            :meth:`Scheme.log_ratio`).
        direction, dot_method, recursion : str
            The direction and the kernels (:mod:`mcacct.kernels.sliding`, :mod:`mcacct.kernels.recursion`).

        Returns
        -------
        jax.Array
            Shape ``(...)``: :math:`\operatorname{logsumexp}_s\big((S_s - N_s/2)/\sigma^2\big) - \ln b`; ``aux`` and
            ``direction`` are unused.
        """
        return self._log_ratio(y, sigma, strategy, dot_method)

    @jit_method("strategy", "dot_method")
    def _log_ratio(self, y, sigma, strategy, dot_method):
        n, b = self.iterations, self.cycle_length
        dtype = y.dtype
        c = tuple(strategy.c_col)[:n]  # rows beyond the horizon never matter
        dots = sliding_dot(y, c, dot_method)  # <c^(t), y>, columns truncated at row n
        rows = -(-n // b)
        pad = [(0, 0)] * (y.ndim - 1) + [(0, rows * b - n)]
        per_class = jnp.sum(jnp.pad(dots, pad).reshape(y.shape[:-1] + (rows, b)), axis=-2)  # S_s = <C x_s, y>
        half_norms = jnp.asarray(0.5 * _shift_sq_norms(tuple(strategy.c_col), n, b), dtype)
        inv_var = 1.0 / jnp.asarray(sigma, dtype) ** 2
        terms = (per_class - half_norms) * inv_var
        return jax.scipy.special.logsumexp(terms, axis=-1) - jnp.asarray(math.log(b), dtype)

    def output_coordinate_bound(self, strategy) -> float:
        r"""The sensitivity bound: an :math:`\ell_2` bound on ``C x`` is also an :math:`\ell_\infty` one.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        float
            :math:`M_\infty`, equal to :meth:`sensitivity_bound`.
        """
        return float(self.sensitivity_bound(strategy))

    def draw_law_tv(self) -> float:
        """``0.0``: the phase is the only random draw besides the noise, and its uniform-draw boundaries are counted
        by :meth:`participation_boundaries`."""
        return 0.0

    def participation_boundaries(self) -> int:
        """``2 n^2`` (generous: the sampler draws one phase of ``b`` outcomes)."""
        return 2 * self.iterations * self.iterations

    def summary(self) -> SchemeSummary:
        """``b`` = the cycle length, the participation rate (:class:`~mcacct.schemes.base.SchemeSummary`)."""
        return SchemeSummary(self.cycle_length, None, self.participation_rate, None)

    def loss_error_params(self) -> LossErrorParams:
        """The closed form is at most as long as Theorem 5.1's recursion with ``b`` bins and ``p = 1``; at most
        ``ceil(n/b)`` participations; taken as a ratio of mixtures (factor 2, generous).

        Returns
        -------
        LossErrorParams
            ``(b, 1.0, ceil(n / b), 2.0)``.
        """
        return LossErrorParams(self.cycle_length, 1.0, self.max_participations, 2.0)


# -- the entry: how mcacct offers the scheme (mcacct.schemes.entry) ---------------------------------------------
@float64
def bins_from_batch(expected_batch_size: float, dataset_size: int) -> int:
    """Balls-in-bins' ``T = M / B``; ``ValueError`` when it is not an integer (naming ``--bins``).

    Parameters
    ----------
    expected_batch_size : float
        ``B`` in ``(0, M]``.
    dataset_size : int
        ``M >= 1``.

    Returns
    -------
    int
        :math:`T = M / B`, rounded (relative tolerance :math:`10^{-9}`).

    Raises
    ------
    ValueError
        Naming ``dataset_size`` or ``expected_batch_size`` out of range, or saying that ``M / B`` is not an integer
        (give ``--bins``).
    """
    m = check_count("dataset_size", dataset_size)
    bs = check_real("expected_batch_size", expected_batch_size, low=0.0, high=float(m), low_open=True)
    bins = m / bs
    t = int(round(bins))
    if abs(bins - t) > 1e-9 * bins:
        raise ValueError(f"dataset_size / expected_batch_size = {bins:g} is not an integer number of bins: give "
                         "--bins (an integer >= 1) or a batch size that divides the dataset size")
    return t


def _build_cli(a: SchemeArgs):
    bins = a.get("bins")
    if bins is None:
        _, bs, m = a.rate()
        bins = bins_from_batch(bs, m)
    elif a.given("batch_size") or a.given("dataset_size"):
        raise ValueError("give either --bins or --batch-size with --dataset-size for --scheme balls-in-bins, "
                         "not both")
    return BallsInBins(bins, a.iterations), a.strategy(bands=bins)  # participations are exactly `bins` apart


def _compare_plan(s: CompareSetting) -> ComparePlan:
    try:
        t = bins_from_batch(s.expected_batch_size, s.dataset_size)
    except ValueError:
        return ComparePlan.skipped(f"dataset_size / expected_batch_size = {s.dataset_size / s.expected_batch_size:g} "
                                   "is not an integer number of bins")
    # more bands than bins is handled exactly (overlapping columns of a bin)
    return ComparePlan(BallsInBins(t, s.iterations), s.strategy)


def _from_jax_privacy(selection, dataset_size: int | None) -> BallsInBins:
    n = check_count(selection_field("iterations"), selection.iterations)
    b = check_count(selection_field("cycle_length"), selection.cycle_length)
    refuse_dataset_size(dataset_size, "BallsInBinsSampling")
    return BallsInBins(b, n)


def _to_jax_privacy(scheme: BallsInBins, batch_selection):
    return batch_selection.BallsInBinsSampling(iterations=int(scheme.iterations), cycle_length=int(scheme.cycle_length))


#: The scheme's entry (:mod:`mcacct.schemes.registry` lists it).
INFO = SchemeInfo(
    "balls-in-bins", BallsInBins, "balls-in-bins with T bins (T = M / B)", compare_default=True,
    cli=SchemeCLI(_build_cli, frozenset({"iterations", "batch_size", "dataset_size", "c_col"}),
                  flags=(Flag("--bins", int, "balls-in-bins: number of bins T (>= 1; default dataset size / batch "
                                             "size)", check=check_count, rate=True),),
                  hints={"min_sep": "its separation is the number of bins: use --bins",
                         "sampling_prob": "every opportunity is taken (p = 1): give --bins or the batch flags",
                         "cold_start": "there is no start state"},
                  parameters={"cycle_length": "--bins"}),
    compare=CompareRow(_compare_plan),
    jax_privacy=JaxPrivacyEntry("BallsInBinsSampling", ("iterations", "cycle_length"), _from_jax_privacy,
                                _to_jax_privacy))
