"""Full regime sweep of the privacy-loss recursions against an independent NumPy log-space oracle.

For every recursion (linear, scan, blocked, assoc), b in {1, 2, 33, 40, 64, 256}, p up to 0.99 and 1,
sigma / ||c|| down to 0.05, cold and warm start (float64), draws ``--samples`` outputs under P and under Q,
computes the per-iteration terms once in NumPy and compares each recursion's ln P/Q with the oracle's.
Reports the worst relative error (absolute where ``|L| < 1``) per recursion and regime, and writes
``benchmarks/results/recursion_sweep[_LABEL].json``. Uses only ``mcacct.schemes.bminsep.log_ratio_from_terms_t`` (an
API older versions have too), so the same script measures a checkout before and after a fix:

    python benchmarks/recursion_sweep.py --label after
    PYTHONPATH=/path/to/old/checkout python benchmarks/recursion_sweep.py --label before
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)  # an application: float64 globally (importing mcacct leaves it alone)
import mcacct
from mcacct.schemes.bminsep import log_ratio_from_terms_t

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "kernels"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from test_recursion_regimes import C_FOR_B, _draws, oracle_log_ratio, oracle_terms  # noqa: E402

RECURSIONS = ("linear", "scan", "blocked", "assoc")
PS = (0.05, 0.5, 0.9, 0.95, 0.99, 1.0)
REL_SIGMAS = (0.05, 0.2, 0.5, 2.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=64, help="outputs per configuration (half under P)")
    ap.add_argument("--label", default="", help="suffix of the output file")
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "results"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    worst: dict[str, dict[str, float]] = {r: {} for r in RECURSIONS}
    for b, c_col in sorted(C_FOR_B.items()):
        n = 4 * b + 7 if b > 2 else 60
        norm = float(np.sqrt(np.sum(np.square(c_col))))
        for p in PS:
            for warm in (False, True):
                fns = {r: jax.jit(lambda e, r=r, s=mcacct.BMinSep(p, b, n, warm_start=warm):
                                  log_ratio_from_terms_t(e, s, r)) for r in RECURSIONS}
                for rel in REL_SIGMAS:
                    sigma = rel * norm
                    y = _draws(n, b, p, c_col, sigma, warm, args.samples, seed=b * 1000 + int(p * 100))
                    ell = oracle_terms(y, c_col, sigma)
                    want = oracle_log_ratio(ell, b, p, warm)
                    for r, fn in fns.items():
                        got = np.asarray(fn(jnp.asarray(ell)))
                        err = np.abs(got - want) / np.maximum(np.abs(want), 1.0)
                        e = float(np.nanmax(err)) if np.all(np.isfinite(got)) else float("inf")
                        rows.append({"recursion": r, "b": b, "p": p, "warm": warm, "sigma_over_norm": rel,
                                     "worst_rel_error": e, "max_abs_error": float(np.nanmax(np.abs(got - want)))})
                        regime = f"b={b}" + (",p>=0.9" if p >= 0.9 else ",p<0.9")
                        worst[r][regime] = max(worst[r].get(regime, 0.0), e)
        print(f"b={b} done ({time.perf_counter() - t0:.0f}s)", file=sys.stderr, flush=True)
    out = {"label": args.label, "samples": args.samples, "mcacct_path": os.path.dirname(mcacct.__file__),
           "backend": jax.default_backend(), "seconds": time.perf_counter() - t0,
           "worst_rel_error": worst, "rows": rows}
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, f"recursion_sweep{'_' + args.label if args.label else ''}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(worst, indent=1))
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
