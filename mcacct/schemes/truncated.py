r"""Truncated (fixed-batch-size) b-min-sep subsampling: accounting for Dong & Ganesh 2026 [arXiv:2602.09338], App. D.

Sampler. Batches are formed by b-min-sep subsampling (Alg. 1 or Alg. 2) of ``M`` examples and then
truncated to a uniformly random subset of ``B_max`` examples when larger (and padded with zero-gradient
examples when smaller). An example dropped by truncation still blocks itself for the next ``b - 1``
iterations: the participation process is that of untruncated b-min-sep.

Adversary. As in App. D the adversary additionally sees, for every iteration ``i``, the number ``r_i`` of
*other* examples drawn before truncation (released as post-processing-free side information: its law is
the same on both datasets, so the guarantee only gets weaker). Given :math:`r = (r_i)`, the sensitive
example is drawn as usual and, when drawn at ``i``, truncation happens iff :math:`r_i + 1 > B_{max}`, in
which case it survives with probability :math:`w_i = B_{max}/(r_i + 1)`.

Dominating pair (Lemma D.1, Cor. D.2, zero-out adjacency). Relative to the batch without the example, the
worst case gives (``C`` banded, ``k <= b``)

.. math::
    P_r = \sum_x \Pr[x \mid r]\, N(C x, \sigma^2 I), \qquad Q_r = \sum_{x'} \Pr[x' \mid r]\, N(C x', \sigma^2 I),

with per-iteration amplitudes ``x_i = 2`` (drawn, truncated, survives), ``1`` (drawn, no truncation),
``0`` otherwise, and ``x'_i = -1`` (drawn, truncated, survives), ``0`` otherwise: a surviving example
replaces one other example whose gradient may point the opposite way (``g - v``, norm 2, on one side and
``-v`` on the other). **Both** sides are mixtures, so ``Q`` is not a single Gaussian.

Losses. With :math:`R = N(0, \sigma^2 I)`, both :math:`P_r/R` and :math:`Q_r/R` follow the recursion of
Theorem 5.1 with participation probability ``p`` and an iteration-dependent participation term.
With :math:`s_i = \langle c^{(i)}, y\rangle/\sigma^2`, :math:`v_i = \|c^{(i)}\|^2/\sigma^2`:

.. math::
    \ln\frac{P_r}{R}: \quad \ell^P_i = \begin{cases} s_i - v_i/2 & r_i < B_{max} \\
        \ln\big(w_i e^{2 s_i - 2 v_i} + 1 - w_i\big) & r_i \ge B_{max} \end{cases}
    \qquad
    \ln\frac{Q_r}{R}: \quad \ell^Q_i = \begin{cases} 0 & r_i < B_{max} \\
        \ln\big(w_i e^{-s_i - v_i/2} + 1 - w_i\big) & r_i \ge B_{max} \end{cases}

in :math:`f_i = (1-p) f_{i+1} + p\, e^{\ell_i} f_{i+b}`, :math:`f_i = 1` for :math:`i > n`. The warm start
combines each side separately, :math:`(f_1 + p \sum_{i=2}^b f_i)/(1 + (b-1)p)`, *before* the ratio, and

.. math::  L(y; r) = \ln\frac{P_r}{R}(y) - \ln\frac{Q_r}{R}(y).

The ``remove`` direction samples ``(r, y ~ P_r)`` and returns ``L``; ``add`` samples ``(r, y ~ Q_r)`` and
returns ``-L``. Since ``r`` has the same law under both datasets, the hockey-stick divergence of the
augmented pair is :math:`E_r[H(P_r \| Q_r)]`, which is what these samples estimate.

Law of ``r``. The ``M - 1`` other examples run independent b-min-sep chains; an example drawn at ``j`` is
blocked for ``j+1..j+b-1``, so

.. math::  r_i \mid r_{<i} \sim \mathrm{Binom}\Big(M - 1 - \sum_{j=i-b+1}^{i-1} r_j,\ p\Big),

with ``r_j = 0`` for ``j < 1`` (cold start) or, for the warm start, the virtual history
``(r_0, r_{-1}, ..., r_{2-b})`` multinomial with ``M - 1`` trials and cell probabilities
``p / (1 + (b-1) p)`` (the rest stays available). This is exact and costs ``n`` binomial draws per sample.
With ``B_max >= M`` truncation never happens, ``Q_r = R`` and the loss is that of
:class:`mcacct.schemes.bminsep.BMinSep` on the same ``y``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.schemes.strategy import check_strategy_type
from mcacct.validate import check_bool, check_call, check_count, check_fields, check_prob, is_traced
from mcacct.schemes.base import Draws, LossErrorParams, Scheme, jit_method
from mcacct.kernels.sliding import mean_shift_amplitudes, sliding_dot
from mcacct.kernels.normal import standard_normal
from mcacct.schemes.bminsep import BMinSep, log_ratio_from_terms, sample_participation
from mcacct.precision import float64

__all__ = ["TruncatedBMinSep"]


@float64
@dataclass(frozen=True)
class TruncatedBMinSep(Scheme):
    r"""Truncated b-min-sep subsampling (App. D) with dataset size ``M`` and maximum batch size ``B_max``.

    Parameters
    ----------
    sampling_prob:
        ``p`` in ``(0, 1]``.
    min_sep:
        ``b >= 1`` (``b = 1``: truncated Poisson sampling).
    iterations:
        ``n >= 1``.
    dataset_size:
        ``M >= 1``, the number of examples (the sensitive one included).
    max_batch_size:
        ``B_max >= 1``; larger batches are truncated to a uniformly random subset of this size.
    warm_start:
        Alg. 2 (default) or Alg. 1 for every example.
    """

    sampling_prob: float
    min_sep: int
    iterations: int
    dataset_size: int
    max_batch_size: int
    warm_start: bool = True

    def __post_init__(self) -> None:
        check_fields(self, sampling_prob=check_prob, min_sep=check_count, iterations=check_count,
                     dataset_size=check_count, max_batch_size=check_count, warm_start=check_bool)
        if self.dataset_size >= 2**31:
            raise ValueError(f"dataset_size must be below 2**31; got {self.dataset_size}")

    @property
    def base(self):
        """The untruncated :class:`~mcacct.schemes.bminsep.BMinSep` with the same ``p, b, n`` and start."""
        return BMinSep(self.sampling_prob, self.min_sep, self.iterations, self.warm_start)

    @property
    def participation_rate(self) -> float:
        """Stationary rate of being *drawn* (before truncation), ``1 / (1/p + b - 1)``."""
        return self.base.participation_rate

    @property
    def can_truncate(self) -> bool:
        """Whether a batch with the sensitive example can exceed ``B_max`` (``M > B_max``)."""
        return self.dataset_size > self.max_batch_size

    # -- AccountedScheme ---------------------------------------------------------------------------------
    def check_strategy(self, strategy) -> None:
        """``strategy`` must be a :class:`~mcacct.schemes.strategy.BandedToeplitz` with ``len(c_col) <= min_sep``."""
        check_strategy_type("strategy", strategy)
        strategy.check_min_sep(self.min_sep)

    def output_coordinate_bound(self, strategy) -> float:
        r""":math:`\max |(C x)_j| \le 2 \max_d |c_d|` over both mixtures' patterns: amplitudes are in
        ``{0, 1, 2}`` (``P``) and ``{0, -1}`` (``Q``) at draws at least ``min_sep >= len(c_col)`` apart, so each
        output coordinate receives at most one entry of ``c`` (used by :mod:`mcacct.engine.systematic`)."""
        self.check_strategy(strategy)
        return (2.0 if self.can_truncate else 1.0) * float(max(abs(v) for v in strategy.c_col))

    def sensitivity_bound(self, strategy) -> float:
        r"""``3 sqrt(ceil(n/b)) ||c||`` (``1 x`` when ``M <= B_max``).

        Coupling the two mixtures through the same draw, the means differ by ``C (x - x')`` with
        ``x - x'`` in ``{0, 1, 3}`` at each of at most ``ceil(n/b)`` separated draws; by joint convexity the
        pair is dominated by a Gaussian mechanism with that sensitivity.
        """
        self.check_strategy(strategy)
        factor = 3.0 if self.can_truncate else 1.0
        return factor * strategy.worst_case_sensitivity(self.iterations, self.min_sep)

    def sample_other_counts(self, key: jax.Array, num_samples: int) -> jax.Array:
        """``r``: the numbers of other examples drawn per iteration, shape ``(num_samples, n)``, int32."""
        check_call(self, num_samples=num_samples)
        return _sample_other_counts(key, self, num_samples)

    def draw(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        """``Draws(y, r)``: ``y ~ P_r`` (``"remove"``) or ``y ~ Q_r`` (``"add"``), both of shape
        ``(num_samples, n)``, ``r`` the counts of other examples drawn per iteration. When ``M <= B_max``
        truncation is impossible and ``r`` is returned as zeros (its law is irrelevant)."""
        y, r = self._draw(key, sigma, strategy, num_samples, direction == "remove", dtype)
        return Draws(y, r)

    @jit_method("strategy", "num_samples", "positive", "dtype")
    def _draw(self, key, sigma, strategy, num_samples, positive, dtype):
        k_r, k_x, k_z, k_s = jax.random.split(key, 4)
        if self.can_truncate:
            r = _sample_other_counts(k_r, self, num_samples)
        else:  # r never reaches B_max: its value does not matter, skip the n binomial draws per sample
            r = jnp.zeros((num_samples, self.iterations), jnp.int32)
        x = sample_participation(k_x, self.base, num_samples)
        trunc = r >= self.max_batch_size
        w = self.max_batch_size / (r.astype(jnp.float64) + 1.0)
        survives = jax.random.uniform(k_s, r.shape, dtype=jnp.float64) < w
        if positive:
            amp = jnp.where(trunc, jnp.where(survives, 2.0, 0.0), 1.0)
        else:
            amp = jnp.where(trunc & survives, -1.0, 0.0)
        a = jnp.where(x, amp, 0.0).astype(dtype)
        z = standard_normal(k_z, (num_samples, self.iterations), dtype) * jnp.asarray(sigma, dtype)
        return z + mean_shift_amplitudes(a, strategy.c_col), r

    def _check_counts(self, r, y):
        """``r``: integer counts of shape ``y.shape`` in ``[0, M - 1]`` (values checked unless traced)."""
        if not is_traced(r):
            try:
                r = jnp.asarray(r)
            except Exception as err:  # noqa: BLE001
                raise ValueError(f"r must be an integer array of shape {tuple(y.shape)}; got {r!r}") from err
        if tuple(r.shape) != tuple(y.shape):
            raise ValueError(f"r must have the shape of y, {tuple(y.shape)}; got {tuple(r.shape)}")
        if np.dtype(r.dtype).kind not in "iu":
            raise ValueError(f"r must be an integer array (counts of other examples); got dtype {r.dtype}")
        if not is_traced(r) and r.size:
            lo, hi = int(jnp.min(r)), int(jnp.max(r))
            if lo < 0 or hi > self.dataset_size - 1:
                raise ValueError(f"r (other examples drawn per iteration) must be in [0, dataset_size - 1] = "
                                 f"[0, {self.dataset_size - 1}]; got values in [{lo}, {hi}]")
        return r

    def side_terms(self, y: jax.Array, r: jax.Array, sigma, strategy,
                   dot_method: str = "auto") -> tuple[jax.Array, jax.Array]:
        r"""The per-iteration terms :math:`(\ell^P_i, \ell^Q_i)` of the two recursions (module docstring)."""
        y = check_call(self, y=y, sigma=sigma, strategy=strategy, dot_method=dot_method)
        return self._side_terms(y, self._check_counts(r, y), sigma, strategy, dot_method)

    def _side_terms(self, y, r, sigma, strategy, dot_method):
        n = y.shape[-1]
        dtype = y.dtype
        inv_var = 1.0 / jnp.asarray(sigma, dtype) ** 2
        s = sliding_dot(y, strategy.c_col, dot_method) * inv_var
        v = jnp.asarray(strategy.column_sq_norms(n), dtype) * inv_var
        trunc = r >= self.max_batch_size
        w = jnp.where(trunc, self.max_batch_size / (r.astype(dtype) + 1.0), 0.5)  # 0.5: unused placeholder
        log_w, log_1mw = jnp.log(w), jnp.log1p(-w)
        ell_p = jnp.where(trunc, jnp.logaddexp(log_w + 2.0 * s - 2.0 * v, log_1mw), s - 0.5 * v)
        ell_q = jnp.where(trunc, jnp.logaddexp(log_w - s - 0.5 * v, log_1mw), jnp.zeros((), dtype))
        return ell_p, ell_q

    def check_aux(self, aux, y) -> None:
        """``aux`` is ``r``: integer counts of the shape of ``y`` in ``[0, M - 1]``."""
        self._check_counts(aux, y)

    def loss_rows(self, y, sigma, strategy, aux, direction: str, dot_method: str, recursion: str):
        """``ln P_r(y)/Q_r(y)`` given the other-example counts ``r = aux``: the difference of two recursions of
        Theorem 5.1 on the terms of :meth:`side_terms`."""
        return self._log_ratio(y, aux, sigma, strategy, dot_method, recursion)

    @jit_method("strategy", "dot_method", "recursion")
    def _log_ratio(self, y, r, sigma, strategy, dot_method, recursion):
        ell_p, ell_q = self._side_terms(y, r, sigma, strategy, dot_method)
        base = self.base
        return log_ratio_from_terms(ell_p, base, recursion) - log_ratio_from_terms(ell_q, base, recursion)

    def participation_boundaries(self) -> int:
        """The untruncated sampler's boundaries plus one per iteration for the survival coin."""
        return self.base.participation_boundaries() + self.iterations

    def loss_error_params(self) -> LossErrorParams:
        """The recursions of the base scheme (``b``, ``p``); ``J = n`` (a posterior participation mass is at
        most one per iteration); both sides are mixtures (factor 2)."""
        return LossErrorParams(self.min_sep, self.sampling_prob, self.iterations, 2.0)


@partial(jax.jit, static_argnames=("scheme", "num_samples"))
def _sample_other_counts(key: jax.Array, scheme: TruncatedBMinSep, num_samples: int) -> jax.Array:
    b, p, n = scheme.min_sep, scheme.sampling_prob, scheme.iterations
    others = float(scheme.dataset_size - 1)
    k_init, k_run = jax.random.split(key)
    if b == 1 or others == 0.0:
        r = jax.random.binomial(k_run, jnp.full((num_samples, n), others), p, dtype=jnp.float64)
        return r.astype(jnp.int32)
    ring0 = jnp.zeros((b - 1, num_samples), jnp.float64)
    if scheme.warm_start:
        # virtual history: multinomial(M-1; p/(1+(b-1)p) for each of the b-1 blocked states), drawn as
        # sequential binomials; slot (j mod (b-1)) holds the virtual round j = 1 - s
        def init(rest, s):
            cnt = jax.random.binomial(jax.random.fold_in(k_init, s), rest, p / (1.0 + (b - s) * p),
                                      dtype=jnp.float64)
            return rest - cnt, cnt
        _, counts = jax.lax.scan(init, jnp.full((num_samples,), others), jnp.arange(1, b))
        rounds = 1 - np.arange(1, b)  # virtual rounds 0, -1, ..., 2-b
        ring0 = ring0.at[rounds % (b - 1)].set(counts)

    def step(carry, i):
        ring, window = carry
        avail = jnp.maximum(others - window, 0.0)
        r = jax.random.binomial(jax.random.fold_in(k_run, i), avail, p, dtype=jnp.float64)
        slot = i % (b - 1)
        leaving = jax.lax.dynamic_index_in_dim(ring, slot, 0, keepdims=False)  # r_{i-b+1}
        ring = jax.lax.dynamic_update_index_in_dim(ring, r, slot, 0)
        return (ring, window - leaving + r), r

    # 1-based round i sits in slot i mod (b-1); rounds 1..n
    _, rs = jax.lax.scan(step, (ring0, jnp.sum(ring0, axis=0)), jnp.arange(1, n + 1))
    return rs.T.astype(jnp.int32)
