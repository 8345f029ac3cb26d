"""Issue #37: inputs that crashed, hung or misreported, each a cheap test.

(0) a bound >= 1 certifies nothing (``certified: false`` with a note, in ``delta``, ``epsilon`` and ``merge``);
(1) ``compare``'s text table and its refusal of a row option whose row is not asked for; (2) sigma, epsilon and
iterations out of float64's / int32's range; (3) balls-in-bins with too many bins; (4) ``mse-study`` output paths;
(5) ``--coordinator-address`` and ``--cpu-devices``; (6) the API's type checks; (7) messages: a non-finite loss,
an empty ladder in ``--plan-only``, and strict JSON (no ``Infinity``/``NaN``) from every ``--json``.
"""

from __future__ import annotations

import json
import math
import os

import jax
import numpy as np
import pytest

import mcacct
from mcacct.cli import main
from mcacct.engine.estimate import Estimate
from mcacct.statistics.accumulators import DirectionStats, nonfinite_loss_message

# small problems that run the whole engine (no PLD top): SMALL for refusals; BIB, whose program compiles fastest
# (~3 s: the first run of a test module pays it, later ones share it), for the runs
SMALL = ["--iterations", "8", "--min-sep", "2", "--sampling-prob", "0.2", "--c-col", "1"]
BIB = ["--scheme", "balls-in-bins", "--bins", "2", "--iterations", "4", "--c-col", "1"]
MC = ["--samples", "256", "--chunk-size", "256", "--quiet"]


def _refuse_constants(name):
    raise ValueError(f"not valid JSON: {name}")


def strict_json(text: str):
    """``json.loads`` refusing ``Infinity``, ``-Infinity`` and ``NaN`` (not JSON, RFC 8259)."""
    return json.loads(text, parse_constant=_refuse_constants)


