r"""Screened counts of truncated b-min-sep (Dong & Ganesh 2026, arXiv:2602.09338, App. D): the chain of the
counts ``r`` runs only for the samples that can have a truncated round, and the law of ``r`` stays exact.

Coupling. Give each of the ``N = M - 1`` other examples a coin of probability ``p`` in every round, read when it
is eligible. In round ``i`` let ``r_i`` be the heads of the ``A_i`` eligible examples and ``e_i`` those of the
``W_i = N - A_i`` blocked ones. Given the past they are independent, ``Binom(A_i, p)`` and ``Binom(W_i, p)``, so
``r'_i = r_i + e_i ~ Binom(N, p)`` *whatever the past*: the ``r'_i`` are i.i.d. Since ``r_i <= r'_i``, round ``i``
can be truncated (``r_i >= B_max``) only if ``r'_i >= B_max``, of probability ``q = P[Binom(N, p) >= B_max]``.

Sampler. Let ``tau`` be the first round (0-based) with ``r'_i >= B_max``, ``n`` if none:
``P[tau = t] = q (1 - q)^t`` and ``P[tau = n] = (1 - q)^n``. Then

.. math::
    P[\tau = t, r] = \prod_{i<t} P(r_i, e_i \mid \cdot)\,1[r_i + e_i < B]\ \cdot\ P(r_t, e_t \mid \cdot)\,
    1[r_t + e_t \ge B]\ \cdot \prod_{i>t} P(r_i \mid \cdot)

(summed over the ``e``), and since ``P[r'_i < B | past] = 1 - q`` for every past, given ``tau = t``:

* rounds ``i < t``: ``(r_i, e_i)`` from their laws given the past, conditioned on ``r_i + e_i < B_max``
  (rejection: both are redrawn, probability ``q`` per round);
* round ``t``: ``s = r'_t ~ Binom(N, p)`` conditioned on ``>= B_max`` (independent of the past) and
  ``e_t | s ~ Hypergeom(N, W_t, s)`` (which of the ``s`` heads fall on blocked examples), ``r_t = s - e_t``;
* rounds ``i > t``: ``r_i ~ Binom(A_i, p)``, the plain chain.

A sample with ``tau = n`` (probability ``(1 - q)^n``: 0.977 at the §7.4 shape) has no truncated round, and its
privacy loss does not depend on ``r``: the engine draws ``tau`` for every sample (one 64-bit word) and runs the
chain only for the others (``block_counts.count_draws``), a buffer of them at a time.

Platforms. Screening pays on CPUs, where the chain's cost is per sample; on GPUs the chain is latency-bound (its
rounds are sequential; benchmarks/results/design_choices.md), while the screened round's
rejection loop and rare branches each cost a host synchronisation (the likely cause of its measured cost there).
:data:`AUTO_SCREEN` says, per platform, which sampler ``block_counts.count_draws`` uses unless told, and
why (``block_counts.active_screen_plan``). Both draw the same law (within their stated total variations), from
independent keys per block, so blocks of either kind may be pooled. Accelerators draw a block's rounds by blocks
of ``b - 1`` (:data:`SCREEN_BLOCK_PASS`, :func:`screened_counts_t`).

Per-sample randomness. Sample ``j`` of a block draws everything from ``fold_in(key, j)``, so its counts are the
same whichever other samples run beside it: the buffered chain of the engine and the dense draws of
``sample_t`` agree bit for bit.

Rounding (:attr:`ScreenPlan.tv`, added to the reported delta with the counts' other terms). ``tau``: integer
thresholds of 64 bits from a 128-bit fixed-point recursion of ``(1 - q)^t``, ``q`` from the exact fixed-point
weights of :func:`mcacct.kernels.alias.pmf_weights`; ``s``: an alias table of the conditioned weights; the
counts and ``e``: the alias tables of :mod:`mcacct.schemes.truncated.counts` (a conditioned law is within
``3 (tv_r + tv_e)`` of its exact form when the condition has probability at least 2/3); the hypergeometric:
inversion of float64 weights (:mod:`mcacct.schemes.truncated.hypergeometric`, bound in its docstring).

Everything here takes numbers and arrays; no scheme is imported.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.alias import FRAC, alias_table, pmf_weights, u64
from mcacct.kernels.blocks import apply_to_flagged
from mcacct.kernels.control import rare_cond
from mcacct.schemes.truncated.hypergeometric import hypergeometric_draw, hypergeometric_tv, hypergeometric_weights
from mcacct.schemes.truncated.counts import (COUNT_CHAIN_UNROLL, CountTables, band_tables, count_tables, draw_counts,
                                             table_lookup, virtual_history, window_band)
from mcacct.core.platform import target_platform

__all__ = ["MAX_FLAG_PROB", "ScreenPlan", "screen_plan", "screen_taus", "screened_counts_t", "hypergeometric_draw",
           "hypergeometric_weights", "hypergeometric_tv", "chain_buffer", "AUTO_SCREEN", "SCREEN_BLOCK_PASS"]

#: screening is used where at most this fraction of the samples is flagged (else every sample runs the chain)
MAX_FLAG_PROB = 0.125
#: ``platform -> (screen, evidence)``: whether ``block_counts.count_draws`` screens by default, and the
#: measurement behind it
AUTO_SCREEN = {
    "cpu": (True, "benchmarks/results/production_cpu.json (2-core box, kernel 7): the 7.4 truncated ladder at "
                  "2,356 / 1,917 draws/s (c = ones / MSE c) against 1,394 / 1,132 with every sample's chain (kernel 6, "
                  "c4e51f5)"),
    "gpu": (False, "benchmarks/results/accelerator_nvidia_h100_80gb_hbm3.json (H100, jax 0.11.2, kernel 7): the 7.4 "
                   "engine ladder at 30,125 draws/s (0.54 s per chunk of 16,384) with screening, while every sample's "
                   "chain alone took 0.034 s per chunk (count_chain unroll_8, 482,993 samples/s) and the ladder ran "
                   "at 79,412 draws/s with it on an H200 (kernel 6, accelerator_nvidia_h200.json)"),
    "tpu": (False, "no TPU measurement; as on GPUs (a sequential chain over every sample of a block)"),
}
#: ``platform -> block_pass`` of :func:`screened_counts_t` (the same counts either way): CPU round by round (its
#: branches cost little there), accelerators by blocks, where each branch of a round is a host round trip (to
#: measure: ``benchmarks/accelerator.py --part production``, ``screened_counts``)
SCREEN_BLOCK_PASS = {"cpu": False, "gpu": True, "tpu": True}
_MAX_WINDOW = 4097   # hypergeometric inversion window (values)


class ScreenPlan(NamedTuple):
    """Host-built pieces of the screened sampler of one ``(N, b, p, n, B_max)``.

    ``thresholds`` ``(n,)`` uint64: ``floor(2^64 P[tau <= t])``; ``tail`` the packed alias table of ``Binom(N, p)``
    conditioned on ``>= B_max`` (value ``tail_offset + cell``, ``tail_bits`` cell bits); ``blocked`` the tables of
    ``Binom(W, p)`` for the blocked examples' heads; ``flag_prob`` ``P[tau < n]``; ``half`` the hypergeometric
    window's half-width; ``tv`` the total-variation bound of one sample's counts against the exact law."""

    thresholds: np.ndarray
    tail: np.ndarray
    tail_offset: int
    tail_bits: int
    blocked: CountTables
    flag_prob: float
    half: int
    tv: float


@functools.lru_cache(maxsize=32)
def screen_plan(others: int, min_sep: int, sampling_prob: float, iterations: int, max_batch: int
                ) -> ScreenPlan | None:
    """The plan of the screened sampler, or ``None`` where it does not apply or pays nothing: ``b = 1``, tables
    too large (:func:`mcacct.schemes.truncated.counts.count_tables`), ``B_max`` not beyond the bulk of ``Binom(N, p)``, more
    than :data:`MAX_FLAG_PROB` of the samples flagged, or a hypergeometric window beyond float64's exact
    integers. Cached per process.

    Parameters
    ----------
    others, min_sep, sampling_prob, iterations, max_batch : int, int, float, int, int
        ``N``, ``b``, ``p``, ``n`` and ``B_max``.

    Returns
    -------
    ScreenPlan or None
    """
    n_oth, b, p, n, bmax = int(others), int(min_sep), float(sampling_prob), int(iterations), int(max_batch)
    tables = count_tables(n_oth, b, p)
    if b < 2 or tables is None or bmax > n_oth:
        return None
    num, den = p.as_integer_ratio()
    k_lo, u, tail_rel = pmf_weights(n_oth, num, den)
    start = bmax - k_lo
    if start <= 0:
        return None
    total = sum(u)
    left_out = tail_rel * (1 << FRAC) / total + len(u) * 2.0 ** -200   # |q_hat - q| and the mass beyond the kept
    tail_u = u[start:]
    q_num = sum(tail_u)
    big_q = (q_num << 128) // total                                    # q in 128-bit fixed point, rounded down
    surv, thresholds = 1 << 128, np.zeros(n, np.uint64)
    for t in range(n):
        surv -= (surv * big_q) >> 128
        thresholds[t] = np.uint64(((1 << 128) - surv) >> 64)
    flag_prob = 1.0 - surv / 2.0 ** 128
    if flag_prob > MAX_FLAG_PROB:
        return None
    if tail_u:
        cell_bits = max(1, (len(tail_u) - 1).bit_length())
        tail_offset, tail, tv_tail = alias_table(bmax, tail_u, tail_rel, cell_bits, f"Binom({n_oth}, {p}) >= {bmax}")
    else:  # no kept weight reaches B_max: tau = n always (the thresholds are 0), the table is never read
        cell_bits, tail_offset, tail, tv_tail = 1, bmax, np.zeros(2, np.uint64), 0.0
    s_max = tail_offset + (1 << cell_bits) - 1
    half = math.ceil(math.sqrt(30.0 * s_max)) + 1
    blocked = band_tables(*window_band(n_oth, b, p), p, n_oth)
    if blocked is None or 2 * half + 1 > _MAX_WINDOW or (n_oth + 2) * (s_max + 2) >= 2 ** 52:
        return None
    tv_tau = n * (2.0 ** -64 + n * (2.0 ** -127 + left_out))           # coupling of tau through the same word
    tv_chain = 3.0 * n * (tables.tv_per_draw + blocked.tv_per_draw)
    tv = tv_tau + tv_chain + tv_tail + hypergeometric_tv(half, s_max)
    return ScreenPlan(thresholds, tail, tail_offset, cell_bits, blocked, flag_prob, half, tv)


def screen_taus(key: jax.Array, plan: ScreenPlan, num_samples: int) -> jax.Array:
    """``tau`` of every sample, ``(num_samples,)`` int32 in ``[0, n]`` (``n``: no round can be truncated): one
    64-bit word each, ``tau = #{t: thresholds_t <= word}``."""
    words = jax.random.bits(key, (num_samples,), jnp.uint64)
    return jnp.searchsorted(jnp.asarray(plan.thresholds), words, side="right").astype(jnp.int32)


