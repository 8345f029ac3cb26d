r"""The one generic loss kernel: privacy losses of a block of draws, for any scheme's mechanism.

For a direction ``"remove"`` the outputs are drawn from ``P`` and the loss is :math:`\ln P(y)/Q(y)`; for
``"add"`` they are drawn from ``Q`` and the loss is :math:`\ln Q(y)/P(y)`. Randomness is always drawn in
float64 (float32 normals have truncated tails, which matter at small delta); a float32 kernel rounds the
float64 draws, so both precisions see the same ``y`` on the same key. Everything here reads only the scheme's
:class:`~mcacct.schemes.mechanism.Mechanism` (``AccountedScheme.mechanism``, bound to the problem's strategy and
kernel options).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mcacct.core.validate import DIRECTIONS
from mcacct.schemes.mechanism import Mechanism

__all__ = ["direction_losses", "ladder_losses"]


def direction_losses(mechanism: Mechanism, key, sigma, num_samples: int, direction: str) -> jax.Array:
    r"""``num_samples`` privacy losses of ``direction`` from the draws of ``key``.

    Parameters
    ----------
    mechanism : Mechanism
        The scheme's mechanism, bound to a strategy and kernel options.
    key : jax.Array
        The block's key.
    sigma : float or scalar array
        The noise multiplier.
    num_samples : int
        Samples of the block.
    direction : {"remove", "add"}
        ``"remove"``: :math:`\ln P/Q` for ``y ~ P``; ``"add"``: :math:`\ln Q/P` for ``y ~ Q``.

    Returns
    -------
    jax.Array
        ``(num_samples,)`` losses: ``mechanism.losses`` (the log-ratio of the mechanism's time-major draws,
        negated for ``"add"``, unless the scheme fuses the two).
    """
    return mechanism.losses(key, sigma, num_samples, direction)


def ladder_losses(mechanism: Mechanism, key, sigmas, num_samples: int, add_bound: float | None = None,
                  remove_skip=None, prepared=None) -> jax.Array:
    """Losses of every noise multiplier of a ladder and both directions on the draws of ``key``.

    Parameters
    ----------
    mechanism : Mechanism
        The scheme's mechanism, bound to a strategy and kernel options.
    key : jax.Array
        The block's key: every candidate and direction uses the same draws.
    sigmas : array
        ``(J,)`` noise multipliers.
    num_samples : int
        Samples of the block.
    add_bound : float or None
        The skip of provably zero add contributions (:mod:`mcacct.kernels.shortcuts`); only for a mechanism that
        gives ``add_loss_bound`` and a ``ladder``.
    remove_skip : RemoveSkip or None
        The remove direction's skip (:class:`~mcacct.kernels.shortcuts.RemoveSkip`); only for a mechanism that
        ``bounds_remove_losses``.
    prepared : pytree or None
        The block's draws made ahead by ``mechanism.prepare`` (only for a mechanism with one and a ``ladder``).

    Returns
    -------
    jax.Array
        ``(J, 2, num_samples)`` losses (directions ``remove``, ``add``): the mechanism's shared-work ``ladder``
        where it has one, else :func:`direction_losses` per candidate and direction on the same key (the same
        draws, computed per call).

    Raises
    ------
    ValueError
        A skip given to a mechanism that does not support it.
    """
    if remove_skip is not None and not mechanism.bounds_remove_losses:
        raise ValueError("this scheme's mechanism has no remove-loss bound (remove_skip must be None)")
    if prepared is not None and (mechanism.prepare is None or mechanism.ladder is None):
        raise ValueError("this scheme's mechanism prepares no draws ahead (prepared must be None)")
    if mechanism.ladder is not None:
        return mechanism.ladder(key, sigmas, num_samples, add_bound, remove_skip,
                                **({} if prepared is None else {"prepared": prepared}))
    if add_bound is not None:
        raise ValueError("this scheme's mechanism has no add-loss shortcut (add_bound must be None)")

    def one(sig):
        return jnp.stack([direction_losses(mechanism, key, sig, num_samples, d) for d in DIRECTIONS])

    return jax.lax.map(one, sigmas)
