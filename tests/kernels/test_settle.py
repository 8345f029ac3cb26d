"""The remove skip for any column (#39, shortcut 1): the mean's block maxima from the participation alone
(mcacct.kernels.block_terms.mean_block_maxima_t) bound the exact ones, and a batch whose bound U fails for a few draws
settles them on a narrower batch (mcacct.kernels.shortcuts.settle_remove_losses): each remove loss is the exact one
bit for bit, or a bound of it at most the threshold."""

from __future__ import annotations

import functools
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from mcacct.kernels.block_terms import (mean_block_maxima_t, noise_block_maxima_t, noise_screen_error,
                                        overlap_window_maxima)
from mcacct.kernels.fft_size import screen_fft_size, sliding_fft_size
from mcacct.kernels.bound import block_layout, block_maxima_t, remove_loss_bound_from_maxima
from mcacct.kernels.output import (ladder_losses_from_draws_t, ladder_noise_lanes, ladder_sums_t,
                                   standardised_blocks_t)
from mcacct.kernels.recursion import recursion_log_ratio_t
from mcacct.kernels.shortcuts import REFINE_LANES, RemoveSkip
from mcacct.kernels.mean_shift import mean_shift_from_blocks_t
from mcacct.kernels.sliding import column_sq_norms, reversed_column
from mcacct.schemes.bminsep import expected_participation_rate

MSE_LIKE = (0.6, 0.45, 0.3, 0.22, 0.15, 0.1, 0.06)


@functools.partial(jax.jit, static_argnums=tuple(range(1, 7)))  # one program per example
def _mean_maxima(key, n, b, p, warm, c, block):
    tau, _ = standardised_blocks_t(key, n, b, p, warm, expected_participation_rate(p, b), 4)
    return mean_block_maxima_t(tau, n, b, c, block), mean_shift_from_blocks_t(tau, n, b, c, jnp.float64)


@settings(max_examples=8, deadline=None)  # each example compiles its program (~1-2 s)
@given(n=st.integers(1, 60), b=st.integers(1, 20), k=st.integers(1, 20), p=st.sampled_from([0.01, 0.3, 0.9, 1.0]),
       warm=st.booleans(), block=st.integers(1, 20), seed=st.integers(0, 2**16),
       taps=st.lists(st.floats(-3.0, 3.0, allow_nan=False, width=32), min_size=20, max_size=20))
# every block reached (p = 1), a block length that does not divide b, signs mixed
@example(n=37, b=5, k=5, p=1.0, warm=True, block=3, seed=1, taps=[1.0, -0.5, 0.25, 2.0, -1.5] + [0.0] * 15)
def test_mean_block_maxima_bound_the_exact_ones(n, b, k, p, warm, block, seed, taps):
    """mu >= max over each block's rows of s^m_i - |c^(i)|^2 / 2, both exact (Fractions of the float mean and c),
    for columns of any sign, at most b taps, whatever the participation (p near 1: several reach a block)."""
    k = min(k, b)
    c = tuple(float(v) for v in taps[:k])
    mu, mean = (np.asarray(v) for v in _mean_maxima(jax.random.key(seed), n, b, p, warm, c, block))
    s, k_blocks, k_pad, _, _ = block_layout(n, b, block)
    front = k_pad - k_blocks
    assert mu.shape == (k_pad, 4) and np.all(mu[:front] == -np.inf)
    cf = [Fraction(v) for v in c]
    for lane in range(4):
        m = [Fraction(float(v)) for v in mean[:, lane]]     # the mean C x: 0, c_j, sums of them (exact in floats)
        for blk in range(k_blocks):
            rows = range(max(0, n - (k_blocks - blk) * s), n - (k_blocks - 1 - blk) * s)
            best = max(sum(cf[j] * m[i + j] for j in range(min(k, n - i)))
                       - sum(cf[j] ** 2 for j in range(min(k, n - i))) / 2 for i in rows)
            assert Fraction(float(mu[front + blk, lane])) >= best, (blk, lane)


