"""``mcacct individual``: per-example privacy accounting (:mod:`mcacct.individual`) from a file of gradient
norms, with an optional histogram of the individual epsilons against the worst case."""

from __future__ import annotations

import math
import os

import numpy as np

from mcacct.cli.flags import check_out_file, int_in, real_in

__all__ = ["add_individual_parser", "cmd_individual", "individual_title", "PLOT_SUFFIXES", "KIND_WORDS"]

#: Image formats of ``--plot`` (matplotlib picks the format from the suffix).
PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def add_individual_parser(subparsers):
    """Add ``individual`` to an ``argparse`` sub-parser set.

    Parameters
    ----------
    subparsers : argparse._SubParsersAction
        The set to add to.

    Returns
    -------
    argparse.ArgumentParser
        The new parser; its ``func`` is :func:`cmd_individual`.
    """
    p = subparsers.add_parser(
        "individual", help="individual (per-example) epsilon of DP-SGD from per-step gradient norms",
        description="Individual epsilon(delta) of every example of a Poisson-subsampled DP-SGD run (Koskela, "
                    "Tobaben & Honkela, arXiv:2209.15596): row i of --norms holds example i's gradient norm at "
                    "every step (whether or not it was sampled); ratios r = min(norm / clip-norm, 1) are rounded "
                    "UP to --buckets edges, so every epsilon is an upper bound on the composition with those "
                    "ratios. It is a guarantee of the run (certified: true) only with --ratios-fixed (any q, 1 "
                    "included); otherwise the norms depend on the training trajectory and the result is labelled "
                    "approximative (certified: false), in the JSON and on the --plot alike. A rigorous guarantee "
                    "for trajectory-dependent norms needs a GDP filter with its budget fixed before training "
                    "(mcacct.individual.gdp).")
    p.add_argument("--norms", required=True, help=".npy file, shape (examples, steps): per-step gradient norms")
    p.add_argument("--clip-norm", type=real_in(0, low_open=True), default=1.0,
                   help="clip bound C > 0 (default 1: the file holds the ratios norm / C)")
    p.add_argument("--sigma", type=real_in(0, low_open=True), required=True,
                   help="noise multiplier (noise std / clip bound), > 0")
    p.add_argument("--sampling-prob", type=real_in(0, 1, low_open=True), required=True,
                   help="Poisson sampling probability q in (0, 1]")
    p.add_argument("--delta", type=real_in(0, 1, low_open=True, high_open=True), required=True,
                   help="delta in (0, 1)")
    p.add_argument("--buckets", type=int_in(1), default=100, help="ratio buckets (>= 1; edges k/K; default 100)")
    p.add_argument("--value-discretization-interval", type=real_in(0, 0.1, low_open=True), default=1e-3,
                   metavar="H", help="loss grid spacing in (0, 0.1] (default 1e-3)")
    p.add_argument("--ratios-fixed", action="store_true",
                   help="the norms were fixed before training (the result is then rigorous for any q; without "
                        "it, approximative for every q, 1 included)")
    p.add_argument("--no-bucketing-bound", action="store_true",
                   help="skip the rounded-down pass (the bucketing bound; halves the work)")
    p.add_argument("--plot", default=None, metavar="HIST.png",
                   help="histogram of individual epsilon vs worst case (.png, .pdf or .svg; its directory must exist)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_individual)
    return p


def _load(path: str, clip: float) -> np.ndarray:
    try:
        norms = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ValueError(f"--norms {path!r} cannot be read as a .npy array: {err}") from None
    if not isinstance(norms, np.ndarray):  # an .npz archive (NpzFile) of several arrays
        close = getattr(norms, "close", None)
        if close is not None:
            close()
        raise ValueError(f"--norms {path!r} must be a .npy file holding one array (np.save); got a "
                         f"{type(norms).__name__} (an .npz archive?)")
    if norms.dtype.kind not in "iuf":  # complex would be cut to its real part, strings parsed, bool taken as 0/1
        raise ValueError(f"--norms {path!r} must hold real numbers (an integer or float dtype); got dtype "
                         f"{norms.dtype}")
    norms = np.asarray(norms, np.float64)
    if norms.ndim == 1:
        norms = norms[None, :]
    if norms.ndim != 2 or norms.size == 0:
        raise ValueError(f"--norms must hold a 2-D array (examples, steps); got shape {norms.shape}")
    if not np.all(np.isfinite(norms)) or np.any(norms < 0):
        raise ValueError("--norms must hold finite, non-negative gradient norms")
    return np.minimum(norms / clip, 1.0)


#: What the individual epsilons are, per :func:`mcacct.individual.accountant.accountant_kind`: the word of the
#: plot's title and axis, as the JSON's ``accountant`` and ``certified`` say it.
KIND_WORDS = {"gdp": "rigorous upper bounds", "fixed": "rigorous upper bounds",
              "approximative": "approximative, not a guarantee"}


def individual_title(delta: float, sigma: float, sampling_prob: float, steps: int, examples: int,
                     clip_norm: float, buckets: int, kind: str = "approximative") -> str:
    """Title of the ``--plot`` histogram: what is shown and every parameter it depends on.

    Parameters
    ----------
    delta, sigma, sampling_prob:
        Target δ, noise multiplier σ and Poisson sampling probability q.
    steps, examples:
        Shape of the norms file.
    clip_norm, buckets:
        Clip bound C and ratio buckets K.
    kind:
        :func:`mcacct.individual.accountant.accountant_kind` of the result: ``"gdp"`` or ``"fixed"`` (rigorous
        upper bounds) or ``"approximative"`` (the ratios depend on the training: not a guarantee), as the JSON's
        ``accountant_kind`` and ``certified``.

    Returns
    -------
    str
        Two lines, Greek letters for δ, σ and ε.
    """
    return (f"Individual ε at δ = {delta:g} of {examples:,} examples ({KIND_WORDS[kind]})\n"
            f"σ = {sigma:g}, q = {sampling_prob:g}, {steps:,} steps, clip norm C = {clip_norm:g}, "
            f"{buckets} ratio buckets")


def _bins(eps: np.ndarray) -> tuple[np.ndarray | int, bool]:
    """Histogram bins and whether the axis is logarithmic: log-spaced edges over the positive epsilons when they
    span more than two decades, else a bin count over ``[min, max]``."""
    pos = eps[eps > 0]
    count = min(60, max(10, eps.size // 20))
    if pos.size and pos.max() > 100 * pos.min():
        return np.geomspace(pos.min(), pos.max(), count + 1), True
    return count, False


def _plot(path: str, eps: np.ndarray, worst: float, title: str, kind: str = "approximative") -> None:
    """Histogram of the individual epsilons ``eps`` with the worst case and the median marked, written to
    ``path`` (format from its suffix) through a temporary file; ``kind`` (:data:`KIND_WORDS`) names what the
    epsilons are on the axis."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    edges, log = _bins(eps)
    fig, ax = plt.subplots(figsize=(7, 4.4))
    shown = eps[eps > 0] if log else eps
    zeros = "" if not log or shown.size == eps.size else f" ({eps.size - shown.size:,} at ε = 0 not shown)"
    ax.hist(shown, bins=edges, color="tab:blue", alpha=0.8, label="individual ε" + zeros)
    ax.axvline(float(np.median(eps)), color="black", ls=":", label=f"median: {np.median(eps):.3g}")
    ax.axvline(worst, color="tab:red", ls="--", label=f"worst case (all ratios 1): {worst:.3g}")
    if log:
        ax.set_xscale("log")
    what = "upper bound" if kind in ("gdp", "fixed") else "approximative"
    ax.set_xlabel(f"individual ε ({what})" + (", log scale" if log else ""))
    ax.set_ylabel("number of examples")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.35)  # headroom: the legend sits above the bars
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper center", ncols=2)
    fig.tight_layout()
    root, ext = os.path.splitext(path)
    tmp = root + ".tmp" + ext  # same suffix: matplotlib picks the format from it
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)


def _check_plot(path: str | None) -> None:
    """Refuse ``--plot`` before any work: directory, suffix, a writable place, and matplotlib importable (the
    histogram is drawn last, after the whole computation)."""
    if path is None:
        return
    check_out_file("--plot", path, PLOT_SUFFIXES)
    d = os.path.dirname(os.path.abspath(path))
    if not os.access(d, os.W_OK) or (os.path.exists(path) and (os.path.isdir(path) or not os.access(path, os.W_OK))):
        raise ValueError(f"--plot: {path!r} cannot be written (no write permission, or a directory)")
    try:
        import matplotlib  # noqa: F401
    except ImportError as err:
        raise ValueError(f"--plot needs matplotlib, which cannot be imported ({err}); install it (pip install "
                         "matplotlib) or leave out --plot") from None


def cmd_individual(args) -> dict:
    """``mcacct individual``: the individual epsilon of every example of ``--norms``, and the worst case.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed flags of ``individual``.

    Returns
    -------
    dict
        The report: ``epsilon`` per example, ``worst_case_epsilon``, ``bucketing_bound``, ``certified`` and the
        accountant's kind, the full-batch GDP figures, the setting and, with ``--plot``, the figure's path.

    Raises
    ------
    ValueError
        A ``--norms`` file that is not one ``.npy`` array of finite, non-negative real norms (1-D: one example;
        2-D: examples by steps), a ``--plot`` path that cannot be written (or no matplotlib), or a value out of
        range (named).
    """
    from mcacct.individual.accountant import accountant_kind, individual_epsilons
    from mcacct.individual.gdp import gdp_epsilon
    _check_plot(args.plot)  # before any work
    from mcacct.engine.progress import Progress
    ratios = _load(args.norms, args.clip_norm)
    passes = 1 if args.no_bucketing_bound else 2  # the rounded-up pass, then the rounded-down one (the bound)
    bar = Progress("individual", passes * 2 * ratios.shape[0], not args.quiet,
                   unit="example-directions")
    state = {"offset": 0, "last": 0}

    def progress(done, total):
        if done < state["last"]:  # the next pass started
            state["offset"] += total
        state["last"] = done
        bar.update(state["offset"] + done)

    res = individual_epsilons(ratios, args.sigma, args.sampling_prob, args.delta, buckets=args.buckets,
                              value_discretization_interval=args.value_discretization_interval,
                              ratios_fixed=args.ratios_fixed, bucketing_bound=not args.no_bucketing_bound,
                              progress=progress)
    bar.close()
    kind = accountant_kind(res.accountant)
    notes = [] if kind != "approximative" else [f"epsilon is {res.accountant}"]
    if args.sampling_prob < 1:
        notes.append(f"mu_full_batch and epsilon_full_batch are those of the same norms without subsampling (q = 1, "
                     f"every example in every step), not of this run at sampling_prob = {args.sampling_prob:g}: "
                     "they leave out the amplification by sampling")
    out = {"epsilon": res.epsilon.tolist(), "delta": args.delta, "sigma": args.sigma,
           "sampling_prob": args.sampling_prob, "examples": int(ratios.shape[0]), "steps": int(ratios.shape[1]),
           "certified": kind != "approximative", "accountant_kind": kind, "accountant": res.accountant,
           "worst_case_epsilon": res.worst_case_epsilon, "bucketing_bound": res.bucketing_bound,
           "epsilon_lower_bucket": None if res.epsilon_lower_bucket is None else res.epsilon_lower_bucket.tolist(),
           "mu_full_batch": res.mu.tolist(),
           "epsilon_full_batch": np.atleast_1d(np.asarray(gdp_epsilon(res.mu, args.delta))).tolist(),
           "buckets": res.buckets, "additive_delta": res.additive_delta, "fft_size": res.fft_size, "notes": notes}
    if args.plot:
        _plot(args.plot, res.epsilon, res.worst_case_epsilon,
              individual_title(args.delta, args.sigma, args.sampling_prob, int(ratios.shape[1]),
                               int(ratios.shape[0]), args.clip_norm, res.buckets, kind), kind)
        out["plot"] = args.plot
    if not args.json:
        e = res.epsilon
        gap = "n/a" if math.isnan(res.bucketing_bound) else f"{res.bucketing_bound:.3g}"
        print(f"individual epsilon at delta={args.delta:g}: {e.size} examples, min {e.min():.4g}, median "
              f"{np.median(e):.4g}, max {e.max():.4g}; worst case {res.worst_case_epsilon:.4g}")
        print(f"  bucketing bound (max gap to the rounded-down pass) {gap}; {res.accountant}")
        for note in notes[1 if kind == "approximative" else 0:]:
            print(f"note: {note}")
    return out
