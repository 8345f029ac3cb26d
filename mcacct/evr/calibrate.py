r"""Noise calibration by Estimate-Verify-Release over a ladder of noise multipliers (Dong & Ganesh 2026,
arXiv:2602.09338, App. A and Alg. 5).

1. Sample budget: ``num_samples`` per direction and candidate; the base delta (the verifier's threshold)
   is the largest one whose overall delta (:func:`mcacct.statistics.confidence.overall_delta`) meets the target. Without
   ``num_samples`` the paper's choice is used: base delta = target/2 and the fewest samples that work.
2. Top of the ladder, certified without Monte Carlo (:func:`top_sigma`): the *unamplified* Gaussian mechanism
   with sensitivity :math:`\sqrt{\lceil n/b \rceil}\,\|c\|` (every b-min-sep pattern has ``||Cx||`` at most
   this, and a mixture of Gaussians with means inside that ball is dominated by it), analysed exactly
   (Balle & Wang) at the base delta, or for ``b = 1`` the tighter PLD bound of Poisson subsampling. Hence
   the answer is never empty.
3. A pilot on independent keys (two sigma grids, each on shared draws of ``num_samples / 20`` samples; the
   first grid spans ``[top / 64, top]`` or the bracket of the scheme's PLD baselines, :func:`pilot_range`)
   locates the sigma ``sigma_hat`` where the estimate crosses the base delta, and the smallest grid sigma
   whose 90% upper confidence bound is below it (``sigma_safe``). The ladder is ``sigma_hat * ratio**j`` for
   ``j = -below..above`` and, in coarse steps (:func:`ladder_exponents`), up to ``sigma_safe`` (at most
   ``4 * above`` steps) and down to ``-4 * below`` steps: the far ends are a safety net against a noisy
   pilot, rarely the answer. It is capped by the top, sorted and fixed before any verification sample.
4. Every candidate and both directions are verified on one set of draws (:func:`mcacct.engine.runner.run_ladder`,
   ``docs/soundness.md``, "Shared draws"); a candidate leaves the run once it, or one above it, has failed.
   The top-down rule returns ``i* = min{i : v_j = 1 for all j >= i}`` of Alg. 5 (:mod:`mcacct.evr.verdicts`), so
   Theorem A.1 applies: the released sigma is (epsilon, overall_delta)-DP.
5. Systematic terms (:mod:`mcacct.engine.systematic`). Every loss is raised by its floating-point error bound
   before its contribution is taken, and each chunk sum by its summation error, so the verifier's samples
   are pessimistic sample by sample. The sampler's normal and participation draws differ from exact ones by
   a coupling whose effect on the mean contribution is at most ``d_j`` (additive) at candidate ``j``: a
   mechanism that is not ``(epsilon, delta + d_j)``-DP has mean contribution above ``delta``, so the
   verifier certifies ``delta + d_j``. A fraction :data:`SYSTEMATIC_RESERVE` of the target is set aside for
   it: the statistical overall delta is computed for ``target (1 - reserve)``, candidates with
   ``d_j > reserve * target`` are removed from the ladder before any verification sample is drawn, and the
   reported ``overall_delta`` is the statistical one plus ``max_j d_j`` over the ladder, so it never exceeds
   the target.

Precision: only float64 kernels certify (float32 round-off is not bounded); ``dtype='float32'`` is refused.
"""

from __future__ import annotations

import math
import sys
import time

import jax

import numpy as np

from mcacct.engine.problem import DEFAULT_CHUNK_SIZE, Problem, check_problem
from mcacct.engine.progress import format_seconds
from mcacct.statistics.accumulators import HistogramSpec
from mcacct.engine.runner import LadderStats, run_ladder
from mcacct.statistics import confidence as evr
from mcacct.engine.systematic import systematic_bound
from mcacct.evr.budget import (PILOT_GRID, Budget, bracket_from_baselines, calibration_budget, explicit_ladder,
                               ladder_exponents, pilot_range, pilot_size, top_sigma)
from mcacct.evr.result import SYSTEMATIC_RESERVE, CalibrationPlan, CalibrationResult, Candidate
from mcacct.evr.verdicts import apply_verdicts, candidate_passes, verdict_drop, verification_spec
from mcacct.core.precision import float64
from mcacct.core.validate import check_int, check_real

__all__ = ["calibrate", "CalibrationResult", "Candidate", "CalibrationPlan", "plan_calibration", "apply_verdicts",
           "verdict_drop", "verification_key", "verification_spec", "pilot_key", "top_sigma", "pilot_range",
           "bracket_from_baselines", "candidate_passes", "baseline_sigmas", "ladder_exponents", "Budget",
           "calibration_budget", "pilot_size", "explicit_ladder", "PILOT_GRID", "check_ladder_options",
           "LADDER_SPAN"]

