r"""Noise calibration by Estimate-Verify-Release over a ladder of noise multipliers (paper 003, Alg. 5).

1. Sample budget: ``num_samples`` per direction and candidate; the base delta (the verifier's threshold)
   is the largest one whose overall delta (:func:`mcacct.evr.overall_delta`) meets the target. Without
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
5. Systematic terms (:mod:`mcacct.systematic`). Every loss is raised by its floating-point error bound
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
import time
from dataclasses import asdict, dataclass, field

import jax

from mcacct._validate import check_int, check_real
from mcacct.accountant import DEFAULT_CHUNK_SIZE, Problem, run_direction
from mcacct.estimate import DIRECTIONS, DirectionStats
from mcacct import evr
from mcacct.pld import CyclicPoissonBandMFSpec, PoissonGaussianSpec, pld_calibrate
from mcacct.schemes import BMinSep
from mcacct.systematic import systematic_bound

__all__ = ["calibrate", "CalibrationResult", "candidate_key", "pilot_key", "top_sigma"]

#: fraction of the target delta set aside for the sampler's systematic terms (:mod:`mcacct.systematic`)
SYSTEMATIC_RESERVE = 0.01

_TAG_PILOT = 0x5049
_TAG_CANDIDATES = 0x4341


def candidate_key(root: jax.Array, index: int) -> jax.Array:
    """The key of ladder candidate ``index`` (independent across candidates)."""
    return jax.random.fold_in(jax.random.fold_in(root, _TAG_CANDIDATES), index)


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
    (PLD accountant, certified upper bounds): Poisson DP-SGD (``C = I``, ``q = p0``, ``n`` steps) and
    cyclic-Poisson BandMF (``b`` parts, ``q = b p0``, ``ceil(n/b)`` compositions, sensitivity ``||c||``).
    Only for :class:`BMinSep`; other schemes get an empty dict."""
    scheme = problem.scheme
    if not isinstance(scheme, BMinSep):
        return {}
    p0 = scheme.participation_rate
    b, n = scheme.min_sep, scheme.iterations
    out = {"poisson_dpsgd_sigma": pld_calibrate(PoissonGaussianSpec(p0, 1.0, steps=n), epsilon, delta)}
    out["cyclic_poisson_bandmf_sigma"] = pld_calibrate(
        CyclicPoissonBandMFSpec(n, b, min(1.0, b * p0), tuple(problem.strategy.c_col), 1.0), epsilon, delta)
    out["note"] = ("PLD (FFT) accountant at the target delta; equal expected batch size p0 = "
                   f"{p0:.6g} of the dataset per iteration")
    return out


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
    candidates: list[dict] = field(default_factory=list)
    samples_used: int = 0
    seconds: float = 0.0
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _pilot(problem, epsilon, base, key, n_pilot, lo, hi, chunk_size) -> float:
    """Bisection in log sigma for the crossing of the pilot estimate (max over directions) and base."""
    def est(sig):
        try:
            return max(run_direction(problem, sig, key, d, n_pilot, (epsilon,), chunk_size).mean_at(0)
                       for d in DIRECTIONS)
        except FloatingPointError:  # a kernel refused a chunk (numeric range): treat this sigma as failing
            return 1.0
    for _ in range(12):
        mid = math.sqrt(lo * hi)
        if est(mid) <= base:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1.005:
            break
    return hi


