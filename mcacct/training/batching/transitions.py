r"""The pure kernels of the batch samplers: per-iteration transitions of the blocked counters, truncation, and
their scans (``p`` and ``b`` are traced, so changing them does not recompile). The samplers are
:mod:`mcacct.training.batching.samplers` and :mod:`mcacct.training.batching.multi`."""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from mcacct.core import rates

from mcacct.core.precision import float64

__all__ = ["SamplerState", "TruncatedBatch", "participation_rate", "sampling_prob_from_rate"]


# --------------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------------


class SamplerState(NamedTuple):
    """Sampler state: one blocked counter per example.

    Attributes
    ----------
    blocked:
        ``int32`` array of shape ``(dataset_size,)``. ``blocked[j] = k > 0`` means example ``j``
        cannot be in the batch for the next ``k`` iterations; ``0`` means it is available.
    """

    blocked: jax.Array


class TruncatedBatch(NamedTuple):
    """A fixed-size batch (App. D).

    Attributes
    ----------
    indices:
        ``int32`` array of shape ``(max_batch_size,)``. Valid entries come first (in uniformly
        random order); padding entries hold index ``0``.
    valid:
        ``bool`` array of shape ``(max_batch_size,)``; ``False`` marks padding. Padding examples
        must contribute zero gradient (multiply by ``valid``).
    num_sampled:
        ``int32`` scalar: the batch size *before* truncation/padding (``r_i`` in App. D plus the
        sensitive example, if sampled). Truncation happened iff ``num_sampled > max_batch_size``.
    """

    indices: jax.Array
    valid: jax.Array
    num_sampled: jax.Array


#: :func:`mcacct.core.rates.participation_rate`: :math:`p_0 = 1/(1/p + b - 1)` (float64, as every entry point here).
participation_rate = float64(rates.participation_rate)
#: :func:`mcacct.core.rates.sampling_prob_from_rate`: :math:`p = p_0/(1 - p_0 (b - 1))`, :math:`p_0 \in (0, 1/b]`.
sampling_prob_from_rate = float64(rates.sampling_prob_from_rate)


# --------------------------------------------------------------------------------------------
# Pure kernels (p and b are traced, so changing them does not recompile)
# --------------------------------------------------------------------------------------------


def draw_coins(key: jax.Array, p: jax.Array, m: int) -> tuple[jax.Array, jax.Array]:
    """The coins :math:`S_i` of one iteration: one Bernoulli(``p``) draw per example.

    Parameters
    ----------
    key : jax.Array
    p : jax.Array
        Sampling probability.
    m : int
        Number of examples.

    Returns
    -------
    coins : jax.Array
        bool, shape ``(m,)``.
    key : jax.Array
        A fresh key for the iteration's other draws.
    """
    k_coins, k_aux = jax.random.split(key)
    return jax.random.bernoulli(k_coins, p, (m,)), k_aux


def countdown(blocked: jax.Array, trigger: jax.Array, b: jax.Array) -> jax.Array:
    """``b - 1`` where ``trigger`` else ``max(blocked - 1, 0)``.

    Parameters
    ----------
    blocked : jax.Array
        Blocked counters, shape ``(m,)``.
    trigger : jax.Array
        bool, shape ``(m,)``.
    b : jax.Array
        Minimum separation.

    Returns
    -------
    jax.Array
        ``int32``, shape ``(m,)``.
    """
    return jnp.where(trigger, b - 1, jnp.maximum(blocked - 1, 0)).astype(jnp.int32)


def bminsep_transition(blocked: jax.Array, coins: jax.Array, b: jax.Array):
    """One iteration of Alg. 1/2 given the coins.

    The batch is the coins of the available examples (``blocked == 0``).

    Parameters
    ----------
    blocked : jax.Array
        Blocked counters, shape ``(m,)``.
    coins : jax.Array
        bool, shape ``(m,)``.
    b : jax.Array
        Minimum separation.

    Returns
    -------
    new_blocked : jax.Array
    batch_mask : jax.Array
        bool, shape ``(m,)``.
    """
    batch = coins & (blocked == 0)
    return countdown(blocked, batch, b), batch


def neighbour_hit(trigger: jax.Array, users: jax.Array, num_users: int) -> jax.Array:
    """``hit[e] = any(trigger[e'] for e' in N(e))`` where ``N(e)`` shares a user with ``e``.

    Parameters
    ----------
    trigger : jax.Array
        bool, shape ``(m,)``.
    users : jax.Array
        Users of each example, shape ``(m, k)`` with ``-1`` padding.
    num_users : int

    Returns
    -------
    jax.Array
        bool, shape ``(m,)``.
    """
    m, k = users.shape
    seg = jnp.where(users >= 0, users, num_users).reshape(-1)
    vals = jnp.broadcast_to(trigger[:, None], (m, k)).reshape(-1).astype(jnp.int32)
    user_hit = jax.ops.segment_max(vals, seg, num_segments=num_users + 1) > 0
    return jnp.any((users >= 0) & user_hit[seg].reshape(m, k), axis=1)


