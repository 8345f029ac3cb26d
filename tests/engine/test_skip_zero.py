"""Provably zero contributions are not computed (#39, shortcut 1, the add direction): the bound holds for every
output, the sums are bit for bit those of the full computation, and the histogram differs only by skipped draws
moved up to the bound's bin."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mcacct
from mcacct.engine.problem import Problem
from mcacct.engine.runner import run_ladder
from mcacct.engine.skips import skip_bound
from mcacct.statistics.accumulators import DIRECTIONS
from mcacct.engine.systematic import loss_error_bound
from mcacct.kernels.recursion import recursion_log_ratio_t
from mcacct.kernels.shortcuts import add_loss_bound, add_skip_bound

C4 = mcacct.BandedToeplitz((0.5, 0.5, 0.5, 0.5))


@functools.partial(jax.jit, static_argnums=(1, 2, 3))  # one program per example (eager: one per operation)
def _scan(ell, b, p, warm):
    return recursion_log_ratio_t(ell, b, p, warm, "scan")


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), b=st.integers(1, 8), p=st.floats(1e-3, 0.9), warm=st.booleans(),
       low=st.floats(-700.0, 0.0))
def test_the_bound_holds_and_is_attained_where_no_term_counts(n, b, p, warm, low):
    """``ln Q/P = -ln f <= B`` for terms anywhere (``ell`` from ``low`` up), and ``B`` is tight as ``ell -> -inf``
    (``P/Q -> pi_0``)."""
    bound = add_loss_bound(n, b, p, warm)
    rng = np.random.default_rng(n * 1000 + b)
    ell = jnp.asarray(np.concatenate([rng.uniform(low, 5.0, (n, 64)), np.full((n, 1), -1e4)], axis=1))
    add = -np.asarray(_scan(ell, b, p, warm))
    assert np.all(add <= bound), (add.max(), bound)
    assert bound - add[-1] <= 1e-8 + 1e-9 * bound  # the all-absent output attains it (up to the rounding up)


def test_the_bound_is_the_probability_of_never_participating():
    # cold: (1-p)^n; warm, b = 2, n = 1: ((1-p) + p * 1) / (1 + p) = 1 / (1 + p)
    for got, exact in ((add_loss_bound(10, 3, 0.1, False), -10 * math.log1p(-0.1)),
                       (add_loss_bound(1, 2, 0.25, True), math.log(1.25))):
        assert exact <= got <= exact + 2e-9  # rounded up by its stated allowance
    assert add_loss_bound(10, 3, 1.0, True) == math.inf
    assert add_skip_bound(3.0, [4.0], [0.1]) == 3.0 and add_skip_bound(3.0, [3.1], [0.1]) is None
    assert add_skip_bound(None, [9.0], [0.0]) is None and add_skip_bound(3.0, [], [0.0]) is None


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 300), b=st.integers(1, 40), p=st.floats(1e-6, 0.999), warm=st.booleans())
def test_pi0_in_integers_is_the_rational_sum_of_the_docstring(n, b, p, warm):
    """The integer form (no gcd per step: 83 s -> 0.04 s at section 7.4) is the same rational as the
    probability of never participating summed term by term in ``Fraction``s."""
    from fractions import Fraction
    from mcacct.kernels.shortcuts import pi0_fraction
    q = Fraction(p)
    pi0 = (1 - q) ** n
    if warm and b > 1:
        pi0 = (pi0 + q * sum((1 - q) ** max(0, n - i + 1) for i in range(2, b + 1))) / (1 + (b - 1) * q)
    num, den = pi0_fraction(n, b, p, warm)
    assert Fraction(num, den) == pi0


def _run(scheme, skip, eps, sigmas=(0.3, 2.0), n=2048):
    # Every run here passes three epsilons: the epsilons, sigmas and sample count are traced (or only set the number
    # of chunks of 1024), while the number of epsilons is a shape. With one count, a scheme's runs compile one program
    # per kind of run (skips off; on with the add skip; on without it), shared by every test and case of the scheme
    # below, instead of one per test case (the truncated scheme's programs take ~15 s each on the 2-core box).
    assert len(eps) == 3
    problem = Problem(scheme, C4, skip_zero=skip)
    return problem, run_ladder(problem, list(sigmas), jax.random.key(5), n, eps, 1024)


# the truncated case is the scheme of test_remove_skip_same_sums_and_an_upper_bound_histogram below (M = 60, B_max = 8:
# some draws truncated, most not), so both tests run the same compiled programs (a truncated program takes ~15 s to
# compile on the 2-core box; with M = 120 here this file compiled them twice)
@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@pytest.mark.parametrize("scheme", [mcacct.BMinSep(0.05, 4, 48, True), mcacct.BMinSep(0.05, 4, 48, False),
                                    mcacct.TruncatedBMinSep(0.05, 4, 48, 60, 8, True)],
                         ids=["warm", "cold", "truncated"])
def test_sums_bit_identical_and_histogram_an_upper_bound(scheme):
    bound = scheme.add_loss_bound()
    eps = (bound + 1.0, bound + 4.0, bound + 8.0)          # every untruncated add draw skipped
    problem, off = _run(scheme, False, eps)
    assert skip_bound(problem, [0.3, 2.0], eps) is None   # skip_zero off
    on_problem, on = _run(scheme, True, eps)
    assert skip_bound(on_problem, [0.3, 2.0], eps) == bound
    width = off.stats[0]["add"].spec.width
    for j in range(2):
        for d in DIRECTIONS:
            a, b = off.stats[j][d], on.stats[j][d]
            assert a.count == b.count and a.sums == b.sums, (j, d)
            assert_moved_up_only(a.hist, b.hist)
            if d == "remove":
                continue
            # the add histogram: draws moved up to the bin of B + eta, none moved down or above it
            top = int(math.ceil((bound + loss_error_bound(problem, [0.3, 2.0][j])) / width))
            assert a.hist.sum() == b.hist.sum()
            assert np.all(b.hist[:top] <= a.hist[:top]) and np.array_equal(b.hist[top + 1:], a.hist[top + 1:])
            assert np.all(a.hist[top + 1:] == 0) or isinstance(scheme, mcacct.TruncatedBMinSep)
            assert np.all(np.asarray(b.histogram_delta(np.linspace(0, 3, 7))) >= np.asarray(a.histogram_delta(
                np.linspace(0, 3, 7))) - 1e-15)


def same_sums_remove_moved(off, on) -> int:
    """Asserts that two ladder runs (skips off, on) have equal counts and sums for every candidate and direction and
    that ``on``'s histograms only move draws up; returns how many remove draws moved."""
    moved = 0
    for j in range(len(off.stats)):
        for d in DIRECTIONS:
            a, b = off.stats[j][d], on.stats[j][d]
            assert a.count == b.count and a.sums == b.sums, (j, d)
            assert_moved_up_only(a.hist, b.hist)
        moved += int(np.sum(np.abs(off.stats[j]["remove"].hist - on.stats[j]["remove"].hist)))
    return moved


