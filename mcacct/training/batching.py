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

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core import rates
from mcacct.core.validate import check_bool, check_count, check_int, check_prob
from mcacct.core.precision import float64

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


def _draw_coins(key: jax.Array, p: jax.Array, m: int) -> tuple[jax.Array, jax.Array]:
    k_coins, k_aux = jax.random.split(key)
    return jax.random.bernoulli(k_coins, p, (m,)), k_aux


def _countdown(blocked: jax.Array, trigger: jax.Array, b: jax.Array) -> jax.Array:
    """``b - 1`` where ``trigger`` else ``max(blocked - 1, 0)``."""
    return jnp.where(trigger, b - 1, jnp.maximum(blocked - 1, 0)).astype(jnp.int32)


def _bminsep_transition(blocked: jax.Array, coins: jax.Array, b: jax.Array):
    """One iteration of Alg. 1/2 given the coins: returns ``(new_blocked, batch_mask)``."""
    batch = coins & (blocked == 0)
    return _countdown(blocked, batch, b), batch


def _neighbour_hit(trigger: jax.Array, users: jax.Array, num_users: int) -> jax.Array:
    """``hit[e] = any(trigger[e'] for e' in N(e))`` where ``N(e)`` shares a user with ``e``.

    ``users`` has shape ``(m, k)`` with ``-1`` padding.
    """
    m, k = users.shape
    seg = jnp.where(users >= 0, users, num_users).reshape(-1)
    vals = jnp.broadcast_to(trigger[:, None], (m, k)).reshape(-1).astype(jnp.int32)
    user_hit = jax.ops.segment_max(vals, seg, num_segments=num_users + 1) > 0
    return jnp.any((users >= 0) & user_hit[seg].reshape(m, k), axis=1)


def _multi_transition(blocked, coins, users, b, num_users: int, block_on_sampled: bool):
    """One iteration of Alg. 3 (``block_on_sampled``) or Alg. 4 given the coins ``S_i``."""
    batch = coins & (blocked == 0)
    trigger = coins if block_on_sampled else batch
    return _countdown(blocked, _neighbour_hit(trigger, users, num_users), b), batch


def _warm_blocked(key: jax.Array, p: jax.Array, b: jax.Array, m: int) -> jax.Array:
    """Alg. 2 initial state: 0 w.p. ``1/(1+(b-1)p)``, else Uniform{1..b-1}."""
    k_avail, k_state = jax.random.split(key)
    p = jnp.asarray(p, jnp.float32)
    avail = jax.random.uniform(k_avail, (m,)) < 1.0 / (1.0 + (b - 1) * p)
    s = jax.random.randint(k_state, (m,), 1, jnp.maximum(b, 2), dtype=jnp.int32)
    return jnp.where(avail, 0, s).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames=("m",))
def _jit_warm_blocked(key, p, b, m):
    return _warm_blocked(key, p, b, m)


@jax.jit
def _jit_bminsep_step(key, blocked, p, b):
    coins, _ = _draw_coins(key, p, blocked.shape[0])
    return _bminsep_transition(blocked, coins, b)


def _truncate(key: jax.Array, mask: jax.Array, max_batch_size: int) -> TruncatedBatch:
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
def _jit_truncate(key, mask, max_batch_size):
    return _truncate(key, mask, max_batch_size)


@functools.partial(jax.jit, static_argnames=("max_batch_size",))
def _jit_truncated_step(key, blocked, p, b, max_batch_size):
    coins, k_aux = _draw_coins(key, p, blocked.shape[0])
    new_blocked, mask = _bminsep_transition(blocked, coins, b)
    return new_blocked, _truncate(k_aux, mask, max_batch_size)


def _mask_from_batch(batch: TruncatedBatch, m: int) -> jax.Array:
    tgt = jnp.where(batch.valid, batch.indices, m)
    return jnp.zeros((m,), bool).at[tgt].set(True, mode="drop")


@functools.partial(jax.jit, static_argnames=("m",))
def _jit_masks_from_batches(batches: TruncatedBatch, m: int) -> jax.Array:
    return jax.vmap(lambda bt: _mask_from_batch(bt, m))(batches)


@functools.partial(jax.jit, static_argnames=("num_users", "block_on_sampled"))
def _jit_multi_step(key, blocked, users, p, b, num_users, block_on_sampled):
    coins, _ = _draw_coins(key, p, blocked.shape[0])
    return _multi_transition(blocked, coins, users, b, num_users, block_on_sampled)


# --------------------------------------------------------------------------------------------
# Scans
# --------------------------------------------------------------------------------------------


def _scan(step_fn, key: jax.Array, blocked0: jax.Array, iterations: int):
    keys = jax.random.split(key, iterations)

    def body(blocked, k):
        return step_fn(k, blocked)

    return jax.lax.scan(body, blocked0, keys)


@functools.partial(jax.jit, static_argnames=("iterations",))
def _scan_bminsep(key, blocked0, p, b, iterations):
    return _scan(lambda k, s: _jit_bminsep_step(k, s, p, b), key, blocked0, iterations)


@functools.partial(jax.jit, static_argnames=("iterations", "max_batch_size"))
def _scan_truncated(key, blocked0, p, b, iterations, max_batch_size):
    return _scan(lambda k, s: _jit_truncated_step(k, s, p, b, max_batch_size), key, blocked0,
                 iterations)


@functools.partial(jax.jit, static_argnames=("iterations", "num_users", "block_on_sampled"))
def _scan_multi(key, blocked0, users, p, b, iterations, num_users, block_on_sampled):
    return _scan(lambda k, s: _jit_multi_step(k, s, users, p, b, num_users, block_on_sampled),
                 key, blocked0, iterations)


# --------------------------------------------------------------------------------------------
# Samplers
# --------------------------------------------------------------------------------------------


def _register_static(cls):
    """Register a frozen dataclass whose fields are all static pytree metadata."""
    names = tuple(f.name for f in dataclasses.fields(cls))

    def flatten(obj):
        return (), tuple(getattr(obj, n) for n in names)

    def unflatten(aux, _children):
        obj = object.__new__(cls)
        for n, v in zip(names, aux):
            object.__setattr__(obj, n, v)
        return obj

    jax.tree_util.register_pytree_node(cls, flatten, unflatten)
    return cls


def _check_state(state: Any, m: int) -> jax.Array:
    blocked = state.blocked if isinstance(state, SamplerState) else None
    if blocked is None:
        raise ValueError(f"state must be a SamplerState; got {type(state).__name__}")
    if tuple(jnp.shape(blocked)) != (m,):
        raise ValueError(f"state.blocked must have shape ({m},) (dataset_size,); "
                         f"got {tuple(jnp.shape(blocked))}")
    if not jnp.issubdtype(jnp.result_type(blocked), jnp.integer):
        raise ValueError(f"state.blocked must be an integer array; got dtype {jnp.result_type(blocked)}")
    return jnp.asarray(blocked, jnp.int32)


def _require_key(key: Any, what: str) -> jax.Array:
    if key is None:
        raise ValueError(f"key must be a jax.random key for {what}; got None")
    return key


