"""README.md's benchmark tables and figures, generated from benchmarks/results/*.json.

Every number in README.md that quotes a benchmark result lives between a pair of marker comments,
``<!-- tables:NAME:begin -->`` and ``<!-- tables:NAME:end -->``, and is written by the function of ``REGIONS``
named NAME from the JSON files only (markers may be indented, e.g. inside a list item; the region is indented
alike). Text outside the markers is never touched.

    python benchmarks/readme_tables.py            # rewrite the regions of README.md in place (= make readme)
    python benchmarks/readme_tables.py --check    # exit 1 with a diff if README.md differs from what it would write

Standard library only; nothing is measured here.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import re
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
WIDTH = 120  # README's line width for generated prose
REL = "benchmarks/results"  # how README names the results folder

BEGIN = re.compile(r"^(?P<indent>[ \t]*)<!-- tables:(?P<name>[a-z0-9-]+):begin -->[ \t]*$")
END = re.compile(r"^[ \t]*<!-- tables:(?P<name>[a-z0-9-]+):end -->[ \t]*$")


class Results:
    """The JSON files of one results folder, read once each."""

    def __init__(self, directory: Path = RESULTS) -> None:
        self.directory = Path(directory)
        self._cache: dict[str, Any] = {}

    def __call__(self, name: str) -> Any:
        if name not in self._cache:
            with open(self.directory / name, encoding="utf-8") as f:
                self._cache[name] = json.load(f)
        return self._cache[name]


# ---------------------------------------------------------------------------------------------------- formatting

def count(x: float) -> str:
    """A rate or count as a rounded integer with thousands separators: 12,437."""
    return f"{round(x):,}"


def times(x: float, digits: int = 1) -> str:
    """A ratio: 3.1×."""
    return f"{x:.{digits}f}×"


def sci(x: float, digits: int = 2) -> str:
    """Scientific notation without the exponent's sign padding: 1.36e7, 2.8e-5."""
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def pct(x: float) -> str:
    """A fraction as a rounded percentage: 51%."""
    return f"{round(100 * x)}%"


def pct_range(values: Iterable[float]) -> str:
    """The smallest whole-percent range that contains every fraction: 8–13%."""
    vs = list(values)
    return f"{math.floor(100 * min(vs))}–{math.ceil(100 * max(vs))}%"


def kilo(x: float) -> str:
    """A rate in thousands, one decimal: 9.1k."""
    return f"{x / 1000:.1f}k"


def micro(us: float) -> str:
    """Microseconds: one decimal below 100, whole above: 8.1, 132."""
    return f"{us:.1f}" if us < 100 else f"{round(us)}"


def duration(seconds: float) -> str:
    """A wall time in minutes and seconds: 13 min 19 s."""
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def power_of_ten(x: float) -> str:
    """10^7 for exact powers of ten, else a plain integer."""
    e = round(math.log10(x)) if x > 0 else 0
    return f"10^{e}" if x == 10 ** e else count(x)


def gpu_name(device: str) -> str:
    """'gpu:NVIDIA H100 80GB HBM3' -> 'H100'."""
    kind = device.split(":", 1)[-1]
    words = kind.replace("NVIDIA", "").split()
    return words[0] if words else kind


def paragraph(text: str) -> list[str]:
    """Prose wrapped to README's width (never breaking inside a `code span` or a word)."""
    # wrap on spaces outside code spans only: protect the spaces inside them first
    protected = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), " ".join(text.split()))
    lines = textwrap.wrap(protected, WIDTH - 4, break_long_words=False, break_on_hyphens=False)
    return [line.replace("\0", " ") for line in lines]


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table in README's compact style."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


# ------------------------------------------------------------------------------------------------------ regions

THROUGHPUT_LABELS = {
    "n1024_b8": "n = 1024, b = 8, p0 = 1/256",
    "n7200_b256": "n = 7200, b = 256, batch 1793 of 14,745,600",
    "n1024_b1_poisson": "n = 1024, b = 1 (Poisson), p = 1/256",
    "n1024_b1": "n = 1024, b = 1 (Poisson), p = 1/256",
}