def calibrate(problem: Problem, epsilon: float, delta: float, key: jax.Array, num_samples: int | None = None,
              ladder_ratio: float = 1.01, above: int = 6, below: int = 12, pilot_samples: int | None = None,
              chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = False,
              sigmas=None) -> CalibrationResult:
    """Smallest ladder sigma that passes Monte Carlo verification (Alg. 5), with its overall delta.

    Parameters
    ----------
    problem: scheme, strategy and kernel precision.
    epsilon: target epsilon ``>= 0``.
    delta: target overall delta in ``(0, 1)``.
    key: root ``jax.random`` key.
    num_samples: samples per direction per candidate (default: the minimum for base delta = delta/2).
    ladder_ratio: ratio between consecutive candidates (``> 1``; the paper uses 1.01).
    above, below: ladder steps above / below the pilot estimate.
    sigmas: an explicit ladder (finite, positive; sorted here; candidates at or above the certified top
        are dropped). No pilot runs; ``ladder_ratio``, ``above``, ``below`` and ``pilot_samples`` are unused.
    """
    t0 = time.perf_counter()
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
    reserve = SYSTEMATIC_RESERVE * target
    stat_target = target - reserve
    if num_samples is None:
        base = stat_target / 2
        s = evr.min_samples(stat_target, base)
    else:
        s = check_int("num_samples", num_samples, low=1)
        base = evr.base_delta_for_target(s, stat_target)  # raises with the number needed when too few
    overall = evr.overall_delta(s, base)
    sig_top, certifier = top_sigma(problem, eps, base)
    if sigmas is not None:
        explicit = sorted({check_real("sigmas", v, low=0.0, low_open=True) for v in sigmas})
        if not explicit:
            raise ValueError("sigmas must contain at least one noise multiplier")
        n_pilot, sig_hat = 0, None
        ladder = [v for v in explicit if v < sig_top]
    else:
        n_pilot = pilot_samples or int(min(s, max(20_000, 40 / base)))
        sig_hat = _pilot(problem, eps, base, pilot_key(key), n_pilot, sig_top * 1e-3, sig_top, chunk_size)
        ladder = [sig_hat * ratio**j for j in range(-below, above + 1) if sig_hat * ratio**j < sig_top]
    # the systematic term of each candidate is known before any verification sample: candidates whose term
    # exceeds the reserve are dropped (lowest sigmas first: the term decreases with sigma)
    sys_terms = [systematic_bound(problem, sig).delta for sig in ladder]
    dropped = sum(1 for d in sys_terms if d > reserve)
    ladder, sys_terms = ladder[dropped:], sys_terms[dropped:]
    systematic = max(sys_terms, default=0.0)
    used = 2 * n_pilot * 12
    result = CalibrationResult(sigma=sig_top, verified=False, epsilon=eps, target_delta=target,
                               overall_delta=min(1.0, overall + systematic), base_delta=base, num_samples=s,
                               top_sigma=sig_top, pilot_sigma=sig_hat, top_certifier=certifier,
                               statistical_delta=overall, systematic_delta=systematic)
    limit = base * s  # a direction fails as soon as its running sum exceeds base * s

    def failed(st: DirectionStats) -> bool:
        return st.sums[0] / 2.0**80 > limit

    for j in reversed(range(len(ladder))):
        sig = ladder[j]
        k = candidate_key(key, j)
        entry = {"index": j, "sigma": sig, "passed": True, "systematic_delta": sys_terms[j]}
        for d in DIRECTIONS:
            try:
                st = run_direction(problem, sig, k, d, s, (eps,), chunk_size, stop_when=failed,
                                   progress=progress)
            except FloatingPointError as err:
                # rejecting a candidate is always sound (it can only raise the released sigma)
                entry["passed"], entry["error"] = False, str(err)
                break
            used += st.count
            entry[f"delta_estimate_{d}"] = st.mean_at(0) if st.count == s else None
            entry[f"samples_{d}"] = st.count
            if st.count < s or st.mean_at(0) > base:
                entry["passed"] = False
                break
        result.candidates.append(entry)
        if not entry["passed"]:
            break
        result.sigma, result.verified = sig, True
    if not result.verified:
        result.note = "no ladder candidate passed; the Gaussian top candidate is returned"
    elif result.candidates[-1]["passed"]:
        result.note = "every ladder candidate passed: a lower sigma may pass with a longer ladder (--below)"
    if dropped:
        result.note = (result.note + "; " if result.note else "") + (
            f"{dropped} lowest ladder candidate(s) dropped: their systematic term exceeds "
            f"{SYSTEMATIC_RESERVE:g} of the target delta")
    result.samples_used = used
    result.seconds = time.perf_counter() - t0
    return result