@float64
@_register_static
@dataclasses.dataclass(frozen=True)
class BMinSepSampler:
    r"""b-min-sep subsampling (Alg. 1, cold start; Alg. 2, warm start).

    At iteration :math:`i` every example not in :math:`B_{i-b+1} \cup \dots \cup B_{i-1}` is included
    in :math:`B_i` independently with probability :math:`p`. Per example this is the Markov chain of
    Fig. 1 with states :math:`s \in \{0, \dots, b-1\}`: from 0 go to :math:`b-1` w.p. :math:`p`
    (participate) else stay; from :math:`s > 0` go to :math:`s - 1`. Its stationary law is

    .. math:: \pi(0) = \frac{1}{1 + (b-1)p}, \qquad \pi(s) = \frac{p}{1 + (b-1)p}\ (1 \le s < b),

    and the stationary participation rate is :math:`p\,\pi(0) = p_0 = 1/(1/p + b - 1)`.
    ``b = 1`` is Poisson subsampling; ``p = 1`` with warm start is balls-in-bins with ``b`` bins.

    Parameters
    ----------
    dataset_size:
        Number of examples :math:`m \ge 1`.
    sampling_prob:
        :math:`p \in (0, 1]`, the inclusion probability of an *available* example.
    min_sep:
        :math:`b \ge 1`: no example is in two batches :math:`B_i, B_j` with :math:`0 < |i-j| < b`.

    Raises
    ------
    ValueError
        If a parameter is outside its range.
    """

    dataset_size: int
    sampling_prob: float
    min_sep: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "dataset_size", check_int("dataset_size", self.dataset_size, low=1))
        object.__setattr__(self, "sampling_prob", check_prob("sampling_prob", self.sampling_prob))
        object.__setattr__(self, "min_sep", check_int("min_sep", self.min_sep, low=1))

    @classmethod
    def from_participation_rate(cls, dataset_size: int, rate: float, min_sep: int) -> "BMinSepSampler":
        r"""Sampler whose stationary participation rate is ``rate`` (:math:`p_0 \in (0, 1/b]`)."""
        return cls(dataset_size, sampling_prob_from_rate(rate, min_sep), min_sep)

    @property
    def participation_rate(self) -> float:
        """Stationary participation rate :math:`p_0 = 1/(1/p + b - 1)`."""
        return participation_rate(self.sampling_prob, self.min_sep)

    @property
    def expected_batch_size(self) -> float:
        """Stationary expected batch size :math:`m p_0` (every batch under warm start)."""
        return self.dataset_size * self.participation_rate

    def _pb(self) -> tuple[jax.Array, jax.Array]:
        return jnp.float32(self.sampling_prob), jnp.int32(self.min_sep)

    def init(self, key: jax.Array | None = None, *, warm_start: bool = True) -> SamplerState:
        r"""Initial state.

        Parameters
        ----------
        key:
            PRNG key; required for ``warm_start=True``, ignored otherwise.
        warm_start:
            ``False``: Alg. 1, every example available (:math:`s_j = 0`); the first batch has rate
            :math:`p`, not :math:`p_0`. ``True`` (Alg. 2): each example independently available
            w.p. :math:`1/(1+(b-1)p)`, otherwise :math:`s_j \sim \mathrm{Uniform}\{1,\dots,b-1\}`
            (the "virtual history": it was in batch :math:`B_{1-i}` for a uniform
            :math:`i \in \{1..b-1\}`, which bars it for a uniform number in ``{1..b-1}`` of
            further iterations). Every batch then has participation rate exactly :math:`p_0`.

        Returns
        -------
        SamplerState
        """
        warm = check_bool("warm_start", warm_start)
        m = self.dataset_size
        if not warm:
            return SamplerState(jnp.zeros((m,), jnp.int32))
        key = _require_key(key, "a warm start")
        p, b = self._pb()
        return SamplerState(_jit_warm_blocked(key, p, b, m))

    def step(self, key: jax.Array, state: SamplerState) -> tuple[SamplerState, jax.Array]:
        """One iteration.

        Returns
        -------
        (SamplerState, jax.Array)
            The new state and the batch as a ``bool`` mask of shape ``(dataset_size,)``.
        """
        blocked = _check_state(state, self.dataset_size)
        p, b = self._pb()
        new, mask = _jit_bminsep_step(key, blocked, p, b)
        return SamplerState(new), mask

    def sample_batches(self, key: jax.Array, iterations: int, *, warm_start: bool = True,
                       state: SamplerState | None = None, return_state: bool = False):
        """Run ``iterations`` steps with :func:`jax.lax.scan`.

        Parameters
        ----------
        key:
            PRNG key, split into ``(k_init, k_run)``.
        iterations:
            Number of batches ``n >= 1``.
        warm_start:
            Passed to :meth:`init` (ignored when ``state`` is given).
        state:
            Start from this state instead of :meth:`init`.
        return_state:
            Also return the final state.

        Returns
        -------
        jax.Array or (jax.Array, SamplerState)
            ``bool`` participation mask of shape ``(iterations, dataset_size)``.
        """
        n = check_count("iterations", iterations)
        check_bool("return_state", return_state)
        k_init, k_run = jax.random.split(key)
        blocked0 = (self.init(k_init, warm_start=warm_start).blocked if state is None
                    else _check_state(state, self.dataset_size))
        p, b = self._pb()
        final, masks = _scan_bminsep(k_run, blocked0, p, b, n)
        return (masks, SamplerState(final)) if return_state else masks


