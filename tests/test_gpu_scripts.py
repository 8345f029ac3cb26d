"""Issue #38's device correctness tooling, checked without a device: the ``gpu`` marker and its skip reason
(tests/conftest.py), ``benchmarks/gpu_suite.py`` (selection, JUnit parsing, summary and verdict) and
``benchmarks/gpu_checks.py`` (pass/fail logic, exit status), and both scripts' ``--quick`` runs end to end (slow)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import gpu_checks  # noqa: E402
import gpu_suite  # noqa: E402
from conftest import gpu_skip_reason  # noqa: E402

REASON = ("needs a GPU (jax.default_backend() is 'cpu'); benchmarks/device_session.sh runs them on the device")


def _env() -> dict:
    """A child's environment: CPU only, gpu tests not forced, and (for a child pytest) not this run's compilation
    cache, which a child pytest would remove at its end (tests/conftest.py)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", MCACCT_TEST_JAX_CACHE="off", MCACCT_CACHE_DIR="off")
    for name in ("MCACCT_RUN_GPU_TESTS", "PYTEST_XDIST_WORKER", "MCACCT_TEST_RUN_ID", "JAX_COMPILATION_CACHE_DIR"):
        env.pop(name, None)
    return env


def test_gpu_marker_is_registered_and_names_the_device_session(pytestconfig):
    markers = [m for m in pytestconfig.getini("markers") if m.split(":")[0].strip() == "gpu"]
    assert len(markers) == 1 and "device_session.sh" in markers[0]


def test_skip_reason_names_the_backend_and_the_device_session(monkeypatch):
    monkeypatch.delenv("MCACCT_RUN_GPU_TESTS", raising=False)
    assert gpu_skip_reason("cpu") == REASON
    assert gpu_skip_reason("gpu") == gpu_skip_reason("cuda") == ""
    monkeypatch.setenv("MCACCT_RUN_GPU_TESTS", "1")
    assert gpu_skip_reason("cpu") == ""