def test_the_overlap_table_is_the_windowed_autocorrelation():
    c, s = (1.0, -2.0, 0.5), 2
    g = {d: sum(abs(c[i]) * abs(c[i - d]) for i in range(3) if 0 <= i - d < 3) for d in range(-2, 3)}
    want = [max(g.get(d, 0.0) for d in range(j - s + 1, j + 1)) for j in range(-2, 4)] + [0.0]
    np.testing.assert_array_equal(overlap_window_maxima(c, s), want)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def _screen(z, n, b, c, block):
    return noise_block_maxima_t(z, n, b, c, block)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 60), b=st.integers(1, 20), k=st.integers(1, 20), block=st.integers(1, 20),
       scale=st.sampled_from([1.0, 8.0]), kind=st.sampled_from(["normal", "constant", "alternating"]),
       seed=st.integers(0, 2**16), taps=st.lists(st.floats(-3.0, 3.0, allow_nan=False, width=32), min_size=20,
                                                 max_size=20))
def test_the_noise_screen_bounds_the_exact_block_maxima(n, b, k, block, scale, kind, seed, taps):
    """zeta from float32 FFT sums plus their certified error >= the exact block maxima of s^z (Fractions of the float
    noise and c), for columns of any sign, noise of any pattern (a constant noise puts all its mass where the
    column's transform is largest)."""
    k = min(k, b)
    c = tuple(float(v) for v in taps[:k])
    rng = np.random.default_rng(seed)
    z = {"normal": rng.normal(0.0, scale, (n, 3)), "constant": np.full((n, 3), scale),
         "alternating": scale * (-1.0) ** np.arange(n)[:, None] * np.ones((n, 3))}[kind]
    zeta = np.asarray(_screen(jnp.asarray(z), n, b, c, block))
    s, k_blocks, k_pad, _, _ = block_layout(n, b, block)
    front = k_pad - k_blocks
    assert np.all(zeta[:front] == -np.inf)
    cf = [Fraction(v) for v in c]
    for lane in range(3):
        zf = [Fraction(float(v)) for v in z[:, lane]]
        for blk in range(k_blocks):
            rows = range(max(0, n - (k_blocks - blk) * s), n - (k_blocks - 1 - blk) * s)
            best = max(sum(cf[j] * zf[i + j] for j in range(min(k, n - i))) for i in rows)
            assert Fraction(float(zeta[front + blk, lane])) >= best, (blk, lane)


def test_the_screen_error_model_holds_with_room_at_the_production_shape():
    """At n = 7200 and a 256-tap decreasing column: the float32 sums' largest error, against float64 sums (errors
    near 1e-13, far below), stays well inside the certified e ||z||_2 (assumption (A1) in float32), for Gaussian,
    constant and alternating noise."""
    from mcacct.kernels.sliding import sliding_dot_t
    n, k = 7200, 256
    c = tuple(float(v) for v in 0.44 * np.exp(-np.arange(k) / 60.0) + 0.03)
    size = screen_fft_size(n, k)
    assert size == 7680
    rng = np.random.default_rng(5)
    z = np.concatenate([rng.normal(size=(n, 6)), np.ones((n, 1)), (-1.0) ** np.arange(n)[:, None]], axis=1)
    zj = jnp.asarray(z)
    exact = np.asarray(jax.jit(lambda x: sliding_dot_t(x, c, "fft"))(zj))
    v = np.asarray(jnp.fft.irfft(jnp.fft.rfft(zj.T.astype(jnp.float32), n=size, axis=1)
                                 * jnp.asarray(np.fft.rfft(reversed_column(c, size)).astype(np.complex64)), n=size,
                                 axis=1)[:, :n]).T
    ratio = np.max(np.abs(v - exact), axis=0) / (noise_screen_error(c, size) * np.linalg.norm(z, axis=0))
    assert np.all(ratio < 0.2), ratio


