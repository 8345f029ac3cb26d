"""Individual (per-example) epsilon for many examples: mcacct.individual against dp_accounting composing the same
histories one example at a time (a sampled subset, extrapolated), in the same run.

Histories as in Koskela, Tobaben & Honkela (arXiv:2209.15596): gradient-norm ratios computed once per epoch
(1/q steps) and held for the epoch. Figures go to benchmarks/results/individual_speed.json.

    python benchmarks/individual_speed.py [--examples 100000] [--steps 1000] [--oracle-examples 4]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import mcacct  # noqa: F401
from mcacct.individual.accountant import individual_epsilons


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--sampling-prob", type=float, default=0.01)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--buckets", type=int, default=100)
    ap.add_argument("--oracle-examples", type=int, default=4)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    epoch = int(round(1 / args.sampling_prob))
    epochs = -(-args.steps // epoch)
    per_epoch = np.clip(rng.beta(2.0, 3.0, size=(args.examples, epochs)) * rng.uniform(0.5, 1.5, (args.examples, 1)),
                        0.0, 1.0)
    ratios = np.repeat(per_epoch, epoch, axis=1)[:, :args.steps]
    t0 = time.perf_counter()
    res = individual_epsilons(ratios, args.sigma, args.sampling_prob, args.delta, buckets=args.buckets)
    t_ours = time.perf_counter() - t0
    print(f"mcacct: {args.examples} examples in {t_ours:.1f} s (both bucket passes)", file=sys.stderr, flush=True)

    from dp_accounting import dp_event as de
    from dp_accounting.pld import pld_privacy_accountant as ppa
    oracle = []
    t0 = time.perf_counter()
    for i in range(args.oracle_examples):
        acc = ppa.PLDAccountant(value_discretization_interval=1e-3)
        vals, reps = np.unique(ratios[i], return_counts=True)   # unbucketed: the exact history
        for v, c in zip(vals, reps):
            if v > 0:
                acc.compose(de.PoissonSampledDpEvent(args.sampling_prob, de.GaussianDpEvent(args.sigma / v)), int(c))
        oracle.append(acc.get_epsilon(args.delta))
    t_oracle = (time.perf_counter() - t0) / max(args.oracle_examples, 1)
    out = {
        "examples": args.examples, "steps": args.steps, "sampling_prob": args.sampling_prob, "sigma": args.sigma,
        "delta": args.delta, "buckets": args.buckets, "fft_size": res.fft_size, "cpu_count": os.cpu_count(),
        "mcacct_seconds": t_ours, "mcacct_examples_per_second": args.examples / t_ours,
        "dp_accounting_seconds_per_example": t_oracle,
        "dp_accounting_seconds_extrapolated": t_oracle * args.examples,
        "speedup": t_oracle * args.examples / t_ours,
        "worst_case_epsilon": res.worst_case_epsilon, "bucketing_bound": res.bucketing_bound,
        "epsilon_quantiles": dict(zip(["min", "q10", "median", "q90", "max"],
                                      np.quantile(res.epsilon, [0, 0.1, 0.5, 0.9, 1]).tolist())),
        "oracle_rows": [{"mcacct": float(res.epsilon[i]), "mcacct_lower_bucket": float(res.epsilon_lower_bucket[i]),
                         "dp_accounting_unbucketed": oracle[i]} for i in range(args.oracle_examples)],
        "note": "mcacct: ratios rounded up to buckets (an upper bound) and down (the bucketing bound), h = 1e-3; "
                "dp_accounting: the unbucketed history, h = 1e-3, one example at a time",
    }
    path = os.path.join(os.path.dirname(__file__), "results", "individual_speed.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
