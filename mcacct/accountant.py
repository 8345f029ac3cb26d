r"""Streaming Monte Carlo estimation of the hockey-stick divergence, chunk by chunk.

Randomness: a verification of ``num_samples`` samples in one direction is cut into chunks of
``chunk_size`` samples; chunk ``c`` uses ``fold_in(direction_key, c)`` and the last chunk is generated in
full and masked. Results therefore depend on ``(key, chunk_size)`` only — never on how chunks are spread
over devices, processes or jobs — and peak memory depends on ``chunk_size``, not on ``num_samples``.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.validate import check_int, check_real
from mcacct.estimate import (DIRECTIONS, DirectionStats, HistogramSpec, chunk_statistics, delta_bounds,
                             epsilon_from_delta_curve)
from mcacct.schemes import BMinSep
from mcacct.systematic import applied_loss_shift, systematic_bound
from mcacct.strategy import BandedToeplitz

__all__ = ["Problem", "chunk_losses", "block_size", "block_keys", "direction_key", "run_direction", "estimate", "Estimate",
           "DEFAULT_CHUNK_SIZE"]

DEFAULT_CHUNK_SIZE = 4096


@dataclass(frozen=True)
class Problem:
    """Everything that defines the pair (P, Q) except ``sigma``: scheme, strategy and kernel precision.

    ``scheme`` is any :class:`mcacct.schemes.AccountedScheme` (e.g. :class:`BMinSep`).
    """

    scheme: AccountedScheme
    strategy: BandedToeplitz = BandedToeplitz()
    dtype: str = "float64"
    dot_method: str = "auto"
    recursion: str = "auto"

    def __post_init__(self) -> None:
        self.scheme.check_strategy(self.strategy)
        if self.dtype not in ("float64", "float32"):
            raise ValueError(f"dtype must be 'float64' or 'float32'; got {self.dtype!r}")


def direction_key(key: jax.Array, direction: str) -> jax.Array:
    """Independent key of one direction (``'remove'``: y ~ P, ``'add'``: y ~ Q)."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")
    return jax.random.fold_in(key, DIRECTIONS.index(direction))


