r"""The DPIS batch sampler: importance sampling by clipped gradient norm with the rejection-sampling filter of
Wei, Bao, Xiao & Yang 2022 (arXiv:2210.09634, Sec. 3.2-3.4, Alg. 1), and its auxiliary releases.

Everything is a pure function of explicit :mod:`jax.random` keys with shapes fixed by ``dataset_size``, so it
runs under :func:`jax.jit` / :func:`jax.lax.scan`; :class:`DPISSampler` is an immutable pytree whose fields are
static metadata. It uses the same reading of the paper as the accountant (:mod:`mcacct.dpis`, docs/dpis.md).

One iteration (``step``; :math:`\tilde K` and :math:`\tilde N` are released values)
------------------------------------------------------------------------------------
1. Filter: record :math:`i` is a candidate with probability :math:`q_i = \min(b\hat g_i/\tilde K, 1)`, where the
   state :math:`\hat g_i = k\max(\|\bar g^{\mathrm{prev}}_i\|, g_L)` (:meth:`DPISSampler.init`, updated on
   candidates).
2. Accept: a candidate's gradient :math:`g_i` is clipped to :math:`\min(\hat g_i, C)`, giving
   :math:`\bar g_i` (norm :math:`\nu_i = \min(\|g_i\|, \hat g_i, C)`), and accepted with probability
   :math:`p_i = \nu_i/\hat g_i`.
3. With :math:`\tilde K \ge kbC` no :math:`q_i` caps at 1, so record :math:`i` is in the batch with probability
   (eq. 15)

   .. math:: \pi_i = q_i p_i = b\,\nu_i/\tilde K,

   and gets the weight of eq. (7) read with :math:`p(x_i) = \pi_i/b` and :math:`N\to\tilde N`:
   :math:`w_i = b/(\tilde N\pi_i) = \tilde K/(\tilde N\nu_i)`. The noisy gradient is
   :math:`\tilde g = \frac1b\big(\sum_{i\in\mathcal B} w_i\bar g_i + \mathcal N(0, \sigma_G^2C^2I)\big)`
   (:func:`noisy_gradient`), unbiased for :math:`\frac{1}{\tilde N}\sum_i\bar g_i`; every included record
   contributes a vector of norm :math:`\tilde K/\tilde N` (the accountant's sensitivity).

:math:`\tilde K < kbC` is refused with ``ValueError`` (concrete values); under ``jit`` with a traced
:math:`\tilde K` the check cannot raise, so :class:`DPISBatch` carries ``covered`` (``False``: the iteration is
not covered by the accountant and must not be used). This needs :math:`\hat g_i \le kC`, as in every state of
the same sampler: a concrete state above it (e.g. built for a larger clip) is refused, a traced one clamped to kC.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.validate import check_int, check_real, is_traced
from mcacct.core.precision import float64

__all__ = ["DPISState", "DPISBatch", "DPISSampler", "importance_sample", "noisy_gradient", "noisy_count",
           "noisy_norm_sum", "refine_k_tilde"]


class DPISState(NamedTuple):
    r"""Per-record filter numerators :math:`\hat g_i = k\max(\|\bar g_i\|, g_L)`, float64, shape ``(N,)``."""

    g_hat: jax.Array


class DPISBatch(NamedTuple):
    r"""One DPIS batch, every array of shape ``(N,)``.

    Attributes
    ----------
    candidates : bool
        :math:`\mathcal X_q`, the filtered records (their gradients are needed).
    mask : bool
        :math:`\mathcal X_p`, the batch.
    inclusion_prob : float
        :math:`\pi_i = q_i p_i` (0 where the gradient norm is 0; meaningful on candidates' norms).
    clip_scale : float
        :math:`\bar g_i = \mathrm{clip\_scale}_i\, g_i` (clip to :math:`\min(\hat g_i, C)`).
    weight : float
        :math:`w_i = b/(\tilde N\pi_i)` on the batch, 0 elsewhere.
    covered : bool scalar
        :math:`\tilde K \ge kbC` (the accountant covers the iteration; the numerators used are
        :math:`\min(\hat g_i, kC)`, so then no filter probability caps at 1, whatever the state).
    """

    candidates: jax.Array
    mask: jax.Array
    inclusion_prob: jax.Array
    clip_scale: jax.Array
    weight: jax.Array
    covered: jax.Array


def _register_static(cls):
    names = tuple(f.name for f in dataclasses.fields(cls))

    def unflatten(aux, _children):
        obj = object.__new__(cls)
        for n, v in zip(names, aux):
            object.__setattr__(obj, n, v)
        return obj

    jax.tree_util.register_pytree_node(cls, lambda o: ((), tuple(getattr(o, n) for n in names)), unflatten)
    return cls


def _scalar(name: str, value: Any, low: float, low_open: bool = True) -> Any:
    return value if is_traced(value) else check_real(name, value, low=low, low_open=low_open)


def _norms(name: str, norms: Any, m: int, high: float | None = None) -> jax.Array:
    if not is_traced(norms):  # concrete: checked on the host (inside a trace, jnp ops would give tracers)
        host = np.asarray(norms, np.float64)
        if host.shape != (m,):
            raise ValueError(f"{name} must have shape ({m},) (dataset_size,); got {tuple(host.shape)}")
        if not np.all(np.isfinite(host) & (host >= 0)):
            raise ValueError(f"{name} must hold finite gradient norms >= 0")
        if high is not None and host.max(initial=0.0) > high:  # a DPISState of another clip bound or k
            raise ValueError(f"{name} must be in [0, k*clip = {high!r}] (a state built for a larger clip or k lets "
                             f"a record's contribution exceed K~/N~; re-init it); got max {host.max()!r}")
    arr = jnp.asarray(norms, jnp.float64)
    if arr.shape != (m,):
        raise ValueError(f"{name} must have shape ({m},) (dataset_size,); got {tuple(arr.shape)}")
    return arr


@jax.jit
def _filter(key, g_hat, k_tilde, b):
    q = jnp.minimum(b * g_hat / k_tilde, 1.0)
    return jax.random.uniform(key, g_hat.shape, jnp.float64) < q, q


@jax.jit
def _accept(key, g_hat, candidates, q, norms, k_tilde, n_tilde, b, c, k, g_l):
    bound = jnp.minimum(g_hat, c)
    nu = jnp.minimum(norms, bound)                                   # ||g_bar||: clipped to min(g_hat, C)
    scale = jnp.where(norms > bound, bound / jnp.where(norms > 0, norms, 1.0), 1.0)
    p = nu / g_hat
    mask = candidates & (jax.random.uniform(key, g_hat.shape, jnp.float64) < p)
    pi = q * p
    weight = jnp.where(mask, b / (n_tilde * jnp.where(pi > 0, pi, 1.0)), 0.0)
    new = jnp.where(candidates, k * jnp.maximum(nu, g_l), g_hat)
    return DPISState(new), DPISBatch(candidates, mask, pi, scale, weight, k_tilde >= k * b * c)


@float64
@_register_static
@dataclasses.dataclass(frozen=True)
class DPISSampler:
    r"""DPIS importance sampling with the rejection-sampling filter (module docstring).

    Parameters
    ----------
    dataset_size : int
        :math:`N \ge 1` (array shapes).
    batch_size : float
        Expected batch size :math:`b > 0`.
    clip : float
        Clip bound :math:`C > 0`.
    k : float, default 5
        Probability multiplier :math:`k \ge 1` (Table 2: 5, or 3 for IMDb).
    g_lower : float, optional
        Lower bound :math:`g_L \in (0, C]` of the filter numerators; default :math:`C/100`.
    """

    dataset_size: int
    batch_size: float
    clip: float
    k: float = 5.0
    g_lower: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dataset_size", check_int("dataset_size", self.dataset_size, low=1))
        object.__setattr__(self, "batch_size", check_real("batch_size", self.batch_size, low=0.0, low_open=True))
        object.__setattr__(self, "clip", check_real("clip", self.clip, low=0.0, low_open=True))
        object.__setattr__(self, "k", check_real("k", self.k, low=1.0))
        gl = self.clip / 100 if self.g_lower is None else self.g_lower
        object.__setattr__(self, "g_lower", check_real("g_lower", gl, low=0.0, high=self.clip, low_open=True))

    def check_k_tilde(self, k_tilde: Any) -> Any:
        r"""``k_tilde`` if :math:`\tilde K \ge kbC`; traced values pass unchecked.

        Parameters
        ----------
        k_tilde : float or jax.Array

        Returns
        -------
        float or jax.Array

        Raises
        ------
        ValueError
            For a concrete ``k_tilde`` below ``k * batch_size * clip``.
        """
        kt = _scalar("k_tilde", k_tilde, 0.0)
        if not is_traced(kt) and kt < self.k * self.batch_size * self.clip:
            raise ValueError(f"k_tilde must be >= k*batch_size*clip = {self.k * self.batch_size * self.clip!r} "
                             f"(below it the filter probability b*g_hat/k_tilde can cap at 1 and the privacy "
                             f"analysis of rejection sampling does not apply); got {kt!r}")
        return kt

    def init(self, norms: Any) -> DPISState:
        r"""State at the start of an epoch from every record's gradient norm (Alg. 1 lines 9-11).

        :math:`\hat g_i = k\max(\min(\|g_i\|, C), g_L)`.

        Parameters
        ----------
        norms : array_like
            Gradient norms :math:`\|g_i\| \ge 0`, shape ``(N,)``.

        Returns
        -------
        DPISState

        Raises
        ------
        ValueError
            For concrete norms of another shape, not finite or negative.
        """
        n = _norms("norms", norms, self.dataset_size)
        return DPISState(self.k * jnp.maximum(jnp.minimum(n, self.clip), self.g_lower))

    def _g_hat(self, state: Any) -> jax.Array:
        if not isinstance(state, DPISState):
            raise ValueError(f"state must be a DPISState; got {type(state).__name__}")
        cap = self.k * self.clip  # concrete: refused above k*clip; traced: clamped, so `covered` stays true
        return jnp.minimum(_norms("state.g_hat", state.g_hat, self.dataset_size, cap), cap)

    def filter(self, key: jax.Array, state: DPISState, k_tilde: Any) -> tuple[jax.Array, jax.Array]:
        r"""Step 1: the candidates :math:`\mathcal X_q` and their probabilities :math:`q_i`.

        Parameters
        ----------
        key : jax.Array
        state : DPISState
        k_tilde : float or jax.Array
            :math:`\tilde K` (:meth:`check_k_tilde`).

        Returns
        -------
        candidates : jax.Array
            bool, shape ``(N,)``.
        q : jax.Array
            :math:`q_i = \min(b\min(\hat g_i, kC)/\tilde K, 1)`, shape ``(N,)``.

        Raises
        ------
        ValueError
            For an invalid ``state`` (a concrete numerator above :math:`kC`) or a concrete ``k_tilde`` below
            :math:`kbC`.
        """
        return _filter(key, self._g_hat(state), self.check_k_tilde(k_tilde), self.batch_size)

    def accept(self, key: jax.Array, state: DPISState, candidates: jax.Array, q: jax.Array, norms: Any,
               k_tilde: Any, n_tilde: Any) -> tuple[DPISState, DPISBatch]:
        r"""Steps 2-3 given the candidates' current gradient norms: the new state and the batch.

        Parameters
        ----------
        key : jax.Array
        state : DPISState
        candidates, q : jax.Array
            The output of :meth:`filter`, shape ``(N,)``.
        norms : array_like
            Current gradient norms, shape ``(N,)``; entries of non-candidates are ignored.
        k_tilde : float or jax.Array
            :math:`\tilde K` (:meth:`check_k_tilde`).
        n_tilde : float or jax.Array
            :math:`\tilde N > 0`.

        Returns
        -------
        state : DPISState
            The numerators, updated on the candidates.
        batch : DPISBatch

        Raises
        ------
        ValueError
            For invalid concrete arguments.
        """
        kt = self.check_k_tilde(k_tilde)
        nt = _scalar("n_tilde", n_tilde, 0.0)
        return _accept(key, self._g_hat(state), candidates, q, _norms("norms", norms, self.dataset_size), kt, nt,
                       self.batch_size, self.clip, self.k, self.g_lower)

    def step(self, key: jax.Array, state: DPISState, norms: Any, k_tilde: Any,
             n_tilde: Any) -> tuple[DPISState, DPISBatch]:
        """One iteration: ``key`` splits into ``(k_filter, k_accept)`` for :meth:`filter` and :meth:`accept`.

        Parameters
        ----------
        key : jax.Array
        state : DPISState
        norms, k_tilde, n_tilde
            As in :meth:`accept`.

        Returns
        -------
        state : DPISState
        batch : DPISBatch

        Raises
        ------
        ValueError
            For invalid concrete arguments.
        """
        k_filter, k_accept = jax.random.split(key)
        candidates, q = self.filter(k_filter, state, k_tilde)
        return self.accept(k_accept, state, candidates, q, norms, k_tilde, n_tilde)


@float64
def importance_sample(key: jax.Array, norms: Any, k_tilde: Any, n_tilde: Any, batch_size: float,
                      clip: float) -> DPISBatch:
    r"""Plain DPIS importance sampling without the filter (Sec. 3.2-3.3; every norm known).

    Record :math:`i` is in the batch with probability :math:`\pi_i = b\min(\|g_i\|, C)/\tilde K`, weight
    :math:`b/(\tilde N\pi_i)`.

    Parameters
    ----------
    key : jax.Array
    norms : array_like
        Gradient norms of every record, shape ``(N,)``.
    k_tilde : float or jax.Array
        :math:`\tilde K \ge bC`.
    n_tilde : float or jax.Array
        :math:`\tilde N > 0`.
    batch_size : float
        Expected batch size :math:`b > 0`.
    clip : float
        Clip bound :math:`C > 0`.

    Returns
    -------
    DPISBatch
        ``covered`` is ``False`` for a traced :math:`\tilde K < bC`.

    Raises
    ------
    ValueError
        For concrete values with :math:`\tilde K < bC`, or an argument out of range.
    """
    b = check_real("batch_size", batch_size, low=0.0, low_open=True)
    c = check_real("clip", clip, low=0.0, low_open=True)
    kt = _scalar("k_tilde", k_tilde, 0.0)
    if not is_traced(kt) and kt < b * c:
        raise ValueError(f"k_tilde must be >= batch_size*clip = {b * c!r} (probabilities <= 1); got {kt!r}")
    n = jnp.asarray(norms, jnp.float64)
    # the filter with g_hat = C (k = 1): candidates w.p. q = b C / k_tilde, accepted w.p. p = nu / C
    k_filter, k_accept = jax.random.split(key)
    g_hat = jnp.full(n.shape, c)
    candidates, q = _filter(k_filter, g_hat, kt, b)
    _, batch = _accept(k_accept, g_hat, candidates, q, n, kt, _scalar("n_tilde", n_tilde, 0.0), b, c, 1.0, c)
    return batch


@float64
def noisy_gradient(key: jax.Array, grads: jax.Array, batch: DPISBatch, sigma_g: Any, clip: float,
                   batch_size: float) -> jax.Array:
    r"""The noisy gradient :math:`\tilde g` of a batch.

    :math:`\tilde g = \frac1b\big(\sum_i w_i\,\mathrm{clip\_scale}_i\,g_i + \mathcal N(0, \sigma_G^2C^2I)\big)`.

    Parameters
    ----------
    key : jax.Array
    grads : jax.Array
        Per-record gradients, shape ``(N, ...)`` (rows outside the batch are ignored).
    batch : DPISBatch
    sigma_g, clip, batch_size : float
        :math:`\sigma_G`, :math:`C` and :math:`b`.

    Returns
    -------
    jax.Array
        :math:`\tilde g`, of the shape of one gradient.
    """
    g = jnp.asarray(grads)
    coef = (batch.weight * batch.clip_scale).reshape((-1,) + (1,) * (g.ndim - 1))
    total = jnp.sum(jnp.where(coef != 0, coef * g, 0.0), axis=0)
    noise = jax.random.normal(key, total.shape, total.dtype) * (sigma_g * clip)
    return (total + noise) / batch_size


@float64
def noisy_count(key: jax.Array, n: Any, sigma_n: Any) -> jax.Array:
    r""":math:`\tilde N = N + \mathcal N(0, \sigma_N^2)` (eq. 10).

    Parameters
    ----------
    key : jax.Array
    n, sigma_n : float or jax.Array
        :math:`N` and :math:`\sigma_N`.

    Returns
    -------
    jax.Array
        A float64 scalar.
    """
    return jnp.asarray(n, jnp.float64) + sigma_n * jax.random.normal(key, (), jnp.float64)


@float64
def noisy_norm_sum(key: jax.Array, norms: Any, clip: Any, p_k: Any, sigma_k: Any) -> jax.Array:
    r""":math:`K' = \frac1{p_K}\sum_{i\in B_K}\min(\|g_i\|, C) + \mathcal N(0, \sigma_K^2C^2)` (eq. 11).

    :math:`B_K` is a Poisson sample of rate :math:`p_K` (sensitivity :math:`C/p_K`; accounted by
    :func:`mcacct.dpis.norm_sum_spec`).

    Parameters
    ----------
    key : jax.Array
    norms : array_like
        Gradient norms of every record, shape ``(N,)``.
    clip, p_k, sigma_k : float or jax.Array
        :math:`C`, :math:`p_K` and :math:`\sigma_K`.

    Returns
    -------
    jax.Array
        A float64 scalar.
    """
    k_sample, k_noise = jax.random.split(key)
    n = jnp.minimum(jnp.asarray(norms, jnp.float64), clip)
    keep = jax.random.uniform(k_sample, n.shape, jnp.float64) < p_k
    return jnp.sum(jnp.where(keep, n, 0.0)) / p_k + sigma_k * clip * jax.random.normal(k_noise, (), jnp.float64)


@float64
def refine_k_tilde(k_prime: Any, n_tilde: Any, batch_size: Any, clip: Any, *, k: Any = 1.0, floor: Any = 0.0,
                   xi: Any = 1e-6) -> jax.Array:
    r"""Eq. (12) with the lower bounds given priority.

    :math:`\tilde K = \max(\min(K', \tilde NC), kbC + \xi, \mathrm{floor})` (``floor``: a plan's :math:`\kappa_eNC`,
    :meth:`mcacct.dpis.DPISPlan.k_tilde_floor`). The lower bounds are what the privacy analysis needs; the cap
    :math:`\tilde NC` only helps utility, so it yields when :math:`\tilde NC` is below them (eq. 12 as printed would
    then return :math:`\tilde NC`).

    Parameters
    ----------
    k_prime, n_tilde, batch_size, clip : float or jax.Array
        :math:`K'`, :math:`\tilde N`, :math:`b` and :math:`C`.
    k : float or jax.Array, default 1.0
        Rejection-sampling multiplier.
    floor : float or jax.Array, default 0.0
    xi : float or jax.Array, default 1e-6
        Margin :math:`\xi` above :math:`kbC`.

    Returns
    -------
    jax.Array
        :math:`\tilde K`, float64.
    """
    low = jnp.maximum(k * batch_size * clip + xi, floor)
    return jnp.maximum(jnp.minimum(jnp.asarray(k_prime, jnp.float64), n_tilde * clip), low)
