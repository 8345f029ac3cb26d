"""The production case of Dong & Ganesh 2026 (arXiv:2602.09338, §7.4) at full shape: truncated 256-min-sep,
n = 7200, expected batch 1793 of M = 14,745,600, B_max = 2048, sigma ladder 0.56/0.5/0.47/0.44, both directions.

One run measures, on the same machine and in the same process (medians of ``--repeats`` timings each):

* jax-privacy 2.0's NumPy reference (PyPI), truncated and untruncated b-min-sep, samples/s of one direction.
  Speed only: its loss reverses the squared norms of the last b - 1 columns for three or more bands, so its
  values are not compared here (tests compare values with c of at most two bands);
* mcacct ``TruncatedBMinSep`` at one sigma (0.47), one direction, through the engine's chunk program;
* the 4-sigma ladder over both directions on shared draws (the calibration's program): draws/s and
  (sigma, direction, sample) evaluations/s, with every loss computed (``mcacct_truncated_ladder``); with the add
  direction's provably zero contributions skipped at epsilon 10 (``_skip_add``); and with the remove direction's
  too (``mcacct_truncated_ladder_skip``, the default of runs at that epsilon on CPU: the same sums). These three
  are timed in turns, at least 5 rounds, so that their ratios compare runs made side by side;
* mcacct ``BMinSep`` at the same shape and c, one sigma, one direction, and its ladder;
* the expected one-device time of the 7.5e9-sample verification: from the ladder's measured draws/s, and from
  ``mcacct calibrate --plan-only`` itself (a fresh process: its own probe and projection);
* the production job as a user runs it (``shard_vs_plan``): ``calibrate --plan-only --out DIR``, then
  ``mcacct sample --plan DIR --shard 0 --num-shards K`` shard jobs of ``--shard-chunks`` and 4 times as many
  chunks, the draws/s of the difference, and the projection's draws/s over it (issue #39 asks for a projection
  within 5% of the shard job).

It runs with c = ones(256)/16 (the constant-c prefix path) and with the MSE-optimised c for 256 bands at
n = 7200 (``mcacct strategy --iterations 7200 --bands 256``; the FFT sliding-sum path). Figures go to
``benchmarks/results/production_<device>.json``.

    python benchmarks/production.py [--quick] [--c ones,mse] [--repeats 3] [--no-reference]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.engine.problem import Problem, block_keys, block_size, chunk_losses
from mcacct.engine.losses import ladder_losses
from mcacct.engine.skips import remove_skip_arrays, skip_bound
from mcacct.kernels.shortcuts import RemoveSkip
from mcacct.core.precision import x64_scope
from mcacct.core.rates import sampling_prob_from_batch_size
from mcacct.schemes.bminsep import BMinSep
from mcacct.strategies.banded import BandedToeplitz
from mcacct.schemes.truncated import TruncatedBMinSep

M, BATCH, B, N, BMAX = 14_745_600, 1793, 256, 7200, 2048
LADDER = (0.44, 0.47, 0.5, 0.56)
SIGMA = 0.47
SAMPLES_7_4 = 7_500_000_000
EPSILON = 10.0


def _median(values):
    return sorted(values)[len(values) // 2]


def _first_call(fn) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn(jax.random.key(0)))
    return time.perf_counter() - t0


def _rate(fn, per_call: int, min_seconds: float, seed: int) -> tuple[float, int]:
    """Calls ``fn`` on fresh keys for at least ``min_seconds``: ``(per_call`` units per second, the next seed)."""
    done, t0 = 0, time.perf_counter()
    while True:
        jax.block_until_ready(fn(jax.random.key(seed)))
        seed += 1
        done += per_call
        if time.perf_counter() - t0 >= min_seconds:
            return done / (time.perf_counter() - t0), seed


def _time(fn, per_call: int, repeats: int, min_seconds: float) -> dict:
    compile_s, rates, seed = _first_call(fn), [], 1
    for _ in range(repeats):
        rate, seed = _rate(fn, per_call, min_seconds, seed)
        rates.append(rate)
    return {"per_s": _median(rates), "runs_per_s": rates, "first_call_s": compile_s}


def _reference(p: float, c: np.ndarray, truncated: bool, repeats: int, min_seconds: float, num: int) -> dict:
    from jax_privacy import batch_selection
    from jax_privacy.experimental.monte_carlo import sample_generation as sg
    strat = batch_selection.BMinSepSampling(sampling_prob=p, iterations=N, min_sep=B, warm_start=True,
                                            truncated_batch_size=BMAX if truncated else None)
    kw = {"dataset_size": M} if truncated else {}
    seed = [0]

    def run(_key):
        seed[0] += 1
        return sg.get_privacy_loss_sample(strat, SIGMA, c, seed=seed[0], positive_sample=True, num_samples=num, **kw)

    return _time(run, num, repeats, min_seconds)


def _mcacct_single(problem: Problem, chunk: int, repeats: int, min_seconds: float) -> dict:
    fn = lambda k: chunk_losses(k, SIGMA, problem, chunk, "remove")  # noqa: E731
    return _time(fn, chunk, repeats, min_seconds)


def _ladder_fn(problem: Problem, chunk: int, skip: str = ""):
    """The 4-sigma ladder, both directions, as ``(fn(key), meta)``; ``skip``: ``"add"`` with the add direction's
    provably zero contributions skipped at the production epsilon 10 (mcacct.kernels.shortcuts), ``"both"`` with the
    remove direction's too (mcacct.kernels.bound, on CPU): the same sums, as the engine runs by default."""
    sigmas = jnp.asarray(LADDER)
    bsize = block_size(problem, chunk)
    add_bound = skip_bound(problem, LADDER, (EPSILON,)) if skip else None
    if skip and add_bound is None:
        raise AssertionError("the add skip does not apply at the production epsilon")
    arrays = remove_skip_arrays(problem, LADDER, (EPSILON,)) if skip == "both" else None
    rskip = None if arrays is None else RemoveSkip(*jnp.asarray(arrays).T)

    @jax.jit
    def fn(key, rskip):
        keys = block_keys(key, problem, chunk)
        return jax.lax.map(lambda k: ladder_losses(problem.mechanism(), k, sigmas, bsize, add_bound, rskip), keys)

    return (lambda key: fn(key, rskip)), {"add_bound": add_bound, "remove_skip": arrays is not None}


