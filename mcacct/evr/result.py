"""The records of a calibration (:func:`mcacct.evr.calibrate.calibrate`): what is fixed before any verification draw,
:class:`CalibrationPlan`; the outcome, :class:`CalibrationResult`, and its typed view of the verified candidates,
:class:`Candidate`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import NamedTuple

from mcacct.core.precision import float64

__all__ = ["CalibrationPlan", "CalibrationResult", "Candidate", "SYSTEMATIC_RESERVE"]

#: fraction of the target delta set aside for the sampler's systematic terms (:mod:`mcacct.engine.systematic`)
SYSTEMATIC_RESERVE = 0.01


class Candidate(NamedTuple):
    """One verified ladder candidate (:attr:`CalibrationResult.verdicts`, typed view of ``candidates``).

    Attributes
    ----------
    sigma : float
    passed : bool
        Both directions ran all samples with mean at most the base delta, and no kernel error.
    delta_estimate, samples : dict
        Per direction, the mean at the target epsilon (``None`` when the run left early) and the samples drawn.
    systematic_delta : float
        The candidate's systematic term.
    error : str or None
        The kernel's refusal, if any.
    """

    sigma: float
    passed: bool
    delta_estimate: dict  # direction -> the mean at the target epsilon (None when the run left early)
    samples: dict  # direction -> samples drawn
    systematic_delta: float
    error: str | None


@float64
@dataclass
class CalibrationResult:
    """Outcome of :func:`calibrate`. ``sigma`` is certified (epsilon, overall_delta)-DP.

    Attributes
    ----------
    sigma : float
        The released noise multiplier: the lowest passing ladder candidate, or ``top_sigma``.
    verified : bool
        ``sigma`` is a ladder candidate that passed (``False``: the certified top).
    epsilon, target_delta, overall_delta, base_delta : float
        The target, the certified delta (statistical plus systematic, at most ``target_delta``) and the
        verifier's threshold.
    num_samples : int
        Samples per direction and candidate.
    top_sigma, pilot_sigma : float
        The certified top and the pilot's estimate (``None`` with an explicit ladder).
    top_certifier : str
        The analysis that certifies ``top_sigma``.
    statistical_delta, systematic_delta : float
        The two parts of ``overall_delta``.
    ladder : list of float
        The verified ladder, increasing.
    candidates : list of dict
        The candidates checked, top down (:attr:`verdicts` gives them typed).
    phases, samples_used, seconds, note
        Time and draws per phase, all draws of both directions, the wall time and a remark for the user.
    """

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
        """The fields as a plain dict (:func:`dataclasses.asdict`)."""
        return asdict(self)

    @property
    def verdicts(self) -> list[Candidate]:
        """The verified candidates, top down, as :class:`Candidate` (``candidates`` holds the same as dicts).

        Returns
        -------
        list of Candidate
        """
        return [Candidate(c["sigma"], c["passed"],
                          {k[len("delta_estimate_"):]: v for k, v in c.items() if k.startswith("delta_estimate_")},
                          {k[len("samples_"):]: v for k, v in c.items() if k.startswith("samples_")},
                          c["systematic_delta"], c.get("error")) for c in self.candidates]


@float64
@dataclass(frozen=True)
class CalibrationPlan:
    """Everything fixed before any verification draw: target, sample budget, certified top, the ladder
    (sorted) with each candidate's systematic term, seed and chunking (:func:`mcacct.evr.calibrate.plan_calibration`).
    :func:`mcacct.evr.calibrate.calibrate` runs it in process, :mod:`mcacct.jobs.calibration` as shard jobs; both
    give the same verdicts (:mod:`mcacct.evr.verdicts`)."""

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
    systematic_reserve: float = SYSTEMATIC_RESERVE

    @property
    def systematic_delta(self) -> float:
        """The largest systematic term of the ladder (0 without candidates)."""
        return max(self.systematic, default=0.0)

    @property
    def overall_delta(self) -> float:
        r""":math:`\min(1, \delta_{\rm stat} + \max_j d_j)`: the statistical plus the systematic delta."""
        return min(1.0, self.statistical_delta + self.systematic_delta)
