"""The ``mcacct`` console command: the parser of every subcommand and :func:`main`.

Subcommands print a human summary, or one JSON object on stdout with ``--json``; progress goes to stderr.
Invalid input prints ``error: ...`` naming the parameter and exits with status 2. Each subcommand's flags and
handler live in a module of this package (``calibrate``, ``estimate`` for ``delta`` / ``epsilon``, ``pld``,
``individual``, ``dpis``, ``strategy``, ``mse_study``, ``compare``, ``jobs``).
"""

from __future__ import annotations

import argparse
import sys
import time

from mcacct.cli.flags import (Parser, configure_cpu_devices, enable_compilation_cache, flag_message, json_text,
                              record_given)
from mcacct.core.precision import float64


def build_parser() -> argparse.ArgumentParser:
    """The ``mcacct`` argument parser with every subcommand.

    Returns
    -------
    Parser
        Each subcommand's parser sets ``func``, its handler.
    """
    parser = Parser(
        prog="mcacct", description="Monte Carlo privacy accounting for DP-BandMF with b-min-sep subsampling.")
    import mcacct
    parser.add_argument("--version", action="version", version=f"mcacct {mcacct.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    from mcacct.cli.calibrate import add_calibrate_parser
    from mcacct.cli.estimate import add_estimate_parsers
    from mcacct.cli.compare import add_compare_parser
    from mcacct.cli.jobs import add_parsers as add_job_parsers
    from mcacct.cli.pld import add_pld_parser
    from mcacct.cli.mse_study import add_mse_study_parser
    from mcacct.cli.strategy import add_strategy_parser
    from mcacct.cli.individual import add_individual_parser
    from mcacct.cli.dpis import add_dpis_parser

    add_calibrate_parser(sub)
    add_estimate_parsers(sub)
    add_pld_parser(sub)
    add_individual_parser(sub)
    add_dpis_parser(sub)
    add_strategy_parser(sub)
    add_mse_study_parser(sub)
    add_compare_parser(sub)
    add_job_parsers(sub)
    return parser

def out_of_memory_message(chunk_size, err: BaseException) -> str:
    """What the CLI says when the device runs out of memory: the chunk size is the lever (memory ~ chunk x n).

    Parameters
    ----------
    chunk_size : int or Any
        The ``--chunk-size`` in use; an integer gets a suggestion of a quarter of it (at least 1).
    err : BaseException
        The device's error; the first 300 characters of its first line end the message.

    Returns
    -------
    str
    """
    smaller = f", e.g. {max(1, chunk_size // 4)}" if isinstance(chunk_size, int) else ""
    return (f"the device ran out of memory at --chunk-size {chunk_size} (memory grows with chunk size x "
            f"iterations); give a smaller --chunk-size{smaller}. {str(err).splitlines()[0][:300]}")


@float64  # the whole command in float64 (mcacct.core.precision); the caller's global flag is unchanged
def main(argv: list[str] | None = None) -> int:
    """Run the ``mcacct`` command line in float64.

    Parameters
    ----------
    argv : list of str or None
        The arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit code: 0 on success, 2 for invalid input (``error: ...`` on stderr), a numeric range exceeded or a
        device out of memory, 130 when interrupted, or the code a handler returns.
    """
    try:
        parser = build_parser()  # reads the scheme registry, which loads the installed schemes' entry points
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    record_given(args, argv)
    try:
        configure_cpu_devices(args)  # before JAX starts its backends
        import mcacct  # noqa: F401
        from mcacct.engine.progress import CompileClock
        enable_compilation_cache()
        t0 = time.perf_counter()
        args.started_at = t0  # the human summaries state the command's wall time, as the JSON's `seconds`
        clock = CompileClock.start()
        out = args.func(args)
        if isinstance(out, dict):
            compiled = CompileClock.since(clock)  # tracing + lowering + compiling, persistent-cache hits
            if args.command in ("calibrate", "delta", "epsilon"):
                out["startup"] = compiled
            # the command's wall time, everything included (baselines, pilot, compilation); the compilation
            # part beside it
            out["seconds"] = time.perf_counter() - t0
            out["compile_seconds"] = compiled["compile_seconds"]
    except ValueError as err:
        print(f"error: {flag_message(str(err))}", file=sys.stderr)
        return 2
    except FloatingPointError as err:  # a kernel's numeric range exceeded: nothing was certified
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 -- only a device running out of memory is answered here
        if "RESOURCE_EXHAUSTED" not in str(err) or not hasattr(args, "chunk_size"):
            raise
        print(f"error: {out_of_memory_message(args.chunk_size, err)}", file=sys.stderr)
        return 2
    if isinstance(out, int):
        return out
    if getattr(args, "multi", False):
        import jax
        if jax.process_index() != 0:  # every process holds the same result; process 0 reports it
            return 0
    if getattr(args, "json", False):
        from mcacct.report.schema import report
        # the one schema of every report (docs/json.md); a non-finite number is null (flags.json_text)
        print(json_text(report(command_name(args), out)))
    return 0


def command_name(args: argparse.Namespace) -> str:
    """The subcommand of ``args`` as typed, sub-commands joined by a space (``"pld epsilon"``): a report's
    ``command``.

    Parameters
    ----------
    args : argparse.Namespace

    Returns
    -------
    str
    """
    return " ".join(str(v) for v in (getattr(args, "command", None), getattr(args, "pld_command", None),
                                     getattr(args, "dpis_command", None)) if v)


if __name__ == "__main__":
    sys.exit(main())
