"""Where the time goes: stage-by-stage timing of one chunk (RNG, participation, dot products, recursion).

``normal_*`` is ``jax.random.normal``, ``normal_mcacct_*`` the engine's sampler (:mod:`mcacct.kernels.normal`).

    python benchmarks/profile_stages.py [--chunk-size 65536]   -> benchmarks/results/profile_<device>.json
"""

from __future__ import annotations

import argparse
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)  # an application: float64 globally (importing mcacct leaves it alone)
import mcacct
from mcacct.schemes.bminsep import log_ratio_from_terms
from mcacct.kernels.sliding import participation_log_ratios
from mcacct.kernels.normal import standard_normal
from mcacct.schemes.bminsep import sample_participation

CONFIGS = {"n1024_b8": (1024, 8, mcacct.sampling_prob_from_batch_size(1, 256, 8)),
           "n7200_b256": (7200, 256, mcacct.sampling_prob_from_batch_size(1793, 14_745_600, 256))}


def _time(fn, *args, reps=5):
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(reps):
        out = fn(*args)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunk-size", type=int, default=0)
    args = ap.parse_args()
    dev = jax.devices()[0]
    S = args.chunk_size or (65536 if dev.platform != "cpu" else 2048)
    out = {"device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}", "chunk_size": S, "stages": {}}
    key = jax.random.key(0)
    for name, (n, b, p) in CONFIGS.items():
        sch = mcacct.BMinSep(p, b, n)
        st = mcacct.BandedToeplitz(tuple(np.ones(b) / np.sqrt(b)))
        r = {}
        for dt in (jnp.float64, jnp.float32):
            tag = jnp.dtype(dt).name
            r[f"normal_{tag}"] = _time(jax.jit(lambda k, dt=dt: jax.random.normal(k, (S, n), dt)), key)
            r[f"normal_mcacct_{tag}"] = _time(jax.jit(lambda k, dt=dt: standard_normal(k, (S, n), dt)), key)
            y = jax.random.normal(key, (S, n), dt)
            r[f"dot_prefix_{tag}"] = _time(jax.jit(lambda y: participation_log_ratios(y, 1.0, st.c_col, "prefix")), y)
            r[f"dot_fft_{tag}"] = _time(jax.jit(lambda y: participation_log_ratios(y, 1.0, st.c_col, "fft")), y)
            ell = participation_log_ratios(y, 1.0, st.c_col, "prefix")
            for rec in ("scan", "blocked", "linear"):
                r[f"recursion_{rec}_{tag}"] = _time(jax.jit(lambda e, rec=rec: log_ratio_from_terms(e, sch, rec)), ell)
        r["participation"] = _time(jax.jit(lambda k: sample_participation(k, sch, S)), key)
        out["stages"][name] = {k: {"seconds_per_chunk": v, "samples_per_s": S / v} for k, v in r.items()}
        print(name, {k: f"{S / v:.3g}/s" for k, v in r.items()}, flush=True)
    os.makedirs("benchmarks/results", exist_ok=True)
    tag = "gpu" if dev.platform != "cpu" else "cpu"
    with open(f"benchmarks/results/profile_{tag}.json", "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
