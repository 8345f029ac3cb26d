"""Balls-in-bins with more bands than bins (exact), and argument validation of every scheme's public methods.

Balls-in-bins is checked against brute force (the shift mixture of Gaussian densities with the dense ``C``,
evaluated with scipy) and against jax-privacy's ``compute_privacy_loss`` (installed as a test-only oracle).
The validation cases each name the offending parameter; those marked "silent" returned a wrong number
before the checks were added.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

import mcacct
import oracles
from mcacct import evr
from mcacct.engine.losses import direction_losses
from mcacct.engine.problem import Problem
from mcacct.engine.estimate import estimate
from mcacct.schemes.banded_inverse import BandedInverse, cross_term_allowance
from mcacct.schemes.balls_in_bins import BallsInBins
from mcacct.schemes.cyclic_poisson import CyclicPoisson
from mcacct.kernels.recursion import shift_mixture_log_ratio
from mcacct.schemes.multi_attribution import MultiAttribution
from mcacct.schemes.truncated import TruncatedBMinSep

JAXP_VALUE = 1.5799760835798948  # jax-privacy sample_generation_test: y = 1, c = (1, 1, .5, .5), 2 bins, n = 4


# ------------------------------------------------------------------------------------------------------------
# balls-in-bins, any band width
# ------------------------------------------------------------------------------------------------------------
def _shift_means(n, b, c_col):
    """Rows ``C x_s`` for ``s = 0..b-1`` with the dense ``n x n`` matrix."""
    cm = mcacct.BandedToeplitz(c_col).matrix(n)
    xs = np.array([(np.arange(n) % b == s) & (s < n) for s in range(b)], dtype=np.float64)
    return xs @ cm.T


def _brute_log_ratio(ys, sigma, n, b, c_col):
    """``ln P(y)/Q(y)`` with P the uniform mixture over shifts of N(C x_s, sigma^2 I), Q = N(0, sigma^2 I)."""
    means = _shift_means(n, b, c_col)
    cov = sigma ** 2 * np.eye(n)
    out = []
    for y in np.atleast_2d(ys):
        log_p = logsumexp([stats.multivariate_normal.logpdf(y, m, cov) for m in means]) - math.log(b)
        out.append(log_p - stats.multivariate_normal.logpdf(y, np.zeros(n), cov))
    return np.asarray(out)


def _jax_privacy_log_ratio(ys, sigma, n, b, c_col):
    from jax_privacy import batch_selection
    from jax_privacy.experimental.monte_carlo import sample_generation
    scheme = batch_selection.BallsInBinsSampling(cycle_length=b, iterations=n)
    return np.asarray(sample_generation.compute_privacy_loss(scheme, np.asarray(ys).T, sigma,
                                                             np.asarray(c_col, np.float64)))


def test_balls_in_bins_more_bands_than_bins_matches_jax_privacy_value():
    """The reported case: 4 bands, 2 bins. Before: 2.4052974004451104 (overlapping columns ignored)."""
    got = BallsInBins(2, 4).log_ratio(jnp.ones(4), mcacct.BandedToeplitz((1, 1, .5, .5)), 1.0)
    assert float(got) == pytest.approx(JAXP_VALUE, rel=1e-13, abs=0)
    assert float(_brute_log_ratio(np.ones(4), 1.0, 4, 2, (1, 1, .5, .5))[0]) == pytest.approx(JAXP_VALUE, rel=1e-12)


BIB_CASES = [
    (4, 2, (1.0, 1.0, 0.5, 0.5)),        # k = 2b
    (9, 2, (1.0, 0.7, 0.4, 0.2, 0.1)),   # k > b, b does not divide n
    (7, 3, (0.5, 0.0, 0.9, 0.3)),        # k = b + 1, a zero inside
    (5, 1, (1.0, 0.5, 0.25)),            # one bin: deterministic participation at every step
    (6, 4, (1.0, 0.5)),                  # k <= b (the old factorised case)
    (3, 5, (1.0, 0.6, 0.6)),             # n < b: shifts >= n never participate
    (4, 2, (1.0, 0.8, 0.6, 0.4, 0.2, 0.1, 0.05)),  # k > n
    (8, 3, (0.6,) * 5),                  # constant c_col (prefix sums)
]


@pytest.mark.parametrize("n,b,c_col", BIB_CASES)
def test_balls_in_bins_log_ratio_is_exact_for_any_band_width(n, b, c_col):
    rng = np.random.default_rng(n * 10 + b)
    sigma = 0.8
    means = _shift_means(n, b, c_col)
    ys = np.concatenate([means[rng.integers(b, size=5)] + sigma * rng.normal(size=(5, n)),
                         sigma * rng.normal(size=(3, n))])
    truth = _brute_log_ratio(ys, sigma, n, b, c_col)
    scheme, strat = BallsInBins(b, n), mcacct.BandedToeplitz(c_col)
    methods = ["auto", "direct", "fft"] + (["prefix"] if len(set(c_col)) == 1 else [])
    for method in methods:
        got = np.asarray(scheme.log_ratio(jnp.asarray(ys), strat, sigma, dot_method=method))
        np.testing.assert_allclose(got, truth, rtol=1e-10, atol=1e-10, err_msg=method)
    # jax-privacy rounds c_0 to float32 on the diagonal of its matrix of shift means
    np.testing.assert_allclose(_jax_privacy_log_ratio(ys, sigma, n, b, c_col), truth, rtol=1e-6, atol=1e-6)
    got32 = np.asarray(scheme.log_ratio(jnp.asarray(ys, jnp.float32), strat, sigma))
    np.testing.assert_allclose(got32, truth, rtol=1e-4, atol=1e-4)
    # exposed pieces: the class-0 mean, the shift norms and the (exact) sensitivity
    np.testing.assert_allclose(scheme.class_mean(strat), means[0], rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(scheme.shift_sq_norms(strat), np.sum(means ** 2, axis=1), rtol=1e-13)
    assert scheme.sensitivity_bound(strat) == pytest.approx(np.max(np.linalg.norm(means, axis=1)), rel=1e-13)
    if len(c_col) <= b:  # never above the generic separated-participation bound
        assert scheme.sensitivity_bound(strat) <= strat.worst_case_sensitivity(n, b) * (1 + 1e-12)


@pytest.mark.parametrize("n,b,c_col", [(9, 2, (1.0, 0.7, 0.4, 0.2, 0.1)), (3, 5, (1.0, 0.6, 0.6))])
def test_balls_in_bins_sampler_draws_the_shift_means(n, b, c_col):
    scheme, strat, m = BallsInBins(b, n), mcacct.BandedToeplitz(c_col), 4000
    key = jax.random.key(3)
    pos = np.asarray(scheme.sample(key, strat, 0.9, m, "remove").y)
    neg = np.asarray(scheme.sample(key, strat, 0.9, m, "add").y)  # same noise draw
    means = _shift_means(n, b, c_col)
    dist = np.abs((pos - neg)[:, None, :] - means[None]).max(axis=2)
    which = np.argmin(dist, axis=1)
    assert np.all(dist[np.arange(m), which] < 1e-12)
    # the drawn shift is the bin of sample_participation on the same key: P[shift = s] = 1/b
    part = np.asarray(scheme.sample_participation(jax.random.split(key)[0], m))
    first = np.where(part.any(axis=1), part.argmax(axis=1), -1)
    np.testing.assert_array_equal(np.where(first >= 0, first, which), which)
    # shifts with equal means (s >= n: no participation) are told apart by nobody: argmin takes the first
    first_equal = [min(t for t in range(b) if np.allclose(means[t], means[s])) for s in range(b)]
    expected = np.bincount(first_equal, minlength=b) * m / b
    counts = np.bincount(which, minlength=b)
    assert np.all(np.abs(counts - expected) <= 6 * np.sqrt(expected) + 1e-9), (counts, expected)


def test_balls_in_bins_more_bands_sampler_and_loss_are_one_pair():
    scheme, strat, m, sigma = BallsInBins(3, 12), mcacct.BandedToeplitz((1.0, 0.8, 0.6, 0.5, 0.3)), 20_000, 1.3
    for direction in ("remove", "add"):
        loss = direction_losses(scheme.mechanism(strat), jax.random.key(31), sigma, m, direction)
        v = np.exp(-np.asarray(loss))  # Q/P under P, P/Q under Q
        assert abs(v.mean() - 1.0) <= 6 * v.std() / math.sqrt(m), direction


def test_balls_in_bins_one_bin_many_bands_is_the_gaussian_mechanism():
    """b = 1: participation at every step, y ~ N(C 1, s^2 I): delta of a Gaussian with sensitivity ||C 1||.
    The old factorised loss dropped the cross terms of the overlapping columns."""
    n, c_col, sigma, eps = 5, (1.0, 0.5, 0.25), 1.5, 0.5
    sens = float(np.linalg.norm(mcacct.BandedToeplitz(c_col).matrix(n) @ np.ones(n)))
    truth = oracles.gaussian_delta(sens, sigma, eps)
    problem = Problem(BallsInBins(1, n), mcacct.BandedToeplitz(c_col))
    assert problem.scheme.sensitivity_bound(problem.strategy) == pytest.approx(sens, rel=1e-13)
    est = estimate(problem, sigma, jax.random.key(12), 40_000, (eps,), chunk_size=8000)
    for d in ("remove", "add"):
        s = est.stats[d]
        m = s.mean_at(0)
        lo, hi = evr.kl_lower_confidence(m, s.count, 1e-3), evr.kl_upper_confidence(m, s.count, 1e-3)
        assert lo <= truth <= hi, (d, lo, m, hi, truth)


def test_balls_in_bins_accepts_integer_outputs():
    y = np.array([[1, 0, 2, 1]])
    strat = mcacct.BandedToeplitz((1.0, 0.5))
    got = BallsInBins(2, 4).log_ratio(y, strat, 0.7)
    np.testing.assert_allclose(np.asarray(got), _brute_log_ratio(y.astype(float), 0.7, 4, 2, (1.0, 0.5)),
                               rtol=1e-12)


def test_validated_methods_still_trace():
    """Checks skip traced values: the public methods work inside jit with a traced sigma."""
    y = jnp.asarray(np.random.default_rng(0).normal(size=(3, 6)))
    strat = mcacct.BandedToeplitz((1.0, 0.5))
    for scheme in (BallsInBins(2, 6), CyclicPoisson(0.5, 2, 6), MultiAttribution(0.3, 2, 6, 2)):
        eager = scheme.log_ratio(y, strat, 0.7)
        traced = jax.jit(lambda s, sc=scheme: sc.log_ratio(y, strat, s))(0.7)
        np.testing.assert_allclose(np.asarray(traced), np.asarray(eager), rtol=1e-12)
    lo, up = jax.jit(lambda s: BandedInverse(0.3, 2, 6).log_ratio_bounds(y, strat, s))(0.7)
    assert lo.shape == up.shape == (3,)


# ------------------------------------------------------------------------------------------------------------
# every public method refuses what it cannot handle, naming the parameter
# ------------------------------------------------------------------------------------------------------------
N, B = 6, 2
OK = mcacct.BandedToeplitz((1.0, 0.5))
WIDE = mcacct.BandedToeplitz((1.0, 0.5, 0.25))  # 3 bands > min_sep = 2
Y = np.random.default_rng(1).normal(size=(4, N))
Y_SHORT = Y[:, :N - 1]
KEY = jax.random.key(0)
R = np.zeros((4, N), np.int32)

SCHEMES = {
    "bminsep": mcacct.BMinSep(0.3, B, N),
    "truncated": TruncatedBMinSep(0.3, B, N, 10, 3),
    "inverse": BandedInverse(0.3, B, N),
    "multi": MultiAttribution(0.3, B, N, 2),
    "cyclic": CyclicPoisson(0.5, B, N),
    "bib": BallsInBins(B, N),
}
#: schemes whose losses need len(c_col) <= min_sep
NARROW = ("bminsep", "truncated", "multi", "cyclic")


def _aux_like(name, y):
    return np.zeros(np.shape(y), np.int32) if name == "truncated" else None


def _loss_fns(name, scheme):
    """``(method name, f(y, sigma, strategy, **kw))`` for the y-taking public methods of a scheme: the contract's
    ``log_ratio`` (every scheme) and the scheme's own extras."""
    out = [("log_ratio", lambda y, s, st, **kw: scheme.log_ratio(y, st, s, _aux_like(name, y), **kw))]
    if name == "truncated":
        out.append(("side_terms", lambda y, s, st, **kw: scheme.side_terms(y, _aux_like(name, y), s, st, **kw)))
    if name == "inverse":
        out.append(("log_ratio_bounds", lambda y, s, st, **kw: scheme.log_ratio_bounds(y, st, s, **kw)))
    if name == "multi":
        out.append(("participation_terms", lambda y, s, st, **kw: scheme.participation_terms(y, s, st, **kw)))
    return out


