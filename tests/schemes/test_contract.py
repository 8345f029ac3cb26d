"""The scheme contract holds: a scheme defined here only, registered at run time, runs through ``estimate``,
``calibrate``, shard jobs and the systematic terms with no package file touched; the default b-min-sep path
gives the statistics it gave before the contract (stored values)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mcacct
from mcacct import (BallsInBins, BandedInverse, BandedToeplitz, BMinSep, CyclicPoisson, MultiAttribution, Problem,
                    TruncatedBMinSep, pld)
from mcacct.engine.runner import run_ladder
from mcacct.engine.systematic import loss_error_bound, systematic_bound
from mcacct.kernels.block_terms import sum_error
from mcacct.kernels.fused_bound import NORMAL_ULPS
from mcacct.kernels.output import gaussian_output
from mcacct.kernels.mean_shift import mean_shift_amplitudes
from mcacct.kernels.sliding import participation_log_ratios
from mcacct.schemes.base import Draws, LossErrorParams, Scheme, SchemeSummary
from mcacct.schemes.registry import SchemeInfo, register, unregister
from mcacct.statistics.accumulators import FIXED_BITS
from helpers import ROOT
from suite_env import SUITE_XLA_FLAGS, default_compiler_env, xla_cpu_fma


@dataclasses.dataclass(frozen=True)
class PoissonOnce(Scheme):
    """Toy scheme: the example can take part only in iteration 0, with probability ``q`` (one
    Poisson-subsampled Gaussian release of ``c^(0)``)."""

    sampling_prob: float
    iterations: int

    def check_strategy(self, strategy) -> None:
        if not isinstance(strategy, BandedToeplitz):
            raise ValueError("strategy must be a BandedToeplitz")

    def sensitivity_bound(self, strategy) -> float:
        return math.sqrt(float(strategy.column_sq_norms(self.iterations)[0]))

    def draw(self, key, strategy, sigma, num_samples, direction, dtype):
        n = self.iterations

        def mean(k):
            x = jax.random.uniform(k, (num_samples, 1), jnp.float64) < self.sampling_prob
            x = jnp.concatenate([x, jnp.zeros((num_samples, n - 1), bool)], axis=1)
            return mean_shift_amplitudes(x.astype(dtype), strategy.c_col)

        return Draws(gaussian_output(key, (num_samples, n), sigma, dtype, direction == "remove", mean))

    def loss_rows(self, y, strategy, sigma, aux, direction, dot_method, recursion):
        ell0 = participation_log_ratios(y, jnp.asarray(sigma, y.dtype), strategy.c_col, dot_method)[..., 0]
        q = self.sampling_prob
        return jnp.logaddexp(jnp.log1p(-q), math.log(q) + ell0)

    def output_coordinate_bound(self, strategy) -> float:
        return float(max(abs(v) for v in strategy.c_col))  # the one participation adds column 0 of C

    def participation_boundaries(self) -> int:
        return 1  # one coin

    def draw_law_tv(self) -> float:
        return 0.0  # the coin is its only discrete draw, counted above

    def loss_error_params(self) -> LossErrorParams:
        return LossErrorParams(1, self.sampling_prob, 1, 1.0)

    def summary(self) -> SchemeSummary:
        rate = self.sampling_prob / self.iterations  # one chance in n iterations
        return SchemeSummary(bands=None, sampling_prob=self.sampling_prob, participation_rate=rate, count_sampler=None)

    def exact_pld(self, strategy):
        return pld.PoissonGaussianSpec(sampling_prob=self.sampling_prob, sigma=1.0, steps=1,
                                       sensitivity=self.sensitivity_bound(strategy))


TOY = Problem(PoissonOnce(0.3, 6), BandedToeplitz((1.0, 0.5)))


@pytest.fixture()
def toy_registered():
    register(SchemeInfo("poisson-once", PoissonOnce, "toy: one Poisson-subsampled release"))
    yield
    unregister("poisson-once")


def test_toy_scheme_satisfies_the_protocol_and_its_systematic_terms():
    assert isinstance(TOY.scheme, mcacct.AccountedScheme)
    sb = systematic_bound(TOY, 1.0)
    assert 0 < sb.loss_shift < 1e-12 and 0 < sb.delta < 1e-13
    draws = mcacct.sample(jax.random.key(0), TOY.scheme, TOY.strategy, 1.0, 8, "add")
    assert draws.y.shape == (8, 6) and draws.aux is None
    loss = mcacct.privacy_loss(TOY.scheme, draws, TOY.strategy, 1.0)
    assert loss.shape == (8,) and loss.dtype == jnp.float64


def test_toy_scheme_estimate_brackets_its_exact_pld(toy_registered):
    eps, sigma = 0.5, 0.8
    est = mcacct.estimate(TOY, sigma, jax.random.key(1), 20_000, (eps,), chunk_size=4096)
    d = est.delta(0)
    exact = pld.pld_delta(dataclasses.replace(TOY.scheme.exact_pld(TOY.strategy), sigma=sigma), eps)
    assert d["delta_lower"] <= exact.delta <= d["delta_upper"]


def test_toy_scheme_calibrates_and_runs_as_shard_jobs(toy_registered, tmp_path):
    from mcacct.jobs.shards import JobConfig, merge, run_shard
    res = mcacct.calibrate(TOY, 1.0, 1e-2, jax.random.key(2), sigmas=[0.9, 1.2, 1.6])
    assert res.sigma > 0 and res.overall_delta <= 1e-2
    cfg = JobConfig(problem=TOY, sigma=1.2, epsilons=(1.0,), num_samples=2048, chunk_size=512, seed=3)
    for shard in range(2):
        run_shard(cfg, shard, 2, str(tmp_path))
    merged = merge([str(tmp_path)])
    direct = mcacct.estimate(TOY, 1.2, jax.random.key(3), 2048, (1.0,), chunk_size=512)
    assert merged.estimate().delta(0)["delta_upper"] == direct.delta(0)["delta_upper"]


# -- numbers that must not move: every scheme's statistics equal those of the code before the contract ---------
# computed with the code before the contract (commit de8c70f): run_ladder, sigmas (0.8, 1.1), key 7, 1000 samples,
# chunks of 256, epsilons (0.5, 1.0); sums are the exact fixed-point integers, hist a digest of the histogram.
# Kernel 4 (the stepwise recursion on CPU): the sums moved by at most 7e-15 relative (float rounding of the
# recursion), every histogram digest stayed the same; the values below are kernel 4's. Kernel 5 (b = 1: the product
# form on CPU): bminsep_cold_b1's sums moved by at most 7e-15 relative, its digests stayed; its values are kernel 5's.
# Kernel 6 (the ladders read the mean's sliding sums from a table): no value below moved.
# Kernel 11 (the normal sampler's log from vectorisable operations, mcacct.kernels.normal.log_f64, within 1 ulp
# of the library log): three sums moved in their last digits (at most 5.8e-17 relative), no digest moved.
STORED = {
    "bminsep": (Problem(BMinSep(0.2, 4, 32, True), BandedToeplitz((0.6, 0.5, 0.4))), {
        "0:remove": ([471629713249056957966703306, 333302009845008607130563132], "bf8ba1217c1ac113"),
        "0:add": ([417619067348707829317203712, 272976036751277291557787354], "5e6266e35f30119b"),
        "1:remove": ([277959695705370807323995060, 145144892974305209854133658], "9ee30c3ec552717f"),
        "1:add": ([252072953634379175248564959, 120428045499388149630932661], "463878489c95de1d")}),
    "bminsep_cold_b1": (Problem(BMinSep(0.1, 1, 24, False), BandedToeplitz((1.0,))), {
        "0:remove": ([206122085469723628553072290, 103581750596780300505077205], "5dfa5243e515e982"),
        "0:add": ([139664309111568473047271079, 22225601569452424070466694], "e9485b6818bc233c"),
        "1:remove": ([82973767437653027237433906, 18676537235775193377366004], "c8f6d90ffc09d379"),
        "1:add": ([50043999243645861320782916, 1593207629236470066048099], "cd156c1ccdf1e0b6")}),
    # kernel 3 (alias-table counts r, sub-blocked untruncated part, mixture work only on truncated samples) and
    # kernel 4 (a block's count words drawn in one call): recomputed at the kernel change; the law is tested in tests/schemes/truncated/test_counts.py and the losses equal
    # the full two-mixture loss in tests/schemes/truncated/test_truncated_fast.py
    # kernel 9 (#37): the warm start's root T ~ Binom(N, C q) from exact digit tables instead of
    # jax.random.binomial: recomputed (the law: tests/schemes/truncated/test_exact_draws.py)
    "truncated": (Problem(TruncatedBMinSep(0.2, 2, 16, 12, 3, True), BandedToeplitz((1.0, 0.5))), {
        "0:remove": ([589712958912044403518692645, 504318140891613468285407566], "dab62f88b15bbb2f"),
        "0:add": ([522779786630837806977734132, 354756961274546678910604801], "5fb06892ef68f9e7"),
        "1:remove": ([395265588785433927072192185, 290724035052398831717548131], "5c4d6ec8e9007f62"),
        "1:add": ([348104188510593015003567469, 183498159608329257241706561], "2eee369a1f81487f")}),
    # kernel 9 (#37): a user's count given participation from an exact integer alias table instead of
    # jax.random.categorical (Gumbel-max in float64): the remove direction recomputed
    "multi": (Problem(MultiAttribution(0.2, 2, 16, 2), BandedToeplitz((1.0, 0.5))), {
        "0:remove": ([798759672047454589931913686, 720087670932002053888521015], "9febf9d4fa9948c0"),
        "0:add": ([752470759791901027171562246, 629128394829301097814694153], "1229e381111188e5"),
        "1:remove": ([579417025354414428920644641, 466864907816351551336902914], "fa919304824129cc"),
        "1:add": ([533120324089047408120757441, 385341659928451399488370056], "42896ad0bc1cb3a5")}),
    "cyclic": (Problem(CyclicPoisson(0.5, 2, 16, True), BandedToeplitz((1.0, 0.5))), {
        "0:remove": ([697933940061374290903822531, 606440914773683735040419542], "88398495c5abd903"),
        "0:add": ([629121452627931438222793665, 481561619056496754891193239], "7f73833d3a7ead4d"),
        "1:remove": ([482768459723684844635761013, 360586725419239251627606809], "25b365d78a4d30a0"),
        "1:add": ([420139062892976665029261445, 266245587600404375130479966], "ad3b41ef0bcbb2d4")}),
    "bins": (Problem(BallsInBins(4, 16), BandedToeplitz((1.0, 0.5, 0.3, 0.2, 0.1))), {
        "0:remove": ([942418797753169967710516942, 881605121403518973478338728], "e507be9a57750d28"),
        "0:add": ([925621241350992134739337633, 855316487046172464088171559], "63c62c294b539a58"),
        "1:remove": ([708637982651584729100563764, 603155191192919337733894147], "2c0753f25531d5bf"),
        "1:add": ([677506853867481582207532146, 556194487918873717427774250], "e0ee910e8aad2077")}),
    "inverse": (Problem(BandedInverse(0.3, 2, 16, True), BandedToeplitz((1.0, 0.5, 0.25))), {
        "0:remove": ([780968444866556337191851451, 700905441685100156040878002], "dc3ba0209208ca39"),
        "0:add": ([840262210320631361539752278, 715364468784262089671861628], "f1c0a0b73ba763c1"),
        "1:remove": ([569528628724030999863821720, 454038207909486735569976390], "03219c0bbd725593"),
        "1:add": ([589571596663770692058966786, 418497009917183036597268917], "cc26444314a778d2")}),
}


#: the compiler the stored values are bit for bit from: XLA:CPU of the JAX that pyproject.toml pins, default flags
with open(os.path.join(ROOT, "pyproject.toml")) as _f:
    PINNED_JAX = re.search(r'"jax==([^"]+)"', _f.read()).group(1)
#: schemes whose draws differ on accelerators by design: truncation draws every sample's count chain there and
#: screens it on CPUs (mcacct.schemes.truncated.screen), so its statistics there are other draws of the same law
PLATFORM_DRAWS = frozenset({"truncated"})
LADDER_SIGMAS = (0.8, 1.1)
LADDER_SAMPLES = 1000
LADDER_CHUNK = 256


@functools.lru_cache(maxsize=None)
def ladder_statistics(name: str) -> dict:
    """The statistics of ``STORED[name]``'s run, per ``"j:direction"``: ``counts``, ``sums`` (the exact fixed-point
    integers) and ``hist``, each a pair (every loss computed, then with the skips of provably zero contributions, the
    default), and ``digest``, the stored digest's form of the first histogram (JSON-able: a subprocess prints it)."""
    problem, _ = STORED[name]

    def run(prob):
        return run_ladder(prob, list(LADDER_SIGMAS), jax.random.key(7), LADDER_SAMPLES, (0.5, 1.0), LADDER_CHUNK)

    r, full = run(problem), run(dataclasses.replace(problem, skip_zero=False))
    out = {}
    for j, st in enumerate(full.stats):
        for d, s in st.items():
            pair = (s, r.stats[j][d])
            out[f"{j}:{d}"] = {"counts": [int(x.count) for x in pair], "sums": [[int(v) for v in x.sums] for x in pair],
                               "hist": [np.asarray(x.hist).tolist() for x in pair],
                               "digest": hashlib.sha256(np.asarray(s.hist).tobytes()).hexdigest()[:16]}
    return out


