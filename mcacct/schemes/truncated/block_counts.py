r"""The counts of one engine block as its losses read them (Dong & Ganesh 2026, arXiv:2602.09338, App. D): which
samples have a truncated round, and the counts of those samples.

:func:`count_draws` draws them inside the block's loss program, screened (:mod:`mcacct.schemes.truncated.screen`) or
every sample's chain (:func:`mcacct.schemes.truncated.counts.other_counts_t`). :func:`prepare_counts` draws the same
values ahead, as data (:class:`PreparedCounts`: the flags and the rows of the first :data:`KEPT_ROWS` truncated
samples), so that an engine can draw the counts of many blocks in one batch (one sequential chain for all their
flagged samples) and then run the blocks' losses in smaller batches; :func:`counts_from_prepared` reads them back,
drawing again only the rows of truncated samples beyond those kept (rare). Each sample's counts depend only on the
block's key and its index, so every form gives the same values.

Everything here takes numbers and arrays; no scheme is imported.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from mcacct.core.platform import target_platform
from mcacct.kernels.blocks import apply_to_flagged
from mcacct.kernels.control import rare_cond
from mcacct.schemes.truncated.counts import other_counts_t
from mcacct.schemes.truncated.screen import (AUTO_SCREEN, ScreenPlan, chain_buffer, screen_plan, screen_taus,
                                             screened_counts_t)

__all__ = ["CountDraws", "count_draws", "screens_by_default", "active_screen_plan", "KEPT_ROWS", "PreparedCounts",
           "prepare_counts", "counts_from_prepared"]

#: rows of truncated samples a :class:`PreparedCounts` keeps per block (at §7.4 a block of 4096 holds 0.06 on average)
KEPT_ROWS = 4


class CountDraws(NamedTuple):
    """The counts of one block as the engine reads them: ``truncated`` ``(B,)`` bool, the samples with a round
    ``r_i >= B_max``; ``rows_t(idx)`` the counts of the samples ``idx``, time-major ``(n, len(idx))`` int32;
    ``dense_t`` every sample's counts ``(n, B)`` when asked for (else ``None``)."""

    truncated: jax.Array
    rows_t: Callable[[jax.Array], jax.Array]
    dense_t: jax.Array | None


class PreparedCounts(NamedTuple):
    """A block's counts drawn ahead (:func:`prepare_counts`), a pytree of arrays: ``truncated`` ``(B,)`` bool;
    ``kept_idx`` ``(R,)`` int32, the first ``R`` truncated samples in order (``B`` in unused slots); ``kept_rows``
    ``(n, R)`` int32, their counts."""

    truncated: jax.Array
    kept_idx: jax.Array
    kept_rows: jax.Array


def screens_by_default() -> bool:
    """Whether :func:`count_draws` screens on the platform being traced for (:data:`~mcacct.schemes.truncated.screen.
    AUTO_SCREEN`)."""
    return AUTO_SCREEN.get(target_platform(), (False, ""))[0]


def active_screen_plan(others: int, min_sep: int, sampling_prob: float, iterations: int, max_batch: int,
                       screen: bool | None = None) -> ScreenPlan | None:
    """The plan :func:`count_draws` screens with, or ``None`` where it runs every sample's chain: ``screen``
    (``None``: :func:`screens_by_default`) and :func:`~mcacct.schemes.truncated.screen.screen_plan` applies.

    Parameters
    ----------
    others, min_sep, sampling_prob, iterations, max_batch, screen
        As ``screen_plan``, and whether to screen (``None``: the platform's default).

    Returns
    -------
    ScreenPlan or None
    """
    screen = screens_by_default() if screen is None else bool(screen)
    return screen_plan(others, min_sep, sampling_prob, iterations, max_batch) if screen else None


def _from_dense(r_t: jax.Array, max_batch: int, keep: bool) -> CountDraws:
    """Counts read from every sample's draws ``r_t`` (kept as ``dense_t`` if ``keep``)."""
    return CountDraws(jnp.any(r_t >= max_batch, axis=0), lambda idx: jnp.take(r_t, idx, axis=1, mode="clip"),
                      r_t if keep else None)


