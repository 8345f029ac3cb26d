r"""Privacy accounting for DPIS: DP-SGD with importance sampling (Wei, Bao, Xiao & Yang 2022, "DPIS: An Enhanced
Mechanism for Differentially Private SGD with Importance Sampling", CCS 2022, arXiv:2210.09634).

* :mod:`mcacct.dpis.pairs`: the dominating pair of one DPIS iteration (a Poisson-subsampled Gaussian with
  :math:`q = bC/\tilde K` and multiplier :math:`\sigma_G\tilde NC/\tilde K`; the rejection-sampling variant of
  Sec. 3.4 when :math:`\tilde K \ge kbC`) and of the auxiliary releases (:math:`\tilde N`, :math:`K'`,
  :math:`\tilde K^*`).
* :mod:`mcacct.dpis.events`: a run's values and its :class:`mcacct.pld.Event` list for the PLD accountant (both
  directions).
* :mod:`mcacct.dpis.runfile`: the JSON run file of ``mcacct dpis epsilon``.
* :mod:`mcacct.dpis.rdp`: the paper's RDP accountant (eq. 13, eq. 6, Lemma 2.5) for comparison.
* :mod:`mcacct.dpis.plan`: the events of a noise plan and its epsilon by either accountant.
* :mod:`mcacct.dpis.calibrate`: noise calibration as a pre-committed plan with a runtime rule that keeps every
  adaptively chosen :math:`\sigma_{G,e}` dominated (PLD or RDP).
* :mod:`mcacct.dpis.schedule`: the paper's adaptive schedule (Sec. 4.2) under RDP, sound as a Renyi filter at
  a fixed order.

The readings of the paper's inconsistent passages, and why the accounting is sound, are in docs/dpis.md.
"""

from mcacct.dpis.events import DPISEpoch, DPISRun, dpis_delta, dpis_epsilon, dpis_events
from mcacct.dpis.pairs import count_spec, iteration_spec, norm_sum_spec, norm_sum_star_spec
from mcacct.dpis.runfile import load_run, run_from_dict, run_to_dict
from mcacct.dpis.rdp import (DEFAULT_ORDERS, RDPResult, conversion_offset, dpis_rdp_epsilon, rdp_dpis_iteration,
                             rdp_gaussian, rdp_of_events, rdp_poisson_gaussian, rdp_to_epsilon)
from mcacct.dpis.plan import ACCOUNTANTS, aux_events, bisect_smallest, plan_epsilon, plan_events
from mcacct.dpis.calibrate import RULES, DPISPlan, RuntimeParameters, calibrate_plan, follows_plan
from mcacct.dpis.schedule import PaperSchedule, paper_schedule

__all__ = ["DPISEpoch", "DPISRun", "iteration_spec", "count_spec", "norm_sum_spec", "norm_sum_star_spec",
           "dpis_events", "dpis_epsilon", "dpis_delta", "load_run", "run_from_dict",
           "run_to_dict", "DEFAULT_ORDERS", "RDPResult", "rdp_gaussian", "rdp_poisson_gaussian",
           "rdp_dpis_iteration", "rdp_of_events", "conversion_offset", "rdp_to_epsilon", "dpis_rdp_epsilon",
           "ACCOUNTANTS", "aux_events", "plan_events", "plan_epsilon", "bisect_smallest", "RULES", "DPISPlan",
           "RuntimeParameters", "calibrate_plan", "follows_plan", "PaperSchedule", "paper_schedule"]
