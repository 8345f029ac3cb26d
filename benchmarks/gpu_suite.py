r"""The test suite on a device (issue #38): run it, and write what ran, passed, failed and was skipped, and why.

    python benchmarks/gpu_suite.py                 # on the device machine: about 4 minutes on an H100 (-n 8)
    python benchmarks/gpu_suite.py --quick         # a tiny selection (one file + the gpu tests), a CPU smoke test

The selection: ``tests/kernels tests/schemes tests/engine tests/evr`` without the ``slow`` tests, plus every test
marked ``gpu`` (pyproject.toml's markers; tests/conftest.py skips them where JAX has no GPU backend), wherever it is:
files under ``tests/`` outside those directories that mark tests ``gpu`` are added, and their tests without the
marker are deselected (this file is also the pytest plugin that does so, ``-p gpu_suite``). pytest-xdist runs it on
8 workers (``--workers``) where it is installed; pytest-timeout, where installed, stops a test after
``--test-timeout`` seconds (a hung compilation then fails one test instead of the whole run).

Writes ``benchmarks/results/gpu_suite_<card>.txt`` (``--out-dir`` elsewhere; card: a slug of
``jax.devices()[0].device_kind``): the exact command, the selection, the Python, JAX and jaxlib versions, the
device, the counts (selected, passed, failed, errors, skipped), every failed test's node id with its message's
first line, every skipped test with its reason, and the duration; and the verdict ``every selected test ran, 0
failed`` or what is missing. The outcomes come from pytest's JUnit XML (``-o junit_family=xunit1``, which records
each test's file); where a run was cut short (``--timeout-seconds``: SIGINT, then SIGKILL) and left no XML, from the
``-v`` lines of its log. The whole pytest output goes to ``--log`` (default: a temporary file). Exit status: 0 when
the verdict holds, else 1.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import os
import platform as host_platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE_DIRS = ("tests/kernels", "tests/schemes", "tests/engine", "tests/evr")
QUICK_PATHS = ("tests/evr/test_ladder.py",)
MARKER_EXPR = "gpu or not slow"
GPU_MARK = re.compile(r"mark\.gpu\b")
#: environment variable through which the runner tells the plugin half of this file which files' tests to keep
#: only where marked ``gpu``
GPU_ONLY_ENV = "MCACCT_GPU_SUITE_GPU_ONLY_FILES"
OUTCOME_LINE = re.compile(r"\b(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b\s+(\S+::\S+)")


# --- the plugin half (pytest -p gpu_suite): keep only the gpu-marked tests of the extra files ---------------------

def pytest_collection_modifyitems(config, items):
    gpu_only = {os.path.normpath(p) for p in os.environ.get(GPU_ONLY_ENV, "").split(os.pathsep) if p}
    if not gpu_only:
        return
    keep, drop = [], []
    for item in items:
        path = os.path.normpath(os.path.relpath(str(item.path), str(config.rootpath)))
        (drop if path in gpu_only and item.get_closest_marker("gpu") is None else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# --- the runner half ------------------------------------------------------------------------------------------------

def gpu_test_files(tests_dir: str = "tests") -> list[str]:
    """Files under ``tests_dir`` (relative to the repository) that mark a test ``gpu`` (by their text)."""
    found = []
    for dirpath, dirnames, files in os.walk(os.path.join(ROOT, tests_dir)):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
        for f in sorted(files):
            if f.startswith("test_") and f.endswith(".py"):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    if GPU_MARK.search(fh.read()):
                        found.append(os.path.relpath(path, ROOT))
    return found


def selection(quick: bool) -> tuple[list[str], list[str]]:
    """``(paths, gpu_only_files)``: what pytest is given, and the files among them whose tests run only where marked
    ``gpu``."""
    base = list(QUICK_PATHS if quick else SUITE_DIRS)
    inside = lambda f: any(f == d or f.startswith(d.rstrip("/") + "/") for d in base)  # noqa: E731
    extra = [f for f in gpu_test_files() if not inside(f)]
    return base + extra, extra


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def build_command(paths: list[str], junit: str, workers: int, test_timeout: float) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", *paths, "-m", MARKER_EXPR, "-p", "gpu_suite", "-p", "no:cacheprovider",
           "-v", "-rA", f"--junitxml={junit}", "-o", "junit_family=xunit1"]
    if workers > 0:
        cmd += ["-n", str(workers)]
    if test_timeout > 0 and has_module("pytest_timeout"):
        cmd += [f"--timeout={test_timeout:g}"]
    return cmd


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:      # it ended meanwhile
        pass


def run_pytest(cmd: list[str], env: dict, log_path: str, timeout: float) -> tuple[int | None, bool, float]:
    """Run ``cmd`` in its own process group, its output to ``log_path`` and to stdout; ``(exit status, cut short,
    seconds)``. Past ``timeout``: SIGINT to the group (pytest then writes its report), SIGKILL 30 s later."""
    t0 = time.perf_counter()
    cut = False
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", start_new_session=True, bufsize=1)

        def pump():
            for line in proc.stdout:
                log.write(line)
                sys.stdout.write(line)
            sys.stdout.flush()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            cut = True
            _signal_group(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
        reader.join(timeout=10)
    return proc.returncode, cut, time.perf_counter() - t0


def _node_id(case: ET.Element) -> str:
    name = case.get("name", "?")
    file = case.get("file")
    classname = case.get("classname", "")
    if not file:
        return f"{classname.replace('.', '/')}.py::{name}" if classname else name
    module = file[:-3].replace("/", ".") if file.endswith(".py") else file
    cls = classname[len(module) + 1:] if classname.startswith(module + ".") else ""
    return f"{file}::{cls + '::' if cls else ''}{name}"


def parse_junit(path: str) -> list[dict]:
    """One dict per test case: ``node``, ``outcome`` (passed, failed, error, skipped) and ``message``."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                message = el.get("message") or (el.text or "").strip()
                if tag == "skipped" and el.get("type") == "pytest.xfail":
                    outcome = "xfailed"
                break
        out.append({"node": _node_id(case), "outcome": outcome, "message": message,
                    "seconds": float(case.get("time") or 0.0)})
    return out


