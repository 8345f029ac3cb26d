r"""DP-BandMF noise as an optax gradient transformation.

DP-BandMF (Dong & Ganesh 2026, arXiv:2602.09338, §2) privatises the sequence of summed clipped gradients
``g_1, g_2, ...`` as ``A C^{-1}(C g + \sigma \Delta z)``: the optimiser receives ``g_t + w_t`` with the
correlated noise :math:`w = \sigma \Delta\, C^{-1} z`, ``z`` i.i.d. standard normal per step and coordinate,
``\Delta`` the clipping norm and ``C`` lower-triangular banded Toeplitz with first column ``c`` (``k`` bands).
``C w = \sigma \Delta z`` gives the streaming form

.. math::  w_t = \Big(\sigma \Delta z_t - \sum_{j=1}^{k-1} c_j w_{t-j}\Big) / c_0,

so the state is the last ``k - 1`` noise vectors (per parameter leaf), a step counter and a PRNG key: the
covariance of ``(w_1, ..., w_T)`` per coordinate is :math:`\sigma^2 \Delta^2 C^{-1} C^{-\top}`.

Chain it after per-example clipping and summation over a batch drawn by the b-min-sep sampler
(:mod:`mcacct.training.batching`) whose ``min_sep`` is at least ``k``, with ``sigma`` from
``mcacct.calibrate`` for that scheme and ``c``; e.g. ``optax.chain(bandmf_noise(c, sigma, clip, key),
optax.scale(1 / expected_batch_size), optax.sgd(lr))``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.validate import check_real, parse_floats
from mcacct.core.precision import float64

__all__ = ["BandMFNoiseState", "bandmf_noise"]


class BandMFNoiseState(NamedTuple):
    """``key``: the PRNG key of the next step; ``history``: per leaf, the last ``k - 1`` noise vectors
    (``history[j]`` is ``w_{t-1-j}``), shape ``(k - 1, *leaf.shape)``; ``count``: steps taken."""
    key: jax.Array
    history: Any
    count: jax.Array


@float64
def bandmf_noise(c_col, noise_multiplier: float, clip_norm: float, key: jax.Array):
    r"""An ``optax.GradientTransformation`` adding the BandMF noise :math:`w = \sigma \Delta C^{-1} z` to the
    updates (the summed clipped gradients of one batch), in streaming form.

    Parameters
    ----------
    c_col : sequence of float, numpy.ndarray, str or float
        The ``k`` non-zeros of ``C``'s first column (finite, ``c_0 > 0``), e.g. from
        :func:`mcacct.strategies.optimize_banded_toeplitz` (``||c|| = 1``: then ``sigma`` is the accountant's
        noise multiplier for sensitivity ``clip_norm``).
    noise_multiplier : float
        ``sigma >= 0``.
    clip_norm : float
        ``Delta > 0``, the per-example clipping norm.
    key : jax.Array
        A ``jax.random`` key; step ``t`` draws from ``fold_in(key, t)`` (a pure function of the key and step).

    Returns
    -------
    optax.GradientTransformation
        ``init(params)`` gives a :class:`BandMFNoiseState` with zero history; ``update(updates, state)`` returns
        ``updates + w_t`` (each leaf in its own dtype, the noise drawn in float64) and the next state.

    Raises
    ------
    ValueError
        If ``c_col`` is empty, not a list of numbers, has a non-finite entry or ``c_col[0] <= 0``; if
        ``noise_multiplier`` is not a finite number ``>= 0``; if ``clip_norm`` is not a finite number ``> 0``.
    """
    import optax

    c = parse_floats("c_col", c_col)
    if not c or not all(np.isfinite(c)) or c[0] <= 0:
        raise ValueError(f"c_col must be finite with c_col[0] > 0; got {c_col!r}")
    sigma = check_real("noise_multiplier", noise_multiplier, low=0.0)
    delta = check_real("clip_norm", clip_norm, low=0.0, low_open=True)
    k = len(c)
    coeffs = jnp.asarray(c[1:], jnp.float64)
    scale = sigma * delta

    def init_fn(params):
        history = jax.tree_util.tree_map(lambda p: jnp.zeros((k - 1,) + jnp.shape(p), jnp.result_type(p)), params)
        return BandMFNoiseState(key=key, history=history, count=jnp.zeros((), jnp.int32))

    def update_fn(updates, state, params=None):
        del params
        leaves, treedef = jax.tree_util.tree_flatten(updates)
        hist = treedef.flatten_up_to(state.history)
        step_key = jax.random.fold_in(state.key, state.count)
        keys = jax.random.split(step_key, len(leaves))
        new_updates, new_hist = [], []
        for u, h, kk in zip(leaves, hist, keys):
            z = jax.random.normal(kk, jnp.shape(u), jnp.float64)
            past = jnp.tensordot(coeffs, h.astype(jnp.float64), axes=1) if k > 1 else 0.0
            w = (scale * z - past) / c[0]
            new_updates.append((u + w).astype(jnp.result_type(u)))
            new_hist.append(jnp.concatenate([w[None].astype(h.dtype), h[:-1]], axis=0) if k > 1 else h)
        return (jax.tree_util.tree_unflatten(treedef, new_updates),
                BandMFNoiseState(state.key, jax.tree_util.tree_unflatten(treedef, new_hist), state.count + 1))

    return optax.GradientTransformation(float64(init_fn), float64(update_fn))  # noise drawn in float64
