r"""One public sampling and loss API for every scheme (the same names and argument order whatever the scheme).

>>> key = jax.random.key(0)
>>> draws = mcacct.sample(key, scheme, strategy, sigma=1.0, num_samples=1000)             # y ~ P
>>> loss = mcacct.privacy_loss(scheme, draws, strategy, sigma=1.0)                       # ln P(y)/Q(y)

``direction="add"`` draws from ``Q`` instead. :class:`~mcacct.schemes.base.Draws` carries the auxiliary data a
scheme's loss needs (truncation's counts ``r``), so ``privacy_loss`` takes the draws as they come.

One argument order everywhere, here and in the scheme contract (:class:`~mcacct.schemes.base.AccountedScheme`):
what is drawn from or evaluated (``key`` or ``y``), then the strategy ``C``, then the noise multiplier (``sigma``,
or a ladder's ``sigmas``), then sizes and options.
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
    key : jax.Array
        A ``jax.random`` key; the same key gives the same draws.
    scheme : AccountedScheme
        Any :class:`~mcacct.schemes.base.AccountedScheme`.
    strategy : BandedToeplitz or sequence of float
        A :class:`~mcacct.strategies.banded.BandedToeplitz` or its ``c_col`` values.
    sigma : float
        Noise multiplier, ``> 0``.
    num_samples : int
        Rows, ``>= 1``.
    direction : {"remove", "add"}, default "remove"
        ``P`` or ``Q``.
    dtype : dtype, default float64
        float64 or float32 for ``y`` (randomness is drawn in float64 either way).

    Returns
    -------
    Draws
        ``y`` of shape ``(num_samples, n)`` and ``aux`` (the scheme's auxiliary data, or ``None``).

    Raises
    ------
    ValueError
        Naming the parameter: an inadmissible ``strategy`` (or invalid ``c_col`` values), ``sigma`` not a finite
        number ``> 0``, ``num_samples`` not an integer ``>= 1``, ``dtype`` or ``direction`` not one of its choices.
    """
    return scheme.sample(key, as_strategy(strategy), sigma, num_samples, direction, dtype)


@float64
def sample_y(key: jax.Array, scheme: AccountedScheme, strategy: Any, sigma: Any, num_samples: int,
             direction: str = "remove", dtype: Any = jnp.float64) -> jax.Array:
    """The outputs ``y`` of :func:`sample` (without auxiliary data: use :func:`sample` for truncation).

    Parameters
    ----------
    key, scheme, strategy, sigma, num_samples, direction, dtype
        As :func:`sample`.

    Returns
    -------
    jax.Array
        Shape ``(num_samples, n)``, of ``dtype``.

    Raises
    ------
    ValueError
        As :func:`sample`.
    """
    return sample(key, scheme, strategy, sigma, num_samples, direction, dtype).y


@float64
def privacy_loss(scheme: AccountedScheme, y: Any, strategy: Any, sigma: Any, aux: Any = None,
                 direction: str = "remove", dot_method: str = "auto", recursion: str = "auto") -> jax.Array:
    r"""Privacy loss :math:`\ln P(y)/Q(y)` for each row of ``y``.

    Parameters
    ----------
    scheme : AccountedScheme
        Any :class:`~mcacct.schemes.base.AccountedScheme`.
    y : array_like or Draws
        Array of shape ``(..., n)``, or the :class:`~mcacct.schemes.base.Draws` of :func:`sample` (its ``aux`` is
        then used).
    strategy : BandedToeplitz or sequence of float
        A :class:`~mcacct.strategies.banded.BandedToeplitz` or its ``c_col`` values (``(1.0,)``: DP-SGD).
    sigma : float
        Noise multiplier, ``> 0``.
    aux : array_like, optional
        The scheme's auxiliary data of the draws (truncation's counts ``r``), or ``None``.
    direction : {"remove", "add"}, default "remove"
        A scheme that bounds the ratio (banded inverse) returns the bound that serves ``direction``: an upper
        bound for ``"remove"``, a lower bound for ``"add"``; exact schemes ignore it.
    dot_method, recursion : str, default "auto"
        The kernels (:mod:`mcacct.kernels.sliding`, :mod:`mcacct.kernels.recursion`).

    Returns
    -------
    jax.Array
        The losses, shape ``(...)`` (float64 for float64 ``y``).

    Raises
    ------
    ValueError
        Naming the parameter: ``y`` of the wrong length, ``sigma`` out of range, an inadmissible strategy,
        ``aux`` given twice or missing where the scheme needs it.
    """
    if isinstance(y, Draws):
        if aux is not None:
            raise ValueError("give aux either inside the Draws or as aux=, not both")
        y, aux = y
    return scheme.log_ratio(y, as_strategy(strategy), sigma, aux, direction, dot_method, recursion)