#: the widest factor the fine ladder steps may span on either side of the pilot estimate
#: (``ladder_ratio**below`` and ``ladder_ratio**above``): that of the pilot's first grid, ``[top / 64, top]``
#: (:func:`pilot_range`), so fine steps reach at least as far as the pilot can place the estimate
LADDER_SPAN = 64.0

_TAG_PILOT = 0x5049
_TAG_CANDIDATES = 0x4341
_TAG_VERIFY = 0x5645


def candidate_key(root: jax.Array, index: int) -> jax.Array:
    """The key of ladder candidate ``index`` (independent across candidates)."""
    return jax.random.fold_in(jax.random.fold_in(root, _TAG_CANDIDATES), index)


@float64
def verification_key(root: jax.Array) -> jax.Array:
    """The key of the verification draws, shared by every ladder candidate and both directions."""
    return jax.random.fold_in(root, _TAG_VERIFY)


@float64
def pilot_key(root: jax.Array) -> jax.Array:
    """The key of the pilot estimate (never used by a verification)."""
    return jax.random.fold_in(root, _TAG_PILOT)


@float64
def baseline_sigmas(problem: Problem, epsilon: float, delta: float) -> dict:
    """The sigma that the deterministic baselines need for the same target at the same expected batch size
    (PLD accountant, certified upper bounds): the scheme's ``pld_baselines(strategy, epsilon, delta)`` (for
    :class:`BMinSep`: Poisson DP-SGD and cyclic-Poisson BandMF); schemes without baselines give an empty dict.

    Parameters
    ----------
    problem : Problem
    epsilon, delta : float

    Returns
    -------
    dict
        Baseline name (ending in ``_sigma``) to its sigma.
    """
    return problem.scheme.pld_baselines(problem.strategy, epsilon, delta)


def _pilot(problem, epsilon, base, key, n_pilot, lo, hi, chunk_size, progress) -> tuple[float, float, int]:
    """Place the ladder, in two stages on shared draws (:data:`PILOT_GRID` points on ``[lo, hi]``, then as many
    inside the bracket found), each on ``n_pilot`` samples of its own keys. Returns ``(sigma_hat, sigma_safe, samples drawn)``:
    ``sigma_hat`` the smallest grid sigma whose pilot estimate (max over directions) is at most ``base``,
    ``sigma_safe`` the smallest whose 90% Chernoff upper bound is (``hi`` if none): the ladder reaches up to it,
    so a noisy pilot does not leave every candidate failing."""
    drawn, safe = 0, hi
    best = hi
    for stage in range(2):
        grid = list(np.geomspace(lo, hi, PILOT_GRID))
        order = list(range(PILOT_GRID))
        # every grid point runs all its samples (one compiled program for both stages: at the pilot's small
        # sample counts, compiling the shrinking candidate sets costs more than running them)
        run = run_ladder(problem, grid, jax.random.fold_in(key, stage), n_pilot, (epsilon,), chunk_size,
                         HistogramSpec(width=64.0, bins=1), progress=progress, label=f"pilot {stage + 1}/2")
        drawn += run.chunks_done * chunk_size
        live = [j for j in order if j in run.active and j not in run.errors]
        ok = [j for j in live if max(st.mean_at(0) for st in run.stats[j].values()) <= base]
        sure = [j for j in live if max(evr.kl_upper_confidence(st.mean_at(0), st.count, 0.1)
                                       for st in run.stats[j].values()) <= base]
        if sure:
            safe = min(safe, grid[min(sure)])
        if not ok:  # no crossing on this grid: keep the previous stage's (or the top)
            break
        k = min(ok)
        best = grid[k]
        lo, hi = (grid[k - 1] if k > 0 else lo / 2), grid[k]
    return best, max(safe, best), drawn


