"""Table normals for the remove skip's float32 screen (#39, mcacct.kernels.normal_table): every word's table value
lies within alpha of the sampler's float64 normal, the cell ends come from a NumPy inversion checked against mpmath,
the screen with alpha bounds the exact block maxima, and the ladder by key (table screen, draws it does not let go
redrawn by column) gives every computed loss the bits of the draws' ladder."""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from mcacct.kernels.block_terms import noise_block_maxima_t
from mcacct.kernels.const_column import block_term_maxima_t
from mcacct.kernels.bound import block_layout
from mcacct.kernels.normal import ndtri_lower_numpy, normal_from_bits, standard_normal
from mcacct.kernels.normal_table import (ENDPOINT_REL, SCREEN_TABLE_BITS, normal_table, table_normals_from_bits,
                                         table_normals_lanes, table_screen_applies)
from mcacct.kernels.output import (ladder_by_key, ladder_losses_from_draws_t, ladder_losses_from_key_t,
                                   standardised_blocks_t)
from mcacct.kernels.shortcuts import RemoveSkip
from mcacct.kernels.sliding import sliding_dot_t
from mcacct.schemes.bminsep import expected_participation_rate

MSE_LIKE = (0.6, 0.45, 0.3, 0.22, 0.15, 0.1, 0.06)
_both = jax.jit(lambda w: (normal_from_bits(w), table_normals_from_bits(w)))


def _words(k: np.ndarray, negative: bool) -> np.ndarray:
    return (np.uint64(int(negative)) << np.uint64(63)) | (k.astype(np.uint64) << np.uint64(11))


def _cell_ends(m: int) -> np.ndarray:
    """Every cell's first and last k of the sampler's u = (k + 1/2) 2^-53."""
    first = int(np.float64(2.0**-54).view(np.uint64)) >> (52 - m)
    cells = np.arange(53 << m, dtype=np.uint64) + np.uint64(first)
    a = (cells << np.uint64(52 - m)).view(np.float64)
    b = np.minimum(((cells + np.uint64(1)) << np.uint64(52 - m)).view(np.float64), 0.5)
    k = np.concatenate([np.ceil(a * 2.0**53 - 0.5), np.ceil(b * 2.0**53 - 0.5) - 1.0])
    return np.clip(k, 0, 2.0**52 - 1).astype(np.uint64)


def test_every_cell_end_is_within_alpha_of_the_sampler():
    """Both ends of all 53 2^m cells, both signs, and 2^18 random words: |z_hat - z| <= alpha against the XLA
    sampler, and the widest cells nearly reach it (alpha is not loose)."""
    _, alpha = normal_table()
    k = np.concatenate([_cell_ends(SCREEN_TABLE_BITS),
                        np.random.default_rng(5).integers(0, 2**52, 2**18, dtype=np.uint64)])
    worst = 0.0
    for negative in (False, True):
        z, z_hat = (np.asarray(v, np.float64) for v in _both(jnp.asarray(_words(k, negative))))
        assert np.all(np.signbit(z) == negative) and np.all(np.signbit(z_hat) == negative)
        worst = max(worst, float(np.max(np.abs(z_hat - z))))
    assert worst <= alpha and worst > 0.99 * alpha
    # the widest cell is the first of [1/4, 1/2): 2^-(m+2) wide, slope 1/phi(Phi^-1(1/4)) there
    slope = math.sqrt(2.0 * math.pi) * math.exp(0.5 * float(mpmath.erfinv(-0.5)) ** 2 * 2.0)
    assert alpha == pytest.approx(2.0 ** -(SCREEN_TABLE_BITS + 2) * slope / 2.0, rel=1e-3)


@settings(max_examples=30, deadline=None)
@given(words=st.lists(st.integers(0, 2**64 - 1), min_size=64, max_size=64))  # one program
def test_any_word_is_within_alpha(words):
    z, z_hat = (np.asarray(v, np.float64) for v in _both(jnp.asarray(np.asarray(words, np.uint64))))
    assert np.all(np.abs(z_hat - z) <= normal_table()[1])