def _tail_pick(word: jax.Array, plan: ScreenPlan) -> jax.Array:
    """``Binom(N, p)`` conditioned on ``>= B_max`` from one 64-bit word: the top ``L`` bits pick a cell, the other
    ``64 - L`` are compared with its threshold in full (exact)."""
    L = plan.tail_bits
    cell = word >> u64(64 - L)
    entry = jnp.asarray(plan.tail)[cell.astype(jnp.int32)]
    keep = (word & u64((1 << (64 - L)) - 1)) < (entry >> u64(L))
    value = jnp.where(keep, cell, entry & u64((1 << L) - 1))
    return (plan.tail_offset + value.astype(jnp.int64)).astype(jnp.int32)


def screened_counts_t(key: jax.Array, lanes: jax.Array, taus: jax.Array, others: int, min_sep: int,
                      sampling_prob: float, warm_start: bool, iterations: int, max_batch: int, plan: ScreenPlan,
                      block_pass: bool | None = None) -> jax.Array:
    """The counts ``r`` of the samples ``lanes`` (their indices in the block; ``taus`` theirs from
    :func:`screen_taus`), time-major ``(n, len(lanes))`` int32, by the sampler of the module docstring. Sample
    ``j`` reads only ``fold_in(key, j)``.

    The rounds run in blocks of ``b - 1``. Round by round, a round's rare paths (a tie or an off-band lookup, a
    rejected pair before ``tau``, the hypergeometric draw at ``tau``) each sit behind a branch of that round. With
    ``block_pass`` (default :data:`SCREEN_BLOCK_PASS` of the platform) a block is first drawn without a branch per
    round: a pass of lookups gives each lane's blocked count ``W`` at its ``tau`` when ``tau`` falls in the block,
    the hypergeometric draws of those lanes follow (a buffer at a time), and a second pass of lookups runs the
    block with them, redrawing a rejected pair once from the words of attempt 1 (drawn for every lane). Where no
    lane tied, left its band or needed a second redraw, every count equals the round-by-round one (same words,
    same keys, each lane's draws its own); otherwise the block is replayed round by round (one branch per block).

    Parameters
    ----------
    key, lanes, taus : jax.Array
        The block's key, the samples' indices and their ``tau``.
    others, min_sep, sampling_prob, warm_start, iterations, max_batch, plan
        ``N``, ``b``, ``p``, the start, ``n``, ``B_max`` and :func:`screen_plan`'s plan.
    block_pass : bool, optional
        As above; the counts do not depend on it.

    Returns
    -------
    jax.Array
    """
    n_oth, b, p, n, bmax = int(others), int(min_sep), float(sampling_prob), int(iterations), int(max_batch)
    tables, blocked, m = count_tables(n_oth, b, p), plan.blocked, b - 1
    platform = target_platform()
    pass_blocks = SCREEN_BLOCK_PASS.get(platform, True) if block_pass is None else bool(block_pass)
    unroll = max(1, int(COUNT_CHAIN_UNROLL.get(platform, 1)))
    keys = jax.vmap(lambda j: jax.random.split(jax.random.fold_in(key, j), 6))(lanes)
    k_init, k_words, k_rare_r, k_rare_e, k_redraw, k_special = (keys[:, c] for c in range(6))
    width = lanes.shape[0]
    if warm_start:
        hist = jax.vmap(lambda k: virtual_history(k, n_oth, b, p, 1)[:, 0])(k_init).T   # (m, F), exchangeable
        prev = hist[::-1]
    else:
        prev = jnp.zeros((m, width), jnp.int32)
    k_tail, k_hyper = (jax.vmap(jax.random.split)(k_special)[:, c] for c in range(2))
    s_special = _tail_pick(jax.vmap(lambda k: jax.random.bits(k, (), jnp.uint64))(k_tail), plan)

    def exact_round(i, avail, held, u_r, u_e, pre, k_rare_r, k_rare_e, k_redraw):
        """Round ``i`` for every lane, attempt by attempt: attempt 0 reads the round's words, a later attempt fresh
        words of ``fold_in(fold_in(k_redraw, i), a)`` for the lanes whose pair ``(r, e)`` was rejected; ties and
        off-band lanes are finished from ``fold_in(fold_in(k_rare, i), a)`` (:func:`draw_counts`)."""
        def attempt(carry):
            a, r, e, todo = carry
            fresh = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(jax.random.fold_in(k, i), a), (2,),
                                                       jnp.uint64))(k_redraw)
            w_r, w_e = jnp.where(a == 0, u_r, fresh[:, 0]), jnp.where(a == 0, u_e, fresh[:, 1])

            def draw(k, trials, words, tabs):
                return draw_counts(jax.random.fold_in(jax.random.fold_in(k, i), a), trials, p, tabs, words)

            r = jnp.where(todo, jax.vmap(lambda k, t, w: draw(k, t, w, tables))(k_rare_r, avail, w_r), r)
            e = jnp.where(todo, jax.vmap(lambda k, t, w: draw(k, t, w, blocked))(k_rare_e, held, w_e), e)
            return a + 1, r, e, todo & pre & (r + e >= bmax)

        zeros = jnp.zeros(avail.shape, jnp.int32)
        _, r, _, _ = jax.lax.while_loop(lambda c: jnp.any(c[3]), attempt,
                                        (jnp.int32(0), zeros, zeros, jnp.ones(avail.shape, bool)))
        return r

    def tau_round(r, at, held, s_special, k_hyper):
        """The lanes at ``tau``: ``r = s - e``, ``e ~ Hypergeom(N, W, s)``, a few lanes at a time."""
        def some(idx, r):
            e = hypergeometric_draw(k_hyper[jnp.clip(idx, 0, width - 1)], n_oth, jnp.take(held, idx, mode="clip"),
                                    jnp.take(s_special, idx, mode="clip"), plan.half)
            return r.at[idx].set(jnp.take(s_special, idx, mode="clip") - e, mode="drop")

        return apply_to_flagged(at, min(width, 4), some, r)

    def exact_block(window, prev, u_r, u_e, rounds, taus, k_rare_r, k_rare_e, k_redraw, s_special, k_hyper):
        """The block round by round, every rare path behind a branch of its round (the reference the block pass
        must equal)."""
        def step(window, xs):
            leaving, u_r, u_e, i = xs
            avail = jnp.maximum(n_oth - window, 0)
            held = n_oth - avail
            look_r, look_e = table_lookup(avail, u_r, tables), table_lookup(held, u_e, blocked)
            pre, at = i < taus, i == taus
            redo = look_r.tie | look_r.outside | (pre & (look_e.tie | look_e.outside
                                                         | (look_r.fast + look_e.fast >= bmax)))

            def rare_round(fast, redo, at, i, avail, held, u_r, u_e, pre, *keys):  # one branch per round
                r = rare_cond(jnp.any(redo), lambda f, *ops: exact_round(*ops), lambda f, *ops: f,
                              fast, i, avail, held, u_r, u_e, pre, *keys[:3])
                return rare_cond(jnp.any(at), tau_round, lambda r, *ops: r, r, at, held, *keys[3:])

            r = rare_cond(jnp.any(redo | at), rare_round, lambda fast, *ops: fast, look_r.fast, redo, at, i,
                          avail, held, u_r, u_e, pre, k_rare_r, k_rare_e, k_redraw, s_special, k_hyper)
            return window - leaving + r, r

        return jax.lax.scan(step, window, (prev, u_r, u_e, rounds))

    def counts_at_tau(held_tau, rounds):
        """``r_tau = s - e`` of the lanes whose ``tau`` is in the block, ``e ~ Hypergeom(N, W, s)`` from their
        keys (:func:`hypergeometric_draw`, as the round-by-round block draws it), a buffer of them at a time."""
        here = (taus >= rounds[0]) & (taus <= rounds[-1])

        def some(idx, r_tau):
            s = jnp.take(s_special, idx, mode="clip")
            e = hypergeometric_draw(k_hyper[jnp.clip(idx, 0, width - 1)], n_oth, jnp.take(held_tau, idx, mode="clip"),
                                    s, plan.half)
            return r_tau.at[idx].set(s - e, mode="drop")

        return apply_to_flagged(here, chain_buffer(width, m / n), some, jnp.zeros((width,), jnp.int32))

    def block_pass(window, prev, u_r, u_e, rounds, r_tau):
        """The block by lookups, with each lane's count at ``tau`` given (``r_tau``) and a rejected pair redrawn
        once from the words of attempt 1 (drawn for every lane and round, no branch); ``bad`` marks the lanes where
        a lookup tied, left its band, or the redraw was rejected again or tied: there the block is replayed. Also
        each lane's blocked count ``W`` at its ``tau``, which does not depend on ``r_tau`` (pass 1 reads it)."""
        def one(carry, xs):
            window, bad, held_tau = carry
            leaving, ur, ue, i = xs
            avail = jnp.maximum(n_oth - window, 0)
            held = n_oth - avail
            look_r, look_e = table_lookup(avail, ur, tables), table_lookup(held, ue, blocked)
            pre = i < taus
            rejected = pre & (look_r.fast + look_e.fast >= bmax)
            fresh = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(jax.random.fold_in(k, i), 1), (2,),
                                                       jnp.uint64))(k_redraw)
            again_r, again_e = table_lookup(avail, fresh[:, 0], tables), table_lookup(held, fresh[:, 1], blocked)
            r = jnp.where(i == taus, r_tau, jnp.where(rejected, again_r.fast, look_r.fast))
            bad = bad | look_r.tie | look_r.outside | (pre & (look_e.tie | look_e.outside)) | (rejected & (
                again_r.tie | again_r.outside | again_e.tie | again_e.outside | (again_r.fast + again_e.fast >= bmax)))
            return (window - leaving + r, bad, jnp.where(i == taus, held, held_tau)), r

        init = (window, jnp.zeros(window.shape, bool), jnp.zeros_like(window))
        (window, bad, held_tau), new = jax.lax.scan(one, init, (prev, u_r, u_e, rounds), unroll=min(unroll, m))
        return window, new, bad, held_tau

    def replay_block(w_fast, new_fast, *ops):
        return exact_block(*ops)

    def block(window_prev, t):
        window, prev = window_prev
        words = jax.vmap(lambda k: jax.random.bits(jax.random.fold_in(k, t), (2, m), jnp.uint64))(k_words)
        words = jnp.moveaxis(words, 0, -1)                                            # (2, m, F)
        rounds = t * m + jnp.arange(m)
        ops = (window, prev, words[0], words[1], rounds, taus, k_rare_r, k_rare_e, k_redraw, s_special, k_hyper)
        if not pass_blocks:
            window, new = exact_block(*ops)
            return (window, new), new
        held_tau = block_pass(window, prev, words[0], words[1], rounds, jnp.zeros_like(window))[3]   # pass 1
        w_fast, new_fast, bad, _ = block_pass(window, prev, words[0], words[1], rounds, counts_at_tau(held_tau, rounds))
        window, new = rare_cond(jnp.any(bad), replay_block, lambda wf, nf, *o: (wf, nf), w_fast, new_fast, *ops)
        return (window, new), new

    blocks = -(-n // m)
    _, rs = jax.lax.scan(block, (jnp.sum(prev, axis=0), prev), jnp.arange(blocks))
    return rs.reshape(blocks * m, width)[:n]


def chain_buffer(num_samples: int, flag_prob: float) -> int:
    r"""Samples per round of the screened chain: the expected number flagged plus 3.5 standard deviations plus 4,
    a multiple of 8 (a second round, as large, in about 1 block in 4000).

    Parameters
    ----------
    num_samples, flag_prob : int, float
        The block's samples ``B`` and ``P[tau < n]``.

    Returns
    -------
    int
        :math:`\min(B, 8 \lceil (\mu + 3.5\sqrt{\mu} + 4) / 8 \rceil)`, :math:`\mu = B\,\mathrm{flag\_prob}`.
    """
    mean = num_samples * flag_prob
    return min(num_samples, 8 * math.ceil((mean + 3.5 * math.sqrt(mean) + 4.0) / 8.0))
