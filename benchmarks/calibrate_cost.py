"""Cost of the main job: `mcacct calibrate` (pilot + full ladder, both directions) against one `mcacct delta`
run with the same samples per direction at the chosen sigma, both as fresh processes (start-up included) and
as the in-process ``seconds`` each reports (start-up excluded). Writes benchmarks/results/calibrate_cost.json.

    python benchmarks/calibrate_cost.py            # the three configurations below
    python benchmarks/calibrate_cost.py --quick    # only the demo-sized one
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

CONFIGS = [
    {"name": "n=128 b=4 batch 32/1024 delta=1e-4",
     "flags": ["--iterations", "128", "--min-sep", "4", "--batch-size", "32", "--dataset-size", "1024",
               "--c-col", "0.5,0.5,0.5,0.5", "--epsilon", "2"], "delta": "1e-4", "samples": None},
    {"name": "n=1024 b=8 batch 4/1024 delta=1e-4, 400k samples",
     "flags": ["--iterations", "1024", "--min-sep", "8", "--batch-size", "4", "--dataset-size", "1024",
               "--c-col", ",".join(["0.35355339"] * 8), "--epsilon", "2"], "delta": "1e-4", "samples": "400000"},
    {"name": "n=7200 b=256 batch 1793/14745600 delta=1e-3, 40k samples",
     "flags": ["--iterations", "7200", "--min-sep", "256", "--batch-size", "1793", "--dataset-size", "14745600",
               "--c-col", ",".join(["0.0625"] * 256), "--epsilon", "2"], "delta": "1e-3", "samples": "40000"},
]


def _run(cmd: list[str]) -> tuple[dict, float]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1]), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="only the first configuration")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "calibrate_cost.json"))
    args = ap.parse_args()
    exe = [sys.executable, "-m", "mcacct"]
    rows = []
    for cfg in CONFIGS[:1] if args.quick else CONFIGS:
        cal_cmd = exe + ["calibrate", "--no-baselines", "--json", "--quiet", "--delta", cfg["delta"]] + cfg["flags"]
        if cfg["samples"]:
            cal_cmd += ["--samples", cfg["samples"]]
        cal, cal_wall = _run(cal_cmd)
        s = cal["num_samples"]
        eps = cfg["flags"][cfg["flags"].index("--epsilon") + 1]
        flags = [f for i, f in enumerate(cfg["flags"]) if f != "--epsilon" and cfg["flags"][i - 1] != "--epsilon"]
        dl, dl_wall = _run(exe + ["delta", "--json", "--quiet", "--sigma", repr(cal["sigma"]), "--epsilon", eps,
                                  "--samples", str(s)] + flags)
        row = {"config": cfg["name"], "sigma": cal["sigma"], "verified": cal["verified"],
               "pilot_sigma": cal["pilot_sigma"], "num_samples": s, "ladder": len(cal.get("ladder", [])),
               "candidates_verified": len(cal["candidates"]),
               "candidates_passed": sum(c["passed"] for c in cal["candidates"]),
               "calibrate_wall_s": cal_wall, "calibrate_seconds": cal["seconds"],
               "delta_wall_s": dl_wall, "delta_seconds": dl["seconds"],
               "ratio_with_startup": cal_wall / dl_wall, "ratio_without_startup": cal["seconds"] / dl["seconds"],
               "calibrate_samples_used": cal["samples_used"], "phases": cal.get("phases", {}),
               "device": cal.get("device")}
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        import platform
        json.dump({"rows": rows, "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                   "note": "calibrate --no-baselines (pilot + ladder, both directions) vs one delta run with the "
                           "same samples per direction at the chosen sigma, each a fresh process"}, f, indent=1)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