def assert_moved_up_only(off_hist, on_hist):
    """``on`` is ``off`` with some draws moved to higher bins: equal totals, every upper tail at least as heavy."""
    off_hist, on_hist = np.asarray(off_hist), np.asarray(on_hist)
    assert off_hist.sum() == on_hist.sum()
    assert np.all(np.cumsum(on_hist[::-1]) >= np.cumsum(off_hist[::-1]))


def test_below_the_bound_no_add_loss_is_skipped():
    scheme = mcacct.BMinSep(0.05, 4, 48, True)
    eps = (0.5, scheme.add_loss_bound() + 2.0, scheme.add_loss_bound() + 5.0)  # the smallest decides: no add skip
    _, off = _run(scheme, False, eps, sigmas=(0.8,))
    problem, on = _run(scheme, True, eps, sigmas=(0.8,))
    assert skip_bound(problem, [0.8], eps) is None
    np.testing.assert_array_equal(off.stats[0]["add"].hist, on.stats[0]["add"].hist)
    for d in DIRECTIONS:
        assert off.stats[0][d].sums == on.stats[0][d].sums
        assert_moved_up_only(off.stats[0][d].hist, on.stats[0][d].hist)


def test_the_switch_is_typed_recorded_and_on_the_cli(tmp_path, capsys):
    from mcacct.cli.commands import main
    from mcacct.jobs.problem_file import problem_from_dict, problem_to_dict
    with pytest.raises(TypeError, match="skip_zero must be True or False"):
        Problem(mcacct.BMinSep(0.1, 2, 8), skip_zero="yes")
    off = Problem(mcacct.BMinSep(0.1, 2, 8), skip_zero=False)
    assert problem_to_dict(off)["skip_zero"] is False and problem_from_dict(problem_to_dict(off)) == off
    flags = ["delta", "--sigma", "1", "--epsilon", "9", "--iterations", "8", "--min-sep", "2", "--sampling-prob",
             "0.1", "--c-col", "1", "--samples", "512", "--chunk-size", "512", "--quiet", "--json"]
    assert main(flags) == 0
    with_skip = capsys.readouterr().out
    assert main(flags + ["--no-skip"]) == 0
    without = capsys.readouterr().out
    import json
    a, b = json.loads(with_skip), json.loads(without)
    assert a["delta_upper"] == b["delta_upper"] and a["delta_estimate"] == b["delta_estimate"]


