"""Precision policy evidence: float32 vs float64 loss kernels on the same keys (same float64 draws).

Reports the worst relative difference of delta-hat over a grid of epsilons, and the max absolute difference
of the per-sample losses, for the benchmark configurations. Writes benchmarks/results/precision_<device>.json.

    python benchmarks/precision.py [--samples 20000]
"""
import argparse
import json
import os

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)  # an application: float64 globally (importing mcacct leaves it alone)
import mcacct
from mcacct.engine.problem import Problem, chunk_losses

CONFIGS = {
    "n1024_b8": (1024, 8, mcacct.sampling_prob_from_batch_size(1, 256, 8), (0.7, 1.0)),
    "n7200_b256": (7200, 256, mcacct.sampling_prob_from_batch_size(1793, 14_745_600, 256), (0.47, 0.6)),
    "n1024_b1_poisson": (1024, 1, 1 / 256, (0.7, 1.0)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--chunk-size", type=int, default=2000)
    args = ap.parse_args()
    dev = jax.devices()[0]
    out = {"device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}", "samples": args.samples, "rows": []}
    eps_grid = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
    for name, (n, b, p, sigmas) in CONFIGS.items():
        for recursion in ("scan", "blocked", "linear") if b > 1 else ("scan", "linear"):
            for sigma in sigmas:
                c = tuple(np.ones(b) / np.sqrt(b))
                losses = {}
                for dt in ("float64", "float32"):
                    pb = Problem(mcacct.BMinSep(p, b, n), mcacct.BandedToeplitz(c), dtype=dt, recursion=recursion)
                    parts = []
                    for direction in ("remove", "add"):
                        k = jax.random.fold_in(jax.random.key(0), int(direction == "remove"))
                        ls = [np.asarray(chunk_losses(jax.random.fold_in(k, j), sigma, pb, args.chunk_size, direction),
                                         np.float64) for j in range(args.samples // args.chunk_size)]
                        parts.append(np.concatenate(ls))
                    losses[dt] = parts
                worst_rel, max_abs = 0.0, 0.0
                for d in range(2):
                    l64, l32 = losses["float64"][d], losses["float32"][d]
                    max_abs = max(max_abs, float(np.max(np.abs(l64 - l32))))
                    for e in eps_grid:
                        d64 = np.mean(np.maximum(0, -np.expm1(e - l64)))
                        d32 = np.mean(np.maximum(0, -np.expm1(e - l32)))
                        if d64 > 0:
                            worst_rel = max(worst_rel, abs(d32 - d64) / d64)
                row = {"config": name, "recursion": recursion, "sigma": sigma,
                       "worst_relative_delta_difference": worst_rel, "max_abs_loss_difference": max_abs}
                out["rows"].append(row)
                print(row, flush=True)
    os.makedirs("benchmarks/results", exist_ok=True)
    tag = "gpu" if dev.platform != "cpu" else "cpu"
    with open(f"benchmarks/results/precision_{tag}.json", "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
