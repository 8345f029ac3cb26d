"""Strategies: the banded Toeplitz matrix ``C`` of DP-BandMF (:mod:`~mcacct.strategies.banded`:
:class:`~mcacct.strategies.banded.BandedToeplitz`, which every scheme reads), its error on the prefix-sum workload and
its optimisation (optax L-BFGS, :mod:`~mcacct.strategies.toeplitz`), for use with the accountant (``c_col``) and in
training."""

from mcacct.strategies.toeplitz import (OptimizedStrategy, inverse_times_ones, optimize_banded_toeplitz,
                                         per_query_error, strategy_error, strategy_objective)

__all__ = ["OptimizedStrategy", "inverse_times_ones", "optimize_banded_toeplitz", "per_query_error",
           "strategy_error", "strategy_objective"]