def region_throughput(res: Results) -> list[str]:
    """The throughput table (CPU with the reference, GPU) and its notes."""
    cpu, gpu = res("throughput_cpu.json"), res("throughput_gpu.json")
    gpu_rows = {r["config"]: r for r in gpu["results"]}
    where = f"{cpu['cpu_count']}-core CPU"
    g = gpu_name(gpu["device"])
    header = ["configuration", f"reference, {where}", f"mcacct float64, {where}", f"mcacct float32, {where}",
              f"mcacct float64, {g}", f"mcacct float32, {g}"]
    rows = []
    for r in cpu["results"]:
        gr = gpu_rows.get(r["config"], {})
        rows.append([
            THROUGHPUT_LABELS.get(r["config"], r["config"]),
            count(r["reference"]["samples_per_s"]),
            f"{count(r['mcacct_float64']['samples_per_s'])} ({times(r['speedup_float64'])})",
            f"{count(r['mcacct_float32']['samples_per_s'])} ({times(r['speedup_float32'])})",
            sci(gr["mcacct_float64"]["samples_per_s"]) if "mcacct_float64" in gr else "—",
            sci(gr["mcacct_float32"]["samples_per_s"]) if "mcacct_float32" in gr else "—",
        ])
    by = {r["config"]: r for r in cpu["results"]}
    ceiling = by["n7200_b256"]["noise_only"]["samples_per_s"] if "n7200_b256" in by else None
    fractions = ", ".join(pct(r["fraction_of_noise_floor"]) for r in cpu["results"])
    fused = ", ".join(times(r["fused_vs_unfused"], 2) for r in cpu["results"])
    stat = f"{cpu['statistic']}s of {cpu['repeats']}" if "statistic" in cpu else "one timing each"
    why = (", which is why `loss_kernel=\"auto\"` keeps the unfused kernel on CPU"
           if all(r["fused_vs_unfused"] < 1 for r in cpu["results"]) else "")
    day = f" (the noise-only ceiling of this run at n = 7200: {kilo(ceiling)} samples/s)" if ceiling else ""
    notes = (
        f"CPU columns: `{REL}/throughput_cpu.json` ({stat} in one run; compilation is reported separately there). "
        f"This box's speed varies from day to day{day}, so compare ratios within the run only. mcacct reaches "
        f"{_and(fractions)} of the noise-only ceiling of the same run; the fused kernel's XLA form runs at "
        f"{_and(fused)} the unfused kernel's draws/s (both directions at one σ){why}."
    )
    return table(header, rows) + [""] + paragraph(notes)


def _and(listing: str) -> str:
    """'a, b, c' -> 'a, b and c'."""
    head, _, last = listing.rpartition(", ")
    return f"{head} and {last}" if head else last


PRODUCTION_COLUMNS = {"ones": "c = ones(256)/16", "mse": "c MSE-optimised (256 bands)"}


def _interleaving(d: dict) -> str:
    """How the truncated ladders were timed, where in turns (``benchmarks/production.py``)."""
    lad = next(iter(d["results"].values())).get("mcacct_truncated_ladder", {})
    if not lad.get("interleaved"):
        return ""
    return f"; the three truncated ladders timed in turns, medians of {len(lad['runs_draws_per_s'])}"


