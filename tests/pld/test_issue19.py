"""Issue 19 (outside audit), PLD part: overlapping cyclic-Poisson columns, the epsilon solve at large losses,
the cap on the composition grid, and the ``mcacct pld`` command line (flags that do not apply, required
flags, one range wording, events files)."""

from __future__ import annotations

import json
import math

import mpmath
import numpy as np
import pytest

from mcacct import pld
from helpers import run_cli
import mcacct.composition as composition
from mcacct.pld import discrete, group

ENV_BUDGET = "MCACCT_PLD_MEMORY_BUDGET"  # documented in docs/pld.md


# ---------------------------------------------------------------------------
# 1. cyclic Poisson: len(c_col) <= min_sep
# ---------------------------------------------------------------------------
def test_cyclic_poisson_refuses_overlapping_columns():
    # p = 1, c_col = (1, 1, 1), b = 2: the shifted columns overlap (sensitivity 12.53, not sqrt(96))
    with pytest.raises(ValueError, match=r"c_col has 3 entries but min_sep is 2.*1 to 2"):
        pld.CyclicPoissonBandMFSpec(iterations=64, min_sep=2, sampling_prob=1.0, c_col=(1.0, 1.0, 1.0), sigma=10.0)
    ok = pld.CyclicPoissonBandMFSpec(iterations=64, min_sep=3, sampling_prob=1.0, c_col=(1.0, 1.0, 1.0), sigma=10.0)
    assert ok.compositions == 22
    with pytest.raises(ValueError, match=r"event 0 \(cyclic_poisson_bandmf\): c_col has 3 entries but min_sep is 2"):
        pld.event_from_dict({"mechanism": "cyclic_poisson_bandmf", "iterations": 64, "min_sep": 2,
                             "sampling_prob": 1.0, "c_col": [1, 1, 1], "sigma": 10.0, "count": 1}, 0)


# ---------------------------------------------------------------------------
# 5. epsilon(delta) at losses beyond ~650 (log-space solve)
# ---------------------------------------------------------------------------
mpmath.mp.dps = 50


def _gauss_delta(mu: float, eps: float) -> mpmath.mpf:
    """Exact delta(eps) of the Gaussian mechanism with mu = sqrt(T) / sigma."""
    mu, eps = mpmath.mpf(mu), mpmath.mpf(eps)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


def _gauss_epsilon(mu: float, delta: float) -> float:
    lo, hi = mpmath.mpf(0), mpmath.mpf(1)
    while _gauss_delta(mu, hi) > delta:
        hi *= 2
    for _ in range(90):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _gauss_delta(mu, mid) > delta else (lo, mid)
    return float(hi)


@pytest.mark.parametrize("delta, tol", [(1e-12, 1e-3), (1e-10, 1e-3)])  # measured: +1.0e-4 at h = 1e-3
def test_epsilon_at_large_losses_matches_closed_form(delta, tol):
    spec = pld.GaussianSpec(1.0, steps=1000)
    exact = _gauss_epsilon(math.sqrt(1000), delta)
    assert exact > 650  # the regime where exp(l) overflows / exp(-l) underflows
    r = pld.pld_epsilon(spec, delta, estimate_error=False, value_discretization_interval=1e-3)
    assert exact <= r.epsilon <= exact + tol, (r.epsilon, exact)
    assert math.isfinite(r.roundoff_bound) and 0 <= r.roundoff_bound < 1e-3 * delta
    # the reported epsilon is certified: the delta query there stays at or below the target
    d = pld.pld_delta(spec, r.epsilon, estimate_error=False, value_discretization_interval=1e-3)
    assert float(_gauss_delta(math.sqrt(1000), r.epsilon)) <= d.delta <= delta * (1 + 1e-6)


def test_query_epsilon_far_tail_is_finite_and_an_upper_bound():
    # a discrete PLD whose mass sits at losses 700..760 (exp(l) overflows there): the certified query is finite
    # and solves the direct sum delta(eps) = sum w (1 - e^(eps - l))_+ + inf from above
    from mcacct.pld.kernels import query_one_jit  # query_one compiled as one program (eagerly: ~200 compiles)
    h = 1e-2
    offset = 70_000
    losses = (offset + np.arange(6000)) * h
    w = np.exp(-0.5 * ((losses - 730.0) / 5.0) ** 2)
    w = 1e-6 * w / w.sum()
    p = discrete.DirectionPLD(h, offset, w, 0.0, True)
    for target in (1e-8, 1e-10, 1e-12):
        eps = p.epsilon(target)
        assert 700 < eps < 760
        assert p.delta(eps)[0] <= target * (1 + 1e-12)
        assert p.delta(eps - 1e-3)[0] > target  # and it is tight (within a grid step)
    _, e = query_one_jit(np.asarray(w), 0.0, offset, h, 0.0, 1e-10)
    assert math.isfinite(float(e))