def block_size(problem: Problem, chunk_size: int) -> int:
    """Samples per block: the power of two nearest below ``2**18 / n``, within ``[16, 4096]`` and at most
    ``chunk_size``. Depends only on the problem and the chunk size, never on the backend."""
    target = max(16, min(4096, (1 << 18) // problem.scheme.iterations))
    return min(1 << (target.bit_length() - 1), chunk_size)


def block_keys(key: jax.Array, problem: Problem, chunk_size: int) -> jax.Array:
    """Keys of the blocks of one chunk: block ``j`` uses ``fold_in(chunk_key, j)``."""
    n_blocks = -(-chunk_size // block_size(problem, chunk_size))
    return jax.vmap(lambda j: jax.random.fold_in(key, j))(jnp.arange(n_blocks, dtype=jnp.uint32))


@partial(jax.jit, static_argnames=("problem", "chunk_size", "positive"))
def chunk_losses(key: jax.Array, sigma, problem: Problem, chunk_size: int, positive: bool) -> jax.Array:
    """Privacy losses of one chunk: ``ln P/Q`` for y ~ P (``positive``), ``ln Q/P`` for y ~ Q.

    A chunk is made of blocks of :func:`block_size` samples with keys :func:`block_keys`, so the numbers
    depend only on ``(key, chunk_size)``. On CPU the blocks run one after another (``lax.map``: a block's
    ``(n, block)`` arrays stay in cache, about 2x faster than one big batch); on accelerators they are
    batched with ``vmap``.
    """
    bsize = block_size(problem, chunk_size)

    def one_block(k):
        # randomness is always drawn in float64 (float32 normals have truncated tails, which matter at small
        # delta); a float32 kernel rounds the float64 draws, so both kernels see the same y on the same key
        return problem.scheme.loss_kernel(k, sigma, problem.strategy, bsize, positive,
                                          jnp.dtype(problem.dtype), problem.dot_method, problem.recursion)

    keys = block_keys(key, problem, chunk_size)
    if jax.default_backend() == "cpu":
        out = jax.lax.map(one_block, keys)
    else:
        out = jax.vmap(one_block)(keys)
    return out.reshape(-1)[:chunk_size]


@partial(jax.jit, static_argnames=("problem", "chunk_size", "positive", "spec"))
def _chunk_stats(key, sigma, valid, epsilons, loss_shift, problem, chunk_size, positive, spec):
    losses = chunk_losses(key, sigma, problem, chunk_size, positive)
    return chunk_statistics(losses, valid, epsilons, spec, loss_shift)


class Progress:
    """Rate-limited progress lines on stderr: samples done, rate, ETA."""

    def __init__(self, label: str, total: int, enabled: bool, every: float = 2.0) -> None:
        self.label, self.total, self.enabled, self.every = label, total, enabled, every
        self.start = time.perf_counter()
        self.last = self.start

    def update(self, done: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last < self.every:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else float("inf")
        print(f"[mcacct] {self.label}: {done:,}/{self.total:,} samples, {rate:,.0f}/s, ETA {eta:,.0f}s",
              file=sys.stderr, flush=True)


def run_direction(problem: Problem, sigma: float, key: jax.Array, direction: str, num_samples: int,
                  epsilons, chunk_size: int = DEFAULT_CHUNK_SIZE, spec: HistogramSpec = HistogramSpec(),
                  stop_when: Callable[[DirectionStats], bool] | None = None, progress: bool = False,
                  chunk_range: tuple[int, int] | None = None, stats: DirectionStats | None = None,
                  on_chunk: Callable[[int, DirectionStats], None] | None = None) -> DirectionStats:
    """Accumulate statistics of ``num_samples`` samples of one direction, chunk by chunk.

    ``chunk_range`` restricts the work to chunks ``[start, stop)`` of the full plan (for sharded jobs);
    ``stats`` continues earlier statistics (resume); ``stop_when`` ends early once the statistics decide
    the question (e.g. a verification already failed); ``on_chunk(c, stats)`` is called after each chunk.
    """
    n_total = check_int("num_samples", num_samples, low=1)
    chunk_size = check_int("chunk_size", chunk_size, low=1)
    eps = tuple(float(e) for e in np.atleast_1d(epsilons))
    stats = stats if stats is not None else DirectionStats(eps, spec)
    n_chunks = -(-n_total // chunk_size)
    start, stop = chunk_range if chunk_range is not None else (0, n_chunks)
    dkey = direction_key(key, direction)
    eps_arr = jnp.asarray(eps, jnp.float64)
    shift = jnp.asarray(applied_loss_shift(problem, sigma), jnp.float64)
    todo = sum(min(chunk_size, n_total - c * chunk_size) for c in range(start, stop))
    prog = Progress(f"sigma={sigma:.6g} {direction}", todo, progress)
    done = 0

    def dispatch(c: int):
        valid = min(chunk_size, n_total - c * chunk_size)
        return c, valid, _chunk_stats(jax.random.fold_in(dkey, c), sigma, valid, eps_arr, shift, problem, chunk_size,
                                      direction == "remove", spec)

    # one chunk in flight while the previous one is folded in on the host (asynchronous dispatch);
    # a chunk dispatched after the stop condition is discarded, so results equal the sequential loop
    pending = dispatch(start) if start < stop else None
    while pending is not None:
        c, valid, (sums, hist) = pending
        pending = dispatch(c + 1) if c + 1 < stop else None
        stats.add_chunk(valid, sums, hist)
        done += valid
        prog.update(done)
        if on_chunk is not None:
            on_chunk(c, stats)
        if stop_when is not None and stop_when(stats):
            break
    prog.update(done, force=progress and done > 0)
    return stats


@dataclass
class Estimate:
    """Monte Carlo estimate of delta(epsilon) in both directions with (1 - alpha) confidence bounds.

    ``alpha`` is split between the two directions (union bound), so ``delta_upper`` bounds the larger of the
    two divergences with confidence ``1 - alpha``. ``systematic`` (:mod:`mcacct.systematic`: the sampler's
    normal and participation draws against exact ones) is added to every upper bound. ``certified`` is false
    for float32 kernels, whose round-off is not bounded (the bounds then hold for the float32 computation,
    not for the mechanism).
    """

    sigma: float
    alpha: float
    stats: dict[str, DirectionStats] = field(default_factory=dict)
    systematic: float = 0.0
    certified: bool = True

    @property
    def num_samples(self) -> int:
        return min(s.count for s in self.stats.values())

    def _alpha_dir(self) -> float:
        return self.alpha / len(self.stats)

    def delta(self, j: int = 0) -> dict:
        """Point estimate and bounds at ``epsilons[j]`` (exact float64 sums)."""
        out = {}
        for d, s in self.stats.items():
            m = s.mean_at(j)
            lo, hi = delta_bounds(m, s.count, self._alpha_dir())
            out[d] = {"delta_estimate": m, "delta_lower": max(0.0, lo - self.systematic),
                      "delta_upper": min(1.0, hi + self.systematic)}
        out["delta_estimate"] = max(v["delta_estimate"] for v in out.values())
        out["delta_upper"] = max(v["delta_upper"] for k, v in out.items() if isinstance(v, dict))
        out["delta_lower"] = max(v["delta_lower"] for k, v in out.items() if isinstance(v, dict))
        return out

    def delta_curve(self, epsilons) -> dict[str, np.ndarray]:
        """Histogram-based estimate and upper bound of delta over an array of epsilons (both directions)."""
        eps = np.atleast_1d(np.asarray(epsilons, np.float64))
        est = np.zeros_like(eps)
        up = np.zeros_like(eps)
        for s in self.stats.values():
            m = s.histogram_delta(eps)
            est = np.maximum(est, m)
            up = np.maximum(up, [min(1.0, kl_up(v, s.count, self._alpha_dir()) + self.systematic) for v in m])
        return {"epsilon": eps, "delta_estimate": est, "delta_upper": up}

    def epsilon(self, delta: float, eps_hi: float | None = None) -> dict:
        """Smallest epsilon whose estimated (resp. upper-bounded) delta is at most ``delta``."""
        eps_hi = eps_hi or min(s.spec.max_loss for s in self.stats.values())

        def est(e):
            return max(float(s.histogram_delta(e)[0]) for s in self.stats.values())

        def upper(e):
            return max(kl_up(float(s.histogram_delta(e)[0]), s.count, self._alpha_dir()) + self.systematic
                       for s in self.stats.values())

        return {"epsilon_estimate": epsilon_from_delta_curve(est, delta, eps_hi),
                "epsilon_upper": epsilon_from_delta_curve(upper, delta, eps_hi)}


def kl_up(mean: float, count: int, alpha: float) -> float:
    return delta_bounds(mean, count, alpha)[1]


def estimate(problem: Problem, sigma: float, key: jax.Array, num_samples: int, epsilons=(1.0,),
             alpha: float = 0.01, directions=DIRECTIONS, chunk_size: int = DEFAULT_CHUNK_SIZE,
             spec: HistogramSpec = HistogramSpec(), progress: bool = False) -> Estimate:
    """Estimate delta(epsilon) for ``sigma`` on ``num_samples`` fresh samples per direction.

    Runs on :func:`mcacct.runner.run_ladder` (every local device; both directions on shared draws, chunk ``c``
    keyed ``fold_in(key, c)``); ``alpha`` is split over the directions by a union bound, which needs no
    independence between them."""
    from mcacct.runner import run_ladder  # the runner builds on this module
    sigma = check_real("sigma", sigma, low=0.0, low_open=True)
    alpha = check_real("alpha", alpha, low=0.0, high=1.0, low_open=True, high_open=True)
    for e in np.atleast_1d(epsilons):
        check_real("epsilon", e, low=0.0)
    for d in directions:
        if d not in DIRECTIONS:
            raise ValueError(f"directions must be a subset of {DIRECTIONS}; got {d!r}")
    est = Estimate(sigma, alpha, systematic=systematic_bound(problem, sigma).delta,
                   certified=problem.dtype == "float64")
    run = run_ladder(problem, [sigma], key, num_samples, epsilons, chunk_size, spec, progress=progress,
                     label=f"sigma={sigma:.6g}")
    if run.errors:
        raise FloatingPointError(run.errors[0])
    est.stats = {d: run.stats[0][d] for d in directions}
    return est
