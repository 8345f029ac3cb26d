r"""Baseline sampling schemes for DP-BandMF: cyclic Poisson and balls-in-bins (paper 003, §3).

Both assign an example to one of ``b`` residue classes ("shifts") ``s in {0, ..., b-1}``; the example can
only take part in the iterations ``t`` (0-based) with ``t = s (mod b)``. With a ``k``-banded strategy,
``k <= b``, the outputs touched by different opportunities are disjoint, so given the shift the privacy
loss factorises over the opportunities. With

.. math::  \ell_t = \big(\langle c^{(t)}, y\rangle - \|c^{(t)}\|^2/2\big)/\sigma^2

(column ``t`` of ``C`` truncated at row ``n``, as in :mod:`mcacct.loss`):

* **Cyclic Poisson** (Choquette-Choo et al.): in every opportunity the example is Poisson sampled with
  probability ``q``. Given the shift, :math:`P_s/Q = \prod_{t \equiv s} (1 - q + q e^{\ell_t})`.
  With ``random_phase=True`` the shift is uniform and secret, so

  .. math::  L(y) = \ln \frac{1}{b} \sum_{s=0}^{b-1} \exp\Big(\sum_{t \equiv s} \ln(1 - q + q e^{\ell_t})\Big);

  with ``random_phase=False`` the partition is public and the worst class (shift 0, the one with
  :math:`\lceil n/b \rceil` opportunities and untruncated columns) is analysed:
  :math:`L = \sum_{t \equiv 0} \ln(1 - q + q e^{\ell_t})`. The latter is exactly the composition of
  :math:`\lceil n/b \rceil` Poisson-subsampled Gaussian mechanisms with noise multiplier
  :math:`\sigma / \|c\|` when every column of class 0 is complete (e.g. ``b | n``), and is dominated by that
  composition otherwise; it is the analysis of paper 003 §3 and of :class:`mcacct.pld.CyclicPoissonBandMFSpec`.
  By convexity the random-phase divergence never exceeds the fixed-phase one.
  At equal expected batch size ``B`` on ``M`` examples, ``q = b B / M``.

* **Balls-in-bins** (Chua et al.): ``q = 1`` and a uniformly random secret shift, i.e. the example takes part
  in iterations ``s, s + b, s + 2b, ...``:

  .. math::  L(y) = \ln \frac{1}{b} \sum_{s=0}^{b-1} \exp\Big(\sum_{t \equiv s} \ell_t\Big).

  Here ``b`` is the epoch length; at equal expected batch size ``b = M / B``. It coincides with warm-start
  b-min-sep with ``p = 1`` (:class:`mcacct.schemes.BMinSep`) and with random-phase cyclic Poisson with
  ``q = 1``.

Both mixtures over shifts are evaluated exactly with ``logsumexp`` (``O(n)`` per sample after the sliding
dot products). Samplers draw the shift and the Poisson coins directly.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from mcacct._validate import check_bool, check_count, check_fields, check_prob
from mcacct.sample import gaussian_output
from mcacct.schemes import MinSepAccounting

__all__ = ["CyclicPoisson", "BallsInBins", "mean_shift_amplitudes", "shift_mixture_log_ratio"]


def _jit_method(*static: str):
    """``jax.jit`` a method of a hashable (frozen) scheme: ``self`` and the named arguments are static."""
    def deco(fn):
        jitted = jax.jit(fn, static_argnames=("self",) + static)

        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            return jitted(self, *args, **kwargs)
        return wrapper
    return deco


def mean_shift_amplitudes(a: jax.Array, c_col: tuple[float, ...]) -> jax.Array:
    r"""``C a`` for a real amplitude vector ``a`` (shape ``(..., n)``) whose non-zeros are at least
    ``len(c_col)`` apart: :math:`(Ca)_j = c_{j-t}\, a_t` with ``t`` the last non-zero at or before ``j``.

    ``O(n)`` per row (a running maximum of indices and a gather) instead of ``O(n k)``.
    """
    n = a.shape[-1]
    dtype = a.dtype
    idx = jnp.arange(n, dtype=jnp.int32)
    last = jax.lax.cummax(jnp.where(a != 0, idx, -(2**30)), axis=a.ndim - 1)
    lag = idx - last
    amp = jnp.take_along_axis(a, jnp.clip(last, 0, n - 1), axis=-1)
    c = jnp.asarray(c_col, dtype)
    k = len(c_col)
    return jnp.where(lag < k, c[jnp.clip(lag, 0, k - 1)] * amp, jnp.zeros((), dtype))


def shift_mixture_log_ratio(ell: jax.Array, period: int, sampling_prob: float, random_phase: bool) -> jax.Array:
    r"""``ln P/Q`` of a shift mixture from the per-iteration terms ``ell`` (shape ``(..., n)``).

    Opportunity ``t`` contributes :math:`g_t = \ln(1 - q + q e^{\ell_t})` (:math:`g_t = \ell_t` for
    ``q = 1``); class ``s`` sums :math:`g_t` over ``t = s (mod period)``; the result is the log-mean-exp over
    the classes (``random_phase``) or the class-0 sum.
    """
    n = ell.shape[-1]
    dtype = ell.dtype
    q = float(sampling_prob)
    if q >= 1.0:
        g = ell
    else:
        g = jnp.logaddexp(jnp.asarray(math.log1p(-q), dtype), jnp.asarray(math.log(q), dtype) + ell)
    m = -(-n // period)
    pad = [(0, 0)] * (ell.ndim - 1) + [(0, m * period - n)]
    g = jnp.pad(g, pad).reshape(ell.shape[:-1] + (m, period))  # padded slots are "no opportunity": 0
    per_class = jnp.sum(g, axis=-2)
    if not random_phase:
        return per_class[..., 0]
    return jax.scipy.special.logsumexp(per_class, axis=-1) - jnp.asarray(math.log(period), dtype)


def _log_terms(y, sigma, strategy, dot_method):
    from mcacct.loss import participation_log_ratios
    return participation_log_ratios(y, jnp.asarray(sigma, y.dtype), strategy, dot_method)


@dataclass(frozen=True)
class CyclicPoisson(MinSepAccounting):
    r"""Cyclic Poisson subsampling (paper 003, §3) of one example over ``iterations`` steps.

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

    # -- AccountedScheme (check_strategy, sensitivity_bound: MinSepAccounting) ------------------------------
    def sample_participation(self, key: jax.Array, num_samples: int) -> jax.Array:
        """Participation vectors, shape ``(num_samples, n)`` (bool)."""
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

    @_jit_method("strategy", "num_samples", "positive", "dtype")
    def sample_y(self, key: jax.Array, strategy, sigma, num_samples: int, positive: bool = True,
                 dtype=jnp.float64) -> jax.Array:
        """Outputs ``y = C x + z`` (``positive``) or ``y = z``, shape ``(num_samples, n)``."""
        return gaussian_output(key, (num_samples, self.iterations), sigma, dtype, positive, lambda k: mean_shift_amplitudes(
            self.sample_participation(k, num_samples).astype(dtype), strategy.c_col))

    @_jit_method("strategy", "dot_method")
    def log_ratio(self, y: jax.Array, sigma, strategy, dot_method: str = "auto") -> jax.Array:
        """``ln P(y)/Q(y)`` for each row of ``y`` (shape ``(..., n)``)."""
        ell = _log_terms(y, sigma, strategy, dot_method)
        return shift_mixture_log_ratio(ell, self.min_sep, self.sampling_prob, self.random_phase)

    def loss_kernel(self, key, sigma, strategy, num_samples: int, positive: bool, dtype,
                    dot_method: str = "auto", recursion: str = "auto"):
        y = self.sample_y(key, strategy, sigma, num_samples, positive, jnp.float64).astype(dtype)
        loss = self.log_ratio(y, sigma, strategy, dot_method)
        return loss if positive else -loss


