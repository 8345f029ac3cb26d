r"""Hockey-stick estimators and mergeable sufficient statistics.

For a privacy-loss sample ``L`` the hockey-stick divergence at ``epsilon`` is

.. math::  \delta(\varepsilon) = \mathbb{E}\left[\max\left(0,\, 1 - e^{\varepsilon - L}\right)\right],

with ``L = ln P/Q`` under ``y ~ P`` (remove direction) and ``L = ln Q/P = -ln P/Q`` under ``y ~ Q`` (add
direction). Every sample contributes a value in ``[0, 1]``, so Chernoff/KL confidence bounds hold without
distributional assumptions.

Statistics kept per direction (all merge exactly, in any order):

* ``count`` — number of samples (integer);
* ``sums`` — for each requested epsilon, the sum of contributions as a fixed-point integer in units of
  ``2**-FIXED_BITS`` (each chunk's float64 sum is rounded *up*, so the total never underestimates);
* ``hist`` — integer counts of ``L`` in bins of width ``h`` on ``[0, L_max]``, each sample placed at the
  upper edge of its bin (a sample ``L <= 0`` contributes 0 at any ``epsilon >= 0``; one above ``L_max``
  is counted as contributing 1). Any ``delta(epsilon)`` read from it is an upper bound on the exact
  empirical value, off by at most a factor ``e^h`` in each contribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.statistics.confidence import kl_lower_confidence, kl_upper_confidence
from mcacct.core.validate import DIRECTIONS, SIGMA_MAX, SIGMA_MIN  # remove: y ~ P, loss L; add: y ~ Q, loss -L

__all__ = ["HistogramSpec", "DirectionStats", "chunk_statistics", "nonfinite_loss_message", "FIXED_BITS", "chunk_sum_slack",
           "DIRECTIONS"]

FIXED_BITS = 80


def chunk_sum_slack(count: int) -> float:
    """Relative error bound of the float64 sum of ``count`` contributions in ``[0, 1]``.

    Each contribution comes from one ``expm1`` (relative error below 4 units of ``2^-53``); the bound holds
    whatever order the backend sums in.

    Parameters
    ----------
    count : int
        Number of contributions, ``>= 0``.

    Returns
    -------
    float
        ``(count + 8) 2^-53``.
    """
    return (int(count) + 8) * 2.0**-53


@dataclass(frozen=True)
class HistogramSpec:
    """Binning of the privacy loss: ``bins`` bins of width ``width`` on ``[0, bins * width]``."""

    width: float = 2.0**-10
    bins: int = 2**16

    @property
    def max_loss(self) -> float:
        """The upper end of the binned range, ``width * bins``; larger losses go to the overflow bin.

        Returns
        -------
        float
        """
        return self.width * self.bins


@partial(jax.jit, static_argnames=("spec",))
def chunk_statistics(losses: jax.Array, valid: jax.Array, epsilons: jax.Array, spec: HistogramSpec,
                     loss_shift=0.0):
    """Per-chunk sums of ``max(0, 1 - e^{eps - L})`` and the loss histogram over the first ``valid`` losses.

    Each loss is first raised by ``loss_shift`` (a bound on its floating-point error,
    :func:`mcacct.engine.systematic.loss_error_bound`, so every contribution bounds the exact one).

    Parameters
    ----------
    losses : jax.Array
        ``(N,)`` privacy losses ``L`` of one direction.
    valid : int or jax.Array
        How many leading entries of ``losses`` count.
    epsilons : jax.Array
        float64 ``(E,)``.
    spec : HistogramSpec
        The binning (static).
    loss_shift : float or jax.Array, optional
        Added to every loss first (default 0).

    Returns
    -------
    sums : jax.Array
        float64 ``(E,)``: the sums of the contributions.
    hist : jax.Array
        int32 ``(bins + 2,)``: index 0 for ``L <= 0``, ``bins + 1`` for overflow, bin ``i`` for
        ``(i - 1) width < L <= i width``.
    """
    loss = losses.astype(jnp.float64) + jnp.asarray(loss_shift, jnp.float64)
    mask = jnp.arange(loss.shape[0]) < valid
    terms = jnp.maximum(0.0, -jnp.expm1(epsilons[None, :] - loss[:, None]))
    sums = jnp.sum(jnp.where(mask[:, None], terms, 0.0), axis=0)
    idx = jnp.clip(jnp.ceil(loss / spec.width), 0, spec.bins + 1).astype(jnp.int32)
    # bin 0 (L <= 0) holds a large share of the samples: count it with a reduction instead of a scatter,
    # whose atomic adds would all contend for one address on an accelerator; masked and bin-0 entries get
    # an out-of-range index and are dropped by the scatter
    zero = jnp.sum(mask & (idx == 0)).astype(jnp.int32)
    idx = jnp.where(mask & (idx > 0), idx, spec.bins + 2)
    hist = jnp.zeros(spec.bins + 2, jnp.int32).at[idx].add(1, mode="drop")
    return sums, hist.at[0].add(zero)


def _to_fixed_up(x: float) -> int:
    """``ceil(x * 2**FIXED_BITS)`` computed exactly from the float64 value."""
    num, den = float(x).as_integer_ratio()
    return -((-num << FIXED_BITS) // den)


@dataclass
class DirectionStats:
    """Mergeable statistics of one direction of the divergence."""

    epsilons: tuple[float, ...]
    spec: HistogramSpec = field(default_factory=HistogramSpec)
    count: int = 0
    sums: list[int] = field(default_factory=list)
    hist: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not self.sums:
            self.sums = [0] * len(self.epsilons)
        if self.hist is None:
            self.hist = np.zeros(self.spec.bins + 2, np.int64)

    def add_chunk(self, count: int, sums, hist) -> None:
        """Fold one chunk's output of :func:`chunk_statistics` in (refusing non-finite sums).

        Each float64 chunk sum is first raised by its worst-case summation error
        (:func:`chunk_sum_slack`), then rounded up to fixed point, so the integer total
        never falls below the exact sum of the contributions.

        Parameters
        ----------
        count : int
            Samples in the chunk.
        sums : array_like
            float64 ``(E,)``, the chunk's sums per epsilon.
        hist : array_like
            ``(bins + 2,)``, the chunk's histogram.

        Raises
        ------
        FloatingPointError
            If a sum is not finite (the loss kernel's numeric range was exceeded; nothing is added).
        """
        sums = np.asarray(sums, np.float64)
        if not np.all(np.isfinite(sums)):
            raise FloatingPointError("non-finite privacy loss in a chunk: the loss kernel's numeric range was "
                                     "exceeded (nothing was certified)")
        self.count += int(count)
        slack = chunk_sum_slack(count)
        for j, v in enumerate(np.asarray(sums, np.float64)):
            v = float(v)
            self.sums[j] += _to_fixed_up(v) + _to_fixed_up(v * slack) + 1  # + 1 for the product's rounding
        self.hist += np.asarray(hist, np.int64)

    def merge(self, other: "DirectionStats") -> "DirectionStats":
        """Exact sum of two sets of statistics (same epsilons and binning).

        Parameters
        ----------
        other : DirectionStats
            Statistics with the same epsilons and histogram spec.

        Returns
        -------
        DirectionStats
            A new object; neither operand changes.

        Raises
        ------
        ValueError
            If the epsilons or the binning differ.
        """
        if tuple(other.epsilons) != tuple(self.epsilons) or other.spec != self.spec:
            raise ValueError("cannot merge statistics with different epsilons or histogram binning")
        return DirectionStats(self.epsilons, self.spec, self.count + other.count,
                              [a + b for a, b in zip(self.sums, other.sums)], self.hist + other.hist)

    # -- estimates ---------------------------------------------------------------------------------------
    def mean_at(self, j: int) -> float:
        """Empirical mean of the contributions at ``epsilons[j]`` (rounded up).

        Parameters
        ----------
        j : int
            Index into ``epsilons``.

        Returns
        -------
        float
            The mean; 1.0 before any sample.
        """
        if self.count == 0:
            return 1.0
        return (self.sums[j] / self.count) / 2.0**FIXED_BITS

    def histogram_delta(self, epsilon: float | np.ndarray) -> np.ndarray:
        """Empirical ``delta(epsilon)`` from the histogram (an upper bound on the exact empirical mean).

        Parameters
        ----------
        epsilon : float or numpy.ndarray
            One or more epsilons.

        Returns
        -------
        numpy.ndarray
            float64 ``(E,)``, one value per epsilon (``E = 1`` for a scalar); ones before any sample.
        """
        eps = np.atleast_1d(np.asarray(epsilon, np.float64))
        if self.count == 0:
            return np.ones_like(eps)
        edges = np.arange(self.spec.bins + 1) * self.spec.width  # upper edges of bins 0..bins
        counts = self.hist[: self.spec.bins + 1].astype(np.float64)
        contrib = np.maximum(0.0, -np.expm1(eps[:, None] - edges[None, :]))
        total = contrib @ counts + float(self.hist[self.spec.bins + 1])
        return total / self.count


def nonfinite_loss_message(dtype: str, sigma: float) -> str:
    """What to tell the user when the loss kernel of ``dtype`` returned a non-finite loss at ``sigma``.

    :meth:`DirectionStats.add_chunk` refused the chunk; the message says what happened and what to change, for
    the actual dtype. The loss grows like ``1/sigma^2`` (and like the strategy's entries squared): float32 holds
    numbers up to ``3.4e38``, so a small sigma or large ``c_col`` entries leave its range long before float64's.

    Parameters
    ----------
    dtype : str
        The kernel precision, e.g. ``"float64"`` or ``"float32"``.
    sigma : float
        The noise multiplier of the refused chunk.

    Returns
    -------
    str
        The message.
    """
    head = (f"the privacy loss at sigma={sigma:g} is not finite in the {dtype} loss kernel: it grows like "
            "1/sigma^2 and left the kernel's numeric range, so nothing was certified; ")
    if str(dtype) != "float64":
        return head + (f"use --dtype float64 (dtype='float64'; sigma in [{SIGMA_MIN:g}, {SIGMA_MAX:g}]) or a larger "
                       "--sigma")
    return head + (f"give a larger sigma (--sigma; the accepted range [{SIGMA_MIN:g}, {SIGMA_MAX:g}] assumes "
                   "||c|| of order 1) or smaller --c-col entries")


def delta_bounds(mean: float, count: int, alpha: float) -> tuple[float, float]:
    """(lower, upper) one-sided (1 - alpha) Chernoff-KL confidence bounds on a [0,1]-valued mean.

    Parameters
    ----------
    mean : float
        The empirical mean.
    count : int
        Number of samples.
    alpha : float
        In ``(0, 1)``; each bound fails with probability at most ``alpha``.

    Returns
    -------
    lower : float
        :func:`~mcacct.statistics.confidence.kl_lower_confidence`.
    upper : float
        :func:`~mcacct.statistics.confidence.kl_upper_confidence`.
    """
    return kl_lower_confidence(mean, count, alpha), kl_upper_confidence(mean, count, alpha)


def epsilon_from_delta_curve(delta_of_eps, delta: float, eps_hi: float) -> float:
    """Smallest epsilon (to 1e-6, rounded up) with ``delta_of_eps(epsilon) <= delta``.

    Parameters
    ----------
    delta_of_eps : callable
        ``delta_of_eps(epsilon) -> float``, non-increasing.
    delta : float
        The target delta.
    eps_hi : float
        Largest epsilon searched.

    Returns
    -------
    float
        The epsilon (``0.0`` if already met at 0); ``inf`` if none below ``eps_hi``.
    """
    if delta_of_eps(0.0) <= delta:
        return 0.0
    if delta_of_eps(eps_hi) > delta:
        return math.inf
    lo, hi = 0.0, eps_hi
    while hi - lo > 1e-6:
        mid = (lo + hi) / 2
        if delta_of_eps(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi
