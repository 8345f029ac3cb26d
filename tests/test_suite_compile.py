"""benchmarks/suite_compile.py: the plugin's rows are summarised by function, by test file and by stage, and its
command line refuses what it cannot read (exit 2, no traceback)."""

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import suite_compile  # noqa: E402

ROWS = [["tests/a.py::t1", "jaxpr_trace_duration", "f", 0.5],
        ["tests/a.py::t1", "backend_compile_duration", "jit(f)", 2.0],
        ["tests/a.py::t2", "backend_compile_duration", "jit(g)", 0.1],
        ["tests/b.py::t[x]", "backend_compile_duration", "jit(f)", 1.0],
        [None, "backend_compile_duration", "jit(h)", 0.04],
        ["tests/b.py::t[x]", "cache_hits", "", 0.0], ["tests/a.py::t1", "cache_misses", "", 0.0]]


def test_summary_by_function_file_stage_and_cache():
    s = suite_compile.summarise(ROWS, top=2)
    assert s["programs"] == 4 and s["stages"]["backend_compile_duration"] == 3.1  # 3.14, rounded
    assert s["stages"]["jaxpr_trace_duration"] == 0.5
    assert s["by_function"] == [["jit(f)", 2, 3.0], ["jit(g)", 1, 0.1]]  # top 2, largest first
    assert s["by_file"][0] == ["tests/a.py", 2, 2.1] and s["by_file"][1] == ["tests/b.py", 1, 1.0]
    assert s["small"] == {"count": 2, "seconds": 0.1} and s["cache"] == {"cache_hits": 1, "cache_misses": 1}
    assert "jit(f)" in suite_compile.report(s)


def test_command_line_reads_the_workers_rows_and_refuses_bad_input(tmp_path, capsys):
    (tmp_path / "rows_gw0.json").write_text(json.dumps(ROWS[:3]))
    (tmp_path / "rows_gw1.json").write_text(json.dumps(ROWS[3:]))
    assert suite_compile.main([str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["programs"] == 4
    assert suite_compile.main([str(tmp_path / "none")]) == 2
    assert "no rows_*.json" in capsys.readouterr().err
    assert suite_compile.main([str(tmp_path), "--top", "0"]) == 2
    assert "--top must be an integer >= 1" in capsys.readouterr().err