# ---------------------------------------------------------------------------
# 6. the composition grid is capped before allocation
# ---------------------------------------------------------------------------
def test_composition_grid_cap_refuses_before_allocating():
    # asked for ~8 GB and died with RESOURCE_EXHAUSTED
    with pytest.raises(ValueError, match=r"grid points.*GiB.*value_discretization_interval.*steps.*sigma.*MCACCT_PLD_MEMORY_BUDGET"):
        pld.pld_epsilon(pld.GaussianSpec(0.3, steps=10_000), 1e-5, estimate_error=False)


def test_every_composition_path_is_capped(monkeypatch):
    monkeypatch.setenv(ENV_BUDGET, "65536")  # 64 KiB: below the smallest window (1024 points)
    spec = pld.PoissonGaussianSpec(0.5, 1.0, steps=50)
    calls = [
        lambda: pld.pld_epsilon(spec, 1e-5, estimate_error=False),
        lambda: pld.pld_delta(spec, 1.0, estimate_error=False),
        lambda: pld.epsilons_for_sigmas(spec, [1.0, 2.0], 1e-5),
        lambda: pld.pld_calibrate(spec, 2.0, 1e-5),
        lambda: pld.events_epsilon([pld.Event(spec, 1)], 1e-5, estimate_error=False),
        lambda: discrete.mechanism_pld(spec, 1e-4),
        lambda: composition.certified_composition(1.0, 1e-6, [spec], delta=1e-5),
        lambda: group.group_privacy_conversion_epsilon(spec, 2, 1e-5),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=rf"grid points.*{ENV_BUDGET}"):
            call()
    monkeypatch.setenv(ENV_BUDGET, "lots")
    with pytest.raises(ValueError, match=rf"{ENV_BUDGET} must be a number of bytes"):
        pld.pld_epsilon(spec, 1e-5, estimate_error=False)


def test_convolution_of_events_is_capped(monkeypatch):
    monkeypatch.setenv(ENV_BUDGET, "65536")
    a = np.full(3000, 1 / 3000)
    with pytest.raises(ValueError, match="grid points"):
        discrete.convolve_with_bound(a, a)


# ---------------------------------------------------------------------------
# 9/10. events need a count; numbers in messages are plain
# ---------------------------------------------------------------------------
def test_events_require_count_and_messages_have_plain_numbers():
    with pytest.raises(ValueError, match=r"event 2 \(gaussian\): count is required"):
        pld.event_from_dict({"mechanism": "gaussian", "sigma": 1.0}, 2)
    for call in (lambda: pld.PoissonGaussianSpec(np.float64("nan"), 1.0),
                 lambda: pld.GaussianSpec(np.float64(-1.0)),
                 lambda: pld.pld_epsilon(pld.GaussianSpec(1.0), np.float64(2.0)),
                 lambda: pld.pld_delta(pld.GaussianSpec(1.0), np.float64("nan")),
                 lambda: pld.Event(pld.GaussianSpec(1.0), np.int64(-2))):
        with pytest.raises(ValueError) as exc:
            call()
        assert "np." not in str(exc.value) and "numpy" not in str(exc.value), str(exc.value)


# ---------------------------------------------------------------------------
# 8-10. the command line
# ---------------------------------------------------------------------------


def _refused(argv, capsys, *needles):
    rc, out, err = run_cli(argv, capsys)
    assert rc == 2, (rc, out, err)
    lines = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(lines) == 1, err
    assert "Traceback" not in err and out == ""
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


@pytest.fixture
def events_file(tmp_path):
    path = tmp_path / "events.json"
    path.write_text(json.dumps([{"mechanism": "gaussian", "sigma": 3.0, "count": 2}]))
    return str(path)


GAUSS = ["--scheme", "gaussian", "--sigma", "1", "--steps", "3"]
POIS = ["--sampling-prob", "0.1", "--sigma", "1", "--steps", "3"]
CYC = ["--scheme", "cyclic-poisson", "--iterations", "10", "--min-sep", "2", "--sampling-prob", "0.1",
       "--sigma", "1"]