def _sampler(key, args: tuple, num_samples: int, screen: bool | None):
    """``(taus, rows_t, plan)`` of the screened sampler, ``(None, r_t, None)`` of every sample's chain (dense), or
    ``None`` where ``B_max > N`` (no draw)."""
    if args[5] > args[0]:
        return None
    plan = active_screen_plan(args[0], args[1], args[2], args[4], args[5], screen)
    if plan is None:
        return None, other_counts_t(key, *args[:5], num_samples), None
    k_tau, k_chain = jax.random.split(key)
    taus = screen_taus(k_tau, plan, num_samples)

    def rows_t(idx):
        return screened_counts_t(k_chain, idx, jnp.take(taus, idx, mode="clip"), *args, plan)

    return taus, rows_t, plan


def _flag_screened(taus, rows_t, plan, args: tuple, num_samples: int, kept: int) -> PreparedCounts:
    """The screened sampler's flags (the chain run for the samples with ``tau < n``, a buffer at a time) and the
    rows of the first ``kept`` truncated samples."""
    n, max_batch, big = args[4], args[5], jnp.int32(num_samples)

    def flag(idx, out):
        rows = rows_t(idx)
        hit = jnp.any(rows >= max_batch, axis=0) & (idx < num_samples)
        slot = jnp.where(hit, jnp.sum(out.kept_idx != big) + jnp.cumsum(hit) - 1, kept)
        slot = jnp.where(slot < kept, slot, kept)
        return PreparedCounts(out.truncated.at[idx].set(hit, mode="drop"),
                              out.kept_idx.at[slot].set(idx.astype(jnp.int32), mode="drop"),
                              out.kept_rows.at[:, slot].set(rows, mode="drop"))

    empty = PreparedCounts(jnp.zeros((num_samples,), bool), jnp.full((kept,), big), jnp.zeros((n, kept), jnp.int32))
    return apply_to_flagged(taus < n, chain_buffer(num_samples, plan.flag_prob), flag, empty)


def _args(others, min_sep, sampling_prob, warm_start, iterations, max_batch) -> tuple:
    return int(others), int(min_sep), float(sampling_prob), bool(warm_start), int(iterations), int(max_batch)


def count_draws(key: jax.Array, others: int, min_sep: int, sampling_prob: float, warm_start: bool, iterations: int,
                max_batch: int, num_samples: int, dense: bool = False, screen: bool | None = None) -> CountDraws:
    """The counts of a block of ``num_samples`` samples (zeros, not drawn, when ``B_max > N``): screened
    (:func:`~mcacct.schemes.truncated.screen.screen_plan`; the chain runs, a buffer
    (:func:`~mcacct.schemes.truncated.screen.chain_buffer`) at a time, only for the samples with ``tau < n``, and
    again for the rows asked of ``rows_t``), or every sample's chain
    (:func:`mcacct.schemes.truncated.counts.other_counts_t`) where screening does not apply or ``screen`` is false
    (``None``: :func:`screens_by_default`). ``dense``: also every sample's counts (``rows_t`` then reads them: the
    same values).

    Parameters
    ----------
    key, others, min_sep, sampling_prob, warm_start, iterations, max_batch, num_samples
        The block's key, ``N``, ``b``, ``p``, the start, ``n``, ``B_max`` and ``B``.
    dense, screen : bool, bool or None
        As above.

    Returns
    -------
    CountDraws
    """
    args = _args(others, min_sep, sampling_prob, warm_start, iterations, max_batch)
    sampler = _sampler(key, args, num_samples, screen)
    if sampler is None:  # r <= N < B_max: no round can be truncated, r is not drawn (zeros)
        n = args[4]
        return CountDraws(jnp.zeros((num_samples,), bool), lambda idx: jnp.zeros((n, idx.shape[0]), jnp.int32),
                          jnp.zeros((n, num_samples), jnp.int32) if dense else None)
    taus, rows_t, plan = sampler
    if taus is None:
        return _from_dense(rows_t, max_batch, dense)
    if dense:  # the same values as rows_t, read from the dense draws
        return _from_dense(rows_t(jnp.arange(num_samples)), max_batch, True)
    return CountDraws(_flag_screened(taus, rows_t, plan, args, num_samples, 0).truncated, rows_t, None)


