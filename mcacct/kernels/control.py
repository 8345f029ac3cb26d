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
the values of the ``select`` form, bit for bit, at the cost of the common branch while no element is rare.
Nested ``vmap`` levels each add one such ``any``.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

__all__ = ["rare_cond"]


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
        ``rare_fn`` is evaluated (for the whole batch) only if :math:`\exists i: \mathrm{rare}_i`.
    """
    return _batched_cond(rare_fn, common_fn)(jnp.asarray(rare, bool), *operands)


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
        else:
            common = v_common(*operands)

            def pick(rare, common, *operands):
                picked = v_rare(*operands)
                return jax.tree.map(lambda r, c: jnp.where(rare.reshape((-1,) + (1,) * (c.ndim - 1)), r, c),
                                    picked, common)

            out = rare_cond(jnp.any(rare), pick, lambda rare, common, *operands: common, rare, common, *operands)
        return out, jax.tree.map(lambda _: True, out)

    return cond