@float64
@_register_static
@dataclasses.dataclass(frozen=True)
class TruncatedBMinSepSampler:
    r"""Truncated b-min-sep subsampling with fixed batch shape (App. D).

    Each iteration first forms the b-min-sep batch :math:`B_i` exactly as
    :class:`BMinSepSampler` (same keys give the same :math:`B_i`), then:

    * if :math:`|B_i| > B_{\max}` it keeps a **uniformly random subset of size** :math:`B_{\max}`
      (every subset equally likely, so each member survives w.p. :math:`B_{\max}/|B_i|`; this is
      the truncation rule assumed by the analysis of App. D -- the survival probability
      :math:`B_{\max}/(r_i+1)` enters its recursion -- and does not depend on example identity or
      index order);
    * if :math:`|B_i| < B_{\max}` it pads with invalid entries (index ``0``, ``valid=False``) that
      must contribute zero gradient.

    **Dropped examples stay blocked**: the state update uses the untruncated :math:`B_i`, so an
    example that was sampled but removed by truncation is still ineligible for the next
    :math:`b - 1` iterations (as App. D specifies). Truncation therefore never changes which
    examples are available later, only which sampled examples contribute.

    Parameters
    ----------
    dataset_size, sampling_prob, min_sep:
        As in :class:`BMinSepSampler`.
    max_batch_size:
        :math:`B_{\max} \ge 1`; the length of every returned index array.

    Raises
    ------
    ValueError
        If a parameter is outside its range.
    """

    dataset_size: int
    sampling_prob: float
    min_sep: int
    max_batch_size: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "dataset_size", check_int("dataset_size", self.dataset_size, low=1))
        object.__setattr__(self, "sampling_prob", check_prob("sampling_prob", self.sampling_prob))
        object.__setattr__(self, "min_sep", check_int("min_sep", self.min_sep, low=1))
        object.__setattr__(self, "max_batch_size",
                           check_int("max_batch_size", self.max_batch_size, low=1))

    @classmethod
    def from_participation_rate(cls, dataset_size: int, rate: float, min_sep: int,
                                max_batch_size: int) -> "TruncatedBMinSepSampler":
        r"""Sampler whose untruncated stationary participation rate is ``rate``."""
        return cls(dataset_size, sampling_prob_from_rate(rate, min_sep), min_sep, max_batch_size)

    @property
    def untruncated(self) -> BMinSepSampler:
        """The underlying :class:`BMinSepSampler` (same state, same coins)."""
        return BMinSepSampler(self.dataset_size, self.sampling_prob, self.min_sep)

    @property
    def participation_rate(self) -> float:
        """Untruncated stationary participation rate :math:`p_0`."""
        return participation_rate(self.sampling_prob, self.min_sep)

    def init(self, key: jax.Array | None = None, *, warm_start: bool = True) -> SamplerState:
        """Initial state; see :meth:`BMinSepSampler.init`."""
        return self.untruncated.init(key, warm_start=warm_start)

    def step(self, key: jax.Array, state: SamplerState) -> tuple[SamplerState, TruncatedBatch]:
        """One iteration: new state and a :class:`TruncatedBatch` of length ``max_batch_size``."""
        blocked = _check_state(state, self.dataset_size)
        p, b = jnp.float32(self.sampling_prob), jnp.int32(self.min_sep)
        new, batch = _jit_truncated_step(key, blocked, p, b, self.max_batch_size)
        return SamplerState(new), batch

    def sample_index_batches(self, key: jax.Array, iterations: int, *, warm_start: bool = True,
                             state: SamplerState | None = None, return_state: bool = False):
        """Run ``iterations`` steps; returns a :class:`TruncatedBatch` with a leading axis.

        ``indices`` and ``valid`` have shape ``(iterations, max_batch_size)``, ``num_sampled``
        shape ``(iterations,)``. Key handling as in :meth:`BMinSepSampler.sample_batches`.
        """
        n = check_count("iterations", iterations)
        check_bool("return_state", return_state)
        k_init, k_run = jax.random.split(key)
        blocked0 = (self.init(k_init, warm_start=warm_start).blocked if state is None
                    else _check_state(state, self.dataset_size))
        p, b = jnp.float32(self.sampling_prob), jnp.int32(self.min_sep)
        final, batches = _scan_truncated(k_run, blocked0, p, b, n, self.max_batch_size)
        return (batches, SamplerState(final)) if return_state else batches

    def sample_batches(self, key: jax.Array, iterations: int, *, warm_start: bool = True,
                       state: SamplerState | None = None, return_state: bool = False):
        """As :meth:`sample_index_batches`, but returns the truncated batches as a ``bool`` mask
        of shape ``(iterations, dataset_size)``."""
        out = self.sample_index_batches(key, iterations, warm_start=warm_start, state=state,
                                        return_state=return_state)
        batches, final = out if return_state else (out, None)
        masks = _jit_masks_from_batches(batches, self.dataset_size)
        return (masks, final) if return_state else masks


