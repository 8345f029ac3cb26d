r"""Noise calibration for DPIS as a pre-committed plan (sound under the adaptive choice of :math:`\sigma_G`).

Why a plan
----------
DPIS (Wei, Bao, Xiao & Yang 2022, arXiv:2210.09634, Sec. 4.2) picks :math:`\sigma_{G,e}` from the released
:math:`\tilde K_e`, so the pair of epoch :math:`e` depends on earlier outputs. Composition of dominating pairs
(the PLD accountant) is valid for pairs fixed in advance, and no privacy-filter theorem is known for general
PLDs (only for Renyi DP, Feldman & Zrnic 2021, arXiv:2008.11193, and Gaussian DP, whose bound for a subsampled
Gaussian has no amplification). We therefore fix, *before the run* and from public inputs only, one pair per
epoch and make the run's choices stay below it:

* the plan: for epoch :math:`e`, a fraction :math:`\kappa_e\in(0,1]` (the anticipated
  :math:`\tilde K_e/(NC)`; :math:`\kappa_e = 1` is the worst case :math:`\tilde K = NC`) and an effective
  noise multiplier :math:`s_e`; its pair is ``PoissonGaussianSpec(b / (kappa_e N), s_e)``, :math:`T` times;
  :math:`N` is the public planning size (the paper also fixes :math:`T = |D|/b`), :math:`p_K = b/N`;
* the runtime rule (:meth:`DPISPlan.runtime`): floor the released :math:`\tilde K_e` at :math:`\kappa_e NC_e`
  (post-processing) and set :math:`\sigma_{G,e} = s_e\tilde K_e/(\tilde NC_e)`.

Then the realized iteration pair (:func:`mcacct.dpis.pairs.iteration_spec`) has :math:`q = bC_e/\tilde K_e
\le b/(\kappa_e N)` and multiplier exactly :math:`s_e`; the Poisson-subsampled Gaussian is monotone in
:math:`q` (joint convexity) and in :math:`s` (added noise is post-processing), so every step is dominated,
for every history, by the plan's fixed pair, and the composition of the plan's events bounds the run
(Zhu, Dong & Wang 2022, arXiv:2106.08567, adaptive composition of dominating pairs). The anticipated
:math:`\sigma_{G,e}` is :math:`\kappa_e s_e` (when :math:`\tilde K_e = \kappa_e\tilde NC`): a smaller
anticipated :math:`\tilde K` buys a smaller :math:`\sigma_G` for the same budget, which is DPIS's gain.

:func:`calibrate_plan` finds, by bisection, the smallest plan of a given shape meeting :math:`(\varepsilon,
\delta)`: ``rule="constant_sigma"`` (the anticipated :math:`\sigma_{G,e}` equal in every epoch, i.e.
:math:`s_e = \sigma/\kappa_e`) or ``rule="constant_multiplier"`` (:math:`s_e = s`, so :math:`\sigma_{G,e} =
\kappa_e s` falls with :math:`\kappa_e`), with the PLD accountant or with the paper's RDP accountant (same
plan, same rule).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

from mcacct.dpis.events import DPISRun
from mcacct.dpis.pairs import iteration_spec
from mcacct.dpis.plan import ACCOUNTANTS, aux_events, bisect_smallest, check_kappas, plan_epsilon, plan_events
from mcacct.dpis.rdp import DEFAULT_ORDERS, check_orders
from mcacct.core.validate import check_choice, check_int, check_real
from mcacct.core.precision import float64

__all__ = ["RULES", "DPISPlan", "RuntimeParameters", "calibrate_plan", "follows_plan"]

#: plan shapes: sigma_g,e = sigma for every epoch (s_e = sigma / kappa_e), or s_e = s (sigma_g,e = kappa_e s)
RULES = ("constant_sigma", "constant_multiplier")
#: relative safety factor on the runtime sigma_g and the K~ floor, so that float rounding never puts the realized
#: multiplier below s_e nor the realized rate b C / K~ above the plan's b / (kappa_e N)
_UP = 1.0 + 1e-12


class RuntimeParameters(NamedTuple):
    r"""What the runtime rule gives for one epoch: the :math:`\tilde K` to sample with and :math:`\sigma_G`."""

    k_tilde: float
    sigma_g: float


@float64
@dataclasses.dataclass(frozen=True)
class DPISPlan:
    r"""A pre-committed DPIS plan (module docstring) and its certified :math:`(\varepsilon, \delta)`.

    Attributes
    ----------
    dataset_size : int
        Public planning size :math:`N` (for the plan's sampling rates; the weights use :math:`\tilde N`).
    batch_size : float
        Expected batch size :math:`b`.
    iterations_per_epoch : int
        :math:`T`.
    kappas : tuple of float
        :math:`\kappa_e`, the floor of :math:`\tilde K_e/(NC_e)`, per epoch.
    multipliers : tuple of float
        :math:`s_e`, the effective noise multiplier per epoch.
    sigma_n, sigma_k, p_k : float or None
        Auxiliary releases (as :class:`mcacct.dpis.events.DPISRun`; ``p_k`` None: :math:`b/N`).
    k_star_releases : int
        Adaptive-clipping releases :math:`\tilde K^*`.
    rejection_k : float or None
        Rejection-sampling multiplier :math:`k` (every floor :math:`\kappa_e NC \ge kbC`).
    epsilon, delta : float
        The plan's :math:`\varepsilon` (by ``accountant``) at ``delta``.
    accountant : str
        ``"pld"`` or ``"rdp"``; ``order`` is the RDP order (None for PLD).
    rule : str
        The plan's shape (:data:`RULES`).
    """

    dataset_size: int
    batch_size: float
    iterations_per_epoch: int
    kappas: tuple
    multipliers: tuple
    sigma_n: float | None
    sigma_k: float | None
    p_k: float | None
    k_star_releases: int
    rejection_k: float | None
    epsilon: float
    delta: float
    accountant: str
    order: int | None = None
    rule: str = "constant_sigma"

    @property
    def epochs(self) -> int:
        """Number of epochs :math:`E`.

        Returns
        -------
        int
            ``len(kappas)``.
        """
        return len(self.kappas)

    @property
    def sampling_probs(self) -> tuple:
        r"""The plan's per-epoch rate :math:`b/(\kappa_e N)`.

        Returns
        -------
        tuple of float
            One rate per epoch.
        """
        return tuple(self.batch_size / (k * self.dataset_size) for k in self.kappas)

    @property
    def sigma_g(self) -> tuple:
        r"""The anticipated :math:`\sigma_{G,e} = \kappa_e s_e` (at :math:`\tilde K_e = \kappa_e\tilde NC`).

        Returns
        -------
        tuple of float
            One value per epoch.
        """
        return tuple(k * s for k, s in zip(self.kappas, self.multipliers))

    def events(self) -> list:
        """The plan's :class:`mcacct.pld.Event` list (:func:`plan_events`).

        Returns
        -------
        list of mcacct.pld.Event
            The gradient and auxiliary releases of the plan, equal events merged.
        """
        return plan_events(self.dataset_size, self.batch_size, self.iterations_per_epoch, self.kappas,
                           self.multipliers, sigma_n=self.sigma_n, sigma_k=self.sigma_k, p_k=self.p_k,
                           k_star_releases=self.k_star_releases)

    def k_tilde_floor(self, epoch: int, clip: float) -> float:
        r""":math:`\kappa_e N C_e`, the floor of :math:`\tilde K_e` (0-based ``epoch``), rounded up by 1e-12 relative.

        The round-up makes the realized rate :math:`bC_e/\tilde K_e` at most the plan's :math:`b/(\kappa_e N)` in
        floating point, not only in exact arithmetic.

        Parameters
        ----------
        epoch : int
            Epoch index in ``[0, epochs - 1]``.
        clip : float
            Clip bound :math:`C_e > 0` of that epoch.

        Returns
        -------
        float
            The floor of :math:`\tilde K_e`.

        Raises
        ------
        ValueError
            If ``epoch`` or ``clip`` is out of range.
        """
        e = check_int("epoch", epoch, low=0, high=self.epochs - 1)
        return self.kappas[e] * self.dataset_size * check_real("clip", clip, low=0.0, low_open=True) * _UP

    def runtime(self, epoch: int, k_tilde: float, n_tilde: float, clip: float) -> RuntimeParameters:
        r"""The runtime rule of one epoch.

        :math:`\tilde K \leftarrow \max(\tilde K_e, \kappa_e NC_e)`, :math:`\sigma_{G,e} = s_e\tilde K/(\tilde NC_e)`
        (the floor and :math:`\sigma_{G,e}` rounded up by 1e-12 relative), so the realized pair is dominated by the
        plan's (module docstring), also in floating point.

        Parameters
        ----------
        epoch : int
            Epoch index in ``[0, epochs - 1]``.
        k_tilde : float
            The released :math:`\tilde K_e > 0`.
        n_tilde : float
            The released count :math:`\tilde N > 0`.
        clip : float
            Clip bound :math:`C_e > 0`.

        Returns
        -------
        RuntimeParameters
            The :math:`\tilde K` to sample with and :math:`\sigma_G`.

        Raises
        ------
        ValueError
            If an argument is out of range.
        """
        kt = max(check_real("k_tilde", k_tilde, low=0.0, low_open=True), self.k_tilde_floor(epoch, clip))
        nt = check_real("n_tilde", n_tilde, low=0.0, low_open=True)
        return RuntimeParameters(kt, self.multipliers[epoch] * kt / (nt * clip) * _UP)

    def to_dict(self) -> dict:
        """JSON-serialisable fields plus the anticipated ``sigma_g`` and ``sampling_probs``.

        Returns
        -------
        dict
            The fields, tuples as lists.
        """
        out = dataclasses.asdict(self)
        out["kappas"], out["multipliers"] = list(self.kappas), list(self.multipliers)
        out["sigma_g"], out["sampling_probs"] = list(self.sigma_g), list(self.sampling_probs)
        return out


@float64
def follows_plan(run: DPISRun, plan: DPISPlan) -> bool:
    r"""Whether ``run`` is dominated by ``plan`` step by step.

    That is: one entry per epoch with at most :math:`T` iterations, each realized pair with
    :math:`q \le b/(\kappa_e N)` and multiplier :math:`\ge s_e` (both exactly, in floating point; the runtime rule
    rounds the floor and :math:`\sigma_G` up for this), and the same auxiliary releases (``sigma_n``,
    ``sigma_k``, ``p_k``, counts) or none.

    Parameters
    ----------
    run : DPISRun
        The realized run.
    plan : DPISPlan
        The pre-committed plan.

    Returns
    -------
    bool
        ``True`` if the plan's privacy guarantee covers the run.
    """
    if len(run.epochs) != plan.epochs or run.batch_size != plan.batch_size:
        return False
    plan_pk = min(plan.batch_size / plan.dataset_size, 1.0) if plan.p_k is None else plan.p_k
    if run.sigma_n is not None and (plan.sigma_n is None or run.sigma_n < plan.sigma_n):
        return False
    if run.norm_sum_releases or run.k_star_releases:
        if plan.sigma_k is None or run.sigma_k < plan.sigma_k or run.norm_sum_rate != plan_pk:
            return False
        if run.norm_sum_releases > plan.epochs or run.k_star_releases > plan.k_star_releases:
            return False
    for e, (ep, q, s) in enumerate(zip(run.epochs, plan.sampling_probs, plan.multipliers)):
        spec = iteration_spec(ep.k_tilde, run.n_tilde, run.batch_size, run.epoch_clip(ep), ep.sigma_g)
        if ep.iterations > plan.iterations_per_epoch or spec.sampling_prob > q or spec.sigma < s:
            return False
    return True


@float64
def calibrate_plan(dataset_size: int, batch_size: float, epochs: int, epsilon: float, delta: float, *,
                   iterations_per_epoch: int | None = None, kappas: Any = 1.0, sigma_n: float | None = None,
                   sigma_k: float | None = None, p_k: float | None = None, k_star_releases: int = 0,
                   rejection_k: float | None = None, accountant: str = "pld", rule: str = "constant_sigma",
                   value_discretization_interval: float = 1e-3, rtol: float = 1e-3,
                   orders: Sequence[int] = DEFAULT_ORDERS) -> DPISPlan:
    r"""The smallest plan of shape ``rule`` meeting :math:`(\varepsilon, \delta)` (module docstring).

    Parameters
    ----------
    dataset_size : int
        Public planning size :math:`N \ge 1`.
    batch_size : float
        Expected batch size :math:`b \in (0, N]`.
    epochs : int
        :math:`E \ge 1`.
    epsilon, delta : float
        Target, :math:`\varepsilon > 0`, :math:`\delta \in (0, 1)`.
    iterations_per_epoch : int, optional
        :math:`T \ge 1`; default :math:`\lfloor N/b \rfloor`.
    kappas : float or sequence of float
        :math:`\kappa_e \in (0, 1]` (one, or one per epoch); default 1 (worst case, Poisson DP-SGD).
    sigma_n, sigma_k, p_k, k_star_releases
        Auxiliary releases (:func:`plan_events`); the paper uses :math:`\sigma_N = \sigma_K = 0.02N`.
    rejection_k : float, optional
        Rejection-sampling multiplier :math:`k \ge 1`: requires :math:`\kappa_e N \ge kb` for every epoch.
    accountant : {"pld", "rdp"}
        PLD (this package) or the paper's RDP accountant (Lemma 2.5 over ``orders``).
    rule : {"constant_sigma", "constant_multiplier"}
        Equal anticipated :math:`\sigma_{G,e}` (default) or equal effective multipliers :math:`s_e`.
    value_discretization_interval : float, default 1e-3
        PLD grid spacing (every PLD value is an upper bound at any spacing; smaller is tighter and slower).
    rtol : float, default 1e-3
        Relative width of the final bisection bracket (the upper end is returned).
    orders : sequence of int
        RDP orders.

    Returns
    -------
    DPISPlan
        Its ``multipliers`` :math:`s_e`, anticipated ``sigma_g`` and certified ``epsilon`` (<= target).

    Raises
    ------
    ValueError
        For out-of-range input, or when the auxiliary releases alone exceed the target.
    """
    n = check_int("dataset_size", dataset_size, low=1)
    b = check_real("batch_size", batch_size, low=0.0, high=float(n), low_open=True)
    e_count = check_int("epochs", epochs, low=1)
    eps_target = check_real("epsilon", epsilon, low=0.0, low_open=True)  # a calibration needs epsilon > 0
    dl = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    t = max(int(n // b), 1) if iterations_per_epoch is None else check_int("iterations_per_epoch",
                                                                             iterations_per_epoch, low=1)
    ks = check_kappas(kappas, e_count)
    check_choice("accountant", accountant, ACCOUNTANTS)
    check_choice("rule", rule, RULES)
    a = check_orders(orders)
    kr = None if rejection_k is None else check_real("rejection_k", rejection_k, low=1.0)
    if kr is not None:
        for i, k in enumerate(ks):
            if k * n < kr * b:
                raise ValueError(f"kappas[{i}] must be >= rejection_k*batch_size/dataset_size = {kr * b / n!r} "
                                 f"(the K~ floor kappa*N*C must be >= k*b*C for rejection sampling); got {k!r}")
    aux = dict(sigma_n=sigma_n, sigma_k=sigma_k, p_k=p_k,
               k_star_releases=check_int("k_star_releases", k_star_releases, low=0))
    kw = dict(value_discretization_interval=value_discretization_interval, orders=a)
    aux_only = aux_events(n, b, e_count, **aux)
    seen: dict[float, tuple[float, int | None]] = {}

    def mults(x: float) -> list[float]:
        return [x / k for k in ks] if rule == "constant_sigma" else [x] * e_count

    def ok(x: float) -> bool:
        if x not in seen:
            seen[x] = plan_epsilon(plan_events(n, b, t, ks, mults(x), **aux), dl, accountant, **kw)
        return seen[x][0] <= eps_target

    def aux_check() -> None:
        if aux_only and plan_epsilon(aux_only, dl, accountant, **kw)[0] >= eps_target:
            raise ValueError(f"the auxiliary releases (sigma_n, sigma_k) alone exceed epsilon = {eps_target!r}")

    if accountant == "rdp":
        aux_check()
        x = bisect_smallest(ok, 1.0, rtol=1e-6, what="noise")
    else:
        rtol = check_real("rtol", rtol, low=0.0, high=0.5, low_open=True, high_open=True)
        try:  # the RDP plan is a good (usually slightly high) starting point
            guess = calibrate_plan(n, b, e_count, eps_target, dl, iterations_per_epoch=t, kappas=ks, rule=rule,
                                   accountant="rdp", orders=a, rejection_k=kr, **aux)
            guess = guess.sigma_g[0] if rule == "constant_sigma" else guess.multipliers[0]
        except ValueError:
            guess = 1.0
        try:
            x = bisect_smallest(ok, guess, rtol=rtol, what="noise", step=1.15)
        except ValueError:
            aux_check()
            raise
    eps, order = seen[x]
    return DPISPlan(n, b, t, ks, tuple(mults(x)), aux["sigma_n"], aux["sigma_k"], p_k, aux["k_star_releases"], kr,
                    eps, dl, accountant, order, rule)