def test_the_numpy_inversion_is_within_its_allowance_of_mpmath():
    """The cell ends' NumPy AS 241 against mpmath's quantile on every branch (central, mid tail, far tail) and both
    ends of (0, 1/2]: relative error <= 1e-14, a hundredth of ENDPOINT_REL."""
    u = np.concatenate([[2.0**-54, 2.0**-53, 1e-12, math.exp(-25.0), 0.075, 0.0749, 0.0751, 0.25, 0.4999, 0.5],
                        np.exp(np.linspace(math.log(2.0**-54), math.log(0.5), 400)),
                        np.random.default_rng(2).uniform(0.0, 0.5, 200)])
    got = ndtri_lower_numpy(u)
    mpmath.mp.dps = 40
    for ui, gi in zip(u, got):
        want = float(mpmath.sqrt(2) * mpmath.erfinv(2 * mpmath.mpf(float(ui)) - 1))
        assert abs(gi - want) <= 1e-14 * abs(want) + 1e-300, ui
    assert 100 * 1e-14 <= ENDPOINT_REL


def test_bad_table_bits_are_refused():
    for bad in (0, 21):
        with pytest.raises(ValueError, match="bits"):
            normal_table(bad)
    t, _ = normal_table()
    assert t.dtype == np.float32 and t.shape == (53 << SCREEN_TABLE_BITS,) and not t.flags.writeable


def _assert_above_the_block_maxima(zeta, z, c, n, b, block):
    """Every block's ``zeta`` (front-padded, end-aligned blocks of ``min(block, b)`` rows) exceeds the block maxima
    of the float64 draws' sliding sums (float64, far within the allowances) by at least 1e-12."""
    s, k_blocks, k_pad, _, _ = block_layout(n, b, block)
    sums = np.asarray(sliding_dot_t(jnp.asarray(z), c, "direct"))
    front = k_pad - k_blocks
    for blk in range(k_blocks):
        rows = slice(max(0, n - (k_blocks - blk) * s), n - (k_blocks - 1 - blk) * s)
        assert np.all(zeta[front + blk] >= sums[rows].max(axis=0) + 1e-12)


def test_the_screen_of_table_normals_bounds_the_exact_block_maxima():
    """zeta from table normals (float32, within alpha) >= the block maxima of the float64 draws' exact sliding sums
    (float64 sums, far within the allowance), at a shape with a length-15 2^k transform; wrong dtypes refused."""
    n, b, width = 300, 20, 16
    c = tuple(0.5 / (1.0 + i) ** 0.5 for i in range(b))
    key = jax.random.key(4)
    z = np.asarray(standard_normal(key, (n, width)))
    z_hat = table_normals_lanes(key, (n, width))
    zeta = np.asarray(noise_block_maxima_t(z_hat, n, b, c, lanes=True, noise_error=normal_table()[1]))
    _assert_above_the_block_maxima(zeta, z, c, n, b, 16)
    with pytest.raises(ValueError, match="float32"):
        noise_block_maxima_t(jnp.asarray(z.T), n, b, c, lanes=True, noise_error=1e-4)
    with pytest.raises(ValueError, match="float64"):
        noise_block_maxima_t(z_hat, n, b, c, lanes=True)
    with pytest.raises(ValueError, match="noise_error"):
        noise_block_maxima_t(z_hat, n, b, c, lanes=True, noise_error=-1.0)


