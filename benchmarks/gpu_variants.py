"""Experiment: variants of the n=7200, b=256 kernel stages on an accelerator (cumsum vs matmul, layouts)."""
import json, os, sys, time
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)  # an application: float64 globally (importing mcacct leaves it alone)
import mcacct
from mcacct.schemes.bminsep import log_ratio_from_terms
from mcacct.kernels.recursion import blocked_first_values

def T(fn, *a, reps=5):
    jax.block_until_ready(fn(*a)); t0 = time.perf_counter()
    for _ in range(reps): o = fn(*a)
    jax.block_until_ready(o); return (time.perf_counter() - t0) / reps

S = int(sys.argv[1]) if len(sys.argv) > 1 else 65536
res = {}
for n, b in ((7200, 256), (1024, 8)):
    k = jax.random.key(0)
    p = mcacct.sampling_prob_from_batch_size(1793, 14_745_600, 256) if b == 256 else mcacct.sampling_prob_from_batch_size(1, 256, 8)
    m = -(-n // b)
    nb = (n // b) * b
    y = jax.random.normal(k, (S, nb), jnp.float32)
    yt = jax.random.normal(k, (nb, S), jnp.float32)
    r = {}
    r["transpose"] = T(jax.jit(lambda y: y.T + 0), y)
    tri = jnp.triu(jnp.ones((b, b), jnp.float32))  # tri[t, j] = 1 if t <= j: x @ tri = inclusive cumsum
    def cs_cumsum(y):
        return jnp.cumsum(y.reshape(S, -1, b), axis=-1)
    def cs_matmul(y):
        return jnp.einsum("smt,tj->smj", y.reshape(S, -1, b), tri,
                          precision=jax.lax.Precision.HIGHEST)
    def cs_matmul_tm(yt):
        return jnp.einsum("mts,tj->mjs", yt.reshape(-1, b, S), tri, precision=jax.lax.Precision.HIGHEST)
    def cs_assoc(y):
        return jax.lax.associative_scan(jnp.add, y.reshape(S, -1, b), axis=2)
    r["blockcumsum_cumsum"] = T(jax.jit(cs_cumsum), y)
    r["blockcumsum_matmul"] = T(jax.jit(cs_matmul), y)
    r["blockcumsum_matmul_timemajor"] = T(jax.jit(cs_matmul_tm), yt)
    r["blockcumsum_assoc"] = T(jax.jit(cs_assoc), y)
    err = jnp.max(jnp.abs(cs_matmul(y) - cs_cumsum(y)))
    r["matmul_vs_cumsum_maxabs"] = float(err)
    sch = mcacct.BMinSep(p, b, n)
    ell_t = jax.random.normal(k, (n, S), jnp.float32) * 0.1 - 1.0
    lp, lq = jnp.float32(np.log(p)), jnp.float32(np.log1p(-p))
    r["recursion_blocked_timemajor"] = T(jax.jit(lambda e: blocked_first_values(e, b, lp, lq, False)), ell_t)
    r["recursion_blocked_batchmajor(with moveaxis)"] = T(jax.jit(lambda e: log_ratio_from_terms(e, sch, "blocked")), ell_t.T)
    res[f"n{n}_b{b}"] = {k2: (v if "maxabs" in k2 else {"s_per_chunk": v, "samples_per_s": S / v}) for k2, v in r.items()}
    print(n, b, {k2: (f"{S / v:.3g}/s" if "maxabs" not in k2 else v) for k2, v in r.items()}, flush=True)
os.makedirs("benchmarks/results", exist_ok=True)
json.dump(res, open("benchmarks/results/gpu_variants.json", "w"), indent=1)
