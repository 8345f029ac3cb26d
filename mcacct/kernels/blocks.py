r"""Block helpers of the engine's kernels: cache-sized sub-blocks and buffered work on flagged samples.

* :func:`map_blocks` maps a function over blocks: ``lax.map`` on CPU (a block's ``(n, block)`` arrays stay in
  cache), ``vmap`` on accelerators (one batched program: a ``lax.map`` there would run the blocks' thousands of
  small sequential steps one block after another);
* :func:`sub_block_size` and :func:`map_sub_blocks` run a per-sub-block function over a block of samples with
  :func:`map_blocks` and join the results;
* :func:`apply_to_flagged` applies a function to the flagged samples of a block, a fixed-size buffer of them at a
  time (a ``while`` loop of ``ceil(count / size)`` rounds: none when nothing is flagged), so the work is
  proportional to the number of flagged samples and only one program is compiled for it. Used for the rare
  samples that need extra work (truncated b-min-sep's samples with a truncated round).

Plain numbers and arrays in; no scheme is imported.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mcacct.core.platform import target_platform

__all__ = ["lanes_target", "cache_lanes", "map_blocks", "sub_block_size", "map_sub_blocks", "apply_to_flagged"]


def lanes_target(iterations: int) -> int:
    """Samples per block for ``n`` iterations: ``2^18 / n`` (the ``(n, block)`` float64 arrays stay in cache) but at
    least ``min(256, 2^23 / n)`` (the stepwise recursion, :mod:`mcacct.kernels.stepwise`, vectorises over the
    samples and wants a few hundred of them; arrays up to 8 MiB), within ``[16, 4096]``, rounded down to a power of
    two. At n = 7200: 256 (was 32; why: benchmarks/results/design_choices.md). The truncated scheme caps its
    sub-blocks apart (:func:`cache_lanes`)."""
    n = int(iterations)
    target = max(16, min(4096, (1 << 18) // n), min(256, (1 << 23) // n))
    return 1 << (target.bit_length() - 1)


def cache_lanes(iterations: int) -> int:
    """The most samples whose ``(n, lanes)`` float64 array fits in 4 MiB: ``2^19 / n`` rounded down to a power of
    two, at least 16 (64 at n = 7200; 256 and more for ``n <= 2048``). A bound for kernels that make several passes
    over such arrays (the noise, then its sliding sums, then their block maxima) and gain from keeping them in
    cache more than from wide batches."""
    target = max(16, (1 << 19) // max(int(iterations), 1))
    return 1 << (target.bit_length() - 1)


def sub_block_size(iterations: int, num_samples: int, max_lanes: int | None = None) -> int:
    """:func:`lanes_target` (at most ``max_lanes``) reduced to a power of two that divides ``num_samples`` (at most
    ``num_samples``)."""
    sub = lanes_target(iterations) if max_lanes is None else min(lanes_target(iterations), int(max_lanes))
    sub = 1 << (sub.bit_length() - 1)
    while sub > 1 and num_samples % sub:
        sub //= 2
    return min(sub, num_samples)


def map_blocks(fn, xs):
    """``fn`` over the leading axis of ``xs`` (any pytree), stacked: ``lax.map`` when tracing for CPU, ``vmap``
    for accelerators (:func:`mcacct.core.platform.target_platform`). The same values either way, up to the float
    rounding of batched arithmetic; the kernels' rare branches stay branches under ``vmap``
    (:func:`mcacct.kernels.control.rare_cond`)."""
    if target_platform() == "cpu":
        return jax.lax.map(fn, xs)
    return jax.vmap(fn)(xs)


def map_sub_blocks(fn, num_samples: int, sub: int):
    """``fn(j)`` for every sub-block ``j`` (:func:`map_blocks`); each result ``(..., sub)`` (any pytree) joined
    along its last axis into ``(..., num_samples)``."""
    out = map_blocks(fn, jnp.arange(num_samples // sub))       # (nsub, ..., sub)
    return jax.tree.map(lambda o: jnp.moveaxis(o, 0, -2).reshape(o.shape[1:-1] + (num_samples,)), out)


def apply_to_flagged(flagged: jax.Array, size: int, fn, out):
    """``out`` updated by ``fn(idx, out)`` for the flagged samples (``flagged``: bool ``(B,)``), ``size`` at a
    time in order; ``idx`` is padded with the out-of-range index ``B`` (``fn`` must drop those, e.g. with
    ``.at[idx].set(..., mode="drop")``)."""
    num = flagged.shape[0]
    rank = jnp.cumsum(flagged) - 1

    def round_(k, out):
        idx = jnp.nonzero(flagged & (rank // size == k), size=size, fill_value=num)[0]
        return fn(idx, out)

    return jax.lax.fori_loop(0, (jnp.sum(flagged) + size - 1) // size, round_, out)
