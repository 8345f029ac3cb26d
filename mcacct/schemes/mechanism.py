r"""A scheme's mechanism, apart from its data: pure functions bound to a strategy and kernel options.

A scheme is a frozen dataclass of parameters (data). What the engine runs is its **mechanism**, given once by
:meth:`~mcacct.schemes.base.AccountedScheme.mechanism` for a strategy ``C`` and the kernel's
:class:`KernelOptions`: a :class:`Mechanism`, a record of pure, traceable functions over time-major arrays
(``(n, num_samples)``), each with one argument order -- what is drawn from or evaluated (``key`` or the draws),
then the noise multiplier (``sigma``, or a ladder's ``sigmas``), then sizes and the direction.

For the adjacent pair ``(P, Q)`` of the scheme at noise multiplier :math:`\sigma`, with ``y ~ P`` for
``direction="remove"`` and ``y ~ Q`` for ``"add"``:

* ``sample(key, sigma, num_samples, direction) -> Draws``: time-major outputs and their auxiliary data;
* ``log_ratio(draws, sigma, direction)``: :math:`\ln P(y)/Q(y)` per sample (a scheme that bounds it gives the
  bound that serves ``direction``);
* ``losses(key, sigma, num_samples, direction)``: the engine's losses of one block, :math:`\ln P/Q` of the draws
  of ``sample`` for ``"remove"`` and :math:`\ln Q/P` for ``"add"`` (a scheme may fuse the two calls; the values
  are theirs up to float rounding within the loss-error bound);
* ``ladder(key, sigmas, num_samples, add_bound, remove_skip)`` (optional): ``(J, 2, num_samples)`` losses for
  every candidate and both directions (``remove``, ``add``) on one set of draws (those of ``sample`` for the same
  key), sharing the work between candidates (draws, participation, sliding sums); ``None``: the engine runs
  ``losses`` per candidate and direction on the same key (the same draws). With ``add_bound`` (given only where
  ``add_loss_bound`` is not ``None`` and the run's epsilons make every add contribution provably 0) the add losses
  are that bound instead of their recursions; with ``remove_skip`` (a
  :class:`~mcacct.kernels.shortcuts.RemoveSkip`, given only where ``bounds_remove_losses``) a remove loss whose
  cheap certified bound is at most its candidate's threshold is that bound
  (:func:`mcacct.kernels.recursion.ladder_losses_from_sums_t`). Either way the sums at the run's epsilons are
  those of the full computation bit for bit;
* ``add_loss_bound`` (optional): an upper bound ``B`` of every add loss :math:`\ln Q/P` that ``ladder`` computes
  by the untruncated recursion (:func:`mcacct.kernels.shortcuts.add_loss_bound`), or ``None``: no such shortcut;
* ``bounds_remove_losses``: whether ``ladder`` takes a ``remove_skip`` (:mod:`mcacct.kernels.bound`);
* ``fused_args`` (optional): keyword arguments of :func:`mcacct.kernels.fused.fused_ladder_losses` whose losses
  are ``ladder``'s on the same draws up to float rounding;
* ``block_floor``: the smallest engine block (samples) the scheme's draws vectorise over;
* ``prepare`` (optional): ``(key, num_samples) -> pytree``, the part of a block's draws the engine may draw ahead
  for many blocks in one batch (e.g. a sequential chain that vectorises across blocks), which
  ``ladder(..., prepared=...)`` then reads instead of drawing it: the same losses.

The shape follows the pure-function records of the JAX ecosystem: the scheme's data stays hashable and
static, and everything traced is a function of arrays.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax.numpy as jnp

__all__ = ["KernelOptions", "Mechanism"]


class KernelOptions(NamedTuple):
    """How a mechanism computes its losses (not what it computes: every choice gives the same losses up to float
    rounding within the loss-error bound).

    Attributes
    ----------
    dtype : numpy dtype
        The loss kernel's precision, ``float64`` (default) or ``float32``; draws are float64 either way.
    dot_method : str
        The sliding-sum method (:mod:`mcacct.kernels.sliding`), ``"auto"`` by default.
    recursion : str
        The privacy-loss recursion (:mod:`mcacct.kernels.recursion`), ``"auto"`` by default.
    """

    dtype: Any = jnp.dtype(jnp.float64)
    dot_method: str = "auto"
    recursion: str = "auto"


class Mechanism(NamedTuple):
    r"""A scheme's mechanism bound to a strategy and :class:`KernelOptions` (see the module docstring for each
    member's meaning).

    Attributes
    ----------
    sample : callable
        ``(key, sigma, num_samples, direction) -> Draws``, time-major.
    log_ratio : callable
        ``(draws, sigma, direction) -> (num_samples,)`` array, :math:`\ln P/Q` of time-major draws.
    losses : callable
        ``(key, sigma, num_samples, direction) -> (num_samples,)`` array: the engine's signed losses of one block.
    ladder : callable or None
        ``(key, sigmas, num_samples, add_bound, remove_skip, prepared) -> (J, 2, num_samples)`` array, or ``None``.
    add_loss_bound : float or None
        The proven bound of the add losses ``ladder`` computes by the untruncated recursion, or ``None``.
    bounds_remove_losses : bool
        Whether ``ladder`` takes a ``remove_skip``.
    fused_args : dict or None
        Keyword arguments of the fused kernel, or ``None``.
    block_floor : int
        The smallest number of samples per engine block.
    prepare : callable or None
        ``(key, num_samples) -> pytree`` of draws made ahead, or ``None``.
    """

    sample: Callable[..., Any]
    log_ratio: Callable[..., Any]
    losses: Callable[..., Any]
    ladder: Callable[..., Any] | None = None
    add_loss_bound: float | None = None
    bounds_remove_losses: bool = False
    fused_args: dict | None = None
    block_floor: int = 16
    prepare: Callable[..., Any] | None = None