def region_production(res: Results) -> list[str]:
    """The §7.4 production case: its set-up and the table."""
    d = res("production_cpu.json")
    s = d["shape"]
    ladder = "/".join(f"{x:g}" for x in d["ladder"])
    intro = (
        f"**The production case** (Dong & Ganesh 2026, §7.4: truncated {s['min_sep']}-min-sep, n = "
        f"{s['iterations']}, expected batch {s['expected_batch']} of {s['dataset_size']:,}, B_max = "
        f"{s['max_batch_size']}, σ ladder {ladder}; `benchmarks/production.py`, {d['statistic']}s of {d['repeats']} "
        f"in one run on the {d['cpu_count']}-core CPU{_interleaving(d)}, `{REL}/production_cpu.json`):"
    )
    cols = list(d["results"])
    header = ["per second, one direction unless stated"] + [PRODUCTION_COLUMNS.get(c, c) for c in cols]

    def row(label: str, cell: Callable[[dict, bool], str]) -> list[str]:
        return [label] + [cell(d["results"][c], i == 0) for i, c in enumerate(cols)]

    def ladder_cell(r: dict, first: bool) -> str:
        lad, ratio = r["mcacct_truncated_ladder"], r["ratios"]["ladder_draws_vs_reference_8_jobs"]
        tail = f"{round(ratio)}× the reference's {2 * len(d['ladder'])} jobs" if first else f"{round(ratio)}×"
        return f"{count(lad['draws_per_s'])} ({count(lad['evaluations_per_s'])}): {tail}"

    def skip_cell(r: dict, first: bool) -> str:
        if "mcacct_truncated_ladder_skip_add" not in r:
            return "not measured"
        rat = r["ratios"]
        return (f"{count(r['mcacct_truncated_ladder_skip']['draws_per_s'])} ({rat['ladder_skip_vs_full']:.2f}×; the add "
                f"skip alone {rat['ladder_skip_add_vs_full']:.2f}×)")

    def plan_cell(r: dict, first: bool) -> str:
        ladder = round(r["plan_7_4"]["expected_days_one_device"])
        if "expected_days_one_device_skip" in r["plan_7_4"]:
            ladder = f"{ladder} (every loss computed), {round(r['plan_7_4']['expected_days_one_device_skip'])} (skips)"
        plans = []
        for k in ("calibrate_plan_only_1_device", "calibrate_plan_only"):
            if k in r and (k == "calibrate_plan_only" or not plans):
                devices = r[k].get("devices") or 1
                plans.append(f"{round(r[k].get('expected_days', r[k]['expected_days_one_device']))} "
                             f"({devices} device{'s' if devices > 1 else ''})")
        return f"{ladder}; " + "; ".join(plans) + " days"

    samples = d["results"][cols[0]]["plan_7_4"]["samples"]
    rows = [
        row("jax-privacy 2.0 NumPy reference, truncated", lambda r, f: count(r["reference_truncated"]["per_s"])),
        row("jax-privacy 2.0 NumPy reference, untruncated", lambda r, f: count(r["reference_untruncated"]["per_s"])),
        row(f"mcacct `TruncatedBMinSep`, σ = {d['sigma']:g}", lambda r, f: (
            f"{count(r['mcacct_truncated']['per_s'])} ({times(r['ratios']['truncated_vs_reference'])}; "
            f"{r['ratios']['truncated_vs_bminsep']:.3f}× BMinSep)")),
        row("mcacct `BMinSep`, same shape", lambda r, f: count(r["mcacct_bminsep"]["per_s"])),
        row(f"mcacct truncated {len(d['ladder'])}-σ ladder, both directions: draws (evaluations)", ladder_cell),
        row("the same ladder with the provably zero contributions skipped at ε = 10 (the default; the same sums): "
            "draws (× every loss computed)", skip_cell),
        row(f"projected time of the {sci(samples, 1)}-sample verification on this machine (one device's ladder "
            "draws/s; `calibrate --plan-only` with one CPU device and with `--cpu-devices auto`, a device per core)",
            plan_cell),
    ]
    return paragraph(intro) + [""] + table(header, rows)


RNG_ROWS = [
    ("bits64_threefry2x32", "threefry raw bits only (64 bits per coordinate)"),
    ("jax_random_normal_f64", "`jax.random.normal`, float64"),
    ("mcacct_standard_normal_f64", "`mcacct.kernels.normal.standard_normal`, float64 (the engine's)"),
    ("numpy_SFC64_ziggurat_1thread", "NumPy SFC64 ziggurat, one thread (the reference's kind of RNG)"),
]


