r"""The verdicts of Alg. 5 (Dong & Ganesh 2026, arXiv:2602.09338, App. A): a candidate passes when both directions
ran all their samples with an empirical mean at most the base delta, and the released sigma is the lowest candidate
above which every candidate passed (the top-down rule, Theorem A.1).

:func:`verdict_drop` lets a verification run (:func:`mcacct.engine.runner.run_ladder`) drop candidates as soon as the
verdict is known: a failed candidate fails every candidate below it too. :func:`apply_verdicts` reads the finished
run. :func:`mcacct.evr.calibrate.calibrate` uses both in process, :mod:`mcacct.jobs.calibration` on merged shards;
the same statistics give the same verdicts.
"""

from __future__ import annotations

from typing import Sequence

from mcacct.core.precision import float64
from mcacct.engine.runner import LadderStats
from mcacct.evr.result import CalibrationPlan, CalibrationResult
from mcacct.statistics.accumulators import FIXED_BITS, HistogramSpec

__all__ = ["verification_spec", "candidate_passes", "apply_verdicts", "verdict_drop"]


def _verdict_drop(limit: float, index_order: Sequence[int]):
    """A ``drop`` rule for :func:`mcacct.engine.runner.run_ladder`: once a direction of candidate ``j`` exceeds
    ``limit`` (in contribution units) — or its kernel refused a chunk — ``j`` has failed, and so, for Alg. 5,
    has everything below it: ``i* > j`` whatever they do. ``index_order`` lists candidate indices by
    increasing sigma."""
    rank = {j: r for r, j in enumerate(index_order)}

    def drop(run: LadderStats) -> list[int]:
        worst = -1
        for j in run.active:
            if j in run.errors or any(st.sums[0] / 2.0**FIXED_BITS > limit for st in run.stats[j].values()):
                worst = max(worst, rank[j])
        worst = max([worst] + [rank[j] for j in run.errors])
        return [j for j in run.active if rank[j] <= worst]

    return drop


@float64
def verification_spec() -> HistogramSpec:
    """The (one-bin) histogram of verification runs: only the sums at the target epsilon are needed."""
    return HistogramSpec(width=64.0, bins=1)


@float64
def candidate_passes(stats, num_samples: int, base_delta: float) -> bool:
    """The verdict of one candidate (Alg. 5): every direction in ``stats`` (``direction -> DirectionStats``, at
    the target epsilon first) ran all ``num_samples`` samples and its empirical mean is at most ``base_delta``.

    Parameters
    ----------
    stats : dict
        Direction to its ``DirectionStats``.
    num_samples : int
    base_delta : float

    Returns
    -------
    bool
    """
    return all(d.count == num_samples and d.mean_at(0) <= base_delta for d in stats.values())


@float64
def apply_verdicts(plan: CalibrationPlan, run: LadderStats) -> CalibrationResult:
    """Alg. 5 on the statistics of the ladder: ``i*`` is the lowest candidate above which every candidate passed
    (both directions complete with mean at most the base delta); the released sigma is ``ladder[i*]``, or the
    certified top when the highest candidate failed.

    Parameters
    ----------
    plan : CalibrationPlan
    run : LadderStats
        The verification run of ``plan.ladder`` (a candidate in ``run.errors`` fails).

    Returns
    -------
    CalibrationResult
        With the candidates checked from the top down to the first failure, and a note when none or all passed.
    """
    s, base = plan.num_samples, plan.base_delta
    result = CalibrationResult(sigma=plan.top_sigma, verified=False, epsilon=plan.epsilon,
                               target_delta=plan.target_delta, overall_delta=plan.overall_delta, base_delta=base,
                               num_samples=s, top_sigma=plan.top_sigma, pilot_sigma=plan.pilot_sigma,
                               top_certifier=plan.top_certifier, statistical_delta=plan.statistical_delta,
                               systematic_delta=plan.systematic_delta, ladder=list(plan.ladder))
    for j in reversed(range(len(plan.ladder))):
        st = run.stats[j]
        entry = {"index": j, "sigma": plan.ladder[j], "systematic_delta": plan.systematic[j],
                 "passed": j not in run.errors and candidate_passes(st, s, base)}
        for d, ds in st.items():
            entry[f"delta_estimate_{d}"] = ds.mean_at(0) if ds.count == s else None
            entry[f"samples_{d}"] = ds.count
        if j in run.errors:
            entry["error"] = run.errors[j]
        result.candidates.append(entry)
        if not entry["passed"]:
            break
        result.sigma, result.verified = plan.ladder[j], True
    if not result.verified:
        result.note = "no ladder candidate passed; the Gaussian top candidate is returned"
    elif result.candidates[-1]["passed"]:
        result.note = ("every ladder candidate passed: a lower sigma may pass with a longer ladder (--below), in a new "
                       "run with a fresh key; releasing the better of two runs is (epsilon, delta + 2q)-DP "
                       "(docs/soundness.md, 'Repeated or adapted calibrations')")
    if plan.dropped:
        result.note = (result.note + "; " if result.note else "") + (
            f"{plan.dropped} lowest ladder candidate(s) dropped: their systematic term exceeds "
            f"{plan.systematic_reserve:g} of the target delta (--systematic-reserve)")
    if plan.pilot_sigma is not None:
        result.phases["pilot"] = {"seconds": plan.pilot_seconds, "samples_drawn": plan.pilot_samples_drawn}
    return result


@float64
def verdict_drop(plan: CalibrationPlan):
    """The early-leaving rule of a verification run of ``plan`` (:func:`_verdict_drop` at ``base * s``).

    Returns
    -------
    callable
        ``drop(run) -> list of int``: the active candidates at or below the highest failed one.
    """
    return _verdict_drop(plan.base_delta * plan.num_samples, list(range(len(plan.ladder))))
