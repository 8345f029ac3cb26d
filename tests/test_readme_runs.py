"""README.md runs as written (issue #41): every fenced ``bash`` and ``python`` block, in a fresh working directory
beside the repository's example files, with the test run's environment (its ``.venv`` first on ``PATH``).

A block preceded by ``<!-- readme-run: skip REASON -->`` is not run; the skip and its reason are reported, and
tests/test_readme.py still checks that its commands name existing subcommands, flags and scripts. A ``bash`` block
runs as one script with ``set -euo pipefail`` (its variables, ``&&`` chains and comments as a reader would paste
them); a ``python`` block as one script. Each block's output is checked where the README states it (``--json``
output parses as strict JSON). Blocks run in README order in one directory, so a later block sees what an earlier
one wrote (``runs/``), as for a reader going top to bottom.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from suite_env import optimised_env

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SKIP = re.compile(r"<!--\s*readme-run:\s*skip\s+(?P<reason>.*?)\s*-->")
FENCE = re.compile(r"^```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
RUNNABLE = {"bash": "bash", "sh": "bash", "python": "python", "py": "python"}
#: the longest a block may take on the 2-core CI box before the run counts as hung (the README states each time)
TIMEOUT_S = 600


def blocks(text: str) -> list[tuple[int, str, str, str | None]]:
    """``(line, language, code, skip reason)`` of every fenced block (``language`` as written; reason ``None``
    unless the nearest non-blank line above the fence is a ``readme-run: skip`` comment)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group("lang"):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        skip = SKIP.search(lines[k]) if k >= 0 else None
        out.append((i + 1, m.group("lang"), "\n".join(lines[i + 1:j]) + "\n", skip.group("reason") if skip else None))
        i = j + 1
    return out


README_BLOCKS = [b for b in blocks(README.read_text(encoding="utf-8")) if b[1] in RUNNABLE]


def test_the_readme_has_runnable_blocks_and_every_skip_says_why():
    assert len([b for b in README_BLOCKS if b[3] is None]) >= 3
    for line, _, _, reason in README_BLOCKS:
        assert reason is None or len(reason) > 10, f"README.md:{line}: a skipped block must say why"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A fresh directory with what a reader at the repository root sees: the example files, the launchers and
    scripts, the Makefile and the environment (symlinks; nothing is written into the repository)."""
    d = tmp_path_factory.mktemp("readme")
    for name in ("examples", "launch", "benchmarks", "Makefile", "pyproject.toml", "mcacct"):
        (d / name).symlink_to(ROOT / name)
    (d / ".venv").symlink_to(Path(sys.prefix))
    return d


def _env() -> dict:
    """The test run's environment (LLVM's level 0 left out: tests/suite_env.py, :func:`optimised_env`), the
    ``.venv`` first on ``PATH``."""
    env = optimised_env(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("PYTHONPATH", None)
    return env


def _json_objects(stdout: str) -> list:
    """The JSON documents a block printed (one line or indented): each starts on a line beginning with ``{`` or
    ``[`` and parses as strict JSON (``NaN``/``Infinity`` refused)."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    decoder, out, pos = json.JSONDecoder(parse_constant=refuse), [], 0
    for m in re.finditer(r"^[{\[]", stdout, flags=re.M):
        if m.start() < pos:
            continue
        doc, pos = decoder.raw_decode(stdout, m.start())
        out.append(doc)
    return out


@pytest.mark.parametrize("line,lang,code,reason", README_BLOCKS, ids=[f"L{b[0]}-{b[1]}" for b in README_BLOCKS])
def test_readme_block_runs_as_written(line, lang, code, reason, workdir):
    if reason is not None:
        pytest.skip(f"README.md:{line}: {reason}")
    if RUNNABLE[lang] == "bash":
        argv = ["bash", "-c", "set -euo pipefail\n" + code]
    else:
        argv = [sys.executable, "-c", code]
    try:
        done = subprocess.run(argv, cwd=workdir, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"README.md:{line} ({lang}) ran over {TIMEOUT_S} s:\n{(err.stderr or '')[-3000:]}")
    assert done.returncode == 0, (f"README.md:{line} ({lang}) exited {done.returncode}:\n--- stdout\n"
                                  f"{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-6000:]}")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    docs = _json_objects(done.stdout)
    assert len(docs) >= code.count("--json"), f"README.md:{line}: a JSON document per --json command"
    if re.search(r"^mcacct calibrate --json\b", code, flags=re.M):
        check_demo_calibration(docs, line)


def check_demo_calibration(docs: list, line: int) -> None:
    """The README's first command, ``mcacct calibrate --json`` (the demo configuration, n = 128, b = 4, as
    ``make run``), certifies its sigma and reports the PLD baselines. These checks were a test of their own that ran
    the same calibration a second time (tests/cli/test_commands.py); here they read the README's run."""
    demo = [d for d in docs if isinstance(d, dict) and d.get("command") == "calibrate"
            and d.get("scheme", {}).get("iterations") == 128 and d.get("scheme", {}).get("min_sep") == 4]
    assert demo, f"README.md:{line}: no JSON document of the demo calibration"
    out = demo[0]
    assert out["verified"] is True and out["certified"] is True
    assert out["overall_delta"] <= out["delta"]
    for key in ("sigma", "base_delta", "epsilon", "num_samples", "candidates"):
        assert key in out
    assert all("sigma" in c for c in out["candidates"])
    base = out["baselines"]
    assert base["poisson_dpsgd_sigma"] > 0 and base["cyclic_poisson_bandmf_sigma"] > 0
    # DP-SGD (no correlation, C = I) needs less noise than BandMF with the same batch size
    assert base["poisson_dpsgd_sigma"] < out["sigma"]
