"""The BandMF noise transformation: covariance sigma^2 Delta^2 C^-1 C^-T over steps, C times the noise i.i.d.,
pure in its key, clear errors. Tolerances: 5 standard errors of each empirical (co)variance."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcacct.training.bandmf import bandmf_noise

C = (1.0, 0.6, 0.3)
SIGMA, CLIP, STEPS, COORDS = 1.3, 0.5, 6, 40_000


def _noise_sequence(c=C, key=0):
    tx = bandmf_noise(c, SIGMA, CLIP, jax.random.key(key))
    params = {"w": jnp.zeros((COORDS // 2,)), "b": jnp.zeros((2, COORDS // 4))}
    state = tx.init(params)
    out = []
    for _ in range(STEPS):
        upd, state = tx.update(jax.tree_util.tree_map(jnp.zeros_like, params), state)
        out.append(np.concatenate([np.ravel(upd["b"]), np.ravel(upd["w"])]))
    return np.stack(out), state  # (STEPS, COORDS)


def _within_5se(emp, cov, n):
    se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov ** 2) / n)
    assert np.all(np.abs(emp - cov) <= 5 * se), np.max(np.abs(emp - cov) / se)


def test_noise_covariance_is_c_inverse_gram():
    w, state = _noise_sequence()
    cmat = sum(v * np.eye(STEPS, k=-d) for d, v in enumerate(C))
    inv = np.linalg.inv(cmat)
    cov = (SIGMA * CLIP) ** 2 * inv @ inv.T
    _within_5se(w @ w.T / w.shape[1], cov, w.shape[1])
    assert int(state.count) == STEPS


def test_c_times_noise_is_iid_gaussian():
    w, _ = _noise_sequence()
    cmat = sum(v * np.eye(STEPS, k=-d) for d, v in enumerate(C))
    z = cmat @ w / (SIGMA * CLIP)
    _within_5se(z @ z.T / z.shape[1], np.eye(STEPS), z.shape[1])
    assert np.all(np.abs(z.mean(axis=1)) <= 5 / np.sqrt(z.shape[1]))


def test_pure_in_the_key_and_one_band_is_plain_gaussian():
    a, _ = _noise_sequence(key=3)
    b, _ = _noise_sequence(key=3)
    np.testing.assert_array_equal(a, b)
    w, _ = _noise_sequence(c=(1.0,), key=4)
    _within_5se(w @ w.T / w.shape[1], (SIGMA * CLIP) ** 2 * np.eye(STEPS), w.shape[1])


@pytest.mark.parametrize("args,match", [((C, -1.0, 1.0), "noise_multiplier"), ((C, 1.0, 0.0), "clip_norm"),
                                        (((0.0, 1.0), 1.0, 1.0), "c_col"), (("1,x", 1.0, 1.0), "c_col")])
def test_bad_input_is_refused(args, match):
    with pytest.raises(ValueError, match=match):
        bandmf_noise(*args, jax.random.key(0))
