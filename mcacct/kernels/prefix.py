r"""Prefix sums along axis 0 by products with 0/1 triangular matrices, in two levels.

XLA:CPU lowers ``cumsum`` to a ``reduce_window`` whose cost grows with the axis length, and a single
``(k, k)`` triangular product costs ``k`` multiply-adds per element. Two levels of ``g = 16`` cost about
``2 g`` per element whatever ``k``: prefix sums inside groups of ``g`` (one ``(g, g)`` product) plus the prefix
sums of the group totals (one ``(k/g, k/g)`` product on ``1/g`` of the data).

Arithmetic. Every product is a term times 0 or 1 (exact), so every output is a sum of a subset of the input
terms, added in some order: for terms of one sign each output has relative error at most ``(k + 1) u``
(``u`` the unit round-off) and is never formed by a subtraction, which is what the linear recursion needs
(:func:`mcacct.kernels.recursion.linear_first_values`); for signed terms the absolute error is at most
``(k + 1) u`` times the sum of the magnitudes, within the ``prefix`` bound of
:func:`mcacct.engine.systematic.loss_error_bound`. Numbers and arrays in; no scheme is imported.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["prefix_sums0", "GROUP"]

GROUP = 16  # the group length of the two levels


def _tri(k: int, exclusive: bool, reverse: bool, dtype) -> jax.Array:
    """``T[j, t] = 1`` where output ``j`` sums input ``t``: ``t <= j`` (``t < j`` exclusive), mirrored for reverse."""
    j, t = jnp.arange(k)[:, None], jnp.arange(k)[None, :]   # iota, not a captured constant (Pallas)
    if reverse:
        keep = t > j if exclusive else t >= j
    else:
        keep = t < j if exclusive else t <= j
    return keep.astype(dtype)


def _apply(tri: jax.Array, x: jax.Array, axis: int = 0) -> jax.Array:
    """``tri @ x`` along ``axis`` of ``x`` (exact products: highest precision)."""
    out = jnp.tensordot(tri, x, axes=[[1], [axis]], precision=jax.lax.Precision.HIGHEST)
    return jnp.moveaxis(out, 0, axis)


def prefix_sums0(x: jax.Array, exclusive: bool = False, reverse: bool = False, axis: int = 0) -> jax.Array:
    r"""Prefix sums of ``x`` along ``axis`` by products with 0/1 triangular matrices.

    :math:`\sum_{t \le j} x_t` (``t < j`` if ``exclusive``; ``t \ge j`` / ``t > j`` if ``reverse``). Axes of at
    most ``2 * GROUP`` take one triangular product; longer ones two levels (groups of ``GROUP``, then the group
    totals), padded with zeros to a multiple of ``GROUP``.

    Parameters
    ----------
    x : jax.Array
        Input, any shape.
    exclusive : bool, optional
        Leave out the term ``t = j`` (default False).
    reverse : bool, optional
        Sum from the end of the axis (default False).
    axis : int, optional
        The axis summed along (default 0; negative counts from the end).

    Returns
    -------
    jax.Array
        Same shape and dtype as ``x``.
    """
    axis = axis % x.ndim
    k = x.shape[axis]
    dtype = x.dtype
    if k <= 2 * GROUP:
        return _apply(_tri(k, exclusive, reverse, dtype), x, axis)
    g = GROUP
    m = -(-k // g)
    pad = m * g - k
    if pad:
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, pad)
        x = jnp.pad(x, widths)
    grouped = x.reshape(x.shape[:axis] + (m, g) + x.shape[axis + 1:])
    # inside each group, then the group totals across groups (always exclusive there)
    inner = _apply(_tri(g, exclusive, reverse, dtype), grouped, axis + 1)
    totals = jnp.sum(grouped, axis=axis + 1)
    offsets = jnp.expand_dims(_apply(_tri(m, True, reverse, dtype), totals, axis), axis + 1)
    out = (inner + offsets).reshape(x.shape)
    return jax.lax.slice_in_dim(out, 0, k, axis=axis)
