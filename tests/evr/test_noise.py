"""mcacct.get_noise_multiplier: the one-call calibration (PLD for Poisson DP-SGD, Monte Carlo for b-min-sep),
its dry run and cost statement, and its refusals."""

import jax
import pytest

import mcacct
from mcacct.statistics import confidence as bounds
from mcacct.evr.cost import CostEstimate
from mcacct.noise_multiplier import default_strategy
from mcacct.strategies import optimize_banded_toeplitz

# a tiny b-min-sep problem: the Monte Carlo calibration runs in seconds
TINY = dict(sampling_prob=0.2, steps=16, min_sep=2, c_col=(0.6, 0.4))
FAST = dict(chunk_size=512, sigmas=(0.9, 1.2, 1.6, 2.2))  # an explicit ladder: no pilot


def test_poisson_dp_sgd_is_the_pld_calibration():
    h = dict(value_discretization_interval=2e-3)
    r = mcacct.get_noise_multiplier(1.0, 1e-3, sampling_prob=0.2, steps=20, **h)
    spec = mcacct.pld.PoissonGaussianSpec(sampling_prob=0.2, sigma=1.0, steps=20)
    assert r.method == "pld" and r.failure_probability == 0.0 and r.num_samples == 0
    assert r.sigma == mcacct.pld.pld_calibrate(spec, 1.0, 1e-3, **h)
    assert r.delta <= r.target_delta == 1e-3
    # the certificate holds: delta at the released sigma is within the target
    assert mcacct.pld.pld_delta(spec.__class__(0.2, r.sigma, 20), 1.0, estimate_error=False, **h).delta <= 1e-3


def test_monte_carlo_equals_calibrate_with_the_same_key(capsys):
    key = jax.random.key(3)
    r = mcacct.get_noise_multiplier(1.0, 5e-2, key=key, **FAST, **TINY)
    scheme = mcacct.BMinSep(0.2, 2, 16)
    ref = mcacct.calibrate(mcacct.Problem(scheme, mcacct.BandedToeplitz((0.6, 0.4))), 1.0, 5e-2, key, **FAST)
    assert r.method == "monte-carlo" and r.sigma == ref.sigma and r.delta == ref.overall_delta <= 5e-2
    assert r.verified and r.sigma in FAST["sigmas"]
    d, q = bounds.overall_delta_terms(ref.num_samples, ref.base_delta)
    assert r.failure_probability == q and 0 < q < 5e-2
    assert isinstance(r.sigma, float) and r.calibration is not None and r.to_dict()["method"] == "monte-carlo"
    top = r.calibration.verdicts[0]  # the typed view of the candidates, top down
    assert top.sigma == max(FAST["sigmas"]) and top.passed and set(top.samples) == {"remove", "add"}
    assert [v.sigma for v in r.calibration.verdicts] == [c["sigma"] for c in r.calibration.candidates]
    err = capsys.readouterr().err
    assert "get_noise_multiplier: Monte Carlo calibration" in err and "draws/s" in err  # the cost came first
    assert err.index("get_noise_multiplier") < err.index("verify")


def test_dry_run_states_the_cost_and_runs_nothing_else(capsys):
    c = mcacct.get_noise_multiplier(1.0, 5e-2, key=jax.random.key(0), dry_run=True, chunk_size=512, **TINY)
    assert isinstance(c, CostEstimate) and c.candidates_at_most == len(mcacct.evr.calibrate.ladder_exponents(4, 3, 12))
    s, base = bounds.sample_budget(5e-2 * 0.99)
    assert (c.num_samples, c.base_delta) == (s, base)
    assert c.verification_samples == -(-s // 512) * 512 and c.pilot_samples > 0
    assert c.total_seconds >= c.verification_seconds > 0 and c.draws_per_second > 0
    assert "verify" not in capsys.readouterr().err


def test_default_strategy_is_the_mse_optimised_one():
    st = default_strategy(16, 2)
    assert len(st.c_col) == 2 and abs(sum(v * v for v in st.c_col) - 1) < 1e-12
    assert st.c_col == optimize_banded_toeplitz(16, 2).c_col


@pytest.mark.parametrize("kwargs, match", [
    (dict(sampling_prob=0.2, steps=16, min_sep=2), "key is required"),
    (dict(sampling_prob=0.2, steps=0, min_sep=2, key=0), "steps must be"),
    (dict(sampling_prob=1.5, steps=16), "sampling_prob must be"),
    (dict(steps=16), "give sampling_prob"),
    (dict(sampling_prob=0.1, steps=10, c_col=(1.0,)), "c_col needs a b-min-sep"),
    (dict(sampling_prob=0.1, steps=10, dry_run=True), "dry_run applies"),
    (dict(sampling_prob=0.1, steps=10, min_sep=2, max_batch_size=5, key=0), "dataset_size is required"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    if kwargs.get("key") == 0:
        kwargs["key"] = jax.random.key(0)
    with pytest.raises(ValueError, match=match):
        mcacct.get_noise_multiplier(1.0, 1e-3, **kwargs)


def test_problem_excludes_scheme_arguments():
    prob = mcacct.Problem(mcacct.BMinSep(0.2, 2, 16), mcacct.BandedToeplitz((0.6, 0.4)))
    with pytest.raises(ValueError, match="problem fixes the scheme"):
        mcacct.get_noise_multiplier(1.0, 1e-3, steps=16, problem=prob, key=jax.random.key(0))


def test_jax_privacy_batch_selection_is_the_same_calibration():
    bs = pytest.importorskip("jax_privacy.batch_selection")
    sel = bs.BMinSepSampling(sampling_prob=0.2, iterations=16, min_sep=2)
    key = jax.random.key(5)
    r = mcacct.get_noise_multiplier(1.0, 5e-2, batch_selection=sel, c_col=(0.6, 0.4), key=key, progress=False,
                                    **FAST)
    ref = mcacct.get_noise_multiplier(1.0, 5e-2, key=key, progress=False, **FAST, **TINY)
    assert r.scheme == ref.scheme == mcacct.BMinSep(0.2, 2, 16) and r.sigma == ref.sigma
    with pytest.raises(ValueError, match="min_sep comes from batch_selection"):
        mcacct.get_noise_multiplier(1.0, 5e-2, batch_selection=sel, min_sep=2, key=key)