def _cases():
    cases = []
    for name, scheme in SCHEMES.items():
        for meth, f in _loss_fns(name, scheme):
            tag = f"{name}.{meth}"
            cases.append((f"{tag}-short-y", lambda f=f: f(Y_SHORT, 0.7, OK), "y must have shape"))
            cases.append((f"{tag}-scalar-y", lambda f=f: f(np.float64(1.0), 0.7, OK), "y must have shape"))
            cases.append((f"{tag}-complex-y", lambda f=f: f(Y + 1j, 0.7, OK), "y must be a real"))
            for bad in (0.0, -0.7, float("nan"), float("inf")):
                cases.append((f"{tag}-sigma={bad}", lambda f=f, bad=bad: f(Y, bad, OK), "sigma"))
            cases.append((f"{tag}-sigma-array", lambda f=f: f(Y, np.array([0.7, -1.0]), OK), "sigma"))
            cases.append((f"{tag}-strategy-tuple", lambda f=f: f(Y, 0.7, (1.0, 0.5)), "strategy"))
            cases.append((f"{tag}-dot", lambda f=f: f(Y, 0.7, OK, dot_method="fast"), "dot_method"))
            if name in NARROW:
                cases.append((f"{tag}-wide", lambda f=f: f(Y, 0.7, WIDE), "min_sep|cycle_length"))
        cases.append((f"{name}.log_ratio-direction", lambda s=scheme, n=name: s.log_ratio(
            Y, OK, 0.7, _aux_like(n, Y), direction="both"), "direction"))
        cases.append((f"{name}.log_ratio-recursion", lambda s=scheme, n=name: s.log_ratio(
            Y, OK, 0.7, _aux_like(n, Y), recursion="magic"), "recursion"))
        # sampler (the contract's sample, every scheme)
        smp = functools.partial(scheme.sample, KEY)
        cases += [(f"{name}.sample-sigma", lambda smp=smp: smp(OK, -1.0, 8), "sigma"),
                  (f"{name}.sample-nan-sigma", lambda smp=smp: smp(OK, float("nan"), 8), "sigma"),
                  (f"{name}.sample-inf-sigma", lambda smp=smp: smp(OK, float("inf"), 8), "sigma"),
                  (f"{name}.sample-num", lambda smp=smp: smp(OK, 0.7, 0), "num_samples"),
                  (f"{name}.sample-num-negative", lambda smp=smp: smp(OK, 0.7, -3), "num_samples"),
                  (f"{name}.sample-direction", lambda smp=smp: smp(OK, 0.7, 8, "yes"), "direction"),
                  (f"{name}.sample-dtype", lambda smp=smp: smp(OK, 0.7, 8, "remove", jnp.int32), "dtype"),
                  (f"{name}.sample-dtype16", lambda smp=smp: smp(OK, 0.7, 8, "remove", "float16"), "dtype"),
                  (f"{name}.sample-strategy", lambda smp=smp: smp([1.0], 0.7, 8), "strategy"),
                  (f"{name}.sample-strategy-str", lambda smp=smp: smp("1,0.5", 0.7, 8), "strategy")]
        if name in NARROW:
            cases.append((f"{name}.sample-wide", lambda smp=smp: smp(WIDE, 0.7, 8), "min_sep|cycle_length"))
            cases.append((f"{name}.problem-wide", lambda s=scheme: Problem(s, WIDE), "min_sep|cycle_length"))
            cases.append((f"{name}.sensitivity-wide", lambda s=scheme: s.sensitivity_bound(WIDE), "min_sep|cycle_length"))
            cases.append((f"{name}.check_strategy-wide", lambda s=scheme: s.check_strategy(WIDE), "min_sep|cycle_length"))
        cases.append((f"{name}.sensitivity-type", lambda s=scheme: s.sensitivity_bound((1.0,)), "strategy"))
        cases.append((f"{name}.check_strategy-type", lambda s=scheme: s.check_strategy(None), "strategy"))
        if name != "truncated":
            cases.append((f"{name}.log_ratio-aux", lambda s=scheme: s.log_ratio(Y, OK, 0.7, R), "aux"))
    cy, ma, tr = SCHEMES["cyclic"], SCHEMES["multi"], SCHEMES["truncated"]
    bi = SCHEMES["inverse"]
    cases += [
        ("cyclic.sample_participation-num", lambda: cy.sample_participation(KEY, 0), "num_samples"),
        ("bib.sample_participation-num", lambda: SCHEMES["bib"].sample_participation(KEY, 0), "num_samples"),
        ("multi.sample_counts-num", lambda: ma.sample_counts(KEY, 0), "num_samples"),
        ("truncated.sample_other_counts-num", lambda: tr.sample_other_counts(KEY, -1), "num_samples"),
        ("inverse.bounds-recursion", lambda: bi.log_ratio_bounds(Y, OK, 0.7, recursion="magic"), "recursion"),
        ("inverse.bounds-which", lambda: bi.log_ratio_bounds(Y, OK, 0.7, which="middle"), "which"),
        ("inverse.allowance-type", lambda: bi.allowance((1.0, 0.5)), "strategy"),
        ("truncated.r-shape", lambda: tr.log_ratio(Y, OK, 0.7, R[:, :3]), "r must have the shape"),
        ("truncated.r-negative", lambda: tr.log_ratio(Y, OK, 0.7, R - 1), "r .*must be in"),
        ("truncated.r-too-many", lambda: tr.log_ratio(Y, OK, 0.7, R + 10), "r .*must be in"),
        ("truncated.r-missing", lambda: tr.log_ratio(Y, OK, 0.7), "r must be an integer array"),
        ("truncated.r-float", lambda: tr.side_terms(Y, R + 0.5, 0.7, OK), "r must be an integer"),
        ("shift_mixture-period", lambda: shift_mixture_log_ratio(jnp.zeros((2, 4)), 0, 0.5, True), "period"),
        ("shift_mixture-prob", lambda: shift_mixture_log_ratio(jnp.zeros((2, 4)), 2, 1.5, True), "sampling_prob"),
        ("shift_mixture-phase", lambda: shift_mixture_log_ratio(jnp.zeros((2, 4)), 2, 0.5, "no"), "random_phase"),
        ("cross_term_allowance-negative", lambda: cross_term_allowance((1.0, -0.5), 6, 2), "c_col"),
    ]
    return cases


