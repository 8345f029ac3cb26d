r"""Side-by-side noise calibration of sampling schemes for DP-BandMF at equal expected batch size.

For a target :math:`(\varepsilon, \delta)`, ``n`` iterations, a ``k``-banded strategy ``c_col``, a
dataset of ``M`` examples and an expected batch size ``B`` (participation rate :math:`p_0 = B/M`), each
scheme gets the parameters that give that batch size and is calibrated with
:func:`mcacct.calibrate.calibrate` (Estimate-Verify-Release, Alg. 5: the returned sigma is certified
:math:`(\varepsilon, \delta_{\rm overall})`-DP with :math:`\delta_{\rm overall} \le \delta`):

============================  ====================================================  ==========================
scheme                        parameters at rate :math:`p_0`                        PLD baseline
============================  ====================================================  ==========================
``b-min-sep``                 warm start, :math:`p = p_0 / (1 - p_0 (b-1))`            Poisson PLD when ``b = 1``
``cyclic-poisson``            :math:`q = b p_0`, random secret phase (mixture)          :math:`\lceil n/b\rceil`-fold
                                                                                    Poisson-subsampled Gaussian
``balls-in-bins``             :math:`T = M/B` bins (must be an integer :math:`\ge k`)   none
``truncated-b-min-sep``       as b-min-sep, plus ``max_batch_size`` (App. D)           none
``multi-attribution``         per-example ``p`` of b-min-sep, ``k_u`` examples/user    group Poisson PLD when
                              (user-level, Alg. 3 cold start)                       ``b = 1``, ``k = 1``
``banded-inverse``            ``C`` from the bands of :math:`C^{-1}` (App. B),          none
                              r-min-sep with ``r = b`` and the b-min-sep ``p``
============================  ====================================================  ==========================

PLD columns come from :mod:`mcacct.pld` (imported lazily; ``None`` with a note when the module or the
expected API — ``pld_calibrate``, ``CyclicPoissonBandMFSpec``, ``PoissonGaussianSpec``,
``GroupPoissonSpec`` — is missing). For cyclic Poisson the PLD analyses the public-partition worst case,
which upper-bounds the random-phase mixture estimated by Monte Carlo. The multi-attribution row is
user-level (a different adjacency) and its batch size is only matched per example.
"""

from __future__ import annotations

import math
import sys
import time

from mcacct._validate import check_int, check_real

__all__ = ["compare_schemes", "SCHEMES", "add_compare_parser", "cmd_compare"]

SCHEMES = ("b-min-sep", "cyclic-poisson", "balls-in-bins", "truncated-b-min-sep", "multi-attribution",
           "banded-inverse")
_DEFAULT_SCHEMES = ("b-min-sep", "cyclic-poisson", "balls-in-bins")


def _pld_module():
    """``(module, None)`` or ``(None, reason)``."""
    try:
        from mcacct import pld as mod
    except ImportError as err:  # being written elsewhere
        return None, f"mcacct.pld is not importable ({err})"
    missing = [n for n in ("pld_calibrate", "CyclicPoissonBandMFSpec", "PoissonGaussianSpec", "GroupPoissonSpec")
               if not hasattr(mod, n)]
    if missing:
        return None, f"mcacct.pld lacks {', '.join(missing)}"
    return mod, None


def _pld_sigma(build, epsilon, delta):
    """Run ``build(mod) -> (spec, scale)`` and calibrate; returns ``(sigma or None, note or None)``."""
    mod, why = _pld_module()
    if mod is None:
        return None, why
    try:
        spec, scale = build(mod)
        return float(mod.pld_calibrate(spec, epsilon, delta)) * scale, None
    except (TypeError, AttributeError) as err:
        return None, f"mcacct.pld API differs: {err}"
    except ValueError as err:
        return None, f"PLD calibration failed: {err}"


def _parse_schemes(schemes) -> tuple[str, ...]:
    if schemes is None:
        return None
    if isinstance(schemes, str):
        schemes = [s.strip() for s in schemes.split(",") if s.strip()]
    out = tuple(schemes)
    bad = [s for s in out if s not in SCHEMES]
    if bad or not out:
        raise ValueError(f"schemes must be a non-empty list drawn from {SCHEMES}; got {list(out)!r}")
    return out


