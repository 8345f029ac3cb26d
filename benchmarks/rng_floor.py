"""How fast can n Gaussian draws be made on this machine? A floor under any Monte Carlo kernel's time per sample.

Every sample of y needs n fresh N(0, sigma^2) coordinates (the covariance of y has full rank n), so the time to
draw n float64 normals bounds samples/s from above whatever the loss computation costs. This script times, in
one run: the raw random bits (threefry, rbg/Philox, unsafe_rbg), jax.random.normal in float64, mcacct's
sampler (`mcacct.kernels.normal.standard_normal`), NumPy's fastest ziggurat generators (single thread, the reference's
own RNG), and the NumPy reference's samples/s; it reports the ceiling each floor puts on samples/s next to 10x
the reference.

    python benchmarks/rng_floor.py [--no-reference]   -> benchmarks/results/rng_floor_<device>.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)  # an application: float64 globally (importing mcacct leaves it alone)
import mcacct
from mcacct.kernels.normal import standard_normal

CONFIGS = {"n1024_b8": (1024, 8, mcacct.sampling_prob_from_batch_size(1, 256, 8)),
           "n7200_b256": (7200, 256, mcacct.sampling_prob_from_batch_size(1793, 14_745_600, 256))}


def _time_jax(fn, key, reps):
    fn = jax.jit(fn)
    jax.block_until_ready(fn(key))
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn(key)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-reference", action="store_true", help="skip the jax-privacy reference")
    ap.add_argument("--block", type=int, default=256, help="samples per timed block (default 256)")
    args = ap.parse_args()
    dev = jax.devices()[0]
    res = {"device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}", "cpu_count": os.cpu_count(),
           "machine": platform.processor() or platform.machine(), "jax": jax.__version__, "configs": {}}
    for name, (n, b, p) in CONFIGS.items():
        S = args.block if n <= 2048 else max(16, args.block // 8)
        reps = 20 if n <= 2048 else 5
        row = {"iterations": n, "block": S, "us_per_sample": {}}
        us = row["us_per_sample"]
        for impl in ("threefry2x32", "rbg", "unsafe_rbg"):
            k = jax.random.key(0, impl=impl)
            us[f"bits64_{impl}"] = _time_jax(lambda k: jax.random.bits(k, (n, S), jnp.uint64), k, reps) / S * 1e6
        k = jax.random.key(0)
        us["jax_random_normal_f64"] = _time_jax(lambda k: jax.random.normal(k, (n, S), jnp.float64), k, reps) / S * 1e6
        us["mcacct_standard_normal_f64"] = _time_jax(lambda k: standard_normal(k, (n, S)), k, reps) / S * 1e6
        out = np.empty((S, n))
        for bg in ("SFC64", "PCG64", "Philox"):
            g = np.random.Generator(getattr(np.random, bg)(0))
            g.standard_normal(out=out)
            t0 = time.perf_counter()
            for _ in range(reps):
                g.standard_normal(out=out)
            us[f"numpy_{bg}_ziggurat_1thread"] = (time.perf_counter() - t0) / reps / S * 1e6
        row["ceiling_samples_per_s"] = {k2: 1e6 / v for k2, v in us.items()}
        if not args.no_reference:
            from throughput import time_reference
            row["reference"] = time_reference(n, b, p, 1.0, 2000 if n > 2000 else 5000, 5.0)
            row["ten_x_reference_samples_per_s"] = 10 * row["reference"]["samples_per_s"]
        res["configs"][name] = row
        print(name, json.dumps(row, indent=1), flush=True)
    os.makedirs("benchmarks/results", exist_ok=True)
    tag = "gpu" if dev.platform != "cpu" else "cpu"
    with open(f"benchmarks/results/rng_floor_{tag}.json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
