r"""The hypergeometric draw of the screened counts' round ``tau`` (:mod:`mcacct.schemes.truncated.screen`): which
of the ``s`` heads of that round fall on blocked examples, ``Hypergeom(N, W, s)``, by inversion of exact integer
weights on a window around the mode, with its total-variation bound.

Everything here takes numbers and arrays; no scheme is imported.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from mcacct.kernels.alias import u64

__all__ = ["hypergeometric_tv", "hypergeometric_weights", "hypergeometric_draw"]

_U53 = 2.0 ** -53


def hypergeometric_tv(half: int, s_max: int) -> float:
    """Bound of :func:`hypergeometric_draw`'s total variation for draws of at most ``s_max`` (its docstring)."""
    k = 2 * half + 1
    return 4 * half * _U53 * 1.01 + 2.0 * k * (1 << (k - 1).bit_length()) * 2.0 ** -62 \
        + 2.0 * math.exp(-2.0 * (half - 1) ** 2 / max(1, s_max))


def hypergeometric_weights(total: int, marked: jax.Array, draws: jax.Array, half: int):
    """The integer cumulative weights :func:`hypergeometric_draw` inverts: ``(lowest, cum, x_min, x_max)`` with
    ``cum`` ``(2 half + 1,) + shape`` uint64 (value ``lowest + j`` has weight ``cum[j] - cum[j - 1]``) and the
    support ``[x_min, x_max]``."""
    f64 = jnp.float64
    w, s = jnp.asarray(marked).astype(jnp.int64), jnp.asarray(draws).astype(jnp.int64)
    x_min = jnp.maximum(0, s - (total - w))
    x_max = jnp.minimum(w, s)
    mode = jnp.clip((s + 1) * (w + 1) // (total + 2), x_min, x_max)
    d = jnp.arange(1, half + 1).reshape((half,) + (1,) * mode.ndim)

    def num(y):   # (W - y)(s - y)
        return ((w - y) * (s - y)).astype(f64)

    def den(y):   # (y + 1)(N - W - s + y + 1)
        return ((y + 1) * (total - w - s + y + 1)).astype(f64)

    y_up, y_down = mode + d - 1, mode - d
    up = jnp.cumprod(jnp.where(y_up + 1 <= x_max, num(y_up) / den(y_up), 0.0), axis=0)
    down = jnp.cumprod(jnp.where(y_down >= x_min, den(y_down) / num(y_down), 0.0), axis=0)
    k = 2 * half + 1
    scale = 2.0 ** (62 - (k - 1).bit_length())
    weights = jnp.concatenate([down[::-1], jnp.ones((1,) + mode.shape, f64), up]) * scale
    cum = jnp.cumsum(jnp.floor(weights).astype(jnp.int64), axis=0).astype(jnp.uint64)   # exact integers
    return mode - half, cum, x_min, x_max


def hypergeometric_draw(keys: jax.Array, total: int, marked: jax.Array, draws: jax.Array, half: int) -> jax.Array:
    r"""``Hypergeom(total, marked, draws)`` (successes among ``draws`` of ``total`` items of which ``marked`` are
    successes), one per key of ``keys`` (1-d), int32.

    Weights on the window ``mode ± half`` relative to the mode's, by the ratio
    :math:`\rho(y) = (W - y)(s - y) / ((y + 1)(N - W - s + y + 1))`: numerators and denominators are exact
    integers in float64 (``(N + 2)(s + 2) < 2^52``), each weight a product of at most ``half`` rounded ratios, so
    within relative ``2 half u`` (``u = 2^-53``, any order of the products). They are scaled by ``S = 2^(62 -
    ceil(log2 K))`` (``K = 2 half + 1`` cells) and rounded down to integers ``w_j`` (sum below ``2^62``), and the
    draw inverts their integer cumulative sums with a uniform integer below ``sum w`` (a 64-bit word taken modulo
    the sum, redrawn above the largest multiple of it: exact). The law drawn is ``w / sum w`` exactly; it is within
    total variation ``4 half u + 2 K / S`` of the exact law on the window, whose outside mass is at most
    ``2 exp(-2 (half - 1)^2 / s)`` (Hoeffding 1963, Thm. 4, draws without replacement; the mean is within 1 of the
    mode) (:func:`hypergeometric_tv`).

    Parameters
    ----------
    keys, total, marked, draws, half : jax.Array, int, jax.Array, jax.Array, int
        One key per draw, ``N``, ``W`` and ``s`` (per draw) and the window's half-width.

    Returns
    -------
    jax.Array
        int32, one draw per key, clipped to the support.
    """
    lowest, cum, x_min, x_max = hypergeometric_weights(total, marked, draws, half)
    tot = cum[-1]
    limit = (u64(2 ** 64 - 1) // tot) * tot

    def attempt(carry):
        a, target, bad = carry
        word = jax.vmap(lambda key: jax.random.bits(jax.random.fold_in(key, a), (), jnp.uint64))(keys)
        target = jnp.where(bad, word % tot, target)
        return a + 1, target, bad & (word >= limit)

    _, target, _ = jax.lax.while_loop(lambda c: jnp.any(c[2]), attempt,
                                      (jnp.int32(0), jnp.zeros_like(tot), jnp.ones(tot.shape, bool)))
    index = jnp.sum(cum <= target, axis=0)
    return jnp.clip(lowest + index, x_min, x_max).astype(jnp.int32)
