r"""Which provably zero contributions a run skips (issue #39, docs/soundness.md): the add-loss bound and the remove
skip's arrays of a run's candidates and epsilons, read by :func:`mcacct.engine.runner.run_ladder` and passed to its
chunk program. Computed on the host, once per run.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mcacct.core.platform import target_platform
from mcacct.engine.kernel_choice import resolve_loss_kernel
from mcacct.engine.problem import Problem
from mcacct.engine.systematic import loss_error_bound, term_error_bound
from mcacct.kernels.shortcuts import add_skip_bound, remove_thresholds

__all__ = ["skip_bound", "remove_skip_arrays"]


def _skips(problem: Problem) -> bool:
    """Whether the skips of provably zero contributions may run: ``problem.skip_zero``, float64, not fused."""
    return (problem.skip_zero and np.dtype(problem.dtype) == np.float64
            and resolve_loss_kernel(problem).kernel != "fused")


def skip_bound(problem: Problem, sigmas: Sequence[float], epsilons: Sequence[float]) -> float | None:
    """The add-loss bound whose contributions are provably 0 at every epsilon of the run for every candidate
    (:func:`mcacct.kernels.shortcuts.add_skip_bound`, with each candidate's loss-error bound), or ``None``: every
    loss is computed (``problem.skip_zero`` off, a scheme without the bound, the fused kernel, float32, or an
    epsilon too small).

    Parameters
    ----------
    problem : Problem
        Scheme, strategy and kernel.
    sigmas, epsilons : sequence of float
        The run's candidates and epsilons.

    Returns
    -------
    float or None
        The bound, or ``None`` as above.
    """
    if not _skips(problem):
        return None
    etas = [loss_error_bound(problem, s) for s in sigmas]
    return add_skip_bound(problem.mechanism().add_loss_bound, epsilons, etas)


def remove_skip_arrays(problem: Problem, sigmas: Sequence[float], epsilons: Sequence[float]) -> np.ndarray | None:
    """``(J, 3)`` per candidate: the remove skip's threshold (:func:`mcacct.kernels.shortcuts.remove_thresholds`),
    the terms' error bound (:func:`mcacct.engine.systematic.term_error_bound`) and the loss-error bound
    (:func:`mcacct.engine.systematic.loss_error_bound`), the fields of a
    :class:`~mcacct.kernels.shortcuts.RemoveSkip`; or ``None`` where the remove
    skip does not run (as :func:`skip_bound`, a scheme that does not :attr:`bounds_remove_losses`, or a TPU, whose
    float32 transforms the screen's error model has not been checked on). On a GPU the engine batches its blocks
    with ``vmap``; the blocks in which some sample's bound fails are then gathered, and the exact recursions run for
    those only (:func:`mcacct.kernels.control.rare_cond`).

    Parameters
    ----------
    problem : Problem
        Scheme, strategy and kernel.
    sigmas, epsilons : sequence of float
        The run's ``J`` candidates and its epsilons.

    Returns
    -------
    numpy.ndarray or None
        float64 ``(J, 3)``: column 0 the threshold, column 1 the term error bound, column 2 the loss error bound;
        or ``None``.
    """
    if (not _skips(problem) or not problem.mechanism().bounds_remove_losses or not len(epsilons)
            or target_platform() not in ("cpu", "gpu")):
        return None
    etas = [loss_error_bound(problem, s) for s in sigmas]
    return np.stack([np.asarray(remove_thresholds(epsilons, etas), np.float64),
                     [term_error_bound(problem, s) for s in sigmas], etas], axis=1)
