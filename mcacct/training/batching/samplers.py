r"""The b-min-sep batch samplers (Alg. 1/2, and App. D's truncation): :class:`BMinSepSampler`,
:class:`TruncatedBMinSepSampler`, :func:`truncate_batch`."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from mcacct.core.validate import check_bool, check_count, check_fields, check_int, check_prob
from mcacct.core.precision import float64
from mcacct.training.batching.transitions import (SamplerState, TruncatedBatch, jit_bminsep_step,
                                                  jit_masks_from_batches, jit_truncate, jit_truncated_step,
                                                  jit_warm_blocked, participation_rate, sampling_prob_from_rate,
                                                  scan_bminsep, scan_truncated)

__all__ = ["BMinSepSampler", "TruncatedBMinSepSampler", "truncate_batch"]


# --------------------------------------------------------------------------------------------
# Samplers
# --------------------------------------------------------------------------------------------


def register_static(cls):
    """Register a frozen dataclass whose fields are all static pytree metadata.

    Parameters
    ----------
    cls : type

    Returns
    -------
    type
        ``cls``, registered with :func:`jax.tree_util.register_pytree_node` (no children; the fields as metadata).
    """
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


def check_state(state: Any, m: int) -> jax.Array:
    """The blocked counters of a :class:`SamplerState` for ``m`` examples, checked.

    Parameters
    ----------
    state : SamplerState
    m : int

    Returns
    -------
    jax.Array
        ``state.blocked`` as ``int32``, shape ``(m,)``.

    Raises
    ------
    ValueError
        If ``state`` is not a :class:`SamplerState` or ``state.blocked`` is not an integer array of shape ``(m,)``.
    """
    blocked = state.blocked if isinstance(state, SamplerState) else None
    if blocked is None:
        raise ValueError(f"state must be a SamplerState; got {type(state).__name__}")
    if tuple(jnp.shape(blocked)) != (m,):
        raise ValueError(f"state.blocked must have shape ({m},) (dataset_size,); "
                         f"got {tuple(jnp.shape(blocked))}")
    if not jnp.issubdtype(jnp.result_type(blocked), jnp.integer):
        raise ValueError(f"state.blocked must be an integer array; got dtype {jnp.result_type(blocked)}")
    return jnp.asarray(blocked, jnp.int32)


def require_key(key: Any, what: str) -> jax.Array:
    """``key`` unless it is ``None``.

    Parameters
    ----------
    key : jax.Array or None
    what : str
        What needs the key, for the message (e.g. ``"a warm start"``).

    Returns
    -------
    jax.Array

    Raises
    ------
    ValueError
        If ``key`` is ``None``.
    """
    if key is None:
        raise ValueError(f"key must be a jax.random key for {what}; got None")
    return key


@float64
@register_static
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
    dataset_size : int
        Number of examples :math:`m \ge 1`.
    sampling_prob : float
        :math:`p \in (0, 1]`, the inclusion probability of an *available* example.
    min_sep : int
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
        check_fields(self, dataset_size=check_count, sampling_prob=check_prob, min_sep=check_count)

    @classmethod
    def from_participation_rate(cls, dataset_size: int, rate: float, min_sep: int) -> "BMinSepSampler":
        r"""Sampler whose stationary participation rate is ``rate`` (:math:`p_0 \in (0, 1/b]`): sampling
        probability :math:`p = p_0 / (1 - p_0 (b - 1))` (:func:`mcacct.core.rates.sampling_prob_from_rate`).

        Parameters
        ----------
        dataset_size : int
        rate : float
            The stationary participation rate :math:`p_0`.
        min_sep : int

        Returns
        -------
        BMinSepSampler

        Raises
        ------
        ValueError
            If ``min_sep`` or ``dataset_size`` is not an integer ``>= 1``, or ``rate`` is not in ``(0, 1/min_sep]``.
        """
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
        key : jax.Array or None, optional
            PRNG key; required for ``warm_start=True``, ignored otherwise.
        warm_start : bool, optional
            ``False``: Alg. 1, every example available (:math:`s_j = 0`); the first batch has rate
            :math:`p`, not :math:`p_0`. ``True`` (Alg. 2): each example independently available
            w.p. :math:`1/(1+(b-1)p)`, otherwise :math:`s_j \sim \mathrm{Uniform}\{1,\dots,b-1\}`
            (the "virtual history": it was in batch :math:`B_{1-i}` for a uniform
            :math:`i \in \{1..b-1\}`, which bars it for a uniform number in ``{1..b-1}`` of
            further iterations). Every batch then has participation rate exactly :math:`p_0`.

        Returns
        -------
        SamplerState

        Raises
        ------
        ValueError
            If ``warm_start`` is not a bool, or ``key`` is ``None`` with ``warm_start=True``.
        """
        warm = check_bool("warm_start", warm_start)
        m = self.dataset_size
        if not warm:
            return SamplerState(jnp.zeros((m,), jnp.int32))
        key = require_key(key, "a warm start")
        p, b = self._pb()
        return SamplerState(jit_warm_blocked(key, p, b, m))

    def step(self, key: jax.Array, state: SamplerState) -> tuple[SamplerState, jax.Array]:
        """One iteration: an example is in the batch iff its coin (``bernoulli(k_coins, p)``) is 1 and its counter 0.

        Parameters
        ----------
        key : jax.Array
        state : SamplerState

        Returns
        -------
        (SamplerState, jax.Array)
            The new state and the batch as a ``bool`` mask of shape ``(dataset_size,)``.

        Raises
        ------
        ValueError
            If ``state`` is not a :class:`SamplerState` with integer ``blocked`` of shape ``(dataset_size,)``.
        """
        blocked = check_state(state, self.dataset_size)
        p, b = self._pb()
        new, mask = jit_bminsep_step(key, blocked, p, b)
        return SamplerState(new), mask

    def sample_batches(self, key: jax.Array, iterations: int, *, warm_start: bool = True,
                       state: SamplerState | None = None, return_state: bool = False):
        """Run ``iterations`` steps with :func:`jax.lax.scan`.

        Parameters
        ----------
        key : jax.Array
            PRNG key, split into ``(k_init, k_run)``.
        iterations : int
            Number of batches ``n >= 1``.
        warm_start : bool, optional
            Passed to :meth:`init` (ignored when ``state`` is given); default True.
        state : SamplerState or None, optional
            Start from this state instead of :meth:`init`.
        return_state : bool, optional
            Also return the final state; default False.

        Returns
        -------
        jax.Array or (jax.Array, SamplerState)
            ``bool`` participation mask of shape ``(iterations, dataset_size)``.

        Raises
        ------
        ValueError
            If ``iterations`` is not an integer ``>= 1``, a flag is not a bool, or ``state`` is invalid (:meth:`step`).
        """
        n = check_count("iterations", iterations)
        check_bool("return_state", return_state)
        k_init, k_run = jax.random.split(key)
        blocked0 = (self.init(k_init, warm_start=warm_start).blocked if state is None
                    else check_state(state, self.dataset_size))
        p, b = self._pb()
        final, masks = scan_bminsep(k_run, blocked0, p, b, n)
        return (masks, SamplerState(final)) if return_state else masks


