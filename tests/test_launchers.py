"""The launchers (#41): the command line's flag spelling with the absl underscores as deprecated aliases, the shard
index and count of SLURM arrays and Kubernetes Indexed Jobs, the short summary of ``local_multiprocess.py --out``,
and the Kubernetes manifest and image. Each launcher runs in a child process of its own (absl flags are global)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

LAUNCH = Path(ROOT) / "launch"
KUBE = LAUNCH / "kubernetes"
ENV_NAMES = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "JOB_COMPLETION_INDEX", "MCACCT_NUM_SHARDS",
             "SGE_TASK_ID")


def _child(code: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    return subprocess.run([sys.executable, "-c", code, str(LAUNCH), *args], capture_output=True, text=True,
                          timeout=120, env={**base, **(env or {})})


DETECT = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import job_array
from absl import flags
out = []
for argv, env in json.loads(sys.argv[2]):
    for k in %r:
        os.environ.pop(k, None)
    os.environ.update(env)
    flags.FLAGS.unparse_flags()
    flags.FLAGS(["job_array.py", *argv])
    try:
        out.append(job_array.shard_command(["--sigma", "1"]))
    except ValueError as err:
        out.append(str(err))
print(json.dumps(out))
""" % (ENV_NAMES,)


def test_job_array_finds_the_shard_of_slurm_kubernetes_and_explicit_flags():
    cases = [
        ([], {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_COUNT": "8"}),
        ([], {"JOB_COMPLETION_INDEX": "5", "MCACCT_NUM_SHARDS": "6"}),
        ([], {"JOB_COMPLETION_INDEX": "5"}),  # the manifest forgot MCACCT_NUM_SHARDS
        (["--num-shards", "7"], {"JOB_COMPLETION_INDEX": "6"}),
        ([], {"JOB_COMPLETION_INDEX": "6", "MCACCT_NUM_SHARDS": "6"}),  # index beyond the count
        (["--shard-env", "SGE_TASK_ID", "--shard-offset", "1", "--num-shards", "4"], {"SGE_TASK_ID": "4"}),
        (["--shard_env", "JOB_COMPLETION_INDEX", "--num_shards", "3"], {"JOB_COMPLETION_INDEX": "1"}),  # 0.1 way
        (["--shard", "1"], {"MCACCT_NUM_SHARDS": "2", "SLURM_ARRAY_TASK_COUNT": "9"}),  # the explicit count wins
        ([], {}),
        ([], {"JOB_COMPLETION_INDEX": "x", "MCACCT_NUM_SHARDS": "2"}),
    ]
    r = _child(DETECT, json.dumps([[["--out", "gs://b/r", *argv], env] for argv, env in cases]))
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    tail = ["--out", "gs://b/r", "--sigma", "1"]
    assert got[0] == ["sample", "--shard", "2", "--num-shards", "8", *tail]
    assert got[1] == ["sample", "--shard", "5", "--num-shards", "6", *tail]
    assert "set MCACCT_NUM_SHARDS (in the manifest: a pod of a Kubernetes Indexed Job cannot see" in got[2]
    assert got[3] == ["sample", "--shard", "6", "--num-shards", "7", *tail]
    assert got[4] == "shard must be an integer in [0, 5]; got 6 (from $JOB_COMPLETION_INDEX (Kubernetes Indexed Job))"
    assert got[5] == ["sample", "--shard", "3", "--num-shards", "4", *tail]
    assert got[6] == ["sample", "--shard", "1", "--num-shards", "3", *tail]
    assert got[7] == ["sample", "--shard", "1", "--num-shards", "2", *tail]
    assert got[8].startswith("shard: give --shard, or --shard-env NAME, or run as a SLURM array task")
    assert got[9] == "environment variable JOB_COMPLETION_INDEX must be an integer; got 'x'"


def test_underscore_spellings_work_with_a_deprecation_note():
    r = subprocess.run([sys.executable, str(LAUNCH / "job_array.py"), "--out", "x", "--num_shards", "3",
                        "--shard", "5", "--", "--min-sep", "4"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "note: --num_shards is deprecated: use --num-shards" in r.stderr
    assert "error: shard must be an integer in [0, 2]; got 5" in r.stderr
    code = """
import sys
sys.path.insert(0, sys.argv[1])
from absl import flags
import _flags
_flags.define_scheme_flags()
_flags.define_mc_flags()
flags.FLAGS(["p", "--sigma=1", "--min_sep=3", "--chunk_size=64", "--cold_start", "--sampling-prob=0.5"])
print(_flags.value("min-sep"), _flags.value("chunk-size"), _flags.value("cold-start"), _flags.value("sampling-prob"))
print(" ".join(_flags.deprecation_notes()))
print(sorted(n for n in flags.FLAGS if "_" in n and n in _flags.ALIASES) == sorted(_flags.ALIASES))
"""
    r = _child(code)
    assert r.returncode == 0, r.stderr[-2000:]
    values, notes, complete = r.stdout.strip().splitlines()
    assert values == "3 64 True 0.5"
    assert all(f"--{o} is deprecated: use --{n}," in notes for o, n in
               [("min_sep", "min-sep"), ("chunk_size", "chunk-size"), ("cold_start", "cold-start")])
    assert "sampling_prob" not in notes and complete == "True"


def test_local_multiprocess_prints_a_summary_when_out_holds_the_result():
    code = """
import json, sys
sys.path.insert(0, sys.argv[1])
import local_multiprocess as lm
result = {"sigma": 0.9, "delta_upper": 1e-3, "results": [{"epsilon": 1.0}],
          "stats": {"remove": {"hist": {"index": list(range(20000))}}}}
print(lm.summary("progress\\n" + json.dumps(result) + "\\n", "r.json"), end="")
text = "\\n".join(f"line {i}" for i in range(100))
print(lm.summary(text, "r.txt").splitlines()[-1])
print(lm.summary("short\\ntext\\n", "r.txt"), end="")
"""
    r = _child(code)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert json.loads(lines[0]) == {"sigma": 0.9, "delta_upper": 1e-3, "results": [{"epsilon": 1.0}],
                                    "omitted": {"entries": ["stats"], "file": "r.json"}}
    assert len(lines[0]) < 300
    assert lines[1:] == ["... (60 more lines in r.txt)", "short", "text"]


def test_the_image_pins_the_jax_of_pyproject():
    pins = dict(re.findall(r'"(jax|jaxlib)==([^"]+)"', (Path(ROOT) / "pyproject.toml").read_text()))
    docker = (KUBE / "Dockerfile").read_text()
    assert re.search(r"^ARG JAX_VERSION=(\S+)$", docker, re.M).group(1) == pins["jax"] == pins["jaxlib"]
    assert "pip install . ${STORAGE}" in docker and 'ENTRYPOINT ["python", "launch/job_array.py"]' in docker
    ignore = (KUBE / "Dockerfile.dockerignore").read_text().split()
    assert ignore[ignore.index("*"):][:5] == ["*", "!pyproject.toml", "!README.md", "!mcacct", "!launch"]


def test_the_manifest_is_an_indexed_job_whose_shard_count_matches():
    yaml = pytest.importorskip("yaml")
    job = yaml.safe_load((KUBE / "indexed-job.yaml").read_text())
    spec = job["spec"]
    assert job["kind"] == "Job" and spec["completionMode"] == "Indexed"
    container = spec["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert int(env["MCACCT_NUM_SHARDS"]["value"]) == spec["completions"]
    assert env["MCACCT_SHARD_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "mcacct-shard-key"
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # what backoffLimitPerIndex needs
    from test_readme import check  # the flags exist: job_array.py's, then `mcacct sample`'s after --
    assert check(["python", "launch/job_array.py", *container["args"]]) == []
    assert check(["python", "launch/job_array.py", "--out=x", "--", "--no-such-flag"])