@float64
def truncate_batch(key: jax.Array, mask: jax.Array, max_batch_size: int) -> TruncatedBatch:
    r"""Turn a ``bool`` batch mask into a fixed-size :class:`TruncatedBatch` (App. D rule).

    Keeps a uniformly random subset of :math:`\min(|B|, B_{\max})` of the selected examples, in
    random order, followed by padding (index ``0``, ``valid=False``). This is exactly the truncation
    used by :class:`TruncatedBMinSepSampler`. Applying it to batches of the multi-attribution
    samplers is possible, but no truncated multi-attribution analysis exists in the paper or
    mcacct.

    Parameters
    ----------
    key:
        PRNG key for the random subset.
    mask:
        ``bool`` array of shape ``(m,)``.
    max_batch_size:
        :math:`B_{\max} \ge 1` (static).
    """
    bmax = check_int("max_batch_size", max_batch_size, low=1)
    if jnp.ndim(mask) != 1:
        raise ValueError(f"mask must be a 1-D boolean array; got shape {jnp.shape(mask)}")
    return _jit_truncate(key, jnp.asarray(mask, bool), bmax)


# --------------------------------------------------------------------------------------------
# Multi-attribution
# --------------------------------------------------------------------------------------------


def _as_user_matrix(user_of_example: Any) -> tuple[jax.Array, int | None]:
    """Validate the attribution array; returns the ``(m, k)`` int32 matrix and ``max id + 1``."""
    try:
        arr = np.asarray(user_of_example)
    except jax.errors.JAXTypeError as err:  # a tracer: values cannot be checked
        raise ValueError("user_of_example must be a concrete array when a sampler is constructed "
                         "(build the sampler outside jax.jit and pass it in as an argument)") from err
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"user_of_example must be an integer array; got dtype {arr.dtype}")
    if arr.ndim not in (1, 2) or arr.shape[0] < 1 or (arr.ndim == 2 and arr.shape[1] < 1):
        raise ValueError("user_of_example must have shape (num_examples,) or "
                         f"(num_examples, max_users_per_example) with num_examples >= 1; got {arr.shape}")
    if arr.ndim == 1 and np.any(arr < 0):
        raise ValueError("user_of_example entries must be user ids >= 0; got min "
                         f"{int(arr.min())}")
    if arr.ndim == 2 and np.any(arr < -1):
        raise ValueError("user_of_example (2-D) entries must be user ids >= 0 or -1 (padding); "
                         f"got min {int(arr.min())}")
    if np.any(arr > np.iinfo(np.int32).max - 1):
        raise ValueError("user_of_example ids must be < 2**31 - 1")
    mat = arr.reshape(arr.shape[0], -1).astype(np.int32)
    return jnp.asarray(mat), int(mat.max()) + 1