def _ladder_row(timing: dict, meta: dict) -> dict:
    out = dict(timing, **meta)
    out["draws_per_s"] = out.pop("per_s")
    out["evaluations_per_s"] = out["draws_per_s"] * 2 * len(LADDER)
    out["runs_draws_per_s"] = out.pop("runs_per_s")
    return out


def _mcacct_ladder(problem: Problem, chunk: int, repeats: int, min_seconds: float, skip: str = "") -> dict:
    fn, meta = _ladder_fn(problem, chunk, skip)
    return _ladder_row(_time(fn, chunk, repeats, min_seconds), meta)


def _interleaved_ladders(problem: Problem, chunk: int, repeats: int, min_seconds: float) -> dict:
    """The truncated ladder with every loss computed, with the add skip, and with both skips, timed in turns (each
    round times each once) so that a box whose speed drifts during the run moves all three alike: the ratios of
    issue #39's target compare runs made side by side."""
    fns = {name: _ladder_fn(problem, chunk, skip) for name, skip in (("mcacct_truncated_ladder", ""),
                                                                      ("mcacct_truncated_ladder_skip_add", "add"),
                                                                      ("mcacct_truncated_ladder_skip", "both"))}
    first, rates, seed = {name: _first_call(fn) for name, (fn, _) in fns.items()}, {name: [] for name in fns}, 1
    for _ in range(repeats):
        for name, (fn, _) in fns.items():
            rate, seed = _rate(fn, chunk, min_seconds, seed)
            rates[name].append(rate)
    return {name: _ladder_row({"per_s": _median(rates[name]), "runs_per_s": rates[name], "first_call_s": first[name],
                               "interleaved": True}, meta) for name, (_, meta) in fns.items()}