# the smallest epsilon sets the remove skip's thresholds (mcacct.kernels.shortcuts.remove_thresholds) and the add
# skip: "eps10" runs at epsilon 10 (with 11 and 12 beside it, three epsilons as every run here: see _run)
@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@pytest.mark.parametrize("eps", [(10.0, 11.0, 12.0), (2.0, 3.0, 4.0)], ids=["eps10", "eps2-4"])
@pytest.mark.parametrize("scheme", [mcacct.BMinSep(0.05, 4, 48, True), mcacct.BMinSep(0.05, 4, 48, False),
                                    mcacct.TruncatedBMinSep(0.05, 4, 48, 60, 8, True)],  # some draws untruncated
                         ids=["warm", "cold", "truncated"])
def test_remove_skip_same_sums_and_an_upper_bound_histogram(scheme, eps):
    """The remove direction's skip (mcacct.kernels.bound): at epsilon 10 almost every remove draw keeps its bound, at
    2-4 many are exact; either way count and sums are bit for bit those of the full computation and the histogram
    only moves draws up (to their bound's bin)."""
    from mcacct.engine.skips import remove_skip_arrays
    problem, off = _run(scheme, False, eps, sigmas=(0.5, 2.0), n=1024)
    on_problem, on = _run(scheme, True, eps, sigmas=(0.5, 2.0), n=1024)
    assert remove_skip_arrays(problem, [0.5, 2.0], eps) is None
    assert remove_skip_arrays(on_problem, [0.5, 2.0], eps) is not None
    moved = 0
    for j in range(2):
        for d in DIRECTIONS:
            a, b = off.stats[j][d], on.stats[j][d]
            assert a.count == b.count and a.sums == b.sums, (j, d)
            assert_moved_up_only(a.hist, b.hist)
            assert np.all(np.asarray(b.histogram_delta(np.linspace(0, 3, 7)))
                          >= np.asarray(a.histogram_delta(np.linspace(0, 3, 7))))
        moved += int(np.sum(np.abs(off.stats[j]["remove"].hist - on.stats[j]["remove"].hist)))
    assert moved > 0   # the skip ran


# a decreasing column: the remove bound's mean from the overlap table (mcacct.kernels.block_terms.mean_block_maxima_t),
# its noise from the float32 screen where the sums take the FFT (noise_block_maxima_t) or from the exact sums where
# they are short, and the draws that fail it settled on a narrower batch (mcacct.kernels.shortcuts)
@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
@pytest.mark.parametrize("method,eps", [("fft", (10.0, 11.0, 12.0)), ("direct", (2.0, 3.0, 4.0))],
                         ids=["fft-eps10", "direct-eps2-4"])
def test_remove_skip_for_any_column_same_sums(method, eps):
    from mcacct.engine.skips import remove_skip_arrays
    strategy = mcacct.BandedToeplitz((0.6, 0.45, 0.3, 0.22))
    runs = []
    for skip in (False, True):
        problem = Problem(mcacct.BMinSep(0.05, 4, 48, True), strategy, dot_method=method, skip_zero=skip)
        runs.append(run_ladder(problem, [0.5, 2.0], jax.random.key(5), 1024, eps, 1024))
    assert remove_skip_arrays(problem, [0.5, 2.0], eps) is not None
    assert same_sums_remove_moved(*runs) > 0   # the skip ran