def test_the_transform_lengths_are_the_smallest_of_their_form():
    for n, k in [(1, 1), (96, 8), (100, 1), (2048, 256), (5000, 3), (7200, 256), (60, 64)]:
        size = screen_fft_size(n, k)
        forms = [m << e for m in (1, 3, 5, 15) for e in range(16)]
        assert size >= n + k and size == min(f for f in forms if f >= n + k)
        assert sliding_fft_size(n, k) == min(1 << e for e in range(16) if 1 << e >= n + k)


@pytest.mark.parametrize("size", [256, 384, 640, 7680, 8192])
def test_float32_real_transforms_within_the_normwise_model(size):
    """Assumption (A1) in float32, per transform: XLA's rfft and irfft of float32 inputs are within eps_F of the
    float64 transforms (relative, 2-norm over the half spectrum, resp. the output), with eps_F = 8 (log2 N + 1) u,
    for Gaussian, constant and alternating inputs (measured: about a fiftieth of it), at powers of two and at the
    screen's other lengths (a factor 3, 5 or 15: :func:`~mcacct.kernels.fft_size.screen_fft_size`)."""
    from mcacct.kernels.block_terms import FFT_ERROR_PER_LEVEL
    eps_f = FFT_ERROR_PER_LEVEL * (np.log2(size) + 1) * 2.0**-24
    rng = np.random.default_rng(size)
    x = np.stack([rng.normal(size=size), np.ones(size), (-1.0) ** np.arange(size)]).astype(np.float32)
    fwd = np.asarray(jnp.fft.rfft(jnp.asarray(x), axis=1))
    fwd_exact = np.fft.rfft(x.astype(np.float64), axis=1)
    assert np.all(np.linalg.norm(fwd - fwd_exact, axis=1) <= 0.2 * eps_f * np.linalg.norm(fwd_exact, axis=1))
    w = (rng.normal(size=fwd.shape) + 1j * rng.normal(size=fwd.shape)).astype(np.complex64)
    w[:, 0] = w[:, 0].real
    w[:, -1] = w[:, -1].real
    inv = np.asarray(jnp.fft.irfft(jnp.asarray(w), n=size, axis=1))
    inv_exact = np.fft.irfft(w.astype(np.complex128), n=size, axis=1)
    assert np.all(np.linalg.norm(inv - inv_exact, axis=1) <= 0.2 * eps_f * np.linalg.norm(inv_exact, axis=1))


N, B, P = 96, 8, 0.05


def _draws(num=64, seed=3):
    return standardised_blocks_t(jax.random.key(seed), N, B, P, True, expected_participation_rate(P, B), num)


@functools.partial(jax.jit, static_argnums=(2, 4, 5))
def _ladder(tau, z, c, rs, add_bound=9.0, method="auto"):
    return ladder_losses_from_draws_t(tau, z, N, jnp.asarray([0.4, 0.7, 1.5]), B, P, True, c, jnp.float64, method,
                                      "auto", add_bound, rs)


@functools.partial(jax.jit, static_argnums=2)
def _bound_and_exact(tau, z, c):
    """U (the mean from the table, the noise's sums) and the exact remove losses (log-space scan)."""
    sig = jnp.asarray([0.4, 0.7, 1.5])
    s_m, s_z = ladder_sums_t(tau, z, N, B, c, jnp.float64, "auto")
    s, _, k_pad, _, _ = block_layout(N, B, 16)
    u = remove_loss_bound_from_maxima(mean_block_maxima_t(tau, N, B, c), block_maxima_t(s_z, s, k_pad), sig,
                                      jnp.zeros(3), N, B, P, True)
    half = jnp.asarray(0.5 * column_sq_norms(c, N))[:, None]
    exact = jax.lax.map(lambda g: recursion_log_ratio_t((s_m + (g * s_z - half)) / g**2, B, P, True, "scan"), sig)
    return u, exact


