"""What every scheme shares: the :class:`AccountedScheme` protocol the engine types ``Problem.scheme`` with,
the min-sep mixin and :func:`jit_method` (jit a method of a frozen scheme with ``self`` static)."""

from __future__ import annotations

import functools
from typing import Any, Protocol, runtime_checkable

import jax

from mcacct.schemes.strategy import check_strategy_type
from mcacct.precision import float64
__all__ = ["AccountedScheme", "MinSepAccounting", "jit_method"]


@runtime_checkable
class AccountedScheme(Protocol):
    """What the Monte Carlo engine needs from a sampling scheme (implemented by frozen dataclasses).

    ``isinstance(scheme, AccountedScheme)`` checks that the four members exist (it is runtime-checkable);
    the meaning below is the contract. :class:`BMinSep` is the reference implementation; the registry of
    every scheme the command line, the job files and ``mcacct compare`` know is :mod:`mcacct.registry`.
    """

    @property
    def iterations(self) -> int:
        """The horizon ``n`` (``>= 1``)."""
        ...

    def check_strategy(self, strategy: Any) -> None:
        """Raise ``ValueError`` (naming the parameter) if ``strategy`` (``C``) is not admissible for the scheme."""
        ...

    def loss_kernel(self, key: Any, sigma: Any, strategy: Any, num_samples: int, positive: bool, dtype: Any,
                    dot_method: str = "auto", recursion: str = "auto") -> Any:
        """A pure, jit-traceable function returning ``num_samples`` privacy losses: ``ln P/Q`` of ``y ~ P``
        when ``positive`` and ``ln Q/P`` of ``y ~ Q`` otherwise (randomness drawn in float64)."""
        ...

    def sensitivity_bound(self, strategy: Any) -> float:
        """An upper bound on ``||C x||`` over every participation pattern the scheme can produce (it certifies
        the Monte-Carlo-free top of the EVR ladder)."""
        ...


@float64
class MinSepAccounting:
    """The :class:`AccountedScheme` pieces shared by every scheme in which an example participates at most once
    in any ``min_sep`` consecutive iterations (fields ``min_sep`` and ``iterations``)."""

    @property
    def max_participations(self) -> int:
        """``ceil(n / b)``: the most participations that fit into ``n`` iterations."""
        return -(-self.iterations // self.min_sep)

    def check_strategy(self, strategy) -> None:
        """``strategy`` must be a :class:`~mcacct.schemes.strategy.BandedToeplitz` with ``len(c_col) <= min_sep``."""
        check_strategy_type("strategy", strategy)
        strategy.check_min_sep(self.min_sep)

    def sensitivity_bound(self, strategy) -> float:
        """``sqrt(ceil(n/b)) ||c||``: at most ``ceil(n/b)`` participations, touching disjoint rows."""
        self.check_strategy(strategy)
        return strategy.worst_case_sensitivity(self.iterations, self.min_sep)


def jit_method(*static: str):
    """``jax.jit`` a method of a hashable (frozen) scheme: ``self`` and the named arguments are static."""
    def deco(fn):
        jitted = jax.jit(fn, static_argnames=("self",) + static)

        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            return jitted(self, *args, **kwargs)
        return wrapper
    return deco