def multi_transition(blocked, coins, users, b, num_users: int, block_on_sampled: bool):
    """One iteration of Alg. 3 (``block_on_sampled``) or Alg. 4 given the coins ``S_i``.

    Alg. 3 blocks the neighbours (:func:`neighbour_hit`) of every example whose coin came up, Alg. 4 those of the
    batch.

    Parameters
    ----------
    blocked, coins, b
        As in :func:`bminsep_transition`.
    users, num_users
        As in :func:`neighbour_hit`.
    block_on_sampled : bool

    Returns
    -------
    tuple of jax.Array
        ``(new_blocked, batch_mask)``.
    """
    batch = coins & (blocked == 0)
    trigger = coins if block_on_sampled else batch
    return countdown(blocked, neighbour_hit(trigger, users, num_users), b), batch


def warm_blocked(key: jax.Array, p: jax.Array, b: jax.Array, m: int) -> jax.Array:
    """Alg. 2 initial state: 0 w.p. ``1/(1+(b-1)p)``, else Uniform{1..b-1}.

    Parameters
    ----------
    key : jax.Array
    p : jax.Array
        Sampling probability.
    b : jax.Array
        Minimum separation.
    m : int
        Number of examples.

    Returns
    -------
    jax.Array
        Blocked counters, ``int32``, shape ``(m,)``.
    """
    k_avail, k_state = jax.random.split(key)
    p = jnp.asarray(p, jnp.float32)
    avail = jax.random.uniform(k_avail, (m,)) < rates.stationary_available_prob(p, b)
    s = jax.random.randint(k_state, (m,), 1, jnp.maximum(b, 2), dtype=jnp.int32)
    return jnp.where(avail, 0, s).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("m",))
def jit_warm_blocked(key, p, b, m):
    """:func:`warm_blocked`, compiled once per ``m``."""
    return warm_blocked(key, p, b, m)


@jax.jit
def jit_bminsep_step(key, blocked, p, b):
    """One compiled b-min-sep iteration: coins drawn, then :func:`bminsep_transition`.

    Parameters
    ----------
    key : jax.Array
    blocked : jax.Array
        Blocked counters, shape ``(m,)``.
    p, b : jax.Array
        Sampling probability and minimum separation.

    Returns
    -------
    tuple of jax.Array
        ``(new_blocked, batch_mask)``.
    """
    coins, _ = draw_coins(key, p, blocked.shape[0])
    return bminsep_transition(blocked, coins, b)


def truncate(key: jax.Array, mask: jax.Array, max_batch_size: int) -> TruncatedBatch:
    """A fixed-size batch (App. D): a uniformly random subset of at most ``max_batch_size`` sampled examples.

    Parameters
    ----------
    key : jax.Array
    mask : jax.Array
        bool, shape ``(m,)``: the sampled examples.
    max_batch_size : int
        Number of slots (static under ``jit``).

    Returns
    -------
    TruncatedBatch
    """
    m = mask.shape[0]
    # A uniformly random bijection examples -> ranks; sampled examples keep distinct positive
    # scores, so the top-k of the scores is the sampled set's k lowest-ranked members, i.e. a
    # uniformly random k-subset of the sampled examples (exact, no float ties).
    ranks = jax.random.permutation(key, m).astype(jnp.int32)
    score = jnp.where(mask, m - ranks, 0)
    k = min(max_batch_size, m)
    top, idx = jax.lax.top_k(score, k)
    valid = top > 0
    idx = jnp.where(valid, idx, 0).astype(jnp.int32)
    if max_batch_size > m:
        pad = max_batch_size - m
        idx = jnp.concatenate([idx, jnp.zeros((pad,), jnp.int32)])
        valid = jnp.concatenate([valid, jnp.zeros((pad,), bool)])
    return TruncatedBatch(idx, valid, jnp.sum(mask, dtype=jnp.int32))


@functools.partial(jax.jit, static_argnames=("max_batch_size",))
def jit_truncate(key, mask, max_batch_size):
    """:func:`truncate`, compiled once per ``max_batch_size``."""
    return truncate(key, mask, max_batch_size)


@functools.partial(jax.jit, static_argnames=("max_batch_size",))
def jit_truncated_step(key, blocked, p, b, max_batch_size):
    """One compiled iteration of the truncated sampler (coins, :func:`bminsep_transition`, :func:`truncate`).

    Parameters
    ----------
    key, blocked, p, b
        As in :func:`jit_bminsep_step`.
    max_batch_size : int

    Returns
    -------
    new_blocked : jax.Array
    batch : TruncatedBatch
    """
    coins, k_aux = draw_coins(key, p, blocked.shape[0])
    new_blocked, mask = bminsep_transition(blocked, coins, b)
    return new_blocked, truncate(k_aux, mask, max_batch_size)


