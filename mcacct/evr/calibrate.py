r"""Noise calibration by Estimate-Verify-Release over a ladder of noise multipliers (paper 003, Alg. 5).

1. Sample budget: ``num_samples`` per direction and candidate; the base delta (the verifier's threshold)
   is the largest one whose overall delta (:func:`mcacct.evr.bounds.overall_delta`) meets the target. Without
   ``num_samples`` the paper's choice is used: base delta = target/2 and the fewest samples that work.
2. Top of the ladder, certified without Monte Carlo (:func:`top_sigma`): the *unamplified* Gaussian mechanism
   with sensitivity :math:`\sqrt{\lceil n/b \rceil}\,\|c\|` (every b-min-sep pattern has ``||Cx||`` at most
   this, and a mixture of Gaussians with means inside that ball is dominated by it), analysed exactly
   (Balle & Wang) at the base delta, or for ``b = 1`` the tighter PLD bound of Poisson subsampling. Hence
   the answer is never empty.
3. A pilot estimate on independent keys locates the sigma where the estimate crosses the base delta; the
   ladder is ``sigma_hat * ratio**j`` for ``j = -below..above`` (capped by the top), fixed before any
   verification sample is drawn.
4. Candidates are verified from the top down, each with its own keys
   (``fold_in(fold_in(root, CANDIDATES), j)``) and both directions; the first failure stops the walk. This
   returns exactly ``i* = min{i : v_j = 1 for all j >= i}`` of Alg. 5 (lower candidates cannot change it),
   so Theorem A.1 applies: the released sigma is (epsilon, overall_delta)-DP.
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
from typing import Sequence
from dataclasses import asdict, dataclass, field

import jax

from mcacct.validate import check_int, check_real
import numpy as np

from mcacct.engine.problem import DEFAULT_CHUNK_SIZE, Problem
from mcacct.engine.statistics import FIXED_BITS, HistogramSpec
from mcacct.engine.runner import LadderStats, run_ladder
from mcacct import registry
from mcacct.evr import bounds as evr
from mcacct.pld import PoissonGaussianSpec, pld_calibrate
from mcacct.schemes.bminsep import BMinSep
from mcacct.engine.systematic import systematic_bound

__all__ = ["calibrate", "CalibrationResult", "CalibrationPlan", "plan_calibration", "apply_verdicts",
           "verdict_drop", "verification_key", "verification_spec", "pilot_key", "top_sigma"]

#: fraction of the target delta set aside for the sampler's systematic terms (:mod:`mcacct.engine.systematic`)
SYSTEMATIC_RESERVE = 0.01

_TAG_PILOT = 0x5049
_TAG_CANDIDATES = 0x4341
_TAG_VERIFY = 0x5645


def candidate_key(root: jax.Array, index: int) -> jax.Array:
    """The key of ladder candidate ``index`` (independent across candidates)."""
    return jax.random.fold_in(jax.random.fold_in(root, _TAG_CANDIDATES), index)


def verification_key(root: jax.Array) -> jax.Array:
    """The key of the verification draws, shared by every ladder candidate and both directions."""
    return jax.random.fold_in(root, _TAG_VERIFY)


def pilot_key(root: jax.Array) -> jax.Array:
    """The key of the pilot estimate (never used by a verification)."""
    return jax.random.fold_in(root, _TAG_PILOT)


def top_sigma(problem: Problem, epsilon: float, delta: float) -> tuple[float, str]:
    """(sigma, certifier) of the Monte-Carlo-free top candidate, the tightest certified bound that is valid
    for the mechanism actually run:

    * always: the unamplified Gaussian mechanism with the scheme's worst-case sensitivity (exact, Balle & Wang);
    * b-min-sep with ``b = 1`` is Poisson subsampling with ``C = c_0 I``: the pessimistic PLD accountant of
      :mod:`mcacct.pld` for ``n`` compositions of the Poisson-subsampled Gaussian (sensitivity ``c_0``).
    """
    sens = problem.scheme.sensitivity_bound(problem.strategy)
    best = (evr.gaussian_sigma(sens, epsilon, delta), "gaussian-worst-case-sensitivity")
    scheme = problem.scheme
    if isinstance(scheme, BMinSep) and scheme.min_sep == 1:
        c0 = problem.strategy.c_col[0]
        spec = PoissonGaussianSpec(scheme.sampling_prob, 1.0, steps=scheme.iterations, sensitivity=c0)
        sig = pld_calibrate(spec, epsilon, delta)
        if sig < best[0]:
            best = (sig, "pld-poisson-subsampled-gaussian")
    return best


def baseline_sigmas(problem: Problem, epsilon: float, delta: float) -> dict:
    """The sigma that the deterministic baselines need for the same target at the same expected batch size
    (PLD accountant, certified upper bounds), from the scheme's entry in :mod:`mcacct.registry` (for
    :class:`BMinSep`: Poisson DP-SGD and cyclic-Poisson BandMF); schemes without baselines get an empty dict."""
    return registry.baseline_sigmas(problem, epsilon, delta)


@dataclass
class CalibrationResult:
    """Outcome of :func:`calibrate`. ``sigma`` is certified (epsilon, overall_delta)-DP."""

    sigma: float
    verified: bool
    epsilon: float
    target_delta: float
    overall_delta: float
    base_delta: float
    num_samples: int
    top_sigma: float
    pilot_sigma: float | None
    top_certifier: str = ""
    statistical_delta: float = 0.0
    systematic_delta: float = 0.0
    ladder: list[float] = field(default_factory=list)
    candidates: list[dict] = field(default_factory=list)
    phases: dict = field(default_factory=dict)
    samples_used: int = 0
    seconds: float = 0.0
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


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


def _pilot(problem, epsilon, base, key, n_pilot, lo, hi, chunk_size, progress) -> tuple[float, float, int]:
    """Place the ladder, in two stages on shared draws (16 points on ``[lo, hi]``, then 12 inside the bracket
    found), each on ``n_pilot`` samples of its own keys. Returns ``(sigma_hat, sigma_safe, samples drawn)``:
    ``sigma_hat`` the smallest grid sigma whose pilot estimate (max over directions) is at most ``base``,
    ``sigma_safe`` the smallest whose 90% Chernoff upper bound is (``hi`` if none): the ladder reaches up to it,
    so a noisy pilot does not leave every candidate failing."""
    drawn, safe = 0, hi
    best = hi
    for stage, points in enumerate((16, 12)):
        grid = list(np.geomspace(lo, hi, points))
        order = list(range(points))
        # a grid point clearly above base (4x) is not the crossing: drop it and everything below it
        run = run_ladder(problem, grid, jax.random.fold_in(key, stage), n_pilot, (epsilon,), chunk_size,
                         HistogramSpec(width=64.0, bins=1), drop=_verdict_drop(4 * base * n_pilot, order),
                         progress=progress, label=f"pilot {stage + 1}/2")
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


@dataclass(frozen=True)
class CalibrationPlan:
    """Everything fixed before any verification draw: target, sample budget, certified top, the ladder
    (sorted) with each candidate's systematic term, seed and chunking. :func:`calibrate` runs it in process;
    :mod:`mcacct.jobs.calibration` runs it as shard jobs. Both give the same verdicts."""

    epsilon: float
    target_delta: float
    base_delta: float
    num_samples: int
    statistical_delta: float
    top_sigma: float
    top_certifier: str
    pilot_sigma: float | None
    ladder: tuple[float, ...]
    systematic: tuple[float, ...]
    dropped: int
    seed_key_data: tuple[int, ...]
    chunk_size: int
    pilot_seconds: float = 0.0
    pilot_samples_drawn: int = 0

    @property
    def systematic_delta(self) -> float:
        return max(self.systematic, default=0.0)

    @property
    def overall_delta(self) -> float:
        return min(1.0, self.statistical_delta + self.systematic_delta)


def plan_calibration(problem: Problem, epsilon: float, delta: float, key: jax.Array, num_samples: int | None = None,
                     ladder_ratio: float = 1.01, above: int = 6, below: int = 12, pilot_samples: int | None = None,
                     chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = False,
                     sigmas=None) -> CalibrationPlan:
    """Steps 1-3 and 5 of :func:`calibrate` (module docstring): budget, top candidate, pilot (unless
    ``sigmas`` gives the ladder), the fixed sorted ladder and its systematic terms. Parameters as
    :func:`calibrate`."""
    if problem.dtype != "float64":
        raise ValueError(f"dtype must be 'float64' to calibrate; got {problem.dtype!r}: float32 privacy losses "
                         "differ from float64 ones by up to ~1e-3 nats (0.1 in extreme cases) and that round-off "
                         "is not bounded, so a float32 run cannot certify a noise multiplier (use it for "
                         "estimates only)")
    eps = check_real("epsilon", epsilon, low=0.0)
    target = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    ratio = check_real("ladder_ratio", ladder_ratio, low=1.0, low_open=True)
    above = check_int("above", above, low=0)
    below = check_int("below", below, low=0)
    chunk_size = check_int("chunk_size", chunk_size, low=1)
    reserve = SYSTEMATIC_RESERVE * target
    stat_target = target - reserve
    if num_samples is None:
        base = stat_target / 2
        s = evr.min_samples(stat_target, base)
    else:
        s = check_int("num_samples", num_samples, low=1)
        base = evr.base_delta_for_target(s, stat_target)  # raises with the number needed when too few
    sig_top, certifier = top_sigma(problem, eps, base)
    if progress:
        print(f"[mcacct] calibrate: {s:,} samples per direction per candidate, base delta {base:.4g}, "
              f"top sigma {sig_top:.6g} ({certifier})", file=sys.stderr, flush=True)
    pilot_seconds, drawn = 0.0, 0
    if sigmas is not None:
        explicit = sorted({check_real("sigmas", v, low=0.0, low_open=True) for v in sigmas})
        if not explicit:
            raise ValueError("sigmas must contain at least one noise multiplier")
        sig_hat = None
        ladder = [v for v in explicit if v < sig_top]
    else:
        n_pilot = check_int("pilot_samples", pilot_samples, low=1) if pilot_samples else max(1000, min(s, s // 20))
        t_pilot = time.perf_counter()
        sig_hat, sig_safe, drawn = _pilot(problem, eps, base, pilot_key(key), n_pilot, sig_top / 64, sig_top,
                                          chunk_size, progress)
        pilot_seconds = time.perf_counter() - t_pilot
        # the ladder reaches at least the pilot's 90%-safe sigma (at most 4x `above` steps)
        reach = math.ceil(math.log(sig_safe / sig_hat) / math.log(ratio) - 1e-9) if sig_safe > sig_hat else 0
        steps = max(above, min(reach, 4 * max(above, 1)))
        ladder = [sig_hat * ratio**j for j in range(-below, steps + 1) if sig_hat * ratio**j < sig_top]
    # the systematic term of each candidate is known before any verification sample: candidates whose term
    # exceeds the reserve are dropped (lowest sigmas first: the term decreases with sigma)
    sys_terms = [systematic_bound(problem, sig).delta for sig in ladder]
    dropped = sum(1 for d in sys_terms if d > reserve)
    key_data = tuple(int(v) for v in np.asarray(jax.random.key_data(key)).ravel())
    return CalibrationPlan(eps, target, base, s, evr.overall_delta(s, base), sig_top, certifier, sig_hat,
                           tuple(ladder[dropped:]), tuple(sys_terms[dropped:]), dropped, key_data, chunk_size,
                           pilot_seconds, drawn)


def verification_spec() -> HistogramSpec:
    """The (one-bin) histogram of verification runs: only the sums at the target epsilon are needed."""
    return HistogramSpec(width=64.0, bins=1)


def candidate_passes(stats, num_samples: int, base_delta: float) -> bool:
    """The verdict of one candidate (Alg. 5): every direction in ``stats`` (``direction -> DirectionStats``, at
    the target epsilon first) ran all ``num_samples`` samples and its empirical mean is at most ``base_delta``."""
    return all(d.count == num_samples and d.mean_at(0) <= base_delta for d in stats.values())


def apply_verdicts(plan: CalibrationPlan, run: LadderStats) -> CalibrationResult:
    """Alg. 5 on the statistics of the ladder: ``i*`` is the lowest candidate above which every candidate passed
    (both directions complete with mean at most the base delta); the released sigma is ``ladder[i*]``, or the
    certified top when the highest candidate failed."""
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
        result.note = "every ladder candidate passed: a lower sigma may pass with a longer ladder (--below)"
    if plan.dropped:
        result.note = (result.note + "; " if result.note else "") + (
            f"{plan.dropped} lowest ladder candidate(s) dropped: their systematic term exceeds "
            f"{SYSTEMATIC_RESERVE:g} of the target delta")
    if plan.pilot_sigma is not None:
        result.phases["pilot"] = {"seconds": plan.pilot_seconds, "samples_drawn": plan.pilot_samples_drawn}
    return result


def verdict_drop(plan: CalibrationPlan):
    """The early-leaving rule of a verification run of ``plan`` (:func:`_verdict_drop` at ``base * s``)."""
    return _verdict_drop(plan.base_delta * plan.num_samples, list(range(len(plan.ladder))))


def calibrate(problem: Problem, epsilon: float, delta: float, key: jax.Array, num_samples: int | None = None,
              ladder_ratio: float = 1.01, above: int = 6, below: int = 12, pilot_samples: int | None = None,
              chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = False,
              sigmas=None) -> CalibrationResult:
    """Smallest ladder sigma that passes Monte Carlo verification (Alg. 5), with its overall delta.

    Parameters
    ----------
    problem: scheme, strategy and kernel precision (float64 only).
    epsilon: target epsilon ``>= 0``.
    delta: target overall delta in ``(0, 1)``.
    key: root ``jax.random`` key.
    num_samples: samples per direction per candidate (default: the minimum for base delta = 0.99 delta / 2).
    ladder_ratio: ratio between consecutive candidates (``> 1``; the paper uses 1.01).
    above, below: ladder steps above / below the pilot estimate (above: at least up to the pilot's 90%-safe
        sigma, at most ``4 * above`` steps).
    pilot_samples: samples of each of the pilot's two grids (default ``num_samples / 20``, at least 1000).
    chunk_size: samples per chunk.
    progress: phase, samples, rate and ETA on stderr.
    sigmas: an explicit ladder (finite, positive; sorted here; candidates at or above the certified top
        are dropped). No pilot runs; ``ladder_ratio``, ``above``, ``below`` and ``pilot_samples`` are unused.
    """
    t0 = time.perf_counter()
    plan = plan_calibration(problem, epsilon, delta, key, num_samples, ladder_ratio, above, below, pilot_samples,
                            chunk_size, progress, sigmas)
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
