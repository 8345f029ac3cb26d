r"""The fused b-min-sep kernel: draws, sliding sums and the block recursion in one pass over time blocks.

The unfused kernel (:func:`mcacct.kernels.output.standardised_draws_t`, then
:func:`mcacct.kernels.recursion.ladder_losses_t`) materialises the ``(n, B)`` draws, then the sliding sums,
then the terms, each a full pass over memory. Here one reverse loop over the ``ceil(n/b)`` blocks of ``b``
iterations (aligned at the end, as in the recursion) carries only per-sample state: the next block's noise
and mean (the sliding sums of a block read the block and the next one, ``len(c_col) <= b``) and the next
block's recursion values (:func:`mcacct.kernels.recursion.linear_block_step`), for every
``(sigma_j, direction)`` of a ladder at once (shared draws, Dong & Ganesh 2026, arXiv:2602.09338, §5).

*Same draws as the unfused kernel.* The noise is drawn by counter: the standard normal at row ``t`` and column
``s`` of a block of width ``B`` is :func:`mcacct.kernels.normal.normal_from_bits` of the 64-bit threefry-2x32 word
at flat index ``t B + s`` under the noise key (:func:`mcacct.kernels.threefry.counter_bits`, JAX's partitionable
layout of ``jax.random.bits``), and the participation times come from the same key split and the same renewal
draws; so for a given key the fused and the unfused kernel see exactly the same ``y`` and differ only by float
rounding, and the unfused kernel's exact fallback serves as the fused kernel's fallback. Requires JAX's threefry
generator in the partitionable layout (:func:`fused_supported`).

*Accelerators.* :func:`fused_ladder_losses` (``pallas=True``) runs the kernel under ``jax.experimental.pallas``
(``pallas_call`` over tiles of samples, each program looping over the time blocks with its state on chip):
compiled on a GPU, interpreted on CPU (``interpret=None``), or compiled wherever asked (``interpret=False``, e.g.
to export for ``cuda`` from a CPU host). The backend is Pallas Triton, not Mosaic GPU: the kernel is float64
(and uint32/uint64 for the counters), and in JAX 0.10.2 Mosaic GPU (the default Pallas GPU backend) moves
operands by TMA/warpgroup copies that reject float64 ("unsupported TMA dtype f64") and copies under 128 bytes
(the 8-byte key), so it cannot run this kernel at all, while Triton lowers float64 arithmetic (libdevice
``exp``, ``log``, ``sqrt``) and 64-bit integers (the counter stays uint64, as
:func:`mcacct.kernels.threefry.counter_bits` documents).
Triton's price is a small op set inside a kernel (no slices, gathers or pads of values; power-of-two sizes):
:func:`pow2_tile_kernel` is the tile function written in that subset, for power-of-two ``min_sep``, sample
tile and (padded) ladder; :func:`fused_gpu_supported` says which configurations it serves. Lowering to Triton
IR is checked without a GPU by exporting for ``cuda`` (``tests/kernels/test_lowering.py``); compiling that IR
to PTX and running it happen only on a device. On CPU the tests run the same kernel body in interpret mode,
where it must equal the XLA form (:func:`fused_tile_losses`) and the unfused kernel. Plain numbers and arrays
in; no scheme is imported.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.blocks import is_pow2, next_pow2
from mcacct.kernels.control import rare_cond
from mcacct.kernels.normal import normal_from_bits
from mcacct.kernels.participation import NO_PARTICIPATION, participation_blocks_t, participation_cap
from mcacct.kernels.recursion import (linear_applicable, linear_block_finish, linear_block_init, linear_block_step,
                                      range_floor, start_log_ratio)
from mcacct.kernels.mean_shift import block_mean
from mcacct.kernels.sliding import column_sq_norms, sliding_dot_t
from mcacct.kernels.threefry import counter_bits, counter_word, default_counters_supported
from mcacct.core.platform import target_platform

__all__ = ["fused_supported", "fused_refusal", "fused_gpu_supported", "tile_constants",
           "fused_tile_losses", "pow2_tile_kernel", "fused_pallas_losses", "fused_ladder_losses"]


def fused_supported() -> bool:
    """Whether the fused kernel reproduces ``jax.random.bits``: JAX's threefry generator, partitionable layout."""
    return default_counters_supported()


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


