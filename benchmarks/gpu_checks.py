r"""Statistical end-to-end checks of mcacct on a device (issue #38): numbers, not speed.

    python benchmarks/gpu_checks.py                  # on the device machine (~1 min on an H100)
    python benchmarks/gpu_checks.py --quick          # the same checks with small sample counts (CPU smoke test)

Writes ``benchmarks/results/gpu_checks_<card>.json`` (``--out-dir`` elsewhere; card: a slug of
``jax.devices()[0].device_kind``, e.g. ``nvidia_h100_80gb_hbm3``), prints one line per check and exits 1 if any
check failed. The checks (the ones issue #38's H100 run showed to be right):

* ``poisson_vs_pld``: b = 1, one band (Poisson DP-SGD), q = 0.05, n = 100, sigma = 0.8, epsilon = 1: the Monte
  Carlo delta of each direction against mcacct's own PLD accountant (``mcacct.pld.pld_delta``);
* ``bminsep8_fused_equals_unfused``: b-min-sep b = 8, n = 256, q = 0.05, c = 8 x 0.35355, sigma = 1, epsilon = 1,
  the fused and the unfused loss kernel on the same key: a deterministic check (same draws, rounding only);
* ``bminsep8_vs_cpu``: the same configuration on the device against a CPU run made in the same call;
* ``truncated_vs_cpu``: truncated b-min-sep, n = 512, b = 16, batch 64 of 16,384, B_max = 72, c = 4 x 0.5,
  sigma = 0.7, epsilon = 1.5, device against CPU.

The CPU values come from a child process of this script with ``JAX_PLATFORMS=cpu`` (``--cpu-reference``), started
first so that it runs while the device works; where the default backend is the CPU they are computed in this
process. GPU draws may change between kernel versions, so the device is checked statistically (or within the loss
error bound) against the PLD and the CPU, never against stored device values.

*Pass/fail from confidence bounds.* For one direction of one estimate (mean ``m`` of ``s`` contributions) the
interval ``[lo, hi]`` holds the mechanism's delta with probability at least ``1 - 2 ALPHA_SIDE``:

* ``hi = KL_upper(m, s, ALPHA_SIDE) + systematic``, as the engine reports it (``Estimate.delta``):
  ``systematic`` is :func:`mcacct.engine.systematic.systematic_bound`'s delta term (normal coupling and
  participation draws) and every loss is already shifted up by eta (its ``loss_shift``), so each computed
  contribution bounds the exact one from above;
* ``lo = KL_lower(m_-, s, ALPHA_SIDE) - systematic - 2 eta``: the shift by eta moves a contribution
  ``g(L) = max(0, 1 - e^{eps - L})`` (1-Lipschitz in ``L``) up by at most ``2 eta`` (``|L_hat - L| <= eta``
  plus the shift), and ``m_-`` takes back the engine's upward rounding of the chunk sums
  (:func:`mcacct.statistics.accumulators.chunk_sum_slack` and the fixed point's units).

``poisson_vs_pld`` passes when each direction's ``[lo, hi]`` meets ``[pld - err, pld]``: the PLD value is a
rigorous upper bound of the direction's delta, ``err`` its discretisation-error estimate (``error_estimate``).
``*_vs_cpu`` passes when the device's and the CPU's intervals meet in each direction: both hold the same delta
(the same mechanism), whatever the draws. ``bminsep8_fused_equals_unfused`` passes when the two means differ by at
most ``2 eta`` plus both means' rounding: on the same draws each kernel's loss is within eta of the exact one
(docs/soundness.md), and ``g`` is 1-Lipschitz. With ``ALPHA_SIDE = 1e-4`` and 24 one-sided bounds in all (6 runs,
2 directions, 2 sides), a correct device fails the statistical checks with probability below 2.4e-3. Each
``*_vs_cpu`` check also reports ``same_draws``: the device rerun with the CPU run's key, samples and chunk size,
whose means agree within the deterministic bound when the device draws exactly what the CPU draws (information, not
pass/fail).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import platform as host_platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: one-sided level of every confidence bound (module docstring)
ALPHA_SIDE = 1e-4
DIRECTIONS = ("remove", "add")
CHECKS = ("poisson_vs_pld", "bminsep8_fused_equals_unfused", "bminsep8_vs_cpu", "truncated_vs_cpu")
#: samples per run: the device's, the CPU reference's (and the device's rerun of it)
SAMPLES = {"poisson": {"device": 8_000_000},
           "bminsep8": {"device": 2**23, "cpu": 2**20},
           "truncated": {"device": 2**21, "cpu": 2**17}}
QUICK_SAMPLES = {"poisson": {"device": 2**14},
                 "bminsep8": {"device": 2**13, "cpu": 2**13},
                 "truncated": {"device": 2**12, "cpu": 2**12}}
CPU_CHUNK = 4096            # the engine's CPU default (mcacct.engine.problem.DEFAULT_CHUNK_SIZE)
DEVICE_CHUNK = 65536        # on an accelerator
DEVICE_SEED, CPU_SEED = 1, 2
CPU_REFERENCE_TIMEOUT = 300


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "unknown"


def card_name() -> str:
    """``jax.devices()[0].device_kind`` as a file-name slug (``cpu`` on a CPU)."""
    import jax
    dev = jax.devices()[0]
    return "cpu" if dev.platform == "cpu" else _slug(dev.device_kind)


def device_meta() -> dict:
    import jax
    dev = jax.devices()[0]
    return {"device": f"{dev.platform}:{dev.device_kind}", "device_kind": dev.device_kind, "platform": dev.platform,
            "backend": jax.default_backend(), "device_count": jax.device_count(), "jax": jax.__version__,
            "python": host_platform.python_version(), "mcacct_source": source_digest()}


def source_digest() -> str:
    """sha256 (16 hex digits) of mcacct's sources: which code ran, where the checkout has no git."""
    h = hashlib.sha256()
    base = os.path.join(ROOT, "mcacct")
    for dirpath, dirnames, files in sorted(os.walk(base)):
        dirnames.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                h.update(os.path.relpath(path, ROOT).encode())
                with open(path, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()[:16]


def config(name: str):
    """``(problem factory, sigma, epsilon)`` of a configuration; the factory takes the loss kernel."""
    import mcacct
    from mcacct.core.rates import sampling_prob_from_batch_size
    if name == "poisson":
        scheme, c, sigma, eps = mcacct.BMinSep(0.05, 1, 100), (1.0,), 0.8, 1.0
    elif name == "bminsep8":
        scheme, c, sigma, eps = mcacct.BMinSep(0.05, 8, 256), (0.35355,) * 8, 1.0, 1.0
    elif name == "truncated":
        p = sampling_prob_from_batch_size(64, 16384, 16)
        scheme, c, sigma, eps = mcacct.TruncatedBMinSep(p, 16, 512, 16384, 72), (0.5,) * 4, 0.7, 1.5
    else:
        raise KeyError(name)
    strategy = mcacct.BandedToeplitz(c)
    return (lambda kernel="auto": mcacct.Problem(scheme, strategy, loss_kernel=kernel)), sigma, eps


def _rounding(mean: float, count: int, chunk: int) -> float:
    """Bound on how far the engine's rounded-up mean lies above the exact mean of the computed contributions:
    each chunk sum is inflated by ``chunk_sum_slack`` and rounded up by at most 3 fixed-point units
    (``DirectionStats.add_chunk``)."""
    from mcacct.statistics.accumulators import FIXED_BITS
    from mcacct.statistics.accumulators import chunk_sum_slack
    chunks = -(-count // chunk)
    return mean * 2.0 * chunk_sum_slack(chunk) + 3.0 * chunks * 2.0**-FIXED_BITS / count


def run_estimate(name: str, samples: int, seed: int, chunk: int, kernel: str = "auto") -> dict:
    """One Monte Carlo run of configuration ``name`` on the default backend: per direction the mean, the count and
    the interval ``[lo, hi]`` of the module docstring."""
    import jax
    from mcacct.engine.estimate import estimate
    from mcacct.engine.kernel_choice import resolve_loss_kernel
    from mcacct.statistics.accumulators import delta_bounds
    from mcacct.engine.systematic import systematic_bound
    make, sigma, eps = config(name)
    problem = make(kernel)
    sb = systematic_bound(problem, sigma)
    t0 = time.perf_counter()
    est = estimate(problem, sigma, jax.random.key(seed), samples, (eps,), chunk_size=chunk)
    seconds = time.perf_counter() - t0
    out = {"config": name, "samples": samples, "seed": seed, "chunk_size": chunk, "sigma": sigma, "epsilon": eps,
           "loss_kernel": resolve_loss_kernel(problem).kernel, "eta": sb.loss_shift, "systematic": sb.delta,
           "seconds": round(seconds, 3), "backend": jax.default_backend(), "directions": {}}
    for d in DIRECTIONS:
        s = est.stats[d]
        m, n = float(s.mean_at(0)), int(s.count)
        m_low = max(0.0, m - _rounding(m, n, chunk))
        lo = delta_bounds(m_low, n, ALPHA_SIDE)[0] - sb.delta - 2.0 * sb.loss_shift
        hi = delta_bounds(m, n, ALPHA_SIDE)[1] + sb.delta
        out["directions"][d] = {"mean": m, "count": n, "lower": max(0.0, lo), "upper": min(1.0, hi),
                                "rounding": _rounding(m, n, chunk)}
    return out


def _z(a: dict, b: dict) -> float:
    """(a - b) / a conservative standard error (variance of a [0, 1] variable of mean m at most m (1 - m))."""
    var = sum(max(x["mean"] * (1 - x["mean"]), 1e-300) / x["count"] for x in (a, b))
    return (a["mean"] - b["mean"]) / math.sqrt(var)


def _same_within(a: dict, b: dict, eta: float) -> tuple[bool, float, float]:
    """Whether two runs on the same draws agree as the arithmetic allows: ``|m_a - m_b| <= 2 eta + rounding``."""
    worst, bound = 0.0, 0.0
    ok = True
    for d in DIRECTIONS:
        x, y = a["directions"][d], b["directions"][d]
        diff = abs(x["mean"] - y["mean"])
        tol = 2.0 * eta + x["rounding"] + y["rounding"]
        ok &= diff <= tol
        worst, bound = max(worst, diff), max(bound, tol)
    return ok, worst, bound


def check_poisson(samples: int, chunk: int) -> dict:
    from mcacct.pld import pld_delta
    from mcacct.pld.specs import PoissonGaussianSpec
    run = run_estimate("poisson", samples, DEVICE_SEED, chunk)
    t0 = time.perf_counter()
    pld = pld_delta(PoissonGaussianSpec(0.05, 0.8, 100), 1.0)
    err = float(pld.error_estimate)
    rows, ok = {}, True
    for d in DIRECTIONS:
        ref = float(getattr(pld, f"delta_{d}"))
        x = run["directions"][d]
        passed = x["lower"] <= ref and ref - err <= x["upper"]
        ok &= passed
        rows[d] = {"estimate": x["mean"], "lower": x["lower"], "upper": x["upper"], "pld": ref,
                   "pld_error_estimate": err, "passed": passed}
    return {"name": "poisson_vs_pld", "passed": ok, "rows": rows, "device_run": run,
            "pld_seconds": round(time.perf_counter() - t0, 3),
            "criterion": "[lower, upper] meets [pld - pld_error_estimate, pld] in each direction"}


def check_fused_equals_unfused(runs: dict) -> dict:
    fused, unfused = runs["fused"], runs["unfused"]
    eta = max(fused["eta"], unfused["eta"])
    ok, diff, tol = _same_within(fused, unfused, eta)
    rows = {d: {"fused": fused["directions"][d]["mean"], "unfused": unfused["directions"][d]["mean"],
                "identical": fused["directions"][d]["mean"] == unfused["directions"][d]["mean"]} for d in DIRECTIONS}
    return {"name": "bminsep8_fused_equals_unfused", "passed": bool(ok), "max_difference": diff, "tolerance": tol,
            "rows": rows, "runs": {"fused": fused, "unfused": unfused},
            "criterion": "|mean_fused - mean_unfused| <= 2 eta + rounding in each direction (same draws)"}


def check_vs_cpu(check: str, device_runs: dict, cpu: dict | None, replica: dict | None, why: str = "") -> dict:
    out = {"name": check, "criterion": "device and CPU intervals meet in each direction (both hold the same delta)",
           "device_runs": device_runs, "cpu_run": cpu}
    if cpu is None:
        out.update(passed=False, error=f"no CPU reference: {why}")
        return out
    rows, ok = {}, True
    for kernel, run in device_runs.items():
        for d in DIRECTIONS:
            x, y = run["directions"][d], cpu["directions"][d]
            passed = x["lower"] <= y["upper"] and y["lower"] <= x["upper"]
            ok &= passed
            rows[f"{kernel}/{d}"] = {"device": x["mean"], "device_interval": [x["lower"], x["upper"]],
                                     "cpu": y["mean"], "cpu_interval": [y["lower"], y["upper"]],
                                     "z": _z(x, y), "passed": passed}
    out.update(passed=ok, rows=rows)
    if replica is not None:
        same, diff, tol = _same_within(replica, cpu, max(replica["eta"], cpu["eta"]))
        out["same_draws"] = {"within_arithmetic": bool(same), "max_difference": diff, "tolerance": tol,
                             "device_rerun": replica,
                             "note": "the device rerun with the CPU run's key, samples and chunk size (information)"}
    else:
        out["same_draws"] = {"note": "not run: the device is the CPU"}
    return out


def cpu_references(table: dict, only: tuple[str, ...] = CHECKS) -> dict:
    """The CPU runs of the ``*_vs_cpu`` checks among ``only``, in this process."""
    return {name: run_estimate(name, table[name]["cpu"], CPU_SEED, CPU_CHUNK) for name in ("bminsep8", "truncated")
            if f"{name}_vs_cpu" in only}


def _start_cpu_reference(quick: bool, only: tuple[str, ...], path: str, log):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    cmd = [sys.executable, os.path.abspath(__file__), "--cpu-reference", path, "--checks", ",".join(only)]
    cmd += ["--quick"] if quick else []
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def _wait_cpu_reference(proc, path: str, log_path: str, timeout: float) -> tuple[dict | None, str]:
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None, f"the CPU reference did not finish in {timeout:.0f} s"
    if rc != 0 or not os.path.exists(path):
        with open(log_path, errors="replace") as f:
            tail = f.read()[-2000:]
        return None, f"the CPU reference exited with {rc}: {tail}"
    with open(path) as f:
        return json.load(f), ""


def _line(c: dict) -> str:
    head = f"{'PASS' if c['passed'] else 'FAIL'} {c['name']}"
    if "error" in c:
        return f"{head}: {c['error']}"
    if c["name"] == "bminsep8_fused_equals_unfused":
        return f"{head}: max |fused - unfused| = {c['max_difference']:.3g} <= {c['tolerance']:.3g}"
    parts = []
    for key, r in c["rows"].items():
        if "pld" in r:
            parts.append(f"{key} {r['estimate']:.6f} [{r['lower']:.6f}, {r['upper']:.6f}] pld {r['pld']:.6f}")
        else:
            parts.append(f"{key} {r['device']:.6f} vs cpu {r['cpu']:.6f} (z {r['z']:+.2f})")
    same = c.get("same_draws", {})
    if "within_arithmetic" in same:
        parts.append(f"same draws as the CPU: {same['within_arithmetic']} (max diff {same['max_difference']:.3g})")
    return f"{head}: " + "; ".join(parts)


class _Checks(list):
    """The list of decided checks, echoing each one's line as it is added."""

    def __init__(self, echo=None):
        super().__init__()
        self.echo = echo

    def append(self, check: dict) -> None:
        super().append(check)
        if self.echo is not None:
            self.echo(_line(check))


def run_checks(quick: bool = False, only: tuple[str, ...] = CHECKS, cpu_subprocess: bool = False,
               cpu_timeout: float = CPU_REFERENCE_TIMEOUT, echo=None) -> dict:
    """Run the checks ``only`` and return the report (module docstring). ``cpu_subprocess``: make the CPU runs in
    the child process and rerun them here even where the default backend is the CPU (to smoke-test the device's
    path on a CPU). ``echo``: called with each check's line as soon as the check is decided."""
    import jax
    t0 = time.perf_counter()
    table = QUICK_SAMPLES if quick else SAMPLES
    on_cpu = jax.default_backend() == "cpu" and not cpu_subprocess
    chunk = CPU_CHUNK if jax.default_backend() == "cpu" else DEVICE_CHUNK
    need_cpu = any(c.endswith("_vs_cpu") for c in only)
    proc = log = None
    tmp = tempfile.mkdtemp(prefix="gpu_checks_")  # the CPU reference's report and log, removed once read
    ref_path, log_path = os.path.join(tmp, "cpu_reference.json"), os.path.join(tmp, "cpu_reference.log")
    if need_cpu and not on_cpu:
        log = open(log_path, "w")
        proc = _start_cpu_reference(quick, only, ref_path, log)
    try:
        checks = _device_checks(only, table, chunk, on_cpu, need_cpu, proc, ref_path, log_path, cpu_timeout, echo)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if log is not None:
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    failed = [c["name"] for c in checks if not c["passed"]]
    return {"script": "benchmarks/gpu_checks.py", "quick": quick,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            **device_meta(), "alpha_side": ALPHA_SIDE, "passed": not failed, "failed": failed,
            "seconds": round(time.perf_counter() - t0, 1), "checks": list(checks)}


def _device_checks(only, table, chunk, on_cpu, need_cpu, proc, ref_path, log_path, cpu_timeout, echo) -> list:
    """The decided checks of :func:`run_checks` (the CPU reference, where one runs, already started as ``proc``)."""
    checks = _Checks(echo)
    if "poisson_vs_pld" in only:
        checks.append(check_poisson(table["poisson"]["device"], chunk))
    bminsep = {}
    if "bminsep8_fused_equals_unfused" in only or "bminsep8_vs_cpu" in only:
        bminsep = {k: run_estimate("bminsep8", table["bminsep8"]["device"], DEVICE_SEED, chunk, k)
                   for k in ("unfused", "fused")}
    if "bminsep8_fused_equals_unfused" in only:
        checks.append(check_fused_equals_unfused(bminsep))
    truncated = {}
    if "truncated_vs_cpu" in only:
        truncated = {"auto": run_estimate("truncated", table["truncated"]["device"], DEVICE_SEED, chunk)}
    replicas = {}
    if need_cpu and not on_cpu:
        for name in ("bminsep8", "truncated"):
            if f"{name}_vs_cpu" in only:
                replicas[name] = run_estimate(name, table[name]["cpu"], CPU_SEED, CPU_CHUNK)
    if need_cpu:
        if on_cpu:
            refs, why = cpu_references(table, only), ""
        else:
            refs, why = _wait_cpu_reference(proc, ref_path, log_path, cpu_timeout)
        refs = refs or {}
        if "bminsep8_vs_cpu" in only:
            checks.append(check_vs_cpu("bminsep8_vs_cpu", bminsep, refs.get("bminsep8"), replicas.get("bminsep8"),
                                       why))
        if "truncated_vs_cpu" in only:
            checks.append(check_vs_cpu("truncated_vs_cpu", truncated, refs.get("truncated"),
                                       replicas.get("truncated"), why))
    return checks


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sample counts (a CPU smoke test, well under a minute)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "benchmarks", "results"),
                    help="directory of gpu_checks_<card>.json (default benchmarks/results)")
    ap.add_argument("--checks", default=",".join(CHECKS), help=f"comma-separated subset of {', '.join(CHECKS)}")
    ap.add_argument("--cpu-reference", default="", metavar="PATH",
                    help="internal: compute the CPU runs of the *_vs_cpu checks and write them to PATH as JSON")
    ap.add_argument("--cpu-timeout", type=float, default=CPU_REFERENCE_TIMEOUT,
                    help="seconds to wait for the CPU reference (its checks fail past it)")
    ap.add_argument("--cpu-subprocess", action="store_true",
                    help="make the CPU runs in a child process (as on a device) even where the backend is the CPU")
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if args.cpu_reference:
        from mcacct.core.platform import use_cpu_cores
        use_cpu_cores()                         # one JAX CPU device per core, as the CLI does
        refs = cpu_references(QUICK_SAMPLES if args.quick else SAMPLES, tuple(args.checks.split(",")))
        with open(args.cpu_reference, "w") as f:
            json.dump(refs, f)
        return 0
    only = tuple(c for c in args.checks.split(",") if c)
    unknown = [c for c in only if c not in CHECKS]
    if unknown:
        raise SystemExit(f"unknown --checks {unknown}; choose from {list(CHECKS)}")
    report = run_checks(args.quick, only, args.cpu_subprocess, args.cpu_timeout,
                        echo=lambda line: print(line, flush=True))
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, f"gpu_checks_{card_name()}.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    print(f"{len(report['checks']) - len(report['failed'])} passed, {len(report['failed'])} failed "
          f"({report['device']}, jax {report['jax']}, {report['seconds']} s): {path}", flush=True)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
