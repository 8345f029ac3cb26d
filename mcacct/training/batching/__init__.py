r"""Batch samplers for training with b-min-sep subsampling (Dong & Ganesh 2026 [arXiv:2602.09338], Alg. 1-4 and App. D).

Everything here is a pure function of explicit :mod:`jax.random` keys with shapes fixed by the
sampler's configuration, so ``init`` / ``step`` / ``sample_batches`` can be called inside
:func:`jax.jit` and :func:`jax.lax.scan`. Samplers are immutable pytrees: their numeric
parameters are static metadata and the attribution array of the multi-attribution samplers is a
data leaf, so a sampler may be closed over or passed as an argument to a jitted function.

State
-----
All samplers carry a :class:`SamplerState` holding one ``int32`` *blocked counter* per example,

.. math:: s_j \in \{0, 1, \dots, b - 1\},

the number of upcoming iterations in which example :math:`j` is barred from the batch (the
Markov-chain state of Fig. 1 of the paper). At every iteration each example draws an independent
coin :math:`c_j \sim \mathrm{Bernoulli}(p)`; example :math:`j` is in the batch iff
:math:`c_j = 1` and :math:`s_j = 0`; afterwards the counter is reset to :math:`b - 1` if the example
(or, in the multi-attribution samplers, a user-sharing neighbour) triggered a block, and otherwise
decremented towards zero.

Algorithms
----------
* :class:`BMinSepSampler` -- Alg. 1 (cold start: :math:`s_j = 0`) and Alg. 2 (warm start from the
  stationary law). Stationary participation rate

  .. math:: p_0 = \frac{1}{1/p + b - 1}, \qquad p = \frac{p_0}{1 - p_0 (b - 1)}

  (:func:`participation_rate` and :func:`sampling_prob_from_rate`, from :mod:`mcacct.core.rates`).

* :class:`TruncatedBMinSepSampler` -- App. D: the same batches, then truncated to a uniformly random
  subset of size ``max_batch_size`` or padded, returned as fixed-shape index arrays.
* :class:`MultiAttributionSampler` -- Alg. 3 (user-level / multi-attribution, Sec. 6.1): blocking is
  triggered by the *interim samples* :math:`S_i` of user-sharing neighbours.
* :class:`ConjecturalMultiAttributionSampler` -- Alg. 4 (Sec. 6.3): blocking triggered by actual
  participation. Its privacy analysis is only a conjecture (Conjecture 6.2); **mcacct's accountant
  does not cover it.**

Key usage
---------
``step(key, state)`` splits ``key`` into ``(k_coins, k_aux)``; the Poisson coins are always drawn
as ``jax.random.bernoulli(k_coins, p, (dataset_size,))`` and ``k_aux`` is used only by truncation.
Hence a truncated sampler with ``max_batch_size >= dataset_size`` reproduces the untruncated batches
on the same keys. ``sample_batches(key, iterations)`` splits ``key`` into ``(k_init, k_run)``, uses
``k_init`` for :meth:`init` and ``jax.random.split(k_run, iterations)`` as the per-step keys.
"""


from __future__ import annotations

from typing import Any

import jax

from mcacct.core.precision import float64
from mcacct.training.batching.transitions import (SamplerState, TruncatedBatch, participation_rate,
                                                  sampling_prob_from_rate)
from mcacct.training.batching.samplers import BMinSepSampler, TruncatedBMinSepSampler, truncate_batch
from mcacct.training.batching.multi import (ConjecturalMultiAttributionSampler, MultiAttributionSampler,
                                            max_examples_per_user)

__all__ = [
    "SamplerState",
    "TruncatedBatch",
    "BMinSepSampler",
    "TruncatedBMinSepSampler",
    "MultiAttributionSampler",
    "ConjecturalMultiAttributionSampler",
    "truncate_batch",
    "sample_batches",
    "participation_rate",
    "sampling_prob_from_rate",
    "max_examples_per_user",
]


# --------------------------------------------------------------------------------------------
# Convenience
# --------------------------------------------------------------------------------------------


@float64
def sample_batches(key: jax.Array, sampler: Any, iterations: int, **kwargs: Any):
    """``sampler.sample_batches(key, iterations, **kwargs)``: participation masks of shape
    ``(iterations, dataset_size)`` from any sampler in this module, computed with
    :func:`jax.lax.scan`.

    ``kwargs`` are ``warm_start`` (b-min-sep samplers) or ``burn_in`` (multi-attribution
    samplers), plus ``state`` and ``return_state``.

    Parameters
    ----------
    key : jax.Array
        PRNG key, split by the sampler into ``(k_init, k_run)``.
    sampler : object
        A sampler of this module (anything with a ``sample_batches`` method).
    iterations : int
        Number of batches ``n >= 1``.
    **kwargs
        Passed on to ``sampler.sample_batches``.

    Returns
    -------
    jax.Array or (jax.Array, SamplerState)
        The ``bool`` masks, shape ``(iterations, dataset_size)``, and the final state if ``return_state=True``.

    Raises
    ------
    ValueError
        If ``sampler`` has no ``sample_batches`` method, or as the sampler's ``sample_batches``.
    """
    if not hasattr(sampler, "sample_batches"):
        raise ValueError(f"sampler must be a sampler from mcacct.training.batching; got {type(sampler).__name__}")
    return sampler.sample_batches(key, iterations, **kwargs)

