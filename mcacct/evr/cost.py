r"""What a calibration will cost, before it runs: the sample budget, the ladder's size and a bounded probe.

A Monte Carlo calibration (:func:`mcacct.evr.calibrate.calibrate`) draws

.. math::

    D = D_{\mathrm{pilot}} + \lceil s / c \rceil\, c

samples (both directions and every candidate share each draw; ``s`` samples per direction per candidate from
the sample budget, ``c`` the chunk size), with :math:`D_{\mathrm{pilot}} = 2 \lceil n_p / c_p \rceil c_p` for the
pilot's two grids of ``n_p`` samples. :func:`estimate_cost` fixes ``s``, the base delta, the certified top and
the largest ladder the calibration can build *without* running the pilot, then times a few chunks of the
verification program on a ladder of that size (the probe) and divides. The estimate is an upper bound on the
verification's draws (candidates that fail leave early) and a rough figure for its time: the probe's rate is the
steady rate of one run of several groups of chunks after a first, compiling call (:func:`probe_rate`), the pilot's
cost is scaled from it by its 16 grid points, and another process on the machine changes both. Nothing here is a
privacy statement; it only tells the user what the run will take.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import jax

from mcacct.engine.problem import DEFAULT_CHUNK_SIZE, Problem
from mcacct.engine.progress import format_seconds
from mcacct.engine.runner import run_ladder
from mcacct.statistics import confidence as evr
from mcacct.evr.budget import (PILOT_GRID, calibration_budget, explicit_ladder, ladder_exponents, pilot_range,
                               pilot_size)
from mcacct.evr.result import SYSTEMATIC_RESERVE
from mcacct.evr.verdicts import verification_spec
from mcacct.core.precision import float64

__all__ = ["CostEstimate", "estimate_cost", "probe_rate"]

#: the most groups of chunks (one chunk per device each) of the probe's timed run (:func:`probe_rate`)
PROBE_MAX_GROUPS = 256


@float64
@dataclass(frozen=True)
class CostEstimate:
    """The cost of a calibration, known before it runs (:func:`estimate_cost`).

    Attributes
    ----------
    num_samples : int
        Samples per direction per candidate.
    base_delta, statistical_delta : float
        The verifier's threshold and the statistical part of the overall delta.
    top_sigma : float
        The certified top of the ladder (no Monte Carlo), and ``top_certifier`` the analysis that gave it.
    candidates_at_most : int
        The largest ladder the calibration can verify.
    pilot_samples, verification_samples : int
        Draws of the pilot (0 with an explicit ladder) and at most of the verification.
    draws_per_second : float
        The probe's rate, on ``devices`` local devices, for ``candidates_at_most`` candidates.
    pilot_seconds, verification_seconds, total_seconds : float
        Expected wall times on this machine, compilation included (the verification's: every candidate to the
        end; the persistent compilation cache can remove the compilation).
    probe_seconds : float
        What the probe itself took (compilation included).
    """

    num_samples: int
    base_delta: float
    statistical_delta: float
    top_sigma: float
    top_certifier: str
    candidates_at_most: int
    pilot_samples: int
    verification_samples: int
    draws_per_second: float
    devices: int
    pilot_seconds: float
    verification_seconds: float
    total_seconds: float
    probe_seconds: float
    chunk_size: int

    def to_dict(self) -> dict:
        """The fields as a plain dict (:func:`dataclasses.asdict`)."""
        return asdict(self)

    def summary(self) -> str:
        """One line for a person: samples and the expected time (or, with no candidate to verify, that nothing
        runs).

        Returns
        -------
        str
            The draws of the pilot and of the verification, the candidates, the expected total time, the probe's
            rate and the device count; or, when ``candidates_at_most`` is 0, that the certified top is returned
            without a draw.
        """
        if self.candidates_at_most == 0:
            return (f"no Monte Carlo: no candidate below the certified top sigma {self.top_sigma:.6g} "
                    f"({self.top_certifier}), which the calibration returns without drawing a sample")
        return (f"{self.pilot_samples + self.verification_samples:,} draws (pilot {self.pilot_samples:,}, "
                f"verification at most {self.verification_samples:,} for up to {self.candidates_at_most} "
                f"candidates); about {format_seconds(self.total_seconds)} here at {self.draws_per_second:,.0f} "
                f"draws/s on {self.devices} device(s)")


@float64
def probe_rate(problem: Problem, sigmas, epsilon: float, key: jax.Array, chunk_size: int,
               min_seconds: float = 2.0, min_groups: int = 5) -> tuple[float, float, float]:
    r"""Draws per second of the verification program for the ladder ``sigmas`` in steady state, the probe's own
    wall time, and the one-off seconds of its first call beyond a steady group (compilation, tracing, first
    execution: what a run pays once).

    The first call (one chunk per device) compiles and warms the program, and a second of one group times a group
    with a call's set-up, :math:`t_1`. Then one run of :math:`G = \lceil \mathrm{min\_seconds} / t_1 \rceil + 1`
    groups (at least ``min_groups + 1``, at most :data:`PROBE_MAX_GROUPS`) is read as a shard job reads itself:
    its groups after the first, from their arrivals (:class:`~mcacct.engine.widths.GroupClock`; the runner
    dispatches one group ahead, so the host's folding overlaps the devices' next group, as in a long run). The
    rate is those groups' draws over their gaps, the figure ``mcacct sample --plan`` reports as
    ``steady_draws_per_second`` (issue #39: a projection within 5% of the shard jobs). Calls of one group each,
    which pay a call's set-up and fold with the devices idle, read about 4% lower on average on a 2-core CPU at
    §7.4, and scatter more (benchmarks/results/design_choices.md, stop 69). The first call less one steady group's
    time is the one-off figure.

    Parameters
    ----------
    problem : Problem
        The scheme and strategy.
    sigmas : sequence of float
        The ladder to verify; the probe's cost per draw grows with its length.
    epsilon : float
        The target epsilon.
    key : jax.Array
        Root key of the probe's draws (call ``i`` uses ``fold_in(key, i)``).
    chunk_size : int
        Samples per chunk; a group draws ``chunk_size * devices`` samples.
    min_seconds, min_groups : float, int
        The timed run is sized to at least ``min_seconds`` of steady groups (by :math:`t_1`, an upper estimate of a
        group's time) and at least ``min_groups`` of them. On a 2-core CPU the rate of 2.5 s windows scattered by
        10-15% within a minute, of 5 s windows by up to 8% (the same program, one process); 4 s would add about 2 s
        to every ``--plan-only`` and its tests, so the default stays 2 s.

    Returns
    -------
    rate : float
        Steady draws over their wall time (draws per second); the timed run's draws over its wall time when it
        read no gap.
    probe_seconds : float
        Wall time of the whole probe, first call included.
    one_off : float
        :math:`\max(0, t_{\rm first} - n / \mathrm{rate})` with ``n = chunk_size * devices``.
    """
    n = chunk_size * jax.local_device_count()
    run = dict(problem=problem, sigmas=list(sigmas), key=key, num_samples=n, epsilons=(epsilon,),
               chunk_size=chunk_size, spec=verification_spec())
    t0 = time.perf_counter()
    run_ladder(**run)
    first = time.perf_counter() - t0
    t1 = time.perf_counter()
    run_ladder(**dict(run, key=jax.random.fold_in(key, 1)))
    one = max(time.perf_counter() - t1, 1e-9)
    groups = min(max(math.ceil(min_seconds / one) + 1, int(min_groups) + 1), PROBE_MAX_GROUPS)
    t2 = time.perf_counter()
    res = run_ladder(**dict(run, key=jax.random.fold_in(key, 2), num_samples=n * groups))
    wall = time.perf_counter() - t2
    rate = res.steady_draws / res.steady_seconds if res.steady_seconds > 0 else n * groups / max(wall, 1e-9)
    return rate, time.perf_counter() - t0, max(0.0, first - n / rate)


@float64
def estimate_cost(problem: Problem, epsilon: float, delta: float, key: jax.Array, num_samples: int | None = None,
                  ladder_ratio: float = 1.01, above: int = 3, below: int = 4, pilot_samples: int | None = None,
                  chunk_size: int = DEFAULT_CHUNK_SIZE, sigmas=None, bracket: tuple[float, float] | None = None,
                  systematic_reserve: float = SYSTEMATIC_RESERVE) -> CostEstimate:
    r"""The cost of ``calibrate(problem, epsilon, delta, key, ...)`` with the same arguments, from a probe of
    one chunk (no pilot runs). Parameters as :func:`mcacct.evr.calibrate.calibrate`.

    The probe runs on the largest ladder the calibration can build: the explicit ``sigmas`` below the top, or the
    exponents of :func:`~mcacct.evr.budget.ladder_exponents` (reach ``4 * max(above, 1)``) around the geometric
    middle of :func:`~mcacct.evr.budget.pilot_range`. With ``L`` candidates, rate ``r`` and one-off time ``t_0``,

    .. math::

        t_{\rm pilot} = \frac{D_{\rm pilot}}{r} \frac{16}{L} + t_0, \qquad
        t_{\rm verify} = \frac{\lceil s / c \rceil c}{r} + t_0

    (:math:`16` is :data:`~mcacct.evr.budget.PILOT_GRID`; the first :math:`t_0` is left out when no pilot runs).

    Returns
    -------
    CostEstimate
        When no candidate lies below the certified top (nothing runs), every draw count and time is 0 and the
        rate NaN.

    Raises
    ------
    ValueError
        Naming the argument out of range, as :func:`~mcacct.evr.budget.calibration_budget` and
        :func:`~mcacct.evr.budget.explicit_ladder` check them.
    """
    b = calibration_budget(problem, epsilon, delta, num_samples, ladder_ratio, above, below, chunk_size,
                           systematic_reserve)
    s, base, chunk_size = b.num_samples, b.base_delta, b.chunk_size
    stat = float(evr.overall_delta(s, base))
    if sigmas is not None:
        ladder = explicit_ladder(sigmas, b.top_sigma)
        pilot_draws = 0
    else:
        lo, hi = pilot_range(b.top_sigma, bracket)
        mid = math.sqrt(lo * hi)
        ladder = [mid * b.ladder_ratio**j for j in ladder_exponents(b.below, b.above, 4 * max(b.above, 1))]
        n_pilot, pilot_chunk = pilot_size(s, pilot_samples, chunk_size)
        pilot_draws = 2 * -(-n_pilot // pilot_chunk) * pilot_chunk
    if not ladder:  # every explicit candidate is at or above the top: the top is the answer, nothing runs
        return CostEstimate(s, base, stat, b.top_sigma, b.top_certifier, 0, 0, 0, math.nan,
                            jax.local_device_count(), 0.0, 0.0, 0.0, 0.0, chunk_size)
    verification = -(-s // chunk_size) * chunk_size
    rate, probe_seconds, compiled = probe_rate(problem, ladder, b.epsilon, key, chunk_size)
    # the pilot runs PILOT_GRID sigmas on each draw: its per-draw work scales (roughly) with the candidates; it
    # compiles a program of its own, and the verification another (as long as the probe's first call)
    pilot_seconds = pilot_draws / rate * PILOT_GRID / len(ladder) + (compiled if pilot_draws else 0.0)
    verification_seconds = verification / rate + compiled
    return CostEstimate(s, base, stat, b.top_sigma, b.top_certifier, len(ladder), pilot_draws, verification, rate,
                        jax.local_device_count(), pilot_seconds, verification_seconds,
                        pilot_seconds + verification_seconds, probe_seconds, chunk_size)
