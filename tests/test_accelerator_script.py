"""benchmarks/accelerator.py, the accelerator measuring script, checked without an accelerator.

(1) ``--lower-only``: every program the script lowers for cuda (the compiled Pallas fused kernel, the engine's
shared-draw ladder with the fused and the unfused loss kernel, the truncated scheme, the single-direction chunk
programs) and for tpu (the XLA forms) exports from this CPU host, each platform in a fresh process with
``MCACCT_TARGET_PLATFORM`` set. (2) ``--part throughput --quick``: the device part's code path end to end on
CPU at a tiny shape (one configuration), writing the resumable JSON table and its bar chart.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "accelerator.py")


def _env() -> dict:
    env = dict(os.environ)
    env.pop("MCACCT_TARGET_PLATFORM", None)       # the script sets it per platform itself
    env["JAX_PLATFORMS"] = "cpu"
    return env


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=timeout)


def test_lower_only_exports_every_program_for_cuda_and_tpu(tmp_path):
    out = tmp_path / "lower.json"
    r = _run("--lower-only", "--out", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.read_text())
    assert data["ok"] is True
    cuda = {c["name"]: c for c in data["platforms"]["cuda"]["checks"]}
    for name in ("pallas_fused_kernel", "ladder_chunk_bminsep_fused", "ladder_chunk_bminsep_unfused",
                 "ladder_chunk_truncated_unfused", "chunk_losses_bminsep", "chunk_losses_truncated"):
        assert cuda[name]["status"] == "ok", (name, cuda[name])
    # the fused forms lowered through Pallas Triton (not the CPU form traced by mistake), the unfused without it
    assert cuda["pallas_fused_kernel"]["detail"].startswith("1 Triton")
    assert cuda["ladder_chunk_bminsep_fused"]["detail"].startswith("1 Triton")
    assert cuda["ladder_chunk_bminsep_unfused"]["detail"] == ""
    tpu = {c["name"]: c for c in data["platforms"]["tpu"]["checks"]}
    assert set(tpu) == {"ladder_chunk_bminsep_unfused", "ladder_chunk_truncated_unfused", "chunk_losses_bminsep",
                        "chunk_losses_truncated"}
    assert all(c["status"] in ("ok", "skipped") for c in tpu.values()), tpu
    lines = r.stdout.splitlines()
    for name in ("pallas_fused_kernel", "ladder_chunk_bminsep_fused", "ladder_chunk_bminsep_unfused"):
        assert any(ln.split()[:3] == ["cuda", name, "ok"] for ln in lines), r.stdout
    assert lines[-1].startswith("lowering checks: 0 failed")


def test_quick_throughput_part_writes_the_table(tmp_path):
    r = _run("--part", "throughput", "--quick", "--configs", "n64_b8", "--seconds", "0.05", "--out-dir", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    path = tmp_path / "accelerator_cpu_quick.json"
    assert r.stdout.splitlines()[0] == str(path)
    assert (tmp_path / "accelerator_cpu_quick.png").stat().st_size > 0
    data = json.loads(path.read_text())
    assert data["device"].startswith("cpu") and data["jax"]
    part = data["parts"]["throughput"]
    assert set(part["table"]) == {"n64_b8"}
    assert part["complete"] is False               # the other quick configuration was not asked for
    row = part["table"]["n64_b8"]
    assert (row["iterations"], row["min_sep"]) == (64, 8) and 0 < row["sampling_prob"] < 1
    assert set(row["single"]) == {"unfused_f64", "unfused_f32"}
    assert set(row["ladder"]) == {"unfused_f64", "unfused_f32", "fused_f64", "fused_f32"}
    assert row["ladder"]["fused_f32"].startswith("n/a")
    for kind, label, unit in (("single", "unfused_f64", "samples"), ("single", "unfused_f32", "samples"),
                              ("ladder", "unfused_f64", "draws"), ("ladder", "unfused_f32", "draws"),
                              ("ladder", "fused_f64", "draws")):
        entry = row[kind][label]
        assert entry[f"{unit}_per_s"] > 0, (kind, label, entry)
        assert entry["compile_s"] > 0 and entry["first_call_s"] > 0 and entry["chunk_size"] == 256
        assert entry[f"xla_bytes_per_{unit[:-1]}"] > 0
    ladder = row["ladder"]["unfused_f64"]
    assert ladder["evaluations_per_s"] == ladder["draws_per_s"] * 8
    counted = row["ladder"]["fused_f64"]["fused_counted_bytes"]
    assert counted["kernel_bytes_per_draw"] > 0 and "not measured" in counted["source"]

    # resumable: a second run keeps what was measured and adds the missing part's entries only
    before = row["single"]["unfused_f64"]["samples_per_s"]
    r = _run("--part", "roofline", "--quick", "--seconds", "0.05", "--out-dir", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(path.read_text())
    assert data["parts"]["throughput"]["table"]["n64_b8"]["single"]["unfused_f64"]["samples_per_s"] == before
    roof = data["parts"]["roofline"]
    assert roof["measured"]["rng_sliding_exp"]["samples_per_s"] > 0
    assert roof["fractions_of_roofline"]["single_unfused_f64"] > 0