def compare_schemes(epsilon: float, delta: float, iterations: int, min_sep: int, expected_batch_size: float,
                    dataset_size: int, c_col=(1.0,), *, max_batch_size: int | None = None,
                    max_examples_per_user: int | None = None, inverse_bands=None, schemes=None,
                    num_samples: int | None = None, seed: int = 0, ladder_ratio: float = 1.02,
                    above: int = 4, below: int = 8, chunk_size: int = 4096, pld: bool = True,
                    progress: bool = False) -> dict:
    r"""Noise multiplier each scheme needs for :math:`(\varepsilon, \delta)` at equal expected batch size.

    Parameters
    ----------
    epsilon, delta:
        Target; ``epsilon >= 0``, ``delta`` in ``(0, 1)`` (the Monte Carlo sigmas certify an overall delta
        at most ``delta``).
    iterations:
        ``n >= 1``.
    min_sep:
        ``b >= len(c_col)``: min separation of b-min-sep and cycle length of cyclic Poisson (and ``r`` of the
        banded-inverse row).
    expected_batch_size, dataset_size:
        ``B`` and ``M``; ``B / M <= 1 / b``.
    c_col:
        Non-zeros of the first column of the banded Toeplitz ``C``.
    max_batch_size:
        ``B_max`` for the truncated row (default: row skipped unless requested, then ``ceil(1.25 B)``).
    max_examples_per_user:
        ``k_u`` for the multi-attribution row (default 2 when that row is requested).
    inverse_bands:
        Bands ``(h_0, ..., h_{k-1})`` of :math:`C^{-1}` for the banded-inverse row.
    schemes:
        Names from :data:`SCHEMES` (list or comma-separated string). Default: b-min-sep, cyclic Poisson,
        balls-in-bins, plus every optional row whose parameter is given.
    num_samples:
        Monte Carlo samples per direction and candidate (default: :func:`mcacct.calibrate.calibrate`'s).
    seed:
        Root seed; row ``j`` uses ``fold_in(key(seed), j)``.
    ladder_ratio, above, below, chunk_size:
        Passed to :func:`~mcacct.calibrate.calibrate` (a coarser ladder than its default keeps this quick).
    pld:
        Also compute the PLD baselines.

    Returns
    -------
    dict
        ``rows``: one dict per scheme with ``scheme``, ``params``, ``sigma`` (certified Monte Carlo sigma),
        ``verified``, ``overall_delta``, ``top_sigma``, ``num_samples``, ``seconds``, ``sigma_pld`` and
        ``pld_note``; ``skipped``: schemes that do not apply, with the reason; plus the inputs.

    Raises
    ------
    ValueError
        Naming the offending parameter.
    """
    import jax

    from mcacct.accountant import Problem
    from mcacct.baselines import BallsInBins, CyclicPoisson
    from mcacct.banded_inverse import BandedInverse, strategy_from_inverse
    from mcacct.calibrate import calibrate
    from mcacct.multi_attribution import MultiAttribution
    from mcacct.schemes import BMinSep, sampling_prob_from_batch_size
    from mcacct.strategy import BandedToeplitz
    from mcacct.truncated import TruncatedBMinSep

    t0 = time.perf_counter()
    eps = check_real("epsilon", epsilon, low=0.0)
    dl = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    n = check_int("iterations", iterations, low=1)
    b = check_int("min_sep", min_sep, low=1)
    m = check_int("dataset_size", dataset_size, low=1)
    strategy = BandedToeplitz(c_col)
    strategy.check_min_sep(b)
    p = sampling_prob_from_batch_size(expected_batch_size, m, b)  # checks expected_batch_size
    bs = float(expected_batch_size)
    p0 = bs / m
    wanted = _parse_schemes(schemes)
    if max_batch_size is not None:
        max_batch_size = check_int("max_batch_size", max_batch_size, low=1)
    if max_examples_per_user is not None:
        max_examples_per_user = check_int("max_examples_per_user", max_examples_per_user, low=1)
    if wanted is None:
        wanted = _DEFAULT_SCHEMES + tuple(
            name for name, given in (("truncated-b-min-sep", max_batch_size), ("multi-attribution",
                                     max_examples_per_user), ("banded-inverse", inverse_bands))
            if given is not None)
    if num_samples is not None:
        num_samples = check_int("num_samples", num_samples, low=1)
    c_norm = math.sqrt(sum(v * v for v in strategy.c_col))

    rows, skipped = [], []
    plans = []  # (name, problem or None, params, pld builder or None, skip reason)
    for name in wanted:
        if name == "b-min-sep":
            pld_b = None
            if b == 1:
                def pld_b(mod, _q=p0, _s=strategy.c_col[0]):
                    return mod.PoissonGaussianSpec(sampling_prob=_q, sigma=1.0, steps=n, sensitivity=_s), 1.0
            plans.append((name, Problem(BMinSep(p, b, n, True), strategy),
                          {"sampling_prob": p, "min_sep": b, "warm_start": True}, pld_b, None))
        elif name == "cyclic-poisson":
            q = min(b * p0, 1.0)

            def pld_c(mod, _q=q):
                return mod.CyclicPoissonBandMFSpec(iterations=n, min_sep=b, sampling_prob=_q,
                                                   c_col=tuple(strategy.c_col), sigma=1.0), 1.0
            plans.append((name, Problem(CyclicPoisson(q, b, n, random_phase=True), strategy),
                          {"sampling_prob": q, "min_sep": b, "random_phase": True}, pld_c, None))
        elif name == "balls-in-bins":
            bins = m / bs
            t = int(round(bins))
            if abs(bins - t) > 1e-9 * bins:
                plans.append((name, None, {}, None, f"dataset_size / expected_batch_size = {bins:g} is not an "
                                                    "integer number of bins"))
            else:  # more bands than bins is handled exactly (overlapping columns of a bin)
                plans.append((name, Problem(BallsInBins(t, n), strategy), {"min_sep": t}, None, None))
        elif name == "truncated-b-min-sep":
            bmax = max_batch_size if max_batch_size is not None else int(math.ceil(1.25 * bs))
            plans.append((name, Problem(TruncatedBMinSep(p, b, n, m, bmax, True), strategy),
                          {"sampling_prob": p, "min_sep": b, "dataset_size": m, "max_batch_size": bmax,
                           "warm_start": True}, None, None))
        elif name == "multi-attribution":
            k = max_examples_per_user if max_examples_per_user is not None else 2
            pld_m = None
            if b == 1:
                def pld_m(mod, _k=k, _s=strategy.c_col[0]):
                    return mod.GroupPoissonSpec(group_size=_k, sampling_prob=p, sigma=1.0, steps=n), _s
            plans.append((name, Problem(MultiAttribution(p, b, n, k), strategy),
                          {"sampling_prob": p, "min_sep": b, "max_examples_per_user": k, "level": "user"},
                          pld_m, None))
        elif name == "banded-inverse":
            if inverse_bands is None:
                plans.append((name, None, {}, None, "inverse_bands not given"))
                continue
            inv_strategy = strategy_from_inverse(inverse_bands, n)
            plans.append((name, Problem(BandedInverse(p, b, n, True), inv_strategy),
                          {"sampling_prob": p, "min_sep": b,
                           "inverse_bands": [float(v) for v in inverse_bands],
                           "c_col_length": len(inv_strategy.c_col)}, None, None))

    pld_mod_note = None
    if pld:
        _, pld_mod_note = _pld_module()
    root = jax.random.key(seed)
    for j, (name, problem, params, pld_build, reason) in enumerate(plans):
        if problem is None:
            skipped.append({"scheme": name, "reason": reason})
            continue
        t1 = time.perf_counter()
        if progress:
            print(f"[mcacct compare] {name}: calibrating ...", file=sys.stderr, flush=True)
        res = calibrate(problem, eps, dl, jax.random.fold_in(root, j), num_samples=num_samples,
                        ladder_ratio=ladder_ratio, above=above, below=below, chunk_size=chunk_size)
        row = {"scheme": name, "params": params, "sigma": res.sigma, "verified": res.verified,
               "overall_delta": res.overall_delta, "top_sigma": res.top_sigma, "num_samples": res.num_samples,
               "note": res.note, "seconds": time.perf_counter() - t1, "sigma_pld": None, "pld_note": None}
        if pld and pld_build is not None:
            row["sigma_pld"], row["pld_note"] = _pld_sigma(pld_build, eps, dl)
        elif pld:
            row["pld_note"] = "no PLD analysis for this scheme"
        rows.append(row)
    return {"epsilon": eps, "delta": dl, "iterations": n, "min_sep": b, "expected_batch_size": bs,
            "dataset_size": m, "participation_rate": p0, "c_col": list(strategy.c_col), "c_norm": c_norm,
            "seed": seed, "rows": rows, "skipped": skipped, "pld_module_note": pld_mod_note,
            "seconds": time.perf_counter() - t0}


