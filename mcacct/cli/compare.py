"""``mcacct compare``: the command line of :func:`mcacct.report.compare.compare_schemes`."""

from __future__ import annotations

from mcacct.cli.flags import SEED_MAX, c_col_arg, device_info, int_in, real_in, sample_count
from mcacct.cli.schemes import Flag, flag_for
from mcacct.report.compare import compare_options, compare_schemes, row_names
from mcacct.strategies import default

__all__ = ["add_compare_parser", "cmd_compare", "compare_flags", "print_compare"]


def compare_flags() -> tuple[Flag, ...]:
    """The scheme flags (:mod:`mcacct.cli.schemes`) of the compare rows' options
    (:func:`mcacct.report.compare.compare_options`): each adds its scheme's row. An option without a
    command-line flag is not offered.

    Returns
    -------
    tuple of Flag
        Without duplicates, in the order of the options.
    """
    out = []
    for _, dest, _ in compare_options():
        flag = flag_for(dest)
        if flag is not None and flag not in out:
            out.append(flag)
    return tuple(out)


def add_compare_parser(subparsers):
    """Add ``compare`` to an ``argparse`` sub-parser set (``mcacct compare ... [--json]``).

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The set to add to.

    Returns
    -------
    argparse.ArgumentParser
        The new parser; its ``func`` is :func:`cmd_compare`.
    """
    p = subparsers.add_parser(
        "compare", help="noise multipliers of several sampling schemes at equal expected batch size",
        description="Calibrate b-min-sep, cyclic Poisson, balls-in-bins (and optionally truncated b-min-sep, "
                    "multi-attribution, banded-inverse) for one (epsilon, delta) at equal expected batch "
                    "size, with PLD baselines where they exist.")
    p.add_argument("--epsilon", type=real_in(0), default=2.0, help="target epsilon (>= 0; default 2)")
    p.add_argument("--delta", type=real_in(0, 1, low_open=True, high_open=True), default=1e-3, help="target delta in (0, 1) (default 1e-3)")
    p.add_argument("--iterations", type=int_in(1), default=64, help="training iterations n (default 64)")
    p.add_argument("--min-sep", type=int_in(1), default=4, help="min separation / cycle length b (default 4)")
    p.add_argument("--batch-size", type=real_in(0, low_open=True), default=32.0, help="expected batch size B (default 32)")
    p.add_argument("--dataset-size", type=int_in(1), default=1024, help="dataset size M (default 1024)")
    p.add_argument("--c-col", type=c_col_arg, default=None,
                   help="comma-separated non-zeros of C's first column (length <= min-sep); default: the "
                        "MSE-optimised banded Toeplitz C with min-sep bands (||c|| = 1), as the other commands "
                        "and get_noise_multiplier")
    for flag in compare_flags():  # each adds its scheme's row (its entry's CompareRow)
        flag.add_to(p)
    p.add_argument("--schemes", type=str, default=None, help=f"comma-separated subset of {','.join(row_names())}")
    p.add_argument("--samples", type=sample_count, default=None, help="Monte Carlo samples per direction per candidate")
    p.add_argument("--seed", type=int_in(0, SEED_MAX), default=0, help="root seed (default 0)")
    p.add_argument("--ladder-ratio", type=real_in(1, low_open=True), default=1.02, help="ratio between candidates (default 1.02)")
    p.add_argument("--chunk-size", type=int_in(1), default=4096, help="samples per chunk")
    p.add_argument("--no-pld", action="store_true", help="skip the PLD baselines")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_compare)
    return p


def cmd_compare(args) -> dict:
    """Handler of ``mcacct compare``: returns the result dict (printed as JSON by the caller with ``--json``).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``compare``.

    Returns
    -------
    dict
        :func:`mcacct.report.compare.compare_schemes`'s result with the device information.
    """
    options = {f.dest: getattr(args, f.dest) for f in compare_flags()}
    c_col = args.c_col
    if c_col is None:  # the default C of every command (mcacct.schemes.flags.SchemeArgs.strategy)
        c_col = default.default_strategy(args.iterations, args.min_sep).c_col
    out = compare_schemes(args.epsilon, args.delta, args.iterations, args.min_sep, args.batch_size,
                          args.dataset_size, c_col, schemes=args.schemes, num_samples=args.samples,
                          seed=args.seed, ladder_ratio=args.ladder_ratio, chunk_size=args.chunk_size,
                          pld=not args.no_pld, progress=not args.quiet, options=options)
    out.update(device_info())  # the rows' Monte Carlo samples were drawn here
    if not args.json:
        print_compare(out)
    return out


def print_compare(out: dict) -> None:
    """The human table of a :func:`mcacct.report.compare.compare_schemes` result: the target and setting, one
    line per row (sigma by Monte Carlo, sigma by PLD where there is one, notes) and one per skipped scheme.

    Parameters
    ----------
    out : dict
        The result, printed to stdout.
    """
    print(f"target (epsilon, delta) = ({out['epsilon']:g}, {out['delta']:g}); n = {out['iterations']}, "
          f"b = {out['min_sep']}, B = {out['expected_batch_size']:g}, M = {out['dataset_size']}")
    print(f"{'scheme':<22}{'sigma (MC, EVR)':>16}{'sigma (PLD)':>14}  note")
    for r in out["rows"]:
        pld_txt = f"{r['sigma_pld']:.4f}" if r.get("sigma_pld") is not None else "-"
        notes = [n for n in (r.get("pld_note"), r.get("note")) if n]
        if not r["verified"]:
            notes.insert(0, "unverified (Gaussian top)")
        print(f"{r['scheme']:<22}{r['sigma']:>16.4f}{pld_txt:>14}  {'; '.join(notes)}")
    for s in out["skipped"]:
        print(f"{s['scheme']:<22}{'skipped':>16}{'':>14}  {s['reason']}")