def test_the_prefix_sums_of_table_normals_bound_the_exact_block_maxima():
    """A constant column's zeta from table normals (float32, within alpha; block_term_maxima_t's prefix sums) >= the
    block maxima of the float64 draws' sliding sums, at a block length that does not divide b; wrong dtypes
    refused."""
    n, b, width, c = 300, 20, 16, (0.25,) * 12
    key = jax.random.key(5)
    z = np.asarray(standard_normal(key, (n, width)))
    z_hat = table_normals_from_bits(jax.random.bits(key, (n, width), jnp.uint64))
    tau = jnp.zeros((-(-n // b), width), jnp.int32) + n       # no participation: the noise's maxima only
    _, zeta = (np.asarray(v) for v in block_term_maxima_t(tau, z_hat, n, b, c, 6, noise_error=normal_table()[1]))
    _assert_above_the_block_maxima(zeta, z, c, n, b, 6)
    with pytest.raises(ValueError, match="float32"):
        block_term_maxima_t(tau, jnp.asarray(z), n, b, c, noise_error=1e-4)
    with pytest.raises(ValueError, match="float64"):
        block_term_maxima_t(tau, z_hat, n, b, c)
    with pytest.raises(ValueError, match="noise_error"):
        block_term_maxima_t(tau, z_hat, n, b, c, noise_error=float("nan"))


N, B, P, WIDTH = 96, 8, 0.05, 64
KEY = jax.random.key(7)
SIGMAS = (0.4, 0.7, 1.5)


def _skip(threshold):
    return RemoveSkip(jnp.full(3, threshold), jnp.zeros(3), jnp.zeros(3))


CONST = (0.3,) * 6


@partial(jax.jit, static_argnums=2)   # the threshold traced: one program per column for every case
def _by_draws_and_by_key(key, threshold, c_col):
    """The same block's ladder from its drawn noise (float64 screen) and by key (table screen); and with no skip."""
    rate = expected_participation_rate(P, B)
    tau, z = standardised_blocks_t(key, N, B, P, True, rate, WIDTH)
    sig = jnp.asarray(SIGMAS)
    args = (N, sig, B, P, True, c_col, jnp.float64, "fft" if c_col == MSE_LIKE else "auto", "auto", 9.0)
    by_draws = ladder_losses_from_draws_t(tau, z, *args, _skip(threshold))
    by_key = ladder_losses_from_key_t(tau, jax.random.split(key)[1], *args, _skip(threshold))
    exact = ladder_losses_from_draws_t(tau, z, *args, None)
    return by_draws, by_key, exact


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@pytest.mark.parametrize("c_col", [MSE_LIKE, CONST], ids=["mse_like", "constant"])
@pytest.mark.parametrize("threshold", [-60.0, 3.0, 60.0])
def test_the_ladder_by_key_keeps_every_computed_loss(threshold, c_col):
    """On CPUs a ladder with both skips goes by key (a non-constant column's float32 screen, a constant column's
    prefix sums, both of table normals); there a loss is the exact one (bit for bit where the batch is computed
    whole; a narrower batch rounds otherwise, tests/kernels/test_settle.py) or a bound at most the threshold and at
    least the exact loss, as in the draws' ladder."""
    assert table_screen_applies(N, WIDTH)
    method = "fft" if c_col == MSE_LIKE else "auto"
    assert ladder_by_key(KEY, N, B, P, c_col, jnp.float64, method, 9.0, _skip(1.0), WIDTH)
    assert ladder_by_key(KEY, N, B, P, c_col, jnp.float64, "direct", 9.0, _skip(1.0), WIDTH) == (c_col == CONST)
    assert not ladder_by_key(KEY, N, B, P, c_col, jnp.float64, method, 9.0, None, WIDTH)
    assert not ladder_by_key(KEY, N, B, P, c_col, jnp.float32, method, 9.0, _skip(1.0), WIDTH)
    assert not ladder_by_key(jax.random.key(7, impl="rbg"), N, B, P, c_col, jnp.float64, method, 9.0, _skip(1.0),
                             WIDTH)    # no columns to redraw
    by_draws, by_key, exact = (np.asarray(v) for v in _by_draws_and_by_key(KEY, threshold, c_col))
    np.testing.assert_array_equal(by_key[:, 1], exact[:, 1])
    rem, ex = by_key[:, 0], exact[:, 0]
    same = np.all(np.abs(rem - ex) <= 1e-9 * (1.0 + np.abs(ex)), axis=0)
    assert np.all(rem[:, ~same] <= threshold) and np.all(rem[:, ~same] >= ex[:, ~same] - 1e-9)
    kept_by_draws = np.all(np.abs(by_draws[:, 0] - ex) <= 1e-9 * (1.0 + np.abs(ex)), axis=0)
    if threshold == -60.0:        # nothing can be let go: every loss exact, bit for bit, in both
        np.testing.assert_array_equal(rem, ex)
        np.testing.assert_array_equal(by_draws[:, 0], ex)
    if threshold == 60.0:         # almost every draw keeps its bound in both
        assert (~same).mean() > 0.5 and (~kept_by_draws).mean() > 0.5