# --- the Pallas kernel (module docstring): inside a kernel Pallas Triton has no slice, dynamic_slice, pad,
# gather, rev or reverse cumsum of values, and wants power-of-two sizes; rows of the inputs are read from the refs
# and every move along the time axis is made of even/odd splits and joins (_shift0).


def _shift0(x: jax.Array, d: int) -> jax.Array:
    """``y[i] = x[i + d]`` along axis 0 (0 where ``i + d`` falls outside), ``x.shape[0]`` a power of two, static
    ``d``: exact data movement by even/odd splits and joins (reshape, transpose, 2-way stack/unstack along the
    last axis), the only row moves Pallas Triton lowers."""
    shape, n = x.shape, x.shape[0]
    x = x.reshape(n, -1)
    r = x.shape[1]
    if d == 0:
        return x.reshape(shape)
    if abs(d) >= n:
        return jnp.zeros(shape, x.dtype)
    if d % 2 == 0:                                               # rows move in pairs
        return _shift0(x.reshape(n // 2, 2 * r), d // 2).reshape(shape)
    even, odd = jnp.unstack(jnp.swapaxes(x.reshape(n // 2, 2, r), 1, 2), axis=-1)   # x[2i], x[2i+1]
    e = (d - 1) // 2                                             # y[2i] = x[2(i+e)+1], y[2i+1] = x[2(i+e+1)]
    y = jnp.stack([_shift0(odd, e), _shift0(even, e + 1)], axis=-1)                  # (n/2, r, 2)
    return jnp.swapaxes(y, 1, 2).reshape(shape)


def _rows_index(shape: tuple[int, ...]) -> jax.Array:
    return jax.lax.broadcasted_iota(jnp.int32, shape, 0)


def _row0(x: jax.Array) -> jax.Array:
    """Row 0 of ``x`` as a masked sum (the other terms are exact zeros): a slice does not lower for Triton."""
    return jnp.sum(jnp.where(_rows_index(x.shape) == 0, x, jnp.zeros((), x.dtype)), axis=0)


def _all0(cond: jax.Array) -> jax.Array:
    """``jnp.all(cond, axis=0)`` without ``reduce_and`` (which Pallas Triton does not lower)."""
    return jnp.min(cond.astype(jnp.int32), axis=0) > 0


def _suffix_sums0(x: jax.Array) -> jax.Array:
    """Inclusive suffix sums along axis 0 (power-of-two length) by ``log2`` doubling steps (Hillis & Steele):
    every partial sum is a sum of a subset of the terms, no subtraction, as :func:`linear_block_step` needs."""
    out, s = x, 1
    while s < x.shape[0]:
        out = out + _shift0(out, s)
        s *= 2
    return out


def _pow2_block_step(carry, blk: jax.Array, log_p, log_q):
    """:func:`mcacct.kernels.recursion.linear_block_step` in the operations Pallas Triton lowers (``b`` a
    power of two): the same terms, sums, scale and ``ok`` tests; the suffix sums by doubling steps."""
    g, s, _, _, ok = carry
    b = blk.shape[0]
    dtype = blk.dtype
    thr = range_floor(b, dtype)
    eps = float(jnp.finfo(dtype).eps)
    shape_t = (b,) + (1,) * (blk.ndim - 1)
    tt = _rows_index(shape_t).astype(jnp.float64)
    lq = jnp.asarray(log_q, jnp.float64)
    t_a = (tt * lq).astype(dtype)                                # t A
    inv_q_t = jnp.exp(-tt * lq).astype(dtype)                    # e^{-t A}
    b_a = (b * lq).astype(dtype)
    u = log_p + blk + t_a
    m = jnp.maximum(jnp.max(u, axis=0), b_a)
    terms = jnp.exp(u - m) * g
    tail = jnp.exp(b_a - m) * _row0(g)
    sums = _suffix_sums0(terms) + tail
    v = sums * inv_q_t
    mx = jnp.max(v, axis=0)
    v = v * (1.0 / mx)
    rows = _rows_index(sums.shape)
    nxt = jnp.where(rows == b - 1, tail, _shift0(sums, 1))      # S_{j+1}, S_b = tail
    consistent = _all0(jnp.abs(sums - nxt - terms) <= (2 * b + 4) * eps * sums)
    ok = ok & (jnp.min(sums, axis=0) >= thr) & (jnp.min(v, axis=0) >= thr) & consistent
    s_new = s + m.astype(jnp.float64) + jnp.log(mx).astype(jnp.float64)
    return v, s_new, g, s, ok


def _block_mean_ref(tau_in, tau_prev, rows, c_ref, k: int):
    """:func:`mcacct.kernels.mean_shift.block_mean` with ``c`` read from a ref by an index array (a gather load,
    which Triton lowers; a gather from a value it does not)."""
    lag_in = rows - tau_in
    lag = jnp.where((lag_in >= 0) & (tau_in != NO_PARTICIPATION), lag_in, rows - tau_prev)
    return jnp.where((lag >= 0) & (lag < k), c_ref[jnp.clip(lag, 0, k - 1)], 0.0)


def pow2_tile_kernel(key_ref, tau_ref, sig_ref, c_ref, hs_ref, out_ref, ok_ref, *, tile: int, width: int,
                     iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                     c_col: tuple[float, ...]):
    r""":func:`fused_tile_losses` as a Pallas kernel body that lowers for Triton.

    ``min_sep``, ``tile`` and the (padded) ladder length are powers of two. Refs: ``key_ref`` ``(2,)`` uint32 noise
    key data; ``tau_ref`` ``(nblk, tile)`` participation per block; ``sig_ref`` ``(J',)`` ladder (``J'`` a power of
    two); ``c_ref`` ``c_col`` (read by index); ``hs_ref`` ``>= nblk b`` half squared column norms (read ``b`` rows at
    a time). Writes ``out_ref`` ``(2, J', tile)`` (``[0]`` remove, ``[1]`` add, as ``fused_tile_losses``' ``[:, 0]``,
    ``[:, 1]``) and ``ok_ref`` ``(1, tile)`` int32. The draws are the same (same counters); the sums differ from the
    XLA form only in rounding (sliding sums in ``direct`` order, suffix sums by doubling steps).
    """
    from jax.experimental import pallas as pl

    n, b, k = iterations, min_sep, len(c_col)
    nblk = -(-n // b)
    pad = nblk * b - n
    dtype = jnp.float64
    log_p = math.log(sampling_prob)
    log_q = math.log1p(-sampling_prob)
    k0, k1 = key_ref[0], key_ref[1]
    sig = sig_ref[...]
    nj = sig.shape[0]
    sig4 = sig.reshape(1, 1, nj, 1)
    inv_var = (1.0 / sig ** 2).reshape(1, 1, nj, 1)
    rows0 = _rows_index((b, 1))
    cols = (pl.program_id(0) * tile + jax.lax.broadcasted_iota(jnp.int32, (1, tile), 1)).astype(jnp.int64)
    remove = jax.lax.broadcasted_iota(jnp.int32, (1, 2, 1, 1), 1) == 0   # direction 0: y = C x + sigma z

    def draws(q):
        """``(b, tile, 2)``: noise and mean of block ``q`` (0 on dummy rows), and the valid rows."""
        rows = q * b - pad + rows0
        valid = (rows >= 0) & (rows < n)
        flat = jnp.clip(rows, 0, n - 1).astype(jnp.int64) * width + cols
        z = normal_from_bits(counter_word(k0, k1, flat))
        here = tau_ref[q, :].reshape(1, tile)
        prev = jnp.where(q > 0, tau_ref[jnp.maximum(q - 1, 0), :].reshape(1, tile), NO_PARTICIPATION)
        m = _block_mean_ref(here, prev, rows, c_ref, k)
        return jnp.stack([jnp.where(valid, z, 0.0), jnp.where(valid, m, 0.0)], axis=-1), valid

    def step(i, carry):
        q = nblk - 1 - i
        y_next, rec = carry
        y, valid = draws(q)
        # sliding sums over the block and the next one: window d is y[i + d] (i + d < b), else y_next[i + d - b]
        low = _rows_index(y.shape)
        s = y * jnp.asarray(c_col[0], dtype)
        for d in range(1, k):
            if c_col[d] != 0.0:
                win = jnp.where(low < b - d, _shift0(y, d), _shift0(y_next, d - b))
                s = s + win * jnp.asarray(c_col[d], dtype)
        s_z, s_m = jnp.unstack(s, axis=-1)                       # (b, tile) each
        hs = hs_ref[pl.ds(q * b, b)].reshape(b, 1, 1, 1)
        base = sig4 * s_z.reshape(b, 1, 1, tile) - hs           # (b, 1, J', tile)
        ell = (jnp.where(remove, s_m.reshape(b, 1, 1, tile), 0.0) + base) * inv_var   # (b, 2, J', tile)
        ell = jnp.where(valid.reshape(b, 1, 1, 1), ell, 0.0)    # dummy rows: ell = 0 (as in the recursion)
        return y, _pow2_block_step(rec, ell, log_p, log_q)

    lead = (2, nj, tile)
    carry = (jnp.zeros((b, tile, 2), dtype), linear_block_init(b, lead, dtype))
    _, (v0, s0, v1, s1, ok) = jax.lax.fori_loop(0, nblk, step, carry)
    # log f_1..log f_b: rows pad.. of the first block, then rows ..pad of the second
    rows = _rows_index(v0.shape)
    first = jnp.where(rows < b - pad, _shift0(jnp.log(v0), pad) + s0, _shift0(jnp.log(v1), pad - b) + s1)
    loss = start_log_ratio(first, sampling_prob, True) if warm_start else _row0(first)   # (2, J', tile)
    out_ref[...] = jnp.where(_rows_index((2, 1, 1)) == 0, loss, -loss)
    ok_ref[...] = _all0(_all0(ok)).astype(jnp.int32).reshape(1, tile)


def fused_refusal(n: int, b: int, p: float, c_col: tuple[float, ...]) -> str:
    """Why the fused kernel cannot run this configuration ("" if it can)."""
    if not fused_supported():
        return ("the fused kernel reproduces JAX's threefry2x32 generator in the partitionable layout; this run "
                f"uses {jax.config.jax_default_prng_impl} (partitionable={jax.config.jax_threefry_partitionable})")
    if not (0.0 < p < 1.0) or not linear_applicable(b, math.log1p(-p), jnp.float64) or len(c_col) > b:
        return ("the fused kernel needs 0 < sampling_prob < 1, (b - 1)|ln(1 - p)| <= 300 and "
                f"len(c_col) <= min_sep; got p={p}, b={b}, len(c_col)={len(c_col)}")
    return ""


def fused_gpu_supported(iterations: int, min_sep: int, sampling_prob: float,
                        c_col: tuple[float, ...]) -> tuple[bool, str]:
    """Whether the compiled (Pallas Triton) fused kernel serves this configuration.

    ``(True, "")`` if so, else ``(False, why)`` (the engine then runs the unfused kernel): what the fused kernel
    needs, and ``min_sep`` a power of two (a block is a register tensor of ``min_sep`` rows). Its sample tile must
    be a power of two too."""
    why = fused_refusal(int(iterations), int(min_sep), float(sampling_prob), tuple(c_col))
    if not why and not is_pow2(int(min_sep)):
        why = (f"min_sep={min_sep} is not a power of two: the compiled GPU kernel (Pallas Triton) holds a block of "
               "min_sep rows in registers, and Triton handles power-of-two sizes only")
    return not why, why


def _xla_tile_kernel(key_ref, tau_ref, sig_ref, c_ref, hs_ref, out_ref, ok_ref, *, tile, width, iterations,
                     min_sep, sampling_prob, warm_start, c_col, dot_method):
    """:func:`fused_tile_losses` as the kernel body, refs as :func:`pow2_tile_kernel` (interpret mode only)."""
    from jax.experimental import pallas as pl

    consts = jnp.concatenate([c_ref[...][:len(c_col)], hs_ref[...]])
    out, ok = fused_tile_losses(key_ref[...], tau_ref[...], sig_ref[...], consts, pl.program_id(0) * tile, width,
                                iterations, min_sep, sampling_prob, warm_start, c_col, dot_method)
    out_ref[...] = jnp.swapaxes(out, 0, 1)
    ok_ref[...] = ok.astype(jnp.int32)[None, :]


def fused_pallas_losses(noise_key: jax.Array, tau: jax.Array, sigmas: jax.Array, width: int, tile: int,
                        iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                        c_col: tuple[float, ...], dot_method: str = "auto",
                        interpret: bool | None = None) -> tuple[jax.Array, jax.Array]:
    """Losses and ``ok`` of a whole block by ``pallas_call`` over tiles of ``tile`` samples.

    ``(J, 2, width)`` losses and ``(width,)`` ``ok`` (as :func:`fused_tile_losses` on the whole block):
    :func:`pow2_tile_kernel` compiled by Pallas Triton (``interpret=False``; ``None``: interpret on CPU, compile
    elsewhere) or interpreted; for ``min_sep`` not a power of two (interpret mode only) :func:`fused_tile_losses` is
    the body. The ladder is padded inside to a power of two (its last sigma repeated); the extra rows are dropped."""
    from jax.experimental import pallas as pl

    n, b, p, c_col = iterations, min_sep, sampling_prob, tuple(c_col)
    nblk, total = tau.shape
    nj = sigmas.shape[0]
    if total != width or width % tile:
        raise ValueError(f"tile must divide num_samples; got tile={tile}, num_samples={width} ({tau.shape})")
    if interpret is None:
        interpret = target_platform() == "cpu"
    params = {"interpret": True}
    if not interpret:
        from jax.experimental.pallas import triton as pltriton
        why = fused_gpu_supported(n, b, p, c_col)[1] or ("" if is_pow2(tile) else f"tile={tile} is not a power of 2")
        if why:
            raise ValueError(f"the compiled fused kernel does not serve this configuration: {why}")
        params = {"compiler_params": pltriton.CompilerParams()}   # num_warps=4, num_stages=3 (JAX's defaults)
    # the ladder padded to a power of two by repeating its last sigma (the extra rows are dropped below)
    nj_pad = next_pow2(nj)
    sig_pad = jnp.concatenate([sigmas, jnp.broadcast_to(sigmas[-1:], (nj_pad - nj,))])
    consts, k = tile_constants(n, b, c_col), len(c_col)      # c_col and the half squared norms, each part
    c_pad = jnp.asarray(np.pad(consts[:k], (0, next_pow2(k) - k)))   # zero-padded to a power of two
    hs_pad = jnp.asarray(np.pad(consts[k:], (0, next_pow2(consts.size - k) - consts.size + k)))
    body = pow2_tile_kernel if is_pow2(b) else partial(_xla_tile_kernel, dot_method=dot_method)
    kernel = partial(body, tile=tile, width=width, iterations=n, min_sep=b, sampling_prob=p,
                     warm_start=warm_start, c_col=c_col)
    out, ok = pl.pallas_call(
        kernel, grid=(total // tile,),
        in_specs=[pl.BlockSpec((2,), lambda i: (0,)), pl.BlockSpec((nblk, tile), lambda i: (0, i)),
                  pl.BlockSpec((nj_pad,), lambda i: (0,)), pl.BlockSpec(c_pad.shape, lambda i: (0,)),
                  pl.BlockSpec(hs_pad.shape, lambda i: (0,))],
        out_specs=[pl.BlockSpec((2, nj_pad, tile), lambda i: (0, 0, i)), pl.BlockSpec((1, tile), lambda i: (0, i))],
        out_shape=[jax.ShapeDtypeStruct((2, nj_pad, total), jnp.float64),
                   jax.ShapeDtypeStruct((1, total), jnp.int32)],
        **params)(noise_key, tau, sig_pad, c_pad, hs_pad)
    return jnp.swapaxes(out, 0, 1)[:nj], ok[0].astype(bool)


@partial(jax.jit, static_argnames=("iterations", "min_sep", "sampling_prob", "warm_start", "participation_rate",
                                   "c_col", "num_samples", "dot_method", "pallas", "tile", "interpret"))
def fused_ladder_losses(key: jax.Array, sigmas: jax.Array, iterations: int, min_sep: int, sampling_prob: float,
                        warm_start: bool, participation_rate: float, c_col: tuple[float, ...], num_samples: int,
                        dot_method: str = "auto", pallas: bool = False, tile: int = 0,
                        interpret: bool | None = None) -> jax.Array:
    """``(J, 2, num_samples)`` losses of a ladder on one block of draws, fused.

    The losses of :func:`mcacct.kernels.recursion.ladder_losses_t` on the draws of
    :func:`mcacct.kernels.output.standardised_draws_t` for the same ``key``. Where the linear recursion cannot
    certify its arithmetic for some sample the whole block is recomputed by the exact scan recursion on the same
    draws (rare branch): never silently wrong.

    Parameters
    ----------
    key : jax.Array
        A threefry-2x32 key (key data of shape ``(2,)``).
    sigmas : array_like
        ``(J,)`` noise multipliers.
    iterations, min_sep, sampling_prob, warm_start, participation_rate, c_col, num_samples
        Static: ``n``, ``b``, ``p`` (``< 1``), the start, participations per iteration, the strategy's column
        (``len(c_col) <= b``) and the block's samples.
    dot_method : str, optional
        How the sliding sums are computed (default ``"auto"``).
    pallas : bool, optional
        Run the tile function as a Pallas kernel over tiles of ``tile`` samples; else as one XLA loop over the
        whole block.
    tile : int, optional
        Samples per tile (``0``: the whole block); the compiled form needs a power of two.
    interpret : bool or None, optional
        Pallas interpret mode; ``None`` (default) interprets on CPU and compiles (Pallas Triton) elsewhere,
        ``False`` always compiles (e.g. to export for ``cuda`` from a CPU host). The compiled form needs
        :func:`fused_gpu_supported`.

    Returns
    -------
    jax.Array
        ``[:, 0]`` ``ln P/Q`` of the remove outputs, ``[:, 1]`` ``ln Q/P`` of the add outputs.

    Raises
    ------
    ValueError
        If :func:`fused_refusal` refuses the configuration or the key is not threefry-2x32.
    """
    from mcacct.kernels.output import standardised_draws_t
    from mcacct.kernels.recursion import ladder_losses_t

    n, b, p = iterations, min_sep, sampling_prob
    why = fused_refusal(n, b, p, tuple(c_col))
    if why or jax.random.key_data(key).shape != (2,):
        raise ValueError(why or "the fused kernel reproduces JAX's threefry2x32 generator (key data of shape (2,))")
    kx, kz = jax.random.split(key)
    cap = participation_cap(n, b, participation_rate)
    tau = participation_blocks_t(kx, n, b, p, warm_start, num_samples, cap)
    noise_key = jax.random.key_data(kz)
    sigmas = jnp.asarray(sigmas, jnp.float64)
    static = (n, b, p, warm_start, tuple(c_col), dot_method)
    if pallas:
        out, ok = fused_pallas_losses(noise_key, tau, sigmas, num_samples, tile or num_samples, *static,
                                      interpret=interpret)
    else:
        consts = jnp.asarray(tile_constants(n, b, c_col))
        out, ok = fused_tile_losses(noise_key, tau, sigmas, consts, 0, num_samples, *static)

    def exact(out, key, sigmas):
        m_t, z_t = standardised_draws_t(key, n, b, p, warm_start, participation_rate, c_col, num_samples)
        return ladder_losses_t(m_t, z_t, sigmas, b, p, warm_start, c_col, dot_method, "scan")

    return rare_cond(~jnp.all(ok), exact, lambda out, key, sigmas: out, out, key, sigmas)