def mask_from_batch(batch: TruncatedBatch, m: int) -> jax.Array:
    """The example mask of a fixed-size batch (padding ignored).

    Parameters
    ----------
    batch : TruncatedBatch
    m : int
        Number of examples.

    Returns
    -------
    jax.Array
        bool, shape ``(m,)``.
    """
    tgt = jnp.where(batch.valid, batch.indices, m)
    return jnp.zeros((m,), bool).at[tgt].set(True, mode="drop")


@functools.partial(jax.jit, static_argnames=("m",))
def jit_masks_from_batches(batches: TruncatedBatch, m: int) -> jax.Array:
    """:func:`mask_from_batch` over a stack of batches, compiled once per ``m``.

    Parameters
    ----------
    batches : TruncatedBatch
        Stacked along a leading axis of length ``T``.
    m : int

    Returns
    -------
    jax.Array
        bool, shape ``(T, m)``.
    """
    return jax.vmap(lambda bt: mask_from_batch(bt, m))(batches)


@functools.partial(jax.jit, static_argnames=("num_users", "block_on_sampled"))
def jit_multi_step(key, blocked, users, p, b, num_users, block_on_sampled):
    """One compiled multi-user iteration: coins drawn, then :func:`multi_transition`.

    Parameters
    ----------
    key : jax.Array
    blocked, users, p, b, num_users, block_on_sampled
        As in :func:`multi_transition` (``num_users`` and ``block_on_sampled`` static).

    Returns
    -------
    tuple of jax.Array
        ``(new_blocked, batch_mask)``.
    """
    coins, _ = draw_coins(key, p, blocked.shape[0])
    return multi_transition(blocked, coins, users, b, num_users, block_on_sampled)


# --------------------------------------------------------------------------------------------
# Scans
# --------------------------------------------------------------------------------------------


def scan(step_fn, key: jax.Array, blocked0: jax.Array, iterations: int):
    """Run ``iterations`` steps of ``step_fn`` with :func:`jax.lax.scan`, one key per step.

    Parameters
    ----------
    step_fn : callable
        ``step_fn(key, blocked) -> (new_blocked, output)``.
    key : jax.Array
        Split into ``iterations`` keys.
    blocked0 : jax.Array
        Initial blocked counters, shape ``(m,)``.
    iterations : int

    Returns
    -------
    final : jax.Array
        The counters after the last step.
    outputs
        The per-step outputs, stacked along a leading axis of length ``iterations``.
    """
    keys = jax.random.split(key, iterations)

    def body(blocked, k):
        return step_fn(k, blocked)

    return jax.lax.scan(body, blocked0, keys)


@functools.partial(jax.jit, static_argnames=("iterations",))
def scan_bminsep(key, blocked0, p, b, iterations):
    """:func:`scan` of :func:`jit_bminsep_step`, compiled once per ``iterations``.

    Parameters
    ----------
    key : jax.Array
    blocked0 : jax.Array
        Initial blocked counters, shape ``(m,)``.
    p, b : jax.Array
        Sampling probability and minimum separation.
    iterations : int

    Returns
    -------
    final : jax.Array
    masks : jax.Array
        bool, shape ``(iterations, m)``.
    """
    return scan(lambda k, s: jit_bminsep_step(k, s, p, b), key, blocked0, iterations)


@functools.partial(jax.jit, static_argnames=("iterations", "max_batch_size"))
def scan_truncated(key, blocked0, p, b, iterations, max_batch_size):
    """:func:`scan` of :func:`jit_truncated_step`.

    Parameters
    ----------
    key, blocked0, p, b, iterations
        As in :func:`scan_bminsep`.
    max_batch_size : int

    Returns
    -------
    final : jax.Array
    batches : TruncatedBatch
        Stacked along a leading axis of length ``iterations``.
    """
    return scan(lambda k, s: jit_truncated_step(k, s, p, b, max_batch_size), key, blocked0,
                 iterations)


@functools.partial(jax.jit, static_argnames=("iterations", "num_users", "block_on_sampled"))
def scan_multi(key, blocked0, users, p, b, iterations, num_users, block_on_sampled):
    """:func:`scan` of :func:`jit_multi_step`.

    Parameters
    ----------
    key, blocked0, p, b, iterations
        As in :func:`scan_bminsep`.
    users, num_users, block_on_sampled
        As in :func:`multi_transition`.

    Returns
    -------
    final : jax.Array
    masks : jax.Array
        bool, shape ``(iterations, m)``.
    """
    return scan(lambda k, s: jit_multi_step(k, s, users, p, b, num_users, block_on_sampled),
                 key, blocked0, iterations)


