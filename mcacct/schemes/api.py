r"""One public sampling and loss API for every scheme (the same names and argument order whatever the scheme).

>>> key = jax.random.key(0)
>>> draws = mcacct.sample(key, scheme, strategy, sigma=1.0, num_samples=1000)             # y ~ P
>>> loss = mcacct.privacy_loss(scheme, draws, sigma=1.0, strategy=strategy)              # ln P(y)/Q(y)

``direction="add"`` draws from ``Q`` instead. :class:`~mcacct.schemes.base.Draws` carries the auxiliary data a
scheme's loss needs (truncation's counts ``r``), so ``privacy_loss`` takes the draws as they come.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from mcacct.core.precision import float64
from mcacct.schemes.base import AccountedScheme, Draws, as_strategy

__all__ = ["sample", "sample_y", "privacy_loss"]


@float64
def sample(key: jax.Array, scheme: AccountedScheme, strategy: Any, sigma: Any, num_samples: int,
           direction: str = "remove", dtype: Any = jnp.float64) -> Draws:
    """``num_samples`` outputs of the scheme's mechanism ``y = C x + sigma z`` (``direction="remove"``, ``P``)
    or of its null ``Q`` (``"add"``), shape ``(num_samples, n)``, with their auxiliary data.

    Parameters
    ----------
    key : a ``jax.random`` key; the same key gives the same draws.
    scheme : any :class:`~mcacct.schemes.base.AccountedScheme`.
    strategy : a :class:`~mcacct.strategies.banded.BandedToeplitz` or its ``c_col`` values.
    sigma : noise multiplier, ``> 0``.
    num_samples : ``>= 1``.
    direction : ``"remove"`` or ``"add"``.
    dtype : float64 (default) or float32 (randomness is drawn in float64 either way).
    """
    return scheme.sample(key, as_strategy(strategy), sigma, num_samples, direction, dtype)


@float64
def sample_y(key: jax.Array, scheme: AccountedScheme, strategy: Any, sigma: Any, num_samples: int,
             direction: str = "remove", dtype: Any = jnp.float64) -> jax.Array:
    """The outputs ``y`` of :func:`sample` (without auxiliary data: use :func:`sample` for truncation)."""
    return sample(key, scheme, strategy, sigma, num_samples, direction, dtype).y


@float64
def privacy_loss(scheme: AccountedScheme, y: Any, sigma: Any, strategy: Any = (1.0,), aux: Any = None,
                 direction: str = "remove", dot_method: str = "auto", recursion: str = "auto") -> jax.Array:
    r"""Privacy loss :math:`\ln P(y)/Q(y)` for each row of ``y`` (shape ``(..., n)``).

    ``y`` may be the :class:`~mcacct.schemes.base.Draws` of :func:`sample` (its ``aux`` is then used). A scheme
    that bounds the ratio (banded inverse) returns the bound that serves ``direction``: an upper bound for
    ``"remove"``, a lower bound for ``"add"``; exact schemes ignore ``direction``. ``dot_method`` and
    ``recursion`` pick the kernels (:mod:`mcacct.kernels.sliding`, :mod:`mcacct.kernels.recursion`).
    """
    if isinstance(y, Draws):
        if aux is not None:
            raise ValueError("give aux either inside the Draws or as aux=, not both")
        y, aux = y
    return scheme.log_ratio(y, sigma, as_strategy(strategy), aux, direction, dot_method, recursion)