@float64
@register_static
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
    dataset_size, sampling_prob, min_sep : int, float, int
        As in :class:`BMinSepSampler`.
    max_batch_size : int
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
        check_fields(self, dataset_size=check_count, sampling_prob=check_prob, min_sep=check_count,
                     max_batch_size=check_count)

    @classmethod
    def from_participation_rate(cls, dataset_size: int, rate: float, min_sep: int,
                                max_batch_size: int) -> "TruncatedBMinSepSampler":
        r"""Sampler whose untruncated stationary participation rate is ``rate``.

        Parameters
        ----------
        dataset_size, rate, min_sep, max_batch_size : int, float, int, int
            As in :meth:`BMinSepSampler.from_participation_rate` and the class.

        Returns
        -------
        TruncatedBMinSepSampler

        Raises
        ------
        ValueError
            As :meth:`BMinSepSampler.from_participation_rate`, or if ``max_batch_size`` is not an integer ``>= 1``.
        """
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
        """One iteration: new state and a :class:`TruncatedBatch` of length ``max_batch_size``.

        Parameters
        ----------
        key : jax.Array
            Split into ``(k_coins, k_aux)``; ``k_aux`` draws the random subset.
        state : SamplerState
            Checked as in :meth:`BMinSepSampler.step` (``ValueError`` if invalid).

        Returns
        -------
        (SamplerState, TruncatedBatch)
        """
        blocked = check_state(state, self.dataset_size)
        p, b = jnp.float32(self.sampling_prob), jnp.int32(self.min_sep)
        new, batch = jit_truncated_step(key, blocked, p, b, self.max_batch_size)
        return SamplerState(new), batch

    def sample_index_batches(self, key: jax.Array, iterations: int, *, warm_start: bool = True,
                             state: SamplerState | None = None, return_state: bool = False):
        """Run ``iterations`` steps; returns a :class:`TruncatedBatch` with a leading axis.

        ``indices`` and ``valid`` have shape ``(iterations, max_batch_size)``, ``num_sampled``
        shape ``(iterations,)``. Key handling as in :meth:`BMinSepSampler.sample_batches`.

        Parameters
        ----------
        key, iterations, warm_start, state, return_state
            As in :meth:`BMinSepSampler.sample_batches`, which also lists the errors raised.

        Returns
        -------
        TruncatedBatch or (TruncatedBatch, SamplerState)
        """
        n = check_count("iterations", iterations)
        check_bool("return_state", return_state)
        k_init, k_run = jax.random.split(key)
        blocked0 = (self.init(k_init, warm_start=warm_start).blocked if state is None
                    else check_state(state, self.dataset_size))
        p, b = jnp.float32(self.sampling_prob), jnp.int32(self.min_sep)
        final, batches = scan_truncated(k_run, blocked0, p, b, n, self.max_batch_size)
        return (batches, SamplerState(final)) if return_state else batches

    def sample_batches(self, key: jax.Array, iterations: int, *, warm_start: bool = True,
                       state: SamplerState | None = None, return_state: bool = False):
        """As :meth:`sample_index_batches`, but returns the truncated batches as a ``bool`` mask
        of shape ``(iterations, dataset_size)`` (padding entries are not marked).

        Parameters
        ----------
        key, iterations, warm_start, state, return_state
            As in :meth:`BMinSepSampler.sample_batches`, which also lists the errors raised.

        Returns
        -------
        jax.Array or (jax.Array, SamplerState)
        """
        out = self.sample_index_batches(key, iterations, warm_start=warm_start, state=state,
                                        return_state=return_state)
        batches, final = out if return_state else (out, None)
        masks = jit_masks_from_batches(batches, self.dataset_size)
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
    key : jax.Array
        PRNG key for the random subset.
    mask : jax.Array
        ``bool`` array of shape ``(m,)``.
    max_batch_size : int
        :math:`B_{\max} \ge 1` (static).

    Returns
    -------
    TruncatedBatch
        ``indices`` and ``valid`` of shape ``(max_batch_size,)``; ``num_sampled`` is :math:`|B|`.

    Raises
    ------
    ValueError
        If ``max_batch_size`` is not an integer ``>= 1`` or ``mask`` is not one-dimensional.
    """
    bmax = check_int("max_batch_size", max_batch_size, low=1)
    if jnp.ndim(mask) != 1:
        raise ValueError(f"mask must be a 1-D boolean array; got shape {jnp.shape(mask)}")
    return jit_truncate(key, jnp.asarray(mask, bool), bmax)


