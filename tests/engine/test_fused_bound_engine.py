"""The schemes' ladders with the fused remove bound switched on (mcacct.kernels.fused_bound.FUSED_BOUND_AUTO; off on
every platform by default until a device measures it): count and sums bit for bit those of the full computation, the
histogram only moved up, for b-min-sep and truncated b-min-sep with a constant column, at epsilon 10 (almost every
remove draw let go) and 3-5 (many exact, their noise redrawn by columns; the fused bound, like the XLA path's bound
from the draws, runs where both skips are on, so above the add bound, 2.45 here); and under vmap, as on an
accelerator. The kernel is interpreted on CPU."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcacct
import mcacct.kernels.fused_bound as fused_bound
from mcacct.engine.problem import Problem
from mcacct.engine.runner import block_ladder_losses, run_ladder
from mcacct.engine.skips import remove_skip_arrays, skip_bound
from mcacct.engine.systematic import loss_error_bound
from mcacct.kernels.shortcuts import RemoveSkip

from tests.engine.test_skip_zero import same_sums_remove_moved

C4 = mcacct.BandedToeplitz((0.5, 0.5, 0.5, 0.5))
SCHEMES = [mcacct.BMinSep(0.05, 4, 48, True), mcacct.TruncatedBMinSep(0.05, 4, 48, 60, 8, True)]


@pytest.fixture(scope="class")
def fused_on():
    """The fused bound on for every platform while a class's tests run, and a count of the traces that took it.
    The table is read at trace time, so the caches are cleared before and after the class; within it, the cases
    share their programs (the epsilons are traced: ``eps10`` and ``eps3-5`` of one scheme run the same two programs,
    each compiled once instead of once per case, ~25 s for the truncated scheme's under the default compiler), and
    every program traced in it took the table as set here."""
    calls = []
    real = fused_bound.fused_remove_bound_from_key

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    import mcacct.kernels.output as output
    with pytest.MonkeyPatch.context() as mp:
        for platform in fused_bound.FUSED_BOUND_AUTO:
            mp.setitem(fused_bound.FUSED_BOUND_AUTO, platform, True)
        mp.setattr(output, "fused_remove_bound_from_key", counted)
        jax.clear_caches()
        yield calls
        jax.clear_caches()


class TestFusedBoundOn:
    """The fused bound switched on (every test takes the class-scoped ``fused_on`` fixture)."""

    #: scheme -> whether its skip-on program was traced with the fused bound (by the first of its cases to run; the
    #: other reads the same program back)
    took: dict = {}

    @pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
    @pytest.mark.parametrize("eps", [(10.0, 11.0, 12.0), (3.0, 4.0, 5.0)], ids=["eps10", "eps3-5"])
    @pytest.mark.parametrize("scheme", SCHEMES, ids=["bminsep", "truncated"])
    def test_same_sums_and_an_upper_bound_histogram(self, scheme, eps, fused_on):
        sig = [0.5, 2.0]
        traced = len(fused_on)
        off = run_ladder(Problem(scheme, C4, skip_zero=False), sig, jax.random.key(5), 1024, eps, 1024)
        on_problem = Problem(scheme, C4, skip_zero=True)
        on = run_ladder(on_problem, sig, jax.random.key(5), 1024, eps, 1024)
        self.took[scheme] = self.took.get(scheme, False) or len(fused_on) > traced   # only the skip-on run takes it
        assert self.took[scheme], "the fused bound did not run"
        assert remove_skip_arrays(on_problem, sig, eps) is not None
        assert same_sums_remove_moved(off, on) > 0   # the skip ran

    @pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
    def test_on_vmapped_blocks_keeps_the_exact_losses(self, fused_on):
        """8 blocks of 64 draws under vmap at sigma 0.45 and epsilon 3 (many draws exact): the losses that may count are
        those of the full computation bit for bit, the rest bound them."""
        scheme, sig, eps = SCHEMES[1], (0.45, 2.0), (3.0, 4.0, 5.0)
        keys = jax.random.split(jax.random.key(11), 8)
        traced, out = len(fused_on), {}
        for skip in (False, True):
            problem = Problem(scheme, C4, skip_zero=skip)
            arrays = remove_skip_arrays(problem, list(sig), eps)
            rs = None if arrays is None else RemoveSkip(*jnp.asarray(arrays).T)
            ab = skip_bound(problem, list(sig), eps)
            fn = jax.jit(jax.vmap(lambda k: block_ladder_losses(k, jnp.asarray(sig), problem, 64, ab, rs)))
            out[skip] = np.asarray(fn(keys))
        assert len(fused_on) > traced, "the fused bound did not run"   # the programs are traced here (a new jit)
        eta = np.asarray([loss_error_bound(problem, s) for s in sig])[None, :, None]
        on, off = out[True], out[False]
        for d, thr in ((0, arrays[:, 0][None, :, None]), (1, np.full((1, 2, 1), ab))):
            counts = off[:, :, d] > thr - 2 * eta            # draws whose contribution may not be 0
            assert counts.any() or d == 1
            np.testing.assert_array_equal(on[:, :, d][counts], off[:, :, d][counts])
            assert np.all(on[:, :, d] >= off[:, :, d] - eta), d
        assert np.any(on[:, :, 0] != off[:, :, 0])          # the skip ran


def test_fused_bound_is_off_by_default_and_refuses_what_it_cannot_serve():
    from mcacct.kernels.output import ladder_fused_bound
    assert not any(fused_bound.FUSED_BOUND_AUTO.values())
    rs = RemoveSkip(jnp.zeros(2), jnp.zeros(2), jnp.zeros(2))
    assert not ladder_fused_bound(48, 4, 0.05, (0.5,) * 4, jnp.float64, 1.0, rs, 1024)