def _skip(threshold, eta=0.0):
    return RemoveSkip(jnp.full(3, threshold), jnp.zeros(3), jnp.full(3, eta))


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@pytest.mark.parametrize("eta", [0.0, 0.25])
def test_a_few_failing_draws_settle_on_a_narrower_batch(eta):
    """Where U fails for at most REFINE_LANES draws whose losses are below the threshold, they keep their loss from a
    narrower batch plus eta (a bound, not the exact bits) and every other draw keeps U; where one of them is above
    it, the batch is computed whole and they take the exact bits."""
    tau, z = _draws()
    u, exact = (np.asarray(v) for v in _bound_and_exact(tau, z, MSE_LIKE))
    off = np.asarray(_ladder(tau, z, MSE_LIKE, None))[:, 0]
    np.testing.assert_allclose(off, exact, rtol=1e-9, atol=1e-9)
    worst = np.sort(u.max(axis=0))[::-1]
    thr = float(worst[REFINE_LANES - 1] + worst[REFINE_LANES]) / 2       # REFINE_LANES draws fail U
    fail = u.max(axis=0) > thr
    assert fail.sum() == REFINE_LANES and exact[:, fail].max() + eta < thr
    on = np.asarray(_ladder(tau, z, MSE_LIKE, _skip(thr, eta)))[:, 0]
    assert np.all(on[:, fail] <= thr) and np.all(on[:, fail] >= exact[:, fail] + eta - 1e-12)
    np.testing.assert_allclose(on[:, fail], exact[:, fail] + eta, rtol=1e-9, atol=1e-9)
    assert not np.array_equal(on[:, fail], off[:, fail]) or eta == 0.0
    np.testing.assert_allclose(on[:, ~fail], u[:, ~fail], rtol=1e-13, atol=1e-15)
    # one more failing draw than the narrower batch holds: the batch is computed whole
    thr5 = float(worst[REFINE_LANES] + worst[REFINE_LANES + 1]) / 2
    on5 = np.asarray(_ladder(tau, z, MSE_LIKE, _skip(thr5, eta)))[:, 0]
    fail5 = u.max(axis=0) > thr5
    np.testing.assert_array_equal(on5[:, fail5], off[:, fail5])
    # a failing draw whose loss is above the threshold: the batch is computed whole, bit for bit
    top = int(np.argmax(u.max(axis=0)))
    thr_hi = float(exact[:, top].max()) - 1e-3
    on_hi = np.asarray(_ladder(tau, z, MSE_LIKE, _skip(thr_hi, eta)))[:, 0]
    fail_hi = u.max(axis=0) > thr_hi
    np.testing.assert_array_equal(on_hi[:, fail_hi], off[:, fail_hi])


@functools.partial(jax.jit, static_argnums=(2, 4))
def _ladder_lanes(tau, z_lanes, c, rs, method):
    return ladder_losses_from_draws_t(tau, z_lanes, N, jnp.asarray([0.4, 0.7, 1.5]), B, P, True, c, jnp.float64,
                                      method, "auto", 9.0, rs, lanes=True)


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@pytest.mark.parametrize("c,method", [(MSE_LIKE, "fft"), (MSE_LIKE, "direct"), ((0.5,) * 4, "auto")],
                         ids=["screen", "short-sums", "constant"])
@pytest.mark.parametrize("fail", ["all", "few", "none"])
def test_lane_major_noise_gives_the_same_losses(c, method, fail):
    """The same draws read lane-major (``lanes``: the float32 screen without a transposing copy; elsewhere
    transposed back): every exact loss the same bits, every bound within its last bits (the norm summed in another
    order), whether the batch is let go, settled on a narrower batch or computed whole."""
    assert ladder_noise_lanes(c, jnp.float64, method, 9.0, _skip(1.0)) == (method == "fft")
    assert not ladder_noise_lanes(c, jnp.float64, method, 9.0, None)
    assert not ladder_noise_lanes(c, jnp.float32, method, 9.0, _skip(1.0))
    tau, z = _draws(64, seed=11)
    u_max = np.asarray(_bound_and_exact(tau, z, c)[0]).max(axis=0)     # U from the exact sums: at most the screen's
    worst = np.sort(u_max)[::-1]
    threshold = {"all": 1.0, "few": float(worst[REFINE_LANES - 2] + worst[REFINE_LANES - 1]) / 2, "none": 60.0}[fail]
    settled = u_max > threshold                   # settled whole (all), on a narrower batch (few), or none
    assert settled.sum() == {"all": 64, "few": REFINE_LANES - 1, "none": 0}[fail]
    time_major = np.asarray(_ladder(tau, z, c, _skip(threshold), 9.0, method))
    lane_major = np.asarray(_ladder_lanes(tau, z.T, c, _skip(threshold), method))
    np.testing.assert_array_equal(lane_major[:, 0, settled], time_major[:, 0, settled])
    np.testing.assert_array_equal(lane_major[:, 1], time_major[:, 1])
    np.testing.assert_allclose(lane_major, time_major, rtol=1e-12, atol=0.0)


