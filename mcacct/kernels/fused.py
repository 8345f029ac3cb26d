r"""The fused b-min-sep kernel: draws, sliding sums and the block recursion in one pass over time blocks.

The unfused kernel (:func:`mcacct.kernels.output.standardised_draws_t`, then
:func:`mcacct.kernels.recursion.ladder_losses_t`) materialises the ``(n, B)`` draws, then the sliding sums,
then the terms, each a full pass over memory. Here one reverse loop over the ``ceil(n/b)`` blocks of ``b``
iterations (aligned at the end, as in the recursion) carries only per-sample state: the next block's noise
and mean (the sliding sums of a block read the block and the next one, ``len(c_col) <= b``) and the next
block's recursion values (:func:`mcacct.kernels.recursion.linear_block_step`), for every
``(sigma_j, direction)`` of a ladder at once (shared draws, Dong & Ganesh 2026, arXiv:2602.09338, §5).

*Same draws as the unfused kernel.* The noise is drawn by counter: the standard normal at row ``t`` and column
``s`` of a block of width ``B`` is :func:`mcacct.kernels.normal.normal_from_bits` of the 64-bit threefry-2x32
word at flat index ``t B + s`` under the noise key (:func:`counter_bits`, JAX's partitionable layout of
``jax.random.bits``), and the participation times come from the same key split and the same renewal draws;
so for a given key the fused and the unfused kernel see exactly the same ``y`` and differ only by float
rounding, and the unfused kernel's exact fallback serves as the fused kernel's fallback. Requires JAX's
threefry generator in the partitionable layout (:func:`fused_supported`).

*Accelerators.* :func:`fused_ladder_losses` runs the tile function under ``jax.experimental.pallas``
(``pallas_call`` over tiles of samples, each program looping over the time blocks with its state on chip);
the test suite runs it in Pallas interpret mode on CPU, where it must equal the XLA form of the same tile
function and the unfused kernel. Plain numbers and arrays in; no scheme is imported.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.normal import normal_from_bits
from mcacct.kernels.participation import NO_PARTICIPATION, participation_blocks_t, participation_cap
from mcacct.kernels.recursion import (linear_applicable, linear_block_finish, linear_block_init, linear_block_step,
                                      start_log_ratio)
from mcacct.kernels.sliding import block_mean, column_sq_norms, sliding_dot_t

__all__ = ["threefry2x32", "counter_bits", "fused_supported", "tile_constants",
           "fused_tile_losses",
           "fused_ladder_losses"]

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotl(x: jax.Array, r: int) -> jax.Array:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0: jax.Array, x1: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror & Shaw 2011, "Parallel random numbers: as easy as
    1, 2, 3", SC'11) on uint32 counters ``(x0, x1)`` under the key ``(k0, k1)``: the block function of JAX's
    default generator, written in plain uint32 operations so that it runs inside a Pallas kernel."""
    k0 = jnp.asarray(k0, jnp.uint32)
    k1 = jnp.asarray(k1, jnp.uint32)
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def counter_bits(key_data: jax.Array, flat_index: jax.Array) -> jax.Array:
    """The uint64 word of ``jax.random.bits(key, shape, uint64)`` at ``flat_index`` (threefry, partitionable
    layout): ``hi << 32 | lo`` with ``(hi, lo)`` the threefry block of the counter ``(index >> 32, index)``."""
    f = jnp.asarray(flat_index, jnp.uint64)
    hi, lo = threefry2x32(key_data[0], key_data[1], (f >> np.uint64(32)).astype(jnp.uint32),
                         (f & np.uint64(0xFFFFFFFF)).astype(jnp.uint32))
    return (hi.astype(jnp.uint64) << np.uint64(32)) | lo.astype(jnp.uint64)


def fused_supported() -> bool:
    """Whether the fused kernel reproduces ``jax.random.bits``: JAX's threefry generator, partitionable layout."""
    return (str(jax.config.jax_default_prng_impl) == "threefry2x32"
            and bool(jax.config.jax_threefry_partitionable))


