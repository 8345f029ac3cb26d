"""Issue #41: the default ``C`` of the command line is the Python API's, and schemes with an exact PLD go to the PLD
accountant from :func:`mcacct.get_noise_multiplier` (``method="auto"``), with ``method="monte-carlo"`` to force
Monte Carlo.

Cheap: the routes are read off the calls they make (``pld_calibrate``, ``estimate_cost`` and the default-C fit
replaced by recorders); one real PLD calibration and one real fit check the values end to end.
"""

from __future__ import annotations

import jax
import pytest

import mcacct.noise_multiplier as noise

from mcacct import pld
from mcacct.cli import schemes as cli_schemes
from mcacct.cli.commands import build_parser
from mcacct.schemes.flags import DEFAULTS
from mcacct.strategies import default as strategy_default
from mcacct.noise_multiplier import default_strategy, get_noise_multiplier
from mcacct.schemes.cyclic_poisson import CyclicPoisson
from mcacct.strategies.banded import BandedToeplitz

EPS, DELTA = 2.0, 1e-5


@pytest.fixture
def fits(monkeypatch):
    """Replace the default-C fit by a recorder of its (iterations, bands): ``c = (1, ..., 1) / sqrt(bands)``."""
    seen = []

    def fake(iterations, bands):
        seen.append((iterations, bands))
        k = min(bands, iterations)
        return BandedToeplitz((k ** -0.5,) * k)
    monkeypatch.setattr(strategy_default, "default_strategy", fake)
    return seen


@pytest.fixture
def pld_calls(monkeypatch):
    """Replace ``pld.pld_calibrate`` by a recorder of its spec returning 1.5."""
    seen = []
    monkeypatch.setattr(pld, "pld_calibrate", lambda spec, eps, delta, **kw: seen.append(spec) or 1.5)
    return seen


def _strategy(*argv: str) -> BandedToeplitz:
    args = build_parser().parse_args(["delta", "--sigma", "1", "--epsilon", "1", *argv])
    return cli_schemes.scheme_from_args(args)[1]


# -- the default C -------------------------------------------------------------------------------------------
def test_cli_default_c_is_the_api_default_with_the_schemes_separation_as_bands(fits):
    common = ("--iterations", "24", "--batch-size", "8", "--dataset-size", "192")
    _strategy(*common, "--min-sep", "4")
    _strategy(*common, "--min-sep", "3", "--scheme", "truncated")
    _strategy(*common, "--min-sep", "5", "--scheme", "cyclic-poisson")
    _strategy(*common, "--min-sep", "2", "--scheme", "multi-attribution")
    _strategy(*common, "--scheme", "balls-in-bins")  # 192 / 8 = 24 bins
    _strategy("--iterations", "24", "--bins", "6", "--scheme", "balls-in-bins")
    assert fits == [(24, 4), (24, 3), (24, 5), (24, 2), (24, 24), (24, 6)]
    assert _strategy(*common, "--min-sep", "2", "--scheme", "banded-inverse").c_col == (1.0,)  # its own: C = I
    # given --c-col wins; the demo (no sampling flag) spells out its own
    assert _strategy(*common, "--min-sep", "4", "--c-col", "1,0.5").c_col == (1.0, 0.5)
    assert _strategy("--min-sep", "4").c_col == BandedToeplitz(DEFAULTS["c_col"]).c_col
    assert len(fits) == 6


def test_the_default_fit_is_the_mse_optimised_unit_norm_c():
    from mcacct.strategies import strategy_error
    c = default_strategy(24, 3).c_col
    assert len(c) == 3 and abs(sum(v * v for v in c) - 1.0) < 1e-12 and all(v > 0 for v in c)
    assert strategy_error(c, 24) < min(strategy_error((3 ** -0.5,) * 3, 24), strategy_error((1.0,), 24))
    assert default_strategy(2, 3).c_col == default_strategy(2, 2).c_col  # bands capped at n


