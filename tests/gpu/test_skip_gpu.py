"""The skips of provably zero contributions on a GPU (issue #39, shortcut 1), where the engine batches its blocks
with ``vmap`` and gathers the blocks that need the exact recursions (``mcacct.kernels.control.rare_cond``): count and
sums at the run's epsilons bit for bit those of the full computation, the histogram only moved up. Issue #38's
truncated shape (n = 512, b = 16, batch 64 of 16,384) with B_max = 100 (truncation rare, as at section 7.4) and a
decreasing column screened in float32 (``dot_method="fft"``), at chunks of ``gpu_checks.DEVICE_CHUNK``.

Marked ``gpu`` (skipped without a GPU backend; tests/conftest.py); ``MCACCT_RUN_GPU_TESTS=1`` runs it on a CPU with
small samples.
"""

import os
import sys

import jax
import numpy as np
import pytest

import mcacct
from mcacct.core.rates import sampling_prob_from_batch_size
from mcacct.engine.problem import Problem
from mcacct.engine.runner import run_ladder
from mcacct.engine.skips import remove_skip_arrays
from mcacct.statistics.accumulators import DIRECTIONS

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))
import gpu_checks  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@pytest.mark.parametrize("eps", [(4.0, 5.0, 6.0), (8.0, 9.0, 10.0)], ids=["eps4", "eps8"])
def test_skips_on_the_device_keep_count_and_sums(eps):
    on_gpu = jax.default_backend() != "cpu"
    samples, chunk = (2**18, gpu_checks.DEVICE_CHUNK) if on_gpu else (2**12, gpu_checks.CPU_CHUNK)
    p = sampling_prob_from_batch_size(64, 16384, 16)
    scheme = mcacct.TruncatedBMinSep(p, 16, 512, 16384, 100, True)
    column = mcacct.BandedToeplitz(tuple(0.5 / (1.0 + i) ** 0.5 for i in range(16)))
    sig = [0.5, 0.7, 1.0]
    runs = []
    for skip in (False, True):
        problem = Problem(scheme, column, dot_method="fft", skip_zero=skip)
        runs.append(run_ladder(problem, sig, jax.random.key(3), samples, list(eps), chunk))
    assert remove_skip_arrays(problem, sig, list(eps)) is not None
    (off, on), moved = runs, 0
    for j in range(len(sig)):
        for d in DIRECTIONS:
            a, b = off.stats[j][d], on.stats[j][d]
            assert a.count == b.count and a.sums == b.sums, (j, d)
            ha, hb = np.asarray(a.hist), np.asarray(b.hist)
            assert ha.sum() == hb.sum() and np.all(np.cumsum(hb[::-1]) >= np.cumsum(ha[::-1])), (j, d)
            moved += int(np.sum(np.abs(ha - hb)))
    assert moved > 0                                                     # the skip ran
    assert any(off.stats[j]["remove"].sums[0] > 0 for j in range(len(sig)))   # and some contributions counted