CASES = _cases()


@pytest.mark.parametrize("make,needle", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_public_methods_refuse_bad_arguments(make, needle):
    with pytest.raises(ValueError, match=needle):
        make()


def test_error_messages_state_the_allowed_range():
    with pytest.raises(ValueError, match=r"\(0, inf\)"):
        BallsInBins(2, 4).log_ratio(np.ones(4), OK, -1.0)
    with pytest.raises(ValueError, match=r"len\(c_col\) <= min_sep"):
        MultiAttribution(0.3, 2, 6).log_ratio(Y, WIDE, 0.7)
    with pytest.raises(ValueError, match=r"\(\.\.\., 6\)"):
        CyclicPoisson(0.5, 2, 6).log_ratio(Y_SHORT, OK, 0.7)
    with pytest.raises(ValueError, match=r"\[0, 9\]"):
        TruncatedBMinSep(0.3, 2, 6, 10, 3).log_ratio(Y, OK, 0.7, R + 10)
    with pytest.raises(ValueError, match="float64"):
        mcacct.BMinSep(0.3, 2, 6).sample(KEY, OK, 0.7, 8, "remove", jnp.float16)


def test_wide_strategies_accepted_where_exact():
    """Balls-in-bins (exact, any k) and the banded-inverse bounds take strategies wider than min_sep."""
    Problem(BallsInBins(2, 6), WIDE)
    Problem(BandedInverse(0.3, 2, 6), WIDE)
    draws = mcacct.sample(KEY, BallsInBins(2, 6), WIDE, 0.7, 8)
    assert np.all(np.isfinite(np.asarray(mcacct.privacy_loss(BallsInBins(2, 6), draws, WIDE, 0.7))))
    for name in NARROW:
        with pytest.raises(ValueError, match="min_sep|cycle_length"):
            Problem(SCHEMES[name], WIDE)


@pytest.mark.parametrize("sigma", [0.0, -1.0, float("nan"), float("inf")])
def test_output_samplers_validate_sigma(sigma):
    import mcacct.schemes.bminsep as smp
    scheme, strategy = mcacct.BMinSep(0.2, 2, 8), mcacct.BandedToeplitz((0.6, 0.4))
    for fn in (mcacct.sample_y, mcacct.sample, smp.sample_y_t):
        with pytest.raises(ValueError, match="sigma"):
            fn(jax.random.key(0), scheme, strategy, sigma, 4)
    with pytest.raises(ValueError, match="num_samples"):
        mcacct.sample_y(jax.random.key(0), scheme, strategy, 1.0, 0)
