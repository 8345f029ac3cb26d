r"""Individual (per-example) privacy accounting with PLDs, for many examples at once.

Example :math:`i` of a DP-SGD run (Poisson sampling :math:`q`, noise multiplier :math:`\sigma`, clip bound
:math:`C`) whose clipped gradient at step :math:`t` has norm :math:`r_{i,t}C`, :math:`r_{i,t}\in[0,1]` (computed
for every step whether or not the example was sampled; 0 where it was removed or filtered out), has the
individual privacy curve of the composition of Poisson-subsampled Gaussians with sensitivities :math:`r_{i,t}`:

.. math:: P_t=(1-q)\,\mathcal N(0,\sigma^2)+q\,\mathcal N(r_{i,t},\sigma^2),\qquad Q=\mathcal N(0,\sigma^2)

(remove direction; :math:`(Q, P_t)` for add). Koskela, Tobaben & Honkela (arXiv:2209.15596): when the
:math:`r_{i,t}` are fixed before training this is exact (up to the pessimistic numerics below; for :math:`q=1`
the composition is Gaussian and :math:`\varepsilon(\mu_i,\delta)`, :math:`\mu_i=\sqrt{\sum_tr_{i,t}^2}/\sigma`
(:func:`mcacct.individual.gdp.individual_mu`), is its closed form); when they depend on the training trajectory it
is their *approximative* accountant (§5), for :math:`q=1` too. **Decision (stop 75): the realized** :math:`\mu_i`
**of a trajectory-dependent run is not a guarantee, even at** :math:`q=1`. Their Theorem 2 needs
:math:`\sum_t\mu_t^2\le B^2` almost surely with :math:`B` fixed before the run; an example whose ratios fall to 0
once its running privacy loss is high has :math:`\mathbb E[(1-e^{\varepsilon(\mu_i)-L})_+]` at about 13 times
:math:`\delta` (an independent audit computed this by dynamic programming). A rigorous fully adaptive guarantee
needs the GDP filter (:mod:`mcacct.individual.gdp`) with its budget fixed in advance, or the worst case. Every
result carries its label.

Bucketing (App. D of the paper), rounding up
--------------------------------------------
Each :math:`r` is rounded **up** to the next edge :math:`k/K` (:math:`K` = ``buckets``; :math:`r=0` stays 0 and
costs nothing), so example :math:`i` is summarised by counts :math:`m_{ik}`. Rounding up is sound: the pair
:math:`(P^{(r)},Q)` is a post-processing of :math:`(P^{(r')},Q)` for :math:`r\le r'` (the kernel
:math:`y\mapsto(r/r')y+\mathcal N(0,\sigma^2(1-r^2/r'^2))` maps :math:`\mathcal N(r',\sigma^2)` to
:math:`\mathcal N(r,\sigma^2)`, fixes :math:`\mathcal N(0,\sigma^2)`, and is linear on mixtures), so a larger
sensitivity dominates and :math:`\varepsilon` can only grow. The *bucketing bound* is the same computation
with every :math:`r` rounded **down** (a lower bound on the exact composition, up to discretisation): the
unbucketed :math:`\varepsilon` lies between the two.

Computation (vmapped, pessimistic)
----------------------------------
1. The :math:`K` single-step PLDs (both directions) are discretised on the grid :math:`\ell=jh` by the
   pessimistic connect-the-dots rule of :mod:`mcacct.pld` and transformed once on an :math:`N`-point window:
   :math:`F_k`, stored as :math:`\log F_k`.
2. Per example, :math:`\prod_kF_k^{m_{ik}}=\exp(\sum_km_{ik}\log F_k)`: one matrix product for a batch of
   examples (the pre-computed transforms replace a per-example composition), one inverse FFT per example, and
   the exact per-cell solve of :math:`\varepsilon(\delta)` of :mod:`mcacct.pld.kernels` (rounded up). (The
   Plancherel identity of Koskela & Honkela, arXiv:2102.12412, would avoid the inverse transform for a
   :math:`\delta` at one fixed :math:`\varepsilon`; the :math:`\varepsilon(\delta)` query needs the whole
   curve, so it is computed instead.)
3. The window of each example is placed by Chernoff bounds from the per-bucket log-MGFs,
   :math:`\log E[e^{\lambda S_i}]\le\sum_km_{ik}\Lambda_k(\lambda)`: mass below it aliases upwards (pessimistic);
   the bound on the mass above it (which would wrap around) is added to :math:`\delta`, as are the mass at
   :math:`+\infty` (:math:`\le\sum_km_{ik}\iota_k`) and the round-off.

Round-off. With :math:`\epsilon_F` the transform error of :mod:`mcacct.pld` ("FFT round-off",
:math:`|\mathrm{fl}(Fv)_j-(Fv)_j|\le\epsilon_F\|v\|_1`), :math:`|F_k|\le1` and :math:`T_i=\sum_km_{ik}`, every
entry of the computed product is within
:math:`\eta_i=1.01\,[T_i\epsilon_F+(K+4)(\pi T_i+1)u]` of the exact one (telescoping over the factors, plus the
rounding of the matrix product and of exp, cos and sin at arguments up to :math:`\pi T_i`), so the inverse
transform is within :math:`\sqrt N(\eta_i+\epsilon_F)` in :math:`\ell_1`, which is added to :math:`\delta`
together with the queries' own terms (relative :math:`(N+4)u`, grid :math:`(|\ell|_{\max}+1)u`). These are
absolute: about ``1e-9`` at :math:`T=1000`, :math:`N=2^{14}`; a ``delta`` that is not at least 10 times the
largest such term is refused.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.individual.gdp import gdp_epsilon
from mcacct.pld.accountant import pld_epsilon
from mcacct.pld.checks import check_value_interval
from mcacct.pld.constants import FFT_C, LAMBDAS, LAMBDAS_NEG, U
from mcacct.pld.kernels import query_one, single_batch
from mcacct.pld.plan import bucket, plan, solver_for
from mcacct.pld.specs import Canonical, PoissonGaussianSpec
from mcacct.core.validate import check_int, check_prob, check_real
from mcacct.core.precision import float64

__all__ = ["IndividualResult", "bucket_counts", "individual_epsilons", "ACCOUNTANT_LABELS", "accountant_kind"]

#: Labels of :attr:`IndividualResult.accountant`.
ACCOUNTANT_LABELS = {
    "gdp": "rigorous: q = 1 and ratios fixed before training (a Gaussian composition: mu-GDP in closed form; "
           "Koskela, Tobaben & Honkela, arXiv:2209.15596, Sec. 3)",
    "fixed": "rigorous: ratios fixed before training (pessimistic PLD of the composition)",
    "approximative": "approximative: ratios that depend on the training trajectory (Koskela, Tobaben & Honkela, "
                     "arXiv:2209.15596, Sec. 5); rigorous only if they were fixed in advance or a GDP filter "
                     "enforces the budget",
}


@float64
def accountant_kind(label: str) -> str:
    """The key of :data:`ACCOUNTANT_LABELS` whose label is ``label`` (:attr:`IndividualResult.accountant`):
    ``"gdp"`` or ``"fixed"`` (rigorous upper bounds) or ``"approximative"`` (not a guarantee).

    Parameters
    ----------
    label : str
        A label as stored in :attr:`IndividualResult.accountant` (compared for exact equality).

    Returns
    -------
    str
        ``"gdp"``, ``"fixed"`` or ``"approximative"``.

    Raises
    ------
    ValueError
        ``label`` is none of the labels.
    """
    for kind, text in ACCOUNTANT_LABELS.items():
        if label == text:
            return kind
    raise ValueError(f"label must be one of the ACCOUNTANT_LABELS; got {label!r}")


_TAU = 1e-18          # Chernoff tail target per side when placing windows
_BIG = 1e300          # stands in for a log-MGF without a bound (avoids 0 * inf)


class IndividualResult(NamedTuple):
    """Per-example results of :func:`individual_epsilons` (arrays have one entry per row of the ratios)."""
    epsilon: np.ndarray          # upper bound (ratios rounded up to the buckets, min with the worst case)
    epsilon_lower_bucket: np.ndarray | None  # the same with ratios rounded down (the bucketing bound)
    mu: np.ndarray | None        # sqrt(sum r^2) / sigma: the GDP mu of the same ratios at q = 1 (no subsampling);
    #                              the run's own (rigorous) only when sampling_prob = 1
    worst_case_epsilon: float    # every ratio 1: mcacct.pld.pld_epsilon of Poisson DP-SGD (the usual accounting)
    bucketing_bound: float       # max over examples of epsilon - epsilon_lower_bucket
    additive_delta: float        # largest absolute term (round-off, tails, infinity) added to any delta
    fft_size: int
    buckets: int
    accountant: str


@float64
def bucket_counts(ratios: np.ndarray, buckets: int, up: bool = True) -> np.ndarray:
    r"""Counts ``m[i, k-1]`` of the ratios of row ``i`` rounded up (or down) to the edge ``k / buckets``,
    ``k = 1..buckets`` (ratios rounded to 0 are dropped: they cost nothing).

    With :math:`K` = ``buckets``, a ratio :math:`r` goes to :math:`k = \lceil rK \rceil` (up) or
    :math:`\lfloor rK \rfloor` (down), moved by one where the float64 edge ``k / buckets`` lands on the wrong side
    of :math:`r`, and clipped to :math:`[0, K]`; so the edge used is :math:`\ge r` (up) or :math:`\le r` (down).

    Parameters
    ----------
    ratios : numpy.ndarray
        Shape ``(n, T)``: per example (row) the clipped-gradient norm ratios :math:`r_{i,t} \in [0, 1]` of the
        steps; not validated here (the caller checks them).
    buckets : int
        The number of buckets :math:`K \ge 1`.
    up : bool, optional
        Round up (default, the upper bound) or down (the bucketing bound).

    Returns
    -------
    numpy.ndarray
        ``int64`` counts of shape ``(n, buckets)``; column ``k - 1`` counts the ratios at the edge ``k / K``.
    """
    r = np.asarray(ratios, np.float64)
    if up:  # the edge actually used by the PLD (k / buckets, as computed there) is >= r, whatever the rounding
        k = np.ceil(r * buckets)
        k = np.where(k / buckets < r, k + 1, k)
    else:
        k = np.floor(r * buckets)
        k = np.where(k / buckets > r, k - 1, k)
    k = np.clip(k, 0, buckets).astype(np.int64)
    rows = np.repeat(np.arange(r.shape[0]), r.shape[1])
    counts = np.zeros((r.shape[0], buckets + 1), np.int64)
    np.add.at(counts, (rows, k.ravel()), 1)
    return counts[:, 1:]


def _single_steps(q: float, sigma: float, buckets: int, h: float):
    """Discretised single-step PLDs of the buckets: pmfs (K, 2, G), offsets (K, 2), infinity masses (K, 2),
    log-MGFs (K, 2, L) on +LAMBDAS and -LAMBDAS_NEG, and the extreme losses (K, 2, 2)."""
    edges = np.arange(1, buckets + 1) / buckets
    c = np.stack([np.zeros(buckets), edges], axis=1) if q < 1 else edges[:, None]
    p = np.array([1.0 - q, q]) if q < 1 else np.array([1.0])
    plans = [plan(Canonical(c[k], p, 1), sigma, h) for k in range(buckets)]
    n_lo = np.array([pl[0] for pl in plans])
    g = bucket(max(pl[1] for pl in plans))
    pmfs, infs, offs, _, _, lms = single_batch(
        jnp.asarray(c / sigma), jnp.asarray(np.log(p)), jnp.asarray(p), jnp.asarray(n_lo),
        jnp.asarray(1, jnp.int64), h, K=g, method="connect_dots", solver=solver_for(c[-1]))
    pmfs, offs = np.asarray(pmfs), np.asarray(offs)
    idx = offs[:, :, None] + np.arange(g)[None, None, :]
    has = pmfs > 0
    ext = np.stack([np.where(has, idx, np.iinfo(np.int64).max).min(-1),
                    np.where(has, idx, np.iinfo(np.int64).min).max(-1)], axis=-1)
    return pmfs, offs, np.asarray(infs), np.asarray(lms), ext


def _windows(counts: np.ndarray, lms: np.ndarray, ext: np.ndarray, h: float):
    """Per example and direction: the window's lowest grid index (Chernoff, ``_TAU`` below it) and the
    highest index needed (``_TAU`` above it)."""
    lm = np.where(np.isfinite(lms), lms, _BIG)                        # (K, 2, L)
    m = counts.astype(np.float64)
    tot = np.einsum("ik,kdl->idl", m, lm)                              # (E, 2, L)
    npos = len(LAMBDAS)
    lam_p, lam_n = np.asarray(LAMBDAS), np.asarray(LAMBDAS_NEG)
    log_tau = math.log(_TAU)
    with np.errstate(over="ignore", invalid="ignore"):
        x_hi = np.min((tot[..., :npos] - log_tau) / lam_p, axis=-1)
        x_lo = np.max(-(tot[..., npos:] - log_tau) / lam_n, axis=-1)
    lo_sup = np.einsum("ik,kd->id", counts, ext[..., 0])                # extreme supports (grid indices)
    hi_sup = np.einsum("ik,kd->id", counts, ext[..., 1])
    lo = np.maximum(np.floor(np.nan_to_num(x_lo, nan=-np.inf, neginf=-1e18) / h), lo_sup).astype(np.int64)
    hi = np.minimum(np.ceil(np.nan_to_num(x_hi, nan=np.inf, posinf=1e18) / h), hi_sup).astype(np.int64)
    return lo, np.maximum(hi, lo)


def _wrap_bound(counts: np.ndarray, lms: np.ndarray, top: np.ndarray, h: float) -> np.ndarray:
    """Chernoff bound on the mass at or above grid index ``top`` (E, 2)."""
    lm = np.where(np.isfinite(lms[..., :len(LAMBDAS)]), lms[..., :len(LAMBDAS)], _BIG)
    tot = np.einsum("ik,kdl->idl", counts.astype(np.float64), lm)
    with np.errstate(over="ignore", invalid="ignore"):
        logb = np.min(tot - np.asarray(LAMBDAS) * (top[..., None] * h), axis=-1)
    return np.minimum(np.exp(np.minimum(logb, 0.0)), 1.0)


@functools.partial(jax.jit, static_argnames=("n",))
def _batch_epsilon(counts, log_re, log_im, start, origin, additive, delta, h, rho, *, n: int):
    """Epsilon of a batch of examples in one direction: ``exp(counts @ log F)``, inverse FFT, the circular
    result unrolled onto the window starting at grid index ``start`` (composed support starts at ``origin``),
    and the certified query at ``delta - additive``."""
    m = counts.astype(jnp.float64)
    z_re = m @ log_re
    z_im = m @ log_im
    spec = jnp.exp(z_re) * (jnp.cos(z_im) + 1j * jnp.sin(z_im))
    circ = jnp.fft.irfft(spec, n=n, axis=-1)
    rot = (start - origin)[:, None] + jnp.arange(n)[None, :]
    out = jnp.maximum(jnp.take_along_axis(circ, rot % n, axis=-1), 0.0)
    query = jax.vmap(lambda o, a, d: query_one(o, 0.0, a, h, 0.0, d, rho=rho)[1])
    return query(out, start, delta - additive)


def _epsilons(counts, parts, delta, h, batch_size, progress):
    pmfs, offs, infs, lms, ext = parts
    k, _, g = pmfs.shape
    lo, hi = _windows(counts, lms, ext, h)
    n = int(bucket(int(max(np.max(hi - lo) + 2, g))))
    origin = counts @ offs                                               # (E, 2) composed support start
    wrap = _wrap_bound(counts, lms, lo + n, h)
    t_i = counts.sum(axis=1).astype(np.float64)
    eps_f = FFT_C * (math.log2(n) + 1) * U
    eta = 1.01 * (t_i * eps_f + (k + 4) * (math.pi * t_i + 1) * U)
    top = np.maximum(np.abs(lo), np.abs(lo + n)) * h
    additive = (math.sqrt(n) * 1.01 * (eta[:, None] + eps_f) + wrap + counts @ infs
                + (top + 1.0) * U * 1.01)
    if np.max(additive) * 10 > delta:
        raise ValueError(f"delta={delta:g} is below what the individual accountant can certify here: its "
                         f"absolute round-off and tail terms reach {np.max(additive):.2g} (need delta >= 10x that)")
    rho = (n + 4) * U
    eps = np.zeros((counts.shape[0], 2))
    for d in range(2):
        pad = np.zeros((k, n))
        pad[:, :g] = pmfs[:, d, :]
        f = np.fft.rfft(pad, axis=-1)
        with np.errstate(divide="ignore"):
            logf = np.log(f.astype(np.complex128))
        log_re = np.where(np.isfinite(logf.real), logf.real, -1e300)
        log_im = np.where(np.isfinite(logf.real), logf.imag, 0.0)
        for s in range(0, counts.shape[0], batch_size):
            sl = slice(s, s + batch_size)
            eps[sl, d] = np.asarray(_batch_epsilon(
                jnp.asarray(counts[sl]), jnp.asarray(log_re), jnp.asarray(log_im), jnp.asarray(lo[sl, d]),
                jnp.asarray(origin[sl, d]), jnp.asarray(additive[sl, d]), float(delta), h, rho, n=n))
            if progress is not None:
                progress(min(s + batch_size, counts.shape[0]) + d * counts.shape[0], 2 * counts.shape[0])
    return eps.max(axis=1), float(np.max(additive)), n


@float64
def individual_epsilons(ratios, sigma: float, sampling_prob: float, delta: float, *, buckets: int = 100,
                        value_discretization_interval: float = 1e-3, ratios_fixed: bool = False,
                        bucketing_bound: bool = True, batch_size: int = 256, progress=None) -> IndividualResult:
    r"""Individual :math:`\varepsilon(\delta)` of every example (row of ``ratios``): an upper bound on the
    composition with these ratios, a guarantee of the run only where the result's ``accountant`` label says
    rigorous (:func:`accountant_kind` ``"gdp"`` or ``"fixed"``; the module docstring says when).

    Parameters
    ----------
    ratios : array (examples, steps)
        :math:`r_{i,t}\in[0,1]`: clipped gradient norm / clip bound of example :math:`i` at step :math:`t`.
    sigma : float
        Noise multiplier :math:`\sigma>0` (noise std / clip bound).
    sampling_prob : float
        Poisson sampling probability :math:`q\in(0,1]`.
    delta : float
        Target :math:`\delta\in(0,1)`.
    buckets : int, default 100
        Number :math:`K` of ratio buckets (edges :math:`k/K`).
    value_discretization_interval : float, default 1e-3
        Loss grid spacing :math:`h`.
    ratios_fixed : bool, default False
        The ratios were fixed before training (then the result is rigorous for any :math:`q`, :math:`q=1`
        included); only changes the label. Ratios that depend on the trajectory are approximative at every
        :math:`q` (module notes).
    bucketing_bound : bool, default True
        Also compute :math:`\varepsilon` with the ratios rounded down (the bucketing bound; twice the work).

    Raises
    ------
    TypeError
        ``ratios`` of a non-real dtype (complex, string, bool, object).
    ValueError
        Out-of-range input (named).

    Returns
    -------
    IndividualResult
        ``epsilon[i]`` is the smaller of the bucketed composition and the worst case (both upper bounds); for
        :math:`q=1` it is the exact GDP value :math:`\varepsilon(\mu_i,\delta)` (no bucketing).
    """
    r = np.asarray(ratios)
    if r.dtype.kind not in "iuf":  # complex would lose its imaginary part, strings parse, bool is no ratio
        raise TypeError(f"ratios must be a real-valued array (an integer or float dtype); got dtype {r.dtype}")
    r = r.astype(np.float64)
    if r.ndim != 2 or r.size == 0:
        raise ValueError(f"ratios must be a non-empty 2-D array (examples, steps); got shape {r.shape}")
    if not np.all(np.isfinite(r)) or np.any(r < 0) or np.any(r > 1):
        raise ValueError("ratios must be finite and in [0, 1] (clipped gradient norm / clip bound)")
    sigma = check_real("sigma", sigma, low=0.0, low_open=True)
    q = check_prob("sampling_prob", sampling_prob)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    k = check_int("buckets", buckets, low=1, high=10_000)
    h = check_value_interval(value_discretization_interval)
    batch_size = check_int("batch_size", batch_size, low=1)
    mu = np.sqrt(np.sum(r * r, axis=1)) / sigma
    if q == 1.0:  # Gaussian compositions: the GDP closed form is exact (no bucketing, no discretisation)
        eps = np.asarray(gdp_epsilon(mu, delta), np.float64)
        worst = float(gdp_epsilon(math.sqrt(r.shape[1]) / sigma, delta))
        return IndividualResult(eps, eps.copy(), mu, worst, 0.0, 0.0, 0, k,
                                ACCOUNTANT_LABELS["gdp" if ratios_fixed else "approximative"])
    parts = _single_steps(q, sigma, k, h)
    up = bucket_counts(r, k, up=True)
    eps, add, n = _epsilons(up, parts, delta, h, batch_size, progress)
    worst = pld_epsilon(PoissonGaussianSpec(q, sigma, steps=r.shape[1]), delta, estimate_error=False).epsilon
    eps = np.minimum(eps, worst)
    low = None
    if bucketing_bound:
        low, _, _ = _epsilons(bucket_counts(r, k, up=False), parts, delta, h, batch_size, progress)
        low = np.minimum(low, eps)
    label = "fixed" if ratios_fixed else "approximative"
    gap = float(np.max(eps - low)) if low is not None else math.nan
    return IndividualResult(eps, low, mu, float(worst), gap, add, n, k, ACCOUNTANT_LABELS[label])
