"""jax-privacy interop (mcacct.interop.jax_privacy): round trips between jax-privacy 2.0's batch selection objects and
mcacct's schemes, refusals by name, the sampling law of jax-privacy's batch iterators against mcacct's participation
rates, and one small DP-BandMF training loop driven by jax-privacy with a noise multiplier certified by mcacct."""

from __future__ import annotations

import dataclasses
import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mcacct
from mcacct.interop import (supported_batch_selections, noise_multiplier_from_jax_privacy,
                            noise_multiplier_to_jax_privacy)

bs = pytest.importorskip("jax_privacy.batch_selection")

EQUAL, INDEPENDENT = bs.PartitionType.EQUAL_SPLIT, bs.PartitionType.INDEPENDENT

# (jax-privacy object, dataset_size, the mcacct scheme it is)
PAIRS = [
    (bs.BMinSepSampling(0.3, 16, 4), None, mcacct.BMinSep(0.3, 4, 16, warm_start=True)),
    (bs.BMinSepSampling(0.3, 16, 4, warm_start=False), None, mcacct.BMinSep(0.3, 4, 16, warm_start=False)),
    (bs.BMinSepSampling(1.0, 12, 3), None, mcacct.BMinSep(1.0, 3, 12)),
    (bs.BMinSepSampling(0.2, 9, 1, warm_start=False), None, mcacct.BMinSep(0.2, 1, 9, warm_start=False)),
    (bs.BMinSepSampling(0.3, 16, 4, truncated_batch_size=10), 100, mcacct.TruncatedBMinSep(0.3, 4, 16, 100, 10)),
    (bs.BMinSepSampling(0.3, 16, 4, False, 10), 100, mcacct.TruncatedBMinSep(0.3, 4, 16, 100, 10, warm_start=False)),
    (bs.CyclicPoissonSampling(0.5, 16, cycle_length=4), None, mcacct.CyclicPoisson(0.5, 4, 16, random_phase=False)),
    (bs.CyclicPoissonSampling(0.5, 16, cycle_length=4, partition_type=INDEPENDENT), None,
     mcacct.CyclicPoisson(0.5, 4, 16, random_phase=True)),
    (bs.CyclicPoissonSampling(0.1, 7), None, mcacct.CyclicPoisson(0.1, 1, 7, random_phase=False)),
    (bs.BallsInBinsSampling(16, 4), None, mcacct.BallsInBins(4, 16)),
]


@pytest.mark.parametrize("selection,dataset_size,scheme", PAIRS, ids=lambda v: type(v).__name__)
def test_each_class_maps_to_its_scheme_and_back(selection, dataset_size, scheme):
    assert mcacct.from_jax_privacy(selection, dataset_size=dataset_size) == scheme
    back = mcacct.to_jax_privacy(scheme)
    assert type(back) is type(selection) and back == selection
    assert mcacct.to_jax_privacy(mcacct.Problem(scheme)) == selection  # a Problem stands for its scheme


@settings(max_examples=60, deadline=None)
@given(p=st.floats(0.01, 1.0), b=st.integers(1, 8), n=st.integers(1, 40), warm=st.booleans(),
       m=st.integers(1, 500), b_max=st.none() | st.integers(1, 600), kind=st.sampled_from(["bminsep", "cyclic",
                                                                                           "balls"]))
def test_round_trips_keep_every_field(p, b, n, warm, m, b_max, kind):
    if kind == "cyclic":
        scheme = mcacct.CyclicPoisson(p, b, n, random_phase=warm)
    elif kind == "balls":
        scheme = mcacct.BallsInBins(b, n)
    elif b_max is None:  # b = 1: the warm start goes back cold (next test)
        scheme = mcacct.BMinSep(p, b, n, warm_start=warm and b > 1)
    else:
        scheme = mcacct.TruncatedBMinSep(p, b, n, m, b_max, warm_start=warm and b > 1)
    selection = mcacct.to_jax_privacy(scheme)
    size = m if kind == "bminsep" and b_max is not None else None  # only truncation reads it (#37: refused else)
    assert mcacct.from_jax_privacy(selection, dataset_size=size) == scheme
    assert mcacct.to_jax_privacy(mcacct.from_jax_privacy(selection, dataset_size=size)) == selection


