r"""Baseline sampling schemes for DP-BandMF: cyclic Poisson and balls-in-bins (Dong & Ganesh 2026 [arXiv:2602.09338], §3).

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

Both mixtures over shifts are evaluated exactly with ``logsumexp`` (``O(n)`` per sample after the sliding
dot products). Samplers draw the shift and the Poisson coins directly. :class:`CyclicPoisson` needs
``k <= b`` (for ``q < 1`` overlapping columns break the factorisation over the opportunities; ``q = 1`` with
a random phase is :class:`BallsInBins`); its public methods refuse a wider strategy.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

import numpy as np

from mcacct.schemes.strategy import check_strategy_type
from mcacct.validate import check_bool, check_call, check_count, check_fields, check_int, check_prob
from mcacct.kernels.output import gaussian_output
from mcacct.kernels.recursion import shift_mixture_log_ratio
from mcacct.kernels.sliding import mean_shift_amplitudes, participation_log_ratios, sliding_dot
from mcacct.schemes.base import MinSepAccounting, jit_method
from mcacct.precision import float64

__all__ = ["CyclicPoisson", "BallsInBins"]


def _log_terms(y, sigma, strategy, dot_method):
    return participation_log_ratios(y, jnp.asarray(sigma, y.dtype), strategy.c_col, dot_method)


@float64
@dataclass(frozen=True)
class CyclicPoisson(MinSepAccounting):
    r"""Cyclic Poisson subsampling (Dong & Ganesh 2026 [arXiv:2602.09338], §3) of one example over ``iterations`` steps.

    The data are split into ``min_sep = b`` parts; iteration ``t`` (0-based) Poisson-samples with
    probability ``q`` from part ``t mod b``. See the module docstring for the privacy loss.

    Parameters
    ----------
    sampling_prob:
        ``q`` in ``(0, 1]``, the Poisson probability within the example's part
        (``q = b B / M`` for expected batch size ``B`` on ``M`` examples).
    min_sep:
        ``b >= 1``, the cycle length (number of parts); needs ``len(c_col) <= b``.
    iterations:
        ``n >= 1``.
    random_phase:
        ``True`` (default): the example's part is uniformly random and secret, the loss is the mixture over
        the ``b`` shifts. ``False``: the public-partition worst case (part 0), whose loss equals the
        composition analysed by the PLD accountant.
    """

    sampling_prob: float
    min_sep: int
    iterations: int
    random_phase: bool = True

    def __post_init__(self) -> None:
        check_fields(self, sampling_prob=check_prob, min_sep=check_count, iterations=check_count,
                     random_phase=check_bool)

    @property
    def participation_rate(self) -> float:
        """Expected participation rate ``q / b`` (random phase; per iteration of the part otherwise ``q``)."""
        return self.sampling_prob / self.min_sep

    # -- AccountedScheme (sensitivity_bound: MinSepAccounting) ---------------------------------------------
    def check_strategy(self, strategy) -> None:
        """``strategy`` must be a :class:`~mcacct.schemes.strategy.BandedToeplitz` with ``len(c_col) <= min_sep``."""
        check_strategy_type("strategy", strategy)
        if strategy.bands > self.min_sep:
            raise ValueError(
                f"c_col has {strategy.bands} entries but min_sep is {self.min_sep}: CyclicPoisson needs "
                f"len(c_col) <= min_sep (allowed: 1 to {self.min_sep} bands); for q = 1 with a random phase use "
                "BallsInBins, which is exact for any band width")

    def sample_participation(self, key: jax.Array, num_samples: int) -> jax.Array:
        """Participation vectors, shape ``(num_samples, n)`` (bool)."""
        check_call(self, num_samples=num_samples)
        b, n = self.min_sep, self.iterations
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

    def sample_y(self, key: jax.Array, strategy, sigma, num_samples: int, positive: bool = True,
                 dtype=jnp.float64) -> jax.Array:
        """Outputs ``y = C x + z`` (``positive``) or ``y = z``, shape ``(num_samples, n)``; needs
        ``len(c_col) <= min_sep``."""
        check_call(self, strategy=strategy, sigma=sigma, num_samples=num_samples, positive=positive, dtype=dtype)
        return self._sample_y(key, strategy, sigma, num_samples, positive, dtype)

    @jit_method("strategy", "num_samples", "positive", "dtype")
    def _sample_y(self, key, strategy, sigma, num_samples, positive, dtype):
        return gaussian_output(key, (num_samples, self.iterations), sigma, dtype, positive, lambda k: mean_shift_amplitudes(
            self.sample_participation(k, num_samples).astype(dtype), strategy.c_col))

    def log_ratio(self, y: jax.Array, sigma, strategy, dot_method: str = "auto") -> jax.Array:
        """``ln P(y)/Q(y)`` for each row of ``y`` (shape ``(..., n)``); needs ``len(c_col) <= min_sep``."""
        y = check_call(self, y=y, sigma=sigma, strategy=strategy, dot_method=dot_method)
        return self._log_ratio(y, sigma, strategy, dot_method)

    @jit_method("strategy", "dot_method")
    def _log_ratio(self, y, sigma, strategy, dot_method):
        ell = _log_terms(y, sigma, strategy, dot_method)
        return shift_mixture_log_ratio(ell, self.min_sep, self.sampling_prob, self.random_phase)

    def loss_kernel(self, key, sigma, strategy, num_samples: int, positive: bool, dtype,
                    dot_method: str = "auto", recursion: str = "auto"):
        check_call(self, strategy=strategy, sigma=sigma, num_samples=num_samples, positive=positive, dtype=dtype,
                   dot_method=dot_method, recursion=recursion)  # recursion: unused (closed form), still checked
        y = self._sample_y(key, strategy, sigma, num_samples, positive, jnp.float64).astype(dtype)
        loss = self._log_ratio(y, sigma, strategy, dot_method)
        return loss if positive else -loss


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
class BallsInBins:
    r"""Balls-in-bins subsampling (Chua et al.; Dong & Ganesh 2026 [arXiv:2602.09338], §3) of one example over ``iterations`` steps.

    The example is put in one of ``min_sep = b`` bins uniformly at random and takes part in every
    iteration of its bin (``s, s + b, ...``, 0-based). The loss is the exact mixture over the ``b`` shifts
    (see the module docstring); for ``n < b`` shifts ``s >= n`` never participate. Any band width ``k`` is
    exact: with ``k > b`` the overlapping columns of a class add up in the mean ``C x_s``.

    Parameters
    ----------
    min_sep:
        ``b >= 1``, the number of bins (epoch length; ``M / B`` at expected batch size ``B``).
    iterations:
        ``n >= 1``.
    """

    min_sep: int
    iterations: int

    def __post_init__(self) -> None:
        check_fields(self, min_sep=check_count, iterations=check_count)

    @property
    def sampling_prob(self) -> float:
        """Always 1 (every opportunity is taken)."""
        return 1.0

    @property
    def participation_rate(self) -> float:
        """``1 / b``."""
        return 1.0 / self.min_sep

    @property
    def max_participations(self) -> int:
        return -(-self.iterations // self.min_sep)

    def _as_cyclic(self) -> CyclicPoisson:
        return CyclicPoisson(1.0, self.min_sep, self.iterations, random_phase=True)

    def class_mean(self, strategy) -> np.ndarray:
        """``C x_0`` (float64, length ``n``), the output mean of shift 0; shift ``s`` is it moved ``s`` down."""
        check_call(self, strategy=strategy)
        return _class0_mean(tuple(strategy.c_col), self.iterations, self.min_sep)

    def shift_sq_norms(self, strategy) -> np.ndarray:
        r""":math:`\|C x_s\|^2` for ``s = 0..b-1`` (float64)."""
        check_call(self, strategy=strategy)
        return _shift_sq_norms(tuple(strategy.c_col), self.iterations, self.min_sep)

    # -- AccountedScheme ---------------------------------------------------------------------------------
    def check_strategy(self, strategy) -> None:
        """Every non-negative banded Toeplitz ``C`` is admissible, any number of bands."""
        check_strategy_type("strategy", strategy)

    def sensitivity_bound(self, strategy) -> float:
        r"""The exact :math:`\max_s \|C x_s\| = \|C x_0\|` over the ``b`` participation patterns (the shift-0
        pattern has the most and the least truncated columns); ``<= sqrt(ceil(n/b)) ||c||`` when ``k <= b``.
        If ``C`` touches no row within the horizon (:math:`C x_0 = 0`, ``P = Q``) the positive
        ``sqrt(ceil(n/b)) ||c||`` is returned instead, which is still an upper bound."""
        norms = self.shift_sq_norms(strategy)
        exact = math.sqrt(float(np.max(norms)))
        if exact > 0.0:
            return exact
        return math.sqrt(self.max_participations * float(np.sum(np.square(strategy.c_col))))

    def sample_participation(self, key: jax.Array, num_samples: int) -> jax.Array:
        """Participation vectors, shape ``(num_samples, n)`` (bool)."""
        return self._as_cyclic().sample_participation(key, num_samples)

    def sample_y(self, key, strategy, sigma, num_samples: int, positive: bool = True, dtype=jnp.float64):
        """Outputs ``y = C x_s + z`` with a uniform shift ``s`` (``positive``) or ``y = z``, shape
        ``(num_samples, n)``; same participation draws as :meth:`sample_participation` on the first split of
        the key (as every sampler, through :func:`mcacct.kernels.output.gaussian_output`)."""
        check_call(self, strategy=strategy, sigma=sigma, num_samples=num_samples, positive=positive, dtype=dtype)
        return self._sample_y(key, strategy, sigma, num_samples, positive, dtype)

    @jit_method("strategy", "num_samples", "positive", "dtype")
    def _sample_y(self, key, strategy, sigma, num_samples, positive, dtype):
        n, b = self.iterations, self.min_sep
        m_pad = np.concatenate([[0.0], _class0_mean(tuple(strategy.c_col), n, b)])  # index 0: "above the shift"

        def mean(k):
            k_shift, _ = jax.random.split(k)  # the split of CyclicPoisson.sample_participation
            shift = jax.random.randint(k_shift, (num_samples, 1), 0, b, dtype=jnp.int32)
            idx = jnp.maximum(jnp.arange(n, dtype=jnp.int32)[None, :] - shift + 1, 0)
            return jnp.asarray(m_pad, dtype)[idx]

        return gaussian_output(key, (num_samples, n), sigma, dtype, positive, mean)

    def log_ratio(self, y, sigma, strategy, dot_method: str = "auto"):
        """``ln P(y)/Q(y)`` for each row of ``y`` (shape ``(..., n)``), exact for any band width."""
        y = check_call(self, y=y, sigma=sigma, strategy=strategy, dot_method=dot_method)
        return self._log_ratio(y, sigma, strategy, dot_method)

    @jit_method("strategy", "dot_method")
    def _log_ratio(self, y, sigma, strategy, dot_method):
        n, b = self.iterations, self.min_sep
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

    def loss_kernel(self, key, sigma, strategy, num_samples: int, positive: bool, dtype,
                    dot_method: str = "auto", recursion: str = "auto"):
        check_call(self, strategy=strategy, sigma=sigma, num_samples=num_samples, positive=positive, dtype=dtype,
                   dot_method=dot_method, recursion=recursion)  # recursion: unused (closed form), still checked
        y = self._sample_y(key, strategy, sigma, num_samples, positive, jnp.float64).astype(dtype)
        loss = self._log_ratio(y, sigma, strategy, dot_method)
        return loss if positive else -loss