def _plan_only(c: np.ndarray, cpu_devices: str = "auto") -> dict:
    """``mcacct calibrate --plan-only`` at §7.4 (fresh process, JSON): its own probe and projection, with
    ``--cpu-devices`` (``auto``: a device per core on CPU). ``expected_days``: the verification on this machine with
    the probe's devices; ``expected_days_one_device``: on one of them."""
    cmd = _plan_command(c, cpu_devices)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": r.stderr[-2000:]}
    plan = json.loads(r.stdout.strip().splitlines()[-1])
    seconds = plan["expected_seconds_at_most"]
    return {"probe": plan.get("probe"), "expected_seconds_at_most": seconds, "cpu_devices": cpu_devices,
            "devices": (plan.get("probe") or {}).get("devices"), "expected_days": seconds["verification"] / 86400.0,
            "expected_days_one_device": seconds.get("verification_one_device", seconds["verification"]) / 86400.0,
            "chunk_size": plan.get("plan", {}).get("chunk_size"), "wall_s": time.perf_counter() - t0}


def _plan_command(c: np.ndarray, cpu_devices: str) -> list[str]:
    return [sys.executable, "-m", "mcacct", "calibrate", "--scheme", "truncated", "--iterations", str(N),
            "--min-sep", str(B), "--batch-size", str(BATCH), "--dataset-size", str(M), "--max-batch-size", str(BMAX),
            "--c-col", ",".join(repr(float(v)) for v in c), "--epsilon", "10", "--delta", "1.301e-8",
            "--samples", str(SAMPLES_7_4), "--sigmas", ",".join(str(s) for s in LADDER), "--plan-only", "--json",
            "--cpu-devices", cpu_devices]