# -- routing to the PLD accountant ---------------------------------------------------------------------------
def test_min_sep_one_goes_to_the_pld_accountant_as_poisson_dpsgd(pld_calls):
    direct = get_noise_multiplier(EPS, DELTA, 0.02, 96)
    routed = get_noise_multiplier(EPS, DELTA, 0.02, 96, min_sep=1)
    assert routed.method == direct.method == "pld" and routed.verified and routed.num_samples == 0
    assert routed.sigma == direct.sigma == 1.5 and routed.failure_probability == 0.0
    assert routed.strategy.c_col == (1.0,) and routed.scheme.min_sep == 1
    get_noise_multiplier(EPS, DELTA, 0.02, 96, min_sep=1, c_col=[2.0])  # sensitivity c_0
    assert pld_calls == [pld.PoissonGaussianSpec(0.02, 1.0, steps=96),
                         pld.PoissonGaussianSpec(0.02, 1.0, steps=96, sensitivity=1.0),
                         pld.PoissonGaussianSpec(0.02, 1.0, steps=96, sensitivity=2.0)]


def test_public_cyclic_poisson_goes_to_the_pld_accountant_random_phase_does_not():
    from mcacct.engine.problem import Problem
    strategy = BandedToeplitz((0.8, 0.6))
    public = Problem(CyclicPoisson(0.2, 4, 64, random_phase=False), strategy)
    res = get_noise_multiplier(EPS, DELTA, problem=public)
    spec = pld.CyclicPoissonBandMFSpec(iterations=64, min_sep=4, sampling_prob=0.2, c_col=(0.8, 0.6), sigma=1.0)
    assert res.method == "pld" and res.sigma == pld.pld_calibrate(spec, EPS, DELTA)
    assert res.scheme == public.scheme and res.strategy == strategy
    secret = Problem(CyclicPoisson(0.2, 4, 64, random_phase=True), strategy)
    with pytest.raises(ValueError, match="method='pld' needs a scheme with an exact PLD"):
        get_noise_multiplier(EPS, DELTA, problem=secret, method="pld")
    with pytest.raises(ValueError, match="key is required"):  # auto: Monte Carlo
        get_noise_multiplier(EPS, DELTA, problem=secret)


@pytest.mark.parametrize("b, n, bands, exact", [(4, 64, 4, True), (4, 66, 2, True), (4, 66, 3, False),
                                                 (3, 7, 1, True), (5, 4, 5, False)])
def test_cyclic_exact_pld_only_where_class_zero_columns_are_complete(b, n, bands, exact):
    """Class 0's last column starts at b (ceil(n/b) - 1): complete iff it plus the bands fits in n rows."""
    strategy = BandedToeplitz((1.0,) * bands)
    spec = CyclicPoisson(0.3, b, n, random_phase=False).exact_pld(strategy)
    assert (spec is not None) == exact
    if exact:
        assert (spec.iterations, spec.min_sep, spec.c_col) == (n, b, strategy.c_col)
    assert CyclicPoisson(0.3, b, n, random_phase=True).exact_pld(strategy) is None


def test_method_is_checked_and_monte_carlo_options_are_refused_on_the_pld_route():
    with pytest.raises(ValueError, match=r"method must be one of \('auto', 'pld', 'monte-carlo'\)"):
        get_noise_multiplier(EPS, DELTA, 0.02, 96, method="mc")
    for kw, name in ((dict(num_samples=1000), "num_samples"), (dict(chunk_size=512), "chunk_size"),
                     (dict(dry_run=True), "dry_run")):
        with pytest.raises(ValueError, match=rf"{name}.*method='monte-carlo'"):
            get_noise_multiplier(EPS, DELTA, 0.02, 96, min_sep=1, **kw)
    with pytest.raises(ValueError, match="method='pld' needs a scheme with an exact PLD"):
        get_noise_multiplier(EPS, DELTA, 0.02, 96, min_sep=4, c_col=[1.0], method="pld")


def test_monte_carlo_can_be_forced_for_poisson_dpsgd(monkeypatch, pld_calls):
    probed = []
    monkeypatch.setattr(noise, "estimate_cost", lambda problem, *a, **kw: probed.append(problem) or "cost")
    for kw in ({}, {"min_sep": 1}):
        assert get_noise_multiplier(EPS, DELTA, 0.02, 16, method="monte-carlo", key=jax.random.key(0),
                                    dry_run=True, **kw) == "cost"
    assert [(p.scheme.min_sep, p.scheme.sampling_prob, p.strategy.c_col) for p in probed] == [(1, 0.02, (1.0,))] * 2
    assert pld_calls == []
    with pytest.raises(ValueError, match="key is required"):
        get_noise_multiplier(EPS, DELTA, 0.02, 16, method="monte-carlo")
