"""Compositions of a Monte Carlo-analysed mechanism with PLD-analysed mechanisms, above the engine (its
statistics) and the PLD accountant (its discretised PLDs).

* :mod:`~mcacct.composition.empirical` — the empirical PLD of a Monte Carlo estimate (its negative part, its grid);
* :mod:`~mcacct.composition.mc_pld` — :func:`compose_mc_with_pld` (estimates with confidence bounds) and
  :func:`certified_composition` (from a certified :math:`(\\varepsilon, \\delta)` pair).
"""

from mcacct.pld.discrete import (DirectionPLD, DiscretePLD, compose, identity_pld, mechanism_pld,
                                 privacy_parameters_pld)
from mcacct.composition.empirical import empirical_pld, empirical_pld_from_stats
from mcacct.composition.mc_pld import (CompositionCertificate, CompositionEstimate, certified_composition,
                                      compose_mc_with_pld)

__all__ = ["CompositionEstimate", "CompositionCertificate", "compose_mc_with_pld", "certified_composition",
           "empirical_pld_from_stats", "empirical_pld", "DirectionPLD", "DiscretePLD", "mechanism_pld",
           "privacy_parameters_pld", "identity_pld", "compose"]
