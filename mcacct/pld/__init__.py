r"""FFT privacy-loss-distribution (PLD) accountant in JAX.

This module computes tight, *pessimistic* :math:`(\varepsilon, \delta)`
guarantees for compositions of scalar mixture-of-Gaussians (MoG) mechanisms:
the Gaussian mechanism, the Poisson-subsampled Gaussian mechanism (DP-SGD),
group-level DP-SGD with Poisson or fixed-batch-size sampling (Ganesh, paper
000) and DP-BandMF with cyclic Poisson sampling (Dong & Ganesh 2026 [arXiv:2602.09338], Sec. 3), following
the FFT accountant of Koskela, Jaelkoe & Honkela (Koskela, Jälkö & Honkela 2020 [arXiv:1906.03049]).

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
the two directions (Lemma 5 of Koskela, Jälkö & Honkela 2020 [arXiv:1906.03049]).

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
compose (Ganesh 2024 [arXiv:2401.10294], Lemma 2.6), so every reported :math:`\delta` (and hence
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
(the Esscher transform, as in Koskela & Honkela 2021, arXiv:2102.12412, and Koskela, Jälkö & Honkela 2020,
arXiv:1906.03049): since
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
:math:`(1+\rho)\sum_j\hat\omega_j(1-e^{\varepsilon-\ell_j})_++(1+\rho_\infty)\,\omega_\infty+r_k`,
where :math:`\rho` collects the relative errors of the tilt (:math:`(1-\theta)^{-T}`), of the
untilt and of the sums (:math:`(N-1)u`, any order), and :math:`\rho_\infty=16u` those of the mass at
infinity, which never passes through the tilt or the FFT (its own evaluation, the Chernoff exponent rounded
up, and the final additions); :math:`\varepsilon(\delta)` solves this inflated curve (rounded up). As
:math:`\rho` grows with the tilt, and the tilt with the query, keeping it off :math:`\omega_\infty` keeps the
reported :math:`\delta(\varepsilon)` flat where it is the mass at infinity (non-increasing in
:math:`\varepsilon`); any finite :math:`\varepsilon` is accepted, and beyond the window the value is the limit
:math:`(1+\rho_\infty)\omega_\infty` (docs/pld.md, "Extreme ε and small h").
Without the tilt (:math:`\lambda=0`) :math:`r_k\approx\sqrt N e_2`:
at :math:`N=2^{19}`, :math:`T=7200`, :math:`q=1.2\cdot10^{-4}` about :math:`5\cdot10^{-8}` with (a)
(above the production delta 1.3e-8) and :math:`2`-:math:`4\cdot10^{-9}` with (b) (thousands of
times delta = 1e-12); with the tilt it is :math:`10^{-9}` to :math:`10^{-4}` of :math:`\delta`
(worse only where a tiny :math:`\varepsilon` sits in the bulk of a PLD with a heavy right tail,
which caps :math:`\lambda`; see docs/pld.md).
:func:`pld_epsilon` / :func:`epsilons_for_sigmas` raise ``ValueError`` when the requested delta
is above the mass at infinity but below the smallest certifiable value (a delta below the mass at
infinity still gives ``epsilon = inf``); :func:`pld_calibrate` says so when the target is below
the mass at infinity plus the round-off bound at the top of its range. Callers that query the
composed pmf freely (``compose_arrays_batch``, untilted) get the
:math:`\ell_1` bound :math:`\sqrt N e_2\ge\sum_j|\hat y_j-y'_j|` added to the mass at infinity,
which bounds every later :math:`\delta` and composition.

Error estimate
--------------
Besides the rigorous tail terms, :class:`PLDResult` reports the Koskela-Jälkö-Honkela
estimate (eq. 7.4) :math:`\mathrm{err}=2|I_h - I_{h/2}|` of the discretisation
error, obtained by re-running the accountant with half the grid spacing.

Layout (data flow): :mod:`~mcacct.pld.constants` and :mod:`~mcacct.pld.specs` (mechanisms and their canonical
form) -> :mod:`~mcacct.pld.kernels` (jitted discretisation, window, tilt, FFT powers, queries) ->
:mod:`~mcacct.pld.plan` (grid sizes, batching, results) -> :mod:`~mcacct.pld.accountant` (public API),
:mod:`~mcacct.pld.group` (group privacy by conversion), :mod:`~mcacct.pld.discrete` (discrete PLDs and their
convolution, with round-off bounds), :mod:`~mcacct.pld.events` (heterogeneous compositions of events, and
:mod:`~mcacct.pld.interop` for ``dp_accounting`` events, both ways: :func:`from_dp_event`, :func:`to_dp_event`),
:mod:`~mcacct.pld.stateful` (:class:`PLDAccountant`: a ``dp_accounting.PrivacyAccountant``, ``compose``,
``get_epsilon``, ``get_delta``, ``supports``, ``ledger``, over the certified composition of events; loaded on first
use, as importing ``dp_accounting`` takes about a second) and
:mod:`mcacct.composition` (compositions with Monte Carlo estimates). References: Koskela, Jälkö & Honkela 2020
(arXiv:1906.03049) for the FFT accountant; Ganesh 2024 (arXiv:2401.10294) for the group-level mixtures; Dong &
Ganesh 2026 (arXiv:2602.09338) for cyclic-Poisson BandMF.
"""

from mcacct.pld.specs import (CyclicPoissonBandMFSpec, GaussianSpec, GroupFixedBatchSpec, GroupPoissonSpec,
                              MechanismOrFactory, MechanismSpec, MixtureOfGaussiansSpec, PLDResult,
                              PoissonGaussianSpec)
from mcacct.pld.accountant import deltas_for_sigmas, epsilons_for_sigmas, pld_calibrate, pld_delta, pld_epsilon
from mcacct.pld.group import group_privacy_conversion_epsilon
from mcacct.pld.events import (EVENT_KINDS, Event, EventsResult, composed_pld, event_from_dict, events_delta,
                               events_epsilon, load_events)
from mcacct.pld.interop import from_dp_event, to_dp_event

__all__ = [
    "GaussianSpec",
    "PoissonGaussianSpec",
    "GroupPoissonSpec",
    "GroupFixedBatchSpec",
    "CyclicPoissonBandMFSpec",
    "MixtureOfGaussiansSpec",
    "MechanismSpec",
    "MechanismOrFactory",
    "PLDResult",
    "pld_delta",
    "pld_epsilon",
    "deltas_for_sigmas",
    "epsilons_for_sigmas",
    "pld_calibrate",
    "group_privacy_conversion_epsilon",
    "EVENT_KINDS",
    "Event",
    "EventsResult",
    "event_from_dict",
    "load_events",
    "composed_pld",
    "events_delta",
    "events_epsilon",
    "from_dp_event",
    "to_dp_event",
    "PLDAccountant",
]


def __getattr__(name: str) -> type:
    """``PLDAccountant`` on first use (PEP 562): it subclasses ``dp_accounting.PrivacyAccountant``, and importing
    ``dp_accounting`` (scipy.signal with it) would add about 0.8 s to every ``import mcacct``."""
    if name == "PLDAccountant":
        from mcacct.pld.stateful import PLDAccountant
        return PLDAccountant
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