def test_gpu_tests_are_skipped_on_cpu_with_the_reason():
    r = subprocess.run([sys.executable, "-m", "pytest", "tests/gpu/test_statistics_gpu.py", "-q", "-rs",
                        "-p", "no:cacheprovider", "-p", "no:xdist"], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 skipped" in r.stdout and REASON in r.stdout, r.stdout


def test_suite_selection_adds_gpu_files_outside_the_four_directories():
    paths, extra = gpu_suite.selection(quick=False)
    assert paths[:4] == list(gpu_suite.SUITE_DIRS)
    assert "tests/gpu/test_fused_gpu.py" in extra and "tests/gpu/test_statistics_gpu.py" in extra
    assert not any(f.startswith(("tests/kernels/", "tests/schemes/", "tests/engine/", "tests/evr/")) for f in extra)
    assert "tests/test_gpu_scripts.py" not in extra            # no test here is marked gpu
    cmd = gpu_suite.build_command(paths, "/tmp/j.xml", 8, 0)
    assert cmd[cmd.index("-m", 3) + 1] == "gpu or not slow" and cmd[-2:] == ["-n", "8"]
    assert "-p" in cmd and "gpu_suite" in cmd


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.kernels.test_a" name="test_ok[1]" file="tests/kernels/test_a.py" line="3" time="0.5"/>
<testcase classname="tests.kernels.test_a.TestK" name="test_m" file="tests/kernels/test_a.py" line="9" time="0.1"/>
<testcase classname="tests.engine.test_b" name="test_bad" file="tests/engine/test_b.py" line="4" time="1.5">
<failure message="AssertionError: 2 &gt; 1&#10;more">trace</failure></testcase>
<testcase classname="tests.gpu.test_c" name="test_gpu" file="tests/gpu/test_c.py" line="7" time="0">
<skipped type="pytest.skip" message="needs a GPU">skip</skipped></testcase>
<testcase classname="tests.evr.test_d" name="test_e" file="tests/evr/test_d.py" line="1" time="0">
<error message="fixture boom">e</error></testcase>
</testsuite></testsuites>"""


def test_junit_is_parsed_into_node_ids_outcomes_and_reasons(tmp_path):
    path = tmp_path / "j.xml"
    path.write_text(JUNIT)
    cases = {c["node"]: c for c in gpu_suite.parse_junit(str(path))}
    assert cases["tests/kernels/test_a.py::test_ok[1]"]["outcome"] == "passed"
    assert cases["tests/kernels/test_a.py::TestK::test_m"]["outcome"] == "passed"
    assert cases["tests/engine/test_b.py::test_bad"]["outcome"] == "failed"
    assert cases["tests/gpu/test_c.py::test_gpu"] | {"outcome": "skipped", "message": "needs a GPU"} == \
        cases["tests/gpu/test_c.py::test_gpu"]
    assert cases["tests/evr/test_d.py::test_e"]["outcome"] == "error"
    env = {"python": "3.12", "jax": "0.11.2", "jaxlib": "0.11.2", "backend": "gpu", "device": "gpu:H100 x1",
           "card": "h100", "packages": {}}
    text, ok = gpu_suite.summary_text(["pytest"], ["tests/kernels"], [], env, list(cases.values()), 5, 1, False,
                                      12.0, "the JUnit XML")
    assert not ok and "failed 1, errors 1, skipped 1" in text and "verdict: NOT" in text
    assert "  tests/engine/test_b.py::test_bad\n      AssertionError: 2 > 1\n" in text
    assert "  needs a GPU (1):\n    tests/gpu/test_c.py::test_gpu" in text
    good = [c for c in cases.values() if c["outcome"] in ("passed", "skipped")]
    text, ok = gpu_suite.summary_text(["pytest"], ["tests/kernels"], [], env, good, 3, 0, False, 1.0, "x")
    assert ok and "verdict: every selected test ran, 0 failed" in text
    # a run that did not reach every selected test is not a pass, even with 0 failed
    assert not gpu_suite.summary_text(["pytest"], [], [], env, good, 4, 0, False, 1.0, "x")[1]
    assert not gpu_suite.summary_text(["pytest"], [], [], env, good, 3, 0, True, 1.0, "x")[1]


def test_selected_count_from_either_header(tmp_path):
    log = tmp_path / "l"
    log.write_text("created: 8/8 workers\n8 workers [771 items]\n")
    assert gpu_suite.selected_count(str(log)) == 771
    log.write_text("collected 800 items / 29 deselected / 771 selected\n")
    assert gpu_suite.selected_count(str(log)) == 771
    log.write_text("collected 12 items\n")
    assert gpu_suite.selected_count(str(log)) == 12


def _run(means, counts=(10**6, 10**6), width=0.001):
    return {"eta": 1e-10, "directions": {d: {"mean": m, "count": n, "lower": m - width, "upper": m + width,
                                             "rounding": 1e-15} for d, m, n in zip(gpu_checks.DIRECTIONS, means,
                                                                                     counts)}}


def test_checks_pass_and_fail_on_their_bounds():
    cpu = _run((0.1, 0.05))
    assert gpu_checks.check_vs_cpu("x_vs_cpu", {"auto": _run((0.1015, 0.0505))}, cpu, None)["passed"]
    assert not gpu_checks.check_vs_cpu("x_vs_cpu", {"auto": _run((0.1025, 0.05))}, cpu, None)["passed"]
    missing = gpu_checks.check_vs_cpu("x_vs_cpu", {"auto": cpu}, None, None, "timed out")
    assert not missing["passed"] and "timed out" in missing["error"]
    same = gpu_checks.check_fused_equals_unfused({"fused": _run((0.1, 0.05)), "unfused": _run((0.1 + 1e-10, 0.05))})
    assert same["passed"]
    assert not gpu_checks.check_fused_equals_unfused({"fused": _run((0.1, 0.05)),
                                                      "unfused": _run((0.1 + 1e-9, 0.05))})["passed"]


def test_checks_exit_status_and_file(tmp_path, monkeypatch):
    report = {"checks": [{"name": "poisson_vs_pld", "passed": False, "error": "x"}], "failed": ["poisson_vs_pld"],
              "passed": False, "device": "cpu:cpu", "jax": "0", "seconds": 0.0}
    monkeypatch.setattr(gpu_checks, "run_checks", lambda *a, **k: report)
    assert gpu_checks.main(["--out-dir", str(tmp_path)]) == 1
    assert json.loads((tmp_path / "gpu_checks_cpu.json").read_text())["failed"] == ["poisson_vs_pld"]
    report.update(checks=[], failed=[], passed=True)
    assert gpu_checks.main(["--out-dir", str(tmp_path)]) == 0


@pytest.mark.slow
def test_suite_quick_writes_its_summary(tmp_path):
    r = subprocess.run([sys.executable, "benchmarks/gpu_suite.py", "--quick", "--out-dir", str(tmp_path),
                        "--log", str(tmp_path / "log")], cwd=ROOT, env=_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = (tmp_path / "gpu_suite_cpu.txt").read_text()
    assert "verdict: every selected test ran, 0 failed" in text
    assert "-m 'gpu or not slow'" in text and "jax " in text and "device cpu:cpu" in text
    assert f"  {REASON} (" in text and "tests/gpu/test_fused_gpu.py::" in text


@pytest.mark.slow
def test_checks_quick_writes_its_report(tmp_path):
    # a compilation cache of the child's own (fresh, in tmp_path): on a CPU the CPU reference of bminsep8 (kernel
    # "auto") compiles the same program as one of the two "device" runs before it, and is read back instead
    env = dict(_env(), JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax-cache"),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0.2")
    r = subprocess.run([sys.executable, "benchmarks/gpu_checks.py", "--quick", "--out-dir", str(tmp_path)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads((tmp_path / "gpu_checks_cpu.json").read_text())
    assert data["passed"] and data["quick"] and data["failed"] == []
    assert [c["name"] for c in data["checks"]] == list(gpu_checks.CHECKS)
    for c in data["checks"]:
        assert c["passed"], c
    pld = data["checks"][0]["rows"]
    assert abs(pld["remove"]["pld"] - 0.098575) < 1e-5 and abs(pld["add"]["pld"] - 0.045997) < 1e-5
    assert all(line.startswith("PASS ") for line in r.stdout.splitlines()[:4]), r.stdout
