r"""Monte Carlo estimate of the hockey-stick divergence ``delta(epsilon)`` at one ``sigma``, both directions,
with confidence bounds: :func:`estimate` runs :func:`mcacct.engine.runner.run_ladder` with a ladder of one and
returns an :class:`~mcacct.statistics.estimates.Estimate` (its bounds; re-exported here with :class:`DeltaAt`,
:class:`EpsilonAt`, :func:`kl_up` and :func:`certification_notes`).
"""

from __future__ import annotations

from typing import Sequence

import jax
import numpy as np
from jax.sharding import Mesh

from mcacct.engine.problem import DEFAULT_CHUNK_SIZE, Problem, check_problem
from mcacct.engine.runner import run_ladder
from mcacct.statistics.accumulators import DIRECTIONS, HistogramSpec
from mcacct.statistics.estimates import FLOAT32_NOTE, DeltaAt, EpsilonAt, Estimate, certification_notes, kl_up
from mcacct.core.validate import check_sigma_range
from mcacct.engine.systematic import systematic_bound
from mcacct.core.validate import check_real, is_number
from mcacct.core.precision import float64

__all__ = ["Estimate", "DeltaAt", "EpsilonAt", "estimate", "kl_up", "certification_notes", "check_directions",
           "FLOAT32_NOTE"]


@float64
def check_directions(directions) -> tuple[str, ...]:
    """``directions`` as a tuple: a non-empty sequence of distinct names from ``("remove", "add")`` (a single name
    as text is accepted too); ``ValueError`` naming ``directions`` otherwise.

    Parameters
    ----------
    directions : str or sequence of str
        The directions to check.

    Returns
    -------
    tuple of str
        The names, in the order given.

    Raises
    ------
    TypeError
        If ``directions`` is neither text nor iterable.
    ValueError
        Naming ``directions`` if it is empty, holds a name outside ``("remove", "add")`` or repeats one.
    """
    if isinstance(directions, str):
        directions = (directions,)
    try:
        out = tuple(directions)
    except TypeError:
        raise TypeError(f"directions must be a sequence of names from {DIRECTIONS}; got "
                        f"{type(directions).__name__}") from None
    if not out or any(d not in DIRECTIONS for d in out) or len(set(out)) != len(out):
        raise ValueError(f"directions must be a non-empty subset of {DIRECTIONS} (each at most once); got {out!r}")
    return out


@float64
def estimate(problem: Problem, sigma: float, key: jax.Array, num_samples: int, epsilons=(1.0,),
             alpha: float = 0.01, directions: Sequence[str] = DIRECTIONS, chunk_size: int = DEFAULT_CHUNK_SIZE,
             spec: HistogramSpec = HistogramSpec(), progress: bool = False, mesh: Mesh | None = None,
             distributed: bool | None = None) -> Estimate:
    """Estimate delta(epsilon) for ``sigma`` on ``num_samples`` fresh samples per direction.

    Parameters
    ----------
    problem, sigma, key : Problem, float, jax.Array
        The pair ``(P, Q)``, the noise multiplier and the key of the run (chunk ``c`` uses ``fold_in(key, c)``;
        both directions share the draws).
    num_samples, epsilons, chunk_size, spec : int, sequence of float, int, HistogramSpec
        Samples per direction, the epsilons whose delta is summed exactly, the chunk plan and the histogram.
    alpha : float, default 0.01
        ``1 - alpha`` is the confidence of the bounds; split over the directions by a union bound (which needs
        no independence between them).
    directions : sequence of str, default ("remove", "add")
        Which of ``("remove", "add")`` to report (both are drawn either way, on the same keys). With one
        direction the estimate is not ``certified``: it bounds that direction only.
    progress : bool, default False
        Samples, rate and ETA on stderr.
    mesh : jax.sharding.Mesh, optional
        Devices (default: every local device); results are identical on any mesh.
    distributed : bool, optional
        Split the chunks over every JAX process and reduce exactly (default: when ``jax.process_count() > 1``).

    Returns
    -------
    Estimate
        With the systematic term (:mod:`mcacct.engine.systematic`) added to every upper bound.

    Raises
    ------
    ValueError
        Naming ``problem``, ``sigma``, ``alpha`` (not in ``(0, 1)``), ``epsilon`` (negative or not finite) or
        ``directions`` when out of range, or as :func:`~mcacct.engine.runner.run_ladder` for the chunk plan.
    TypeError
        If ``alpha`` is not a real number, or ``directions`` is not a sequence.
    FloatingPointError
        If a chunk's loss sums were not finite (the loss kernel's numeric range was exceeded).
    """
    check_problem("problem", problem)
    sigma = check_sigma_range("sigma", sigma)
    if not is_number(alpha):
        raise TypeError(f"alpha must be a real number in (0, 1); got {type(alpha).__name__} {alpha!r}")
    alpha = check_real("alpha", alpha, low=0.0, high=1.0, low_open=True, high_open=True)
    for e in np.atleast_1d(epsilons):
        check_real("epsilon", e, low=0.0)
    directions = check_directions(directions)
    notes = certification_notes(problem.dtype, directions)
    est = Estimate(sigma, alpha, systematic=systematic_bound(problem, sigma).delta, certified=not notes,
                   notes=notes)
    run = run_ladder(problem, [sigma], key, num_samples, epsilons, chunk_size, spec, mesh=mesh,
                     distributed=distributed, progress=progress, label=f"sigma={sigma:.6g}")
    if run.errors:
        raise FloatingPointError(run.errors[0])
    est.stats = {d: run.stats[0][d] for d in directions}
    return est