def _shard_vs_plan(c: np.ndarray, shard_chunks: int = 8, cpu_devices: str = "auto",
                   checkpoint_seconds: float | None = None) -> dict:
    """The production job as a user runs it: ``calibrate --plan-only --out DIR`` at §7.4 (its probe and
    projection), then shard jobs of that plan, ``mcacct sample --plan DIR --shard 0 --num-shards K``, each in a fresh
    process: a warm-up (it compiles and fills the persistent cache), then shards of ``shard_chunks`` and of
    ``4 * shard_chunks`` chunks (each in its own copy of the plan). ``shard_draws_per_s``: the larger shard's
    steady rate, its groups after the first from their arrivals (``sample``'s ``steady_draws_per_second``: what
    every process pays once, start, tables, reading the cache, left out); ``shard_draws_per_s_differenced``: the
    extra draws of the larger shard over its extra wall time (the earlier reading: seconds of noise in the fixed
    costs of two processes); ``ratio``: the projection's draws/s over the shard's (issue #39: within 5%). Shard jobs
    drop candidates that already failed (the projection counts every candidate to the end), so the rates compare only
    where every candidate stays: at §7.4 its ladder; ``accelerator.py --part plan --quick`` uses a ladder of larger
    sigmas for its small shape. ``checkpoint_seconds``: the shards' ``--checkpoint-seconds`` (default: the CLI's,
    a checkpoint after every group)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan")
        t0 = time.perf_counter()
        r = subprocess.run(_plan_command(c, cpu_devices) + ["--out", out, "--quiet"], capture_output=True, text=True)
        if r.returncode != 0:
            return {"error": "calibrate --plan-only: " + r.stderr[-2000:]}
        plan = json.loads(r.stdout.strip().splitlines()[-1])
        plan_s = time.perf_counter() - t0
        chunk = plan["plan"]["chunk_size"]
        n_chunks = -(-int(plan["plan"]["num_samples"]) // chunk)
        runs = []
        for i, k in enumerate((shard_chunks, shard_chunks, 4 * shard_chunks)):
            d = os.path.join(tmp, f"shard{i}")
            shutil.copytree(out, d)
            cmd = [sys.executable, "-m", "mcacct", "sample", "--plan", d, "--shard", "0",
                   "--num-shards", str(max(1, n_chunks // k)), "--json", "--quiet", "--cpu-devices", cpu_devices]
            if checkpoint_seconds is not None:
                cmd += ["--checkpoint-seconds", str(checkpoint_seconds)]
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                return {"error": "sample --plan: " + r.stderr[-2000:]}
            shard = json.loads(r.stdout.strip().splitlines()[-1])
            lo, hi = shard["chunks"]
            runs.append({"chunks": hi - lo, "wall_s": time.perf_counter() - t0, "seconds": shard["seconds"],
                         "compile_seconds": shard["compile_seconds"], "devices": shard["devices"],
                         "steady_draws_per_s": shard.get("steady_draws_per_second")})
    projected = plan["expected_seconds_at_most"]["verification"]
    plan_rate = int(plan["plan"]["num_samples"]) / projected
    row = {"chunk_size": chunk, "checkpoint_seconds": checkpoint_seconds, "plan_only_draws_per_s": plan_rate, "plan_only_expected_s": projected,
           "plan_only_wall_s": plan_s, "shards": {"warm_up": runs[0], "small": runs[1], "large": runs[2]}}
    extra_s = runs[2]["wall_s"] - runs[1]["wall_s"]
    if extra_s > 0:
        row["shard_draws_per_s_differenced"] = (runs[2]["chunks"] - runs[1]["chunks"]) * chunk / extra_s
    rate = runs[2]["steady_draws_per_s"]
    if not rate:
        row["error"] = "the larger shard reported no steady rate (fewer than two groups)"
        return row
    row.update({"shard_draws_per_s": rate, "ratio": plan_rate / rate,
                "shard_expected_s": int(plan["plan"]["num_samples"]) / rate,
                "within_5_percent": abs(plan_rate / rate - 1.0) <= 0.05})
    return row


def _c_col(kind: str) -> np.ndarray:
    if kind == "ones":
        return np.ones(B) / np.sqrt(B)
    from mcacct.strategies import optimize_banded_toeplitz
    c = np.asarray(optimize_banded_toeplitz(N, B).c_col, np.float64)
    return c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one short timing per figure (smoke run)")
    ap.add_argument("--c", default="ones,mse", help="comma list of c: ones (ones(256)/16), mse (MSE-optimised)")
    ap.add_argument("--repeats", type=int, default=3, help="timings per figure; the median is reported")
    ap.add_argument("--min-seconds", type=float, default=4.0, help="least seconds per timing")
    ap.add_argument("--chunk-size", type=int, default=4096)
    ap.add_argument("--no-reference", action="store_true", help="skip the jax-privacy reference")
    ap.add_argument("--reference-samples", type=int, default=32, help="samples per reference call")
    ap.add_argument("--no-plan", action="store_true", help="skip the calibrate --plan-only run and the shard job")
    ap.add_argument("--shard-chunks", type=int, default=8, help="chunks of the timed shard job of the plan")
    ap.add_argument("--out", default="", help="output JSON (default benchmarks/results/production_<device>.json)")
    args = ap.parse_args()
    repeats, min_s = (1, 0.5) if args.quick else (args.repeats, args.min_seconds)
    dev = jax.devices()[0]
    device = "cpu" if dev.platform == "cpu" else dev.device_kind.lower().replace(" ", "_")
    out_path = args.out or os.path.join(os.path.dirname(__file__), "results", f"production_{device}.json")
    p = sampling_prob_from_batch_size(BATCH, M, B)
    report = {"device": f"{dev.platform}:{dev.device_kind}", "cpu_count": os.cpu_count(), "jax": jax.__version__,
              "python": platform.python_version(), "shape": {"dataset_size": M, "expected_batch": BATCH,
                                                             "min_sep": B, "iterations": N, "max_batch_size": BMAX,
                                                             "sampling_prob": p, "warm_start": True},
              "sigma": SIGMA, "ladder": list(LADDER), "chunk_size": args.chunk_size, "repeats": repeats,
              "statistic": "median", "quick": args.quick, "results": {}}
    with x64_scope():
        for kind in args.c.split(","):
            c = _c_col(kind)
            strategy = BandedToeplitz(tuple(float(v) for v in c))
            row = {"c": "ones(256)/16" if kind == "ones" else "MSE-optimised, 256 bands, n=7200"}
            trunc = Problem(TruncatedBMinSep(p, B, N, M, BMAX, True), strategy)
            untr = Problem(BMinSep(p, B, N, True), strategy)
            if not args.no_reference:
                for name, flag in (("reference_truncated", True), ("reference_untruncated", False)):
                    print(f"[{kind}] {name} ...", file=sys.stderr, flush=True)
                    row[name] = _reference(p, c, flag, repeats, min_s, args.reference_samples)
            for name, fn, prob in (("mcacct_truncated", _mcacct_single, trunc),
                                   ("mcacct_bminsep", _mcacct_single, untr),
                                   ("mcacct_bminsep_ladder", _mcacct_ladder, untr)):
                print(f"[{kind}] {name} ...", file=sys.stderr, flush=True)
                row[name] = fn(prob, args.chunk_size, repeats, min_s)
            print(f"[{kind}] the truncated ladder: every loss, the add skip, both skips (in turns) ...",
                  file=sys.stderr, flush=True)
            row.update(_interleaved_ladders(trunc, args.chunk_size, max(repeats, 5) if not args.quick else 1,
                                            min_s))
            t = row["mcacct_truncated"]["per_s"]
            ratios = {"truncated_vs_bminsep": t / row["mcacct_bminsep"]["per_s"],
                      "ladder_skip_add_vs_full": (row["mcacct_truncated_ladder_skip_add"]["draws_per_s"]
                                                  / row["mcacct_truncated_ladder"]["draws_per_s"]),
                      "ladder_skip_vs_full": (row["mcacct_truncated_ladder_skip"]["draws_per_s"]
                                              / row["mcacct_truncated_ladder"]["draws_per_s"])}
            if "reference_truncated" in row:
                ref = row["reference_truncated"]["per_s"]
                ratios["truncated_vs_reference"] = t / ref
                ratios["ladder_draws_vs_reference_8_jobs"] = (row["mcacct_truncated_ladder"]["draws_per_s"]
                                                             / (ref / (2 * len(LADDER))))
            row["ratios"] = ratios
            draws = row["mcacct_truncated_ladder"]["draws_per_s"]
            skip_draws = row["mcacct_truncated_ladder_skip"]["draws_per_s"]
            row["plan_7_4"] = {"samples": SAMPLES_7_4, "expected_seconds_one_device": SAMPLES_7_4 / draws,
                               "expected_days_one_device": SAMPLES_7_4 / draws / 86400.0,
                               "expected_days_one_device_skip": SAMPLES_7_4 / skip_draws / 86400.0,
                               "note": "every candidate to the end on shared draws, as calibrate --plan-only projects;"
                                       " _skip: with both skips (the default)"}
            if not args.no_plan:
                print(f"[{kind}] calibrate --plan-only ...", file=sys.stderr, flush=True)
                row["calibrate_plan_only"] = _plan_only(c)
                if dev.platform == "cpu":  # the same with one CPU device, the default before --cpu-devices auto
                    print(f"[{kind}] calibrate --plan-only --cpu-devices 1 ...", file=sys.stderr, flush=True)
                    row["calibrate_plan_only_1_device"] = _plan_only(c, "1")
                print(f"[{kind}] a shard job of the plan (sample --plan) ...", file=sys.stderr, flush=True)
                row["shard_vs_plan"] = _shard_vs_plan(c, args.shard_chunks)
            report["results"][kind] = row
            print(json.dumps({kind: ratios, "plan_days": row["plan_7_4"]["expected_days_one_device"]}),
                  file=sys.stderr, flush=True)
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    tmp = out_path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(report, fh, indent=1)
    os.replace(tmp, out_path)
    print(out_path)


if __name__ == "__main__":
    main()
