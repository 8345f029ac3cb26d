"""Throughput of mcacct's fused sampler + privacy-loss kernel against the jax-privacy NumPy reference.

Both are timed in the same run on the same machine (positive direction: sample generation + privacy loss),
with, on CPU, both directions at one sigma on shared draws by the unfused and by the fused kernel (its XLA form;
``ladder1_unfused``/``ladder1_fused``, draws/s), which decides ``"auto"``'s CPU entry in
``mcacct/engine/kernel_choice.py``,
together with the *noise-only ceiling*: the same chunk and block structure drawing only the ``(n, block)``
standard normals (``noise_only``), so ``fraction_of_noise_floor = mcacct_float64 / noise_only``. Every figure is
the median of ``--repeats`` timings (default 3). Compilation / warm-up is reported separately. ``--prng`` sets
JAX's default PRNG implementation for the run (e.g. ``rbg``, ``philox4x32``) to compare generators. Figures go
to benchmarks/results/throughput_<tag>.json and a PNG (redraw it from the JSON with benchmarks/throughput_plot.py).

    python benchmarks/throughput.py [--quick] [--no-reference] [--scaling] [--chunk-size 8192] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import sys
import time

import jax
import numpy as np

import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)  # an application: float64 globally (importing mcacct leaves it alone)
import mcacct
from mcacct.engine.problem import Problem, block_keys, block_size, chunk_losses
from mcacct.engine.runner import block_ladder_losses
from mcacct.kernels.normal import standard_normal

RESULTS = os.path.join(os.path.dirname(__file__), "results")

CONFIGS = {
    # name: (iterations, min_sep, sampling_prob)
    "n1024_b8": (1024, 8, mcacct.sampling_prob_from_batch_size(1, 256, 8)),
    "n7200_b256": (7200, 256, mcacct.sampling_prob_from_batch_size(1793, 14_745_600, 256)),
    "n1024_b1_poisson": (1024, 1, 1 / 256),
}


def _problem(n, b, p, dtype, dot_method="auto"):
    c = tuple(float(v) for v in np.ones(b) / np.sqrt(b))
    return Problem(mcacct.BMinSep(p, b, n), mcacct.BandedToeplitz(c), dtype=dtype, dot_method=dot_method)


def _noise_chunk(problem, chunk):
    """The noise-only ceiling: the chunk's blocks (same keys and shapes as :func:`chunk_losses`) draw their
    ``(n, block)`` standard normals and return column sums, nothing else."""
    n, bsize = problem.scheme.iterations, block_size(problem, chunk)

    @jax.jit
    def run(key, sigma):
        one = lambda k: jnp.sum(standard_normal(k, (n, bsize)) * sigma, axis=0)  # noqa: E731
        keys = block_keys(key, problem, chunk)
        out = jax.lax.map(one, keys) if jax.default_backend() == "cpu" else jax.vmap(one)(keys)
        return out.reshape(-1)[:chunk]
    return run


def _time_loop(fn, chunk, min_seconds):
    key = jax.random.key(0)
    t0 = time.perf_counter()
    fn(jax.random.fold_in(key, 0)).block_until_ready()
    compile_s = time.perf_counter() - t0
    done, c = 0, 1
    t0 = time.perf_counter()
    while True:
        out = fn(jax.random.fold_in(key, c))
        c += 1
        done += chunk
        if time.perf_counter() - t0 > min_seconds:
            out.block_until_ready()
            break
    out.block_until_ready()
    el = time.perf_counter() - t0
    return {"samples_per_s": done / el, "compile_s": compile_s, "timed_samples": done, "timed_s": el}


def _median_of(runs):
    rates = sorted(r["samples_per_s"] for r in runs)
    return {"samples_per_s": rates[len(rates) // 2], "runs_samples_per_s": [r["samples_per_s"] for r in runs],
            "compile_s": runs[0].get("compile_s", runs[0].get("warmup_s"))}


def time_mcacct(problem, sigma, chunk, min_seconds, repeats=1):
    fn = lambda k: chunk_losses(k, sigma, problem, chunk, "remove")  # noqa: E731
    return _median_of([_time_loop(fn, chunk, min_seconds) for _ in range(repeats)])


def time_ladder(problem, sigma, chunk, min_seconds, repeats=1):
    """Both directions at one sigma on shared draws (the calibration's program) with ``problem.loss_kernel``
    (``"fused"``: the fused kernel's XLA form on CPU); samples/s counts draws (each gives two losses)."""
    bsize = block_size(problem, chunk)
    sigmas = jnp.asarray([sigma])

    @jax.jit
    def fn(key):
        keys = block_keys(key, problem, chunk)
        return jax.lax.map(lambda k: block_ladder_losses(k, sigmas, problem, bsize), keys)
    return _median_of([_time_loop(fn, chunk, min_seconds) for _ in range(repeats)])


def time_noise_only(problem, sigma, chunk, min_seconds, repeats=1):
    run = _noise_chunk(problem, chunk)
    fn = lambda k: run(k, sigma)  # noqa: E731
    return _median_of([_time_loop(fn, chunk, min_seconds) for _ in range(repeats)])


def time_reference(n, b, p, sigma, num, min_seconds):
    from jax_privacy import batch_selection
    from jax_privacy.experimental.monte_carlo import sample_generation as sg
    strat = batch_selection.BMinSepSampling(sampling_prob=p, iterations=n, min_sep=b, warm_start=True)
    c = np.ones(b) / np.sqrt(b)
    t0 = time.perf_counter()
    sg.get_privacy_loss_sample(strat, sigma, c, seed=0, positive_sample=True, num_samples=64)
    warm = time.perf_counter() - t0
    done, t0, seed = 0, time.perf_counter(), 1
    while time.perf_counter() - t0 < min_seconds:
        sg.get_privacy_loss_sample(strat, sigma, c, seed=seed, positive_sample=True, num_samples=num)
        done += num
        seed += 1
    el = time.perf_counter() - t0
    return {"samples_per_s": done / el, "warmup_s": warm, "timed_samples": done, "timed_s": el}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="short timings")
    ap.add_argument("--no-reference", action="store_true", help="skip the jax-privacy reference")
    ap.add_argument("--scaling", action="store_true", help="also sweep n, b and chunk size")
    ap.add_argument("--chunk-size", type=int, default=0, help="chunk size (default: 4096 CPU, 65536 GPU)")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--tag", default="")
    ap.add_argument("--repeats", type=int, default=3, help="timings per figure; the median is reported")
    ap.add_argument("--prng", default="", help="JAX default PRNG implementation for this run (default: threefry2x32)")
    args = ap.parse_args()
    if args.prng:
        jax.config.update("jax_default_prng_impl", args.prng)
    dev = jax.devices()[0]
    on_gpu = dev.platform != "cpu"
    chunk = args.chunk_size or (65536 if on_gpu else 4096)
    secs = 2.0 if args.quick else 6.0
    sigma = 1.0
    res = {"device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}", "device_count": jax.device_count(),
           "jax": jax.__version__, "python": platform.python_version(), "cpu_count": os.cpu_count(),
           "chunk_size": chunk, "sigma": sigma, "c_col": "ones(b)/sqrt(b)", "warm_start": True,
           "prng": str(jax.config.jax_default_prng_impl), "repeats": args.repeats, "statistic": "median",
           "results": []}
    for name in args.configs.split(","):
        n, b, p = CONFIGS[name]
        row = {"config": name, "iterations": n, "min_sep": b, "sampling_prob": p}
        for dt in args.dtypes.split(","):
            for method in (["auto", "fft"] if b > 32 else ["auto"]):
                key = f"mcacct_{dt}" + ("" if method == "auto" else f"_{method}")
                row[key] = time_mcacct(_problem(n, b, p, dt, method), sigma, chunk, secs, args.repeats)
                print(name, key, row[key], file=sys.stderr, flush=True)
        if "float64" in args.dtypes.split(",") and not on_gpu:
            # the fused kernel's XLA form against the unfused kernel, both directions on shared draws (CPU)
            for lk in ("unfused", "fused"):
                pb = dataclasses.replace(_problem(n, b, p, "float64"), loss_kernel=lk)
                row[f"ladder1_{lk}"] = time_ladder(pb, sigma, chunk, secs, args.repeats)
                print(name, f"ladder1_{lk}", row[f"ladder1_{lk}"], file=sys.stderr, flush=True)
            row["fused_vs_unfused"] = (row["ladder1_fused"]["samples_per_s"]
                                       / row["ladder1_unfused"]["samples_per_s"])
        row["noise_only"] = time_noise_only(_problem(n, b, p, "float64"), sigma, chunk, secs, args.repeats)
        print(name, "noise_only", row["noise_only"], file=sys.stderr, flush=True)
        if "mcacct_float64" in row:
            row["fraction_of_noise_floor"] = row["mcacct_float64"]["samples_per_s"] / row["noise_only"]["samples_per_s"]
        if not args.no_reference:
            row["reference"] = _median_of([time_reference(n, b, p, sigma, 2000 if n > 2000 else 5000, secs)
                                           for _ in range(args.repeats)])
            print(name, "reference", row["reference"], file=sys.stderr, flush=True)
            for k in list(row):
                if k.startswith("mcacct_"):
                    row[f"speedup_{k[7:]}"] = row[k]["samples_per_s"] / row["reference"]["samples_per_s"]
        res["results"].append(row)
    if args.scaling:
        sc = []
        for n in (256, 1024, 4096, 8192):
            sc.append({"sweep": "n", "iterations": n, "min_sep": 8,
                       **time_mcacct(_problem(n, 8, 1 / 256, "float64"), sigma, chunk, secs / 2)})
        for b in (1, 4, 16, 64, 256):
            sc.append({"sweep": "b", "iterations": 1024, "min_sep": b,
                       **time_mcacct(_problem(1024, b, 1 / 1024, "float64"), sigma, chunk, secs / 2)})
        for ch in (256, 1024, 4096, 16384):
            sc.append({"sweep": "chunk", "chunk_size": ch, "iterations": 1024, "min_sep": 8,
                       **time_mcacct(_problem(1024, 8, 1 / 256, "float64"), sigma, ch, secs / 2)})
        res["scaling"] = sc
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    os.makedirs(RESULTS, exist_ok=True)
    tag = args.tag or ("gpu" if on_gpu else "cpu")
    path = os.path.join(RESULTS, f"throughput_{tag}.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    try:
        from throughput_plot import plot_throughput  # benchmarks/ is the script's directory
        plot_throughput(res, os.path.join(RESULTS, f"throughput_{tag}.png"))
    except ImportError:
        pass


if __name__ == "__main__":
    main()
