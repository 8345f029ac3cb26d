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

__all__ = ["is_pow2", "next_pow2", "lanes_target", "cache_lanes", "map_blocks", "sub_block_size", "map_sub_blocks",
           "apply_to_flagged"]


def is_pow2(v: int) -> bool:
    """Whether ``v`` is a power of two (``>= 1``): a size Pallas Triton accepts for a tensor."""
    return v >= 1 and (v & (v - 1)) == 0


def next_pow2(v: int) -> int:
    """The smallest power of two ``>= v`` (1 for ``v <= 1``)."""
    return 1 << max(int(v) - 1, 0).bit_length()


def lanes_target(iterations: int) -> int:
    """Samples per block for ``n`` iterations.

    ``2^18 / n`` (the ``(n, block)`` float64 arrays stay in cache) but at least ``min(256, 2^23 / n)`` (the
    stepwise recursion, :mod:`mcacct.kernels.stepwise`, vectorises over the samples and wants a few hundred of them;
    arrays up to 8 MiB), within ``[16, 4096]``, rounded down to a power of two. At n = 7200: 256 (was 32; why:
    benchmarks/results/design_choices.md). The truncated scheme caps its sub-blocks apart (:func:`cache_lanes`).

    Parameters
    ----------
    iterations : int
        ``n``, ``>= 1``.

    Returns
    -------
    int
        A power of two in ``[16, 4096]``.
    """
    n = int(iterations)
    target = max(16, min(4096, (1 << 18) // n), min(256, (1 << 23) // n))
    return 1 << (target.bit_length() - 1)


def cache_lanes(iterations: int) -> int:
    """The most samples whose ``(n, lanes)`` float64 array fits in 4 MiB.

    ``2^19 / n`` rounded down to a power of two, at least 16 (64 at n = 7200; 256 and more for ``n <= 2048``). A
    bound for kernels that make several passes over such arrays (the noise, then its sliding sums, then their block
    maxima) and gain from keeping them in cache more than from wide batches.

    Parameters
    ----------
    iterations : int
        ``n``; values below 1 count as 1.

    Returns
    -------
    int
        A power of two, ``>= 16``.
    """
    target = max(16, (1 << 19) // max(int(iterations), 1))
    return 1 << (target.bit_length() - 1)


def sub_block_size(iterations: int, num_samples: int, max_lanes: int | None = None) -> int:
    """Samples per sub-block of a block of ``num_samples`` samples.

    :func:`lanes_target` (at most ``max_lanes``) reduced to a power of two that divides ``num_samples`` (at most
    ``num_samples``).

    Parameters
    ----------
    iterations : int
        ``n``, ``>= 1``.
    num_samples : int
        Samples in the block, ``>= 1``.
    max_lanes : int or None, optional
        Upper limit (e.g. :func:`cache_lanes`); ``None`` (default): none.

    Returns
    -------
    int
        A power of two that divides ``num_samples``.
    """
    sub = lanes_target(iterations) if max_lanes is None else min(lanes_target(iterations), int(max_lanes))
    sub = 1 << (sub.bit_length() - 1)
    while sub > 1 and num_samples % sub:
        sub //= 2
    return min(sub, num_samples)


def map_blocks(fn, xs):
    """``fn`` over the leading axis of ``xs`` (any pytree), stacked.

    ``lax.map`` when tracing for CPU, ``vmap`` for accelerators (:func:`mcacct.core.platform.target_platform`).
    The same values either way, up to the float rounding of batched arithmetic; the kernels' rare branches stay
    branches under ``vmap`` (:func:`mcacct.kernels.control.rare_cond`).

    Parameters
    ----------
    fn : callable
        Traceable function of one element of ``xs`` (its leaves sliced along the leading axis).
    xs : pytree of arrays
        Inputs whose leaves share the leading length (the number of blocks).

    Returns
    -------
    pytree of arrays
        ``fn``'s outputs stacked along a new leading axis.
    """
    if target_platform() == "cpu":
        return jax.lax.map(fn, xs)
    return jax.vmap(fn)(xs)


def map_sub_blocks(fn, num_samples: int, sub: int):
    """``fn(j)`` for every sub-block ``j`` (:func:`map_blocks`), joined into whole-block arrays.

    Each result ``(..., sub)`` (any pytree) is joined along its last axis into ``(..., num_samples)``.

    Parameters
    ----------
    fn : callable
        ``fn(j)`` for a traced int sub-block index ``j``, returning a pytree of arrays ``(..., sub)``.
    num_samples : int
        Samples in the block, a multiple of ``sub``.
    sub : int
        Samples per sub-block (e.g. :func:`sub_block_size`).

    Returns
    -------
    pytree of arrays
        Each leaf ``(..., num_samples)``; sub-block ``j`` fills columns ``j sub`` to ``(j + 1) sub - 1``.
    """
    out = map_blocks(fn, jnp.arange(num_samples // sub))       # (nsub, ..., sub)
    return jax.tree.map(lambda o: jnp.moveaxis(o, 0, -2).reshape(o.shape[1:-1] + (num_samples,)), out)


def apply_to_flagged(flagged: jax.Array, size: int, fn, out):
    """``out`` updated by ``fn(idx, out)`` for the flagged samples, ``size`` at a time in order.

    A ``while`` loop of ``ceil(count / size)`` rounds (none when nothing is flagged), each on the next ``size``
    flagged samples: the work is proportional to the number of flagged samples and one program is compiled.

    Parameters
    ----------
    flagged : jax.Array
        bool, shape ``(B,)``: the samples to update.
    size : int
        Samples per round, ``>= 1``.
    fn : callable
        ``fn(idx, out) -> out``; ``idx`` (int, ``(size,)``) holds the round's flagged samples, padded with the
        out-of-range index ``B``, and ``fn`` must drop those (e.g. with ``.at[idx].set(..., mode="drop")``).
    out : pytree of arrays
        The initial value, carried through the rounds.

    Returns
    -------
    pytree of arrays
        ``out`` after the last round.
    """
    num = flagged.shape[0]
    rank = jnp.cumsum(flagged) - 1

    def round_(k, out):
        idx = jnp.nonzero(flagged & (rank // size == k), size=size, fill_value=num)[0]
        return fn(idx, out)

    return jax.lax.fori_loop(0, (jnp.sum(flagged) + size - 1) // size, round_, out)
