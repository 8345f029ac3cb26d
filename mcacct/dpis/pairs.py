r"""The dominating pairs of the releases of a DPIS run, each an :mod:`mcacct.pld` spec (:mod:`mcacct.dpis.events` lists
them for a run).

DPIS (Wei, Bao, Xiao & Yang 2022, "DPIS: An Enhanced Mechanism for Differentially Private SGD with Importance
Sampling", CCS 2022, arXiv:2210.09634) releases, under add/remove-one adjacency:

* once, the noisy record count :math:`\tilde N = N + \mathcal N(0, \sigma_N^2)` (eq. 10, sensitivity 1);
* per epoch, the noisy gradient-norm sum of eq. (11),
  :math:`K' = \frac{1}{p_K}\sum_{i\in B_K}\|\bar g_i\| + \mathcal N(0, \sigma_K^2 C^2)` with :math:`B_K` a
  Poisson sample of rate :math:`p_K`, refined by eq. (12) to :math:`\tilde K` (post-processing);
* optionally (adaptive clipping, Sec. 3.5 / Alg. 1 line 35), per epoch
  :math:`\tilde K^*_e = \sum_{i=1}^N\|\mathrm{Clip}(g_i; C^*)\| + \mathcal N(0, \sigma_K^2 C^{*2})`;
* per iteration, the importance-sampled noisy gradient sum
  :math:`\sum_{i\in\mathcal B} w_i \bar g_i + \mathcal N(0, \sigma_G^2 C^2 I)`: record :math:`i` is included
  with probability :math:`\pi_i = b\|\bar g_i\|/\tilde K` and weighted :math:`w_i = b/(\tilde N \pi_i)`
  (eq. 7 with :math:`p(x_i) = \pi_i/b` and :math:`N \to \tilde N`; see docs/dpis.md for this reading).

Dominating pair of one iteration
--------------------------------
With :math:`\tilde K, \tilde N, \sigma_G` fixed, the contribution of the differing record :math:`z` is
:math:`w_z\bar g_z = \tilde K \bar g_z / (\tilde N \|\bar g_z\|)`, a vector of norm exactly
:math:`\tilde K/\tilde N`, present with probability :math:`\pi_z \le bC/\tilde K`. Conditioned on the other
records' batch (which has the same law with and without :math:`z`) and after rotating :math:`\bar g_z` onto
the first axis, the output is :math:`(1-\pi_z)\mathcal N(0, \sigma_G^2C^2) + \pi_z\mathcal N(\tilde K/\tilde N,
\sigma_G^2C^2)` against :math:`\mathcal N(0, \sigma_G^2C^2)` (the joint quasi-convexity step of the paper's
Sec. 4.1, here for the hockey-stick divergence). The hockey-stick divergence of this pair is non-decreasing
in :math:`\pi_z` in both directions (the pair at :math:`\pi` is a mixture of the pair at :math:`\pi_{\max}`
and the identical pair :math:`(Q, Q)`, and hockey-stick divergences are jointly convex), so the iteration is
dominated by the Poisson-subsampled Gaussian

.. math:: P = (1-q)\mathcal N(0, s^2) + q\,\mathcal N(1, s^2),\quad Q = \mathcal N(0, s^2),\qquad
          q = \frac{bC}{\tilde K},\quad s = \sigma_G\,\frac{\tilde N C}{\tilde K},

i.e. :class:`mcacct.pld.PoissonGaussianSpec` ``(q, s)``. Its Renyi divergence of integer order is eq. (13)
of the paper; at :math:`\tilde K = \tilde NC` it is DP-SGD's pair with :math:`q = b/\tilde N`.

Rejection sampling (Sec. 3.4) gives the same inclusion probability and weight, hence the same pair, **if the
filter probability never caps at 1**: :math:`q_t(x) = b\hat g_t(x)/\tilde K \le 1` with
:math:`\hat g_t \le kC`, i.e. :math:`\tilde K \ge k\,b\,C`. The per-record state :math:`\hat g_t` is hidden
(not released); it only changes the *clipped* norm (clip bound :math:`\min(\hat g_t, C)`), so conditioned on the
released history the differing record is included with some probability :math:`\bar\pi \le bC/\tilde K` and
contributes a vector of norm :math:`\tilde K/\tilde N` along its current gradient: the same pair. Below
:math:`kbC` the analysis does not apply (capped records are included with probability up to 1 and weight
:math:`b\hat g/\tilde N > \tilde K/\tilde N`); ``rejection_k`` makes this module refuse such iterations.

Auxiliary releases: :math:`\tilde N` is ``GaussianSpec(sigma_n)``; :math:`K'` of eq. (11) has sensitivity
:math:`C/p_K` and noise :math:`\sigma_K C`, so it is ``PoissonGaussianSpec(p_k, sigma_k * p_k)`` (not eq. (19)'s
sensitivity :math:`C`); :math:`\tilde K^*_e` sums over *all* records, so it is ``GaussianSpec(sigma_k)`` without
amplification (not eq. (19)'s :math:`b/\tilde N`). See docs/dpis.md.
"""

from __future__ import annotations

from mcacct import pld
from mcacct.core.precision import float64
from mcacct.core.validate import check_real

__all__ = ["iteration_spec", "count_spec", "norm_sum_spec", "norm_sum_star_spec"]