# blocks under vmap, as the engine runs them on accelerators: the blocks whose draws fail the bound are gathered
# (mcacct.kernels.control.rare_cond), and their exact losses must keep the bits of the full computation. The case
# is section 7.4's kind (truncated, a decreasing column screened in float32, epsilon 10: both skips on)
D4 = mcacct.BandedToeplitz((0.6, 0.45, 0.3, 0.22))
TRUNC = mcacct.TruncatedBMinSep(0.05, 4, 48, 60, 8, True)


def _vmapped_blocks(scheme, strategy, eps, skip, sig=(0.5, 2.0), blocks=8, size=128):
    from mcacct.engine.runner import block_ladder_losses
    from mcacct.engine.skips import remove_skip_arrays
    from mcacct.kernels.shortcuts import RemoveSkip
    problem = Problem(scheme, strategy, dot_method="fft", skip_zero=skip)
    arrays = remove_skip_arrays(problem, list(sig), eps)
    rs = None if arrays is None else RemoveSkip(*jnp.asarray(arrays).T)
    ab = skip_bound(problem, list(sig), eps)
    fn = jax.vmap(lambda k: block_ladder_losses(k, jnp.asarray(sig), problem, size, ab, rs))
    return problem, arrays, ab, fn, jax.random.split(jax.random.key(11), blocks)


@pytest.mark.default_compiler  # bits equal across two programs (tests/default_compiler.py)
def test_remove_skip_on_vmapped_blocks_keeps_the_exact_losses(monkeypatch):
    """32 blocks of 16 draws at sigma 0.45: a few blocks hold a draw whose exact loss exceeds the threshold, fewer
    than a quarter of them fail the narrower batch's bound, so the whole-block recursions run on those gathered."""
    import mcacct.kernels.control as control
    ran = []                                   # per run of the rare branch "full": once per element of its batch
    batched = control._batched_cond

    def counted(rare_fn, common_fn):
        # only the branch counted below carries a callback: one in every rare branch cost ~14 s more compilation
        if rare_fn.__name__ != "full":
            return batched(rare_fn, common_fn)

        def rare(*ops):
            jax.debug.callback(lambda leaf: ran.append(rare_fn.__name__), jax.tree.leaves(ops)[0])
            return rare_fn(*ops)
        return batched(rare, common_fn)

    monkeypatch.setattr(control, "_batched_cond", counted)
    sig, eps = (0.45, 2.0), (10.0, 11.0, 12.0)
    problem, arrays, ab, on_fn, _ = _vmapped_blocks(TRUNC, D4, eps, True, sig, 32, 16)
    off_fn = jax.jit(_vmapped_blocks(TRUNC, D4, eps, False, sig, 32, 16)[3])
    on_fn = jax.jit(on_fn)
    assert arrays is not None and ab is not None
    eta = np.asarray([loss_error_bound(problem, s) for s in sig])[None, :, None]
    thresholds = {0: arrays[:, 0][None, :, None], 1: np.full((1, 2, 1), ab)}
    exact_blocks = 0
    for seed in (6, 7, 9):
        keys = jax.random.split(jax.random.key(seed), 32)
        ran.clear()
        on, off = np.asarray(on_fn(keys)), np.asarray(off_fn(keys))
        assert 0 < ran.count("full") < 32, seed        # the whole-block recursions ran on gathered blocks
        for d in range(2):
            a, b = on[:, :, d], off[:, :, d]
            counts = b > thresholds[d] - 2 * eta            # draws whose contribution may not be 0
            np.testing.assert_array_equal(a[counts], b[counts])
            assert np.all(a >= b - eta), d                 # the rest: a bound of the exact loss
        assert np.any(on[:, :, 0] != off[:, :, 0])         # the skip ran
        exact_blocks += int(np.any(off[:, :, 0] > thresholds[0], axis=(1, 2)).sum())
    assert exact_blocks >= 2                               # and exact losses above the threshold were kept