@functools.lru_cache(maxsize=1)
def default_compiler_statistics() -> dict:
    """:func:`ladder_statistics` of every stored scheme, from one subprocess that compiles as users do.

    The suite compiles with ``tests/suite_env.py``'s ``SUITE_XLA_FLAGS``, which round a few sums differently in their
    last digits (multi-attribution's); the stored values are the default compiler's, the one users run."""
    code = ("import json, sys; sys.path[:0] = sys.argv[1:3]; import jax; jax.config.update('jax_enable_x64', True); "
            "import test_contract as t; print(json.dumps({n: t.ladder_statistics(n) for n in sorted(t.STORED)}))")
    paths = [os.path.dirname(os.path.abspath(__file__)), os.path.join(ROOT, "tests")]
    r = subprocess.run([sys.executable, "-c", code, *paths], env=default_compiler_env(), capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _off_pinned_compiler() -> str | None:
    """Why the stored values cannot be this run's bit for bit (``None``: they can): they are XLA:CPU's of the pinned
    JAX on a CPU with FMA (:func:`suite_env.xla_cpu_fma`; without it, e.g. ``--xla_cpu_max_isa=AVX``, every stored
    scheme's sums move in their last digits, 2026-12-07)."""
    if jax.default_backend() != "cpu" or jax.__version__ != PINNED_JAX:
        return (f"the stored values are XLA:CPU's of jax {PINNED_JAX}; this is {jax.default_backend()} of jax "
                f"{jax.__version__}")
    if not xla_cpu_fma():
        return "the stored values are of a CPU with FMA, which XLA:CPU does not target here (no fma, or a capped ISA)"
    return None


def _statistics(name: str) -> dict:
    """:func:`ladder_statistics`, from the default compiler where the suite's settings are on."""
    suite_setting = SUITE_XLA_FLAGS in os.environ.get("XLA_FLAGS", "")
    return default_compiler_statistics()[name] if suite_setting else ladder_statistics(name)


def _check_counts_and_moves(g: dict, key: str) -> None:
    """Both runs drew every sample, and the skips only moved draws up the histogram (to their bounds)."""
    assert g["counts"] == [LADDER_SAMPLES, LADDER_SAMPLES], key
    exact, skipped = (np.asarray(h) for h in g["hist"])
    assert np.all(np.cumsum(skipped[::-1]) >= np.cumsum(exact[::-1])), key


@pytest.mark.parametrize("name", sorted(STORED))
def test_statistics_are_bit_identical_to_stored_values(name):
    """Counts and sums as stored, with the skips of provably zero contributions (the default) and without; the
    histogram as stored without them (every loss computed), and with them only draws moved up (kernel 10: the
    remove direction's bound, mcacct.kernels.bound, lets go of b-min-sep draws below the run's epsilons). Computed
    with the default compiler (:func:`default_compiler_statistics`) where the suite's settings are on. The stored
    values are those of XLA:CPU of the pinned JAX on a CPU with FMA: another compiler, or a CPU without FMA, rounds
    otherwise (:func:`test_statistics_agree_with_stored_values_within_the_arithmetic` checks it)."""
    why = _off_pinned_compiler()
    if why is not None:
        pytest.skip(f"{why} (test_statistics_agree_with_stored_values_within_the_arithmetic runs here)")
    _, want = STORED[name]
    got = _statistics(name)
    assert sorted(got) == sorted(want)
    for key, (sums, digest) in want.items():
        g = got[key]
        _check_counts_and_moves(g, key)
        assert g["sums"] == [sums, sums], key
        assert g["digest"] == digest, key


def stored_sum_tolerance(name: str, j: int, count: int, same_draws: bool) -> int:
    """How far another compiler's fixed-point sum of :func:`ladder_statistics` may lie from the stored one (units
    of ``2^-FIXED_BITS``), from the arithmetic alone.

    Same draws: each computed loss is within ``eta`` (:func:`loss_error_bound`) of the exact one on either
    compiler, and a contribution ``max(0, 1 - e^{eps - L})`` moves by at most what ``L`` moves (its slope is at most
    1), so the float sums differ by at most ``count (2 eta + 2^-49)`` (the last term: the ``exp`` and the
    subtraction, a few ulps of 1). The same words may give normals ``NORMAL_ULPS`` ulps apart (another compiler's
    contraction of the inversion, :mod:`mcacct.kernels.fused_bound`), at most ``NORMAL_ULPS 2^-49`` for
    ``|z| <= 8.2924``: each term moves by ``||c||_1`` times that over ``sigma``, and the loss by at most ``n`` times
    a term (its slopes in the terms are posterior probabilities, summing to at most the participations); that is
    added to ``2 eta``. Each run raises its chunk sums by their summation error (at most
    ``gamma_256 count``) and rounds up by less than a unit per chunk: twice that on top. Other draws of the same law
    (an accelerator's truncated draws): two independent means of ``count`` contributions in ``[0, 1]`` differ by
    ``t`` or more with probability at most ``2 exp(-count t^2)`` (Hoeffding, 2 count terms of range ``1/count``);
    ``t`` for ``1e-9``, so the test's 8 sums fail by chance with probability below ``1e-8``."""
    if same_draws:
        problem, sigma = STORED[name][0], LADDER_SIGMAS[j]
        eta = loss_error_bound(problem, sigma)
        c1 = math.fsum(abs(v) for v in problem.strategy.c_col)
        draws = problem.scheme.iterations * c1 * NORMAL_ULPS * 2.0**-49 / sigma
        real = count * (2.0 * eta + draws + 2.0**-49 + 2.0 * sum_error(LADDER_CHUNK))
        return math.ceil(real * 2.0**FIXED_BITS) + 2 * -(-count // LADDER_CHUNK)
    return math.ceil(count * math.sqrt(math.log(2e9) / count) * 2.0**FIXED_BITS)


@pytest.mark.parametrize("name", sorted(STORED))
def test_statistics_agree_with_stored_values_within_the_arithmetic(name):
    """On any platform and JAX (the device's suite run, issue #38): counts as stored; the sums within what the
    arithmetic allows between two compilers on the same draws (:func:`stored_sum_tolerance`), or, for a scheme
    that draws otherwise on accelerators (:data:`PLATFORM_DRAWS`), within a Hoeffding bound; with the skips of
    provably zero contributions, the same sums as without, bit for bit, and only draws moved up in the histogram.
    On the pinned compiler the bit-identical test above says more."""
    _, want = STORED[name]
    got = _statistics(name)
    same_draws = name not in PLATFORM_DRAWS or jax.default_backend() == "cpu"
    assert sorted(got) == sorted(want)
    for key, (sums, _) in want.items():
        g = got[key]
        _check_counts_and_moves(g, key)
        assert g["sums"][0] == g["sums"][1], key                      # the skips change no sum
        tol = stored_sum_tolerance(name, int(key.split(":")[0]), LADDER_SAMPLES, same_draws)
        worst = max(abs(int(a) - int(b)) for a, b in zip(g["sums"][0], sums))
        assert worst <= tol, (key, worst, tol)
