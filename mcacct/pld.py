r"""FFT privacy-loss-distribution (PLD) accountant in JAX.

This module computes tight, *pessimistic* :math:`(\varepsilon, \delta)`
guarantees for compositions of scalar mixture-of-Gaussians (MoG) mechanisms:
the Gaussian mechanism, the Poisson-subsampled Gaussian mechanism (DP-SGD),
group-level DP-SGD with Poisson or fixed-batch-size sampling (Ganesh, paper
000) and DP-BandMF with cyclic Poisson sampling (paper 003, Sec. 3), following
the FFT accountant of Koskela, Jaelkoe & Honkela (paper 004).

Canonical form
--------------
Every supported mechanism is reduced to a *scalar MoG pair* in standardised
units (noise standard deviation 1):

.. math::

    P = \sum_i p_i\, \mathcal N(s_i, 1), \qquad Q = \mathcal N(0, 1),
    \qquad s_i = c_i / \sigma \ge 0,

with sensitivities :math:`c_i`, probabilities :math:`p_i` and noise
multiplier :math:`\sigma`. The privacy loss
:math:`L(u) = \log\frac{dP}{dQ}(u) = \log\sum_i p_i e^{s_i u - s_i^2/2}` is
convex and increasing in :math:`u`.

* REMOVE adjacency (the larger dataset releases :math:`P`): the PLD is the
  law of :math:`L(U)`, :math:`U\sim P`.
* ADD adjacency (the pair is :math:`(Q, P)`): the PLD is the law of
  :math:`-L(U)`, :math:`U\sim Q`.

Both are computed from the same interval masses and the reported
:math:`\delta(\varepsilon)` / :math:`\varepsilon(\delta)` is the maximum over
the two directions (Lemma 5 of paper 004).

Discretisation (pessimistic)
----------------------------
Losses live on the uniform grid :math:`\ell_j = j\,h`, ``h =
value_discretization_interval``. For each grid interval
:math:`I_j = (\ell_j, \ell_{j+1}]` of the loss, we compute
:math:`a_j = P(L\in I_j)` and :math:`b_j = Q(L\in I_j)` (via the inverse
:math:`u_j = L^{-1}(\ell_j)` and Gaussian CDFs), and replace the restriction of
:math:`(P, Q)` to :math:`I_j` by a pair supported on the two end points:

* ``"round_up"`` (privacy buckets): all of :math:`a_j` goes to
  :math:`\ell_{j+1}`, i.e. every loss is rounded *up*;
* ``"connect_dots"`` (default): :math:`a_j` is split into
  :math:`\beta_j = (a_j - e^{\ell_j} b_j)/(1-e^{-h})` at :math:`\ell_{j+1}`
  and :math:`a_j-\beta_j` at :math:`\ell_j`, which preserves *both* the
  :math:`P`- and :math:`Q`-mass of the interval.

Both replacements dominate the true pair: for :math:`\alpha\ge0`,
:math:`\int_{I_j}(dP-\alpha\,dQ)_+ = E_Q[(e^{L}-\alpha)_+;I_j]` and
:math:`x\mapsto(x-\alpha)_+` is convex, so it is bounded by its chord between
:math:`e^{\ell_j}` and :math:`e^{\ell_{j+1}}` (``connect_dots``), or by its
value with all mass moved to the top end point (``round_up``). Dominating pairs
compose (paper 000, Lemma 2.6), so every reported :math:`\delta` (and hence
:math:`\varepsilon`) is an upper bound; the FFT round-off is bounded and added
(see "FFT round-off"). Mass of
the noise beyond :math:`10` standard deviations is moved to loss
:math:`+\infty` (``infinity_mass``) or rounded up to the first grid point.
``round_up`` has an :math:`O(Th)` bias after :math:`T` compositions (e.g.
:math:`+0.5` in :math:`\varepsilon` for :math:`T=10^4`, :math:`h=10^{-4}`);
``connect_dots`` is :math:`O(h^2)`-accurate per step and is the default.

Composition
-----------
The :math:`T`-fold self-composition is a :math:`T`-fold convolution of the
(sub-)probability vector, computed as an FFT power
:math:`\mathcal F^{-1}[(\mathcal F p)^{T}]` on a window :math:`[A, A+N)` of
grid indices. The window is chosen by Chernoff bounds
:math:`\Pr[S\ge x]\le \min_\lambda M(\lambda)^T e^{-\lambda x}` evaluated on
the discretised PLD so that each tail holds at most ``1e-15``; the bound for
the mass above the window is *added* to ``infinity_mass`` (pessimistic) and
the mass below the window can only alias onto larger losses (pessimistic).

For a query the power is taken of the exponentially tilted pmf
:math:`z_i=x_ie^{\lambda\ell_i}/M(\lambda)`, :math:`M(\lambda)=\sum_ix_ie^{\lambda\ell_i}`
(the Esscher transform, as in Koskela et al. 2021, arXiv:2102.12412, paper 004): since
:math:`e^{\lambda\sum_t\ell_t}=\prod_te^{\lambda\ell_t}`, the composed pmf at loss :math:`s` is
:math:`\omega_s=M(\lambda)^Te^{-\lambda s}\,(z^{*T})_s` exactly, and undoing the tilt after the
inverse transform scales the absolute round-off at :math:`s\ge\varepsilon` by
:math:`M^Te^{-\lambda s}`, i.e. makes it relative to the tail being measured. Aliasing stays
pessimistic under the tilt (the untilted circular sum at :math:`s` is
:math:`\omega_s+\sum_{m\ne0}e^{\lambda mNh}\omega_{s+mNh}\ge\omega_s`), but wrap-around from above
the window is amplified by :math:`e^{\lambda Nh}`; :math:`\lambda\ge0` is therefore chosen per
query and direction (:func:`_choose_lambda`) to minimise an a-priori estimate of round-off plus
wrap-around, both read off the log-MGF grid. :math:`\lambda=0` (no tilt) is among the candidates.

FFT round-off
-------------
Let :math:`\hat z` be the computed tilted input on the :math:`N`-point window (entrywise relative
error :math:`\theta`), :math:`y'` the *exact* circular :math:`T`-fold convolution of
:math:`\hat z`, and :math:`\hat Z=\mathrm{rfft}(\hat z)`, :math:`\hat P=\mathrm{pow}(\hat Z,T)`,
:math:`\hat y=\mathrm{irfft}(\hat P)` the computed vectors (:math:`u=2^{-53}`). Assumptions:
(A1) each transform satisfies :math:`\|\mathrm{fl}(Fv)-Fv\|_2\le\epsilon_F\|Fv\|_2` and
(A2) :math:`|\mathrm{fl}(Fv)_k-(Fv)_k|\le\epsilon_F\|v\|_1`, with
:math:`\epsilon_F=c_F(\log_2N+1)u`, :math:`c_F=8` (Higham 2002, Thm. 24.2: about
:math:`6.7\log_2N\,u` for radix-2 with twiddles accurate to :math:`2u`; (A2) is the same
butterfly-by-butterfly argument with :math:`|\text{partial sums}|\le\|v\|_1`; one level added for
the real-data transforms; measured errors are 15-50 times smaller, ``tests/test_pld_roundoff.py``);
(A3) :math:`z^T` is formed by binary powering, each complex multiplication with relative error
:math:`\le c_\times u`, :math:`c_\times=2.5\ge\sqrt5` (Brent, Percival & Zimmermann 2007), so
:math:`|\hat P_k-\hat Z_k^T|\le\epsilon_P|\hat Z_k|^T`, :math:`\epsilon_P=(1+c_\times u)^{T-1}-1`.
With :math:`\|F^{-1}v\|_2=\|v\|_2/\sqrt N` and :math:`|a^T-b^T|\le T|a-b|\max(|a|,|b|)^{T-1}`,
:math:`\|\hat y-y'\|_2\le e_2=\min(e_2^{(a)},e_2^{(b)})` where

.. math::

    e_2^{(a)}=\Big[(\epsilon_F+\epsilon_P')(1+\epsilon_P')(1+\epsilon_F)+T\epsilon_F\Big]
      \bar\rho^{\,T-1}\|\hat z\|_2,\qquad
    \bar\rho=\textstyle\sum_i\hat z_i+\epsilon_F\sqrt N\|\hat z\|_2\approx1,

    e_2^{(b)}=\frac{1}{\sqrt N}\Big[(\epsilon_F+\epsilon_P')\|\hat P\|_2
      +T\eta\,\Big\|\big((|\hat Z_k|+\eta)^{T-1}\big)_k\Big\|_2\Big],\qquad
    \eta=\epsilon_F\textstyle\sum_i\hat z_i,

(:math:`\epsilon_P'=\epsilon_P/(1-\epsilon_P)`, norms over the full Hermitian spectrum, taken
from the computed vectors and inflated for their own rounding; a :math:`10^{-280}` term covers
underflow). (a) is the plain normwise bound, :math:`\approx T\epsilon_F\|\hat z\|_2`; (b) uses
that :math:`|\hat Z_k|^{T-1}` is negligible except at the lowest frequencies, typically 10-50
times smaller. For :math:`\varepsilon\in(\ell_{k-1},\ell_k]` only :math:`j\ge k` carry weight
:math:`w_j=1-e^{\varepsilon-\ell_j}\le\min\{1,\ell_j-\ell_{k-1}\}`, and the untilted error at
:math:`\ell_j` is :math:`M(\lambda)^Te^{-\lambda\ell_j}|\hat y_j-y'_j|`; by Cauchy-Schwarz the
round-off of :math:`\delta(\varepsilon)` is at most

.. math::

    r_k=(1+\rho)\,e_2\,M(\lambda)^Te^{-\lambda\ell_k}
      \sqrt{\min\big\{N-k,\ G_\lambda\big\}},\qquad
    G_\lambda=\min\Big\{\frac1{1-r},\ \frac{h^2(1+r)}{(1-r)^3}\Big\},\ r=e^{-2\lambda h}

(:math:`\sum_ie^{-2\lambda ih}\min\{1,(i+1)h\}^2\le G_\lambda`; only :math:`1/(1-r)` at
:math:`k=0`), and every reported value is
:math:`(1+\rho)\big(\sum_j\hat\omega_j(1-e^{\varepsilon-\ell_j})_++\omega_\infty\big)+r_k`,
where :math:`\rho` collects the relative errors of the tilt (:math:`(1-\theta)^{-T}`), of the
untilt and of the sums (:math:`(N-1)u`, any order); :math:`\varepsilon(\delta)` solves this
inflated curve (rounded up). Without the tilt (:math:`\lambda=0`) :math:`r_k\approx\sqrt N e_2`:
at :math:`N=2^{19}`, :math:`T=7200`, :math:`q=1.2\cdot10^{-4}` about :math:`5\cdot10^{-8}` with (a)
(above the production delta 1.3e-8) and :math:`2`-:math:`4\cdot10^{-9}` with (b) (thousands of
times delta = 1e-12); with the tilt it is :math:`10^{-9}` to :math:`10^{-4}` of :math:`\delta`
(worse only where a tiny :math:`\varepsilon` sits in the bulk of a PLD with a heavy right tail,
which caps :math:`\lambda`; see docs/pld.md).
:func:`pld_epsilon` / :func:`epsilons_for_sigmas` raise ``ValueError`` when the requested delta
is above the mass at infinity but below the smallest certifiable value (a delta below the mass at
infinity still gives ``epsilon = inf``); :func:`pld_calibrate` says so when the target is below
the mass at infinity plus the round-off bound at the top of its range. Callers that query the
composed pmf freely (``_compose_arrays_batch``: :mod:`mcacct.composition`, untilted) get the
:math:`\ell_1` bound :math:`\sqrt N e_2\ge\sum_j|\hat y_j-y'_j|` added to the mass at infinity,
which bounds every later :math:`\delta` and composition.

Error estimate
--------------
Besides the rigorous tail terms, :class:`PLDResult` reports the paper-004
estimate (eq. 7.4) :math:`\mathrm{err}=2|I_h - I_{h/2}|` of the discretisation
error, obtained by re-running the accountant with half the grid spacing.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Literal, Union

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.scipy.special import logsumexp, ndtr  # noqa: E402

__all__ = [
    "GaussianSpec",
    "PoissonGaussianSpec",
    "GroupPoissonSpec",
    "GroupFixedBatchSpec",
    "CyclicPoissonBandMFSpec",
    "MechanismSpec",
    "MechanismOrFactory",
    "PLDResult",
    "pld_delta",
    "pld_epsilon",
    "deltas_for_sigmas",
    "epsilons_for_sigmas",
    "pld_calibrate",
    "group_privacy_conversion_epsilon",
]

Discretization = Literal["connect_dots", "round_up"]

# Noise mass beyond this many standard deviations is truncated (pessimistically).
_Z_TRUNC = 10.0
# Total tail mass allowed outside the composition window (both sides).
_TAIL_TRUNCATION = 1e-15
# Chernoff exponents tried for the window/tail bounds.
# lambda > 0 (upper tails, choice of the tilt): _LAMBDA_SUB interleaved doubling sequences;
# lambda < 0 (lower tails): ratio 2 (see _log_mgf). The log-MGF vector is [+_LAMBDAS, -_LAMBDAS_NEG].
_LAMBDA_SUB = 2
_LAMBDAS = 3e-3 * 2.0 ** (np.arange(21 * _LAMBDA_SUB) / _LAMBDA_SUB)  # 3e-3 ... 4.4e3, ratio 2**(1/2)
_LAMBDAS_NEG = 3e-3 * 2.0 ** np.arange(21)  # 3e-3 ... 3.1e3, ratio 2
# Largest single-step grid (number of loss points) we accept.
_MAX_GRID = 1 << 23
# Budget (sigmas x FFT size) per vmapped chunk.
_CHUNK_BUDGET = 1 << 22
_DEFAULT_H = 1e-4
# Round-off model (see "FFT round-off" in the module docstring): unit round-off, normwise FFT
# error constant per radix-2 level (Higham 2002, Thm 24.2: ~6.7 for twiddles within 2u), relative
# error of one complex multiplication (sqrt(5) without FMA, 2 with FMA), and a floor covering
# underflow / flush-to-zero anywhere in the pipeline.
_U = 2.0 ** -53
_FFT_C = 8.0
_CMUL_C = 2.5
_UNDERFLOW = 1e-280
# Tilted compositions whose pointwise minimum gives the curve in group_privacy_conversion_epsilon.
_GROUP_TILTS = 12


# --------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------
def _is_real(x: object) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _check_prob(name: str, q: float) -> float:
    if not _is_real(q) or not math.isfinite(q) or not 0.0 < q <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {q!r}")
    return float(q)


def _check_positive(name: str, x: float) -> float:
    if not _is_real(x) or not math.isfinite(x) or x <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {x!r}")
    return float(x)


def _check_int(name: str, n: int, lo: int = 1) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {n!r}")
    return int(n)


def _check_epsilon(epsilon: float) -> float:
    if not _is_real(epsilon) or not math.isfinite(epsilon) or epsilon < 0:
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    return float(epsilon)


def _check_delta(delta: float) -> float:
    if not _is_real(delta) or not math.isfinite(delta) or not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    return float(delta)


def _check_h(h: float) -> float:
    if not _is_real(h) or not math.isfinite(h) or not 0.0 < h <= 0.1:
        raise ValueError(f"value_discretization_interval must be in (0, 0.1], got {h!r}")
    return float(h)


def _check_discretization(method: str) -> str:
    if method not in ("connect_dots", "round_up"):
        raise ValueError(
            f"discretization must be 'connect_dots' or 'round_up', got {method!r}"
        )
    return method


# --------------------------------------------------------------------------
# Mechanism specifications
# --------------------------------------------------------------------------
def _log_binom(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


@dataclasses.dataclass(frozen=True)
class GaussianSpec:
    r"""``steps``-fold composition of the Gaussian mechanism.

    Output :math:`f(D) + \mathcal N(0, \sigma^2)` with
    :math:`\|f(D)-f(D')\|_2\le` ``sensitivity``. Dominating pair
    :math:`(\mathcal N(\Delta,\sigma^2), \mathcal N(0,\sigma^2))`; the PLD is
    :math:`\mathcal N(\mu, 2\mu)`, :math:`\mu=\Delta^2/(2\sigma^2)`, in both
    directions.

    Parameters
    ----------
    sigma : float
        Noise standard deviation (> 0).
    sensitivity : float, default 1.0
        L2 sensitivity :math:`\Delta` (> 0).
    steps : int, default 1
        Number of compositions (>= 1).
    """

    sigma: float
    sensitivity: float = 1.0
    steps: int = 1

    def __post_init__(self) -> None:
        _check_positive("sigma", self.sigma)
        _check_positive("sensitivity", self.sensitivity)
        _check_int("steps", self.steps)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)`` of the scalar MoG (noise 1 per unit sigma)."""
        return np.array([float(self.sensitivity)]), np.array([1.0])

    @property
    def compositions(self) -> int:
        """Number of self-compositions."""
        return int(self.steps)


