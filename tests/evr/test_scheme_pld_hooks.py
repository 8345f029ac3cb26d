"""EVR reads a scheme's PLD through the scheme's own methods: ``exact_pld(strategy)`` (the Monte-Carlo-free top
candidate) and ``pld_baselines(strategy, epsilon, delta)`` (the baselines ``mcacct calibrate`` reports); only
b-min-sep has them (the PLD accountant itself is tested in tests/pld/)."""

from __future__ import annotations

import ast
import pathlib

import pytest

import mcacct
from mcacct import pld
from mcacct.engine.problem import Problem
from mcacct.evr import budget as evr_budget
from mcacct.evr import calibrate as evr_calibrate
from mcacct.strategies.banded import BandedToeplitz

ST = BandedToeplitz((1.0, 0.5))
OTHERS = [mcacct.TruncatedBMinSep(0.2, 2, 8, 40, 8), mcacct.MultiAttribution(0.2, 2, 8),
          mcacct.CyclicPoisson(0.5, 2, 8), mcacct.BallsInBins(2, 8), mcacct.BandedInverse(0.2, 2, 8)]


def _record_pld_calibrate(monkeypatch, modules) -> list:
    """Replace ``pld_calibrate`` wherever it is looked up (calls recorded; returns 1, 2, ...)."""
    calls = []

    def fake(spec, epsilon, delta):
        calls.append((spec, epsilon, delta))
        return float(len(calls))

    for mod in modules:
        if hasattr(mod, "pld_calibrate"):
            monkeypatch.setattr(mod, "pld_calibrate", fake)
    return calls


def test_bminsep_baselines_are_the_pld_sigmas_at_equal_expected_batch_size(monkeypatch):
    """Poisson DP-SGD at q = p0 and cyclic-Poisson BandMF at q = b p0, from the PLD accountant (calls recorded)."""
    from mcacct.pld import accountant
    from mcacct.schemes import bminsep
    calls = _record_pld_calibrate(monkeypatch, (pld, accountant, bminsep))
    pb = Problem(mcacct.BMinSep(0.2, 2, 8), ST)
    base = pb.scheme.pld_baselines(pb.strategy, 1.0, 0.1)
    assert base["poisson_dpsgd_sigma"] == 1.0 and base["cyclic_poisson_bandmf_sigma"] == 2.0 and "note" in base
    p0 = pb.scheme.participation_rate
    assert calls[0] == (pld.PoissonGaussianSpec(p0, 1.0, steps=8), 1.0, 0.1)
    assert calls[1] == (pld.CyclicPoissonBandMFSpec(8, 2, 2 * p0, (1.0, 0.5), 1.0), 1.0, 0.1)
    calls.clear()
    assert evr_calibrate.baseline_sigmas(pb, 1.0, 0.1) == base  # EVR delegates to the scheme


@pytest.mark.parametrize("scheme", OTHERS, ids=lambda s: type(s).__name__)
def test_other_schemes_have_no_pld_hooks(scheme):
    assert scheme.pld_baselines(ST, 1.0, 0.1) == {}
    assert evr_calibrate.baseline_sigmas(Problem(scheme, ST), 1.0, 0.1) == {}
    assert scheme.exact_pld(ST) is None


def test_the_top_candidate_uses_the_exact_pld_where_there_is_one(monkeypatch):
    one = BandedToeplitz((0.8,))
    poisson = mcacct.BMinSep(0.05, 1, 16)
    spec = poisson.exact_pld(one)
    assert spec == pld.PoissonGaussianSpec(sampling_prob=0.05, sigma=1.0, steps=16, sensitivity=0.8)
    assert mcacct.BMinSep(0.05, 2, 16).exact_pld(one) is None
    calls = _record_pld_calibrate(monkeypatch, (evr_budget,))  # the accountant answers 1.0 (top_sigma's module)
    sigma, certifier = evr_calibrate.top_sigma(Problem(poisson, one), 1.0, 1e-3)
    assert calls == [(spec, 1.0, 1e-3)] and certifier == "pld-poisson-subsampled-gaussian" and sigma == 1.0
    sigma2, certifier2 = evr_calibrate.top_sigma(Problem(mcacct.BMinSep(0.05, 2, 16), one), 1.0, 1e-3)
    assert certifier2 == "gaussian-worst-case-sensitivity" and len(calls) == 1  # no exact PLD: no call


def test_evr_imports_nothing_from_the_command_line_side():
    root = pathlib.Path(evr_calibrate.__file__).parent
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text())
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        bad = {m for m in mods if m.startswith(("mcacct.cli", "mcacct.report", "mcacct.jobs", "mcacct.registry"))}
        assert not bad, (path.name, bad)
