r"""The one generic loss kernel: privacy losses of a block of draws, for any scheme of the contract.

For a direction ``"remove"`` the outputs are drawn from ``P`` and the loss is :math:`\ln P(y)/Q(y)`; for
``"add"`` they are drawn from ``Q`` and the loss is :math:`\ln Q(y)/P(y)`. Randomness is always drawn in
float64 (float32 normals have truncated tails, which matter at small delta); a float32 kernel rounds the
float64 draws, so both precisions see the same ``y`` on the same key. Everything here reads only the scheme
contract (:class:`mcacct.schemes.base.AccountedScheme`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mcacct.core.validate import DIRECTIONS

__all__ = ["direction_losses", "ladder_losses"]


def direction_losses(scheme, key, strategy, sigma, num_samples: int, direction: str, dtype, dot_method: str = "auto",
                     recursion: str = "auto") -> jax.Array:
    """``num_samples`` privacy losses of ``direction`` from the draws of ``key``: the scheme's ``losses_t``
    (``log_ratio_t`` of the time-major draws of ``sample_t``, negated for ``"add"``, unless the scheme fuses them)."""
    return scheme.losses_t(key, strategy, sigma, num_samples, direction, dtype, dot_method, recursion)


def ladder_losses(scheme, key, strategy, sigmas, num_samples: int, dtype, dot_method: str = "auto",
                  recursion: str = "auto", add_bound: float | None = None, remove_skip=None) -> jax.Array:
    """``(J, 2, num_samples)`` losses for every noise multiplier of ``sigmas`` and both directions
    (``remove``, ``add``) on the draws of ``key``: the scheme's shared-work path when it has one
    (``shares_ladder_work``), else :func:`direction_losses` per candidate and direction on the same key (the
    same draws, computed per call). ``add_bound``: the skip of provably zero add contributions
    (:mod:`mcacct.kernels.shortcuts`), for schemes that give :meth:`add_loss_bound` only; ``remove_skip``: the remove
    direction's (:class:`~mcacct.kernels.shortcuts.RemoveSkip`), for schemes that :attr:`bounds_remove_losses`."""
    if remove_skip is not None and not scheme.bounds_remove_losses:
        raise ValueError(f"{type(scheme).__name__} has no remove-loss bound (remove_skip must be None)")
    if scheme.shares_ladder_work:
        return scheme.ladder_losses(key, strategy, sigmas, num_samples, dtype, dot_method, recursion, add_bound,
                                    remove_skip)
    if add_bound is not None:
        raise ValueError(f"{type(scheme).__name__} has no add-loss shortcut (add_bound must be None)")

    def one(sig):
        return jnp.stack([direction_losses(scheme, key, strategy, sig, num_samples, d, dtype, dot_method, recursion)
                          for d in DIRECTIONS])

    return jax.lax.map(one, sigmas)
