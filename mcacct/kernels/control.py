r"""Rare-path branches that stay branches under ``vmap``.

The kernels take a cheap path and certify it per sample; where a sample is not certified (an overflow guard, a
count off its alias table, a participation beyond the drawn gaps), the batch is recomputed by an exact path.
With ``lax.cond`` that costs nothing while no sample needs it. But ``vmap`` turns a ``lax.cond`` whose predicate
is batched into a ``select`` of both branches, so the exact path (e.g. a 7200-step log-space scan) then runs for
every batch element, always. The engine batches its blocks with ``vmap`` on accelerators, so this is the
accelerator's common case, and it cost the unfused kernel most of its speed there before this module
(benchmarks/results/design_choices.md).

:func:`rare_cond` is ``lax.cond`` for one element. For a batch it evaluates the common branch for the whole
batch, and the rare branch only when some element takes it (one ``lax.cond`` on ``any``), selecting per element:
the values of the ``select`` form, at the cost of the common branch while no element is rare. In a batch of at
least :data:`COMPACT_MIN_BATCH` where at most :func:`compact_capacity` elements (a quarter of the batch) are rare,
the rare branch runs on those alone: their operands are gathered into a buffer of that many elements, the branch is
``vmap``ped over the buffer, and its results are scattered back (one more ``lax.cond``, on the count); with more, on
the whole batch. That compiles the rare branch twice (gathered and whole) per such level, hence the minimum: the
engine's few blocks per chunk are not worth a second copy, its 64-lane sub-blocks are (figures in
benchmarks/results/design_choices.md). Nested ``vmap`` levels each add one such ``any``.

The gathered elements run the same per-element program, batched over another number of elements. Whether that
keeps every bit is the compiler's affair: ``tests/kernels/test_control.py`` checks it for exact products, and
``tests/engine/test_skip_zero.py`` for the engine's exact recursions of gathered blocks, on the platform the
suite runs on.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

__all__ = ["rare_cond", "COMPACT_DIVISOR", "COMPACT_MIN_BATCH", "compact_capacity"]


def rare_cond(rare: jax.Array, rare_fn: Callable[..., Any], common_fn: Callable[..., Any], *operands: Any) -> Any:
    r"""A ``lax.cond`` on ``rare`` that, batched, runs ``rare_fn`` only when some element is rare.

    ``rare_fn(*operands)`` if ``rare`` else ``common_fn(*operands)``, batched without running ``rare_fn`` for
    batches in which no element is rare.

    Parameters
    ----------
    rare : jax.Array
        Boolean scalar (per batch element under ``vmap``): take the rare branch.
    rare_fn, common_fn : callable
        Pure functions of ``operands`` with the same output structure, shapes and dtypes (as for ``lax.cond``).
        They must not close over traced values: pass every array they read as an operand (closures over
        Python constants are fine).
    *operands : pytree of arrays
        Arrays or pytrees of arrays.

    Returns
    -------
    pytree of arrays
        The chosen branch's output. Under ``vmap`` with a batched ``rare``:
        :math:`\mathrm{out}_i = \mathrm{rare}_i\ ?\ \mathrm{rare\_fn}(x_i) : \mathrm{common\_fn}(x_i)`, where
        ``rare_fn`` is evaluated only if :math:`\exists i: \mathrm{rare}_i`: for the rare elements gathered where
        they are at most :func:`compact_capacity` of the batch, else for the whole batch.
    """
    return _batched_cond(rare_fn, common_fn)(jnp.asarray(rare, bool), *operands)


#: under ``vmap``, the rare branch runs on a gathered buffer of ``max(1, batch // COMPACT_DIVISOR)`` elements when
#: no more are rare, instead of on the whole batch (:func:`rare_cond`); batches below :data:`COMPACT_MIN_BATCH` whole
COMPACT_DIVISOR = 4


#: batches smaller than this run the rare branch whole (gathering would compile a second copy of it for little)
COMPACT_MIN_BATCH = 8


def compact_capacity(axis_size: int) -> int:
    """Elements of a batch of ``axis_size`` that :func:`rare_cond` gathers for its rare branch (a
    :data:`COMPACT_DIVISOR`-th of the batch; the whole batch below :data:`COMPACT_MIN_BATCH`)."""
    axis_size = int(axis_size)
    return axis_size if axis_size < COMPACT_MIN_BATCH else max(1, axis_size // COMPACT_DIVISOR)


def _batched_cond(rare_fn, common_fn):
    @jax.custom_batching.custom_vmap
    def cond(rare, *operands):
        return jax.lax.cond(rare, rare_fn, common_fn, *operands)

    @cond.def_vmap
    def rule(axis_size, in_batched, rare, *operands):
        rare_batched, *operands_batched = in_batched
        axes = tuple(jax.tree.map(lambda b: 0 if b else None, ob) for ob in operands_batched)
        v_rare = jax.vmap(rare_fn, in_axes=axes, axis_size=axis_size)
        v_common = jax.vmap(common_fn, in_axes=axes, axis_size=axis_size)
        if not rare_batched:
            out = rare_cond(rare, v_rare, v_common, *operands)
            return out, jax.tree.map(lambda _: True, out)
        common = v_common(*operands)
        size = compact_capacity(axis_size)

        def whole(rare, common, *operands):
            picked = v_rare(*operands)
            return jax.tree.map(lambda r, c: jnp.where(rare.reshape((-1,) + (1,) * (c.ndim - 1)), r, c),
                                picked, common)

        def gathered(rare, common, *operands):
            # the first `size` rare elements (all of them: at most `size` are rare here), their operands gathered
            idx = jnp.nonzero(rare, size=size, fill_value=axis_size)[0]
            # padded slots read an element that is not rare (one exists: at most `size < axis_size` are), so that
            # a rare_cond nested in the branch does not count copies of a rare element as rare too
            take = jnp.where(idx < axis_size, idx, jnp.argmin(rare))
            sub = tuple(jax.tree.map(lambda x, b: jnp.take(x, take, axis=0) if b else x, op, ob)
                        for op, ob in zip(operands, operands_batched))
            picked = jax.vmap(rare_fn, in_axes=axes, axis_size=size)(*sub)
            # padded slots hold the index `axis_size`: they scatter nowhere
            return jax.tree.map(lambda c, r: c.at[idx].set(r, mode="drop"), common, picked)

        def some(rare, common, *operands):
            if size >= axis_size:
                return whole(rare, common, *operands)
            return rare_cond(jnp.sum(rare.astype(jnp.int32)) > size, whole, gathered, rare, common, *operands)

        out = rare_cond(jnp.any(rare), some, lambda rare, common, *operands: common, rare, common, *operands)
        return out, jax.tree.map(lambda _: True, out)

    return cond