@float64
class _MultiAttributionBase:
    """Shared implementation of Alg. 3 and Alg. 4 (``_BLOCK_ON_SAMPLED`` selects which)."""

    _BLOCK_ON_SAMPLED: bool = True
    __slots__ = ("users", "sampling_prob", "min_sep", "num_users")

    def __init__(self, user_of_example: Any, sampling_prob: float, min_sep: int,
                 num_users: int | None = None) -> None:
        users, inferred = _as_user_matrix(user_of_example)
        p = check_prob("sampling_prob", sampling_prob)
        b = check_int("min_sep", min_sep, low=1)
        lo = max(inferred, 1)
        u = lo if num_users is None else check_int("num_users", num_users, low=lo)
        object.__setattr__(self, "users", users)
        object.__setattr__(self, "sampling_prob", p)
        object.__setattr__(self, "min_sep", b)
        object.__setattr__(self, "num_users", u)

    def __setattr__(self, name, value):  # immutable
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)

        def flatten(obj):
            return (obj.users,), (obj.sampling_prob, obj.min_sep, obj.num_users)

        def unflatten(aux, children):
            obj = object.__new__(cls)
            object.__setattr__(obj, "users", children[0])
            object.__setattr__(obj, "sampling_prob", aux[0])
            object.__setattr__(obj, "min_sep", aux[1])
            object.__setattr__(obj, "num_users", aux[2])
            return obj

        jax.tree_util.register_pytree_node(cls, flatten, unflatten)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_examples={self.dataset_size}, num_users={self.num_users}, "
                f"sampling_prob={self.sampling_prob}, min_sep={self.min_sep})")

    @property
    def dataset_size(self) -> int:
        """Number of examples ``m``."""
        return int(self.users.shape[0])

    @property
    def user_of_example(self) -> jax.Array:
        """The attribution matrix, shape ``(m, k)``, ``int32``, ``-1`` = padding."""
        return self.users

    def _pb(self):
        return jnp.float32(self.sampling_prob), jnp.int32(self.min_sep)

    def init(self, key: jax.Array | None = None, *, burn_in: int = 0) -> SamplerState:
        """Initial state: cold start (all available), optionally followed by ``burn_in`` discarded
        iterations (the paper's substitute for a warm start, Sec. 6.1; the stationary law has no
        closed form here).

        Parameters
        ----------
        key:
            PRNG key; required when ``burn_in > 0``.
        burn_in:
            Number of iterations ``>= 0`` to simulate (and discard) before training.
        """
        nb = check_int("burn_in", burn_in, low=0)
        blocked0 = jnp.zeros((self.dataset_size,), jnp.int32)
        if nb == 0:
            return SamplerState(blocked0)
        key = _require_key(key, "burn_in > 0")
        p, b = self._pb()
        final, _ = _scan_multi(key, blocked0, self.users, p, b, nb, self.num_users,
                               self._BLOCK_ON_SAMPLED)
        return SamplerState(final)

    def step(self, key: jax.Array, state: SamplerState) -> tuple[SamplerState, jax.Array]:
        """One iteration; returns the new state and a ``bool`` batch mask of shape ``(m,)``."""
        blocked = _check_state(state, self.dataset_size)
        p, b = self._pb()
        new, mask = _jit_multi_step(key, blocked, self.users, p, b, self.num_users,
                                    self._BLOCK_ON_SAMPLED)
        return SamplerState(new), mask

    def sample_batches(self, key: jax.Array, iterations: int, *, burn_in: int = 0,
                       state: SamplerState | None = None, return_state: bool = False):
        """Run ``iterations`` steps with :func:`jax.lax.scan`.

        ``key`` is split into ``(k_init, k_run)``; ``k_init`` drives :meth:`init` (``burn_in``),
        ignored when ``state`` is given. Returns a ``bool`` mask of shape
        ``(iterations, num_examples)`` (and the final state if ``return_state``).
        """
        n = check_count("iterations", iterations)
        check_bool("return_state", return_state)
        k_init, k_run = jax.random.split(key)
        blocked0 = (self.init(k_init, burn_in=burn_in).blocked if state is None
                    else _check_state(state, self.dataset_size))
        p, b = self._pb()
        final, masks = _scan_multi(k_run, blocked0, self.users, p, b, n, self.num_users,
                                   self._BLOCK_ON_SAMPLED)
        return (masks, SamplerState(final)) if return_state else masks

    def user_participation(self, masks: jax.Array) -> jax.Array:
        """Map example masks ``(..., m)`` to user masks ``(..., num_users)``: a user participates
        in a batch iff at least one example attributed to it does."""
        masks = jnp.asarray(masks, bool)
        m, k = self.users.shape
        seg = jnp.where(self.users >= 0, self.users, self.num_users).reshape(-1)

        def one(mask):
            vals = jnp.broadcast_to(mask[:, None], (m, k)).reshape(-1).astype(jnp.int32)
            return (jax.ops.segment_max(vals, seg, num_segments=self.num_users + 1) > 0)[:-1]

        flat = masks.reshape(-1, m)
        return jax.vmap(one)(flat).reshape(masks.shape[:-1] + (self.num_users,))