# -- command line ------------------------------------------------------------------------------------------
def add_compare_parser(subparsers):
    """Add ``compare`` to an ``argparse`` sub-parser set (``mcacct compare ... [--json]``)."""
    p = subparsers.add_parser(
        "compare", help="noise multipliers of several sampling schemes at equal expected batch size",
        description="Calibrate b-min-sep, cyclic Poisson, balls-in-bins (and optionally truncated b-min-sep, "
                    "multi-attribution, banded-inverse) for one (epsilon, delta) at equal expected batch "
                    "size, with PLD baselines where they exist.")
    p.add_argument("--epsilon", type=float, default=2.0, help="target epsilon (>= 0; default 2)")
    p.add_argument("--delta", type=float, default=1e-3, help="target delta in (0, 1) (default 1e-3)")
    p.add_argument("--iterations", type=int, default=64, help="training iterations n (default 64)")
    p.add_argument("--min-sep", type=int, default=4, help="min separation / cycle length b (default 4)")
    p.add_argument("--batch-size", type=float, default=32.0, help="expected batch size B (default 32)")
    p.add_argument("--dataset-size", type=int, default=1024, help="dataset size M (default 1024)")
    p.add_argument("--c-col", type=str, default="0.5,0.5,0.5,0.5",
                   help="comma-separated non-zeros of C's first column (length <= min-sep)")
    p.add_argument("--max-batch-size", type=int, default=None, help="adds the truncated b-min-sep row")
    p.add_argument("--max-examples-per-user", type=int, default=None, help="adds the multi-attribution row")
    p.add_argument("--inverse-bands", type=str, default=None,
                   help="comma-separated bands of C^-1; adds the banded-inverse row")
    p.add_argument("--schemes", type=str, default=None, help=f"comma-separated subset of {','.join(SCHEMES)}")
    p.add_argument("--samples", type=int, default=None, help="Monte Carlo samples per direction per candidate")
    p.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    p.add_argument("--ladder-ratio", type=float, default=1.02, help="ratio between candidates (default 1.02)")
    p.add_argument("--chunk-size", type=int, default=4096, help="samples per chunk")
    p.add_argument("--no-pld", action="store_true", help="skip the PLD baselines")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=cmd_compare)
    return p