def parse_log(path: str) -> list[dict]:
    """Outcomes from the ``-v`` lines of a log (a run cut short before it wrote its XML): no skip reasons."""
    seen = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = OUTCOME_LINE.search(line)
            if m:
                outcome = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "SKIPPED": "skipped",
                           "XFAIL": "xfailed", "XPASS": "xpassed"}[m.group(1)]
                seen[m.group(2)] = {"node": m.group(2), "outcome": outcome, "message": "(from the log)",
                                    "seconds": 0.0}
    return list(seen.values())


def selected_count(log_path: str) -> int | None:
    """How many tests the run selected, from pytest's header (xdist: ``N workers [K items]``; else ``collected N
    items / D deselected / K selected``)."""
    with open(log_path, errors="replace") as f:
        text = f.read()
    m = re.search(r"workers? \[(\d+) items?\]", text)
    if m:
        return int(m.group(1))
    m = re.search(r"collected (\d+) items?(?: / (\d+) deselected)?(?: / (\d+) selected)?", text)
    if m:
        return int(m.group(3)) if m.group(3) else int(m.group(1)) - int(m.group(2) or 0)
    return None


def environment() -> dict:
    try:
        return _environment()
    except Exception as err:  # noqa: BLE001 - the summary is still written, saying what failed
        return {"python": host_platform.python_version(), "jax": "?", "jaxlib": "?", "backend": "?",
                "device": f"? ({type(err).__name__}: {err})", "card": "unknown", "packages": {}}


def _environment() -> dict:
    import jax
    import jaxlib
    dev = jax.devices()[0]
    slug = "cpu" if dev.platform == "cpu" else (re.sub(r"[^a-z0-9]+", "_", dev.device_kind.lower()).strip("_")
                                               or "unknown")
    from importlib import metadata
    versions = {}
    for name in ("pytest", "pytest-xdist", "pytest-timeout", "hypothesis", "mpmath", "dp-accounting", "jax-privacy",
                 "numpy", "scipy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {"python": host_platform.python_version(), "jax": jax.__version__,
            "jaxlib": getattr(jaxlib, "__version__", "?"), "backend": jax.default_backend(),
            "device": f"{dev.platform}:{dev.device_kind} x{jax.device_count()}", "card": slug, "packages": versions}


