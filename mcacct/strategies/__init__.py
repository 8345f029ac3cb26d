"""Strategies: the banded Toeplitz matrix ``C`` of DP-BandMF, its error on the prefix-sum workload and its
optimisation (optax L-BFGS), for use with the accountant (``c_col``) and in training."""

from mcacct.strategies.toeplitz import (OptimizedStrategy, inverse_times_ones, optimize_banded_toeplitz,
                                         per_query_error, strategy_error, strategy_objective)

__all__ = ["OptimizedStrategy", "inverse_times_ones", "optimize_banded_toeplitz", "per_query_error",
           "strategy_error", "strategy_objective"]