@float64
class MultiAttributionSampler(_MultiAttributionBase):
    r"""Multi-attribution b-min-sep subsampling (Alg. 3, Sec. 6.1).

    With :math:`U(e)` the users of example :math:`e` and
    :math:`N(e) = \{e' : U(e') \cap U(e) \ne \emptyset\}`, iteration :math:`i` draws
    :math:`S_i \ni e` independently w.p. :math:`p` for **every** example, then

    .. math:: B_i = S_i \setminus \bigcup_{j=\max(1, i-b+1)}^{i-1} \bigcup_{e \in S_j} N(e).

    Exclusion is triggered by the *interim samples* :math:`S_j`, not by the batches :math:`B_j`:
    an example sampled but itself excluded still blocks its neighbours. Consequently no user has
    examples in two batches closer than :math:`b` (several of its examples may share one batch).
    The state is per example: ``blocked[e]`` is reset to ``b - 1`` whenever some example of
    :math:`N(e)` is in :math:`S_i`. The privacy analysis is Thm. 6.1 (cold start, each user
    pre-processed to at most :math:`k_u` examples -- see :func:`max_examples_per_user`; the cold
    start analysis also dominates a burn-in start).

    Parameters
    ----------
    user_of_example:
        Integer array of shape ``(num_examples,)`` mapping each example to its single user id in
        ``[0, num_users)``; or, for the general setting of the paper, shape
        ``(num_examples, max_users_per_example)`` listing each example's users padded with ``-1``.
    sampling_prob:
        :math:`p \in (0, 1]`.
    min_sep:
        :math:`b \ge 1`.
    num_users:
        Number of user ids (static); default ``max(user_of_example) + 1``. Must exceed every id.

    Raises
    ------
    ValueError
        If a parameter is outside its range.
    """

    _BLOCK_ON_SAMPLED = True
    __slots__ = ()


@float64
class ConjecturalMultiAttributionSampler(_MultiAttributionBase):
    r"""Participation-blocked multi-attribution b-min-sep subsampling (Alg. 4, Sec. 6.3).

    .. warning::
       **Not covered by mcacct's accountant.** The paper only *conjectures* (Conjecture 6.2) that
       the Alg. 3 analysis upper-bounds this scheme; the monotone coupling that proves Thm. 6.1
       fails here. Use it as a batch sampler only, and do not report Alg. 3 privacy guarantees
       for it as if they were proven.

    Identical to :class:`MultiAttributionSampler` except that exclusion is triggered by actual
    participation:

    .. math:: B_i = S_i \setminus \bigcup_{j=\max(1, i-b+1)}^{i-1} \bigcup_{e \in B_j} N(e),

    which excludes fewer examples (larger batches) and still ensures no user participates in two
    batches closer than :math:`b`.

    Parameters
    ----------
    user_of_example, sampling_prob, min_sep, num_users:
        As in :class:`MultiAttributionSampler`.
    """

    _BLOCK_ON_SAMPLED = False
    __slots__ = ()


@float64
def max_examples_per_user(user_of_example: Any) -> int:
    """:math:`k_u`: the largest number of examples attributed to one user (0 if there are none).

    Thm. 6.1 assumes the dataset was pre-processed so that each user has at most :math:`k_u`
    examples; pass this value to the accountant.
    """
    users = np.asarray(_as_user_matrix(user_of_example)[0])
    rows, cols = np.nonzero(users >= 0)
    if rows.size == 0:
        return 0
    # count distinct (example, user) pairs, so a user listed twice for one example counts once
    pairs = np.unique(np.stack([rows, users[rows, cols]], axis=1), axis=0)
    return int(np.bincount(pairs[:, 1]).max())


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
    """
    if not hasattr(sampler, "sample_batches"):
        raise ValueError(f"sampler must be a sampler from mcacct.training.batching; got {type(sampler).__name__}")
    return sampler.sample_batches(key, iterations, **kwargs)
