r"""Non-banded strategies (e.g. banded :math:`C^{-1}`) with r-min-sep subsampling: Dong & Ganesh 2026 [arXiv:2602.09338], App. B.

Setting. ``C`` is lower-triangular, Toeplitz and entry-wise non-negative but *not* banded (typically
:math:`C^{-1}` is a ``b``-banded noise-cancellation matrix and the columns of ``C`` decay geometrically).
Examples are drawn by r-min-sep subsampling (:class:`mcacct.schemes.bminsep.BMinSep` with ``min_sep = r``), with
any ``r >= 1`` unrelated to the band width. Because columns overlap, ``P/Q`` no longer factorises.

With :math:`\ell_i = (\langle c_i, y\rangle - \|c_i\|^2/2)/\sigma^2` for the *full* column
:math:`c_i` of ``C`` (rows ``i..n``) and the participation set ``S`` of ``x``,

.. math::
    \ln \frac{N(Cx, \sigma^2 I)}{N(0, \sigma^2 I)}(y) = \sum_{j \in S} \ell_j - \frac{1}{\sigma^2}
    \sum_{i < j \in S} \langle c_i, c_j\rangle .

Upper bound (Lemma B.1). The cross terms are non-negative (``C >= 0``); dropping them gives
:math:`U(y) = \sum_x \mu_r(x) e^{\sum_{j\in S}\ell_j} \ge P(y)/Q(y)`, and ``U`` is *exactly* the b-min-sep
recursion of Theorem 5.1 with ``b = r`` on these :math:`\ell_i`:

.. math::  f_i = (1-p) f_{i+1} + p\, e^{\ell_i} f_{i+r}, \qquad f_i = 1 \ (i > n).

Lower bound (added here for the other direction). For :math:`i < j` the cross term is at most
:math:`\gamma(j - i)` with :math:`\gamma(l) = \sum_{d=0}^{n-1-l} c_d c_{d+l}`; the ``q``-th closest
earlier participation is at least ``q r`` iterations back, so with the suffix maximum
:math:`\gamma^*(l) = \max_{l' \ge l} \gamma(l')` and (0-based ``j``)

.. math::  \Gamma_j = \sum_{q=1}^{\lfloor j/r \rfloor} \gamma^*(q r), \qquad
           \sum_{i<j \in S}\langle c_i, c_j\rangle \le \sum_{j\in S} \Gamma_j ,

the same recursion on :math:`\ell_j - \Gamma_j/\sigma^2` gives :math:`L(y) \le P(y)/Q(y)`.
For ``k <= r`` bands both bounds are exact (:math:`\Gamma = 0`, no cross terms) and equal
:class:`~mcacct.schemes.bminsep.BMinSep`.

Directions. ``remove`` (``y ~ P``, the true mixture with the full ``C``) reports :math:`\ln U(y)`;
``add`` (``y ~ Q``) reports :math:`-\ln L(y) \ge \ln Q/P`. The hockey-stick integrand
:math:`(1 - e^{\varepsilon - \text{loss}})_+` is increasing in the loss, so both estimates are
conservative (Lemma B.1's argument; an upper bound on ``P/Q`` alone would *under*-estimate the ``add``
direction, hence the lower bound). The warm start (Alg. 2) combines ``f_1..f_r`` as usual: conditioned
on being blocked for ``s`` iterations the example cannot touch rows ``< s + 1``, so the bounds hold
per start state.

The strategy is passed as a :class:`~mcacct.strategies.banded.BandedToeplitz` holding the (long) first column of
``C`` — :func:`strategy_from_inverse` builds it from the bands of :math:`C^{-1}`; entries beyond row ``n``
are irrelevant. Sensitivity: :math:`\|Cx\|^2 \le \lceil n/r\rceil (\|c\|^2 + 2\Gamma_{n-1})`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.validate import (check_bool, check_call, check_choice, check_count, check_int, check_prob,
                                  parse_floats)
from mcacct.kernels.output import gaussian_output
from mcacct.schemes.base import Draws, LossErrorParams, SchemeSummary, Scheme, check_scheme_fields, jit_method
from mcacct.strategies.banded import BandedToeplitz, check_strategy_type, parse_c_col
from mcacct.schemes.bminsep import BMinSep, log_ratio_from_terms, sample_participation
from mcacct.kernels.sliding import participation_log_ratios
from mcacct.core.precision import float64
from mcacct.schemes.entry import CompareRow, ComparePlan, CompareSetting, SchemeInfo
from mcacct.schemes.flags import Flag, SchemeArgs, SchemeCLI

__all__ = ["BandedInverse", "strategy_from_inverse", "cross_term_allowance", "INFO"]


@float64
def strategy_from_inverse(inverse_bands, iterations: int, tol: float = 1e-12):
    r"""The Toeplitz strategy ``C`` whose inverse has first column ``inverse_bands`` ``(h_0, ..., h_{b-1})``.

    :math:`c_0 = 1/h_0`, :math:`c_m = -\frac{1}{h_0}\sum_{d=1}^{\min(m, b-1)} h_d c_{m-d}` for
    ``m < iterations`` (exact for the ``n x n`` matrices). Entries below ``tol * c_0`` in absolute value are
    set to zero (round-off); a clearly negative entry raises.

    Parameters
    ----------
    inverse_bands : array_like
        ``(h_0, ..., h_{b-1})``, finite, ``h_0 > 0``.
    iterations : int
        ``n >= 1``: entries ``c_0..c_{n-1}`` are computed.
    tol : float, default 1e-12
        Relative threshold below which an entry is zeroed.

    Returns
    -------
    BandedToeplitz
        ``c_col`` cut after its last non-zero entry.

    Raises
    ------
    ValueError
        ``inverse_bands`` empty/non-finite, ``h_0 <= 0``, or ``C`` not entry-wise non-negative.
    """
    n = check_int("iterations", iterations, low=1)
    h = np.atleast_1d(np.asarray(inverse_bands, dtype=np.float64))
    if h.ndim != 1 or h.size == 0 or not np.all(np.isfinite(h)):
        raise ValueError(f"inverse_bands must be a non-empty sequence of finite numbers; got {inverse_bands!r}")
    if h[0] <= 0:
        raise ValueError(f"inverse_bands[0] must be > 0; got {h[0]!r}")
    c = np.zeros(n)
    c[0] = 1.0 / h[0]
    for m in range(1, n):
        d = np.arange(1, min(m, h.size - 1) + 1)
        c[m] = -np.dot(h[d], c[m - d]) / h[0] if d.size else 0.0
    small = np.abs(c) <= tol * c[0]
    if np.any(c[~small] < 0):
        raise ValueError("inverse_bands must give an entry-wise non-negative C = inverse; "
                         f"first column has a negative entry {c[~small].min():.3g}")
    c[small] = 0.0
    nz = np.nonzero(c)[0]
    return BandedToeplitz(tuple(c[: nz[-1] + 1]))


@lru_cache(maxsize=64)
def _allowance(c_col: tuple[float, ...], n: int, r: int) -> np.ndarray:
    c = np.zeros(n)
    k = min(len(c_col), n)
    c[:k] = c_col[:k]
    gamma = np.zeros(n)  # gamma[l] = sum_{d + l < n} c_d c_{d+l}; zero for l >= k
    for lag in range(1, k):
        gamma[lag] = float(np.dot(c[: n - lag], c[lag:]))
    suffix_max = np.maximum.accumulate(gamma[::-1])[::-1]
    inc = suffix_max[np.arange(r, n, r)]  # gamma*(q r) for q = 1, 2, ... while q r <= n - 1
    cum = np.concatenate([[0.0], np.cumsum(inc)])  # cum[q] = sum_{q' <= q} gamma*(q' r)
    return cum[np.arange(n) // r]


@float64
def cross_term_allowance(c_col, iterations: int, min_sep: int) -> np.ndarray:
    r""":math:`\Gamma_j` (0-based ``j``) of the module docstring: an upper bound on the sum of
    :math:`\langle c_i, c_j\rangle` over the earlier participations ``i`` of any ``min_sep``-separated
    pattern. Zero when ``len(c_col) <= min_sep``.

    Parameters
    ----------
    c_col : sequence of float or str
        The first column of ``C`` (as :func:`~mcacct.strategies.banded.parse_c_col` accepts it).
    iterations, min_sep : int
        ``n >= 1`` and ``r >= 1``.

    Returns
    -------
    numpy.ndarray
        float64 ``(n,)``: :math:`\Gamma_j = \sum_{q=1}^{\lfloor j/r \rfloor} \gamma^*(q r)`, a fresh copy.

    Raises
    ------
    ValueError
        Naming ``iterations`` or ``min_sep`` (not an integer ``>= 1``) or ``c_col`` (invalid values).
    """
    n = check_int("iterations", iterations, low=1)
    r = check_int("min_sep", min_sep, low=1)
    return _allowance(parse_c_col(c_col), n, r).copy()


def _convolve(x: jax.Array, c_col: tuple[float, ...]) -> jax.Array:
    """``C x`` along the last axis for a lower-triangular Toeplitz ``C`` with first column ``c_col``."""
    n = x.shape[-1]
    k = min(len(c_col), n)
    dtype = x.dtype
    if k <= 64:
        pad = [(0, 0)] * (x.ndim - 1) + [(k - 1, 0)]
        xp = jnp.pad(x, pad)
        out = xp[..., k - 1:k - 1 + n] * jnp.asarray(c_col[0], dtype)
        for d in range(1, k):
            if c_col[d] != 0.0:
                out = out + xp[..., k - 1 - d:k - 1 - d + n] * jnp.asarray(c_col[d], dtype)
        return out
    size = 1 << int(math.ceil(math.log2(2 * n)))
    cf = jnp.fft.rfft(jnp.asarray(np.asarray(c_col[:k]), dtype), n=size)
    xf = jnp.fft.rfft(x, n=size, axis=-1)
    return jnp.fft.irfft(xf * cf, n=size, axis=-1)[..., :n].astype(dtype)


@float64
@dataclass(frozen=True)
class BandedInverse(Scheme):
    r"""r-min-sep subsampling for a non-banded, non-negative Toeplitz ``C`` (App. B), via bounds on ``P/Q``.

    A thin wrapper around :class:`~mcacct.schemes.bminsep.BMinSep` (``min_sep = r``): the sampler is that of
    b-min-sep with ``b = r``, the recursion is Theorem 5.1 with ``b = r`` on full-column terms (upper bound,
    Lemma B.1; ``remove`` direction) and on terms reduced by the cross-term allowance (lower bound;
    ``add`` direction). See the module docstring.

    Parameters
    ----------
    sampling_prob : float
        ``p`` in ``(0, 1]``.
    min_sep : int
        ``r >= 1``, the enforced separation (any value; larger ``r`` drops smaller cross terms).
    iterations : int
        ``n >= 1``.
    warm_start : bool, default True
        Alg. 2 (default) or Alg. 1.
    """

    sampling_prob: float
    min_sep: int
    iterations: int
    warm_start: bool = True

    def __post_init__(self) -> None:
        check_scheme_fields(self, sampling_prob=check_prob, min_sep=check_count, iterations=check_count,
                            warm_start=check_bool)

    @property
    def base(self):
        """The :class:`~mcacct.schemes.bminsep.BMinSep` whose recursion and sampler are reused (``b = r``)."""
        return BMinSep(self.sampling_prob, self.min_sep, self.iterations, self.warm_start)

    @property
    def participation_rate(self) -> float:
        """The expected fraction of iterations with a participation: that of :attr:`base`."""
        return self.base.participation_rate

    @staticmethod
    def _col(strategy) -> tuple[float, ...]:
        return tuple(strategy.c_col)

    def allowance(self, strategy) -> np.ndarray:
        r""":math:`\Gamma_j`, ``j = 0..n-1`` (zero when ``C`` has at most ``r`` bands).

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        numpy.ndarray
            float64 ``(n,)``, as :func:`cross_term_allowance`.
        """
        check_call(self, strategy=strategy)
        return cross_term_allowance(self._col(strategy), self.iterations, self.min_sep)

    # -- AccountedScheme ---------------------------------------------------------------------------------
    def check_strategy(self, strategy) -> None:
        """Any non-negative Toeplitz ``C`` (a :class:`~mcacct.strategies.banded.BandedToeplitz`, which checks
        ``c >= 0``) is admissible, any number of bands.

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
        r""":math:`\sqrt{\lceil n/r\rceil\,(\|c\|^2 + 2\Gamma_{n-1})}` with ``c`` truncated at ``n`` entries.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        float
            The bound, :math:`\ge \max_x \|C x\|_2`.

        Raises
        ------
        ValueError
            Naming ``strategy`` if it is not a :class:`BandedToeplitz`.
        """
        n, r = self.iterations, self.min_sep
        gam = self.allowance(strategy)
        c = np.asarray(self._col(strategy)[:n])
        return math.sqrt(-(-n // r) * (float(np.dot(c, c)) + 2.0 * float(gam[-1])))

    def draw(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        """``y = C x + z`` with the full (non-banded) ``C`` (``"remove"``), or ``y = z`` (``"add"``).

        Parameters
        ----------
        key, strategy, sigma : jax.Array, BandedToeplitz, float
            The ``jax.random`` key, the strategy ``C`` and the noise multiplier (checked by :meth:`Scheme.sample`).
        num_samples, direction, dtype : int, {"remove", "add"}, dtype
            Rows, ``P`` or ``Q``, and the dtype of ``y``.

        Returns
        -------
        Draws
            ``y`` of ``dtype``, ``(num_samples, n)``, the r-min-sep pattern ``x`` of :class:`BMinSep`; ``aux``
            is ``None``.
        """
        return Draws(self._sample_y(key, strategy, sigma, num_samples, direction == "remove", dtype))

    @jit_method("strategy", "num_samples", "positive", "dtype")
    def _sample_y(self, key, strategy, sigma, num_samples, positive, dtype):
        return gaussian_output(key, (num_samples, self.iterations), sigma, dtype, positive, lambda k: _convolve(
            sample_participation(k, self.base, num_samples).astype(dtype), self._col(strategy)))

    def log_ratio_bounds(self, y: jax.Array, strategy, sigma, dot_method: str = "auto",
                         recursion: str = "auto", which: str = "both"):
        r"""``(ln L(y), ln U(y))`` with ``L <= P/Q <= U`` (``which``: ``"both"``, ``"lower"``, ``"upper"``;
        the bound not asked for is ``None``).

        Parameters
        ----------
        y, strategy, sigma : array_like, BandedToeplitz, float
            Outputs of shape ``(..., n)``, the strategy and the noise multiplier.
        dot_method, recursion : str, default "auto"
            The kernels.
        which : {"both", "lower", "upper"}, default "both"
            Which bounds to compute.

        Returns
        -------
        tuple
            ``(ln L, ln U)``, each of shape ``(...)`` or ``None``: :math:`\ln U` is Theorem 5.1's recursion on
            :math:`\ell_j`, :math:`\ln L` the same on :math:`\ell_j - \Gamma_j/\sigma^2`.

        Raises
        ------
        ValueError
            Naming ``y``, ``sigma``, ``strategy``, ``dot_method``, ``recursion`` or ``which``.
        """
        y = check_call(self, y=y, sigma=sigma, strategy=strategy, dot_method=dot_method, recursion=recursion)
        check_choice("which", which, ("both", "lower", "upper"))
        return self._log_ratio_bounds(y, sigma, strategy, dot_method, recursion, which)

    @jit_method("strategy", "dot_method", "recursion", "which")
    def _log_ratio_bounds(self, y, sigma, strategy, dot_method, recursion, which):
        ell = participation_log_ratios(y, jnp.asarray(sigma, y.dtype), strategy.c_col, dot_method)
        upper = lower = None
        if which in ("both", "upper"):
            upper = log_ratio_from_terms(ell, self.base, recursion)
        if which in ("both", "lower"):
            gam = jnp.asarray(self.allowance(strategy), y.dtype) / jnp.asarray(sigma, y.dtype) ** 2
            lower = log_ratio_from_terms(ell - gam, self.base, recursion)
        return lower, upper

    def loss_rows(self, y, strategy, sigma, aux, direction: str, dot_method: str, recursion: str):
        r"""A bound on :math:`\ln P(y)/Q(y)` that serves ``direction``: the upper bound ``ln U`` for
        ``"remove"`` (its loss ``ln P/Q`` is over-estimated) and the lower bound ``ln L`` for ``"add"`` (its loss
        ``ln Q/P = -ln P/Q`` is over-estimated); either way the estimated delta is an upper bound.

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
            Shape ``(...)``: :math:`\ln U(y)` (``"remove"``) or :math:`\ln L(y)` (``"add"``); ``aux`` is unused.
        """
        which = "upper" if direction == "remove" else "lower"
        lower, upper = self._log_ratio_bounds(y, sigma, strategy, dot_method, recursion, which)
        return upper if direction == "remove" else lower

    def output_coordinate_bound(self, strategy) -> float:
        r"""The sensitivity bound: an :math:`\ell_2` bound on ``C x`` is also an :math:`\ell_\infty` one (C is not
        banded here, so the participations can share output coordinates).

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
        """``0.0``: the r-min-sep participation is the only random draw besides the noise, and its uniform-draw
        boundaries are counted by :meth:`participation_boundaries`."""
        return 0.0

    def participation_boundaries(self) -> int:
        """The r-min-sep sampler's boundaries plus one per iteration (generous)."""
        return self.base.participation_boundaries() + self.iterations

    def summary(self) -> SchemeSummary:
        """``b`` = ``min_sep``, ``q``, the participation rate (:class:`~mcacct.schemes.base.SchemeSummary`)."""
        return SchemeSummary(self.min_sep, self.sampling_prob, self.participation_rate, None)

    def loss_error_params(self) -> LossErrorParams:
        """Theorem 5.1's recursion with ``b = r`` and ``p``; ``J = n`` (generous); factor 2 (generous).

        Returns
        -------
        LossErrorParams
            ``(r, p, n, 2.0)``.
        """
        return LossErrorParams(self.min_sep, self.sampling_prob, self.iterations, 2.0)


# -- the entry: how mcacct offers the scheme (mcacct.schemes.entry) ---------------------------------------------
def _build_cli(a: SchemeArgs):
    r = a.min_sep
    bands = a.get("inverse_bands")
    if bands is not None:
        if a.given("c_col"):
            raise ValueError("give either --c-col (C's first column) or --inverse-bands (the bands of C^-1) for "
                             "--scheme banded-inverse, not both")
        strategy = strategy_from_inverse(parse_floats("inverse_bands", bands), a.iterations)
    else:  # its own default: C = I (DP-SGD), whose inverse has one band
        strategy = a.strategy(default=(1.0,))
    return BandedInverse(a.min_sep_prob(r), r, a.iterations, a.warm_start), strategy


def _compare_plan(s: CompareSetting) -> ComparePlan:
    bands = s.option("inverse_bands")
    if bands is None:
        return ComparePlan.skipped("inverse_bands not given")
    bands = parse_floats("inverse_bands", bands)
    inv = strategy_from_inverse(bands, s.iterations)
    return ComparePlan(BandedInverse(s.sampling_prob, s.min_sep, s.iterations, True), inv,
                       {"inverse_bands": list(bands), "c_col_length": len(inv.c_col)})


#: The scheme's entry (:mod:`mcacct.schemes.registry` lists it).
INFO = SchemeInfo(
    "banded-inverse", BandedInverse, "r-min-sep with a non-banded C from banded C^-1 (App. B)",
    cli=SchemeCLI(_build_cli, flags=(
        Flag("--inverse-bands", str, "banded-inverse: comma-separated bands h0,h1,... of C^-1 (h0 > 0; C = their "
                                     "inverse, instead of --c-col); compare: adds the banded-inverse row",
             check=parse_floats),)),
    compare=CompareRow(_compare_plan, {"inverse_bands": parse_floats}))
