"""Empirical verification with rejection (EVR, Dong & Ganesh 2026, arXiv:2602.09338, App. A and Alg. 5).

:mod:`~mcacct.statistics.confidence` holds the confidence bounds (Chernoff–KL, Fact 4.2) and the target/base delta
conversion of Theorem A.1, :mod:`~mcacct.statistics.gaussian` the Gaussian mechanism's closed forms;
:mod:`~mcacct.evr.calibrate` plans a calibration (pilot, ladder) and runs it on the engine, and
:mod:`~mcacct.evr.verdicts` applies the top-down rule. The bounds are re-exported here, so ``from mcacct import evr; evr.overall_delta(...)`` reads as before.
"""

from mcacct.statistics.confidence import (base_delta_for_target, gaussian_delta, gaussian_sigma, kl_bernoulli,
                               kl_lower_confidence, kl_upper_confidence, min_samples, overall_delta, sample_budget,
                               tail_bound)

__all__ = ["kl_bernoulli", "tail_bound", "overall_delta", "base_delta_for_target", "min_samples", "sample_budget",
           "kl_upper_confidence", "kl_lower_confidence", "gaussian_delta", "gaussian_sigma"]
