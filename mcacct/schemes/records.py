r"""The records of the scheme contract (:mod:`mcacct.schemes.base`): what a scheme returns, as data.

* :class:`Draws` -- one batch of mechanism outputs and their auxiliary data;
* :class:`Bounds` -- everything proven about a scheme with a strategy that the engine and EVR read, with the
  scheme's :class:`LossErrorModel` (the §5 recursion's is :class:`LossErrorParams`);
* :class:`SchemeSummary` -- what reports and plots read about a scheme besides its fields.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Protocol, runtime_checkable

import jax

__all__ = ["Draws", "Bounds", "LossErrorModel", "LossErrorParams", "SchemeSummary", "BOUND_HOOKS"]


class Draws(NamedTuple):
    """One batch of mechanism outputs: ``y`` (``(num_samples, n)``; time-major ``(n, num_samples)`` from
    ``sample_t``) and ``aux``, the scheme's auxiliary data of the same shape (truncation: the counts ``r`` of
    other examples drawn per iteration), or ``None``."""

    y: jax.Array
    aux: Any = None


@runtime_checkable
class LossErrorModel(Protocol):
    r"""How float error accumulates in a scheme's loss: the scheme's part of the loss-error bound
    :math:`\eta \ge |\hat L - L|` (:func:`mcacct.engine.systematic.loss_error_bound`).

    The engine bounds what every scheme shares -- the error :math:`e_\ell` of each computed per-iteration term and
    the magnitude :math:`\Lambda` of every term, from the strategy, the output-coordinate bound and the kernel's
    unit round-off -- and the model turns them into a bound on the loss, whatever the loss's form.
    :class:`LossErrorParams` is the model of the §5 recursion (and of the closed forms it dominates).
    """

    @property
    def mixture_factor(self) -> float:
        r"""``f`` with :math:`|\partial L/\partial y_j| \le f M_\infty/\sigma^2`: 1 when ``Q`` is the plain
        Gaussian (a posterior mean of :math:`(Cx)_j/\sigma^2`), 2 when the loss is a ratio of two mixtures
        (used by the normal-coupling term, :func:`mcacct.engine.systematic.normal_coupling_delta`).

        Returns
        -------
        float
            1.0 or 2.0.
        """
        ...

    def eta(self, iterations: int, term_error: float, term_bound: float, unit_roundoff: float) -> float:
        r"""A bound on :math:`|\hat L - L|` (nats) for every sample, given that every computed term is within
        ``term_error`` (:math:`e_\ell`) of the exact one and every term is at most ``term_bound``
        (:math:`\Lambda`) in magnitude, in arithmetic of unit round-off ``unit_roundoff``.

        Parameters
        ----------
        iterations : int
            The horizon ``n``.
        term_error : float
            :math:`e_\ell`, the float error bound of every computed per-iteration term.
        term_bound : float
            :math:`\Lambda`, the bound on every term's magnitude.
        unit_roundoff : float
            :math:`u`, half the machine epsilon of the kernel dtype.

        Returns
        -------
        float
            :math:`\eta` (nats).
        """
        ...


class LossErrorParams(NamedTuple):
    r"""The loss-error model of the §5 privacy-loss recursion (a :class:`LossErrorModel`).

    Attributes
    ----------
    separation : int
        ``b`` of the recursion whose steps are bounded (a closed-form loss states the values of the recursion it is
        at most as long as).
    sampling_prob : float
        ``p`` of that recursion.
    max_participations : int
        ``J``, a bound on the posterior participation mass :math:`\sum_i |\partial L/\partial \ell_i|`.
    mixture_factor : float
        1 when ``Q`` is the plain Gaussian, 2 when the loss is a ratio of two mixtures (both sides' errors add).
    """

    separation: int
    sampling_prob: float
    max_participations: int
    mixture_factor: float

    def eta(self, iterations: int, term_error: float, term_bound: float, unit_roundoff: float) -> float:
        r""":math:`f\,\big(J e_\ell + u\,(n (8 + 4\Xi) + 4 n L_{max})\big)` with
        :math:`\Xi = \Lambda + |\ln p| + b|\ln(1-p)| + 1` and :math:`L_{max} = J\Lambda + n|\ln(1-p)| + b|\ln p| + 1`.

        :math:`|\partial L/\partial \ell_i|` are posterior participation probabilities summing to at most ``J``,
        so the terms contribute :math:`J e_\ell`; every one of at most ``n`` recursion steps (or ``n/b`` blocks
        of ``b``) multiplies the relative error by at most :math:`1 + u (8 + 4\Xi)`, :math:`\Xi` bounding the
        exponents' magnitude, and the log-scale / log-space additions add :math:`4 n u L_{max}`
        (docs/soundness.md).

        Parameters
        ----------
        iterations : int
            The horizon ``n``.
        term_error : float
            :math:`e_\ell`, the float error bound of every computed per-iteration term.
        term_bound : float
            :math:`\Lambda`, the bound on every term's magnitude.
        unit_roundoff : float
            :math:`u`, half the machine epsilon of the kernel dtype.

        Returns
        -------
        float
            :math:`\eta` (nats); :math:`|\ln p|` is taken as 0 at ``p = 0`` and :math:`|\ln(1-p)|` as 0 at ``p = 1``.
        """
        b, p, j = int(self.separation), float(self.sampling_prob), int(self.max_participations)
        n, u = int(iterations), float(unit_roundoff)
        log_p = abs(math.log(p)) if p > 0 else 0.0
        log_q = abs(math.log1p(-p)) if p < 1.0 else 0.0
        xi = term_bound + log_p + b * log_q + 1.0
        l_max = j * term_bound + n * log_q + b * log_p + 1.0
        return float(self.mixture_factor) * (j * term_error + u * (n * (8.0 + 4.0 * xi) + 4.0 * n * l_max))


class Bounds(NamedTuple):
    r"""Everything proven about a scheme with a strategy that the engine and EVR read
    (:meth:`mcacct.schemes.base.AccountedScheme.bounds`).

    No field has a default: a scheme states each, with its proof.

    Attributes
    ----------
    sensitivity : float
        An upper bound on :math:`\|C x\|_2` over every participation pattern the scheme can produce (it
        certifies the Monte-Carlo-free top of the EVR ladder).
    output_coordinate : float
        :math:`M_\infty \ge \max_x \|C x\|_\infty` over the output means of both distributions.
    participation_boundaries : int
        How many uniform-draw boundaries of the participation sampler can change one sample's pattern (each
        costs :data:`mcacct.engine.systematic.UNIFORM_BOUNDARY_MASS` of probability).
    draw_law_tv : float
        A bound on the total-variation distance between the law of one sample's auxiliary discrete draws (e.g.
        truncation's counts from integer alias tables) and their exact law; ``0.0`` only where every such draw is
        exact. Added to every reported delta.
    loss_error : LossErrorModel
        How float error accumulates in the loss (:class:`LossErrorParams` for the §5 recursion).
    """

    sensitivity: float
    output_coordinate: float
    participation_boundaries: int
    draw_law_tv: float
    loss_error: LossErrorModel


#: The methods through which a :class:`~mcacct.schemes.base.Scheme` states its bounds, one each with its proof
#: (gathered by :meth:`mcacct.schemes.base.Scheme.bounds`; :func:`mcacct.schemes.registry.register` refuses a
#: subclass without one).
BOUND_HOOKS = ("sensitivity_bound", "output_coordinate_bound", "participation_boundaries", "draw_law_tv",
               "loss_error_params")


class SchemeSummary(NamedTuple):
    """What reports, plots and the default strategy read about a scheme besides its fields (``None``: the scheme
    has no such quantity). Every scheme gives it (:meth:`mcacct.schemes.base.AccountedScheme.summary`), so that no
    consumer guesses
    from attribute names.

    Attributes
    ----------
    bands : int or None
        The bands of the default strategy (mcacct's banded Toeplitz C): b-min-sep's separation ``b``, cyclic
        Poisson's and balls-in-bins' cycle length; shown as ``b`` in plot titles.
    sampling_prob : float or None
        The per-iteration sampling probability ``q`` where the scheme has one.
    participation_rate : float or None
        The expected fraction of iterations in which the example participates (reports).
    count_sampler : str or None
        How the scheme draws auxiliary counts on this platform (truncated b-min-sep), reported with the run.
    """

    bands: int | None
    sampling_prob: float | None
    participation_rate: float | None
    count_sampler: str | None