def region_rng_floor(res: Results) -> list[str]:
    """The noise-only ceiling per generator against 10× the reference, and what it implies."""
    d = res("rng_floor_cpu.json")
    cfgs = d["configs"]
    header = ["per sample"] + [f"n = {c['iterations']}" for c in cfgs.values()]
    rows = [["10× the reference (target)"] + [f"{count(c['ten_x_reference_samples_per_s'])} /s"
                                              for c in cfgs.values()]]
    for key, label in RNG_ROWS:
        rows.append([label] + [f"{micro(c['us_per_sample'][key])} µs → {count(c['ceiling_samples_per_s'][key])} /s"
                               for c in cfgs.values()])
    normals = ("jax_random_normal_f64", "mcacct_standard_normal_f64")
    below = all(c["ceiling_samples_per_s"][k] < c["ten_x_reference_samples_per_s"] for c in cfgs.values()
                for k in normals)
    if below:
        text = (f"On this {d['cpu_count']}-core machine the noise alone, drawn with `jax.random` bits, is slower than "
                "10× the reference at both configurations, so the 10× CPU target cannot be met by a kernel that "
                "draws exact float64 Gaussian noise from JAX's generators; how close the engine gets to the "
                "noise-only ceiling is in the notes of the throughput table.")
    else:
        text = (f"On this {d['cpu_count']}-core machine the float64 noise alone is not slower than 10× the "
                "reference at every configuration; how close the engine gets to the noise-only ceiling is in the "
                "notes of the throughput table.")
    return table(header, rows) + [""] + paragraph(text)


def region_gpu(res: Results) -> list[str]:
    """Where the GPU kernel's time goes, and one end-to-end verification."""
    prof = res("profile_gpu.json")
    st = prof["stages"]["n7200_b256"]
    parts = {k: st[k]["seconds_per_chunk"] for k in
             ("normal_float64", "dot_prefix_float64", "recursion_blocked_float64", "participation")}
    total = sum(parts.values())
    share = {k: f"~{pct(v / total)}" for k, v in parts.items()}
    run = res("gpu_accelerator_host_n7200.json")
    g = gpu_name(prof["device"])
    text = (
        f"On the {g} the n = 7200, b = 256 kernel spends {share['normal_float64']} in float64 normal generation, "
        f"{share['dot_prefix_float64']} in the sliding sums (prefix) and {share['recursion_blocked_float64']} in "
        f"the recursion (`blocked`; shares of the stage times, participation included, `{REL}/profile_gpu.json`); "
        f"end to end (both directions, statistics, one {g}) a verification of {power_of_ten(run['num_samples'])} "
        f"samples per direction takes {round(run['seconds'])} s in float64 "
        f"(`{REL}/gpu_accelerator_host_n7200.json`)."
    )
    return paragraph(text)