def _in_batches_of_64(tau, z, c, rs, method):
    """The remove losses ``(3, B)`` of the draws' ladder in batches of 64 (the engine's width at n = 7200)."""
    batches = tau.shape[1] // 64
    out = jax.jit(lambda t, zz: jax.lax.map(lambda a: _ladder(a[0], a[1], c, rs, 9.0, method),
                                            (t.reshape(t.shape[0], batches, 64).transpose(1, 0, 2),
                                             zz.reshape(N, batches, 64).transpose(1, 0, 2))))(tau, z)
    return np.asarray(out).transpose(1, 2, 0, 3)[:, 0].reshape(3, batches * 64)


@pytest.mark.parametrize("c,method", [(MSE_LIKE, "auto"), (MSE_LIKE, "fft"), ((0.5,) * 4, "auto")],
                         ids=["decreasing", "decreasing-fft", "constant"])
@pytest.mark.parametrize("threshold", [1.0, 3.0, 60.0])
def test_every_remove_loss_is_exact_or_a_bound_below_the_threshold(c, method, threshold):
    """Every path of the draws ladder (the table's mean with the noise's exact short sums or its float32 screen; the
    constant column's prefix sums), 512 draws in 8 batches of 64: a loss is the exact one bit for bit, or at most the
    threshold and at least the exact loss."""
    tau, z = _draws(512, seed=11)
    off = np.asarray(_ladder(tau, z, c, None, 9.0, method))[:, 0]
    on = _in_batches_of_64(tau, z, c, _skip(threshold), method)
    off64 = _in_batches_of_64(tau, z, c, None, method)
    np.testing.assert_allclose(off64, off, rtol=1e-9, atol=1e-9)
    same = np.all(on == off64, axis=0)
    assert np.all(on[:, ~same] <= threshold) and np.all(on[:, ~same] >= off64[:, ~same] - 1e-9)
    if threshold == 60.0:     # almost every draw keeps its bound (a bound can equal the exact loss: no term counts)
        assert (~same).mean() > 0.5
    if threshold == 1.0:
        assert same.any()


def test_lane_major_ladder_lowers_for_cuda():
    """The lane-major draws (JAX's threefry primitive by counter) and the screen at a length of the form 15 2^k
    (here 320) lower for an NVIDIA GPU, checked without one (``jax.export``); #38's device run executes them."""
    from jax import export
    n, b = 300, 20
    c = tuple(0.5 / (1.0 + i) ** 0.5 for i in range(b))
    assert screen_fft_size(n, b) == 320

    def fn(key):
        tau, z = standardised_blocks_t(key, n, b, P, True, expected_participation_rate(P, b), 64, lanes=True)
        return ladder_losses_from_draws_t(tau, z, n, jnp.asarray([0.6, 0.9]), b, P, True, c, jnp.float64, "fft",
                                          "auto", 3.0, RemoveSkip(jnp.full(2, 5.0), jnp.zeros(2), jnp.full(2, 1e-9)),
                                          lanes=True)

    module = export.export(jax.jit(fn), platforms=["cuda"])(jax.random.key(0)).mlir_module()
    assert "stablehlo.fft" in module
