r"""Side-by-side noise calibration of sampling schemes for DP-BandMF at equal expected batch size.

For a target :math:`(\varepsilon, \delta)`, ``n`` iterations, a ``k``-banded strategy ``c_col``, a
dataset of ``M`` examples and an expected batch size ``B`` (participation rate :math:`p_0 = B/M`), each
scheme gets the parameters that give that batch size and is calibrated with
:func:`mcacct.evr.calibrate.calibrate` (Estimate-Verify-Release, Alg. 5: the returned sigma is certified
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

PLD columns come from :mod:`mcacct.pld` (``None`` with a note when the PLD calibration fails). For cyclic Poisson the PLD analyses the public-partition worst case,
which upper-bounds the random-phase mixture estimated by Monte Carlo. The multi-attribution row is
user-level (a different adjacency) and its batch size is only matched per example.

Rows, their parameters, their PLD specs and the optional-row options (``max_batch_size``,
``max_examples_per_user``, ``inverse_bands``) come from each registered scheme's entry
(:attr:`mcacct.schemes.entry.SchemeInfo.compare`, a :class:`~mcacct.schemes.entry.CompareRow` declared in the
scheme's module), row names and defaults from the same entry (``label``, ``compare_default``). This module lists
no scheme itself.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from mcacct import pld as pld_api
from mcacct.engine.progress import stage
from mcacct.statistics.confidence import EPSILON_MAX
from mcacct.jobs.problem_file import scheme_to_dict
from mcacct.engine.problem import Problem
from mcacct.schemes import registry
from mcacct.schemes.entry import CompareRow, CompareSetting, SchemeInfo
from mcacct.core.validate import check_int, check_real
from mcacct.core.precision import float64

__all__ = ["compare_schemes", "row_names", "parse_schemes", "compare_schemes_info", "compare_options"]


def compare_schemes_info() -> tuple[tuple[SchemeInfo, CompareRow], ...]:
    """``(info, info.compare)`` of every registered scheme with a compare row, in registry order.

    Returns
    -------
    tuple of (SchemeInfo, CompareRow)
        One pair per registered scheme whose ``compare`` is not ``None``.
    """
    return tuple((e, e.compare) for e in registry.schemes() if e.compare is not None)


def compare_options() -> tuple[tuple[SchemeInfo, str, Callable[[str, Any], Any]], ...]:
    """``(info, dest, check)`` of every compare option (each adds its scheme's row), in registry order.

    Returns
    -------
    tuple of (SchemeInfo, str, callable)
        The scheme the option belongs to, the option's ``dest`` name and its check, called as
        ``check(dest, value)`` and returning the checked value.
    """
    return tuple((e, dest, check) for e, row in compare_schemes_info() for dest, check in row.options.items())


def row_names() -> tuple[str, ...]:
    """Row names of ``mcacct compare``: the compare label of every registered scheme with a compare plan, in
    registry order (its registry name is accepted too).

    Returns
    -------
    tuple of str
        The ``label`` of each scheme in :func:`compare_schemes_info`.
    """
    return tuple(e.label for e, _ in compare_schemes_info())


def _pld_sigma(spec, scale, epsilon, delta):
    """``scale`` times the PLD accountant's sigma of ``spec``; returns ``(sigma or None, note or None)``."""
    try:
        return float(pld_api.pld_calibrate(spec, epsilon, delta)) * scale, None
    except ValueError as err:
        return None, f"PLD calibration failed: {err}"


def parse_schemes(schemes) -> tuple[SchemeInfo, ...] | None:
    """The schemes named by ``schemes`` (row or registry names, a list or a comma-separated string), or
    ``None`` when ``schemes`` is ``None``.

    Parameters
    ----------
    schemes : str, sequence of str or None
        Row names (:func:`row_names`) or registry names; a string is split at commas and blank entries dropped.

    Returns
    -------
    tuple of SchemeInfo or None
        The registry entries in the order given; ``None`` when ``schemes`` is ``None``.

    Raises
    ------
    ValueError
        If a name is unknown or none is given: ``"schemes must be a non-empty list drawn from (...); got [...]"``.
    """
    if schemes is None:
        return None
    if isinstance(schemes, str):
        schemes = [s.strip() for s in schemes.split(",") if s.strip()]
    out = tuple(schemes)
    known = {n: e for e, _ in compare_schemes_info() for n in (e.name, e.label)}
    bad = [s for s in out if s not in known]
    if bad or not out:
        raise ValueError(f"schemes must be a non-empty list drawn from {row_names()}; got {list(out)!r}")
    return tuple(known[s] for s in out)


@float64
def compare_schemes(epsilon: float, delta: float, iterations: int, min_sep: int, expected_batch_size: float,
                    dataset_size: int, c_col=(1.0,), *, max_batch_size: int | None = None,
                    max_examples_per_user: int | None = None, inverse_bands=None, schemes=None,
                    num_samples: int | None = None, seed: int = 0, ladder_ratio: float = 1.02,
                    above: int = 4, below: int = 8, chunk_size: int = 4096, pld: bool = True,
                    progress: bool = False, options: dict | None = None) -> dict:
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
        Names from :func:`row_names` or registry names (list or comma-separated string). Default: the
        registry's default rows (b-min-sep, cyclic Poisson, balls-in-bins), plus every optional row whose
        option is given.
    num_samples:
        Monte Carlo samples per direction and candidate (default: :func:`mcacct.evr.calibrate.calibrate`'s).
    seed:
        Root seed; row ``j`` uses ``fold_in(key(seed), j)``.
    ladder_ratio, above, below, chunk_size:
        Passed to :func:`~mcacct.evr.calibrate.calibrate` (a coarser ladder than its default keeps this quick).
    pld:
        Also compute the PLD baselines.
    options:
        Values of the rows' options (:func:`compare_options`) by ``dest`` name (the
        three keyword arguments above are such options).

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

    from mcacct.evr.calibrate import calibrate
    from mcacct.schemes.bminsep import sampling_prob_from_batch_size
    from mcacct.strategies.banded import BandedToeplitz

    t0 = time.perf_counter()
    eps = check_real("epsilon", epsilon, low=0.0, high=EPSILON_MAX)  # the Gaussian top of every row needs e^eps
    dl = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    n = check_int("iterations", iterations, low=1)
    b = check_int("min_sep", min_sep, low=1)
    m = check_int("dataset_size", dataset_size, low=1)
    strategy = BandedToeplitz(c_col)
    strategy.check_min_sep(b)
    sampling_prob_from_batch_size(expected_batch_size, m, b)  # checks expected_batch_size (B / M <= 1/b)
    bs = float(expected_batch_size)
    p0 = bs / m
    wanted = parse_schemes(schemes)
    given = dict(options or {})
    for k, v in (("max_batch_size", max_batch_size), ("max_examples_per_user", max_examples_per_user),
                 ("inverse_bands", inverse_bands)):
        if v is not None:
            given[k] = v
    options = compare_options()
    unknown = sorted(set(given) - {dest for _, dest, _ in options})
    if unknown:
        raise ValueError(f"options must be among {sorted(dest for _, dest, _ in options)}; got {unknown}")
    for _, dest, check in options:
        if given.get(dest) is not None:
            given[dest] = check(dest, given[dest])
    setting = CompareSetting(n, b, bs, m, strategy, given)
    if wanted is not None:  # an option adds or shapes its scheme's row: refuse one whose row is not wanted
        names = {e.name for e in wanted}
        for info, dest, _ in options:
            if given.get(dest) is not None and info.name not in names:
                raise ValueError(f"{dest} applies only to the {info.label} row (scheme {info.name}), which "
                                 f"schemes={[e.label for e in wanted]} leaves out: add {info.label} to schemes or "
                                 f"leave {dest} out")
    if wanted is None:
        optional = {e.name for e, dest, _ in options if given.get(dest) is not None}
        wanted = tuple(e for e, _ in compare_schemes_info() if e.compare_default or e.name in optional)
    if num_samples is not None:
        num_samples = check_int("num_samples", num_samples, low=1)
    c_norm = math.sqrt(sum(v * v for v in strategy.c_col))

    rows, skipped = [], []
    plans = [(info.label, info.compare.plan(setting)) for info in wanted]  # (row name, ComparePlan)

    root = jax.random.key(seed)
    for j, (name, plan) in enumerate(plans):
        if plan.scheme is None:
            skipped.append({"scheme": name, "reason": plan.skip})
            continue
        problem = Problem(plan.scheme, plan.strategy)
        params = {k: v for k, v in scheme_to_dict(problem.scheme).items()
                  if k not in ("type", "iterations")}
        params.update(plan.params)
        t1 = time.perf_counter()
        with stage(f"compare {j + 1}/{len(plans)}: calibrating {name}", progress):
            res = calibrate(problem, eps, dl, jax.random.fold_in(root, j), num_samples=num_samples,
                            ladder_ratio=ladder_ratio, above=above, below=below, chunk_size=chunk_size,
                            progress=progress)
        row = {"scheme": name, "params": params, "sigma": res.sigma, "verified": res.verified,
               "overall_delta": res.overall_delta, "top_sigma": res.top_sigma, "num_samples": res.num_samples,
               "note": res.note, "seconds": time.perf_counter() - t1, "sigma_pld": None, "pld_note": None}
        if pld and plan.pld_spec is not None:
            row["sigma_pld"], row["pld_note"] = _pld_sigma(plan.pld_spec, plan.pld_scale, eps, dl)
        elif pld:
            row["pld_note"] = "no PLD analysis for this scheme"
        rows.append(row)
    return {"epsilon": eps, "delta": dl, "iterations": n, "min_sep": b, "expected_batch_size": bs,
            "dataset_size": m, "participation_rate": p0, "c_col": list(strategy.c_col), "c_norm": c_norm,
            "seed": seed, "rows": rows, "skipped": skipped,
            "seconds": time.perf_counter() - t0}