def region_mse_study(res: Results) -> list[str]:
    """The §7.1 MSE study's quick grid: time, table and verdict."""
    d = res("mse_study_quick/study.json")
    # a b-min-sep cell with b = E reuses the balls-in-bins calibration (recorded twice): count it once
    unique = {(c["epsilon"], c["epoch"], c["bands"], c["b"], c["seconds"]): c["seconds"] for c in d["calibrations"]}
    seconds = sum(unique.values()) + sum(s["seconds"] for s in d["strategies"].values())
    intro = (f"{len(unique)} calibrations and {len(d['strategies'])} strategy optimisations, {duration(seconds)} in "
             "all (the sum of their `seconds` in `study.json`). Best MSE ratio of b-min-sep, (bands, b) of its best "
             "cell:")
    rows = []
    for c in d["cells"]:
        best = c["best"]["b-min-sep"]
        rows.append([f"{c['epsilon']:g}", f"{c['epoch']}", f"{best['mse']:.4g} ({best['bands']}, {best['b']})",
                     *(f"{c[k]:.3f}" if k in c else "—" for k in ("ratio_cyclic_poisson", "ratio_balls_in_bins"))])
    header = ["ε", "E = \\|D\\|/B", "b-min-sep MSE (bands, b)", "/ cyclic Poisson", "/ balls-in-bins"]
    bib = [c["ratio_balls_in_bins"] for c in d["cells"] if "ratio_balls_in_bins" in c]
    losing = [c for c in d["cells"] if c.get("ratio_cyclic_poisson", 0) > 1]
    smallest = (min(c["epsilon"] for c in d["cells"]), min(c["epoch"] for c in d["cells"]))
    bib_text = (f"the ratio to balls-in-bins is never above 1 ({min(bib):.2f}–{max(bib):.2f})" if max(bib) <= 1 else
                f"the ratio to balls-in-bins reaches {max(bib):.3f}")
    if not losing:
        cp_text = "b-min-sep beats cyclic Poisson in every cell"
    elif len(losing) == 1 and (losing[0]["epsilon"], losing[0]["epoch"]) == smallest:
        c = losing[0]
        cp_text = ("b-min-sep beats cyclic Poisson except in the cell where ε and the epoch length are both smallest "
                   f"(ε = {c['epsilon']:g}, E = {c['epoch']}: {c['ratio_cyclic_poisson']:.3f}"
                   + (", within Monte Carlo calibration noise of 1)" if c["ratio_cyclic_poisson"] < 1.05 else ")"))
    else:
        cp_text = ("b-min-sep loses to cyclic Poisson in " + ", ".join(
            f"(ε = {c['epsilon']:g}, E = {c['epoch']}: {c['ratio_cyclic_poisson']:.3f})" for c in losing))
    both = max(bib) <= 1 and len(losing) <= 1
    verdict = (("Both qualitative claims of §7.1 hold here: " if both else "The qualitative claims of §7.1: ")
               + f"{bib_text}, and {cp_text}.")
    return paragraph(intro) + [""] + table(header, rows) + [""] + paragraph(verdict)


def region_dpis(res: Results) -> list[str]:
    """PLD against the paper's RDP at FMNIST-like settings."""
    d = res("dpis_table.json")
    eps = [1 - r["epsilon_pld_of_rdp_plan"] / r["epsilon_rdp_of_rdp_plan"] for r in d["rows"]]
    sig = [1 - p / q for r in d["rows"] for p, q in zip(r["sigma_g_pld"], r["sigma_g_rdp"])]
    text = (f"At FMNIST-like settings (`{REL}/dpis_table.json`) the PLD ε is {pct_range(eps)} below the RDP ε "
            f"and the PLD σ_G {pct_range(sig)} lower. Decisions on the paper's inconsistencies and the table: "
            "[docs/dpis.md](docs/dpis.md).")
    return paragraph(text)


def region_calibrate_cost(res: Results) -> list[str]:
    """Wall time of calibrate against one delta run."""
    d = res("calibrate_cost.json")
    rows = d["rows"]
    first = rows[0]
    m = re.match(r"n=(\d+) b=(\d+) .*delta=(\S+)", first["config"])
    where = f"n = {m.group(1)}, b = {m.group(2)}, δ = {m.group(3)}" if m else first["config"]
    ratios = [r["ratio_with_startup"] for r in rows]
    spread = (f"; {min(ratios):.1f}–{max(ratios):.1f}× over the {len(rows)} configurations of "
              f"`{REL}/calibrate_cost.json`" if len(rows) > 1 else f"; `{REL}/calibrate_cost.json`")
    text = (f"Cost (`benchmarks/calibrate_cost.py`, {where}, {d['machine']['cpus']}-core CPU): calibrate takes "
            f"{first['ratio_with_startup']:.1f}× the wall time of one `mcacct delta` run with the same samples at "
            f"the chosen σ (start-up included{spread}).")
    return paragraph(text)


