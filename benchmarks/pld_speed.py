"""Speed of the JAX PLD accountant (mcacct.pld) vs dp-accounting, same run.

Cases
-----
1. epsilon(delta=1e-5) for 10^4 compositions of the Poisson-subsampled
   Gaussian (q=0.01, sigma=1).
2. A 20-point sigma ladder (the inner loop of calibration) for the same
   mechanism: ours evaluates all sigmas at once (vmapped), dp-accounting one
   sigma at a time.
3. A full calibration (smallest sigma for eps=2, delta=1e-5) with our ladder
   bisection, for reference.

For ours, the first call (tracing + XLA compilation + run) is reported
separately from the steady state (median of repeated calls with the compiled
functions cached). Results go to ``benchmarks/results/pld_speed.json``.

Run: ``python benchmarks/pld_speed.py [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import platform
import statistics
import time

import jax
import numpy as np

from mcacct import pld

Q, SIGMA, STEPS, DELTA = 0.01, 1.0, 10_000, 1e-5
LADDER = np.geomspace(0.7, 2.0, 20)


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def _dp_epsilon(sigma: float) -> float:
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(sigma)), STEPS))
    return acc.get_epsilon(DELTA)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results" / "pld_speed.json"))
    args = ap.parse_args()

    spec = pld.PoissonGaussianSpec(Q, SIGMA, STEPS)
    res: dict = {
        "device": str(jax.devices()[0]),
        "platform": jax.default_backend(),
        "jax_version": jax.__version__,
        "dp_accounting_version": importlib.metadata.version("dp-accounting"),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "loadavg_start": list(os.getloadavg()),
        "value_discretization_interval": 1e-4,
        "discretization": "connect_dots (both)",
    }

    # --- case 1: single epsilon, 10^4 compositions -------------------------
    r, first = _timed(lambda: pld.pld_epsilon(spec, DELTA, estimate_error=False))
    steady = [_timed(lambda: pld.pld_epsilon(spec, DELTA, estimate_error=False))[1]
              for _ in range(args.repeats)]
    dp_eps, _ = _timed(lambda: _dp_epsilon(SIGMA))
    dp_times = [_timed(lambda: _dp_epsilon(SIGMA))[1] for _ in range(max(1, args.repeats // 2))]
    res["single_epsilon"] = {
        "q": Q, "sigma": SIGMA, "steps": STEPS, "delta": DELTA,
        "ours_epsilon": r.epsilon, "dp_accounting_epsilon": dp_eps,
        "ours_first_call_s": first, "ours_steady_s": statistics.median(steady),
        "ours_compile_overhead_s": first - statistics.median(steady),
        "dp_accounting_s": statistics.median(dp_times), "fft_size": r.fft_size,
    }

    # --- case 2: 20-point sigma ladder -------------------------------------
    eps_l, first = _timed(lambda: pld.epsilons_for_sigmas(spec, LADDER, DELTA))
    steady = [_timed(lambda: pld.epsilons_for_sigmas(spec, LADDER, DELTA))[1]
              for _ in range(max(1, args.repeats // 2))]
    dp_l, dp_t = _timed(lambda: [_dp_epsilon(float(s)) for s in LADDER])
    res["sigma_ladder_20"] = {
        "sigmas": LADDER.tolist(), "ours_epsilons": eps_l.tolist(), "dp_accounting_epsilons": dp_l,
        "max_rel_diff": float(np.max(np.abs(eps_l - np.array(dp_l)) / np.array(dp_l))),
        "ours_first_call_s": first, "ours_steady_s": statistics.median(steady),
        "ours_compile_overhead_s": first - statistics.median(steady),
        "dp_accounting_s": dp_t,
    }

    # --- case 3: full calibration -------------------------------------------
    cal_spec = pld.PoissonGaussianSpec(Q, 1.0, 1_000)
    sig, t_cal = _timed(lambda: pld.pld_calibrate(cal_spec, 2.0, DELTA))
    _, t_cal2 = _timed(lambda: pld.pld_calibrate(cal_spec, 2.0, DELTA))
    res["calibration"] = {"q": Q, "steps": 1_000, "epsilon": 2.0, "delta": DELTA, "sigma": sig,
                          "ours_first_call_s": t_cal, "ours_second_call_s": t_cal2,
                          "dp_accounting_epsilon_at_sigma": _dp_epsilon_steps(sig, 1_000)}
    res["loadavg_end"] = list(os.getloadavg())
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))


def _dp_epsilon_steps(sigma: float, steps: int) -> float:
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(sigma)), steps))
    return acc.get_epsilon(DELTA)


if __name__ == "__main__":
    main()