def prepare_counts(key: jax.Array, others: int, min_sep: int, sampling_prob: float, warm_start: bool,
                   iterations: int, max_batch: int, num_samples: int, kept: int = KEPT_ROWS,
                   screen: bool | None = None) -> PreparedCounts:
    """:func:`count_draws`'s flags, and the rows of the first ``kept`` truncated samples, as data.

    Parameters
    ----------
    key, others, min_sep, sampling_prob, warm_start, iterations, max_batch, num_samples, screen
        As :func:`count_draws`.
    kept : int
        ``R``, the rows kept (default :data:`KEPT_ROWS`).

    Returns
    -------
    PreparedCounts
        The flags equal :func:`count_draws`'s, and each kept row its ``rows_t``'s.
    """
    args = _args(others, min_sep, sampling_prob, warm_start, iterations, max_batch)
    sampler = _sampler(key, args, num_samples, screen)
    if sampler is None:
        return PreparedCounts(jnp.zeros((num_samples,), bool), jnp.full((kept,), jnp.int32(num_samples)),
                              jnp.zeros((args[4], kept), jnp.int32))
    taus, rows_t, plan = sampler
    if taus is None:   # every sample's chain: read the rows from it
        truncated = jnp.any(rows_t >= max_batch, axis=0)
        idx = jnp.nonzero(truncated, size=kept, fill_value=num_samples)[0].astype(jnp.int32)
        return PreparedCounts(truncated, idx, jnp.take(rows_t, idx, axis=1, mode="clip"))
    return _flag_screened(taus, rows_t, plan, args, num_samples, kept)


def counts_from_prepared(prepared: PreparedCounts, key: jax.Array, others: int, min_sep: int, sampling_prob: float,
                         warm_start: bool, iterations: int, max_batch: int, num_samples: int,
                         screen: bool | None = None) -> CountDraws:
    """The :class:`CountDraws` of a block from its :class:`PreparedCounts` (made by :func:`prepare_counts` with the
    same arguments): ``rows_t`` reads the kept rows, and draws again (as :func:`count_draws`) only the rows not
    kept (the engine asks for truncated samples only; beyond the first ``R`` of a block they are rare).

    Parameters
    ----------
    prepared : PreparedCounts
        The block's prepared counts.
    key, others, min_sep, sampling_prob, warm_start, iterations, max_batch, num_samples, screen
        As :func:`prepare_counts`.

    Returns
    -------
    CountDraws
        The values of :func:`count_draws`'s for every sample of the block (an index ``>= num_samples``, a
        buffer's padding, reads a placeholder row), ``dense_t`` ``None``. With every sample's chain a row not kept
        draws the block's whole chain again: prepare counts ahead where they are screened.
    """
    args = _args(others, min_sep, sampling_prob, warm_start, iterations, max_batch)
    if args[5] > args[0]:   # no draw: zeros, as count_draws
        return CountDraws(prepared.truncated, lambda idx: jnp.zeros((args[4], idx.shape[0]), jnp.int32), None)

    def redraw(rows, idx, missing, key):
        taus, draw, _ = _sampler(key, args, num_samples, screen)
        fresh = jnp.take(draw, idx, axis=1, mode="clip") if taus is None else draw(idx)
        return jnp.where(missing[None, :], fresh, rows)

    def rows_t(idx):
        match = prepared.kept_idx[None, :] == idx[:, None]
        rows = jnp.take(prepared.kept_rows, jnp.argmax(match, axis=1), axis=1)
        missing = ~jnp.any(match, axis=1) & (idx < num_samples)
        return rare_cond(jnp.any(missing), redraw, lambda rows, *o: rows, rows, idx, missing, key)

    return CountDraws(prepared.truncated, rows_t, None)