@dataclasses.dataclass(frozen=True)
class PoissonGaussianSpec:
    r"""DP-SGD: ``steps`` compositions of the Poisson-subsampled Gaussian.

    Each example is included independently with probability :math:`q`; the
    summed clipped gradients (clip norm = ``sensitivity``) receive
    :math:`\mathcal N(0, \sigma^2)` noise. Add/remove-one adjacency with the
    dominating pair (remove direction)
    :math:`P=(1-q)\mathcal N(0,\sigma^2)+q\mathcal N(\Delta,\sigma^2)`,
    :math:`Q=\mathcal N(0,\sigma^2)` and :math:`(Q,P)` for add (paper 004,
    Sec. 6.1).

    Parameters
    ----------
    sampling_prob : float
        :math:`q\in(0,1]`.
    sigma : float
        Noise standard deviation (> 0), in units of the clip norm when
        ``sensitivity == 1``.
    steps : int, default 1
        Number of compositions :math:`T\ge1`.
    sensitivity : float, default 1.0
        Clip norm :math:`\Delta>0`.
    """

    sampling_prob: float
    sigma: float
    steps: int = 1
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        _check_prob("sampling_prob", self.sampling_prob)
        _check_positive("sigma", self.sigma)
        _check_int("steps", self.steps)
        _check_positive("sensitivity", self.sensitivity)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)`` of the scalar MoG."""
        q = float(self.sampling_prob)
        if q == 1.0:
            return np.array([float(self.sensitivity)]), np.array([1.0])
        return np.array([0.0, float(self.sensitivity)]), np.array([1.0 - q, q])

    @property
    def compositions(self) -> int:
        """Number of self-compositions."""
        return int(self.steps)


@dataclasses.dataclass(frozen=True)
class GroupPoissonSpec:
    r"""Group-level DP-SGD with Poisson sampling (paper 000, Thm. 3.1).

    Adjacency: add-or-remove-up-to-:math:`k` examples. With clip norm 1 and
    noise multiplier :math:`\sigma`, each step is dominated by the scalar MoG
    mechanism with random sensitivity :math:`J\sim\mathrm{Binom}(k, q)`:

    .. math::

        P=\sum_{j=0}^{k}\binom{k}{j}q^j(1-q)^{k-j}\,\mathcal N(j,\sigma^2),
        \qquad Q=\mathcal N(0,\sigma^2)

    (remove direction; the add direction is the swapped pair). The
    ``steps``-fold composition of this pair is a tight dominating pair.

    Parameters
    ----------
    group_size : int
        :math:`k\ge1` (``k = 1`` is example-level DP-SGD).
    sampling_prob : float
        :math:`q\in(0,1]`.
    sigma : float
        Noise multiplier (> 0).
    steps : int, default 1
        Number of DP-SGD steps :math:`T\ge1`.
    """

    group_size: int
    sampling_prob: float
    sigma: float
    steps: int = 1

    def __post_init__(self) -> None:
        _check_int("group_size", self.group_size)
        _check_prob("sampling_prob", self.sampling_prob)
        _check_positive("sigma", self.sigma)
        _check_int("steps", self.steps)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)``: ``j`` w.p. ``Binom(j; k, q)``."""
        k, q = int(self.group_size), float(self.sampling_prob)
        if q == 1.0:
            return np.array([float(k)]), np.array([1.0])
        j = np.arange(k + 1)
        logp = np.array(
            [_log_binom(k, i) + i * math.log(q) + (k - i) * math.log1p(-q) for i in j]
        )
        return j.astype(float), np.exp(logp)

    @property
    def compositions(self) -> int:
        """Number of self-compositions."""
        return int(self.steps)