@dataclass(frozen=True)
class BallsInBins:
    r"""Balls-in-bins subsampling (Chua et al.; paper 003, §3) of one example over ``iterations`` steps.

    The example is put in one of ``min_sep = b`` bins uniformly at random and takes part in every
    iteration of its bin (``s, s + b, ...``, 0-based). The loss is the exact mixture over the ``b`` shifts
    (see the module docstring); for ``n < b`` shifts ``s >= n`` never participate.

    Parameters
    ----------
    min_sep:
        ``b >= 1``, the number of bins (epoch length; ``M / B`` at expected batch size ``B``); needs
        ``len(c_col) <= b``.
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

    # -- AccountedScheme ---------------------------------------------------------------------------------
    def check_strategy(self, strategy) -> None:
        strategy.check_min_sep(self.min_sep)

    def sensitivity_bound(self, strategy) -> float:
        """``sqrt(ceil(n/b)) ||c||`` (the shift-0 pattern attains it when its columns are complete)."""
        return strategy.worst_case_sensitivity(self.iterations, self.min_sep)

    def sample_participation(self, key: jax.Array, num_samples: int) -> jax.Array:
        return self._as_cyclic().sample_participation(key, num_samples)

    def sample_y(self, key, strategy, sigma, num_samples: int, positive: bool = True, dtype=jnp.float64):
        return self._as_cyclic().sample_y(key, strategy, sigma, num_samples, positive, dtype)

    def log_ratio(self, y, sigma, strategy, dot_method: str = "auto"):
        return self._as_cyclic().log_ratio(y, sigma, strategy, dot_method)

    def loss_kernel(self, key, sigma, strategy, num_samples: int, positive: bool, dtype,
                    dot_method: str = "auto", recursion: str = "auto"):
        return self._as_cyclic().loss_kernel(key, sigma, strategy, num_samples, positive, dtype, dot_method,
                                             recursion)