def test_one_min_sep_warm_start_goes_back_cold_with_the_same_law():
    """jax-privacy 2.0's warm start has no history slot to draw for min_sep = 1 (its batch_iterator raises); for
    b = 1 the warm start changes nothing, so the way back is the cold start, and it samples."""
    selection = mcacct.to_jax_privacy(mcacct.BMinSep(0.25, 1, 6, warm_start=True))
    assert selection == bs.BMinSepSampling(0.25, 6, 1, warm_start=False)
    assert len(list(selection.batch_iterator(50, rng=0))) == 6
    warm, cold = mcacct.BMinSep(0.25, 1, 6, True), mcacct.BMinSep(0.25, 1, 6, False)
    assert warm.participation_rate == cold.participation_rate == 0.25


# -- refusals ---------------------------------------------------------------------------------------------------
def test_unsupported_classes_are_refused_by_name_listing_the_supported_ones():
    class MySampling(bs.BMinSepSampling):  # a subclass may sample otherwise: refused too
        pass

    cases = [(bs.FixedBatchSampling(3, 4), "FixedBatchSampling.*not modelled"),
             (bs.UserSelectionStrategy(bs.BallsInBinsSampling(4, 2)), "UserSelectionStrategy.*base_strategy"),
             (MySampling(0.5, 4, 2), "MySampling"), ("poisson", "builtins.str")]
    for selection, what in cases:
        with pytest.raises(ValueError, match=what) as err:
            mcacct.from_jax_privacy(selection)
        assert all(name in str(err.value) for name in supported_batch_selections())


def test_options_mcacct_does_not_model_are_refused_by_name():
    with pytest.raises(ValueError, match=r"batch_selection\.truncated_batch_size must be None.*cyclic Poisson"):
        mcacct.from_jax_privacy(bs.CyclicPoissonSampling(0.5, 8, truncated_batch_size=3, cycle_length=2))
    with pytest.raises(ValueError, match=r"batch_selection\.partition_type must be one of"):
        mcacct.from_jax_privacy(bs.CyclicPoissonSampling(0.5, 8, cycle_length=2, partition_type="SHUFFLE"))

    @dataclasses.dataclass(frozen=True)
    class BMinSepSampling:  # a newer jax-privacy's class: same module and name, one more field
        sampling_prob: float
        iterations: int
        min_sep: int
        warm_start: bool = True
        truncated_batch_size: int | None = None
        shuffle_history: bool = False

    BMinSepSampling.__module__, BMinSepSampling.__qualname__ = "jax_privacy.batch_selection", "BMinSepSampling"
    with pytest.raises(ValueError, match=r"batch_selection\.shuffle_history is not modelled by mcacct"):
        mcacct.from_jax_privacy(BMinSepSampling(0.5, 8, 2))


@pytest.mark.parametrize("selection,message", [
    (bs.BMinSepSampling(0.0, 8, 2), r"batch_selection\.sampling_prob must be in \(0, 1\]; got 0"),
    (bs.BMinSepSampling(0.5, 0, 2), r"batch_selection\.iterations must be an integer in \[1, inf\); got 0"),
    (bs.BMinSepSampling(0.5, 8, 2, truncated_batch_size=0), r"batch_selection\.truncated_batch_size must be an "
                                                            r"integer in \[1, inf\); got 0"),
    (bs.CyclicPoissonSampling(0.5, 8, cycle_length=0), r"batch_selection\.cycle_length must be an integer"),
    (bs.BallsInBinsSampling(8, 0), r"batch_selection\.cycle_length must be an integer"),
])
def test_values_outside_mcacct_ranges_name_the_field(selection, message):
    with pytest.raises(ValueError, match=message):
        mcacct.from_jax_privacy(selection, dataset_size=100)


def test_missing_or_bad_dataset_size_and_c_col_are_named():
    truncated = bs.BMinSepSampling(0.3, 16, 4, truncated_batch_size=10)
    with pytest.raises(ValueError, match="dataset_size is required"):
        mcacct.from_jax_privacy(truncated)
    with pytest.raises(ValueError, match=r"dataset_size must be an integer in \[1, inf\); got 0"):
        mcacct.from_jax_privacy(truncated, dataset_size=0)
    with pytest.raises(ValueError, match="c_col is required"):
        mcacct.problem_from_jax_privacy(bs.BMinSepSampling(0.3, 16, 4), None)
    with pytest.raises(ValueError, match="c_col has 5 entries but min_sep is 4"):
        mcacct.from_jax_privacy(bs.BMinSepSampling(0.3, 16, 4), c_col=(1.0,) * 5)
    with pytest.raises(ValueError, match="c_col has 3 entries but cycle_length is 2"):
        mcacct.problem_from_jax_privacy(bs.CyclicPoissonSampling(0.5, 8, cycle_length=2), (1.0, 0.5, 0.2))
    problem = mcacct.problem_from_jax_privacy(truncated, (0.8, 0.6), dataset_size=100)
    assert problem == mcacct.Problem(mcacct.TruncatedBMinSep(0.3, 4, 16, 100, 10), mcacct.BandedToeplitz((0.8, 0.6)))
    assert mcacct.from_jax_privacy(bs.BallsInBinsSampling(8, 2), c_col=(1.0,) * 5) == mcacct.BallsInBins(2, 8)