@float64
def check_ladder_options(ladder_ratio: float = 1.01, above: int = 3, below: int = 4,
                         pilot_samples: int | None = None, sigmas=None) -> None:
    """Refuse, before any pilot or probe draw, what :func:`calibrate` would only find out late or silently
    ignore: with ``sigmas`` (an explicit ladder, no pilot) a ``pilot_samples``; without it a ``pilot_samples``
    below 1, and ``above`` / ``below`` beyond ``floor(log(LADDER_SPAN) / log(ladder_ratio))`` fine steps (a
    longer ladder reaches past the pilot's range: hours of set-up and, far enough, sigmas that round to 0).
    ``ValueError`` naming the parameter and its allowed range.

    Parameters
    ----------
    ladder_ratio, above, below, pilot_samples, sigmas
        As for :func:`calibrate`; ``ladder_ratio > 1``, ``above`` and ``below`` integers ``>= 0``.

    Raises
    ------
    ValueError
        ``pilot_samples`` with ``sigmas``, or a value out of range (``ladder_ratio`` above ``LADDER_SPAN`` when
        ``above`` or ``below`` is not 0).
    """
    if sigmas is not None:
        if pilot_samples is not None:
            raise ValueError("pilot_samples does not apply with sigmas (an explicit ladder: no pilot runs)")
        return  # ladder_ratio, above and below are unused with an explicit ladder
    if pilot_samples is not None:
        check_int("pilot_samples", pilot_samples, low=1)
    ratio = check_real("ladder_ratio", ladder_ratio, low=1.0, low_open=True)
    steps = {"above": check_int("above", above, low=0), "below": check_int("below", below, low=0)}
    limit = int(math.floor(math.log(LADDER_SPAN) / math.log(ratio) + 1e-9))
    for name, v in steps.items():
        if v <= limit:
            continue
        if limit == 0:
            raise ValueError(f"ladder_ratio must be in (1, {LADDER_SPAN:g}] unless above and below are 0 (one fine "
                             f"ladder step may span at most a factor {LADDER_SPAN:g}, the pilot's range); got "
                             f"{ratio!r}")
        raise ValueError(f"{name} must be an integer in [0, {limit}] when ladder_ratio = {ratio:g} (the fine steps "
                         f"{name} the pilot estimate may span at most a factor {LADDER_SPAN:g}, the pilot's range); "
                         f"got {v}")


