"""Draws made ahead (``Mechanism.prepare``): on accelerators the engine draws the truncated scheme's counts for
every block of a chunk in one batch, then the blocks' losses a batch at a time
(:func:`mcacct.engine.runner.map_chunk_blocks`).

The losses are those of the blocks drawn whole, with the screened counts (round by round and by blocks of rounds),
where a block holds more truncated samples than the rows kept (:data:`~mcacct.schemes.truncated.block_counts.
KEPT_ROWS`: the others are drawn again) and where it holds fewer. Traced for a GPU on the CPU
(``MCACCT_TARGET_PLATFORM``), as the engine runs on one. With every sample's chain nothing is prepared.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import mcacct.engine.runner as runner
from mcacct.core.platform import PLATFORM_ENV
from mcacct.engine.losses import ladder_losses
from mcacct.engine.problem import Problem, block_keys, block_size
from mcacct.kernels.blocks import map_blocks
from mcacct.schemes.bminsep import BMinSep
from mcacct.schemes.truncated import TruncatedBMinSep
from mcacct.schemes.truncated import screen
from mcacct.strategies.banded import BandedToeplitz

SIGMAS = np.asarray([0.8, 1.2])


@pytest.fixture
def fresh_programs():
    """The sampler tables are read at trace time, and the scheme's jitted methods do not key on them."""
    jax.clear_caches()
    yield
    jax.clear_caches()


@pytest.mark.parametrize("sampler,max_batch", [   # B_max 32: about 3% of samples truncated (beyond the kept rows)
    ("screened_rounds", 40), ("screened_blocks", 32)])
def test_counts_drawn_ahead_give_the_same_losses(monkeypatch, fresh_programs, sampler, max_batch):
    monkeypatch.setenv(PLATFORM_ENV, "gpu")
    monkeypatch.setitem(screen.AUTO_SCREEN, "gpu", (True, "test"))
    monkeypatch.setitem(screen.SCREEN_BLOCK_PASS, "gpu", sampler == "screened_blocks")
    monkeypatch.setattr(runner, "batch_blocks", lambda problem, bsize: 1)   # one block per batch of losses
    problem = Problem(TruncatedBMinSep(0.05, 3, 20, 400, max_batch, True), BandedToeplitz((1.0, 0.5)))
    chunk = 4 * 4096
    bsize = block_size(problem, chunk)
    assert bsize == 4096
    keys = block_keys(jax.random.key(3), problem, chunk)
    mech = problem.mechanism()
    assert mech.prepare is not None

    def per_block(k, prepared=None):
        return ladder_losses(mech, k, SIGMAS, bsize, prepared=prepared)

    ahead = np.asarray(jax.jit(lambda ks: runner.map_chunk_blocks(per_block, ks, problem, bsize))(keys))
    whole = np.asarray(jax.jit(lambda ks: map_blocks(per_block, ks))(keys))
    # the same draws; the losses up to the rounding of differently batched programs (a wrong count moves a
    # truncated sample's loss by far more)
    np.testing.assert_allclose(ahead, whole, rtol=0, atol=1e-12)
    truncated = np.asarray(jax.vmap(lambda k: mech.prepare(k, bsize).truncated)(keys)).sum(axis=1)
    if max_batch == 32:
        assert truncated.min() > 4          # more than the kept rows: the rest drawn again
    else:
        assert truncated.max() <= 4


def test_prepared_draws_are_refused_by_a_mechanism_without_them(monkeypatch):
    mech = Problem(BMinSep(0.1, 2, 8), BandedToeplitz((1.0, 0.5))).mechanism()
    assert mech.prepare is None
    # every sample's chain (the GPU default): each block draws its own counts, nothing is prepared
    monkeypatch.setenv(PLATFORM_ENV, "gpu")
    monkeypatch.setitem(screen.AUTO_SCREEN, "gpu", (False, "test"))
    truncated = Problem(TruncatedBMinSep(0.05, 3, 20, 400, 32, True), BandedToeplitz((1.0, 0.5)))
    assert truncated.scheme.count_sampler == "chain" and truncated.mechanism().prepare is None
    with pytest.raises(ValueError, match="prepared must be None"):
        ladder_losses(mech, jax.random.key(0), SIGMAS, 16, prepared={"x": np.zeros(3)})