def test_the_way_back_refuses_schemes_without_a_counterpart_and_names_the_missing_package(monkeypatch):
    other = mcacct.MultiAttribution(sampling_prob=0.1, min_sep=2, iterations=8, max_examples_per_user=2)
    with pytest.raises(ValueError, match="MultiAttribution"):
        mcacct.to_jax_privacy(other)
    monkeypatch.setitem(sys.modules, "jax_privacy", None)
    with pytest.raises(ImportError, match="pip install jax-privacy"):
        mcacct.to_jax_privacy(mcacct.BallsInBins(2, 8))
    assert mcacct.from_jax_privacy(bs.BallsInBinsSampling(8, 2)) == mcacct.BallsInBins(2, 8)  # needs no import


def test_noise_multiplier_conventions_convert_through_the_column_norm():
    c = (0.6, 0.8)  # ||c|| = 1: the two conventions agree
    assert noise_multiplier_to_jax_privacy(2.5, c) == pytest.approx(2.5, rel=1e-15)
    assert noise_multiplier_to_jax_privacy(2.5, (3.0, 4.0)) == pytest.approx(0.5, rel=1e-15)
    assert noise_multiplier_from_jax_privacy(0.5, (3.0, 4.0)) == pytest.approx(2.5, rel=1e-15)
    with pytest.raises(ValueError, match=r"sigma must be in \(0, inf\); got 0"):
        noise_multiplier_to_jax_privacy(0.0, c)


# -- the sampling law -------------------------------------------------------------------------------------------
def _cold_start_rates(p: float, b: int, n: int) -> np.ndarray:
    """Exact ``Pr[x_i = 1]`` from the all-available start: available iff no participation in the previous
    ``b - 1`` iterations (disjoint events), ``u_i = p (1 - sum_{j=i-b+1}^{i-1} u_j)``."""
    u = np.zeros(n)
    for i in range(n):
        u[i] = p * (1.0 - u[max(0, i - b + 1):i].sum())
    return u


@pytest.mark.parametrize("scheme", [mcacct.BMinSep(0.2, 3, 24), mcacct.BMinSep(0.2, 3, 24, warm_start=False),
                                    mcacct.CyclicPoisson(0.4, 3, 24, random_phase=False),
                                    mcacct.CyclicPoisson(0.4, 3, 24, random_phase=True), mcacct.BallsInBins(3, 24)],
                         ids=repr)