def region_precision(res: Results) -> list[str]:
    """float32 against float64 on the same draws, worst per recursion."""
    d = res("precision_cpu.json")
    worst: dict[str, float] = {}
    for r in d["rows"]:
        worst[r["recursion"]] = max(worst.get(r["recursion"], 0.0), r["worst_relative_delta_difference"])
    listing = ", ".join(f"{sci(v, 1)} ({k})" for k, v in sorted(worst.items(), key=lambda kv: kv[1]))
    text = ("Measured float32/float64 gaps on the same draws (`benchmarks/precision.py`, "
            f"`{REL}/precision_cpu.json`): worst relative δ̂ difference {listing}.")
    return paragraph(text)


def region_recursion_sweep(res: Results) -> list[str]:
    """The recursions against the log-space oracle: regime and worst error."""
    d = res("recursion_sweep_after.json")
    rows = d["rows"]
    names = list(dict.fromkeys(r["recursion"] for r in rows))
    text = (f"`benchmarks/recursion_sweep.py` checks the {_and(', '.join(f'`{n}`' for n in names))} recursions "
            f"against a NumPy log-space oracle for b up to {max(r['b'] for r in rows)}, p up to "
            f"{max(r['p'] for r in rows):g}, σ/‖c‖ down to {min(r['sigma_over_norm'] for r in rows):g}: worst "
            f"relative error {sci(max(r['worst_rel_error'] for r in rows), 1)} (`{REL}/recursion_sweep_after.json`).")
    return paragraph(text)


def region_accelerator(res: Results) -> list[str]:
    """benchmarks/accelerator.py's figures on the last device it ran on: throughput, roofline, production."""
    name = "accelerator_nvidia_h200.json"
    d = res(name)
    parts, dev = d["parts"], d["device_kind"]
    table_ = parts["throughput"]["table"]

    def rate(entry: Any, unit: str) -> str:
        if isinstance(entry, dict) and entry.get(unit):
            return sci(entry[unit])
        if isinstance(entry, dict) and "refused" in entry:
            limit = re.search(r"min_sep=\d+ > (\d+)", entry["refused"])
            return f"refused (b > {limit.group(1)})" if limit else "refused"
        return "not measured" if not isinstance(entry, dict) or "error" not in entry else "compile > 180 s"

    rows = [[THROUGHPUT_LABELS.get(k, k), rate(r["single"].get("unfused_f64"), "samples_per_s"),
             rate(r["single"].get("unfused_f32"), "samples_per_s"), rate(r["ladder"].get("unfused_f64"), "draws_per_s"),
             rate(r["ladder"].get("fused_f64"), "draws_per_s")] for k, r in table_.items()]
    header = ["configuration", "1 σ f64 samples/s", "1 σ f32 samples/s", "4-σ ladder f64 draws/s (unfused)",
              "4-σ ladder f64 draws/s (fused)"]
    roof = parts["roofline"]["measured"]["rng_sliding_exp"]["samples_per_s"]
    frac = parts["roofline"]["fractions_of_roofline"]["single_unfused_f64"]
    prod = parts["production"]["results"]
    hours = {k: v["estimate_7_4_one_device"]["engine_ladder"]["hours"] for k, v in prod.items()}
    draws = {k: v["engine_ladder"]["draws_per_s"] for k, v in prod.items()}
    chunk = parts["production"]["settings"]["chunk_size"]
    cpu = res("production_cpu.json")["results"]
    cpu_days = "–".join(str(round(cpu[k]["plan_7_4"]["expected_days_one_device"])) for k in ("ones", "mse"))
    kernel = d.get("kernel", "mcacct-kernel/6 or earlier")
    kernel_note = f" ({kernel}: every sample's count chain, as GPUs run it again since mcacct-kernel/8)"
    old = "mcacct_source" not in parts["throughput"]  # measured before the files recorded their sources
    when = " before the kernels' rare branches became `rare_cond`" if old else ""
    why = (": under `vmap` each block's exact-recursion fallback ran as a select operand, a 7200-step scan per "
           "chunk" if old else "")
    text = (f"On one {dev} (jax {d['jax']}, `{REL}/{name}`, measured {d['updated_at'][:10]}{when}) the unfused "
            f"kernel reached {pct(frac)} of the RNG + sliding sums + exp roofline of the same device ({sci(roof)} "
            f"samples/s at n = 7200, b = 256){why}. The §7.4 ladder (engine chunk program, chunk {chunk:,}) ran at "
            f"{count(draws['ones'])} draws/s (c = ones) and {count(draws['mse'])} (MSE c), {round(hours['ones'])} "
            f"and {round(hours['mse'])} hours for 7.5e9 samples on one device{kernel_note}, against {cpu_days} "
            f"days projected for the 2-core CPU box of the production table.")
    sweep = res("accelerator_nvidia_h200_plan_chunks.json")["runs"]
    probes = [r for r in sweep if "probe_draws_per_s" in r]
    failed = [r["chunk_size"] for r in sweep if "error" in r]
    text += (" `calibrate --plan-only` at §7.4 (c = ones) probed "
             + ", ".join(f"{sci(r['probe_draws_per_s'])} draws/s at chunk {r['chunk_size']:,} "
                         f"({round(r['expected_hours_at_most'])} h)" for r in probes)
             + (f"; chunk {failed[0]:,} ran out of device memory" if failed else "")
             + " (`accelerator_nvidia_h200_plan_chunks.json`): `--chunk-size auto` picks the largest power of two "
               "the device's memory holds.")
    return table(header, rows) + [""] + paragraph(text) + [""] + paragraph(_h100_text(res))


