"""The truncated scheme's fast paths equal its full two-mixture loss, and the training side draws the same law.

* ``log_ratio_t`` (untruncated loss for every sample, mixture work only for samples with a truncated round,
  gathered into a buffer, several rounds when more are truncated) equals ``loss_rows`` (both mixtures for every sample)
  within the loss-error bound, where truncation never happens, is rare, or is frequent;
* ``ladder_losses`` (shared draws) equals the generic loss kernel per (sigma, direction) on the same key;
* ``mcacct.training.batching.TruncatedBMinSepSampler``'s batches give the accountant's law of ``r``: ``r`` counts
  the ``M - 1`` other examples, a training batch all ``M`` (the sensitive example is example 0 here).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcacct.engine.losses import direction_losses
from mcacct.engine.problem import Problem
from mcacct.engine.systematic import loss_error_bound
from mcacct.strategies.banded import BandedToeplitz
from mcacct.schemes.truncated import TruncatedBMinSep
from mcacct.training import batching as bt

SIGMA = 0.9
CASES = [  # (p, b, n, M, B_max): fraction of samples with a truncated round, for 256 samples
    (0.05, 1, 30, 100, 13),    # a few percent: one round of the gathered buffer, most samples untruncated
    (0.01, 2, 32, 2000, 31),   # a fifth: several rounds of the buffer
    (0.02, 2, 10, 1000, 31),   # ~8%, screened counts (mcacct.schemes.truncated.screen: flag probability 0.10)
]


@pytest.mark.parametrize("p,b,n,m,bmax", CASES)
def test_fast_loss_equals_the_two_mixture_loss(p, b, n, m, bmax):
    scheme = TruncatedBMinSep(p, b, n, m, bmax)
    strategy = BandedToeplitz((1.0, 0.5)[:b])
    eta = loss_error_bound(Problem(scheme, strategy), SIGMA)

    # both directions as one program: the same calls on the same key, compiled once instead of four programs
    # (XLA draws the counts the two directions share once; the count draws dominate the compile time)
    @jax.jit
    def both(key):
        out = []
        for direction in ("remove", "add"):
            d = scheme.sample_t(key, strategy, SIGMA, 256, direction, jnp.float64)
            fast = scheme.log_ratio_t(d.y, strategy, SIGMA, d.aux, direction, "auto", "auto")
            full = scheme.loss_rows(d.y.T, strategy, SIGMA, d.aux.T, direction, "auto", "auto")
            y, r = scheme.sample(key, strategy, SIGMA, 256, direction)  # the public row-major API
            out.append((fast, full, d.y.T, d.aux.T, y, r))
        return out

    for fast, full, y_t_rows, r_t_rows, y, r in both(jax.random.key(3)):
        np.testing.assert_allclose(np.asarray(fast), np.asarray(full), rtol=0, atol=eta)
        # the public row-major API gives the same draws
        np.testing.assert_array_equal(np.asarray(y), np.asarray(y_t_rows))
        np.testing.assert_array_equal(np.asarray(r), np.asarray(r_t_rows))


@pytest.mark.parametrize("p,b,n,m,bmax", [CASES[0], CASES[2]])
def test_shared_draw_ladder_equals_the_loss_kernel_per_candidate(p, b, n, m, bmax):
    scheme = TruncatedBMinSep(p, b, n, m, bmax)
    strategy = BandedToeplitz((1.0, 0.5)[:b])
    sigmas = (0.7, 1.3)

    # The ladder and the generic kernel's losses of both directions for one candidate ``sig`` (traced), as one
    # program, called once per candidate: the same functions on the same key, compiled once instead of three times
    # (XLA computes their common count draws once; the screened case's three programs took ~45 s to compile alone).
    @jax.jit
    def ladder_and_kernel(key, sigmas, sig):
        return (scheme.ladder_losses(key, strategy, sigmas, 256, jnp.float64),
                [direction_losses(scheme.mechanism(strategy), key, sig, 256, d) for d in ("remove", "add")])

    for j, sig in enumerate(sigmas):
        ladder, refs = ladder_and_kernel(jax.random.key(5), jnp.asarray(sigmas), sig)
        eta = loss_error_bound(Problem(scheme, strategy), sig)
        for k, ref in enumerate(refs):  # remove, add
            np.testing.assert_allclose(np.asarray(ladder[j, k]), np.asarray(ref), rtol=0, atol=2 * eta)


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
def test_redrawn_noise_of_truncated_samples_equals_the_kept_noise(monkeypatch):
    """The samples with a truncated round get their noise redrawn column by column
    (:func:`mcacct.kernels.normal.standard_normal_columns`); with a PRNG that cannot (here: pretended) the block
    keeps every sample's noise instead. The same outputs bit for bit, over 4 sub-blocks (made 16 samples wide) with
    about a quarter of the samples truncated (the ladder and the losses take their rows from the same
    ``_draw_blocks``)."""
    import mcacct.schemes.truncated.scheme as truncated
    monkeypatch.setattr(truncated, "sub_block_size", lambda iterations, num_samples, max_lanes=None: 16)
    scheme = TruncatedBMinSep(0.05, 3, 40, 300, 24, warm_start=False)  # cold: no multinomial history to compile
    strategy = BandedToeplitz((1.0, 0.5))

    def draws():  # traced afresh (the method's jit cache would not see the patches)
        fn = jax.jit(lambda k: scheme._sample_t.__wrapped__(scheme, k, 0.9, strategy, 64, True,
                                                            jnp.dtype(jnp.float64)))
        return [np.asarray(a) for a in fn(jax.random.key(6))]

    assert scheme._sub_block(64) == 16
    y, r = draws()
    assert 0.1 < np.mean(np.any(r >= 24, axis=0)) < 0.5
    monkeypatch.setattr(truncated, "columns_supported", lambda key: False)
    y_kept, r_kept = draws()
    np.testing.assert_array_equal(r, r_kept)
    np.testing.assert_array_equal(y, y_kept)


@pytest.mark.parametrize("warm", [True, False])
def test_training_batches_and_the_accountant_draw_the_same_counts(warm):
    m, p, b, n, trials = 40, 0.1, 3, 6, 6000
    sampler = bt.TruncatedBMinSepSampler(m, p, b, 8)
    keys = jax.random.split(jax.random.key(17), trials)

    @jax.jit  # one program each (run eagerly, the warm start's draws compiled ~110 programs, one per operation)
    def training(keys):
        masks = jax.vmap(lambda k: sampler.untruncated.sample_batches(k, n, warm_start=warm))(keys)  # (T, n, M)
        _, _, sizes = jax.vmap(lambda k: sampler.sample_index_batches(k, n, warm_start=warm))(keys)
        return masks, sizes

    masks, sizes = (np.asarray(v) for v in training(keys))
    np.testing.assert_array_equal(sizes, masks.sum(axis=2))              # pre-truncation sizes count all M
    train = sizes - masks[:, :, 0]                                        # ... r counts the M - 1 others
    acct = np.asarray(jax.jit(lambda k: TruncatedBMinSep(p, b, n, m, 8, warm).sample_other_counts(k, trials))(
        jax.random.key(2)))
    se = np.sqrt(train.var(axis=0) / trials + acct.var(axis=0) / trials)
    assert np.all(np.abs(train.mean(axis=0) - acct.mean(axis=0)) <= 5 * se)
    for i in range(n - 1):  # marginals and pairs (r_i, r_{i+1}): Pearson chi-square of the two samples
        for cols in ((i,), (i, i + 1)):
            a = [tuple(row) for row in train[:, cols]]
            c = [tuple(row) for row in acct[:, cols]]
            keys_ = sorted(set(a) | set(c))
            ca = np.array([a.count(k) for k in keys_], float)
            cc = np.array([c.count(k) for k in keys_], float)
            keep = (ca + cc) >= 20
            ca = np.append(ca[keep], ca[~keep].sum())
            cc = np.append(cc[keep], cc[~keep].sum())
            tot = ca + cc
            ok = tot > 0
            e = tot[ok] / 2
            stat = float(np.sum((ca[ok] - e) ** 2 / e + (cc[ok] - e) ** 2 / e))
            df = int(ok.sum()) - 1
            assert stat <= df + 6 * math.sqrt(2 * max(df, 1)) + 12, (i, cols, stat, df)


def test_sub_blocks_are_cache_sized_at_long_blocks():
    """The truncated scheme's sub-blocks (each with its own keys) hold at most ``cache_lanes(n)`` samples: a
    power of two, ``(n, lanes)`` float64 within 4 MiB; unchanged (the engine's lanes) for ``n <= 2048``."""
    from mcacct.kernels.blocks import cache_lanes, lanes_target, sub_block_size
    for n in (1, 16, 100, 1024, 2048, 4096, 7200, 10_000, 10**6):
        lanes = cache_lanes(n)
        assert lanes >= 16 and lanes & (lanes - 1) == 0
        assert lanes == 16 or 8 * n * lanes <= 4 << 20 < 16 * n * lanes
        sub = sub_block_size(n, 4096, lanes)
        assert sub == min(lanes_target(n), lanes) and 4096 % sub == 0
        if n <= 2048:
            assert sub == sub_block_size(n, 4096)
    assert TruncatedBMinSep(0.01, 256, 7200, 10**6, 2048)._sub_block(4096) == 64
    assert sub_block_size(7200, 96, 64) == 32  # a power of two that divides the samples


def test_patch_rounds_are_capped_on_cpus_and_keep_every_loss(monkeypatch):
    """Rows with a truncated round are patched a sixteenth of the batch (at least 8) per round, at most
    ``PATCH_ROWS_MAX`` (16) on CPUs: up to batches of 256 (the stored statistics' chunk) the same on every platform.
    The round's size changes neither which samples are patched nor any untruncated loss (bit for bit), and the
    patched losses only within the loss-error bound (their recursions run on batches of another width). The
    platform is set, so the test means the same on a device."""
    import mcacct.schemes.truncated.scheme as truncated
    p, b, n, m, bmax = CASES[1]   # about a fifth of the samples truncated: several rounds of either size
    scheme, strategy, sigmas = TruncatedBMinSep(p, b, n, m, bmax), BandedToeplitz((1.0, 0.5)), (0.7, 1.3)
    monkeypatch.setenv("MCACCT_TARGET_PLATFORM", "gpu")
    assert [scheme._buffer(k) for k in (64, 256, 512, 4096)] == [8, 16, 32, 256]
    monkeypatch.setenv("MCACCT_TARGET_PLATFORM", "cpu")
    assert [scheme._buffer(k) for k in (4, 64, 128, 256, 512, 4096)] == [4, 8, 8, 16, 16, 16]

    def ladder():   # traced afresh (the method's jit cache would not see the patch)
        fn = jax.jit(lambda k: scheme._ladder.__wrapped__(scheme, k, jnp.asarray(sigmas), strategy, 512,
                                                          jnp.dtype(jnp.float64), "auto", "auto", None, None))
        return np.asarray(fn(jax.random.key(8)))

    capped = ladder()
    monkeypatch.setattr(truncated, "PATCH_ROWS_MAX", {})
    wide = ladder()
    d = scheme.sample_t(jax.random.key(8), strategy, sigmas[0], 512, "remove", jnp.float64)
    hit = np.any(np.asarray(d.aux) >= bmax, axis=0)
    assert 40 < hit.sum() < 200
    np.testing.assert_array_equal(capped[..., ~hit], wide[..., ~hit])
    for j, sig in enumerate(sigmas):
        eta = loss_error_bound(Problem(scheme, strategy), sig)
        np.testing.assert_allclose(capped[j][..., hit], wide[j][..., hit], rtol=0, atol=2 * eta)


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@pytest.mark.parametrize("impl", ["threefry2x32", "rbg"])
def test_lane_major_ladder_patches_the_same_noise(monkeypatch, impl):
    """With both skips and a screened column the ladder draws its noise lane-major (the table screen off); the
    samples with a truncated round are patched from the same noise, redrawn by columns (threefry) or kept (another
    generator, stored time-major): every loss as with time-major noise, bounds within their last bits. With the
    table screen on (threefry only: it goes by key) every loss is that one too, or a bound at most the threshold."""
    import mcacct.kernels.normal_table as normal_table
    import mcacct.schemes.truncated.scheme as truncated
    from mcacct.kernels.shortcuts import RemoveSkip
    monkeypatch.setitem(normal_table.TABLE_SCREEN_AUTO, "cpu", False)
    p, b, n, m, bmax = CASES[1]
    scheme, sigmas = TruncatedBMinSep(p, b, n, m, bmax), (0.7, 1.3)
    strategy = BandedToeplitz((0.6, 0.45, 0.3, 0.2)[:b])
    skip = RemoveSkip(jnp.full(2, 2.0), jnp.zeros(2), jnp.full(2, 1e-9))
    assert truncated.ladder_noise_lanes(strategy.c_col, jnp.float64, "fft", 9.0, skip)

    def ladder():   # traced afresh (the method's jit cache would not see the patch)
        fn = jax.jit(lambda k: scheme._ladder.__wrapped__(scheme, k, jnp.asarray(sigmas), strategy, 512,
                                                          jnp.dtype(jnp.float64), "fft", "auto", 9.0, skip))
        return np.asarray(fn(jax.random.key(8, impl=impl)))

    lanes = ladder()
    monkeypatch.setitem(normal_table.TABLE_SCREEN_AUTO, "cpu", True)
    by_key = ladder()
    monkeypatch.setattr(truncated, "ladder_noise_lanes", lambda *args: False)
    monkeypatch.setitem(normal_table.TABLE_SCREEN_AUTO, "cpu", False)
    time_major = ladder()
    np.testing.assert_allclose(lanes, time_major, rtol=1e-12, atol=1e-12)
    close = np.abs(by_key - time_major) <= 1e-12 * (1.0 + np.abs(time_major))
    assert np.all(close | ((by_key <= 2.0) & (by_key >= time_major - 1e-9)))
    assert np.all(close[:, 1])                            # the add direction: the same
    if impl == "rbg":                                     # no columns to redraw: the lanes path, unchanged
        np.testing.assert_array_equal(by_key, lanes)