def summary_text(cmd: list[str], paths: list[str], extra: list[str], env_info: dict, cases: list[dict],
                 selected: int | None, status: int | None, cut: bool, seconds: float, source: str) -> tuple[str, bool]:
    """The summary file's text and whether the verdict ("every selected test ran, 0 failed") holds."""
    by = {}
    for c in cases:
        by.setdefault(c["outcome"], []).append(c)
    count = {k: len(by.get(k, [])) for k in ("passed", "failed", "error", "skipped", "xfailed", "xpassed")}
    ran = len(cases)
    bad = count["failed"] + count["error"]
    complete = selected is not None and ran == selected and not cut
    ok = complete and bad == 0 and status in (0,)
    lines = [f"mcacct test suite on a device (benchmarks/gpu_suite.py), "
             f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
             f"command: {shlex.join(cmd)}",
             f"selection: {' '.join(paths)} -m \"{MARKER_EXPR}\""
             + (f" (in {', '.join(extra)} only the gpu-marked tests)" if extra else ""),
             f"python {env_info['python']}, jax {env_info['jax']}, jaxlib {env_info['jaxlib']}, "
             f"backend {env_info['backend']}, device {env_info['device']}",
             "packages: " + ", ".join(f"{k} {v}" for k, v in env_info["packages"].items()),
             f"selected {selected if selected is not None else '?'}, ran {ran}: passed {count['passed']}, "
             f"failed {count['failed']}, errors {count['error']}, skipped {count['skipped']}, "
             f"xfailed {count['xfailed']}, xpassed {count['xpassed']}",
             f"duration {seconds:.1f} s, pytest exit status {status}" + (", CUT SHORT (timeout)" if cut else "")
             + f"; outcomes from {source}",
             "verdict: " + ("every selected test ran, 0 failed" if ok else
                            "NOT every selected test ran with 0 failed" +
                            ("" if complete else f" (ran {ran} of {selected if selected is not None else '?'})")),
             ""]
    for key, title in (("failed", "failed"), ("error", "errors")):
        lines.append(f"{title} ({count[key]}):")
        for c in sorted(by.get(key, []), key=lambda c: c["node"]):
            first = (c["message"].strip().splitlines() or [""])[0]
            lines.append(f"  {c['node']}")
            if first:
                lines.append(f"      {first[:300]}")
        lines.append("")
    skips = by.get("skipped", []) + by.get("xfailed", [])
    lines.append(f"skipped ({len(skips)}), by reason:")
    reasons = {}
    for c in skips:
        tag = "[xfail] " if c["outcome"] == "xfailed" else ""
        reasons.setdefault(f"{tag}{c['message'].strip() or '(no reason given)'}", []).append(c["node"])
    for reason in sorted(reasons):
        lines.append(f"  {reason} ({len(reasons[reason])}):")
        lines.extend(f"    {node}" for node in sorted(reasons[reason]))
    lines.append("")
    slowest = sorted(cases, key=lambda c: -c["seconds"])[:10]
    if slowest and slowest[0]["seconds"] > 0:
        lines.append("slowest tests:")
        lines.extend(f"  {c['seconds']:8.2f} s  {c['node']}" for c in slowest)
    return "\n".join(lines) + "\n", ok


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help=f"only {' '.join(QUICK_PATHS)} and the gpu-marked tests, no workers (a CPU smoke test)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "benchmarks", "results"),
                    help="directory of gpu_suite_<card>.txt (default benchmarks/results)")
    ap.add_argument("--log", default="", help="the whole pytest output (default: a temporary file)")
    ap.add_argument("--workers", type=int, default=-1,
                    help="pytest-xdist workers (default 8 where pytest-xdist is installed, 0 with --quick)")
    ap.add_argument("--timeout-seconds", type=float, default=330.0, help="the whole pytest run's limit (s)")
    ap.add_argument("--test-timeout", type=float, default=240.0,
                    help="one test's limit where pytest-timeout is installed (s; 0: none)")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    paths, extra = selection(args.quick)
    workers = args.workers if args.workers >= 0 else (0 if args.quick or not has_module("xdist") else 8)
    tmp = tempfile.mkdtemp(prefix="gpu_suite_")
    junit = os.path.join(tmp, "junit.xml")
    log_path = args.log or os.path.join(tmp, "pytest.log")
    cmd = build_command(paths, junit, workers, args.test_timeout)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "benchmarks"), ROOT] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env[GPU_ONLY_ENV] = os.pathsep.join(extra)
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")     # 8 workers share one GPU
    env.setdefault("PYTHONUNBUFFERED", "1")
    print(f"gpu_suite: {shlex.join(cmd)}", flush=True)
    status, cut, seconds = run_pytest(cmd, env, log_path, args.timeout_seconds)
    if os.path.exists(junit):
        cases, source = parse_junit(junit), "the JUnit XML"
        os.remove(junit)
    else:
        cases, source = parse_log(log_path), "the log's -v lines (no JUnit XML)"
    if args.log:  # the scratch directory held only the JUnit XML (else it keeps the log, named below)
        shutil.rmtree(tmp, ignore_errors=True)
    env_info = environment()
    text, ok = summary_text(cmd, paths, extra, env_info, cases, selected_count(log_path), status, cut, seconds, source)
    os.makedirs(args.out_dir, exist_ok=True)
    out = os.path.join(args.out_dir, f"gpu_suite_{env_info['card']}.txt")
    with open(out, "w") as f:
        f.write(text)
    print(text.split("\n\n")[0], flush=True)
    print(f"gpu_suite: {out} (log {log_path})", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