def _h100_text(res: Results) -> str:
    """The H100 sessions: kernel 8 (every sample's count chain on the GPU) against kernel 7 (screened counts)."""
    name = "accelerator_nvidia_h100_80gb_hbm3.json"
    d = res(name)
    parts = d["parts"]
    n7200 = parts["throughput"]["table"]["n7200_b256"]
    prod = parts["production"]["results"]
    ones, mse = prod["ones"], prod["mse"]
    ladder = ones["engine_ladder"]
    big = res(name.replace(".json", "_chunk65536.json"))["parts"]["production"]
    big_ladder, big_chain = big["results"]["ones"]["engine_ladder"], big["count_chain"]["unroll_8"]
    plan = parts["plan"]["plan_only"]["ones"]
    hours = {k: round(v["estimate_7_4_one_device"]["engine_ladder"]["hours"]) for k, v in (("ones", ones),
                                                                                            ("mse", mse))}
    return (f"On one {d['device_kind']} ({d['kernel']}, jax {d['jax']}, `{REL}/{name}`, measured "
            f"{d['updated_at'][:10]}) the unfused kernel ran {sci(n7200['single']['unfused_f64']['samples_per_s'])} "
            f"samples/s at n = 7200, b = 256 (f64, {sci(n7200['single']['unfused_f32']['samples_per_s'])} f32) and "
            f"{sci(n7200['ladder']['unfused_f64']['draws_per_s'])} ladder draws/s. The §7.4 ladder ran at "
            f"{count(ladder['draws_per_s'])} draws/s with c = ones and {count(mse['engine_ladder']['draws_per_s'])} "
            f"with the MSE c ({ladder['per_call'] / ladder['draws_per_s']:.2f} s per chunk of "
            f"{ladder['per_call']:,}; {hours['ones']} h and {hours['mse']} h for 7.5e9 samples); one σ in one "
            f"direction ran {count(ones['single']['per_s'])} samples/s. At chunk {big_ladder['per_call']:,} "
            f"(`..._chunk65536.json`) the ladder ran {count(big_ladder['draws_per_s'])} draws/s: no gain, as every "
            f"sample's count chain there takes {big_chain['per_call'] / big_chain['samples_per_s']:.3f} s per chunk "
            f"and is no longer bound by its 7,200 sequential rounds' latency. `calibrate --plan-only` probed "
            f"{count(plan['probe']['draws_per_second'])} ({plan['expected_days_one_device']:.2f} days at chunk "
            f"{plan['chunk_size']:,}) with calls of one chunk each, which pay a run's set-up in full; the probe now "
            f"reads the steady rate of one run of several groups, as shard jobs report theirs "
            f"(`mcacct.evr.cost.probe_rate`; not yet measured on a GPU). mcacct-kernel/7, which screened the counts "
            f"on GPUs as on CPUs, ran the same "
            f"ladder at 30,125 draws/s on this card (69 h; commit 4b8942d): the screened round's rejection loop and "
            f"rare branches cost a GPU more than the chain they skip, so kernel 8 draws the counts there by every "
            f"sample's chain (`AUTO_SCREEN` in `mcacct/schemes/truncated/screen.py`) and CPUs keep screening. One hour for "
            f"§7.4 on one device needs about 2.1e6 draws/s, {2.1e6 / ladder['draws_per_s']:.0f} times this ladder.")