@float64
def plan_calibration(problem: Problem, epsilon: float, delta: float, key: jax.Array, num_samples: int | None = None,
                     ladder_ratio: float = 1.01, above: int = 3, below: int = 4, pilot_samples: int | None = None,
                     chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = False,
                     sigmas=None, bracket: tuple[float, float] | None = None,
                     systematic_reserve: float = SYSTEMATIC_RESERVE,
                     announce_verification: bool = True) -> CalibrationPlan:
    """Steps 1-3 and 5 of :func:`calibrate` (module docstring): budget, top candidate, pilot (unless
    ``sigmas`` gives the ladder), the fixed sorted ladder and its systematic terms. Parameters as
    :func:`calibrate`; ``announce_verification=False`` leaves out the progress line with the verification's
    time from the pilot's rate (``calibrate --plan-only`` states the time its probe measures instead: one figure,
    not two).

    Returns
    -------
    CalibrationPlan
        The fixed ladder below the top, less the lowest candidates whose systematic term exceeds the reserve.

    Raises
    ------
    ValueError
        Naming the argument out of range (:func:`check_ladder_options`, :func:`calibration_budget`).
    """
    check_problem("problem", problem)
    check_ladder_options(ladder_ratio, above, below, pilot_samples, sigmas)
    b = calibration_budget(problem, epsilon, delta, num_samples, ladder_ratio, above, below, chunk_size,
                           systematic_reserve)
    eps, target, ratio, chunk_size = b.epsilon, b.target_delta, b.ladder_ratio, b.chunk_size
    s, base, sig_top, certifier = b.num_samples, b.base_delta, b.top_sigma, b.top_certifier
    reserve = b.reserve_fraction * target
    if progress:
        print(f"[mcacct] calibrate: {s:,} samples per direction per candidate, base delta {base:.4g}, "
              f"top sigma {sig_top:.6g} ({certifier})", file=sys.stderr, flush=True)
    pilot_seconds, drawn = 0.0, 0
    if sigmas is not None:
        sig_hat = None
        ladder = explicit_ladder(sigmas, sig_top)
    else:
        n_pilot, pilot_chunk = pilot_size(s, pilot_samples, chunk_size)
        if progress:
            print(f"[mcacct] calibrate: pilot of 2 grids x {PILOT_GRID} sigmas on {n_pilot:,} samples each (mcacct "
                  "calibrate --plan-only estimates the whole run's time without running it)", file=sys.stderr,
                  flush=True)
        t_pilot = time.perf_counter()
        lo, hi = pilot_range(sig_top, bracket)
        sig_hat, sig_safe, drawn = _pilot(problem, eps, base, pilot_key(key), n_pilot, lo, hi, pilot_chunk, progress)
        pilot_seconds = time.perf_counter() - t_pilot
        # fine steps around the estimate; above them, gaps of 2, 4, 8, ... steps up to the pilot's 90%-safe sigma
        # (at most 4x `above` steps): every candidate above the answer runs to the end, so few go far
        reach = math.ceil(math.log(sig_safe / sig_hat) / math.log(ratio) - 1e-9) if sig_safe > sig_hat else 0
        ladder = [sig_hat * ratio**j for j in ladder_exponents(b.below, b.above, min(reach, 4 * max(b.above, 1)))
                  if sig_hat * ratio**j < sig_top]
    # the systematic term of each candidate is known before any verification sample: candidates whose term
    # exceeds the reserve are dropped (lowest sigmas first: the term decreases with sigma)
    sys_terms = [systematic_bound(problem, sig).delta for sig in ladder]
    dropped = sum(1 for d in sys_terms if d > reserve)
    if progress and announce_verification and drawn and len(ladder) > dropped:
        # before the long part: its expected time from the pilot's rate (PILOT_GRID sigmas per draw there,
        # compilation included, so rather an overestimate), scaled to the ladder's candidates
        verify = -(-s // chunk_size) * chunk_size
        est = verify / (drawn / max(pilot_seconds, 1e-9)) * (len(ladder) - dropped) / PILOT_GRID
        print(f"[mcacct] calibrate: verification of {len(ladder) - dropped} candidates on at most {verify:,} draws, "
              f"expected at most ~{format_seconds(est)} here (from the pilot's rate)", file=sys.stderr, flush=True)
    key_data = tuple(int(v) for v in np.asarray(jax.random.key_data(key)).ravel())
    return CalibrationPlan(eps, target, base, s, evr.overall_delta(s, base), sig_top, certifier, sig_hat,
                           tuple(ladder[dropped:]), tuple(sys_terms[dropped:]), dropped, key_data, chunk_size,
                           pilot_seconds, drawn, b.reserve_fraction)


@float64
def calibrate(problem: Problem, epsilon: float, delta: float, key: jax.Array, num_samples: int | None = None,
              ladder_ratio: float = 1.01, above: int = 3, below: int = 4, pilot_samples: int | None = None,
              chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = False,
              sigmas=None, bracket: tuple[float, float] | None = None,
              systematic_reserve: float = SYSTEMATIC_RESERVE) -> CalibrationResult:
    """Smallest ladder sigma that passes Monte Carlo verification (Alg. 5), with its overall delta.

    Parameters
    ----------
    problem: scheme, strategy and kernel precision (float64 only).
    epsilon: target epsilon ``>= 0``.
    delta: target overall delta in ``(0, 1)``.
    key: root ``jax.random`` key.
    num_samples: samples per direction per candidate (default: the minimum for base delta = 0.99 delta / 2).
    ladder_ratio: ratio between consecutive candidates (``> 1``; the paper uses 1.01).
    above, below: fine ladder steps of ``ladder_ratio`` above / below the pilot estimate (defaults 3 and 4);
        beyond them the ladder continues in gaps of 2, 4, 8, ... steps, up to the pilot's 90%-safe sigma (at
        most ``4 * above`` steps) and down to ``4 * below`` steps (:func:`ladder_exponents`). Each at most
        ``floor(log(LADDER_SPAN) / log(ladder_ratio))`` (417 at 1.01; :func:`check_ladder_options`).
    pilot_samples: samples of each of the pilot's two grids, ``>= 1`` (default ``num_samples / 20``, at least
        1000); refused with ``sigmas``.
    chunk_size: samples per chunk.
    progress: phase, samples, rate and ETA on stderr.
    sigmas: an explicit ladder (finite, positive; sorted here; candidates at or above the certified top
        are dropped). No pilot runs; ``ladder_ratio``, ``above`` and ``below`` are unused, ``pilot_samples``
        refused.
    bracket: ``(lo, hi)`` sigma range for the pilot's first grid (:func:`pilot_range`); placement only.
    systematic_reserve: fraction of the target delta set aside for the sampler's systematic terms (default
        :data:`SYSTEMATIC_RESERVE`, in ``(0, 0.5]``); candidates whose term exceeds it leave the ladder before
        any verification draw (long horizons at tiny delta may need more than 1%: see ``--plan-only``).
    """
    t0 = time.perf_counter()
    plan = plan_calibration(problem, epsilon, delta, key, num_samples, ladder_ratio, above, below, pilot_samples,
                            chunk_size, progress, sigmas, bracket, systematic_reserve)
    drawn = plan.pilot_samples_drawn
    verify = {}
    if plan.ladder:
        # every candidate and both directions on one set of draws (docs/soundness.md, "Shared draws"); a
        # candidate leaves as soon as it (or one above it) has failed: the verdicts are those of the full run
        t_verify = time.perf_counter()
        run = run_ladder(problem, plan.ladder, verification_key(key), plan.num_samples, (plan.epsilon,),
                         plan.chunk_size, verification_spec(), drop=verdict_drop(plan), progress=progress,
                         label="verify")
        drawn += run.chunks_done * plan.chunk_size
        verify = {"seconds": time.perf_counter() - t_verify, "samples_drawn": run.chunks_done * plan.chunk_size}
    else:
        run = LadderStats(())
    result = apply_verdicts(plan, run)
    if verify:
        result.phases["verify"] = verify
    result.samples_used = 2 * drawn
    result.seconds = time.perf_counter() - t0
    return result