@pytest.mark.parametrize("scheme,strategy", [(mcacct.BMinSep(0.05, 4, 48, False), C4), (TRUNC, C4), (TRUNC, D4)],
                         ids=["cold", "truncated", "truncated-fft"])
@pytest.mark.parametrize("eps", [(10.0, 11.0, 12.0), (2.0, 3.0, 4.0)], ids=["eps10", "eps2-4"])
def test_the_remove_skip_traces_on_vmapped_blocks(scheme, strategy, eps):
    """Every branch the gathered blocks run passes its arrays as operands (a custom_vmap branch may not close
    over traced values): traced only, nothing compiled."""
    _, arrays, _, fn, keys = _vmapped_blocks(scheme, strategy, eps, True, blocks=4, size=64)
    assert arrays is not None
    out = jax.eval_shape(fn, keys)
    assert out.shape == (4, 2, 2, 64)


_GPU_EXPORT = r"""
import re, jax, jax.numpy as jnp
from jax import export
import mcacct
from mcacct.core.precision import x64_scope
from mcacct.engine.problem import Problem
from mcacct.engine.runner import block_ladder_losses, ladder_chunk_statistics
from mcacct.engine.skips import remove_skip_arrays, skip_bound
from mcacct.evr.calibrate import verification_spec
from mcacct.kernels.shortcuts import RemoveSkip
with x64_scope():
    p = Problem(mcacct.TruncatedBMinSep(0.05, 4, 48, 60, 8, True), mcacct.BandedToeplitz((0.6, 0.45, 0.3, 0.22)),
                dot_method="fft")
    sig, eps = [0.5, 2.0], [10.0, 11.0, 12.0]
    rs = RemoveSkip(*jnp.asarray(remove_skip_arrays(p, sig, eps)).T)
    ab = skip_bound(p, sig, eps)
    fn = lambda key: ladder_chunk_statistics(key, jnp.asarray(sig), jnp.zeros(2), 1024, jnp.asarray(eps), p, 1024,
                                             verification_spec(), ab, rs)
    text = export.export(jax.jit(fn), platforms=["cuda"])(jax.random.key(0)).mlir_module()
    # eight blocks under vmap (at n = 48 a chunk is one block): the gathered branches lower too
    blocks = jax.vmap(lambda k: block_ladder_losses(k, jnp.asarray(sig), p, 64, ab, rs))
    export.export(jax.jit(blocks), platforms=["cuda"])(jax.random.split(jax.random.key(0), 8))
print(sorted(set(int(v) for v in re.findall(r"type = RFFT, length = \[(\d+)\] : \(tensor<[0-9x]*xf32>", text))))
"""


def test_the_skips_lower_for_cuda_with_gathered_blocks():
    """The engine's chunk program with both skips, traced for a GPU (blocks under vmap, the settle gathered), lowers
    for an NVIDIA GPU without one (jax.export); its float32 screen takes a power of two (64, where the CPU's is 60)."""
    import json
    import os
    import subprocess
    import sys
    from mcacct.kernels.fft_size import screen_fft_size
    assert screen_fft_size(48, 4) == 60 and screen_fft_size(48, 4, radix2=True) == 64
    env = dict(os.environ, MCACCT_TARGET_PLATFORM="gpu", JAX_PLATFORMS="cpu")
    res = subprocess.run([sys.executable, "-c", _GPU_EXPORT], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    lengths = json.loads(res.stdout.strip().splitlines()[-1])
    assert lengths == [64], lengths                       # the float32 screen's transforms


def test_the_remove_skip_runs_on_cpus_and_gpus_only(monkeypatch):
    """TPUs keep every remove loss: the float32 screen's error model is not checked for their transforms."""
    from mcacct.engine.skips import remove_skip_arrays
    problem = Problem(mcacct.BMinSep(0.05, 4, 48, True), C4, skip_zero=True)
    for platform, runs in (("cpu", True), ("gpu", True), ("cuda", True), ("tpu", False)):
        monkeypatch.setenv("MCACCT_TARGET_PLATFORM", platform)
        assert (remove_skip_arrays(problem, [0.5, 2.0], (10.0, 11.0, 12.0)) is not None) == runs, platform
