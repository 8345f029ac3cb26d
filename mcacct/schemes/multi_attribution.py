r"""Multi-attribution (user-level) b-min-sep subsampling: accounting for Alg. 3 of Dong & Ganesh 2026 [arXiv:2602.09338] (§6).

Setting. Every example is attributed to a set of users; a user ``u`` owns at most ``k_u`` examples after
contribution bounding. Alg. 3 Poisson-samples every example with probability ``p`` into an interim set
``S_i`` and drops from the batch every example that shares a user with an example of
``S_{i-b+1}, ..., S_{i-1}``. Adjacent datasets (fixed-graph adjacency) differ in all examples of one user.

Dominating pair (Thm. 6.1, part 1). With gradients aligned, the worst case is the single-user dataset
``D_u`` of exactly ``k_u`` examples, and it is dominated by ``y = C x + z`` (``P``) versus ``y = z``
(``Q``), ``z ~ N(0, sigma^2 I)``, where ``x_i`` (the number of the user's examples in batch ``i``) is

.. math::
    x_i = 0 \ \text{ if } x_{i-1}, \dots, x_{i-b+1} \text{ has a positive entry}, \qquad
    x_i \sim \mathrm{Binom}(k_u, p) \ \text{ otherwise.}

So the user is "available" when none of the previous ``b - 1`` entries is positive; when available, the
user takes part with probability :math:`p_u = 1 - (1-p)^{k_u}` and then contributes
``j ~ Binom(k_u, p)`` conditioned on ``j >= 1`` examples. Only ``P`` is a mixture; ``Q`` is the
single Gaussian :math:`N(0, \sigma^2 I)`.

Recursion (Thm. 6.1, part 2). With :math:`s_i = \langle c^{(i)}, y\rangle / \sigma^2` and
:math:`v_i = \|c^{(i)}\|^2/\sigma^2` (column ``i`` truncated at row ``n``), the likelihood ratio of ``j``
examples at iteration ``i`` is :math:`N(j c_i, \sigma^2 I)/N(0, \sigma^2 I) = e^{j s_i - j^2 v_i / 2}` and

.. math::
    f_i = (1-p)^{k_u} f_{i+1} + \sum_{j=1}^{k_u} \binom{k_u}{j} p^j (1-p)^{k_u-j}\,
          e^{j s_i - j^2 v_i/2} f_{i+b}, \qquad f_i = 1 \ (i > n), \qquad \frac{P}{Q}(y) = f_1 .

This is the recursion of Theorem 5.1 with probability :math:`p_u` and per-participation term
:math:`\ell'_i = \ln \sum_j (\mathrm{Binom}(j; k_u, p)/p_u)\, e^{j s_i - j^2 v_i/2}`; it runs through
:func:`mcacct.schemes.bminsep.log_ratio_from_terms` (log space, ``lax.scan`` or the blocked variant), at
``O(n k_u)`` for the terms. ``k_u = 1`` is example-level b-min-sep with the cold start; ``b = 1`` is
group-level Poisson DP-SGD (a product of the scalar mixtures :math:`\sum_j \mathrm{Binom}(j;k_u,p)
N(j, \sigma^2)` versus :math:`N(0, \sigma^2)` when ``C = I``).

Start. The analysis is for the cold start (all of the user's examples available at iteration 1). The
paper warms Alg. 3 up by running the sampler without training; the trained iterations are then a
randomised post-processing of the cold-start mechanism, so the cold-start guarantee applies (§6.2). There
is no analytic warm start here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.strategies.banded import check_strategy_type
from mcacct.core.validate import check_call, check_count, check_prob
from mcacct.kernels.alias import alias_draw, rational_alias
from mcacct.kernels.output import gaussian_output
from mcacct.schemes.base import Draws, LossErrorParams, SchemeSummary, Scheme, check_scheme_fields, jit_method
from mcacct.kernels.mean_shift import mean_shift_amplitudes
from mcacct.kernels.sliding import participation_log_ratios, sliding_dot
from mcacct.schemes.bminsep import BMinSep, log_ratio_from_terms, sample_participation
from mcacct.core.precision import float64
from mcacct.pld.specs import GroupPoissonSpec
from mcacct.schemes.entry import CompareRow, ComparePlan, CompareSetting, SchemeInfo
from mcacct.schemes.flags import Flag, SchemeArgs, SchemeCLI

__all__ = ["MultiAttribution", "INFO"]


@functools.lru_cache(maxsize=64)
def _count_table(k: int, p: float):
    """Alias table of a participating user's number of examples, ``j - 1`` for ``j = 1..k`` with weights
    ``binom(k, j) p^j (1-p)^(k-j)`` in exact rationals of the float ``p``: ``(packed, cell_bits, tv)``."""
    f = Fraction(float(p))
    return rational_alias([math.comb(k, j) * f**j * (1 - f) ** (k - j) for j in range(1, k + 1)],
                          f"the count of a user with k_u = {k} examples")


def _log_binom_pmf(k: int, p: float) -> np.ndarray:
    """``ln Binom(j; k, p)`` for ``j = 0..k`` (float64; ``-inf`` where the mass is 0)."""
    j = np.arange(k + 1)
    if p >= 1.0:
        return np.where(j == k, 0.0, -np.inf)
    lg = np.array([math.lgamma(k + 1) - math.lgamma(i + 1) - math.lgamma(k - i + 1) for i in j])
    return lg + j * math.log(p) + (k - j) * math.log1p(-p)


@float64
@dataclass(frozen=True)
class MultiAttribution(Scheme):
    r"""User-level accounting of multi-attribution b-min-sep subsampling (Alg. 3, Thm. 6.1), cold start.

    Parameters
    ----------
    sampling_prob : float
        ``p`` in ``(0, 1]``: the per-example Poisson probability of Alg. 3.
    min_sep : int
        ``b >= 1``: a user takes part at most once in any ``b`` consecutive iterations.
    iterations : int
        ``n >= 1``.
    max_examples_per_user : int, default 1
        ``k_u >= 1``: the contribution bound (the worst case has exactly ``k_u`` examples).

    Notes
    -----
    ``P/Q`` is computed exactly by the recursion in the module docstring; a participation of ``j``
    examples shifts the mean by ``j c_i``, so the worst-case sensitivity is
    :math:`k_u \sqrt{\lceil n/b\rceil}\,\|c\|`.
    """

    sampling_prob: float
    min_sep: int
    iterations: int
    max_examples_per_user: int = 1

    def __post_init__(self) -> None:
        check_scheme_fields(self, sampling_prob=check_prob, min_sep=check_count, iterations=check_count,
                            max_examples_per_user=check_count)

    @property
    def user_participation_prob(self) -> float:
        r""":math:`p_u = 1 - (1 - p)^{k_u}`: probability that an available user takes part.

        Returns
        -------
        float
            :math:`p_u \in (0, 1]`, from ``expm1``/``log1p`` (exactly ``p`` when ``k_u = 1`` or ``p = 1``).
        """
        p, k = self.sampling_prob, self.max_examples_per_user
        if k == 1 or p >= 1.0:
            return p
        return -math.expm1(k * math.log1p(-p))

    @property
    def user_scheme(self):
        """The cold-start :class:`~mcacct.schemes.bminsep.BMinSep` followed by the user's participation times.

        Returns
        -------
        BMinSep
            ``BMinSep(p_u, b, n, warm_start=False)``.
        """
        return BMinSep(self.user_participation_prob, self.min_sep, self.iterations, warm_start=False)

    def count_log_weights(self) -> np.ndarray:
        r""":math:`\ln(\mathrm{Binom}(j; k_u, p) / p_u)` for ``j = 1..k_u`` (the law of the count given
        participation).

        Returns
        -------
        numpy.ndarray
            float64 ``(k_u,)``; ``[0.0]`` for ``k_u = 1``.
        """
        k = self.max_examples_per_user
        if k == 1:
            return np.zeros(1)
        return _log_binom_pmf(k, self.sampling_prob)[1:] - math.log(self.user_participation_prob)

    # -- AccountedScheme ---------------------------------------------------------------------------------
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
        r"""``k_u sqrt(ceil(n/b)) ||c||``.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        float
            :math:`k_u \sqrt{\lceil n/b \rceil}\,\|c\|`.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`, or if ``len(c_col) > min_sep``.
        """
        self.check_strategy(strategy)
        return self.max_examples_per_user * strategy.worst_case_sensitivity(self.iterations, self.min_sep)

    def sample_counts(self, key: jax.Array, num_samples: int) -> jax.Array:
        """The vector ``x`` of Thm. 6.1 (examples of the user per batch), shape ``(num_samples, n)``, float64.

        Parameters
        ----------
        key : jax.Array
            The key: split into the participation times' key (the cold-start user scheme) and the counts' key.
        num_samples : int
            Rows, ``>= 1``.

        Returns
        -------
        jax.Array
            float64 ``(num_samples, n)``: 0 where the user does not take part, else a count in
            ``1..k_u`` drawn from the integer alias table of the conditional binomial law.

        Raises
        ------
        ValueError
            Naming ``num_samples`` if it is not an integer ``>= 1``.
        """
        check_call(self, num_samples=num_samples)
        k_times, k_count = jax.random.split(key)
        part = sample_participation(k_times, self.user_scheme, num_samples)
        if self.max_examples_per_user == 1:
            return part.astype(jnp.float64)
        packed, cell_bits, _ = _count_table(self.max_examples_per_user, self.sampling_prob)
        words = jax.random.bits(k_count, (num_samples, self.iterations), jnp.uint64)
        j = alias_draw(words, packed, cell_bits) + 1
        return jnp.where(part, j.astype(jnp.float64), 0.0)

    def draw(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        """``y = C x + z`` under ``P`` (``"remove"``, ``x`` the user's counts per batch) or ``y = z`` under ``Q``.

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
            self.sample_counts(k, num_samples).astype(dtype), strategy.c_col))

    def participation_terms(self, y: jax.Array, sigma, strategy, dot_method: str = "auto") -> jax.Array:
        r""":math:`\ell'_i = \ln \sum_{j=1}^{k_u} (\mathrm{Binom}(j;k_u,p)/p_u)\,e^{j s_i - j^2 v_i/2}`.

        Parameters
        ----------
        y, sigma, strategy : array_like, float, BandedToeplitz
            Outputs ``(..., n)``, the noise multiplier and the strategy.
        dot_method : str, default "auto"
            The sliding-sum method.

        Returns
        -------
        jax.Array
            ``(..., n)``: :math:`\ell'_i` (for ``k_u = 1`` the plain terms
            :math:`(\langle c^{(i)}, y\rangle - \|c^{(i)}\|^2/2)/\sigma^2`).

        Raises
        ------
        ValueError
            Naming ``y``, ``sigma``, ``strategy`` or ``dot_method``.
        """
        y = check_call(self, y=y, sigma=sigma, strategy=strategy, dot_method=dot_method)
        k = self.max_examples_per_user
        if k == 1:
            return participation_log_ratios(y, jnp.asarray(sigma, y.dtype), strategy.c_col, dot_method)
        n = y.shape[-1]
        inv_var = 1.0 / jnp.asarray(sigma, y.dtype) ** 2
        s = sliding_dot(y, strategy.c_col, dot_method) * inv_var
        v = jnp.asarray(strategy.column_sq_norms(n), y.dtype) * inv_var
        j = jnp.arange(1, k + 1, dtype=y.dtype)
        w = jnp.asarray(self.count_log_weights(), y.dtype)
        terms = w + j * s[..., None] - 0.5 * j * j * v[:, None]
        return jax.scipy.special.logsumexp(terms, axis=-1)

    def loss_rows(self, y, strategy, sigma, aux, direction: str, dot_method: str, recursion: str):
        """``ln P(y)/Q(y)`` (Thm. 6.1): Theorem 5.1's recursion of the user scheme on :meth:`participation_terms`.

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
            Shape ``(...)``; ``aux`` and ``direction`` are unused.
        """
        return self._log_ratio(y, sigma, strategy, dot_method, recursion)

    @jit_method("strategy", "dot_method", "recursion")
    def _log_ratio(self, y, sigma, strategy, dot_method, recursion):
        ell = self.participation_terms(y, sigma, strategy, dot_method)
        return log_ratio_from_terms(ell, self.user_scheme, recursion)

    def participation_boundaries(self) -> int:
        """The cold-start user scheme's boundaries (the count given participation is charged by
        :meth:`draw_law_tv`).

        Returns
        -------
        int
            ``user_scheme.participation_boundaries()``.
        """
        return self.user_scheme.participation_boundaries()

    def output_coordinate_bound(self, strategy) -> float:
        r"""The sensitivity bound: an :math:`\ell_2` bound on ``C x`` is also an :math:`\ell_\infty` one (no sharper
        bound is stated for this scheme).

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        float
            :math:`M_\infty`, equal to :meth:`sensitivity_bound`.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`, or if ``len(c_col) > min_sep``.
        """
        return float(self.sensitivity_bound(strategy))

    def draw_law_tv(self) -> float:
        """``n`` draws of the count given participation (``k_u > 1``), each from an integer alias table of the
        exact rational weights ``Binom(j; k_u, p)``, ``j = 1..k_u`` (:func:`mcacct.kernels.alias.rational_alias`),
        within its rounding bound of the exact law; 0 for ``k_u = 1``.

        Returns
        -------
        float
            ``n`` times the alias table's total-variation bound, or ``0.0``.
        """
        if self.max_examples_per_user == 1:
            return 0.0
        return self.iterations * _count_table(self.max_examples_per_user, self.sampling_prob)[2]

    def summary(self) -> SchemeSummary:
        """``b`` = ``min_sep``, ``q`` (:class:`~mcacct.schemes.base.SchemeSummary`).

        Returns
        -------
        SchemeSummary
            ``(b, p, None, None)``.
        """
        return SchemeSummary(self.min_sep, self.sampling_prob, None, None)

    def loss_error_params(self) -> LossErrorParams:
        """The user scheme's recursion (``b``, ``p``); ``J = n`` (posterior participation mass at most one per
        iteration; generous); the loss is taken as a ratio of mixtures (factor 2, generous).

        Returns
        -------
        LossErrorParams
            ``(b, p, n, 2.0)``.
        """
        return LossErrorParams(self.min_sep, self.sampling_prob, self.iterations, 2.0)


# -- the entry: how mcacct offers the scheme (mcacct.schemes.entry) ---------------------------------------------
def _build_cli(a: SchemeArgs):
    b = a.min_sep
    k = a.get("max_examples_per_user", 1)
    return MultiAttribution(a.min_sep_prob(b), b, a.iterations, k), a.strategy()


def _compare_plan(s: CompareSetting) -> ComparePlan:
    k = s.option("max_examples_per_user", 2)
    p = s.sampling_prob
    spec = None
    if s.min_sep == 1:  # Poisson sampling of users: the group PLD, sensitivity c_0 as a scale of sigma
        spec = GroupPoissonSpec(group_size=k, sampling_prob=p, sigma=1.0, steps=s.iterations)
    return ComparePlan(MultiAttribution(p, s.min_sep, s.iterations, k), s.strategy, {"level": "user"},
                       pld_spec=spec, pld_scale=s.strategy.c_col[0])


#: The scheme's entry (:mod:`mcacct.schemes.registry` lists it).
INFO = SchemeInfo(
    "multi-attribution", MultiAttribution, "user-level multi-attribution b-min-sep (Alg. 3), cold start",
    cli=SchemeCLI(_build_cli, flags=(
        Flag("--max-examples-per-user", int, "multi-attribution: examples per user k_u (>= 1; default 1, compare: "
                                             "2); compare: adds the multi-attribution row", check=check_count),)),
    compare=CompareRow(_compare_plan, {"max_examples_per_user": check_count}))
