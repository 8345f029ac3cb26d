r"""The multi-attribution batch samplers (Alg. 3): :class:`MultiAttributionSampler` and
:class:`ConjecturalMultiAttributionSampler`."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.validate import check_bool, check_count, check_int, check_prob
from mcacct.core.precision import float64
from mcacct.training.batching.transitions import SamplerState, jit_multi_step, scan_multi
from mcacct.training.batching.samplers import check_state, require_key

__all__ = ["MultiAttributionSampler", "ConjecturalMultiAttributionSampler", "max_examples_per_user"]


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
        key = require_key(key, "burn_in > 0")
        p, b = self._pb()
        final, _ = scan_multi(key, blocked0, self.users, p, b, nb, self.num_users,
                               self._BLOCK_ON_SAMPLED)
        return SamplerState(final)

    def step(self, key: jax.Array, state: SamplerState) -> tuple[SamplerState, jax.Array]:
        """One iteration; returns the new state and a ``bool`` batch mask of shape ``(m,)``."""
        blocked = check_state(state, self.dataset_size)
        p, b = self._pb()
        new, mask = jit_multi_step(key, blocked, self.users, p, b, self.num_users,
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
                    else check_state(state, self.dataset_size))
        p, b = self._pb()
        final, masks = scan_multi(k_run, blocked0, self.users, p, b, n, self.num_users,
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
    r""":math:`k_u`: the largest number of examples attributed to one user (0 if there are none).

    Thm. 6.1 assumes the dataset was pre-processed so that each user has at most :math:`k_u`
    examples; pass this value to the accountant.

    Parameters
    ----------
    user_of_example : array_like of int
        Shape ``(num_examples,)`` (one user id ``>= 0`` per example) or ``(num_examples, max_users_per_example)``
        (user ids padded with ``-1``), as in :class:`MultiAttributionSampler`.

    Returns
    -------
    int
        :math:`k_u = \max_u |\{e : u \in U(e)\}|` (:math:`U(e)`: the users of example :math:`e`); a user
        listed twice for one example counts that example once.

    Raises
    ------
    ValueError
        If ``user_of_example`` is not a concrete integer array of one of these shapes with at least one example,
        has an id below ``0`` (1-D) or ``-1`` (2-D), or an id ``>= 2**31 - 1``.
    """
    users = np.asarray(_as_user_matrix(user_of_example)[0])
    rows, cols = np.nonzero(users >= 0)
    if rows.size == 0:
        return 0
    # count distinct (example, user) pairs, so a user listed twice for one example counts once
    pairs = np.unique(np.stack([rows, users[rows, cols]], axis=1), axis=0)
    return int(np.bincount(pairs[:, 1]).max())


