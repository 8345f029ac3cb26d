"""benchmarks/accelerator.py, the accelerator measuring script, checked without an accelerator.

(1) ``--lower-only``: every program the script lowers for cuda (the compiled Pallas fused kernel, the engine's
shared-draw ladder with the fused and the unfused loss kernel, the truncated scheme, the single-direction chunk
programs) and for tpu (the XLA forms) exports from this CPU host, each platform in a fresh process with
``MCACCT_TARGET_PLATFORM`` set. (2) ``--part roofline --quick``: a device part's file handling end to end on
CPU.
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
                 "ladder_chunk_truncated_unfused", "ladder_chunk_truncated_screened", "chunk_losses_bminsep",
                 "chunk_losses_truncated", "chunk_losses_truncated_screened"):
        assert cuda[name]["status"] == "ok", (name, cuda[name])
    # the fused forms lowered through Pallas Triton (not the CPU form traced by mistake), the unfused without it
    assert cuda["pallas_fused_kernel"]["detail"].startswith("1 Triton")
    assert cuda["ladder_chunk_bminsep_fused"]["detail"].startswith("1 Triton")
    assert cuda["ladder_chunk_bminsep_unfused"]["detail"] == ""
    tpu = {c["name"]: c for c in data["platforms"]["tpu"]["checks"]}
    assert set(tpu) == {"ladder_chunk_bminsep_unfused", "ladder_chunk_truncated_unfused",
                        "ladder_chunk_truncated_screened", "chunk_losses_bminsep", "chunk_losses_truncated",
                        "chunk_losses_truncated_screened"}
    assert all(c["status"] in ("ok", "skipped") for c in tpu.values()), tpu
    lines = r.stdout.splitlines()
    for name in ("pallas_fused_kernel", "ladder_chunk_bminsep_fused", "ladder_chunk_bminsep_unfused"):
        assert any(ln.split()[:3] == ["cuda", name, "ok"] for ln in lines), r.stdout
    assert lines[-1].startswith("lowering checks: 0 failed")


def test_quick_roofline_part_writes_the_resumable_file(tmp_path):
    """The device parts' file handling end to end on CPU at the cheapest part (``roofline --quick``); the
    throughput part's table is smoke-tested by hand (``--part throughput --quick``, ~1 min on the 2-core box), which
    is too slow for the suite."""
    r = _run("--part", "roofline", "--quick", "--seconds", "0.05", "--out-dir", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    path = tmp_path / "accelerator_cpu_quick.json"
    data = json.loads(path.read_text())
    assert data["device"].startswith("cpu") and data["jax"]
    roof = data["parts"]["roofline"]
    assert roof["measured"]["rng_sliding_exp"]["samples_per_s"] > 0
