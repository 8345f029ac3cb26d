"""The truncated scheme's counts on a GPU (issue #39, shortcut 2): the screened chain by blocks of rounds gives the
round-by-round counts bit for bit on the device, and the counts of a chunk's blocks drawn ahead in one batch
(``engine.runner.map_chunk_blocks``) give the losses of the blocks drawn whole. Issue #38's truncated shape
(n = 512, b = 16, batch 64 of 16,384) with B_max = 100, where the screen applies (7.8% of samples flagged).

Marked ``gpu`` (skipped without a GPU backend; tests/conftest.py); ``MCACCT_RUN_GPU_TESTS=1`` runs it on a CPU with
fewer samples.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcacct.engine.runner as runner
from mcacct.core.rates import sampling_prob_from_batch_size
from mcacct.engine.losses import ladder_losses
from mcacct.engine.problem import Problem, block_keys, block_size
from mcacct.kernels.blocks import map_blocks
from mcacct.schemes.truncated import TruncatedBMinSep, screen
from mcacct.strategies.banded import BandedToeplitz

pytestmark = pytest.mark.gpu

P = sampling_prob_from_batch_size(64, 16384, 16)
SHAPE = (16383, 16, P, 512, 100)   # N, b, p, n, B_max


def _on_gpu() -> bool:
    return jax.default_backend() != "cpu"


@pytest.fixture
def screened(monkeypatch):
    """The counts screened by blocks of rounds wherever the test runs (the tables are read at trace time)."""
    for platform in ("cpu", "gpu"):
        monkeypatch.setitem(screen.AUTO_SCREEN, platform, (True, "test"))
        monkeypatch.setitem(screen.SCREEN_BLOCK_PASS, platform, True)
    jax.clear_caches()
    yield
    jax.clear_caches()


def test_block_pass_gives_the_round_by_round_counts_on_the_device():
    others, b, p, n, bmax = SHAPE
    plan = screen.screen_plan(others, b, p, n, bmax)
    k_tau, k_chain = jax.random.split(jax.random.key(11))
    taus = screen.screen_taus(k_tau, plan, 2**16 if _on_gpu() else 2**12)
    lanes = jnp.nonzero(taus < n, size=int(jnp.sum(taus < n)))[0]

    def counts(block_pass):
        fn = jax.jit(lambda k, l, t: screen.screened_counts_t(k, l, t, others, b, p, True, n, bmax, plan, block_pass))
        return np.asarray(fn(k_chain, lanes, taus[lanes]))

    rounds = counts(False)
    np.testing.assert_array_equal(counts(True), rounds)
    assert np.any(rounds >= bmax)


def test_counts_drawn_ahead_give_the_losses_of_whole_blocks_on_the_device(monkeypatch, screened):
    monkeypatch.setattr(runner, "batch_blocks", lambda problem, bsize: 2)
    others, b, p, n, bmax = SHAPE
    problem = Problem(TruncatedBMinSep(p, b, n, others + 1, bmax, True), BandedToeplitz((0.5,) * b))
    chunk = 4 * 4096 if _on_gpu() else 2 * 4096
    bsize = block_size(problem, chunk)
    keys = block_keys(jax.random.key(5), problem, chunk)
    mech = problem.mechanism()
    sigmas = jnp.asarray([0.5, 0.7])

    def per_block(k, prepared=None):
        return ladder_losses(mech, k, sigmas, bsize, prepared=prepared)

    if not _on_gpu():   # the engine's accelerator path, traced for a GPU on the CPU
        monkeypatch.setenv("MCACCT_TARGET_PLATFORM", "gpu")
    ahead = np.asarray(jax.jit(lambda ks: runner.map_chunk_blocks(per_block, ks, problem, bsize))(keys))
    whole = np.asarray(jax.jit(lambda ks: map_blocks(per_block, ks))(keys))
    # the same draws; the losses up to the rounding of two programs (a wrong count moves a truncated loss by far more)
    np.testing.assert_allclose(ahead, whole, rtol=0, atol=1e-10)
    truncated = np.asarray(jax.vmap(lambda k: mech.prepare(k, bsize).truncated)(keys))
    assert truncated.sum() > 0