@float64
def iteration_spec(k_tilde: float, n_tilde: float, batch_size: float, clip: float, sigma_g: float, *,
                   rejection_k: float | None = None) -> pld.PoissonGaussianSpec:
    r"""The dominating pair of one DPIS iteration (module docstring).

    .. math:: q = \frac{bC}{\tilde K},\qquad s = \frac{\sigma_G}{r},\qquad r = \frac{\tilde K}{\tilde N C},

    computed as ``q = b / (n_tilde * r)`` and ``sigma = sigma_g / r`` so that :math:`\tilde K = \tilde N C`
    gives exactly ``PoissonGaussianSpec(b / n_tilde, sigma_g)`` (Poisson DP-SGD).

    Parameters
    ----------
    k_tilde : float
        :math:`\tilde K > 0`, the normaliser of the sampling probabilities (eq. 12); must be
        :math:`\ge bC` (every probability :math:`\le 1`), and :math:`\ge kbC` with ``rejection_k``.
    n_tilde : float
        :math:`\tilde N > 0`, the released count used in the weights.
    batch_size : float
        Expected batch size :math:`b > 0`.
    clip : float
        Clip bound :math:`C > 0` of this iteration.
    sigma_g : float
        Noise multiplier :math:`\sigma_G > 0` (noise standard deviation :math:`\sigma_G C`).
    rejection_k : float, optional
        The rejection-sampling multiplier :math:`k \ge 1` of Sec. 3.4, if the batch was drawn with it.

    Returns
    -------
    mcacct.pld.PoissonGaussianSpec
        ``PoissonGaussianSpec(q, s)`` (sensitivity 1, one step).

    Raises
    ------
    ValueError
        If a value is outside its range, or :math:`\tilde K < bC` (resp. :math:`< kbC`).
    """
    kt = check_real("k_tilde", k_tilde, low=0.0, low_open=True)
    nt = check_real("n_tilde", n_tilde, low=0.0, low_open=True)
    b = check_real("batch_size", batch_size, low=0.0, low_open=True)
    c = check_real("clip", clip, low=0.0, low_open=True)
    sg = check_real("sigma_g", sigma_g, low=0.0, low_open=True)
    k = 1.0 if rejection_k is None else check_real("rejection_k", rejection_k, low=1.0)
    if kt < k * b * c:
        what = (f"rejection_k*batch_size*clip = {k * b * c!r} (below it the rejection filter caps at 1 and the "
                "analysis of Sec. 3.4 does not apply)") if rejection_k is not None else (
                f"batch_size*clip = {b * c!r} (every sampling probability b*||g||/k_tilde must be <= 1)")
        raise ValueError(f"k_tilde must be >= {what}; got {kt!r}")
    r = kt / (nt * c)
    return pld.PoissonGaussianSpec(min(b / (nt * r), 1.0), sg / r)


@float64
def count_spec(sigma_n: float) -> pld.GaussianSpec:
    r"""The release of :math:`\tilde N = N + \mathcal N(0, \sigma_N^2)` (eq. 10).

    Sensitivity 1: ``GaussianSpec(sigma_n)``.

    Parameters
    ----------
    sigma_n : float
        The absolute noise standard deviation, ``> 0``.

    Returns
    -------
    mcacct.pld.GaussianSpec
        ``GaussianSpec(sigma_n)``.

    Raises
    ------
    ValueError
        If ``sigma_n`` is not ``> 0``.
    """
    return pld.GaussianSpec(check_real("sigma_n", sigma_n, low=0.0, low_open=True))


@float64
def norm_sum_spec(p_k: float, sigma_k: float) -> pld.PoissonGaussianSpec:
    r"""The release of :math:`K'` of eq. (11): a Poisson sample of rate :math:`p_K`, the norm sum scaled by
    :math:`1/p_K` (sensitivity :math:`C/p_K`), noise :math:`\sigma_K C`; noise multiplier :math:`\sigma_K p_K`:

    .. math:: P = (1-p_K)\mathcal N(0, (\sigma_K p_K)^2) + p_K\mathcal N(1, (\sigma_K p_K)^2).

    Parameters
    ----------
    p_k : float
        Sampling rate :math:`p_K \in (0, 1]` (the paper: :math:`b/\tilde N`).
    sigma_k : float
        :math:`\sigma_K > 0` (noise standard deviation :math:`\sigma_K C`; the paper uses :math:`0.02N`).

    Returns
    -------
    mcacct.pld.PoissonGaussianSpec
        ``PoissonGaussianSpec(p_k, sigma_k * p_k)``; a ``ValueError`` names ``p_k`` or ``sigma_k`` out of range.
    """
    p = check_real("p_k", p_k, low=0.0, high=1.0, low_open=True)
    return pld.PoissonGaussianSpec(p, check_real("sigma_k", sigma_k, low=0.0, low_open=True) * p)


@float64
def norm_sum_star_spec(sigma_k: float) -> pld.GaussianSpec:
    r"""The release of :math:`\tilde K^*_e`, adaptive clipping (Alg. 1 line 35).

    :math:`\tilde K^*_e = \sum_{i=1}^{N}\|\mathrm{Clip}(g_i; C^*)\| + \mathcal N(0, \sigma_K^2C^{*2})`: a sum over
    *all* records, sensitivity :math:`C^*`, no amplification by sampling: ``GaussianSpec(sigma_k)``.

    Parameters
    ----------
    sigma_k : float
        :math:`\sigma_K > 0`.

    Returns
    -------
    mcacct.pld.GaussianSpec
        ``GaussianSpec(sigma_k)``.

    Raises
    ------
    ValueError
        If ``sigma_k`` is not ``> 0``.
    """
    return pld.GaussianSpec(check_real("sigma_k", sigma_k, low=0.0, low_open=True))