def _floats(text: str | None, name: str):
    if text is None:
        return None
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise ValueError(f"{name} must be a comma-separated list of numbers; got {text!r}") from err


def cmd_compare(args) -> dict:
    """Handler of ``mcacct compare``: returns the result dict (printed as JSON by the caller with ``--json``)."""
    out = compare_schemes(args.epsilon, args.delta, args.iterations, args.min_sep, args.batch_size,
                          args.dataset_size, args.c_col, max_batch_size=args.max_batch_size,
                          max_examples_per_user=args.max_examples_per_user,
                          inverse_bands=_floats(args.inverse_bands, "inverse_bands"), schemes=args.schemes,
                          num_samples=args.samples, seed=args.seed, ladder_ratio=args.ladder_ratio,
                          chunk_size=args.chunk_size, pld=not args.no_pld, progress=not args.quiet)
    if not args.json:
        print(f"target (epsilon, delta) = ({out['epsilon']:g}, {out['delta']:g}); n = {out['iterations']}, "
              f"b = {out['min_sep']}, B = {out['expected_batch_size']:g}, M = {out['dataset_size']}")
        print(f"{'scheme':<22}{'sigma (MC, EVR)':>16}{'sigma (PLD)':>14}  note")
        for r in out["rows"]:
            pld_txt = f"{r['sigma_pld']:.4f}" if r["sigma_pld"] is not None else "-"
            note = r["pld_note"] or ""
            if not r["verified"]:
                note = "unverified (Gaussian top); " + note
            print(f"{r['scheme']:<22}{r['sigma']:>16.4f}{pld_txt:>14}  {note}")
        for s in out["skipped"]:
            print(f"{s['scheme']:<22}{'skipped':>16}{'':>14}  {s['reason']}")
        if out["pld_module_note"]:
            print(f"note: {out['pld_module_note']}")
    return out


if __name__ == "__main__":  # standalone: python -m mcacct.compare compare --json
    import argparse
    import json

    import mcacct  # noqa: F401  (float64)

    parser = argparse.ArgumentParser(prog="mcacct")
    add_compare_parser(parser.add_subparsers(dest="command", required=True))
    ns = parser.parse_args()
    try:
        res = ns.func(ns)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if ns.json:
        print(json.dumps(res, default=str))