@dataclasses.dataclass(frozen=True)
class GroupFixedBatchSpec:
    r"""Group-level DP-SGD with fixed-batch-size sampling (paper 000, Thm. 3.3).

    Each step draws a uniformly random batch of exactly :math:`B` examples
    (without replacement) from the current dataset, clips gradients to norm 1
    and adds :math:`\mathcal N(0,\sigma^2)`. Adjacency: add-or-remove-up-to-
    :math:`k`, i.e. :math:`D'=D\cup G`, :math:`|G|\le k`, where the *smaller*
    dataset has :math:`|D|\ge n` (``dataset_size``). Coupling the two batches
    (draw :math:`B` from :math:`D`, then overwrite the first
    :math:`m\sim\mathrm{Hypergeom}(B, n+k, k)` slots with group members),
    each step is dominated by the scalar MoG mechanism with sensitivity
    :math:`2m` (a replaced example moves the sum by at most 2):

    .. math::

        P=\sum_{m}\frac{\binom{k}{m}\binom{n}{B-m}}{\binom{n+k}{B}}
          \mathcal N(2m,\sigma^2),\qquad Q=\mathcal N(0,\sigma^2),

    for the remove direction, and the swapped pair for the add direction.

    Parameters
    ----------
    group_size : int
        :math:`k\ge1`.
    batch_size : int
        :math:`B`, with ``1 <= B <= dataset_size``.
    dataset_size : int
        :math:`n\ge1`, a lower bound on the size of the smaller dataset.
    sigma : float
        Noise multiplier (> 0).
    steps : int, default 1
        Number of steps :math:`T\ge1`.
    """

    group_size: int
    batch_size: int
    dataset_size: int
    sigma: float
    steps: int = 1

    def __post_init__(self) -> None:
        _check_int("group_size", self.group_size)
        _check_int("dataset_size", self.dataset_size)
        b = _check_int("batch_size", self.batch_size)
        if b > self.dataset_size:
            raise ValueError(
                f"batch_size must be in [1, dataset_size={self.dataset_size}], got {b}"
            )
        _check_positive("sigma", self.sigma)
        _check_int("steps", self.steps)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)``: ``2m`` w.p. ``Hypergeom(m; B, n+k, k)``."""
        k, b, n = int(self.group_size), int(self.batch_size), int(self.dataset_size)
        ms = np.arange(max(0, b - n), min(k, b) + 1)
        logp = np.array(
            [_log_binom(k, m) + _log_binom(n, b - m) - _log_binom(n + k, b) for m in ms]
        )
        p = np.exp(logp)
        return 2.0 * ms.astype(float), p / p.sum()

    @property
    def compositions(self) -> int:
        """Number of self-compositions."""
        return int(self.steps)


@dataclasses.dataclass(frozen=True)
class CyclicPoissonBandMFSpec:
    r"""DP-BandMF with cyclic Poisson sampling (paper 003, Sec. 3).

    The data are split into ``min_sep`` = :math:`b` parts; iteration :math:`i`
    Poisson-samples (probability :math:`q`) from part :math:`i \bmod b`. With a
    :math:`b`-banded Toeplitz strategy :math:`\mathbf C`, the outputs touched by
    one example's :math:`\lceil n/b\rceil` opportunities are disjoint, so the
    mechanism is the composition of :math:`\lceil n/b\rceil` Poisson-subsampled
    Gaussian mechanisms with sensitivity :math:`\|c_{\mathrm{col}}\|_2` and noise
    :math:`\sigma` (equivalently noise multiplier
    :math:`\sigma/\|c_{\mathrm{col}}\|_2`). ``c_col`` is a (the largest) column of
    :math:`\mathbf C`, i.e. the band coefficients.

    Parameters
    ----------
    iterations : int
        :math:`n\ge1` training iterations.
    min_sep : int
        :math:`b\ge1` (number of bands / cyclic parts).
    sampling_prob : float
        Per-opportunity Poisson probability :math:`q\in(0,1]`.
    c_col : sequence of float
        Column of the strategy matrix; only its L2 norm (> 0) matters.
    sigma : float
        Noise standard deviation (> 0).
    """

    iterations: int
    min_sep: int
    sampling_prob: float
    c_col: tuple[float, ...]
    sigma: float

    def __post_init__(self) -> None:
        _check_int("iterations", self.iterations)
        _check_int("min_sep", self.min_sep)
        _check_prob("sampling_prob", self.sampling_prob)
        try:
            col = tuple(float(v) for v in self.c_col)
        except (TypeError, ValueError):
            raise ValueError(f"c_col must be a non-empty sequence of finite numbers, got {self.c_col!r}") from None
        if not col or not all(math.isfinite(v) for v in col) or math.sqrt(sum(v * v for v in col)) <= 0:
            raise ValueError(
                f"c_col must be a non-empty sequence of finite numbers with norm > 0, got {self.c_col!r}"
            )
        object.__setattr__(self, "c_col", col)
        _check_positive("sigma", self.sigma)

    @property
    def col_norm(self) -> float:
        r""":math:`\|c_{\mathrm{col}}\|_2`."""
        return math.sqrt(sum(v * v for v in self.c_col))

    @property
    def compositions(self) -> int:
        r""":math:`\lceil n/b\rceil`."""
        return -(-int(self.iterations) // int(self.min_sep))

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)`` of one Poisson-subsampled step."""
        q = float(self.sampling_prob)
        if q == 1.0:
            return np.array([self.col_norm]), np.array([1.0])
        return np.array([0.0, self.col_norm]), np.array([1.0 - q, q])


MechanismSpec = Union[
    GaussianSpec, PoissonGaussianSpec, GroupPoissonSpec, GroupFixedBatchSpec, CyclicPoissonBandMFSpec
]
MechanismOrFactory = Union[MechanismSpec, Callable[[float], MechanismSpec]]
_SPEC_TYPES = (GaussianSpec, PoissonGaussianSpec, GroupPoissonSpec, GroupFixedBatchSpec, CyclicPoissonBandMFSpec)


@dataclasses.dataclass(frozen=True)
class _Canonical:
    """Scalar MoG: sensitivities ``c`` (>= 0), probabilities ``p``, ``steps``."""

    c: np.ndarray
    p: np.ndarray
    steps: int

    @property
    def key(self) -> tuple:
        return (tuple(self.c.tolist()), tuple(self.p.tolist()), self.steps)


def _canonical(spec: MechanismSpec) -> _Canonical:
    if not isinstance(spec, _SPEC_TYPES):
        raise ValueError(
            "mechanism must be one of GaussianSpec, PoissonGaussianSpec, GroupPoissonSpec, "
            f"GroupFixedBatchSpec, CyclicPoissonBandMFSpec; got {type(spec).__name__}"
        )
    c, p = spec.mixture()
    keep = p > 0
    c, p = np.asarray(c, float)[keep], np.asarray(p, float)[keep]
    # merge duplicate sensitivities, sort ascending
    uc = np.unique(c)
    up = np.array([p[c == v].sum() for v in uc])
    if uc.max() <= 0:
        raise ValueError("mechanism must have a positive sensitivity")
    return _Canonical(uc, up / up.sum(), int(spec.compositions))


# --------------------------------------------------------------------------
# Result container
# --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PLDResult:
    r"""Result of a PLD query.

    Attributes
    ----------
    epsilon, delta : float
        The reported pair (an upper bound on the true privacy curve at this
        point): for :func:`pld_delta` ``epsilon`` is the query and ``delta`` the
        answer, for :func:`pld_epsilon` the reverse.
    epsilon_remove, epsilon_add, delta_remove, delta_add : float
        Per-adjacency values (the reported value is the max).
    infinity_mass : float
        Mass at loss :math:`+\infty` of the composed PLD (max over directions),
        including the pessimistically added window tail bound.
    tail_mass_bound : float
        Rigorous Chernoff bound on the mass cut off by the composition window
        (above: added to ``infinity_mass``; below: aliased upwards) plus the
        truncated noise tails, max over directions.
    error_estimate : float
        Paper-004 estimate ``2|x_h - x_{h/2}|`` of the discretisation error of
        the reported quantity (``delta`` for :func:`pld_delta`, ``epsilon`` for
        :func:`pld_epsilon`); ``nan`` when not requested.
    value_discretization_interval : float
        Grid spacing :math:`h`.
    discretization : str
        ``"connect_dots"`` or ``"round_up"``.
    compositions : int
        Number of self-compositions :math:`T`.
    fft_size : int
        Length of the FFT window.
    roundoff_bound : float
        Rigorous bound on the floating-point round-off of the FFT composition, already
        included in the reported value (max over directions): added to ``delta`` by
        :func:`pld_delta`; for :func:`pld_epsilon`, added to the curve
        :math:`\delta(\cdot)` on the grid cell of the reported ``epsilon``. See "FFT
        round-off" in the module docstring.
    """

    epsilon: float
    delta: float
    epsilon_remove: float
    epsilon_add: float
    delta_remove: float
    delta_add: float
    infinity_mass: float
    tail_mass_bound: float
    error_estimate: float
    value_discretization_interval: float
    discretization: str
    compositions: int
    fft_size: int
    roundoff_bound: float = 0.0

    def to_dict(self) -> dict:
        """Return the fields as a JSON-serialisable ``dict``."""
        return {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v))
                for k, v in dataclasses.asdict(self).items()}


# --------------------------------------------------------------------------
# JAX kernels
# --------------------------------------------------------------------------
def _interval_probs(x: jax.Array) -> jax.Array:
    """P(x_i < Z <= x_{i+1}) along axis 0 for sorted points, Z ~ N(0,1); CDFs evaluated once."""
    lower = ndtr(x)  # accurate left tail
    upper = ndtr(-x)  # accurate right tail
    right = upper[:-1] - upper[1:]
    left = lower[1:] - lower[:-1]
    return jnp.maximum(jnp.where(x[:-1] > 0, right, left), 0.0)


def _inverse_loss(l: jax.Array, s: jax.Array, logp: jax.Array, solver: str) -> jax.Array:
    r"""Solve :math:`L(u)=\ell` for the convex increasing :math:`L`; ``-inf`` below its range."""
    s2h = 0.5 * s * s
    if solver == "gauss":  # single component s>0
        return (l + s2h[0]) / s[0]
    if solver == "poisson":  # components (0, s1)
        logp0, logq, s1 = logp[0], logp[1], s[1]
        valid = l > logp0
        d = jnp.where(valid, logp0 - l, -1.0)
        u = (l + jnp.log(-jnp.expm1(d)) - logq + 0.5 * s1 * s1) / s1
        return jnp.where(valid, u, -jnp.inf)
    # general mixture: Newton from the right (monotone for convex increasing L)
    pos = s > 0
    u0 = jnp.min(jnp.where(pos[None, :], (l[:, None] - logp[None, :] + s2h[None, :]) / jnp.where(pos, s, 1.0)[None, :], jnp.inf), axis=1)
    has_zero = jnp.any(~pos)
    logp0 = jnp.where(has_zero, jnp.max(jnp.where(pos, -jnp.inf, logp)), -jnp.inf)
    valid = l > logp0 + 1e-15 * jnp.maximum(1.0, jnp.abs(logp0))

    def body(state):
        u, it, _ = state
        z = logp[None, :] + s[None, :] * u[:, None] - s2h[None, :]
        lu = logsumexp(z, axis=1)
        w = jnp.exp(z - lu[:, None])
        du = jnp.sum(w * s[None, :], axis=1)
        step = jnp.where(valid, (lu - l) / du, 0.0)
        step = jnp.where(jnp.isfinite(step), step, 0.0)
        unew = u - step
        err = jnp.max(jnp.abs(step) / (1.0 + jnp.abs(unew)))
        return unew, it + 1, err

    def cond(state):
        _, it, err = state
        return jnp.logical_and(it < 200, err > 1e-13)

    u, _, _ = jax.lax.while_loop(cond, body, (jnp.where(valid, u0, 0.0), 0, jnp.inf))
    return jnp.where(valid, u, -jnp.inf)


def _log_mgf(pmf: jax.Array, l: jax.Array, sign: float, lams: np.ndarray, sub: int) -> jax.Array:
    r""":math:`\log\sum_j p_j e^{\lambda \ell_j}` for :math:`\lambda =` ``sign * lams``.

    The grid is ``sub`` interleaved doubling sequences, so after one
    ``exp`` per sequence every further value comes from squaring
    :math:`v=e^{\lambda(\ell-\ell_{\rm ref})}\le1` (``ell_ref`` = extreme loss
    with mass); a sum that underflows to 0 is reported as ``+inf`` (no bound
    from that :math:`\lambda`).
    """
    has = pmf > 0
    x = sign * l
    ref = jnp.max(jnp.where(has, x, -jnp.inf))
    lam0 = jnp.asarray(lams[:sub])
    v0 = jnp.where(has[None, :], jnp.exp(lam0[:, None] * (x - ref)[None, :]), 0.0)

    def step(v, lam):
        tot = v @ pmf
        out = jnp.where(tot > 0, lam * ref + jnp.log(jnp.where(tot > 0, tot, 1.0)), jnp.inf)
        return v * v, out

    _, res = jax.lax.scan(step, v0, jnp.asarray(lams).reshape(-1, sub))
    return res.reshape(-1)


