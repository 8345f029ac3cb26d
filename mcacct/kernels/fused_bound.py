r"""The remove bound ``U >= ln P/Q`` of a constant column in one pass that keeps the noise on chip (issue #39,
shortcut 4).

:func:`mcacct.kernels.const_column.remove_loss_bound_from_draws_t` bounds the b-min-sep remove loss from the
materialised ``(n, B)`` noise: one pass writes it, another reads it back for the block extremes of its prefix sums,
and the block recursion of :mod:`mcacct.kernels.bound` follows. At the production shape (n = 7200) that noise is
57.6 kB per draw, and writing it is what bounds an accelerator (``benchmarks/results/rng_floor_cpu.json``, issue #39:
the rate at which ``jax.random`` writes float64 normals is the 15-minute floor of §7.4). Here one reverse loop over
the ``K = ceil(n/s)`` end-aligned blocks of ``s`` rounds draws each block's ``s`` normals by counter, folds them into
running suffix sums and takes the next recursion step at once, for every candidate ``sigma_j`` of a ladder. Per
draw it keeps only a ring of block minima of the suffix sums and a ring of the recursion's block maxima: the noise
never goes to memory. :func:`fused_remove_bound` runs it as a Pallas kernel over tiles of draws (Pallas Triton on a
GPU; interpreted on CPU, where the tests run the same body).

**Noise, by suffix sums** (Dong & Ganesh 2026, arXiv:2602.09338, §5; the prefix form is
:func:`~mcacct.kernels.const_column.block_term_maxima_t`'s). For a constant column :math:`c_i = c_0` (``i < k``) the
standard noise's sliding sum at 0-based row ``i`` is :math:`s^z_i = c_0 (S_i - S_{\min(i+k, n)})` with the suffix
sums :math:`S_j = \sum_{t \ge j} z_t` (:math:`S_n = 0`). Over the rows ``R`` of block :math:`\kappa`

.. math::
    \max_{i \in R} s^z_i \le c_0 \big(\max_{i \in R} S_i - \min_{j \in R + k} S_{\min(j, n)}\big),

and the shifted rows :math:`R + k` lie in blocks :math:`\kappa + \lfloor k/s \rfloor` and
:math:`\kappa + \lceil k/s \rceil` (blocks are end-aligned, so both are exact, and a block index ``>= K`` stands
for :math:`S_n = 0`): the minimum over those whole blocks (a superset) bounds the one over :math:`R + k`. Going from
the end, both were drawn before block :math:`\kappa`. Block 0's rows before row 0 draw ``z = 0`` and repeat
:math:`S_0`.

*Rounding.* Each computed :math:`\hat S_j` is a float sum of :math:`z_j, \dots, z_{n-1}` by additions only, so
:math:`|\hat S_j - S_j| \le \gamma_n M_j` with :math:`M_j = \sum_{t \ge j} |z_t|` (Higham, §4.2;
``_sum_error``), and :math:`M_j \le M_{a}` for every ``j`` at or after the block's first row ``a``. Hence
:math:`\zeta_\kappa = c_0 (\hat h - \hat l) + 2 c_0 \gamma_n \hat M_a (1.001) + 2^{-44} |c_0 (\hat h - \hat l)|`
bounds the exact block maximum (the computed mass :math:`\hat M_a` is within :math:`\gamma_n` of :math:`M_a`; the
difference and product round by a few ulps). It is the prefix form's allowance with the mass of the rows from the
block on instead of all ``n`` rows: no larger. It adds :math:`c_0 \rho \hat M_a` with :math:`\rho` =
:data:`NORMAL_ULPS` :math:`\cdot 2^{-52}`: the kernel's normals may differ from the XLA path's for the same words by
that much relative to each (another compiler's contraction of the inversion's multiply-adds), and the window's sum
of those differences is at most :math:`\rho` times its mass; so ``U`` bounds the loss of the draws the XLA path, and
the engine's exact path, see.

**Mean.** :math:`\mu_\kappa` depends on the participation only (``tau``, a few integers per draw): it comes in as an
array from :func:`~mcacct.kernels.const_column.const_mean_block_maxima_t`.

**Recursion.** Block by block from the end, the steps of :mod:`mcacct.kernels.bound` with the same outward
rounding: :math:`A_\kappa = \exp(\mu_\kappa/\sigma^2 + \zeta_\kappa/\sigma + e_j)` (exponent raised by
:math:`2^{-45}` of its parts), :math:`G_\kappa = \max(F^{max}_{\kappa+q}, F^{max}_{\kappa+q+1})` (``b = q s + r``,
the second only if ``r > 0``; ``1`` past the horizon), :math:`x = A G`,
:math:`F^{lo}_\kappa = (c_s F^{lo}_{\kappa+1} + w_s x)(1 + 2^{-40}) + 2^{-1000}` and
:math:`F^{max}_\kappa = \max(F^{lo}_\kappa, (c_1 F^{lo}_{\kappa+1} + p x)(1 + 2^{-40}) + 2^{-1000})`, the constants
raised by a relative ``1e-13``. :mod:`mcacct.kernels.bound` takes the ``q`` blocks of a super-block in one linear
map with one such allowance; here each block takes its own, so the two ``U`` differ in their last digits and both
bound the loss. The warm start's :math:`\sum_{i=2}^b F^{max}_{k(i)}` is summed as the blocks go.

**Same draws as the XLA path.** The normal at row ``t`` and column ``l`` of a block of ``B`` draws is
:func:`~mcacct.kernels.normal.normal_from_bits` of the threefry word at counter ``t B + l`` under the noise key
(:func:`~mcacct.kernels.threefry.counter_word`), the word ``jax.random.bits`` gives there in JAX's partitionable
layout: the draws of :func:`~mcacct.kernels.output.standardised_blocks_t` for the same key, so a draw whose ``U``
does not let it go is recomputed exactly from the same noise
(:func:`~mcacct.kernels.normal.standard_normal_columns`).

**Pallas Triton.** The body keeps to the operations Pallas Triton lowers (no slices, gathers or pads of values,
power-of-two sizes): a ring is a register tensor of a power-of-two number of rows, read by a masked maximum over its
rows and written by a masked select; rows of ``mu`` are read from the ref. Lowering is checked without a GPU by
exporting for ``cuda`` (``tests/kernels/test_fused_bound.py``); compiling and timing it need a device
(``benchmarks/fused_bound.py``). Numbers and arrays in; no scheme is imported.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

from mcacct.core.platform import target_platform
from mcacct.kernels.blocks import is_pow2, next_pow2
from mcacct.kernels.block_terms import sum_error
from mcacct.kernels.const_column import const_mean_block_maxima_t, supports_draws_bound
from mcacct.kernels.bound import BOUND_BLOCK, block_layout
from mcacct.kernels.normal import normal_from_bits
from mcacct.kernels.threefry import counter_word, default_counters_supported

__all__ = ["FUSED_BOUND_BLOCK", "FUSED_BOUND_AUTO", "NORMAL_ULPS", "fused_bound_refusal", "fused_bound_tile",
           "fused_bound_applies", "fused_bound_tile_kernel", "fused_remove_bound", "fused_remove_bound_from_key"]

#: rounds per block of the fused bound (``s = min(FUSED_BOUND_BLOCK, b)``): each ring holds about ``b/s`` rows per
#: draw and candidate, so a larger block keeps fewer values on chip and loosens ``U`` a little (the maxima are taken
#: over more rounds)
FUSED_BOUND_BLOCK = BOUND_BLOCK

#: whether the ladders of the schemes compute the remove bound with this kernel, per platform (read at trace time,
#: :func:`fused_bound_applies`): off everywhere until a device measures it against the XLA path end to end
#: (``benchmarks/accelerator.py --part fused_bound``); Pallas Triton runs on GPUs only, and on CPUs the kernel is
#: interpreted. Switching it on for a platform changes the bounds that skipped draws record in the histogram there (the
#: same counts and sums): it needs a new ``mcacct.jobs.problem_file.KERNEL_VERSION``, as kernel 16 had
FUSED_BOUND_AUTO = {"cpu": False, "gpu": False, "tpu": False}

#: how far (in units of ``2^-52`` of its magnitude) the kernel's normal may lie from the XLA path's for the same word:
#: both run :func:`~mcacct.kernels.normal.normal_from_bits`, but a compiler may contract its multiply-adds otherwise
#: (Triton does by default; XLA:CPU's jitted and eager forms differ by 1-2 ulps). ``zeta`` covers it, so ``U``
#: bounds the loss of the draws the engine's exact path sees; ``tests/gpu/test_fused_bound_gpu.py`` measures it on
#: the device
NORMAL_ULPS = 8

_GROW = 1.0 + 2.0**-40       # per-step relative allowance (as mcacct.kernels.bound)
_FLOOR = 2.0**-1000          # per-step absolute allowance (underflow)
_CONST_UP = 1.0 + 1e-13      # constants raised


def fused_bound_refusal(iterations: int, min_sep: int, sampling_prob: float, c_col: tuple[float, ...],
                        block: int = FUSED_BOUND_BLOCK) -> str:
    """Why :func:`fused_remove_bound` cannot serve this configuration (``""`` if it can).

    It needs JAX's threefry generator in the partitionable layout (the same words as ``jax.random.bits``), a
    constant positive column of at most ``b`` taps, ``0 < p < 1`` and a block ``s = min(block, b)`` that is a power
    of two (a Triton tensor size)."""
    n, b = int(iterations), int(min_sep)
    if not default_counters_supported():
        return ("the fused bound draws JAX's threefry2x32 words in the partitionable layout; this run uses "
                f"{jax.config.jax_default_prng_impl} (partitionable={jax.config.jax_threefry_partitionable})")
    if not supports_draws_bound(tuple(c_col)) or len(c_col) > b:
        return f"the fused bound needs a constant, positive c_col of at most min_sep={b} taps"
    if not 0.0 < float(sampling_prob) < 1.0:
        return f"the fused bound needs 0 < sampling_prob < 1; got {sampling_prob}"
    s = block_layout(n, b, block)[0]
    if not is_pow2(s):
        return f"the fused bound's block min(block, min_sep) = {s} must be a power of two"
    return ""


def fused_bound_tile(width: int) -> int:
    """Draws per program for a block of ``width``: the largest power of two that divides it, at most 128."""
    return min(128, int(width) & -int(width))


def fused_bound_applies(iterations: int, min_sep: int, sampling_prob: float, c_col: tuple[float, ...],
                        width: int) -> bool:
    """Whether a ladder's remove bound comes from :func:`fused_remove_bound` on the target platform: switched on in
    :data:`FUSED_BOUND_AUTO`, served (:func:`fused_bound_refusal`), and a block of at least 16 draws per program
    (:func:`fused_bound_tile`)."""
    return (FUSED_BOUND_AUTO.get(target_platform(), False) and fused_bound_tile(width) >= 16
            and not fused_bound_refusal(iterations, min_sep, sampling_prob, tuple(c_col)))


def _slot(index, size: int) -> jax.Array:
    """``index mod size`` of a non-negative int32 index (``lax.rem``: the remainder Pallas Triton lowers for int32)."""
    return jax.lax.rem(jnp.asarray(index, jnp.int32), jnp.int32(size))


def _masked_max(ring: jax.Array, rows: jax.Array, slot) -> jax.Array:
    """``ring[slot]`` as a maximum over the rows (the other rows ``-inf``): no gather of a value for Triton."""
    return jnp.max(jnp.where(rows == slot, ring, -jnp.inf), axis=0)


def fused_bound_tile_kernel(key_ref, mu_ref, sig_ref, err_ref, out_ref, *, tile: int, width: int, iterations: int,
                            min_sep: int, sampling_prob: float, warm_start: bool, c0: float, taps: int,
                            block: int):
    r"""The kernel body: ``U`` of one tile of ``tile`` draws for every candidate (module docstring).

    Refs: ``key_ref`` ``(2,)`` uint32 noise key data; ``mu_ref`` ``(K_pad, tile)`` float64 block maxima of the mean
    terms (:func:`~mcacct.kernels.const_column.const_mean_block_maxima_t`, padded in front with ``-inf``);
    ``sig_ref`` ``(J,)`` candidates and ``err_ref`` ``(J,)`` the bounds of their terms' float error (``J`` a power
    of two). Writes ``out_ref`` ``(J, tile)``: ``U``, ``inf`` where not finite.
    """
    from jax.experimental import pallas as pl

    n, b, k, p = int(iterations), int(min_sep), int(taps), float(sampling_prob)
    s, nblk, k_pad, q, r = block_layout(n, b, block)
    front = k_pad - nblk
    a_lo, a_hi = k // s, -(-k // s)                      # the blocks of the shifted rows R + k
    last0 = n - 1 - (nblk - 1) * s                       # block 0's last row (its rows before 0 are padding)
    first_lo, first_hi = (nblk if j >= n else nblk - 1 - (n - 1 - j) // s for j in (k, last0 + k))
    # rings, each read before block kappa overwrites its slot (a block past the horizon reads an unwritten slot: its
    # initial value): F^max of blocks kappa + 1 .. kappa + q (+ 1 if r > 0), and the minima of S over blocks
    # kappa + 1 .. kappa + ceil(k/s) (and kappa itself, written first, if k < s)
    ring_f = next_pow2(q + (1 if r else 0))
    ring_s = next_pow2(a_hi + (1 if a_lo == 0 else 0))
    dtype = jnp.float64
    log_q = math.log1p(-p)
    c_s = math.exp(s * log_q) * _CONST_UP
    w_s = -math.expm1(s * log_q) * _CONST_UP
    c_1 = (1.0 - p) * _CONST_UP
    p_up = p * _CONST_UP
    gam = (2.0 * sum_error(n + s) + NORMAL_ULPS * 2.0**-52) * c0 * 1.001
    warm_rows = min(b, n)                                # rows 2..min(b, n) (1-based) enter the warm start

    k0, k1 = key_ref[0], key_ref[1]
    sig = sig_ref[...]
    nj = sig.shape[0]
    inv = (1.0 / sig).reshape(nj, 1)
    inv2 = inv * inv
    errs = err_ref[...].reshape(nj, 1)
    cols = (pl.program_id(0) * tile + jax.lax.broadcasted_iota(jnp.int32, (1, tile), 1)).astype(jnp.int64)
    rows_f = jax.lax.broadcasted_iota(jnp.int32, (ring_f, nj, tile), 0)
    rows_s = jax.lax.broadcasted_iota(jnp.int32, (ring_s, 1, tile), 0)

    def step(i, carry):
        i = jnp.asarray(i, jnp.int32)
        kap = nblk - 1 - i                               # block index, from the end
        suffix, mass, ring_lo, f_lo, ring_max, warm_acc = carry
        last = n - 1 - i * s                             # the block's last 0-based row
        hi = jnp.full((1, tile), -jnp.inf, dtype)
        lo = jnp.full((1, tile), jnp.inf, dtype)
        for t in range(s):                               # rows last, last - 1, ..., last - s + 1
            row = last - t
            flat = jnp.maximum(row, 0).astype(jnp.int64) * width + cols
            z = jnp.where(row >= 0, normal_from_bits(counter_word(k0, k1, flat)), 0.0)
            suffix = suffix + z
            mass = mass + jnp.abs(z)
            hi = jnp.maximum(hi, suffix)
            lo = jnp.minimum(lo, suffix)
        if a_lo == 0:                                    # k < s: this block's own minimum is read too
            ring_lo = jnp.where(rows_s == _slot(kap, ring_s), lo, ring_lo)
        blk_lo = jnp.where(kap == 0, jnp.int32(first_lo), kap + a_lo)            # block 0: its real rows' shifts only
        blk_hi = jnp.where(kap == 0, jnp.int32(first_hi), kap + a_hi)
        shifted = jnp.maximum(_masked_max(-ring_lo, rows_s, _slot(blk_lo, ring_s)),
                              _masked_max(-ring_lo, rows_s, _slot(blk_hi, ring_s)))   # -min over the two blocks
        if a_lo > 0:
            ring_lo = jnp.where(rows_s == _slot(kap, ring_s), lo, ring_lo)
        diff = c0 * (hi + shifted)
        zeta = diff + 2.0**-44 * jnp.abs(diff) + gam * mass          # (1, tile)
        mu = mu_ref[pl.ds(kap + front, 1), :]                         # (1, tile)
        a, zz = mu * inv2, zeta * inv                                 # (J, tile)
        m = a + zz + errs
        m = jnp.where(jnp.abs(m) < jnp.inf, m + 2.0**-45 * (jnp.abs(a) + jnp.abs(zz)), m)
        m = jnp.where(m != m, jnp.inf, m)                             # never skip a nan
        x = jnp.exp(jnp.maximum(m, -700.0))
        g = _masked_max(ring_max, rows_f, _slot(kap + q, ring_f))
        if r:
            g = jnp.maximum(g, _masked_max(ring_max, rows_f, _slot(kap + q + 1, ring_f)))
        x = x * g
        new_lo = (c_s * f_lo + w_s * x) * _GROW + _FLOOR
        f_max = jnp.maximum(new_lo, (c_1 * f_lo + p_up * x) * _GROW + _FLOOR)
        ring_max = jnp.where(rows_f == _slot(kap, ring_f), f_max, ring_max)
        if warm_start and b > 1:                         # 1-based rows of the block: [last - s + 2, last + 1]
            top = jnp.minimum(last + 1, warm_rows)
            bottom = jnp.maximum(last - s + 2, 2)
            warm_acc = warm_acc + jnp.maximum(top - bottom + 1, 0).astype(dtype) * f_max
        return suffix, mass, ring_lo, new_lo, ring_max, warm_acc

    zero = jnp.zeros((1, tile), dtype)
    carry = (zero, zero, jnp.zeros((ring_s, 1, tile), dtype), jnp.ones((nj, tile), dtype),
             jnp.ones((ring_f, nj, tile), dtype), jnp.zeros((nj, tile), dtype))
    carry = jax.lax.fori_loop(0, nblk, step, carry)
    _, _, _, _, ring_max, warm_acc = carry
    total = _masked_max(ring_max, rows_f, 0)             # F^max of block 0
    if warm_start and b > 1:
        total = total + p_up * _CONST_UP * warm_acc + p_up * max(0, b - n)
        total = (total * _GROW + _FLOOR) * ((1.0 / (1.0 + (b - 1) * p)) * _CONST_UP)
    u = jnp.log(total * _GROW)
    u = u + 2.0**-40 * (1.0 + jnp.abs(u))
    out_ref[...] = jnp.where(u != u, jnp.inf, u)


def fused_remove_bound(noise_key: jax.Array, mu: jax.Array, sigmas: jax.Array, term_errors: jax.Array, width: int,
                       tile: int, iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                       c_col: tuple[float, ...], block: int = FUSED_BOUND_BLOCK, interpret: bool | None = None,
                       num_warps: int | None = None) -> jax.Array:
    r"""``U`` for every candidate of a block of ``width`` draws, by :func:`fused_bound_tile_kernel` over tiles.

    Parameters
    ----------
    noise_key : jax.Array
        uint32 ``(2,)``: the noise key's data (the second half of ``jax.random.split`` of the block's key, as
        :func:`~mcacct.kernels.output.standardised_blocks_t` splits it).
    mu : jax.Array
        float64 ``(K_pad, width)``: :func:`~mcacct.kernels.const_column.const_mean_block_maxima_t` of the block's
        participation.
    sigmas, term_errors : array_like
        ``(J,)`` candidates ``> 0`` and the bounds of their terms' float error (as
        :func:`~mcacct.kernels.bound.remove_loss_bound_from_maxima`).
    width : int
        ``B``, the draws of the block (the noise's row stride).
    tile : int
        Draws per program, dividing ``width``; a power of two when compiled.
    iterations, min_sep, sampling_prob, warm_start, c_col
        ``n``, ``b``, ``p``, the start and the (constant) column.
    block : int, optional
        Rounds per block (default :data:`FUSED_BOUND_BLOCK`).
    interpret : bool or None, optional
        Pallas interpret mode; ``None`` (default) interprets where JAX's backend is the CPU (also when a GPU is
        the target platform, ``MCACCT_TARGET_PLATFORM``) and compiles (Pallas Triton) elsewhere.
    num_warps : int or None, optional
        Triton warps per program when compiled (``None``: JAX's default).

    Returns
    -------
    jax.Array
        float64 ``(J, width)``.

    Raises
    ------
    ValueError
        If :func:`fused_bound_refusal` refuses the configuration or ``tile`` does not divide ``width``.
    """
    from jax.experimental import pallas as pl

    n, b, p = int(iterations), int(min_sep), float(sampling_prob)
    why = fused_bound_refusal(n, b, p, tuple(c_col), block)
    if why:
        raise ValueError(why)
    if width % tile or mu.shape[1] != width:
        raise ValueError(f"tile must divide width = mu.shape[1]; got tile={tile}, width={width}, mu {mu.shape}")
    if interpret is None:     # the backend that runs it (a target platform traced on a CPU host interprets too)
        interpret = jax.default_backend() == "cpu"
    params: dict = {"interpret": True}
    if not interpret:
        from jax.experimental.pallas import triton as pltriton
        if not is_pow2(tile):
            raise ValueError(f"the compiled fused bound needs a power-of-two tile; got {tile}")
        params = {"compiler_params": pltriton.CompilerParams(**({} if num_warps is None else
                                                                {"num_warps": int(num_warps)}))}
    sig = jnp.asarray(sigmas, jnp.float64)
    err = jnp.broadcast_to(jnp.asarray(term_errors, jnp.float64), sig.shape)
    nj = sig.shape[0]
    nj_pad = next_pow2(nj)                          # the ladder padded by its last candidate (rows dropped)
    sig = jnp.concatenate([sig, jnp.broadcast_to(sig[-1:], (nj_pad - nj,))])
    err = jnp.concatenate([err, jnp.broadcast_to(err[-1:], (nj_pad - nj,))])
    kernel = partial(fused_bound_tile_kernel, tile=tile, width=width, iterations=n, min_sep=b, sampling_prob=p,
                     warm_start=warm_start, c0=float(c_col[0]), taps=len(c_col), block=block)
    k_pad = mu.shape[0]
    out = pl.pallas_call(
        kernel, grid=(width // tile,),
        in_specs=[pl.BlockSpec((2,), lambda i: (0,)), pl.BlockSpec((k_pad, tile), lambda i: (0, i)),
                  pl.BlockSpec((nj_pad,), lambda i: (0,)), pl.BlockSpec((nj_pad,), lambda i: (0,))],
        out_specs=pl.BlockSpec((nj_pad, tile), lambda i: (0, i)),
        out_shape=jax.ShapeDtypeStruct((nj_pad, width), jnp.float64),
        **params)(jnp.asarray(noise_key, jnp.uint32), mu, sig, err)
    return out[:nj]


@partial(jax.jit, static_argnames=("iterations", "min_sep", "sampling_prob", "warm_start", "c_col", "width", "tile",
                                   "block", "interpret", "num_warps"))
def fused_remove_bound_from_key(noise_key: jax.Array, tau: jax.Array, sigmas: jax.Array, term_errors: jax.Array,
                                iterations: int, min_sep: int, sampling_prob: float, warm_start: bool,
                                c_col: tuple[float, ...], width: int, tile: int, block: int = FUSED_BOUND_BLOCK,
                                interpret: bool | None = None, num_warps: int | None = None) -> jax.Array:
    """:func:`fused_remove_bound` from the participation ``tau`` (int32 ``(ceil(n/b), width)``,
    :func:`~mcacct.kernels.participation.participation_blocks_t`): the mean's block maxima, then the kernel. The
    arguments as :func:`fused_remove_bound`'s; ``(J, width)`` float64."""
    mu = const_mean_block_maxima_t(tau, iterations, min_sep, c_col, block)
    return fused_remove_bound(noise_key, mu, sigmas, term_errors, width, tile, iterations, min_sep, sampling_prob,
                              warm_start, c_col, block, interpret, num_warps)