REGIONS: dict[str, Callable[[Results], list[str]]] = {
    "throughput": region_throughput,
    "production": region_production,
    "rng-floor": region_rng_floor,
    "gpu": region_gpu,
    "accelerator": region_accelerator,
    "mse-study": region_mse_study,
    "dpis": region_dpis,
    "calibrate-cost": region_calibrate_cost,
    "precision": region_precision,
    "recursion-sweep": region_recursion_sweep,
}


# -------------------------------------------------------------------------------------------------- rewriting

def render(text: str, results: Results | Path = RESULTS) -> str:
    """README text with every marked region regenerated; raises ValueError on unknown, unclosed, repeated or
    missing regions."""
    res = results if isinstance(results, Results) else Results(Path(results))
    lines = text.split("\n")
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        m = BEGIN.match(line)
        i += 1
        if not m:
            if END.match(line):
                raise ValueError(f"README line {i}: end marker without a begin marker")
            continue
        name, indent = m.group("name"), m.group("indent")
        if name not in REGIONS:
            raise ValueError(f"README line {i}: unknown region {name!r} (known: {', '.join(REGIONS)})")
        if name in seen:
            raise ValueError(f"README line {i}: region {name!r} appears twice")
        seen.add(name)
        j = i
        while j < len(lines) and not END.match(lines[j]):
            if BEGIN.match(lines[j]):
                raise ValueError(f"README line {j + 1}: region {name!r} is not closed before the next one")
            j += 1
        if j == len(lines) or END.match(lines[j]).group("name") != name:
            raise ValueError(f"README line {i}: region {name!r} has no matching end marker")
        out += [indent + g if g else "" for g in REGIONS[name](res)]
        out.append(lines[j])
        i = j + 1
    missing = set(REGIONS) - seen
    if missing:
        raise ValueError(f"README has no markers for region(s) {', '.join(sorted(missing))}")
    return "\n".join(out)


def diff(readme: Path = README, results: Results | Path = RESULTS) -> str:
    """Unified diff from README as it is to README as generated; empty when up to date."""
    current = Path(readme).read_text(encoding="utf-8")
    wanted = render(current, results)
    return "".join(difflib.unified_diff(current.splitlines(True), wanted.splitlines(True),
                                        f"{readme} (current)", f"{readme} (generated)"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 and print a diff if README is stale")
    ap.add_argument("--readme", type=Path, default=README, help="the README to rewrite or check")
    ap.add_argument("--results", type=Path, default=RESULTS, help="the folder of the results JSON files")
    args = ap.parse_args(argv)
    if args.check:
        d = diff(args.readme, args.results)
        if d:
            sys.stdout.write(d)
            print(f"\n{args.readme} is stale: run `make readme` (python benchmarks/readme_tables.py)",
                  file=sys.stderr)
            return 1
        return 0
    current = args.readme.read_text(encoding="utf-8")
    wanted = render(current, args.results)
    if wanted != current:
        args.readme.write_text(wanted, encoding="utf-8")
        print(f"rewrote the generated regions of {args.readme}")
    else:
        print(f"{args.readme} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