def test_jax_privacy_batches_have_mcacct_participation_rate(scheme):
    """Mean participation rate of jax-privacy's iterator (``reps`` runs on ``M`` examples) against mcacct's rate.
    Tolerance: examples are independent (or, for the equal split, drawn binomially per part), and one example
    takes part at most ``K = ceil(n/b)`` times, so the variance of its count ``N`` is at most
    ``E[N^2] <= K E[N] = K n r``: the mean rate has standard deviation at most ``sqrt(K r / (M n reps))``."""
    m, reps = 600, 8
    selection = mcacct.to_jax_privacy(scheme)
    n, b = scheme.iterations, getattr(scheme, "min_sep", None) or scheme.cycle_length
    counts = [len(batch) for seed in range(reps) for batch in selection.batch_iterator(m, rng=seed)]
    rate = float(np.sum(counts)) / (m * n * reps)
    want = scheme.participation_rate
    if isinstance(scheme, mcacct.BMinSep) and not scheme.warm_start:
        want = float(_cold_start_rates(scheme.sampling_prob, b, n).mean())
    tol = 5.0 * math.sqrt(-(-n // b) * want / (m * n * reps))
    assert abs(rate - want) <= tol, (rate, want, tol)


def test_truncated_batches_have_mcacct_truncated_size():
    """Warm-started b-min-sep is stationary: each example independently takes part in iteration ``i`` with
    probability ``p0``, so the pre-truncation count is Binomial(M, p0) and the truncated batch has mean
    ``E[min(Binomial(M, p0), B_max)]``; its per-iteration standard deviation is at most ``sqrt(M p0 (1-p0))``."""
    scheme = mcacct.TruncatedBMinSep(0.2, 3, 24, dataset_size=200, max_batch_size=24)
    m, b_max, p0, reps = scheme.dataset_size, scheme.max_batch_size, scheme.participation_rate, 200
    selection = mcacct.to_jax_privacy(scheme)
    sizes = np.array([[len(x) for x in selection.batch_iterator(m, rng=seed)] for seed in range(reps)])
    k = np.arange(m + 1)
    log_pmf = np.array([math.lgamma(m + 1) - math.lgamma(j + 1) - math.lgamma(m - j + 1) for j in k]) + (
        k * math.log(p0) + (m - k) * math.log1p(-p0))
    want = float(np.sum(np.minimum(k, b_max) * np.exp(log_pmf)))
    tol = 5.0 * math.sqrt(m * p0 * (1 - p0) / reps)
    assert sizes.max() == b_max and want < m * p0 - 2 * tol  # truncation bites, and the test can tell
    assert abs(sizes.mean() - want) <= tol, (sizes.mean(), want, tol)


# -- one small training loop --------------------------------------------------------------------------------------
def test_training_loop_with_jax_privacy_batches_and_a_sigma_certified_by_mcacct():
    """Certify sigma for cyclic Poisson BandMF (public partition, mcacct's PLD accountant), build jax-privacy's
    BandMF plan with the converted noise multiplier, check that its batch selection is the accounted scheme, that
    its own accountant agrees, that its noise is sigma in the C-domain, and train a linear model with it."""
    from mcacct.pld import CyclicPoissonBandMFSpec, pld_delta
    dp_accounting = pytest.importorskip("dp_accounting")
    execution_plan = pytest.importorskip("jax_privacy.experimental.execution_plan")
    import jax.numpy as jnp

    n, q, c, m, eps, target_delta, sigma = 16, 0.5, (1.0, 0.6), 256, 2.0, 1e-5, 3.7
    scheme = mcacct.CyclicPoisson(q, len(c), n, random_phase=False)
    certified = pld_delta(CyclicPoissonBandMFSpec(n, len(c), q, c, sigma), eps, value_discretization_interval=1e-3,
                          estimate_error=False)
    assert certified.delta <= target_delta

    config = execution_plan.BandMFExecutionPlanConfig(
        iterations=n, strategy=np.asarray(c), epsilon=None, delta=None, sampling_prob=q, dtype=np.float64,
        noise_multiplier=noise_multiplier_to_jax_privacy(sigma, c), noise_seed=0)
    plan = config.plan
    assert mcacct.from_jax_privacy(plan.batch_selection_strategy) == scheme
    assert mcacct.to_jax_privacy(scheme) == plan.batch_selection_strategy
    accountant = dp_accounting.pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    accountant.compose(plan.dp_event)
    assert accountant.get_delta(eps) == pytest.approx(certified.delta, rel=1e-3)

    privatizer = plan.noise_addition_transform  # C^{-1} (stddev z): C w must be N(0, sigma^2) per coordinate
    state, noise = privatizer.init(jnp.zeros(10_000)), []
    for _ in range(n):
        w, state = privatizer.update(jnp.zeros(10_000), state)
        noise.append(np.asarray(w))
    c_domain = mcacct.BandedToeplitz(c).matrix(n) @ np.stack(noise)
    assert np.std(c_domain) == pytest.approx(sigma, rel=0.01)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(m, 4))
    y = x @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.1 * rng.normal(size=m)
    weights, state, parts = np.zeros(4), privatizer.init(jnp.zeros(4)), {}
    start = float(np.mean((x @ weights - y) ** 2))
    for t, idx in enumerate(mcacct.to_jax_privacy(scheme).batch_iterator(m, rng=1)):
        for i in idx:
            parts.setdefault(int(i), set()).add(t % len(c))
        grads = (x[idx] @ weights - y[idx])[:, None] * x[idx]
        grads /= np.maximum(1.0, np.linalg.norm(grads, axis=1, keepdims=True))  # clip norm 1
        noisy, state = privatizer.update(jnp.asarray(grads.sum(0)), state)
        weights = weights - 0.5 * np.asarray(noisy) / (q * m / len(c))
    assert all(len(s) == 1 for s in parts.values())  # every example stays in its part: the accounted sampling
    assert float(np.mean((x @ weights - y) ** 2)) < 0.2 * start
