"""Where the test suite's time goes to XLA: a pytest plugin that records every compilation per test, and a summary.

JAX reports each compilation's stages through ``jax.monitoring`` (``/jax/core/compile/jaxpr_trace_duration``,
``jaxpr_to_mlir_module_duration``, ``backend_compile_duration``, the last with the jitted function's name) and each
persistent-cache hit and miss. Loaded into pytest, this module keeps one row per event, ``[test node id, event,
function name, seconds]``, and each process (each xdist worker) writes its rows to ``$MCACCT_COMPILE_PROFILE_DIR``
(default ``compile_profile/``) at the end. Tests that run the command line in a subprocess are not seen: their
compilations happen in the child.

    PYTHONPATH=benchmarks python -m pytest -n 2 --dist loadfile -p suite_compile   # rows_<worker>.json
    python benchmarks/suite_compile.py compile_profile [--top 30] [--json]        # the summary

The summary gives the backend compilation seconds and counts by function and by test file, the share of programs
under 0.2 s (which the suite's persistent cache does not keep), and the cache's hits and misses. The seconds are
wall time in busy workers, so on a 2-core box with two workers each reads about twice its solo time; compare
shares, not seconds. The figures of a run are in ``benchmarks/results/suite_compile.txt``.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import sys

ENV_DIR = "MCACCT_COMPILE_PROFILE_DIR"
BACKEND = "backend_compile_duration"
STAGES = ("jaxpr_trace_duration", "jaxpr_to_mlir_module_duration", BACKEND)

_rows: list[list] = []
_current: dict[str, str | None] = {"test": None}


def _on_duration(event: str, duration: float, **kwargs) -> None:
    if "/jax/core/compile/" in event:
        _rows.append([_current["test"], event.rsplit("/", 1)[1], str(kwargs.get("fun_name", "")), float(duration)])


def _on_event(event: str, **kwargs) -> None:
    if event.endswith(("/cache_hits", "/cache_misses")):
        _rows.append([_current["test"], event.rsplit("/", 1)[1], "", 0.0])


def _register() -> None:
    import jax.monitoring as monitoring

    monitoring.register_event_duration_secs_listener(_on_duration)
    monitoring.register_event_listener(_on_event)


def pytest_configure(config) -> None:  # a pytest hook: listen from the start of the session
    _register()


def pytest_runtest_protocol(item, nextitem):  # a pytest hook (plain function: pytest calls it before the runner)
    _current["test"] = item.nodeid


def pytest_sessionfinish(session, exitstatus) -> None:  # a pytest hook: each process writes its rows
    out = os.environ.get(ENV_DIR, "compile_profile")
    os.makedirs(out, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(out, f"rows_{worker}.json"), "w", encoding="utf-8") as f:
        json.dump(_rows, f)


def summarise(rows: list[list], top: int = 30) -> dict:
    """Totals of the rows of one run (every worker's).

    Parameters
    ----------
    rows : list of list
        ``[test node id or None, event, function name, seconds]`` as the plugin writes them.
    top : int, default 30
        Entries per table.

    Returns
    -------
    dict
        ``stages`` (seconds per stage), ``programs`` (backend compilations), ``small`` (count and seconds of those
        under 0.2 s), ``cache`` (hits, misses), ``by_function`` and ``by_file`` (``[name, count, seconds]``,
        largest first).
    """
    stages = {s: 0.0 for s in STAGES}
    cache = {"cache_hits": 0, "cache_misses": 0}
    by_fn: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    by_file: dict[str, list] = collections.defaultdict(lambda: [0, 0.0])
    small = [0, 0.0]
    for test, event, name, seconds in rows:
        if event in cache:
            cache[event] += 1
        if event in stages:
            stages[event] += seconds
        if event != BACKEND:
            continue
        for table, key in ((by_fn, name), (by_file, (test or "(outside a test)").split("::")[0])):
            table[key][0] += 1
            table[key][1] += seconds
        if seconds < 0.2:
            small[0] += 1
            small[1] += seconds

    def ranked(table):
        return [[k, c, round(s, 1)] for k, (c, s) in sorted(table.items(), key=lambda kv: -kv[1][1])[:top]]

    return {"stages": {k: round(v, 1) for k, v in stages.items()},
            "programs": sum(c for c, _ in by_fn.values()),
            "small": {"count": small[0], "seconds": round(small[1], 1)}, "cache": cache,
            "by_function": ranked(by_fn), "by_file": ranked(by_file)}


def report(s: dict) -> str:
    """The summary as text."""
    lines = [f"backend compilations: {s['programs']}; seconds by stage: "
             + ", ".join(f"{k} {v}" for k, v in s["stages"].items()),
             f"under 0.2 s (not kept by the persistent cache): {s['small']['count']} programs, "
             f"{s['small']['seconds']} s; persistent cache: {s['cache']['cache_hits']} hits, "
             f"{s['cache']['cache_misses']} misses"]
    for title, key in (("by function", "by_function"), ("by test file", "by_file")):
        lines.append(f"\nbackend compilation {title} (seconds, count):")
        lines += [f"  {sec:8.1f} {count:5d}  {name}" for name, count, sec in s[key]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Summarise the compilations recorded by the suite_compile plugin.")
    ap.add_argument("directory", help="where the plugin wrote rows_<worker>.json")
    ap.add_argument("--top", type=int, default=30, help="entries per table (default 30)")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args(argv)
    if args.top < 1:
        print(f"suite_compile.py: --top must be an integer >= 1; got {args.top}", file=sys.stderr)
        return 2
    files = sorted(glob.glob(os.path.join(args.directory, "rows_*.json")))
    if not files:
        print(f"suite_compile.py: no rows_*.json in {args.directory!r}; run pytest with -p suite_compile first",
              file=sys.stderr)
        return 2
    rows = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            rows += json.load(f)
    s = summarise(rows, args.top)
    print(json.dumps(s, indent=1) if args.json else report(s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