@pytest.mark.parametrize("argv, needles", [
    (["pld", "epsilon", "--events", "EVENTS", "--sampling-prob", ".5", "--sigma", "3", "--delta", "1e-5"],
     ["--sampling-prob does not apply to pld epsilon --events", "its flags:", "--delta"]),
    (["pld", "epsilon", *GAUSS, "--sampling-prob", ".5", "--delta", "1e-5"],
     ["--sampling-prob does not apply to pld epsilon --scheme gaussian", "--steps", "--group-size"]),
    (["pld", "epsilon", *GAUSS, "--delta", "1e-5", "--epsilon", "3"],
     ["--epsilon does not apply to pld epsilon", "--delta"]),
    (["pld", "epsilon", "--scheme", "poisson", *POIS, "--iterations", "5", "--min-sep", "3", "--delta", "1e-5"],
     ["--iterations does not apply to pld epsilon --scheme poisson", "--sampling-prob"]),
    (["pld", "delta", *GAUSS, "--delta", "1e-5", "--epsilon", "1"], ["--delta does not apply to pld delta"]),
    (["pld", "epsilon", *CYC, "--c-col", "1", "--steps", "4", "--delta", "1e-5"],
     ["--steps does not apply to pld epsilon --scheme cyclic-poisson", "--iterations"]),
    (["pld", "epsilon", *CYC, "--c-col", "1", "--group-size", "1", "--delta", "1e-5"],
     ["--group-size does not apply to pld epsilon --scheme cyclic-poisson"]),
    (["pld", "epsilon", *POIS, "--batch-size", "10", "--delta", "1e-5"],
     ["--batch-size does not apply to pld epsilon --scheme poisson", "--fixed-batch"]),
    (["pld", "epsilon", "--events", "EVENTS", "--scheme", "gaussian", "--delta", "1e-5"],
     ["--scheme does not apply to pld epsilon --events"]),
    (["pld", "calibrate", "--scheme", "gaussian", "--steps", "3", "--epsilon", "1", "--delta", "1e-5",
      "--sigma", "2"], ["--sigma does not apply to pld calibrate"]),
    (["pld", "calibrate", "--scheme", "gaussian", "--steps", "3", "--epsilon", "1", "--delta", "1e-5",
      "--no-error-estimate"], ["--no-error-estimate does not apply to pld calibrate"]),
    (["pld", "calibrate", "--events", "EVENTS", "--epsilon", "1", "--delta", "1e-5"],
     ["--events does not apply to pld calibrate"]),
    (["pld", "delta", *GAUSS], ["--epsilon is required for pld delta"]),
    (["pld", "epsilon", "--scheme", "gaussian", "--sigma", "1", "--delta", "1e-5"],
     ["--steps is required for pld epsilon --scheme gaussian"]),
    (["pld", "epsilon", "--fixed-batch", "--dataset-size", "100", "--batch-size", "10", "--sampling-prob", "0.1",
      "--sigma", "1", "--steps", "3", "--delta", "1e-5"], ["--batch-size or --sampling-prob", "not both"]),
    (["pld", "epsilon", *POIS, "--delta", "2"], ["--delta must be in (0, 1); got 2"]),
    (["pld", "epsilon", "--sampling-prob", "1.5", "--sigma", "1", "--steps", "3", "--delta", "1e-5"],
     ["--sampling-prob must be in (0, 1]; got 1.5"]),
    (["pld", "epsilon", "--sampling-prob", "nan", "--sigma", "1", "--steps", "3", "--delta", "1e-5"],
     ["--sampling-prob must be", "(0, 1]; got nan"]),
    (["pld", "epsilon", "--sampling-prob", "0.1", "--sigma", "-1", "--steps", "3", "--delta", "1e-5"],
     ["--sigma must be in (0, inf); got -1"]),
    (["pld", "epsilon", "--sampling-prob", "0.1", "--sigma", "1", "--steps", "0", "--delta", "1e-5"],
     ["--steps must be an integer in [1, inf); got 0"]),
    (["pld", "delta", *GAUSS, "--epsilon", "inf"], ["--epsilon must be", "[0, inf); got inf"]),
    (["pld", "epsilon", *GAUSS, "--delta", "1e-5", "--value-discretization-interval", "0.5"],
     ["--value-discretization-interval must be in (0, 0.1]; got 0.5"]),
    (["pld", "epsilon", *POIS, "--group-size", "0", "--delta", "1e-5"],
     ["--group-size must be an integer in [1, inf); got 0"]),
    (["pld", "epsilon", "--fixed-batch", "--dataset-size", "10", "--batch-size", "11", "--sigma", "1", "--steps",
      "3", "--delta", "1e-5"], ["--batch-size must be an integer in [1, 10]; got 11"]),
    (["pld", "epsilon", *CYC, "--c-col", "1,1,1", "--delta", "1e-5"],
     ["--c-col has 3 entries", "--min-sep", "1 to 2"]),
    (["pld", "epsilon", *CYC, "--c-col", "1,nan", "--delta", "1e-5"], ["--c-col", "finite"]),
    (["pld", "epsilon", *CYC, "--c-col", "0,0", "--delta", "1e-5"], ["--c-col", "norm > 0"]),
    (["pld", "epsilon", "--scheme", "gaussian", "--sigma", "1e-300", "--steps", "3", "--delta", "1e-5"],
     ["sigma=1e-300 is too small"]),
    (["pld", "epsilon", "--scheme", "gaussian", "--sigma", "1", "--steps", "1000000000000", "--delta", "1e-5"],
     ["grid points", "GiB"]),
])
def test_cli_refuses_with_one_error_line(argv, needles, events_file, capsys):
    argv = [events_file if a == "EVENTS" else a for a in argv]
    _refused(argv, capsys, *needles)


