r"""The scheme :class:`TruncatedBMinSep`: its sampler, adversary, dominating pair and losses are described in
:mod:`mcacct.schemes.truncated` (the package), its own kernels sit beside it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp

from mcacct.strategies.banded import check_strategy_type
from mcacct.core.validate import check_bool, check_call, check_count, check_counts, check_prob
from mcacct.schemes.base import Draws, LossErrorParams, SchemeSummary, Scheme, check_scheme_fields, jit_method
from mcacct.kernels.blocks import apply_to_flagged, cache_lanes, map_blocks, map_sub_blocks, sub_block_size
from mcacct.schemes.truncated.counts import count_tables, exact_tables, other_counts_t, virtual_plan
from mcacct.schemes.truncated.block_counts import (CountDraws, active_screen_plan, count_draws, counts_from_prepared,
                                                   prepare_counts)
from mcacct.kernels.normal import columns_supported
from mcacct.kernels.output import (ladder_by_key, ladder_losses_from_draws_t, ladder_losses_from_key_t,
                                   ladder_noise_lanes)
from mcacct.kernels.mean_shift import mean_shift_amplitudes, mean_shift_from_blocks_t
from mcacct.kernels.sliding import participation_log_ratios_t, sliding_dot
from mcacct.schemes.bminsep import BMinSep, log_ratio_from_terms, log_ratio_from_terms_t
from mcacct.schemes.truncated.sub_blocks import noise_rows, sub_block_draws, sub_block_participation
from mcacct.core.platform import target_platform
from mcacct.core.precision import float64

__all__ = ["TruncatedBMinSep", "PATCH_ROWS_MAX"]

#: ``platform -> rows``: the most rows of a round of mixture work (:meth:`TruncatedBMinSep._buffer`): on CPUs its cost
#: grows with its rows, padding included (benchmarks/results/design_choices.md); on GPUs its sequential steps dominate.
PATCH_ROWS_MAX = {"cpu": 16}


@float64
@dataclass(frozen=True)
class TruncatedBMinSep(Scheme):
    r"""Truncated b-min-sep subsampling (App. D) with dataset size ``M`` and maximum batch size ``B_max``.

    Parameters
    ----------
    sampling_prob : float
        ``p`` in ``(0, 1]``.
    min_sep : int
        ``b >= 1`` (``b = 1``: truncated Poisson sampling).
    iterations : int
        ``n >= 1``.
    dataset_size : int
        ``M >= 1``, the number of examples (the sensitive one included).
    max_batch_size : int
        ``B_max >= 1``; larger batches are truncated to a uniformly random subset of this size.
    warm_start : bool, default True
        Alg. 2 (default) or Alg. 1 for every example.
    """

    sampling_prob: float
    min_sep: int
    iterations: int
    dataset_size: int
    max_batch_size: int
    warm_start: bool = True

    def __post_init__(self) -> None:
        check_scheme_fields(self, sampling_prob=check_prob, min_sep=check_count, iterations=check_count,
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
        """``strategy`` must be a :class:`~mcacct.strategies.banded.BandedToeplitz` with ``len(c_col) <= min_sep``."""
        check_strategy_type("strategy", strategy)
        strategy.check_min_sep(self.min_sep)

    def output_coordinate_bound(self, strategy) -> float:
        r""":math:`\max |(C x)_j| \le 2 \max_d |c_d|` over both mixtures' patterns: amplitudes are in
        ``{0, 1, 2}`` (``P``) and ``{0, -1}`` (``Q``) at draws at least ``min_sep >= len(c_col)`` apart, so each
        output coordinate receives at most one entry of ``c`` (used by :mod:`mcacct.engine.systematic`).

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        float
            :math:`2 \max_d |c_d|` (:math:`\max_d |c_d|` when ``M <= B_max``).
        """
        self.check_strategy(strategy)
        return (2.0 if self.can_truncate else 1.0) * float(max(abs(v) for v in strategy.c_col))

    def sensitivity_bound(self, strategy) -> float:
        r"""``3 sqrt(ceil(n/b)) ||c||`` (``1 x`` when ``M <= B_max``).

        Coupling the two mixtures through the same draw, the means differ by ``C (x - x')`` with
        ``x - x'`` in ``{0, 1, 3}`` at each of at most ``ceil(n/b)`` separated draws; by joint convexity the
        pair is dominated by a Gaussian mechanism with that sensitivity.

        Parameters
        ----------
        strategy : BandedToeplitz
            The strategy ``C``.

        Returns
        -------
        float
        """
        self.check_strategy(strategy)
        return (3.0 if self.can_truncate else 1.0) * strategy.worst_case_sensitivity(self.iterations, self.min_sep)

    def sample_other_counts(self, key: jax.Array, num_samples: int) -> jax.Array:
        """``r``: the numbers of other examples drawn per iteration, ``(num_samples, n)`` int32 (``num_samples >=
        1``, else ``ValueError``), by :func:`mcacct.schemes.truncated.counts.other_counts_t`'s chain (the engine
        screens it, :mod:`mcacct.schemes.truncated.screen`)."""
        check_call(self, num_samples=num_samples)
        return other_counts_t(key, *self._count_args()[:5], num_samples).T

    @property
    def count_sampler(self) -> str:
        """How the counts are drawn on this platform: ``"screened"`` (:mod:`mcacct.schemes.truncated.screen`), ``"chain"``
        (every sample's chain; :data:`~mcacct.schemes.truncated.screen.AUTO_SCREEN`) or ``"none"`` (``M <= B_max``)."""
        return "none" if not self.can_truncate else "chain" if self._screen(None) is None else "screened"

    def _screen(self, screen: bool | None = True):
        """The screening plan where it applies (``screen=None``: only where this platform screens by default)."""
        args = self._count_args()
        return active_screen_plan(*args[:3], *args[4:], screen)

    def draw_law_tv(self) -> float:
        """Total-variation bound of one sample's counts ``r`` against their exact law, whichever sampler the
        platform uses (:data:`mcacct.schemes.truncated.screen.AUTO_SCREEN`): the larger of the screened sampler's
        :attr:`~mcacct.schemes.truncated.screen.ScreenPlan.tv` and ``n`` draws of :func:`~mcacct.schemes.truncated.counts.count_tables`
        (band and digit tables) or of the digit tables alone; plus the warm start's virtual history
        (:attr:`~mcacct.schemes.truncated.virtual.VirtualPlan.tv`); 0 when truncation is impossible (a float).
        docs/soundness.md lists every discrete draw."""
        if not self.can_truncate:
            return 0.0
        plan, others = self._screen(), self.dataset_size - 1
        tables = count_tables(others, self.min_sep, self.sampling_prob) or exact_tables(others, self.sampling_prob)
        tv = max(0.0 if plan is None else plan.tv, self.iterations * tables.tv_per_draw)
        if self.warm_start and self.min_sep > 1:
            tv += virtual_plan(others, self.min_sep, self.sampling_prob).tv
        return tv

    # -- draws ----------------------------------------------------------------------------------------------
    def draw(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        """``Draws(y, r)``: ``y ~ P_r`` (``"remove"``) or ``y ~ Q_r`` (``"add"``), both of shape
        ``(num_samples, n)``, ``r`` the counts of other examples drawn per iteration (the engine's time-major
        draws transposed). When ``M <= B_max`` truncation is impossible and ``r`` is returned as zeros."""
        d = self.sample_t(key, strategy, sigma, num_samples, direction, dtype)
        return Draws(d.y.T, d.aux.T)

    def sample_t(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> Draws:
        """Time-major draws ``(n, num_samples)``: the untruncated scheme's mean ``C x`` and noise for every
        sample, and the mixture amplitudes only for the samples with a truncated round (gathered)."""
        y_t, r_t = self._sample_t(key, sigma, strategy, num_samples, direction == "remove", jnp.dtype(dtype))
        return Draws(y_t, r_t)

    #: the engine's blocks hold at least this many samples (:func:`mcacct.engine.problem.block_size`): the count
    #: chain is sequential in the rounds and vectorises over a block's samples (screened: its flagged samples)
    block_floor = 4096

    def _buffer(self, num_samples: int) -> int:
        """Rows per round of mixture work (:meth:`_patch`): a sixteenth of the batch, at least 8, at most
        :data:`PATCH_ROWS_MAX`."""
        cap = PATCH_ROWS_MAX.get(target_platform(), num_samples)
        return min(num_samples, max(8, min(num_samples // 16, cap)))

    def _sub_block(self, num_samples: int) -> int:  # keys per sub-block; cache_lanes: 64 at n = 7200 (its docstring)
        return sub_block_size(self.iterations, num_samples, cache_lanes(self.iterations))

    def _count_args(self) -> tuple:  # N, b, p, the start, n, B_max
        return self.dataset_size - 1, self.min_sep, self.sampling_prob, self.warm_start, self.iterations, \
            self.max_batch_size

    def _count_draws(self, key, num_samples: int, dense: bool, prepared=None) -> CountDraws:
        """The block's counts (:mod:`mcacct.schemes.truncated.block_counts`), or those ``prepared`` ahead."""
        return (count_draws(key, *self._count_args(), num_samples, dense) if prepared is None
                else counts_from_prepared(prepared, key, *self._count_args(), num_samples))

    @property
    def prepare_draws(self):
        """``Mechanism.prepare`` where the counts are screened (one chain for all the flagged samples of a chunk's
        blocks), else ``None`` (every sample's chain: each block draws its own)."""
        return self._prepare_counts if self.count_sampler == "screened" else None

    def _prepare_counts(self, key, num_samples: int):  # the block's counts as data, for ladder_losses' prepared
        return prepare_counts(jax.random.split(key, 3)[0], *self._count_args(), num_samples)

    def _mean(self, tau, strategy):  # the output mean C x (amplitude 1) of the participation tau, time-major
        return mean_shift_from_blocks_t(tau, self.iterations, self.min_sep, strategy.c_col, jnp.float64)

    def _mixture_means(self, tau_all, r, k_s, strategy, idx):
        """For the samples ``idx``: the output means ``C a`` of both mixtures, row-major ``(len(idx), n)``, and
        their counts ``r`` (given, row-major). Amplitudes from participation ``x`` (``tau``), counts and survival
        coins: ``P``: 1 untruncated, 2 or 0 truncated (survives or not); ``Q``: -1 truncated and survives, else 0."""
        n = self.iterations
        tau = jnp.take(tau_all, idx, axis=1, mode="clip").T
        rows = jnp.arange(idx.shape[0])[:, None]
        x = jnp.zeros((idx.shape[0], n + 1), bool).at[rows, jnp.where(tau >= 0, tau, n)].set(True)[:, :n]
        trunc = r >= self.max_batch_size
        w = self.max_batch_size / (r.astype(jnp.float64) + 1.0)
        survives = jax.random.uniform(k_s, r.shape, dtype=jnp.float64) < w
        amp_p = jnp.where(x, jnp.where(trunc, jnp.where(survives, 2.0, 0.0), 1.0), 0.0)
        amp_q = jnp.where(x & trunc & survives, -1.0, 0.0)
        return mean_shift_amplitudes(amp_p, strategy.c_col), mean_shift_amplitudes(amp_q, strategy.c_col), r

    def _draw_blocks(self, key, strategy, num_samples: int, per_block, dense: bool = False, lanes: bool = False,
                     prepared=None, by_key: bool = False):
        """The common random numbers of one engine block and a per-sub-block computation on them:
        ``per_block(tau, z_t)`` of each sub-block's participation (per block of ``b`` rounds) and standard noise
        (lane-major with ``lanes``; its noise key instead with ``by_key``; a kept noise is stored time-major
        whatever ``lanes``), joined.
        Returns ``(out, counts, patch)``: ``patch(fn, out)`` applies ``fn(idx, out, mixture)`` to the samples with a
        truncated round, where ``mixture(sig)`` gives their outputs ``(y_P, y_Q)`` (row-major) and counts;
        ``counts`` (``block_counts.CountDraws``) holds every sample's counts if ``dense``."""
        k_r, k_b, k_s = jax.random.split(key, 3)
        counts = self._count_draws(k_r, num_samples, dense, prepared)
        sub = self._sub_block(num_samples)
        # the flagged samples' noise is redrawn, not kept: keeping it wrote the whole chunk's noise once more
        keep_noise = not (by_key or columns_supported(k_b))

        def block(j):
            tau, z_t = (sub_block_participation(k_b, j, self, sub) if by_key
                        else sub_block_draws(k_b, j, self, sub, lanes))
            return (per_block(tau, z_t), tau) + (((z_t.T if lanes else z_t),) if keep_noise else ())

        out, tau_all, *kept = map_sub_blocks(block, num_samples, sub)
        z_all = kept[0] if keep_noise else None

        def patch(fn, out):
            def with_rows(idx, out):
                mean_p, mean_q, r = self._mixture_means(tau_all, counts.rows_t(idx).T, k_s, strategy, idx)
                z = noise_rows(k_b, z_all, idx, self.iterations, num_samples, sub)
                return fn(idx, out, lambda sig: (z * sig + mean_p, z * sig + mean_q, r))
            return self._patch(counts.truncated, num_samples, with_rows, out)

        return out, counts, patch

    def _patch(self, truncated, num_samples: int, fn, out):
        """``fn(idx, out)`` on the samples ``truncated`` (with a truncated round), :meth:`_buffer` at a time (none:
        no work)."""
        if not self.can_truncate:
            return out
        return apply_to_flagged(truncated, self._buffer(num_samples), fn, out)

    def _untruncated_loss(self, y_t, sigma, strategy, dot_method, recursion):
        """The untruncated b-min-sep loss of time-major outputs (exact where no round is truncated)."""
        ell_t = participation_log_ratios_t(y_t, jnp.asarray(sigma, y_t.dtype), strategy.c_col, dot_method)
        return log_ratio_from_terms_t(ell_t, self.base, recursion)

    @jit_method("strategy", "num_samples", "positive", "dtype")
    def _sample_t(self, key, sigma, strategy, num_samples, positive, dtype):
        sig = jnp.asarray(sigma, jnp.float64)
        y_t, counts, patch = self._draw_blocks(key, strategy, num_samples, lambda tau, z_t: (
            z_t * sig + self._mean(tau, strategy) if positive else z_t * sig), dense=True)

        def fix(idx, y_t, mixture):
            y_p, y_q, _ = mixture(sig)
            return y_t.at[:, idx].set((y_p if positive else y_q).T, mode="drop")

        return patch(fix, y_t).astype(dtype), counts.dense_t

    def log_ratio_t(self, y_t, strategy, sigma, aux_t, direction: str, dot_method: str, recursion: str):
        """``ln P_r/Q_r`` time-major: the untruncated loss of every sample (exact where no round is truncated:
        ``ell^Q = 0`` gives ``f = 1``), replaced by the two-mixture loss for the samples with a truncated round."""
        return self._log_ratio_t(y_t, aux_t, sigma, strategy, dot_method, recursion)

    @jit_method("strategy", "dot_method", "recursion")
    def _log_ratio_t(self, y_t, r_t, sigma, strategy, dot_method, recursion):
        n, num_samples = y_t.shape
        sub = self._sub_block(num_samples)
        y3 = jnp.moveaxis(y_t.reshape(n, num_samples // sub, sub), 1, 0)
        loss = map_blocks(lambda y_b: self._untruncated_loss(y_b, sigma, strategy, dot_method, recursion),
                          y3).reshape(num_samples)

        def fix(idx, loss):
            y = jnp.take(y_t, idx, axis=1, mode="clip").T
            r = jnp.take(r_t, idx, axis=1, mode="clip").T
            return loss.at[idx].set(self._mixture_loss(y, r, sigma, strategy, dot_method, recursion), mode="drop")

        return self._patch(jnp.any(r_t >= self.max_batch_size, axis=0), num_samples, fix, loss)

    def losses_t(self, key, strategy, sigma, num_samples: int, direction: str, dtype, dot_method: str,
                 recursion: str):
        """The engine's losses of one block, fused per sub-block: the draws of :meth:`sample_t` for ``key`` and
        their loss (:meth:`log_ratio_t`, negated for ``"add"``) without materialising the block's outputs."""
        return self._losses(key, sigma, strategy, num_samples, direction == "remove", jnp.dtype(dtype), dot_method,
                            recursion)

    @jit_method("strategy", "num_samples", "positive", "dtype", "dot_method", "recursion")
    def _losses(self, key, sigma, strategy, num_samples, positive, dtype, dot_method, recursion):
        sig = jnp.asarray(sigma, jnp.float64)

        def per_block(tau, z_t):
            y = (z_t * sig + self._mean(tau, strategy) if positive else z_t * sig).astype(dtype)
            return self._untruncated_loss(y, sigma, strategy, dot_method, recursion)

        loss, _, patch = self._draw_blocks(key, strategy, num_samples, per_block)

        def fix(idx, loss, mixture):
            y_p, y_q, r = mixture(sig)
            y = (y_p if positive else y_q).astype(dtype)
            return loss.at[idx].set(self._mixture_loss(y, r, sigma, strategy, dot_method, recursion), mode="drop")

        loss = patch(fix, loss)
        return loss if positive else -loss

    shares_ladder_work = True
    bounds_remove_losses = True  # the untruncated draws' (mcacct.kernels.bound); truncated ones stay exact

    def ladder_losses(self, key, strategy, sigmas, num_samples: int, dtype, dot_method: str = "auto",
                      recursion: str = "auto", add_bound: float | None = None, remove_skip=None, prepared=None):
        """``(J, 2, num_samples)`` losses for every ``sigmas`` and both directions on the draws of :meth:`sample_t`:
        counts, participation, coins and noise once; the untruncated ladder (:func:`~mcacct.kernels.output.
        ladder_losses_from_draws_t`) for every sample, the mixture recursions only for those with a truncated round."""
        check_call(self, strategy=strategy, num_samples=num_samples, dtype=dtype, dot_method=dot_method,
                   recursion=recursion)
        return self._ladder(key, jnp.asarray(sigmas), strategy, num_samples, jnp.dtype(dtype), dot_method,
                            recursion, add_bound, remove_skip, prepared)

    def add_loss_bound(self) -> float:
        """The base scheme's (untruncated draws); a truncated sample keeps its exact loss in both directions."""
        return self.base.add_loss_bound()

    @jit_method("strategy", "num_samples", "dtype", "dot_method", "recursion", "add_bound")
    def _ladder(self, key, sigmas, strategy, num_samples, dtype, dot_method, recursion, add_bound, remove_skip,
                prepared=None):
        lanes = ladder_noise_lanes(strategy.c_col, dtype, dot_method, add_bound, remove_skip)
        by_key = ladder_by_key(key, self.iterations, self.min_sep, self.sampling_prob, strategy.c_col, dtype,
                               dot_method, add_bound, remove_skip, self._sub_block(num_samples))
        losses = ladder_losses_from_key_t if by_key else partial(ladder_losses_from_draws_t, lanes=lanes)

        def per_block(tau, z_t):   # z_t: the noise, or its key (by_key: the bound draws it, or its table normals)
            return losses(tau, z_t, self.iterations, sigmas, self.min_sep, self.sampling_prob, self.warm_start,
                          strategy.c_col, dtype, dot_method, recursion, add_bound, remove_skip)

        out, _, patch = self._draw_blocks(key, strategy, num_samples, per_block, lanes=lanes, prepared=prepared,
                                          by_key=by_key)

        def fix(idx, out, mixture):
            def one(sig):
                y_p, y_q, r = mixture(sig)
                return jnp.stack([self._mixture_loss(y_p.astype(dtype), r, sig, strategy, dot_method, recursion),
                                  -self._mixture_loss(y_q.astype(dtype), r, sig, strategy, dot_method, recursion)])

            return out.at[:, :, idx].set(jax.lax.map(one, sigmas.astype(jnp.float64)), mode="drop")

        return patch(fix, out)

    def side_terms(self, y: jax.Array, r: jax.Array, sigma, strategy,
                   dot_method: str = "auto") -> tuple[jax.Array, jax.Array]:
        r"""The per-iteration terms :math:`(\ell^P_i, \ell^Q_i)` of the two recursions (module docstring).

        Parameters
        ----------
        y, r, sigma, strategy, dot_method
            Outputs ``(..., n)``, counts of ``y``'s shape in ``[0, M - 1]``, noise multiplier, ``C``, method.

        Returns
        -------
        tuple of jax.Array
            ``y``'s shape. With :math:`s_i = \langle c^{(i)}, y\rangle/\sigma^2`, :math:`v_i = \|c^{(i)}\|^2/\sigma^2`,
            :math:`w_i = B_{max}/(r_i + 1)`, where :math:`r_i \ge B_{max}`:
            :math:`\ell^P_i = \ln(w_i e^{2s_i - 2v_i} + 1-w_i)`, :math:`\ell^Q_i = \ln(w_i e^{-s_i - v_i/2} + 1-w_i)`;
            elsewhere :math:`s_i - v_i/2` and 0.
        """
        y = check_call(self, y=y, sigma=sigma, strategy=strategy, dot_method=dot_method)
        return self._side_terms(y, check_counts("r", r, y.shape, self.dataset_size - 1), sigma, strategy, dot_method)

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
        check_counts("r", aux, y.shape, self.dataset_size - 1)

    def loss_rows(self, y, strategy, sigma, aux, direction: str, dot_method: str, recursion: str):
        """``ln P_r(y)/Q_r(y)`` given the other-example counts ``r = aux``: the difference of two recursions of
        Theorem 5.1 on the terms of :meth:`side_terms`."""
        return self._log_ratio(y, aux, sigma, strategy, dot_method, recursion)

    @jit_method("strategy", "dot_method", "recursion")
    def _log_ratio(self, y, r, sigma, strategy, dot_method, recursion):
        return self._mixture_loss(y, r, sigma, strategy, dot_method, recursion)

    def _mixture_loss(self, y, r, sigma, strategy, dot_method, recursion):
        ell_p, ell_q = self._side_terms(y, r, sigma, strategy, dot_method)
        base = self.base
        return log_ratio_from_terms(ell_p, base, recursion) - log_ratio_from_terms(ell_q, base, recursion)

    def participation_boundaries(self) -> int:
        """The untruncated sampler's boundaries plus one per iteration for the survival coin."""
        return self.base.participation_boundaries() + self.iterations

    def summary(self) -> SchemeSummary:
        """``b`` = ``min_sep``, ``q``, the participation rate, the count sampler (:class:`~mcacct.schemes.base.SchemeSummary`)."""
        return SchemeSummary(self.min_sep, self.sampling_prob, self.participation_rate, self.count_sampler)

    def loss_error_params(self) -> LossErrorParams:
        """The recursions of the base scheme (``b``, ``p``); ``J = n`` (a posterior participation mass is at
        most one per iteration); both sides are mixtures (factor 2)."""
        return LossErrorParams(self.min_sep, self.sampling_prob, self.iterations, 2.0)