def _run(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse refusals
        rc = e.code
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _refused(argv, capsys, *needles):
    rc, out, err = _run(argv, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert "Traceback" not in err and lines and lines[-1].startswith("error: "), err
    for n in needles:
        assert n in lines[-1], (n, lines[-1])
    return lines[-1]


def _stats(mean: float, count: int = 1000, eps=(1.0,)) -> DirectionStats:
    """Statistics whose contributions at every epsilon have the given mean (no engine run)."""
    s = DirectionStats(tuple(eps))
    s.count = count
    s.sums = [int(mean * count * 2.0**80)] * len(eps)
    s.hist[0] = count
    return s


# -- (0) a bound >= 1 certifies nothing ------------------------------------------------------------------
def test_estimate_decides_certification_from_its_bounds():
    small = {"remove": _stats(1e-3), "add": _stats(1e-3)}
    assert Estimate(1.0, 0.01, dict(small), systematic=1e-12).certified
    huge = Estimate(1e-100, 0.01, dict(small), systematic=1.3e86)
    assert not huge.certified and "certifies nothing" in huge.notes[0] and "1.3e+86" in huge.notes[0]
    # the statistical bound alone reaches 1 at one of the epsilons
    full = Estimate(0.1, 0.01, {"remove": _stats(1.0, eps=(0.5, 2.0)), "add": _stats(0.0, eps=(0.5, 2.0))},
                    systematic=1e-12)
    assert not full.certified and any("epsilon=0.5" in n for n in full.notes)
    # the caller's reasons (float32, one direction) stay, and come first
    f32 = Estimate(1.0, 0.01, dict(small), systematic=2.0, certified=False, notes=["float32 kernel"])
    assert not f32.certified and f32.notes[0] == "float32 kernel" and len(f32.notes) == 2


def test_delta_with_a_tiny_sigma_is_not_certified(capsys):
    rc, out, _ = _run(["delta", "--sigma", "1e-100", "--epsilon", "1", *BIB, *MC, "--json"], capsys)
    assert rc == 0
    got = strict_json(out)
    assert got["systematic_delta"] > 1 and got["certified"] is False
    assert "certifies nothing" in got["note"] and got["notes"]
    rc, out, _ = _run(["delta", "--sigma", "1e-100", "--epsilon", "1", *BIB, *MC], capsys)
    assert rc == 0 and "certifies nothing" in out and "certified: no" in out
    # an ordinary sigma stays certified, with no note
    rc, out, _ = _run(["delta", "--sigma", "2", "--epsilon", "1", *BIB, *MC, "--json"], capsys)
    got = strict_json(out)
    assert rc == 0 and got["certified"] is True and got["notes"] == [] and "note" not in got


def test_merge_inherits_the_certification(tmp_path, capsys):
    d = str(tmp_path / "s")
    argv = ["sample", "--out", d, "--sigma", "1e-100", "--epsilon", "1", *BIB, *MC]  # delta's program
    assert _run(argv, capsys)[0] == 0
    rc, out, _ = _run(["merge", d, "--json"], capsys)
    got = strict_json(out)
    assert rc == 0 and got["certified"] is False and "certifies nothing" in got["note"]


# -- (1) compare -----------------------------------------------------------------------------------------
COMPARED = {"epsilon": 2.0, "delta": 1e-3, "iterations": 64, "min_sep": 4, "expected_batch_size": 32.0,
            "dataset_size": 1024, "participation_rate": 1 / 32, "c_col": [0.5] * 4, "c_norm": 1.0, "seed": 0,
            "rows": [{"scheme": "b-min-sep", "params": {}, "sigma": 0.81, "verified": True, "overall_delta": 9e-4,
                      "top_sigma": 1.2, "num_samples": 1000, "note": None, "seconds": 1.0, "sigma_pld": None,
                      "pld_note": "no PLD analysis for this scheme"},
                     {"scheme": "cyclic-poisson", "params": {}, "sigma": 1.2, "verified": False,
                      "overall_delta": 9e-4, "top_sigma": 1.2, "num_samples": 1000,
                      "note": "no ladder candidate passed", "seconds": 1.0, "sigma_pld": 0.9, "pld_note": None}],
            "skipped": [{"scheme": "balls-in-bins", "reason": "not an integer number of bins"}], "seconds": 2.0}


def test_compare_text_output_prints_the_table(monkeypatch, capsys):
    import mcacct.cli.compare as cli_compare
    monkeypatch.setattr(cli_compare, "compare_schemes", lambda *a, **k: json.loads(json.dumps(COMPARED)))
    rc, out, err = _run(["compare", "--quiet"], capsys)
    assert rc == 0 and "Traceback" not in err, err
    lines = out.splitlines()
    assert lines[0].startswith("target (epsilon, delta) = (2, 0.001)")
    assert "b-min-sep" in lines[2] and "0.8100" in lines[2] and "no PLD analysis" in lines[2]
    assert "unverified (Gaussian top)" in lines[3] and "0.9000" in lines[3] and "no ladder candidate" in lines[3]
    assert "skipped" in lines[4]
    rc, out, _ = _run(["compare", "--quiet", "--json"], capsys)
    assert rc == 0 and strict_json(out)["rows"][0]["sigma"] == 0.81


def test_compare_refuses_a_row_option_whose_row_is_not_asked_for(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _refused(["compare", "--schemes", "b-min-sep", "--max-batch-size", "40"], capsys, "--max-batch-size",
             "truncated")
    from mcacct.report.compare import compare_schemes
    with pytest.raises(ValueError, match="max_batch_size applies only to the truncated"):
        compare_schemes(2.0, 1e-3, 64, 4, 32, 1024, (0.5,) * 4, schemes="b-min-sep", max_batch_size=40)
    assert os.listdir(tmp_path) == []


# -- (2) sigma, epsilon, iterations ----------------------------------------------------------------------
@pytest.mark.parametrize("sigma", ["1e-300", "1e300", "1e-101"])
def test_sigma_out_of_range_is_refused(sigma, capsys):
    _refused(["delta", "--sigma", sigma, "--epsilon", "1", *SMALL], capsys, "--sigma must be in [1e-100, 1e+100]")


def test_sigma_out_of_range_in_the_api():
    problem = mcacct.Problem(mcacct.BMinSep(0.2, 2, 8), mcacct.BandedToeplitz((1.0,)))
    from mcacct.engine.systematic import systematic_bound
    for sigma in (1e-300, 1e300, 0.0, math.nan):
        with pytest.raises(ValueError, match="sigma must be"):
            mcacct.estimate(problem, sigma, jax.random.key(0), 100)
        with pytest.raises(ValueError, match="sigma must be"):
            systematic_bound(problem, sigma)
    assert systematic_bound(problem, 1e-100).delta > 1  # the edge itself runs (and is not certified)


def test_huge_epsilon_is_refused_by_calibrate(capsys):
    _refused(["calibrate", "--epsilon", "1e308", "--plan-only"], capsys, "--epsilon must be in [0, 700]")
    from mcacct.statistics.gaussian import _log_ndtr, gaussian_sigma
    with pytest.raises(ValueError, match=r"epsilon must be in \[0, 700\]"):
        gaussian_sigma(1.0, 1e308, 1e-3)
    assert _log_ndtr(-1e200) == -math.inf and math.isfinite(_log_ndtr(-1e100))  # no OverflowError
    assert 0 < gaussian_sigma(1.0, 700.0, 1e-5) < gaussian_sigma(1.0, 2.0, 1e-5)


def test_too_many_iterations_are_refused(capsys):
    _refused(["calibrate", "--plan-only", "--iterations", "1e12"], capsys,
             "--iterations must be an integer in [1, 1048576]")
    with pytest.raises(ValueError, match="iterations must be an integer in"):
        mcacct.Problem(mcacct.BMinSep(0.01, 1, 2**20 + 1))


# -- (3) balls-in-bins -----------------------------------------------------------------------------------
def test_too_many_bins_are_refused_before_any_allocation(capsys):
    _refused(["delta", "--sigma", "1", "--epsilon", "1", "--scheme", "balls-in-bins", "--bins", "1e12",
              "--iterations", "64", "--c-col", "1,0.5"], capsys, "--bins must be an integer in [1, 8192]")
    from mcacct.schemes.balls_in_bins import max_bins
    with pytest.raises(ValueError, match="cycle_length must be an integer in"):
        mcacct.BallsInBins(10**12, 64)
    assert max_bins(64) == 8192 and max_bins(7200) == 131072 and max_bins(2**20) >= 2**20
    mcacct.BallsInBins(8192, 64)  # the limit itself is accepted


# -- (4) mse-study paths ---------------------------------------------------------------------------------
def test_mse_study_refuses_unusable_paths_before_computing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    before = sorted(os.listdir(tmp_path))
    _refused(["mse-study", "--smoke", "--out", "afile"], capsys, "--out", "existing file")
    _refused(["mse-study", "--smoke", "--out", "afile/sub"], capsys, "--out", "is a file")
    _refused(["mse-study", "--smoke", "--out", "o", "--cache", "afile"], capsys, "--cache", "existing file")
    assert sorted(os.listdir(tmp_path)) == before


def test_mse_study_refuses_an_unwritable_directory(tmp_path, capsys):
    import tempfile
    target = "/sys/mcacct-mse-study"
    try:
        with tempfile.TemporaryFile(dir="/sys"):
            pytest.skip("/sys is writable here")
    except OSError:
        pass
    if not os.path.isdir("/sys"):
        pytest.skip("no /sys")
    _refused(["mse-study", "--smoke", "--out", target], capsys, "--out", "cannot be created")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.geteuid() != 0:  # root writes anywhere: only the read-only file system above refuses it
            _refused(["mse-study", "--smoke", "--out", str(ro / "o")], capsys, "--out")
    finally:
        ro.chmod(0o700)


def test_run_study_names_a_file_given_as_cache(tmp_path):
    from mcacct.report.mse_study import SMOKE_GRID, run_study
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(ValueError, match="cache_dir must be a directory"):
        run_study(SMOKE_GRID, str(f), progress=False)


# -- (5) multi-process and CPU devices -------------------------------------------------------------------
@pytest.mark.parametrize("address", ["localhost:abc", "::::", "localhost:0", "localhost:65536", ":1234",
                                     "localhost", "::1:1234"])
def test_bad_coordinator_address_is_refused_before_jax_distributed(address, monkeypatch, capsys):
    def untouched(*a, **k):
        raise AssertionError("jax.distributed.initialize must not be called")
    monkeypatch.setattr(jax.distributed, "initialize", untouched)
    _refused(["delta", "--sigma", "1", "--epsilon", "1", "--coordinator-address", address, "--num-processes", "1",
              "--process-id", "0", *SMALL], capsys, "--coordinator-address must be host:port", "[1, 65535]")


def test_coordinator_address_syntax():
    from mcacct.engine.distributed import check_coordinator_address, initialize_distributed
    for ok in ("localhost:1234", "10.0.0.1:65535", "[::1]:1", "node-3.cluster:8476"):
        assert check_coordinator_address("a", ok) == ok
    with pytest.raises(ValueError, match="coordinator_address must be host:port"):
        initialize_distributed("::::", 1, 0)


def test_cpu_devices_has_an_upper_limit(capsys):
    from mcacct.cli.flags import CPU_DEVICES_MAX
    _refused(["delta", "--sigma", "1", "--epsilon", "1", "--cpu-devices", "100000", *SMALL], capsys,
             f"--cpu-devices must be 'auto' or an integer in [1, {CPU_DEVICES_MAX}]")
    from mcacct.cli.commands import build_parser
    sub = build_parser()._subparsers._group_actions[0].choices["delta"]
    assert f"at most {CPU_DEVICES_MAX}" in " ".join(sub.format_help().split())


# -- (6) the API's argument types ------------------------------------------------------------------------
def test_api_type_errors_name_the_parameter():
    scheme = mcacct.BMinSep(0.2, 2, 8)
    problem = mcacct.Problem(scheme, mcacct.BandedToeplitz((1.0,)))
    key = jax.random.key(0)
    with pytest.raises(TypeError, match="scheme must be a sampling scheme"):
        mcacct.Problem(None)
    with pytest.raises(TypeError, match="problem must be a mcacct.Problem; got BMinSep"):
        mcacct.estimate(problem=scheme, sigma=1.0, key=key, num_samples=100)
    with pytest.raises(TypeError, match="sigma must be a real number"):
        mcacct.estimate(problem, "1", key, 100)
    for directions in ((), ("both",), ("remove", "remove")):
        with pytest.raises(ValueError, match="directions must be a non-empty subset"):
            mcacct.estimate(problem, 1.0, key, 100, directions=directions)
    with pytest.raises(ValueError, match="stats must hold"):
        Estimate(1.0, 0.01).delta_at(1.0)


# -- (7) messages and JSON -------------------------------------------------------------------------------
def test_non_finite_loss_message_fits_the_dtype():
    m64 = nonfinite_loss_message("float64", 1e-90)
    assert "float64" in m64 and "--sigma" in m64 and "[1e-100, 1e+100]" in m64 and "dtype='float64'" not in m64
    m32 = nonfinite_loss_message("float32", 1e-20)
    assert "float32" in m32 and "--dtype float64" in m32 and "sigma=1e-20" in m32


def test_float32_overflow_exits_2_with_the_dtype_message(capsys):
    # b-min-sep's float32 recursion overflows at sigma = 1e-20 (1/sigma^2 = 1e40 > float32's 3.4e38); ~5 s: compiling
    _refused(["delta", "--sigma", "1e-20", "--epsilon", "1", "--dtype", "float32", "--iterations", "4", "--min-sep",
              "2", "--sampling-prob", "0.2", "--c-col", "1", *MC], capsys, "float32", "--dtype float64", "sigma=1e-20")


def test_plan_only_with_no_candidate_says_so(capsys):
    argv = ["calibrate", "--plan-only", "--sigmas", "1e-10,100", "--no-baselines", *SMALL, "--quiet"]
    rc, out, _ = _run(argv, capsys)
    assert rc == 0 and "nan" not in out and "0 candidates to verify" in out and "no candidate to verify" in out
    rc, out, _ = _run(argv + ["--json"], capsys)
    got = strict_json(out)
    assert rc == 0 and got["ladder"] == [] and got["total_samples"] == 0
    assert "dropped" in got["note"] and "certified top" in got["note"]


def test_epsilon_json_is_strict_with_an_infinite_bound(capsys):
    rc, out, _ = _run(["epsilon", "--sigma", "0.3", "--delta", "1e-3", *BIB, *MC, "--json"], capsys)
    got = strict_json(out)
    assert rc == 0 and got["epsilon_upper"] is None and "loss histogram" in got["epsilon_upper_reason"]
    assert got["certified"] is False and "infinite" in got["note"]


def test_the_json_writer_never_writes_infinity_or_nan():
    from mcacct.cli.flags import json_text
    text = json_text({"a": math.inf, "b": [1.0, math.nan], "c": np.float64(-np.inf), "d": {"e": np.array([np.inf])},
                      "f": math.inf, "f_reason": "given", "g": np.float32(0.5)})
    got = strict_json(text)
    assert got == {"a": None, "a_reason": "not a finite number (+inf)", "b": [1.0, None], "c": None,
                   "c_reason": "not a finite number (-inf)", "d": {"e": [None]}, "f": None, "f_reason": "given",
                   "g": 0.5}


def test_calibrate_api_names_a_bare_scheme():
    """``calibrate(BMinSep(...))`` raised AttributeError deep inside; now a TypeError naming ``problem``."""
    with pytest.raises(TypeError, match=r"problem must be a mcacct.Problem; got BMinSep \(a scheme: wrap it"):
        mcacct.calibrate(mcacct.BMinSep(0.1, 2, 8), 1.0, 0.1, jax.random.key(0), sigmas=[1.0])


@pytest.mark.parametrize("argv,where", [(["merge", "norms.npy"], "statistics file 'norms.npy' is not valid JSON"),
                                        (["merge", "deep.json"], "statistics file 'deep.json' nests"),
                                        (["pld", "epsilon", "--events", "deep.json", "--delta", "1e-6"],
                                         "events file 'deep.json' nests")])
def test_unreadable_json_names_the_file(argv, where, tmp_path, monkeypatch, capsys):
    """A binary file, or 100,000 nested '[' (RecursionError before), is refused naming the file: one JSON reader
    (mcacct.core.validate.read_json) for every file mcacct reads."""
    monkeypatch.chdir(tmp_path)
    np.save("norms.npy", np.zeros(3))
    (tmp_path / "deep.json").write_text("[" * 100_000)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and where in err.splitlines()[-1], err
