r"""Cyclic Poisson sampling for DP-BandMF (Dong & Ganesh 2026 [arXiv:2602.09338], §3).

Both assign an example to one of ``b`` residue classes ("shifts") ``s in {0, ..., b-1}``; the example can
only take part in the iterations ``t`` (0-based) with ``t = s (mod b)``. With a ``k``-banded strategy,
``k <= b``, the outputs touched by different opportunities are disjoint, so given the shift the privacy
loss factorises over the opportunities. With

.. math::  \ell_t = \big(\langle c^{(t)}, y\rangle - \|c^{(t)}\|^2/2\big)/\sigma^2

(column ``t`` of ``C`` truncated at row ``n``, as in :mod:`mcacct.kernels.sliding`):

* **Cyclic Poisson** (Choquette-Choo et al.): in every opportunity the example is Poisson sampled with
  probability ``q``. Given the shift, :math:`P_s/Q = \prod_{t \equiv s} (1 - q + q e^{\ell_t})`.
  With ``random_phase=True`` the shift is uniform and secret, so

  .. math::  L(y) = \ln \frac{1}{b} \sum_{s=0}^{b-1} \exp\Big(\sum_{t \equiv s} \ln(1 - q + q e^{\ell_t})\Big);

  with ``random_phase=False`` the partition is public and the worst class (shift 0, the one with
  :math:`\lceil n/b \rceil` opportunities and untruncated columns) is analysed:
  :math:`L = \sum_{t \equiv 0} \ln(1 - q + q e^{\ell_t})`. The latter is exactly the composition of
  :math:`\lceil n/b \rceil` Poisson-subsampled Gaussian mechanisms with noise multiplier
  :math:`\sigma / \|c\|` when every column of class 0 is complete (e.g. ``b | n``), and is dominated by that
  composition otherwise; it is the analysis of Dong & Ganesh 2026 [arXiv:2602.09338] §3 and of :class:`mcacct.pld.CyclicPoissonBandMFSpec`.
  By convexity the random-phase divergence never exceeds the fixed-phase one.
  At equal expected batch size ``B`` on ``M`` examples, ``q = b B / M``.

Both mixtures over shifts are evaluated exactly with ``logsumexp`` (``O(n)`` per sample after the sliding
dot products). Samplers draw the shift and the Poisson coins directly. :class:`CyclicPoisson` needs
``k <= b`` (for ``q < 1`` overlapping columns break the factorisation over the opportunities; ``q = 1`` with
a random phase is :class:`BallsInBins`); its public methods refuse a wider strategy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from dataclasses import dataclass

from mcacct.kernels.output import gaussian_output
from mcacct.kernels.recursion import shift_mixture_log_ratio
from mcacct.kernels.mean_shift import mean_shift_amplitudes
from mcacct.kernels.sliding import participation_log_ratios
from mcacct.core.precision import float64
from mcacct.schemes.base import Draws, LossErrorParams, SchemeSummary, Scheme, check_scheme_fields, jit_method
from mcacct.strategies.banded import check_strategy_type
from mcacct.core.validate import check_bool, check_call, check_count, check_prob
from mcacct.pld.specs import CyclicPoissonBandMFSpec
from mcacct.schemes.entry import (CompareRow, ComparePlan, CompareSetting, JaxPrivacyEntry, SchemeInfo,
                                  refuse_dataset_size, selection_field)
from mcacct.schemes.flags import COMMON_DESTS, Flag, SchemeArgs, SchemeCLI
from mcacct.core.rates import sampling_prob_from_batch_size

__all__ = ["CyclicPoisson", "INFO"]


def _log_terms(y, sigma, strategy, dot_method):
    return participation_log_ratios(y, jnp.asarray(sigma, y.dtype), strategy.c_col, dot_method)


@float64
@dataclass(frozen=True)
class CyclicPoisson(Scheme):
    r"""Cyclic Poisson subsampling (Dong & Ganesh 2026 [arXiv:2602.09338], §3) of one example over ``iterations`` steps.

    The data are split into ``cycle_length = b`` parts; iteration ``t`` (0-based) Poisson-samples with
    probability ``q`` from part ``t mod b``. See the module docstring for the privacy loss.

    Parameters
    ----------
    sampling_prob : float
        ``q`` in ``(0, 1]``, the Poisson probability within the example's part
        (``q = b B / M`` for expected batch size ``B`` on ``M`` examples).
    cycle_length : int
        ``b >= 1``, the cycle length (number of parts; jax-privacy's ``cycle_length``); needs
        ``len(c_col) <= b``.
    iterations : int
        ``n >= 1``.
    random_phase : bool, default True
        ``True`` (default): the example's part is uniformly random and secret, the loss is the mixture over
        the ``b`` shifts. ``False``: the public-partition worst case (part 0), whose loss equals the
        composition analysed by the PLD accountant.
    """

    sampling_prob: float
    cycle_length: int
    iterations: int
    random_phase: bool = True

    def __post_init__(self) -> None:
        check_scheme_fields(self, sampling_prob=check_prob, cycle_length=check_count, iterations=check_count,
                            random_phase=check_bool)

    @property
    def participation_rate(self) -> float:
        """Expected participation rate ``q / b`` (random phase; per iteration of the part otherwise ``q``).

        Returns
        -------
        float
            :math:`q / b`.
        """
        return self.sampling_prob / self.cycle_length

    # -- the contract -----------------------------------------------------------------------------------
    def check_strategy(self, strategy) -> None:
        """``strategy`` must be a :class:`~mcacct.strategies.banded.BandedToeplitz` with ``len(c_col) <= cycle_length``.

        Parameters
        ----------
        strategy : object
            The value to check.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`, or if ``len(c_col) > cycle_length``.
        """
        check_strategy_type("strategy", strategy)
        if strategy.bands > self.cycle_length:
            raise ValueError(
                f"c_col has {strategy.bands} entries but cycle_length is {self.cycle_length}: CyclicPoisson needs "
                f"len(c_col) <= cycle_length (allowed: 1 to {self.cycle_length} bands); for q = 1 with a random phase use "
                "BallsInBins, which is exact for any band width")

    def sample_participation(self, key: jax.Array, num_samples: int) -> jax.Array:
        """Participation vectors, shape ``(num_samples, n)`` (bool).

        Parameters
        ----------
        key : jax.Array
            The key: split into the shift's key and the coins' key.
        num_samples : int
            Rows, ``>= 1``.

        Returns
        -------
        jax.Array
            bool ``(num_samples, n)``: row ``i`` is true at ``t = s_i (mod b)`` where its coin (probability ``q``)
            came up; ``s_i`` uniform with ``random_phase``, else 0.

        Raises
        ------
        ValueError
            Naming ``num_samples`` if it is not an integer ``>= 1``.
        """
        check_call(self, num_samples=num_samples)
        b, n = self.cycle_length, self.iterations
        k_shift, k_coin = jax.random.split(key)
        if self.random_phase:
            shift = jax.random.randint(k_shift, (num_samples, 1), 0, b, dtype=jnp.int32)
        else:
            shift = jnp.zeros((num_samples, 1), jnp.int32)
        slot = (jnp.arange(n, dtype=jnp.int32) % b)[None, :] == shift
        if self.sampling_prob >= 1.0:
            return slot
        coins = jax.random.uniform(k_coin, (num_samples, n), dtype=jnp.float64) < self.sampling_prob
        return slot & coins

    def draw(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        """Outputs ``y = C x + z`` (``"remove"``) or ``y = z`` (``"add"``), shape ``(num_samples, n)``.

        Parameters
        ----------
        key, strategy, sigma : jax.Array, BandedToeplitz, float
            The ``jax.random`` key, the strategy ``C`` and the noise multiplier (checked by :meth:`Scheme.sample`).
        num_samples, direction, dtype : int, {"remove", "add"}, dtype
            Rows, ``P`` or ``Q``, and the dtype of ``y``.

        Returns
        -------
        Draws
            ``y`` of ``dtype``, ``(num_samples, n)``; ``aux`` is ``None``.
        """
        return Draws(self._sample_y(key, strategy, sigma, num_samples, direction == "remove", dtype))

    @jit_method("strategy", "num_samples", "positive", "dtype")
    def _sample_y(self, key, strategy, sigma, num_samples, positive, dtype):
        return gaussian_output(key, (num_samples, self.iterations), sigma, dtype, positive, lambda k: mean_shift_amplitudes(
            self.sample_participation(k, num_samples).astype(dtype), strategy.c_col))

    def loss_rows(self, y, strategy, sigma, aux, direction: str, dot_method: str, recursion: str):
        """``ln P(y)/Q(y)`` for each row of ``y``: the exact mixture over the shifts (module docstring); a closed
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
            Shape ``(...)``: :math:`L(y)` of the module docstring (random or fixed phase); ``aux`` and
            ``direction`` are unused.
        """
        return self._log_ratio(y, sigma, strategy, dot_method)

    @jit_method("strategy", "dot_method")
    def _log_ratio(self, y, sigma, strategy, dot_method):
        ell = _log_terms(y, sigma, strategy, dot_method)
        return shift_mixture_log_ratio(ell, self.cycle_length, self.sampling_prob, self.random_phase)

    def exact_pld(self, strategy):
        r"""The public partition (``random_phase=False``) when every column of class 0 is complete: the
        composition of :math:`m = \lceil n/b \rceil` Poisson-subsampled Gaussian mechanisms of sensitivity
        :math:`\|c\|` (:class:`mcacct.pld.CyclicPoissonBandMFSpec` at ``sigma = 1``), which is then exactly
        the loss of the module docstring. Class 0's last column starts at row :math:`b (m - 1)` and ends at
        :math:`b (m - 1) + k - 1`, complete iff :math:`b (m - 1) + k \le n` (always when ``b | n``, as
        :math:`k \le b`). ``None`` otherwise: a secret random phase (the mixture over shifts is tighter than the
        composition) or a truncated last column (the composition only dominates it).

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        CyclicPoissonBandMFSpec or None
            ``CyclicPoissonBandMFSpec(n, b, q, c_col, sigma=1.0)``, or ``None`` as above.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`, or if ``len(c_col) > cycle_length``.
        """
        self.check_strategy(strategy)
        b, n = self.cycle_length, self.iterations
        m = -(-n // b)
        if self.random_phase or b * (m - 1) + strategy.bands > n:
            return None
        return CyclicPoissonBandMFSpec(iterations=n, min_sep=b, sampling_prob=self.sampling_prob,
                                       c_col=tuple(strategy.c_col), sigma=1.0)

    def sensitivity_bound(self, strategy) -> float:
        r"""``sqrt(ceil(n/b)) ||c||``: at most ``ceil(n/b)`` participations (one per cycle), touching disjoint
        rows since ``len(c_col) <= b``.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        float
            :math:`\sqrt{\lceil n/b \rceil}\,\|c\|`.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`, or if ``len(c_col) > cycle_length``.
        """
        self.check_strategy(strategy)
        return strategy.worst_case_sensitivity(self.iterations, self.cycle_length)

    def output_coordinate_bound(self, strategy) -> float:
        r"""``max |c|``: participations are ``b >= len(c_col)`` apart, so each output coordinate receives at most
        one entry of ``c``.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        float
            :math:`\max_j |c_j|`.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`, or if ``len(c_col) > cycle_length``.
        """
        self.check_strategy(strategy)
        return float(max(abs(v) for v in strategy.c_col))

    def draw_law_tv(self) -> float:
        """``0.0``: the phase and the coins are the only random draws besides the noise, and their uniform-draw
        boundaries are counted by :meth:`participation_boundaries`.

        Returns
        -------
        float
        """
        return 0.0

    def participation_boundaries(self) -> int:
        """The phase (``b`` outcomes) and one coin per iteration.

        Returns
        -------
        int
            :math:`b + n`.
        """
        return self.cycle_length + self.iterations

    def summary(self) -> SchemeSummary:
        """``b`` = the cycle length, ``q``, the participation rate (:class:`~mcacct.schemes.base.SchemeSummary`).

        Returns
        -------
        SchemeSummary
            ``(b, q, q / b, None)``.
        """
        return SchemeSummary(self.cycle_length, self.sampling_prob, self.participation_rate, None)

    def loss_error_params(self) -> LossErrorParams:
        """The closed form is at most as long as Theorem 5.1's recursion with ``b`` and ``q``; at most
        ``ceil(n/b)`` participations; ``Q`` is the plain Gaussian (factor 1).

        Returns
        -------
        LossErrorParams
            ``(b, q, ceil(n / b), 1.0)``.
        """
        return LossErrorParams(self.cycle_length, self.sampling_prob, -(-self.iterations // self.cycle_length), 1.0)


# -- the entry: how mcacct offers the scheme (mcacct.schemes.entry) ---------------------------------------------
# jax-privacy's partition_type (by enum member name) -> random_phase: EQUAL_SPLIT ties one example's part to the
# others' (the public-partition worst case), INDEPENDENT draws each part independently (a secret shift)
_PARTITIONS = {"EQUAL_SPLIT": False, "INDEPENDENT": True}


def _from_jax_privacy(selection, dataset_size: int | None) -> CyclicPoisson:
    import enum

    q = check_prob(selection_field("sampling_prob"), selection.sampling_prob)
    n = check_count(selection_field("iterations"), selection.iterations)
    b = check_count(selection_field("cycle_length"), selection.cycle_length)
    b_max = selection.truncated_batch_size
    if b_max is not None:
        raise ValueError(f"{selection_field('truncated_batch_size')} must be None for CyclicPoissonSampling: "
                         f"truncated cyclic Poisson sampling is not modelled by mcacct; got {b_max!r} (truncation is "
                         "modelled for BMinSepSampling: mcacct.TruncatedBMinSep)")
    partition = selection.partition_type
    if not (isinstance(partition, enum.Enum) and partition.name in _PARTITIONS):
        raise ValueError(f"{selection_field('partition_type')} must be one of {tuple(_PARTITIONS)} (jax-privacy's "
                         f"PartitionType); got {partition!r}")
    refuse_dataset_size(dataset_size, "CyclicPoissonSampling")
    return CyclicPoisson(q, b, n, random_phase=_PARTITIONS[partition.name])


def _to_jax_privacy(scheme: CyclicPoisson, batch_selection):
    partition = batch_selection.PartitionType.INDEPENDENT if scheme.random_phase else \
        batch_selection.PartitionType.EQUAL_SPLIT
    return batch_selection.CyclicPoissonSampling(sampling_prob=float(scheme.sampling_prob),
                                                 iterations=int(scheme.iterations),
                                                 cycle_length=int(scheme.cycle_length), partition_type=partition)


def _build_cli(a: SchemeArgs):
    b = a.min_sep
    sp, bs, m = a.rate()
    if sp is None:
        sampling_prob_from_batch_size(bs, m, b)  # checks B / M <= 1/b, naming expected_batch_size
        sp = min(b * bs / m, 1.0)
    return CyclicPoisson(sp, b, a.iterations, random_phase=not a.given("public_phase")), a.strategy()


def _compare_plan(s: CompareSetting) -> ComparePlan:
    b, n = s.min_sep, s.iterations
    q = min(b * s.participation_rate, 1.0)
    # the row calibrates the secret random phase; its PLD column is the public partition's composition, which
    # upper-bounds the random-phase mixture (module docstring), complete last column or not
    spec = CyclicPoissonBandMFSpec(iterations=n, min_sep=b, sampling_prob=q, c_col=tuple(s.strategy.c_col), sigma=1.0)
    return ComparePlan(CyclicPoisson(q, b, n, random_phase=True), s.strategy, pld_spec=spec)


#: The scheme's entry (:mod:`mcacct.schemes.registry` lists it).
INFO = SchemeInfo(
    "cyclic-poisson", CyclicPoisson, "cyclic Poisson over min-sep parts (q = b B / M)", compare_default=True,
    cli=SchemeCLI(_build_cli, COMMON_DESTS - {"cold_start"},
                  flags=(Flag("--public-phase", bool, "cyclic-poisson: the public-partition worst case (part 0) "
                                                      "instead of a secret random phase"),),
                  hints={"cold_start": "the part is fixed from step 1 (there is no start state)"},
                  parameters={"cycle_length": "--min-sep"}),
    compare=CompareRow(_compare_plan),
    jax_privacy=JaxPrivacyEntry("CyclicPoissonSampling", ("sampling_prob", "iterations", "truncated_batch_size",
                                                          "cycle_length", "partition_type"),
                                _from_jax_privacy, _to_jax_privacy))