def fused_tile_losses(noise_key: jax.Array, tau: jax.Array, sigmas: jax.Array, consts: jax.Array, col0, width: int,
                      iterations: int, min_sep: int, sampling_prob: float, warm_start: bool, c_col: tuple[float, ...],
                      dot_method: str = "auto") -> tuple[jax.Array, jax.Array]:
    r"""Losses of one tile of samples for every ``sigma_j`` and both directions, and ``ok`` per sample.

    ``noise_key``: uint32 key data ``(2,)`` of the noise key; ``tau``: :func:`block_participation` columns
    ``col0 .. col0 + T`` of a block of ``width`` samples; ``sigmas``: ``(J,)``. Returns ``(J, 2, T)`` losses
    (``[:, 0]`` ``ln P/Q`` of ``y = C x + sigma_j z``, ``[:, 1]`` ``ln Q/P`` of ``y = sigma_j z``, as
    :func:`mcacct.kernels.recursion.ladder_losses_t`) and ``(T,)`` ``ok`` (false: the linear recursion could
    not certify its arithmetic; recompute exactly). Needs ``p < 1`` and
    :func:`mcacct.kernels.recursion.linear_applicable`.
    """
    n, b = iterations, min_sep
    tile = tau.shape[1]
    nblk = -(-n // b)
    pad = nblk * b - n
    dtype = jnp.float64
    c, half_sq = consts[:len(c_col)], consts[len(c_col):]
    sig = jnp.asarray(sigmas, dtype)
    nj = sig.shape[0]
    inv_var = (1.0 / sig ** 2)[:, None, None]
    log_p = math.log(sampling_prob)
    log_q = math.log1p(-sampling_prob)
    cols = (jnp.asarray(col0, jnp.int64) + jnp.arange(tile, dtype=jnp.int64))[None, :]

    def draws(q):
        rows = q * b - pad + jnp.arange(b)[:, None]              # real 0-based rows of block q
        valid = (rows >= 0) & (rows < n)
        z = normal_from_bits(counter_bits(noise_key, jnp.clip(rows, 0, n - 1).astype(jnp.int64) * width + cols))
        prev = jax.lax.dynamic_index_in_dim(tau, jnp.maximum(q - 1, 0), 0, keepdims=False)
        prev = jnp.where(q > 0, prev, NO_PARTICIPATION)
        here = jax.lax.dynamic_index_in_dim(tau, q, 0, keepdims=False)
        m = block_mean(here[None, :], prev[None, :], rows, c)
        return jnp.where(valid, z, 0.0), jnp.where(valid, m, 0.0), valid

    def step(carry, q):
        z_next, m_next, rec = carry
        z, m, valid = draws(q)
        s_z = sliding_dot_t(jnp.concatenate([z, z_next], axis=0), c_col, dot_method)[:b]
        s_m = sliding_dot_t(jnp.concatenate([m, m_next], axis=0), c_col, dot_method)[:b]
        hs = jax.lax.dynamic_slice_in_dim(half_sq, q * b, b)[:, None]
        base = sig[:, None, None] * s_z[None] - hs[None]              # (J, b, T)
        ell = jnp.concatenate([(s_m[None] + base) * inv_var, base * inv_var], axis=0)  # remove, then add
        ell = jnp.where(valid[None], ell, 0.0)                        # dummy rows: ell = 0 (as in the recursion)
        ell = jnp.moveaxis(ell, 1, 0)                                 # (b, 2J, T)
        return z, m, linear_block_step(rec, ell, log_p, log_q)

    zeros = jnp.zeros((b, tile), dtype)
    carry = (zeros, zeros, linear_block_init(b, (2 * nj, tile), dtype))
    carry = jax.lax.fori_loop(0, nblk, lambda i, cr: step(cr, nblk - 1 - i), carry)
    first, ok = linear_block_finish(carry[2], pad)
    loss = start_log_ratio(first, sampling_prob, warm_start)      # (2J, T)
    out = jnp.stack([loss[:nj], -loss[nj:]], axis=1)
    return out, jnp.all(ok, axis=0)


def tile_constants(iterations: int, min_sep: int, c_col: tuple[float, ...]) -> np.ndarray:
    """``c_col`` followed by ``||c^{(t)}||^2 / 2`` on the ``nblk b`` padded rows (0 on the dummy rows)."""
    pad = -(-iterations // min_sep) * min_sep - iterations
    return np.concatenate([np.asarray(c_col, np.float64), np.zeros(pad),
                           0.5 * column_sq_norms(c_col, iterations)])


def _pallas_losses(noise_key, tau, sigmas, consts, width, tile, static):
    from jax.experimental import pallas as pl

    nblk, total = tau.shape
    nj = sigmas.shape[0]

    def kernel(key_ref, tau_ref, sig_ref, const_ref, out_ref, ok_ref):
        col0 = pl.program_id(0) * tile
        out, ok = fused_tile_losses(key_ref[...], tau_ref[...], sig_ref[...], const_ref[...], col0, width, *static)
        out_ref[...] = out
        ok_ref[...] = ok.astype(jnp.int32)[None, :]

    interpret = jax.default_backend() == "cpu"
    return pl.pallas_call(
        kernel, grid=(total // tile,),
        in_specs=[pl.BlockSpec((2,), lambda i: (0,)), pl.BlockSpec((nblk, tile), lambda i: (0, i)),
                  pl.BlockSpec((nj,), lambda i: (0,)), pl.BlockSpec(consts.shape, lambda i: (0,))],
        out_specs=[pl.BlockSpec((nj, 2, tile), lambda i: (0, 0, i)), pl.BlockSpec((1, tile), lambda i: (0, i))],
        out_shape=[jax.ShapeDtypeStruct((nj, 2, total), jnp.float64), jax.ShapeDtypeStruct((1, total), jnp.int32)],
        interpret=interpret)(noise_key, tau, sigmas, consts)


@partial(jax.jit, static_argnames=("iterations", "min_sep", "sampling_prob", "warm_start", "participation_rate",
                                   "c_col", "num_samples", "dot_method", "pallas", "tile"))
def fused_ladder_losses(key: jax.Array, sigmas: jax.Array, iterations: int, min_sep: int, sampling_prob: float,
                        warm_start: bool, participation_rate: float, c_col: tuple[float, ...], num_samples: int,
                        dot_method: str = "auto", pallas: bool = False, tile: int = 0) -> jax.Array:
    """``(J, 2, num_samples)`` losses of :func:`mcacct.kernels.recursion.ladder_losses_t` on the draws of
    :func:`mcacct.kernels.output.standardised_draws_t` for the same ``key``, fused.

    ``pallas``: run the tile function as a Pallas kernel over tiles of ``tile`` samples (interpret mode on
    CPU); else as one XLA loop over the whole block. Where the linear recursion cannot certify its arithmetic
    for some sample the whole block is recomputed by the exact scan recursion on the same draws, so the
    result is never silently wrong. Needs ``sampling_prob < 1`` and ``len(c_col) <= min_sep``.
    """
    from mcacct.kernels.output import standardised_draws_t
    from mcacct.kernels.recursion import ladder_losses_t

    n, b, p = iterations, min_sep, sampling_prob
    if not fused_supported() or jax.random.key_data(key).shape != (2,):
        raise ValueError("the fused kernel reproduces JAX's threefry2x32 generator in the partitionable layout; "
                         f"this run uses {jax.config.jax_default_prng_impl} (partitionable="
                         f"{jax.config.jax_threefry_partitionable})")
    if not (0.0 < p < 1.0) or not linear_applicable(b, math.log1p(-p), jnp.float64) or len(c_col) > b:
        raise ValueError("the fused kernel needs 0 < sampling_prob < 1, (b - 1)|ln(1 - p)| <= 300 and "
                         f"len(c_col) <= min_sep; got p={p}, b={b}, len(c_col)={len(c_col)}")
    kx, kz = jax.random.split(key)
    cap = participation_cap(n, b, participation_rate)
    tau = participation_blocks_t(kx, n, b, p, warm_start, num_samples, cap)
    noise_key = jax.random.key_data(kz)
    sigmas = jnp.asarray(sigmas, jnp.float64)
    static = (n, b, p, warm_start, tuple(c_col), dot_method)
    consts = jnp.asarray(tile_constants(n, b, c_col))
    if pallas:
        tile = tile or num_samples
        if num_samples % tile:
            raise ValueError(f"tile must divide num_samples; got tile={tile}, num_samples={num_samples}")
        out, ok = _pallas_losses(noise_key, tau, sigmas, consts, num_samples, tile, static)
        ok = ok[0].astype(bool)
    else:
        out, ok = fused_tile_losses(noise_key, tau, sigmas, consts, 0, num_samples, *static)

    def exact():
        m_t, z_t = standardised_draws_t(key, n, b, p, warm_start, participation_rate, c_col, num_samples)
        return ladder_losses_t(m_t, z_t, sigmas, b, p, warm_start, c_col, dot_method, "scan")

    return jax.lax.cond(jnp.all(ok), lambda: out, exact)
