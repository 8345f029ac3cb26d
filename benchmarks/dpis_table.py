"""PLD vs RDP accounting of DPIS (Wei, Bao, Xiao & Yang 2022, arXiv:2210.09634) on FMNIST-like settings.

Settings (paper Sec. 5, Table 2, Fig. 1): N = 60000, b = 256 (with it the RDP noise of DP-SGD is 0.809 at
epsilon = 4 over 40 epochs, the paper's 0.81), T = floor(N / b) = 234, C = 0.1, sigma_N = sigma_K = 0.02 N,
p_K = b / N, rejection multiplier k = 5, delta = 1e-5, epochs 10 / 14 / 40 for epsilon 0.5 / 1 / 4 (the spans of
Fig. 1). Anticipated kappa_e = K~_e / (N C): 1.0, 0.8, 0.65, 0.5 over the four quarters of the run (stylised: the
paper reports the noise dropping by 40-50% on FMNIST).

For every epsilon and plan (worst case kappa = 1, i.e. Poisson DP-SGD; DPIS with the anticipated kappas under
both plan rules) it records the sigma_g schedule calibrated by the PLD accountant and by the RDP accountant, and
the PLD epsilon of the RDP-calibrated run (the same events); and the paper's adaptive schedule under RDP (Renyi
filter at a fixed order) with the PLD epsilon of its realized events (ex post). Writes
benchmarks/results/dpis_table.json.

    .venv/bin/python benchmarks/dpis_table.py [--epsilons 0.5,1,4] [--out benchmarks/results/dpis_table.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

from mcacct import pld  # (mcacct's entry points compute in float64)
from mcacct.dpis import calibrate_plan, paper_schedule, plan_epsilon, plan_events

N, B, C, DELTA, K_REJ = 60000, 256, 0.1, 1e-5, 5.0
T = N // B
AUX = dict(sigma_n=0.02 * N, sigma_k=0.02 * N)
EPOCHS = {0.5: 10, 1.0: 14, 4.0: 40}
H = 1e-3


def kappas(epochs: int) -> list[float]:
    levels = (1.0, 0.8, 0.65, 0.5)
    return [levels[min(4 * e // epochs, 3)] for e in range(epochs)]


def _row(eps: float, epochs: int, name: str, ks: list[float], rule: str) -> dict:
    t0 = time.perf_counter()
    rdp = calibrate_plan(N, B, epochs, eps, DELTA, kappas=ks, rule=rule, accountant="rdp", rejection_k=K_REJ, **AUX)
    p = calibrate_plan(N, B, epochs, eps, DELTA, kappas=ks, rule=rule, accountant="pld", rejection_k=K_REJ,
                       value_discretization_interval=H, **AUX)
    same_run = plan_epsilon(rdp.events(), DELTA, "pld", value_discretization_interval=H)[0]
    row = {"epsilon": eps, "epochs": epochs, "plan": name, "rule": rule, "kappas": ks,
           "sigma_g_rdp": list(rdp.sigma_g), "sigma_g_pld": list(p.sigma_g),
           "multipliers_rdp": list(rdp.multipliers), "multipliers_pld": list(p.multipliers),
           "epsilon_rdp_of_rdp_plan": rdp.epsilon, "rdp_order": rdp.order,
           "epsilon_pld_of_rdp_plan": same_run, "epsilon_pld_of_pld_plan": p.epsilon,
           "seconds": time.perf_counter() - t0}
    print(f"eps={eps:g} {name:>12} {rule:>19}: sigma_g RDP {rdp.sigma_g[0]:.4f}..{rdp.sigma_g[-1]:.4f}  "
          f"PLD {p.sigma_g[0]:.4f}..{p.sigma_g[-1]:.4f}; same run: RDP eps {rdp.epsilon:.4f}, PLD eps "
          f"{same_run:.4f} ({row['seconds']:.0f}s)", flush=True)
    return row


def _paper(eps: float, epochs: int, ks: list[float]) -> dict:
    t0 = time.perf_counter()
    filt = paper_schedule(ks, N, B, epochs, eps, DELTA, iterations_per_epoch=T, a_e=1.0, **AUX)
    post = paper_schedule(ks, N, B, epochs, eps, DELTA, iterations_per_epoch=T, a_e=1.0, fixed_order=False, **AUX)
    # the realized events of the filter schedule: epoch e has q = b/(kappa_e N), multiplier sigma_e / kappa_e
    events = plan_events(N, B, T, ks, [s / k for s, k in zip(filt.sigma_g, ks)], **AUX)
    pld_eps = pld.events_epsilon(events, DELTA, value_discretization_interval=H, estimate_error=False).epsilon
    row = {"epsilon": eps, "epochs": epochs, "kappas": ks, "sigma_g_filter": list(filt.sigma_g),
           "filter_order": filt.order, "epsilon_rdp_filter": filt.epsilon, "sigma_g_ex_post": list(post.sigma_g),
           "epsilon_rdp_ex_post": post.epsilon, "epsilon_pld_of_filter_run": pld_eps,
           "seconds": time.perf_counter() - t0}
    print(f"eps={eps:g} paper rule: filter (order {filt.order}) sigma_g {filt.sigma_g[0]:.4f}..{min(filt.sigma_g):.4f}"
          f", ex post {post.sigma_g[0]:.4f}..{min(post.sigma_g):.4f}; PLD eps of the filter run {pld_eps:.4f}",
          flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilons", default="0.5,1,4")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "dpis_table.json"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows, paper = [], []
    for eps in (float(v) for v in args.epsilons.split(",")):
        epochs = EPOCHS.get(eps, 20)
        ks = kappas(epochs)
        rows.append(_row(eps, epochs, "worst_case", [1.0] * epochs, "constant_sigma"))
        rows.append(_row(eps, epochs, "dpis", ks, "constant_sigma"))
        rows.append(_row(eps, epochs, "dpis", ks, "constant_multiplier"))
        paper.append(_paper(eps, epochs, ks))
    out = {"settings": {"dataset_size": N, "batch_size": B, "iterations_per_epoch": T, "clip": C, "delta": DELTA,
                        "rejection_k": K_REJ, "p_k": B / N, **AUX, "value_discretization_interval": H,
                        "epochs": {str(k): v for k, v in EPOCHS.items()},
                        "kappa_levels": [1.0, 0.8, 0.65, 0.5]},
           "rows": rows, "paper_rule": paper, "seconds": time.perf_counter() - t0,
           "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                       "cpus": os.cpu_count()}}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
    os.replace(tmp, args.out)
    print(f"wrote {args.out} ({out['seconds']:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