def _window(pmf: jax.Array, l: jax.Array, steps: jax.Array):
    r"""Chernoff window :math:`[x_{lo}, x_{hi}]` holding all but ``_TAIL_TRUNCATION`` of the T-fold sum.

    Uses :math:`\Pr[S\ge x]\le M(\lambda)^T e^{-\lambda x}` and
    :math:`\Pr[S\le x]\le M(-\lambda)^T e^{\lambda x}` with the discretised
    single-step (sub-probability) PLD; also returns :math:`\log M(\pm\lambda)`.
    """
    log_tau = math.log(_TAIL_TRUNCATION / 2)
    t = steps.astype(jnp.float64)
    lm_pos = _log_mgf(pmf, l, 1.0, _LAMBDAS, _LAMBDA_SUB)
    lm_neg = _log_mgf(pmf, l, -1.0, _LAMBDAS_NEG, 1)
    lmax = jnp.max(jnp.where(pmf > 0, l, -jnp.inf))
    lmin = jnp.min(jnp.where(pmf > 0, l, jnp.inf))
    x_hi = jnp.minimum(jnp.min((t * lm_pos - log_tau) / jnp.asarray(_LAMBDAS)), t * lmax)
    x_lo = jnp.maximum(jnp.max(-(t * lm_neg - log_tau) / jnp.asarray(_LAMBDAS_NEG)), t * lmin)
    return x_lo, x_hi, jnp.concatenate([lm_pos, lm_neg])


def _single_one(s, logp, p, n_lo, steps, h, *, K: int, method: str, solver: str):
    """Discretised single-step PLDs (remove, add) + composition windows."""
    idx = n_lo + jnp.arange(K)
    l = idx.astype(jnp.float64) * h
    u = _inverse_loss(l, s, logp, solver)
    ue = jnp.concatenate([jnp.array([-jnp.inf]), u, jnp.array([jnp.inf])])
    # K+1 intervals: (-inf,u0], (u_j,u_{j+1}], (u_{K-1},inf)
    a = jnp.sum(p[None, :] * _interval_probs(ue[:, None] - s[None, :]), axis=1)
    b = _interval_probs(ue)
    ai, bi = a[1:K], b[1:K]  # inner intervals j = 0..K-2 between l_j and l_{j+1}
    lj, lj1 = l[:-1], l[1:]
    if method == "round_up":
        up_r, up_a = ai, bi
    else:
        denom = -jnp.expm1(-h)
        up_r = jnp.clip((ai - jnp.exp(lj) * bi) / denom, 0.0, ai)
        up_a = jnp.clip((bi - jnp.exp(-lj1) * ai) / denom, 0.0, bi)
    zero1 = jnp.zeros(1)
    # REMOVE: index j <-> loss l_j
    rem = jnp.concatenate([zero1, up_r]) + jnp.concatenate([ai - up_r, zero1])
    rem = rem.at[0].add(a[0])
    inf_rem = a[K]
    # ADD (in remove order): index j <-> loss -l_j; the upper end of interval j is index j
    add = jnp.concatenate([up_a, zero1]) + jnp.concatenate([zero1, bi - up_a])
    add = add.at[K - 1].add(b[K])
    inf_add = b[0]
    add = add[::-1]  # ascending losses: index i <-> -(n_lo + K-1) + i
    l_add = -l[::-1]
    lo_r, hi_r, lm_r = _window(rem, l, steps)
    lo_a, hi_a, lm_a = _window(add, l_add, steps)
    pmfs = jnp.stack([rem, add])
    infs = jnp.stack([inf_rem, inf_add])
    offs = jnp.stack([n_lo, -(n_lo + K - 1)])
    return pmfs, infs, offs, jnp.stack([lo_r, lo_a]), jnp.stack([hi_r, hi_a]), jnp.stack([lm_r, lm_a])


@functools.partial(jax.jit, static_argnames=("K", "method", "solver"))
def _single_batch(s, logp, p, n_lo, steps, h, *, K: int, method: str, solver: str):
    f = functools.partial(_single_one, K=K, method=method, solver=solver)
    return jax.vmap(f, in_axes=(0, None, None, 0, None, None))(s, logp, p, n_lo, steps, h)


def _cpow(z: jax.Array, t) -> jax.Array:
    r""":math:`z^t` elementwise by binary powering (square-and-multiply, integer ``t >= 1``).

    Only complex multiplications are used, so the relative error of every entry is at most
    :math:`(1+c_\times u)^{t-1}-1` (by induction over the addition chain, each multiplication
    adds :math:`c_\times u`; see :func:`_compose_core`), whatever the modulus and phase of
    :math:`z`. A Python ``int`` ``t`` is unrolled at trace time (cheaper to compile), a traced
    one runs a ``while_loop``.
    """
    if isinstance(t, int):
        acc, base = None, z
        while t:
            if t & 1:
                acc = base if acc is None else acc * base
            t >>= 1
            if t:
                base = base * base
        return acc

    def body(state):
        acc, base, e = state
        acc = jax.lax.cond((e & 1) == 1, lambda: acc * base, lambda: acc)
        return acc, base * base, e >> 1

    acc, _, _ = jax.lax.while_loop(lambda s: s[2] > 0, body, (jnp.ones_like(z), z, t))
    return acc


def _weight_sum(lam, h: float):
    r"""Bounds on :math:`\sum_{i\ge0}e^{-2\lambda ih}w_i^2` for weights :math:`0\le w_i\le1`.

    Returns ``(plain, short)``: :math:`(1-r)^{-1}`, and for :math:`w_i\le(i+1)h` (the query
    lies within :math:`h` below the first weighted grid point, as :math:`1-e^{\varepsilon-\ell}\le
    \ell-\varepsilon`) :math:`\min\{(1-r)^{-1},h^2(1+r)(1-r)^{-3}\}`, where :math:`r=e^{-2\lambda h}`
    and :math:`\sum(i+1)^2r^i=(1+r)/(1-r)^3`; both ``inf`` for :math:`\lambda=0`.
    """
    one_r = -jnp.expm1(-2.0 * lam * h)
    plain = 1.0 / one_r
    return plain, jnp.minimum(plain, h * h * (2.0 - one_r) / one_r**3)


def _choose_lambda(lm_pos: jax.Array, t: jax.Array, s0: jax.Array, span: float, log_e2: jax.Array,
                   h: float) -> jax.Array:
    r"""Tilt :math:`\lambda\ge0` for a query at loss :math:`s_0` on a window of width ``span`` :math:`=Nh`.

    Minimises an a-priori estimate of the two excesses the tilt trades off (both on the log scale):

    * round-off, :math:`e_2\,M(\lambda)^Te^{-\lambda s_0}G_\lambda^{1/2}` (:func:`_weight_sum`) -- falls while
      the tilted law moves towards :math:`s_0` (it is smallest near the Chernoff tilt, where the
      tilted :math:`T`-fold law has its mean at :math:`s_0`);
    * wrap-around: mass at :math:`s+Nh` above the window lands on :math:`s` amplified by
      :math:`e^{\lambda Nh}`, which adds at most
      :math:`e^{\lambda Nh}\Pr[S\ge s_0+Nh]\le\min_{\mu>\lambda}e^{\lambda Nh+T\log M(\mu)-\mu(s_0+Nh)}`
      to :math:`\delta(s_0)` (pessimistic, never unsound, but it must stay negligible).

    Candidates: :math:`\{0\}\cup` ``_LAMBDAS`` (ratio :math:`2^{1/2}`, log-MGF ``lm_pos``
    from :func:`_window`). Any :math:`\lambda` gives a valid bound; this one keeps the
    reported value tight.
    """
    lam_g = jnp.asarray(_LAMBDAS)
    lm_ok = jnp.where(jnp.isfinite(lm_pos), lm_pos, jnp.inf)
    lm0 = 0.0  # log M(0) = log(mass) <= 0; the estimate only steers the choice

    def cost(lam, lmv):
        log_r = log_e2 + t * lmv - lam * s0 + 0.5 * jnp.log(jnp.minimum(span / h, _weight_sum(lam, h)[1]))
        log_a = jnp.min(jnp.where(lam_g > lam, lam * span + t * lm_ok - lam_g * (s0 + span), jnp.inf))
        c = jnp.logaddexp(log_r, log_a)
        return jnp.where(jnp.isnan(c), jnp.inf, c)

    grid = jnp.concatenate([jnp.zeros(1), lam_g])
    f = jax.vmap(cost)(grid, jnp.concatenate([jnp.full(1, lm0), lm_ok]))
    lam = grid[jnp.argmin(f)]
    return jnp.where(jnp.isfinite(lam), lam, 0.0)