def test_cli_cyclic_poisson_audit_case(capsys):
    _refused(["pld", "epsilon", "--scheme", "cyclic-poisson", "--iterations", "64", "--min-sep", "2", "--c-col",
              "1,1,1", "--sampling-prob", "1", "--sigma", "10", "--delta", "1e-5"], capsys,
             "--c-col has 3 entries", "--min-sep 2")


def test_cli_events_files(tmp_path, capsys):
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\x89PNG\x00\xff\xfe")
    line = _refused(["pld", "epsilon", "--events", str(binary), "--delta", "1e-5"], capsys,
                    f"events file {str(binary)!r} is not valid JSON/UTF-8")
    assert "codec" not in line or str(binary) in line
    nocount = tmp_path / "nocount.json"
    nocount.write_text(json.dumps([{"mechanism": "gaussian", "sigma": 3.0, "count": 1},
                                   {"mechanism": "gaussian", "sigma": 1.0}]))
    _refused(["pld", "epsilon", "--events", str(nocount), "--delta", "1e-5"], capsys,
             "event 1 (gaussian): count is required")


def test_cli_help_offers_only_what_applies(capsys):
    rc, out, _ = run_cli(["pld", "calibrate", "--help"], capsys)
    assert rc == 0
    for flag in ("--events", "--sigma", "--no-error-estimate"):
        assert flag not in out
    for flag in ("--epsilon", "--delta", "--scheme", "--steps"):
        assert flag in out
    rc, out, _ = run_cli(["pld", "epsilon", "--help"], capsys)
    assert rc == 0 and "--delta" in out and "--events" in out and "--epsilon" not in out
    rc, out, _ = run_cli(["pld", "delta", "--help"], capsys)
    assert rc == 0 and "--epsilon" in out and "--delta" not in out


def test_cli_fixed_batch_from_sampling_prob():
    # --fixed-batch with --sampling-prob instead of --batch-size: B = round(q n) (the events CLI runs in
    # tests/pld/test_events.py::test_cli_events)
    import argparse
    from mcacct.cli import pld as pld_cli
    parser = argparse.ArgumentParser(prog="mcacct")
    pld_cli.add_pld_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["pld", "epsilon", "--fixed-batch", "--dataset-size", "1000", "--sampling-prob", "0.01",
                              "--sigma", "2", "--steps", "3", "--delta", "1e-5"])
    assert pld_cli.check_args(args) == "poisson --fixed-batch"
    assert pld_cli.build_spec(args, 2.0) == pld.GroupFixedBatchSpec(1, 10, 1000, 2.0, 3)


def test_cli_malformed_numbers_read_like_ranges(capsys):
    _refused(["pld", "epsilon", "--steps", "2.5", "--sigma", "1", "--sampling-prob", "0.1", "--delta", "1e-5"],
             capsys, "--steps must be an integer in [1, inf); got 2.5")
    _refused(["pld", "epsilon", "--steps", "3", "--sigma", "one", "--sampling-prob", "0.1", "--delta", "1e-5"],
             capsys, "--sigma must be a finite real number in (0, inf); got 'one'")


def test_decayed_suffix_sums_within_their_rounding_bound():
    # T(k) = sum_{j>=k} w_j r^(j-k) by the associative scan, against long double; masses spanning 1e-300..1
    import jax
    import jax.numpy as jnp
    from mcacct.pld.kernels.query import _decayed_suffix
    rng = np.random.default_rng(1)
    n, h = 4096, 1e-2
    w = 10.0 ** rng.uniform(-300, 0, n)
    w[rng.random(n) < 0.3] = 0.0
    r = math.exp(-h)
    # jitted, as the query runs it (eagerly, the scan's operations compiled one by one: ~150 programs)
    got = np.asarray(jax.jit(_decayed_suffix)(jnp.asarray(w), r)).astype(np.longdouble)
    want = np.zeros(n + 1, dtype=np.longdouble)
    for k in range(n - 1, -1, -1):
        want[k] = np.longdouble(w[k]) + np.longdouble(r) * want[k + 1]
    want = want[:n]
    rel = np.abs(got - want) / np.maximum(want, np.longdouble(1e-300))
    assert float(rel.max()) <= 3 * n * 2.0 ** -53, float(rel.max())
