"""Individual (per-example) privacy accounting (Koskela, Tobaben & Honkela, arXiv:2209.15596).

* :mod:`mcacct.individual.gdp`: closed forms of mu-Gaussian DP (Dong, Roth & Su 2022, arXiv:1905.02383), the
  per-example mu of full-batch DP-GD, and the individual GDP filter (Alg. 1 of the paper) as jit-compatible pure
  functions with a pytree state.
"""

from mcacct.individual.gdp import (GDPFilterState, gdp_delta, gdp_epsilon, gdp_filter_epsilon, gdp_filter_init,
                                   gdp_filter_step, individual_mu)

__all__ = ["GDPFilterState", "gdp_delta", "gdp_epsilon", "gdp_filter_epsilon", "gdp_filter_init",
           "gdp_filter_step", "individual_mu"]