def _compose_core(pmf, off, lam, a_start, steps, h, *, N: int, tilt: bool = True):
    r"""Exponentially tilted FFT power: :math:`T`-fold self-convolution on the window ``[a_start, a_start+N)``.

    With :math:`\ell_i=(\mathrm{off}+i)h`, the single-step pmf :math:`x` is tilted and normalised,
    :math:`z_i=x_ie^{\lambda\ell_i}/M(\lambda)`, :math:`M(\lambda)=\sum_ix_ie^{\lambda\ell_i}`
    (``tilt=False``: :math:`z=x` untouched, :math:`M=1`), folded (centred) onto :math:`N` points and
    :math:`y=\mathrm{irfft}(\mathrm{rfft}(z)^T)` is formed. Since :math:`e^{\lambda\sum\ell}=\prod
    e^{\lambda\ell}`, the composed pmf at loss :math:`s` is :math:`M^Te^{-\lambda s}y_s` (plus
    non-negative aliased mass, which is pessimistic).

    Returns ``(y, e2, tlm, theta)``: ``y`` in window order (round-off included, not clamped);
    ``e2`` a rigorous bound on :math:`\|\hat y-y'\|_2` where :math:`y'` is the exact circular
    :math:`T`-fold convolution of the computed :math:`\hat z` (see the module docstring, "FFT
    round-off"); ``tlm`` :math:`=T\log M(\lambda)`; ``theta`` the relative error of :math:`\hat z`.
    """
    K = pmf.shape[0]
    j = jnp.arange(K)
    t = jnp.asarray(steps, jnp.float64)
    if tilt:
        l = (off + j).astype(jnp.float64) * h
        has = pmf > 0
        lref = jnp.max(jnp.where(has, l, -jnp.inf))
        arg = jnp.where(has, lam * (l - lref), -jnp.inf)
        logpmf = jnp.where(has, jnp.log(jnp.where(has, pmf, 1.0)), -jnp.inf)
        lmn = logsumexp(logpmf + arg)  # log M(lam) - lam * lref
        z = pmf * jnp.exp(arg - lmn)
        tlm = t * (lmn + lam * lref)
        # relative error of z (exp of arg - lmn; entries that underflow are covered by _UNDERFLOW)
        # plus that of T * (lmn + lam * lref) in the untilt factor, which theta is multiplied by T for
        big = jnp.minimum(jnp.max(jnp.where(has, jnp.abs(arg), 0.0)), 750.0) + 3.0 * jnp.abs(lmn)
        theta = 4 * _U * (3.0 + big + jnp.abs(lam * lref))
    else:
        z, tlm, theta = pmf, 0.0, 0.0
    mass = jnp.sum(z)
    c = jnp.round(jnp.sum(j * z) / jnp.maximum(mass, 1e-300)).astype(jnp.int64)
    folded = jnp.zeros(N).at[jnp.mod(j - c, N)].add(z)
    f = jnp.fft.rfft(folded)
    g = _cpow(f, steps)
    circ = jnp.fft.irfft(g, n=N)
    shift = a_start - steps * (off + c)
    y = circ[jnp.mod(shift + jnp.arange(N), N)]
    # --- round-off bound from ||z||_2 and sum(z) of the computed input (inflated for their rounding)
    infl = 1.0 + (max(N, K) + 8) * _U
    z2 = jnp.sqrt(jnp.sum((z if K <= N else folded) ** 2)) * infl  # folding is a permutation if K <= N
    lg = math.log2(N) + 1.0
    e_fft = _FFT_C * lg * _U / (1.0 - _FFT_C * lg * _U)
    e_pow = jnp.expm1((t - 1.0) * math.log1p(_CMUL_C * _U))
    e_pow = e_pow / (1.0 - e_pow)
    # (a) normwise: max_k |Z_k| <= sum(z) + ||Z_hat - F z||_2 and
    #     ||P_hat||_2 / sqrt(N) <= (1 + e_pow)(1 + e_fft) rbar^(T-1) ||z||_2
    rbar = mass * infl + e_fft * math.sqrt(N) * z2
    growth = jnp.exp((t - 1.0) * jnp.maximum(jnp.log(rbar), 0.0))
    p2n = (1.0 + e_pow) * (1.0 + e_fft) * growth * z2
    e_norm = (e_fft + e_pow) * p2n + t * growth * e_fft * z2
    # (b) componentwise: |Z_hat_k - Z_k| <= eta = e_fft sum(z), so |Z_hat_k^T - Z_k^T| <= T eta (|Z_hat_k| + eta)^(T-1),
    #     which is tiny wherever the composed characteristic function is (all but the lowest frequencies)
    eta = e_fft * mass * infl
    herm = jnp.full(N // 2 + 1, 2.0).at[0].set(1.0).at[-1].set(1.0)  # full (Hermitian) spectrum weights
    v = jnp.exp(2.0 * (t - 1.0) * jnp.log(jnp.abs(f) * (1.0 + 4 * _U) + eta))
    spec = jnp.sqrt(jnp.sum(herm * jnp.stack([v, jnp.abs(g) ** 2]), axis=1)) * infl
    e_comp = ((e_fft + e_pow) * spec[1] + t * eta * spec[0]) / math.sqrt(N)
    e2 = jnp.minimum(e_norm, e_comp) * (1.0 + 1e-6) + _UNDERFLOW
    return y, e2, tlm, theta


def _tails(lm, a_start, steps, h, inf1, *, N: int):
    """Chernoff bounds on the T-fold mass above / below the window and the composed truncation mass."""
    nl = len(_LAMBDAS)
    t = jnp.asarray(steps, jnp.float64)
    top = (a_start + N).astype(jnp.float64) * h
    bot = (a_start - 1).astype(jnp.float64) * h
    upper = jnp.minimum(jnp.min(jnp.exp(t * lm[:nl] - jnp.asarray(_LAMBDAS) * top)), 1.0)
    lower = jnp.minimum(jnp.min(jnp.exp(t * lm[nl:] + jnp.asarray(_LAMBDAS_NEG) * bot)), 1.0)
    inf_t = -jnp.expm1(t * jnp.log1p(-inf1))
    return upper, lower, inf_t


def _compose_one(pmf, off, inf1, lm, a_start, steps, h, *, N: int):
    r"""Untilted T-fold composition on the window, for callers that query the pmf freely.

    ``out`` is the composed pmf (clamped to [0, 1]); the returned mass at infinity includes the
    Chernoff bound on the mass above the window *and* the :math:`\ell_1` round-off bound
    :math:`\sqrt N\,e_2\ge\sum_i|\hat y_i-y'_i|`, so that :math:`\sum_i\mathrm{out}_ig_i+\omega_\infty`
    bounds :math:`\sum_i\omega_ig_i+\omega_\infty` from above for every weight :math:`0\le g\le1`
    (every :math:`\delta(\varepsilon)`, also after further compositions).
    """
    y, e2, _, _ = _compose_core(pmf, off, 0.0, a_start, steps, h, N=N, tilt=False)
    out = jnp.clip(y, 0.0, 1.0)
    upper, lower, inf_t = _tails(lm, a_start, steps, h, inf1, N=N)
    l1 = math.sqrt(N) * e2
    return out, jnp.minimum(inf_t + upper + l1, 1.0), upper, lower, inf_t


def _query_delta(out, inf, a_start, h, eps_q, rb=None, rho=0.0):
    r""":math:`\delta(\varepsilon_q)=\sum_j\omega_j(1-e^{\varepsilon_q-\ell_j})_++\omega_\infty` (grid :math:`(A+i)h`).

    With ``rb`` / ``rho`` (see :func:`_query_epsilon`) the certified value
    :math:`\min\{1,(1+\rho)(\cdot)+r_k\}`, :math:`k` the first index with :math:`\ell_k>\varepsilon_q`,
    and that :math:`r_k`; else ``(value, 0)``.
    """
    N = out.shape[0]
    l = (a_start + jnp.arange(N)).astype(jnp.float64) * h
    terms = jnp.where(l > eps_q, out * -jnp.expm1(eps_q - l), 0.0)
    if rb is None:
        return jnp.sum(terms) + inf, 0.0  # (rho covers the summation error, any order: (N - 1) u)
    kq = jnp.clip(jnp.floor(eps_q / h).astype(jnp.int64) + 1 - a_start, 0, N)  # first l > eps_q
    kq = jnp.where((kq > 0) & (l[jnp.maximum(kq - 1, 0)] > eps_q), kq - 1, kq)  # guard rounding
    rb_d = jnp.concatenate([rb, jnp.zeros(1)])[kq]  # rb is non-increasing: a smaller kq is safe
    return jnp.minimum((1.0 + rho) * (jnp.sum(terms) + inf) + rb_d, 1.0), rb_d


def _query_epsilon(out, inf, a_start, h, delta_q, rb=None, rho=0.0):
    r""":math:`\varepsilon(\delta_q)` of a discrete PLD (grid :math:`(A+i)h`, mass ``inf`` at :math:`+\infty`).

    With suffix sums :math:`S_0(k)=\sum_{j\ge k}\omega_j` and
    :math:`S_1(k)=\sum_{j\ge k}\omega_je^{-\ell_j}` (over :math:`\ell_j>0`),
    :math:`D_k=\delta(\ell_k)=S_0(k+1)-e^{\ell_k}S_1(k+1)+\omega_\infty` is
    non-increasing; the first :math:`k` with :math:`D_k\le\delta` is searched
    and :math:`\delta(\varepsilon)=S_0(k)-e^{\varepsilon}S_1(k)+\omega_\infty`
    is solved exactly on :math:`(\ell_{k-1},\ell_k]`.

    ``rb[k]`` (optional) bounds the round-off of :math:`\delta(\varepsilon)` for
    :math:`\varepsilon\in(\ell_{k-1},\ell_k]` (weights on :math:`j\ge k` only) and ``rho`` its
    relative part: every value becomes :math:`(1+\rho)(\cdot)+r_k`, :math:`S_0` is inflated by
    :math:`3(N+4)u` (summation error of non-negative terms in any order, and of
    :math:`S_0-e^{\ell}S_1` with :math:`e^{\ell_k}S_1(k+1)\le S_0(k+1)`), and the reported
    :math:`\varepsilon` solves the inflated equation (rounded up), so it is certified. Returns
    ``(eps, rb_at_eps, floor)``, ``floor`` a certifiable delta at the top of the window
    (without ``rb``: ``(eps, 0, 0)``).
    """
    N = out.shape[0]
    l = (a_start + jnp.arange(N)).astype(jnp.float64) * h
    rigorous = rb is not None
    rbv = rb if rigorous else jnp.zeros(N)
    g1 = 1.0 + rho
    sl = 3.0 * (N + 4) * _U if rigorous else 0.0
    suffix = functools.partial(jax.lax.cumsum, reverse=True)
    pos = l > 0
    lp = jnp.where(pos, l, 0.0)
    w = jnp.where(pos, out, 0.0)
    s0 = suffix(w) * (1.0 + sl)
    s1 = suffix(w * jnp.exp(-lp))
    s0n = jnp.concatenate([s0[1:], jnp.zeros(1)])
    s1n = jnp.concatenate([s1[1:], jnp.zeros(1)])
    d_grid = g1 * (jnp.maximum(s0n - jnp.exp(lp) * s1n, 0.0) + inf) + rbv
    rb0 = jnp.concatenate([rbv, jnp.zeros(1)])[jnp.clip(1 - a_start, 0, N)]  # first index with l > 0
    d0 = g1 * (jnp.maximum(s0[0] - s1[0], 0.0) + inf) + rb0
    k0 = jnp.clip(-a_start, 0, N - 1)  # first index with l >= 0
    cond = (l >= 0) & (d_grid <= delta_q)
    k = jnp.argmax(cond)
    found = cond[k]
    num = s0[k] + inf - (delta_q - rbv[k]) / g1
    den = s1[k]
    # (l_{k-1}, l_k] if l_{k-1} >= 0 is a grid point of the window, else (0, l_k]
    lo_e = jnp.where(k > k0, jnp.maximum(l[k] - h, 0.0), 0.0)
    hi_e = jnp.maximum(l[k], 0.0)
    ok = (num > 0) & (den > 0)
    eps = jnp.where(ok, jnp.log(jnp.where(ok, num, 1.0) / jnp.where(ok, den, 1.0)), lo_e)
    if rigorous:  # round the solution up (its own rounding error is a few ulp)
        eps = eps + 8 * _U * (1.0 + jnp.abs(eps))
    eps = jnp.clip(eps, lo_e, hi_e)
    eps = jnp.where(found, eps, jnp.inf)
    eps = jnp.where(d0 <= delta_q, 0.0, eps)
    if not rigorous:
        return eps, 0.0, 0.0
    rb_e = jnp.where(d0 <= delta_q, rb0, jnp.where(found, rbv[k], jnp.nan))
    return eps, rb_e, jnp.minimum(d0, d_grid[-1])


def _query_one(out, inf, a_start, h, eps_q, delta_q):
    """``(delta(eps_q), eps(delta_q))`` of a discrete PLD (no round-off terms; used by mcacct.composition)."""
    return _query_delta(out, inf, a_start, h, eps_q)[0], _query_epsilon(out, inf, a_start, h, delta_q)[0]


def _tilted_one(pmf, off, inf1, lm, a_start, h, s0, *, steps, N: int):
    r"""Composed pmf of one direction, tilted for a query at loss ``s0``, with its round-off bounds.

    Returns ``(out, rb, rho, inf, tail, lam)``: the composed pmf on the window (untilted, clamped
    to [0, 1]); the per-index bound
    :math:`r_k=(1+\rho)\,e_2\,M^Te^{-\lambda\ell_k}\sqrt{\min\{N-k,G\}}` (:math:`G` from
    :func:`_weight_sum`) on the round-off of :math:`\delta(\varepsilon)` for :math:`\varepsilon\in(\ell_{k-1},\ell_k]`;
    the relative part :math:`\rho`; the mass at infinity (truncation + window tail bound); the
    rigorous tail terms; and the tilt.
    """
    nl = len(_LAMBDAS)
    t = jnp.asarray(steps, jnp.float64)
    lg = math.log2(N) + 1.0
    log_e2 = jnp.log(t * _FFT_C * lg * _U)  # a-priori size of e2 (||z||_2 <= 1)
    lam = _choose_lambda(lm[:nl], t, s0, N * h, log_e2, h)
    y, e2, tlm, theta = _compose_core(pmf, off, lam, a_start, steps, h, N=N)
    s = (a_start + jnp.arange(N)).astype(jnp.float64) * h
    expo = tlm - lam * s  # log of the untilt factor M^T e^{-lam s}
    yp = jnp.maximum(y, 0.0)
    small = expo < 700.0  # elsewhere (far below the query) the factor could overflow: 1 is an upper bound
    out = jnp.where(small, jnp.minimum(yp * jnp.exp(jnp.minimum(expo, 700.0)), 1.0), jnp.where(yp > 0, 1.0, 0.0))
    # rounding of expo = tlm - lam * s and of exp(expo); expo is linear in s, so its largest |value|
    # where it is evaluated (< 700) is at an end of the window (the error of tlm itself is in theta)
    rho1 = 8 * _U * (jnp.minimum(jnp.maximum(jnp.abs(expo[0]), jnp.abs(expo[-1])), 700.0) + jnp.abs(tlm) + 3.0)
    rho = jnp.expm1(1.01 * t * theta + rho1 + 2 * (N + 8) * _U) * 1.01
    plain, short = _weight_sum(lam, h)
    idx = jnp.arange(N)  # for k >= 1 the cell / query point lies within h below l_k
    gk = jnp.minimum(N - idx, jnp.where(idx >= 1, short, plain))
    rb = jnp.exp(jnp.minimum(jnp.log((1.0 + rho) * e2) + expo + 0.5 * jnp.log(gk), 0.0))
    upper, lower, inf_t = _tails(lm, a_start, steps, h, inf1, N=N)
    return out, rb, rho, jnp.minimum(inf_t + upper, 1.0), upper + lower + steps * inf1, lam


def _compose_query_one(pmf, off, inf1, lm, a_start, h, eps_q, delta_q, *, steps: int, N: int, for_delta: bool):
    r"""Tilted composition + one certified query for one direction.

    ``for_delta``: :math:`\delta(\varepsilon_q)`, tilted for :math:`s_0=\varepsilon_q`; else
    :math:`\varepsilon(\delta_q)`, tilted for the Chernoff bound
    :math:`\min_\lambda(T\log M(\lambda)-\log\delta_q)/\lambda\ge\varepsilon(\delta_q)`; both capped
    at the window top (see :func:`_tilted_one`, :func:`_query_delta`, :func:`_query_epsilon`).
    Returns ``(delta, eps, inf, tail, rb_delta, rb_eps, floor)`` (``nan`` for the other query).
    """
    nl = len(_LAMBDAS)
    t = jnp.asarray(steps, jnp.float64)
    top = (a_start + N).astype(jnp.float64) * h
    lam_g = jnp.asarray(_LAMBDAS)
    eps_c = jnp.min(jnp.where(jnp.isfinite(lm[:nl]), (t * lm[:nl] - jnp.log(delta_q)) / lam_g, jnp.inf))
    s0 = jnp.minimum(eps_q if for_delta else eps_c, top)
    out, rb, rho, inf, tail, _ = _tilted_one(pmf, off, inf1, lm, a_start, h, s0, steps=steps, N=N)
    nan = jnp.asarray(jnp.nan)
    if for_delta:
        d_eps, rb_d = _query_delta(out, inf, a_start, h, eps_q, rb, rho)
        return d_eps, nan, inf, tail, rb_d, nan, nan
    eps, rb_e, floor = _query_epsilon(out, inf, a_start, h, delta_q, rb, rho)
    return nan, eps, inf, tail, nan, rb_e, floor


@functools.partial(jax.jit, static_argnames=("N", "steps"))
def _tilted_batch(pmfs, offs, infs, lms, a_start, h, s0, *, N: int, steps: int):
    """:func:`_tilted_one` for both directions of one sigma (leading axis of the inputs)."""
    f = functools.partial(_tilted_one, steps=steps, N=N)
    return jax.vmap(f, in_axes=(0, 0, 0, 0, 0, None, None))(pmfs, offs, infs, lms, a_start, h, s0)


@functools.partial(jax.jit, static_argnames=("N", "steps", "for_delta"))
def _compose_query_batch(pmfs, offs, infs, lms, a_start, h, eps_q, delta_q, *, N: int, steps: int,
                         for_delta: bool):
    f = functools.partial(_compose_query_one, steps=steps, N=N, for_delta=for_delta)
    ax = (0, 0, 0, 0, 0, None, None, None)
    return jax.vmap(jax.vmap(f, in_axes=ax), in_axes=ax)(  # sigmas x directions
        pmfs, offs, infs, lms, a_start, h, eps_q, delta_q)


@functools.partial(jax.jit, static_argnames=("N",))
def _compose_arrays_batch(pmfs, offs, infs, lms, a_start, steps, h, *, N: int):
    f = functools.partial(_compose_one, N=N)
    f2 = jax.vmap(f, in_axes=(0, 0, 0, 0, 0, None, None))
    return jax.vmap(f2, in_axes=(0, 0, 0, 0, 0, None, None))(pmfs, offs, infs, lms, a_start, steps, h)


# --------------------------------------------------------------------------
# Host-side planning and drivers
# --------------------------------------------------------------------------
def _bucket(n: int, minimum: int = 1024) -> int:
    """Smallest power of two >= n (static shapes are bucketed to limit recompilations)."""
    n = max(int(n), minimum)
    return 1 << (n - 1).bit_length()


def _np_loss(u: float, s: np.ndarray, logp: np.ndarray) -> float:
    z = logp + s * u - 0.5 * s * s
    m = z.max()
    return float(m + math.log(np.exp(z - m).sum()))


def _solver_for(c: np.ndarray) -> str:
    if c.size == 1:
        return "gauss"
    if c.size == 2 and c[0] == 0.0:
        return "poisson"
    return "newton"


def _plan(canon: _Canonical, sigma: float, h: float) -> tuple[int, int]:
    s = canon.c / sigma
    logp = np.log(canon.p)
    l_lo = _np_loss(-_Z_TRUNC, s, logp)
    l_hi = _np_loss(float(s.max()) + _Z_TRUNC, s, logp)
    n_lo = math.floor(l_lo / h) - 1
    n_hi = math.ceil(l_hi / h) + 1
    k = n_hi - n_lo + 1
    if k > _MAX_GRID or max(abs(l_lo), abs(l_hi)) > 600:
        raise ValueError(
            f"sigma={sigma:g} is too small for value_discretization_interval={h:g}: the "
            f"single-step privacy loss spans [{l_lo:.3g}, {l_hi:.3g}] ({k} grid points > {_MAX_GRID}); "
            "increase sigma or value_discretization_interval"
        )
    return n_lo, k


def _padded_batches(n: int, size: int) -> list[np.ndarray]:
    """Index batches of constant length ``size`` covering range(n) (last one padded by repetition)."""
    out = []
    for start in range(0, n, size):
        idx = np.arange(start, min(start + size, n))
        if idx.size < size:
            idx = np.concatenate([idx, np.full(size - idx.size, idx[-1])])
        out.append(idx)
    return out


def _batch_size(n: int, budget: int) -> int:
    """Power-of-two batch size <= budget (>= 1) covering up to n items."""
    size = 1
    while size < n and 2 * size <= budget:
        size *= 2
    return size


def _two_level(sizes: Sequence[int]) -> np.ndarray:
    """Map power-of-two sizes to at most two levels: the maximum and half of it."""
    arr = np.asarray(sizes, dtype=np.int64)
    top = int(arr.max())
    return np.where(arr > top // 2, top, max(top // 2, 1024)).astype(np.int64)


def _run(canon: _Canonical, sigmas: np.ndarray, h: float, method: str,
         eps_q: float, delta_q: float, target: str = "delta") -> dict[str, np.ndarray]:
    """Evaluate delta(eps_q) and eps(delta_q) for every sigma; arrays of shape (S, 2).

    Only the ``target`` query is evaluated (``"delta"``: delta(eps_q); ``"epsilon"``:
    eps(delta_q); the other array is ``nan``), with the exponential tilt chosen for it and
    the rigorous round-off bound included. Also returns the round-off bound at the answer
    (``rb_delta`` / ``rb_epsilon``) and, for ``"epsilon"``, the smallest certifiable delta
    (``floor``).

    Sigmas are grouped by their (power-of-two) grid size ``K`` and FFT size
    ``N`` -- at most two levels each, the largest and half of it -- and are
    processed in vmapped batches of one power-of-two size, so that a ladder
    compiles few kernel shapes and small-sigma rungs do not inflate all others.
    """
    sigmas = np.asarray(sigmas, dtype=float)
    n_sig = len(sigmas)
    plans = [_plan(canon, float(sg), h) for sg in sigmas]
    k_of = _two_level([_bucket(k) for _, k in plans])
    logp = jnp.asarray(np.log(canon.p))
    p = jnp.asarray(canon.p)
    steps = jnp.asarray(canon.steps, dtype=jnp.int64)
    solver = _solver_for(canon.c)
    s_all = canon.c[None, :] / sigmas[:, None]
    n_lo_all = np.array([pl[0] for pl in plans], dtype=np.int64)
    pmfs: list = [None] * n_sig
    infs: list = [None] * n_sig
    offs: list = [None] * n_sig
    lms: list = [None] * n_sig
    x_lo = np.zeros((n_sig, 2))
    x_hi = np.zeros((n_sig, 2))
    size = _batch_size(n_sig, max(1, _CHUNK_BUDGET // (4 * int(k_of.max()) * canon.c.size)))
    for k_stat in np.unique(k_of):
        members = np.flatnonzero(k_of == k_stat)
        for idx in _padded_batches(len(members), size):
            ids = members[idx]
            out = _single_batch(jnp.asarray(s_all[ids]), logp, p, jnp.asarray(n_lo_all[ids]), steps, h,
                                K=int(k_stat), method=method, solver=solver)
            xl, xh = np.asarray(out[3]), np.asarray(out[4])
            for r, i in enumerate(ids):
                pmfs[i], infs[i], offs[i], lms[i] = out[0][r], out[1][r], out[2][r], out[5][r]
                x_lo[i], x_hi[i] = xl[r], xh[r]
    a_start = np.floor(x_lo / h).astype(np.int64) - 1
    need = np.max(np.ceil(x_hi / h).astype(np.int64) - a_start + 2, axis=1)
    n_of = _two_level([_bucket(int(v)) for v in need])
    res = {name: np.zeros((n_sig, 2))
           for name in ("delta", "epsilon", "inf", "tail", "rb_delta", "rb_epsilon", "floor")}
    res["fft_size"] = n_of.copy()
    size = _batch_size(n_sig, max(1, _CHUNK_BUDGET // (2 * int(n_of.max()))))
    for n_fft in np.unique(n_of):
        members = np.flatnonzero(n_of == n_fft)
        kmax = max(int(k_of[i]) for i in members)
        for idx in _padded_batches(len(members), size):
            ids = members[idx]
            pm = jnp.stack([jnp.pad(pmfs[i], ((0, 0), (0, kmax - pmfs[i].shape[1]))) for i in ids])
            outs = _compose_query_batch(
                pm, jnp.stack([offs[i] for i in ids]), jnp.stack([infs[i] for i in ids]),
                jnp.stack([lms[i] for i in ids]), jnp.asarray(a_start[ids]), h,
                float(eps_q), float(delta_q), N=int(n_fft), steps=canon.steps, for_delta=target == "delta")
            for name, v in zip(("delta", "epsilon", "inf", "tail", "rb_delta", "rb_epsilon", "floor"), outs):
                res[name][ids] = np.asarray(v)
    return res


def _check_certifiable(r: dict[str, np.ndarray], delta: float, sigmas: np.ndarray) -> None:
    """Refuse an epsilon query whose delta is above the mass at infinity but below the round-off floor."""
    bad = np.isinf(r["epsilon"]) & (delta >= r["inf"] * (1 + 1e-9))
    if bad.any():
        i, d = np.argwhere(bad)[0]
        raise ValueError(
            f"delta={delta:g} is below what the PLD accountant can certify here (round-off bound "
            f"{r['floor'][i, d] - r['inf'][i, d]:.2g}, mass at +infinity {r['inf'][i, d]:.2g}, smallest "
            f"certifiable delta {r['floor'][i, d]:.2g} at sigma={sigmas[i]:g}); increase delta")


def _result(canon: _Canonical, sigma: float, h: float, method: str, eps_q: float,
            delta_q: float, estimate_error: bool, report: str) -> PLDResult:
    r = _run(canon, np.array([sigma]), h, method, eps_q, delta_q, report)
    if report == "epsilon":
        _check_certifiable(r, delta_q, np.array([sigma]))
    err = float("nan")
    if estimate_error:
        r2 = _run(canon, np.array([sigma]), h / 2, method, eps_q, delta_q, report)
        key = "delta" if report == "delta" else "epsilon"
        x1, x2 = float(r[key][0].max()), float(r2[key][0].max())
        err = 2.0 * abs(x1 - x2) if math.isfinite(x1) and math.isfinite(x2) else float("inf")
    d, e = r["delta"][0], r["epsilon"][0]
    rb = r["rb_delta"][0] if report == "delta" else r["rb_epsilon"][0]
    if report == "delta":
        eps_out, delta_out = eps_q, float(d.max())
        e = np.array([eps_q, eps_q])
    else:
        eps_out, delta_out = float(e.max()), delta_q
        d = np.array([delta_q, delta_q])
    return PLDResult(
        epsilon=float(eps_out), delta=float(delta_out),
        epsilon_remove=float(e[0]), epsilon_add=float(e[1]),
        delta_remove=float(d[0]), delta_add=float(d[1]),
        infinity_mass=float(r["inf"][0].max()), tail_mass_bound=float(r["tail"][0].max()),
        error_estimate=err, value_discretization_interval=h, discretization=method,
        compositions=canon.steps, fft_size=int(r["fft_size"][0]),
        roundoff_bound=float(np.nanmax(rb)) if np.isfinite(rb).any() else float("nan"),
    )


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------
def pld_delta(mechanism: MechanismSpec, epsilon: float, *,
              value_discretization_interval: float = _DEFAULT_H,
              discretization: Discretization = "connect_dots",
              estimate_error: bool = True) -> PLDResult:
    r"""Upper bound on :math:`\delta(\varepsilon)` of a composed mechanism.

    .. math::

        \delta(\varepsilon)=\max_{\mathrm{add},\mathrm{remove}}
        \Big[\sum_j \max\{0, 1-e^{\varepsilon-\ell_j}\}\,\omega^{*T}_j
        + \omega^{*T}_{\infty}\Big],

    where :math:`\omega^{*T}` is the :math:`T`-fold FFT self-convolution of the
    pessimistically discretised single-step PLD :math:`\omega`, computed on the
    exponentially tilted pmf; the reported value is
    :math:`(1+\rho)(\cdot)+r_k` with the rigorous FFT round-off bound
    :math:`r_k=(1+\rho)e_2M(\lambda)^Te^{-\lambda\ell_k}\sqrt{\min\{N-k,G_\lambda\}}`
    (module docstring, "FFT round-off"; reported as ``roundoff_bound``).

    Parameters
    ----------
    mechanism : MechanismSpec
        One of the ``*Spec`` dataclasses of this module.
    epsilon : float
        :math:`\varepsilon\ge0`.
    value_discretization_interval : float, default 1e-4
        Loss grid spacing :math:`h\in(0, 0.1]`.
    discretization : {"connect_dots", "round_up"}
        Pessimistic discretisation rule (see module docstring).
    estimate_error : bool, default True
        Also run with :math:`h/2` and report :math:`2|\delta_h-\delta_{h/2}|`.

    Returns
    -------
    PLDResult

    Raises
    ------
    ValueError
        For an unknown mechanism, ``epsilon < 0`` or a bad grid spacing.
    """
    canon = _canonical(mechanism)
    eps = _check_epsilon(epsilon)
    h = _check_h(value_discretization_interval)
    method = _check_discretization(discretization)
    return _result(canon, float(mechanism.sigma), h, method, eps, 0.5, estimate_error, "delta")


def pld_epsilon(mechanism: MechanismSpec, delta: float, *,
                value_discretization_interval: float = _DEFAULT_H,
                discretization: Discretization = "connect_dots",
                estimate_error: bool = True) -> PLDResult:
    r"""Upper bound on :math:`\varepsilon(\delta)` of a composed mechanism.

    :math:`\varepsilon(\delta)=\min\{\varepsilon\ge0:\delta(\varepsilon)\le\delta\}`,
    found by a search over the loss grid: on
    :math:`(\ell_{k-1},\ell_k]` the discrete curve is
    :math:`\delta(\varepsilon)=S_0(k)-e^{\varepsilon}S_1(k)+\omega_\infty` with
    :math:`S_0(k)=\sum_{j\ge k}\omega_j`, :math:`S_1(k)=\sum_{j\ge k}\omega_j e^{-\ell_j}`,
    so the crossing is solved exactly. Returns ``inf`` when
    :math:`\delta` is below the mass at infinity.

    Parameters
    ----------
    mechanism : MechanismSpec
        One of the ``*Spec`` dataclasses of this module.
    delta : float
        :math:`\delta\in(0,1)`.
    value_discretization_interval, discretization, estimate_error
        As in :func:`pld_delta` (the error estimate is :math:`2|\varepsilon_h-\varepsilon_{h/2}|`).

    Returns
    -------
    PLDResult

    Raises
    ------
    ValueError
        For an unknown mechanism, ``delta`` outside (0, 1) or a bad grid spacing, and when
        ``delta`` is above the mass at infinity but below the smallest delta the accountant
        can certify (FFT round-off bound); a ``delta`` below the mass at infinity gives
        ``epsilon = inf``.
    """
    canon = _canonical(mechanism)
    dl = _check_delta(delta)
    h = _check_h(value_discretization_interval)
    method = _check_discretization(discretization)
    return _result(canon, float(mechanism.sigma), h, method, 0.0, dl, estimate_error, "epsilon")


def _ladder_canonical(mechanism: MechanismOrFactory) -> tuple[_Canonical, Callable[[float], object]]:
    if isinstance(mechanism, _SPEC_TYPES):
        def factory(sg: float, _m=mechanism):
            return dataclasses.replace(_m, sigma=float(sg))
        return _canonical(mechanism), factory
    if callable(mechanism):
        c1 = _canonical(mechanism(1.0))
        c2 = _canonical(mechanism(2.0))
        if c1.key != c2.key:
            raise ValueError(
                "mechanism factory must only change sigma (its sensitivities, probabilities "
                "and number of compositions must not depend on sigma)"
            )
        return c1, mechanism
    raise ValueError(f"mechanism must be a *Spec instance or a callable sigma -> spec, got {mechanism!r}")


def _check_sigmas(sigmas: Sequence[float]) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(sigmas, dtype=float))
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"sigmas must be a non-empty 1-D sequence of finite numbers > 0, got {sigmas!r}")
    return arr


def deltas_for_sigmas(mechanism: MechanismOrFactory, sigmas: Sequence[float], epsilon: float, *,
                      value_discretization_interval: float = _DEFAULT_H,
                      discretization: Discretization = "connect_dots") -> np.ndarray:
    r"""Vectorised :math:`\delta(\varepsilon)` for a ladder of noise levels.

    All sigmas are evaluated together: the discretisation and the FFT
    composition are ``jax.vmap``-ed over :math:`\sigma` (in memory-bounded
    chunks of equal static shape).

    Parameters
    ----------
    mechanism : MechanismSpec or callable
        A spec (its ``sigma`` is replaced) or a factory ``sigma -> spec``.
    sigmas : sequence of float
        Noise levels (> 0).
    epsilon : float
        :math:`\varepsilon\ge0`.

    Returns
    -------
    numpy.ndarray
        :math:`\max_{\mathrm{add,remove}}\delta(\varepsilon)` per sigma.
    """
    canon, _ = _ladder_canonical(mechanism)
    arr = _check_sigmas(sigmas)
    eps = _check_epsilon(epsilon)
    h = _check_h(value_discretization_interval)
    method = _check_discretization(discretization)
    return _run(canon, arr, h, method, eps, 0.5, "delta")["delta"].max(axis=1)


def epsilons_for_sigmas(mechanism: MechanismOrFactory, sigmas: Sequence[float], delta: float, *,
                        value_discretization_interval: float = _DEFAULT_H,
                        discretization: Discretization = "connect_dots") -> np.ndarray:
    r"""Vectorised :math:`\varepsilon(\delta)` for a ladder of noise levels.

    See :func:`deltas_for_sigmas`; returns
    :math:`\max_{\mathrm{add,remove}}\varepsilon(\delta)` per sigma.
    """
    canon, _ = _ladder_canonical(mechanism)
    arr = _check_sigmas(sigmas)
    dl = _check_delta(delta)
    h = _check_h(value_discretization_interval)
    method = _check_discretization(discretization)
    r = _run(canon, arr, h, method, 0.0, dl, "epsilon")
    _check_certifiable(r, dl, arr)
    return r["epsilon"].max(axis=1)


def _gaussian_delta(mu: float, eps: float) -> float:
    """Exact delta(eps) of the Gaussian PLD N(mu^2/2, mu^2) (mu = Delta/sigma)."""
    def phi(x: float) -> float:
        return 0.5 * math.erfc(-x / math.sqrt(2.0))
    return phi(-eps / mu + mu / 2) - math.exp(eps) * phi(-eps / mu - mu / 2)


def _gaussian_mu(eps: float, delta: float) -> float:
    """Largest mu with delta_mu(eps) <= delta for the mu-Gaussian (mu-GDP) curve."""
    lo, hi = 1e-8, 1.0
    while _gaussian_delta(hi, eps) < delta and hi < 1e6:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if _gaussian_delta(mid, eps) < delta:
            lo = mid
        else:
            hi = mid
    return lo


def _clt_sigma_estimate(canon: _Canonical, mu: float, sigma_hi: float) -> float:
    r"""Heuristic start for calibration: solve :math:`T\chi^2(P_\sigma\|Q_\sigma)=\mu^2`.

    For a scalar MoG, :math:`1+\chi^2=\sum_{i,j}p_ip_je^{c_ic_j/\sigma^2}`; the
    CLT makes the composition approximately :math:`\mu`-GDP with
    :math:`\mu^2=T\chi^2` (only used to centre the first ladder).
    """
    logpp = np.log(canon.p)[:, None] + np.log(canon.p)[None, :]
    cc = canon.c[:, None] * canon.c[None, :]
    target = math.log1p(mu * mu / canon.steps)

    def log1p_chi2(sg: float) -> float:
        z = logpp + cc / (sg * sg)
        m = z.max()
        return float(m + math.log(np.exp(z - m).sum()))

    lo, hi = 1e-3 * sigma_hi, sigma_hi
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if log1p_chi2(mid) > target:
            lo = mid
        else:
            hi = mid
    return hi


def _round_up_sig(x: float, digits: int = 6) -> float:
    if x <= 0:
        return x
    e = math.floor(math.log10(x)) - (digits - 1)
    m = math.ceil(x / 10.0 ** e - 1e-9)
    return float(f"{m}e{e}")


def pld_calibrate(mechanism: MechanismOrFactory, epsilon: float, delta: float, *,
                  ladder_size: int = 8, rtol: float = 1e-4,
                  sigma_bounds: tuple[float, float] | None = None,
                  value_discretization_interval: float = _DEFAULT_H,
                  discretization: Discretization = "connect_dots") -> float:
    r"""Smallest certified noise :math:`\sigma` meeting a target :math:`(\varepsilon,\delta)`.

    Solves :math:`\min\{\sigma: \delta_\sigma(\varepsilon)\le\delta\}` by
    ladder bisection: each round evaluates ``ladder_size`` sigmas at once with
    :func:`deltas_for_sigmas` (vmapped over sigma). The first ladder is centred
    on a CLT estimate and moved (with growing span) until it brackets the
    crossing; then the bracket :math:`[\sigma_{\rm fail}, \sigma_{\rm pass}]`
    is re-laddered uniformly until its relative width is below ``rtol``. The
    :math:`T`-fold Gaussian mechanism with the largest sensitivity dominates
    every supported mixture, so its analytic calibration caps the search. The
    returned value is the smallest rung whose pessimistic PLD :math:`\delta`
    was checked to be :math:`\le\delta`, rounded *up* to 6 significant digits;
    as :math:`\delta_\sigma(\varepsilon)` is non-increasing in :math:`\sigma`
    (post-processing), the result is certified.

    Parameters
    ----------
    mechanism : MechanismSpec or callable
        A spec (its ``sigma`` is ignored) or a factory ``sigma -> spec``.
    epsilon : float
        Target :math:`\varepsilon\ge0`.
    delta : float
        Target :math:`\delta\in(0,1)`.
    ladder_size : int, default 8
        Rungs per ladder (>= 2).
    rtol : float, default 1e-4
        Relative bracket width at which to stop, in (0, 0.5).
    sigma_bounds : (float, float), optional
        Search range ``(lo, hi)``; by default ``(c_max/12, Gaussian bound)``.
    value_discretization_interval, discretization
        As in :func:`pld_delta`.

    Returns
    -------
    float
        Certified sigma.

    Raises
    ------
    ValueError
        For invalid inputs or when the target cannot be met inside the search
        range; when ``delta`` is below the mass at infinity plus the FFT round-off
        bound at the top of the range, the message says so ("is below what the PLD
        accountant can certify here").
    """
    canon, _ = _ladder_canonical(mechanism)
    eps = _check_epsilon(epsilon)
    dl = _check_delta(delta)
    h = _check_h(value_discretization_interval)
    method = _check_discretization(discretization)
    n = _check_int("ladder_size", ladder_size, 2)
    if not _is_real(rtol) or not 0 < rtol < 0.5:
        raise ValueError(f"rtol must be in (0, 0.5), got {rtol!r}")

    last: dict = {}

    def passes(sig: np.ndarray) -> np.ndarray:
        last.update(_run(canon, sig, h, method, eps, 0.5, "delta"))
        return last["delta"].max(axis=1) <= dl

    cmax = float(canon.c.max())
    mu = _gaussian_mu(eps, dl)
    sigma_gauss = math.sqrt(canon.steps) * cmax / mu
    if sigma_bounds is not None:
        if not isinstance(sigma_bounds, (tuple, list)) or len(sigma_bounds) != 2:
            raise ValueError(f"sigma_bounds must be a pair (lo, hi), got {sigma_bounds!r}")
        floor = _check_positive("sigma_bounds[0]", sigma_bounds[0])
        cap = _check_positive("sigma_bounds[1]", sigma_bounds[1])
        if not floor < cap:
            raise ValueError(f"sigma_bounds must satisfy 0 < lo < hi, got {sigma_bounds!r}")
    else:
        floor = cmax / 12.0
        cap = max(1.02 * sigma_gauss, 2.0 * floor)
    start = min(max(_clt_sigma_estimate(canon, mu, sigma_gauss), floor), cap)
    lo, hi = None, None  # lo: known failing rung, hi: known passing rung
    span = 1.25
    a, b = max(start / span, floor), min(start * span, cap)
    for _ in range(60):
        ladder = np.geomspace(a, b, n)
        ok = passes(ladder)
        if ok.any():
            i = int(np.argmax(ok))
            hi = float(ladder[i])
            if i > 0:
                lo = float(ladder[i - 1])
        else:
            lo = float(ladder[-1])
        if lo is not None and hi is not None:
            break
        span = span * span
        if hi is None:  # all failed: move up
            if lo >= cap * (1 - 1e-12):
                inf_c, rb_c = float(last["inf"][-1].max()), float(last["rb_delta"][-1].max())
                if dl < 2.0 * (inf_c + rb_c):
                    raise ValueError(
                        f"delta={dl:g} is below what the PLD accountant can certify here (round-off "
                        f"bound {rb_c:.2g}, mass at +infinity incl. the window tail bound {inf_c:.2g} "
                        f"at epsilon={eps:g}, sigma={cap:g}); increase delta")
                raise ValueError(
                    f"target (epsilon={eps:g}, delta={dl:g}) not met at sigma={cap:g}; "
                    "the target is too small for this search range"
                )
            a, b = lo, min(lo * span, cap)
        else:  # lowest rung passed: move down
            if hi <= floor * (1 + 1e-12):
                raise ValueError(
                    f"target (epsilon={eps:g}, delta={dl:g}) is met even at sigma={floor:g}, the "
                    "lower end of the search range; pass sigma_bounds (small sigma needs a finer "
                    "loss grid and a larger value_discretization_interval may be required)"
                )
            a, b = max(hi / span, floor), hi
    else:  # pragma: no cover - defensive
        raise ValueError("calibration failed to bracket the target")
    while (hi - lo) > rtol * hi:
        ladder = np.linspace(lo, hi, n + 2)[1:-1]
        ok = passes(ladder)
        if ok.any():
            i = int(np.argmax(ok))
            hi = float(ladder[i])
            lo = float(ladder[i - 1]) if i > 0 else lo
        else:
            lo = float(ladder[-1])
    return _round_up_sig(hi)


def group_privacy_conversion_epsilon(mechanism: MechanismSpec, group_size: int, delta: float, *,
                                     delta_floor: float = 1e-15,
                                     value_discretization_interval: float = _DEFAULT_H,
                                     discretization: Discretization = "connect_dots") -> float:
    r"""Group-level :math:`\varepsilon` via the black-box conversion (paper 000, Lemma 1.1).

    An example-level :math:`(\varepsilon_1,\delta_1)` guarantee implies
    :math:`(k\varepsilon_1,\ \delta_1\sum_{i=0}^{k-1}e^{i\varepsilon_1})` for groups
    of size :math:`k`. This returns
    :math:`\min\{k\varepsilon_1 : \delta(\varepsilon_1)\sum_{i<k}e^{i\varepsilon_1}\le\delta\}`,
    with :math:`\delta(\cdot)` the example-level PLD curve of ``mechanism``
    (searched over the loss grid). This is the baseline the mixture-of-Gaussians
    accounting of :class:`GroupPoissonSpec` improves on.

    Example-level values :math:`\delta(\varepsilon_1)` below ``delta_floor`` are
    replaced by ``delta_floor``: below about ``1e-15`` the composition-window
    truncation (``1e-15``) dominates, so such tiny :math:`\delta_1` -- which
    Lemma 1.1 demands for large :math:`k` -- cannot be certified (the numerical
    problem described in paper 000). The FFT round-off is bounded rigorously: the
    curve is the pointwise minimum over ``_GROUP_TILTS`` exponentially tilted
    compositions (targets spread over the window), each with its round-off bound
    (see "FFT round-off" in the module docstring).

    Parameters
    ----------
    mechanism : MechanismSpec
        Example-level mechanism.
    group_size : int
        :math:`k\ge1`.
    delta : float
        Group-level target :math:`\delta\in(0,1)`.
    delta_floor : float, default 1e-15
        Smallest example-level :math:`\delta_1` trusted (>= 0).

    Returns
    -------
    float
        Group-level epsilon (``inf`` if no :math:`\varepsilon_1` works).
    """
    canon = _canonical(mechanism)
    k = _check_int("group_size", group_size)
    dl = _check_delta(delta)
    h = _check_h(value_discretization_interval)
    method = _check_discretization(discretization)
    if not _is_real(delta_floor) or not 0.0 <= delta_floor < 1.0:
        raise ValueError(f"delta_floor must be in [0, 1), got {delta_floor!r}")
    floor = float(delta_floor)
    sigma = float(mechanism.sigma)
    n_lo, kk = _plan(canon, sigma, h)
    k_stat = _bucket(kk)
    s_mat = jnp.asarray(canon.c[None, :] / sigma)
    pmfs, infs, offs, x_lo, x_hi, lms = _single_batch(
        s_mat, jnp.asarray(np.log(canon.p)), jnp.asarray(canon.p), jnp.asarray([n_lo]),
        jnp.asarray(canon.steps), h, K=k_stat, method=method, solver=_solver_for(canon.c))
    x_lo, x_hi = np.asarray(x_lo), np.asarray(x_hi)
    a_start = np.floor(x_lo / h).astype(np.int64) - 1
    n_fft = _bucket(int(np.max(np.ceil(x_hi / h).astype(np.int64) - a_start + 2)))
    # delta(eps1) on a fine eps1 grid: per direction the minimum over several tilted
    # compositions of (1 + rho) (discrete delta + mass at infinity) + round-off bound,
    # then the max over directions (an upper bound on the discrete PLD curve)
    eps_grid = np.arange(0.0, 60.0, h)
    top = float(np.max(a_start + n_fft)) * h
    best = np.full((2, eps_grid.size), np.inf)
    slack = 1.0 + 3.0 * (n_fft + 4) * _U
    for s_target in np.linspace(0.0, top, _GROUP_TILTS):
        out, rb, rho, inf, _, _ = (np.asarray(v) for v in _tilted_batch(
            pmfs[0], offs[0], infs[0], lms[0], jnp.asarray(a_start[0]), h, float(s_target), N=n_fft,
            steps=canon.steps))
        for d in range(2):
            l = (a_start[0, d] + np.arange(n_fft)) * h
            keep = l > 0
            lv, mv = l[keep], out[d][keep]
            s0 = np.append(np.cumsum(mv[::-1])[::-1] * slack, 0.0)
            s1 = np.append(np.cumsum((mv * np.exp(-lv))[::-1])[::-1], 0.0)
            rbv = np.append(rb[d][keep], 0.0)
            idx = np.searchsorted(lv, eps_grid, side="right")  # first loss > eps1
            dd = (1.0 + rho[d]) * (np.maximum(s0[idx] - np.exp(eps_grid) * s1[idx], 0.0) + inf[d]) + rbv[idx]
            best[d] = np.minimum(best[d], dd)
    worst = best.max(axis=0)
    factor = np.where(eps_grid > 0, np.expm1(k * eps_grid) / np.expm1(np.maximum(eps_grid, 1e-300)), float(k))
    ok = np.maximum(worst, floor) * factor <= dl
    if not ok.any():
        return float("inf")
    return float(k * eps_grid[int(np.argmax(ok))])
