"""The draws of a truncated b-min-sep engine block, a sub-block at a time (:mod:`mcacct.schemes.truncated.scheme`).

A block of ``B`` samples is cut into sub-blocks of ``sub`` samples (``cache_lanes``: 64 at n = 7200), and sub-block
``j`` draws its participation and standard noise from ``fold_in(key, j)`` split in two. A sample's noise is redrawn
column by column from its sub-block's key where it is needed again (the samples with a truncated round), the same
bits as the whole draw (:func:`~mcacct.kernels.normal.standard_normal_columns`), and the remove bound of the fused
kernel draws it by counter from the same key (:mod:`mcacct.kernels.fused_bound`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mcacct.kernels.normal import standard_normal, standard_normal_columns, standard_normal_lanes
from mcacct.kernels.participation import participation_blocks_t, participation_cap

__all__ = ["sub_block_keys", "sub_block_participation", "sub_block_draws", "noise_rows"]


def sub_block_keys(key: jax.Array, j) -> jax.Array:
    """Sub-block ``j``'s keys ``(participation, noise)``."""
    return jax.random.split(jax.random.fold_in(key, j))


def sub_block_participation(key: jax.Array, j, scheme, sub: int) -> tuple[jax.Array, jax.Array]:
    """``(tau, k_z)``: sub-block ``j``'s participation per block of ``b`` rounds (int32 ``(ceil(n/b), sub)``) of the
    b-min-sep ``scheme`` (its ``iterations``, ``min_sep``, ``sampling_prob``, ``warm_start``, ``base``), and its
    noise key."""
    k_x, k_z = sub_block_keys(key, j)
    n = scheme.iterations
    cap = participation_cap(n, scheme.min_sep, scheme.base.participation_rate)
    return participation_blocks_t(k_x, n, scheme.min_sep, scheme.sampling_prob, scheme.warm_start, sub, cap), k_z


def sub_block_draws(key: jax.Array, j, scheme, sub: int, lanes: bool = False) -> tuple[jax.Array, jax.Array]:
    """Sub-block ``j``'s participation ``tau`` and standard noise (float64, time-major ``(n, sub)``; ``lanes``:
    lane-major ``(sub, n)``, the same bits)."""
    tau, k_z = sub_block_participation(key, j, scheme, sub)
    return tau, (standard_normal_lanes if lanes else standard_normal)(k_z, (scheme.iterations, sub), jnp.float64)


def noise_rows(key: jax.Array, z_all, idx: jax.Array, iterations: int, num_samples: int, sub: int) -> jax.Array:
    """The standard noise of the samples ``idx`` (row-major ``(len(idx), n)``): redrawn column by column from
    their sub-blocks' keys (:func:`mcacct.kernels.normal.standard_normal_columns`, the same bits), or taken from
    ``z_all`` (time-major) when the draws were kept (a PRNG without partitionable counters)."""
    idx = jnp.clip(idx, 0, num_samples - 1)
    if z_all is not None:
        return jnp.take(z_all, idx, axis=1).T

    def column(i):
        k_z = sub_block_keys(key, i // sub)[1]
        return standard_normal_columns(k_z, (iterations, sub), (i % sub)[None], jnp.float64)[:, 0]

    return jax.vmap(column)(idx)
