r"""A DPIS run as :mod:`mcacct.pld` events: the values its privacy depends on (:class:`DPISRun`, one
:class:`DPISEpoch` per segment of iterations) and the events of their dominating pairs (:mod:`mcacct.dpis.pairs`,
re-exported here).

The releases of a run and the dominating pair of each (Wei, Bao, Xiao & Yang 2022, arXiv:2210.09634) are derived
in :mod:`mcacct.dpis.pairs`; :func:`dpis_events` lists their events for a run.

Composition of these events (:func:`mcacct.pld.events_epsilon`) is valid when every parameter was fixed
before the run or the run follows a pre-committed plan (:mod:`mcacct.dpis.calibrate`); accounting the
*realized* :math:`\tilde K_e`, :math:`\sigma_{G,e}` of an adaptive run is the paper's ex-post accounting, not
a guarantee by itself.
"""

from __future__ import annotations

import dataclasses

from mcacct import pld
from mcacct.pld.vocabulary import merge_events
from mcacct.core.validate import check_int, check_real
from mcacct.core.precision import float64
from mcacct.dpis.pairs import count_spec, iteration_spec, norm_sum_spec, norm_sum_star_spec

__all__ = ["DPISEpoch", "DPISRun", "iteration_spec", "count_spec", "norm_sum_spec", "norm_sum_star_spec",
           "dpis_events", "dpis_epsilon", "dpis_delta"]


@float64
@dataclasses.dataclass(frozen=True)
class DPISEpoch:
    r"""A segment of ``iterations`` DPIS iterations sharing :math:`\tilde K`, :math:`\sigma_G` and :math:`C`
    (Alg. 1 fixes them per epoch; a per-iteration run uses ``iterations=1`` entries).

    Attributes
    ----------
    iterations : int
        Number of iterations :math:`\ge 0`.
    k_tilde : float
        :math:`\tilde K > 0` used by the sampler in these iterations.
    sigma_g : float
        Noise multiplier :math:`\sigma_G > 0`.
    clip : float or None
        Clip bound :math:`C_e > 0`; ``None`` takes the run's ``clip``.
    """

    iterations: int
    k_tilde: float
    sigma_g: float
    clip: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "iterations", check_int("iterations", self.iterations, low=0))
        object.__setattr__(self, "k_tilde", check_real("k_tilde", self.k_tilde, low=0.0, low_open=True))
        object.__setattr__(self, "sigma_g", check_real("sigma_g", self.sigma_g, low=0.0, low_open=True))
        if self.clip is not None:
            object.__setattr__(self, "clip", check_real("clip", self.clip, low=0.0, low_open=True))


@float64
@dataclasses.dataclass(frozen=True)
class DPISRun:
    r"""The values of one DPIS run that its privacy depends on.

    Attributes
    ----------
    n_tilde : float
        Released count :math:`\tilde N > 0` (used in the weights).
    batch_size : float
        Expected batch size :math:`b > 0`.
    clip : float
        Default clip bound :math:`C > 0`.
    epochs : tuple of DPISEpoch
        The iteration segments, in order (at least one).
    sigma_n : float or None
        Noise standard deviation of :math:`\tilde N`; ``None``: no release (:math:`N` public).
    sigma_k : float or None
        :math:`\sigma_K` of :math:`K'` (and :math:`\tilde K^*`); ``None``: no such release.
    p_k : float or None
        Sampling rate of :math:`K'`; ``None``: :math:`b/\tilde N` (the paper).
    k_releases : int or None
        Number of :math:`K'` releases (Alg. 1: one per epoch). ``None``: counted from ``iterations_per_epoch``
        (:attr:`norm_sum_releases`); without it, one per entry, and then refused (``ValueError``) when
        ``sigma_k`` is set and an entry has more than one iteration, since such an entry may span several
        epochs and hold several :math:`K'` releases (docs/dpis.md). 0 when ``sigma_k`` is None.
    k_star_releases : int
        Number of :math:`\tilde K^*_e` releases (adaptive clipping; Alg. 1 releases one per epoch), default 0.
    rejection_k : float or None
        Rejection-sampling multiplier :math:`k\ge1` (Sec. 3.4): every :math:`\tilde K` must be
        :math:`\ge kbC_e`.
    iterations_per_epoch : int or None
        :math:`T \ge 1`, the fixed public number of iterations of every epoch (the last may be shorter; the paper
        fixes :math:`T = |D|/b`, Sec. 5.3). It locates the epoch boundaries, so that the :math:`K'` releases are
        counted when ``k_releases`` is omitted, and it bounds ``k_releases`` from below when both are given.
    """

    n_tilde: float
    batch_size: float
    clip: float
    epochs: tuple
    sigma_n: float | None = None
    sigma_k: float | None = None
    p_k: float | None = None
    k_releases: int | None = None
    k_star_releases: int = 0
    rejection_k: float | None = None
    iterations_per_epoch: int | None = None

    def __post_init__(self) -> None:
        for name in ("n_tilde", "batch_size", "clip"):
            object.__setattr__(self, name, check_real(name, getattr(self, name), low=0.0, low_open=True))
        for name in ("sigma_n", "sigma_k"):  # None: no such release
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_real(name, getattr(self, name), low=0.0, low_open=True))
        eps = tuple(self.epochs) if isinstance(self.epochs, (list, tuple)) else None
        if not eps or not all(isinstance(e, DPISEpoch) for e in eps):
            raise ValueError(f"epochs must be a non-empty sequence of DPISEpoch; got {self.epochs!r}")
        object.__setattr__(self, "epochs", eps)
        if self.p_k is not None:
            object.__setattr__(self, "p_k", check_real("p_k", self.p_k, low=0.0, high=1.0, low_open=True))
        elif self.sigma_k is not None and self.batch_size > self.n_tilde:
            raise ValueError(f"p_k defaults to batch_size/n_tilde, which must be <= 1; got batch_size "
                             f"{self.batch_size!r} > n_tilde {self.n_tilde!r} (give p_k)")
        if self.k_releases is not None:
            object.__setattr__(self, "k_releases", check_int("k_releases", self.k_releases, low=0))
        object.__setattr__(self, "k_star_releases", check_int("k_star_releases", self.k_star_releases, low=0))
        if (self.k_releases or self.k_star_releases) and self.sigma_k is None:
            raise ValueError("k_releases / k_star_releases need sigma_k (the noise of K' and K*)")
        if self.rejection_k is not None:
            object.__setattr__(self, "rejection_k", check_real("rejection_k", self.rejection_k, low=1.0))
        if self.iterations_per_epoch is not None:
            object.__setattr__(self, "iterations_per_epoch",
                               check_int("iterations_per_epoch", self.iterations_per_epoch, low=1))
        self._check_k_releases()
        for i, e in enumerate(eps):  # the ranges of K~ (ValueError naming the epoch)
            try:
                iteration_spec(e.k_tilde, self.n_tilde, self.batch_size, self.epoch_clip(e), e.sigma_g,
                               rejection_k=self.rejection_k)
            except ValueError as err:
                raise ValueError(f"epochs[{i}]: {err}") from None

    def _check_k_releases(self) -> None:
        """Refuse a count of :math:`K'` releases that could fall short of one per epoch (Alg. 1)."""
        if self.sigma_k is None:
            return
        t = self.iterations_per_epoch
        if t is None:
            if self.k_releases is None:
                for i, e in enumerate(self.epochs):
                    if e.iterations > 1:
                        raise ValueError(
                            f"k_releases is required when sigma_k is set and an entry has more than one iteration "
                            f"(epochs[{i}] has {e.iterations}): Alg. 1 releases one K' per epoch and an entry may "
                            f"span several epochs. Pass k_releases (the number of K' releases, >= the number of "
                            f"epochs) or iterations_per_epoch (the fixed public number T of iterations per "
                            f"epoch, from which the releases are counted)")
            return
        epochs = -(-self.iterations // t)
        if self.k_releases is not None and self.k_releases < epochs:
            raise ValueError(f"k_releases must be >= the number of epochs ceil(iterations / iterations_per_epoch) "
                             f"= {epochs} (Alg. 1 releases one K' per epoch); got {self.k_releases}")

    def epoch_clip(self, epoch: DPISEpoch) -> float:
        """The clip bound of ``epoch`` (its own, else the run's).

        Parameters
        ----------
        epoch : DPISEpoch
            One entry of ``epochs``.

        Returns
        -------
        float
            ``epoch.clip``, or ``clip`` when it is ``None``.
        """
        return self.clip if epoch.clip is None else epoch.clip

    @property
    def iterations(self) -> int:
        """Total number of iterations.

        Returns
        -------
        int
            The sum over ``epochs``.
        """
        return sum(e.iterations for e in self.epochs)

    @property
    def norm_sum_rate(self) -> float:
        r""":math:`p_K` (given, else :math:`b/\tilde N`).

        Returns
        -------
        float
            ``p_k``, or ``min(batch_size / n_tilde, 1)`` when it is ``None``.
        """
        return self.p_k if self.p_k is not None else min(self.batch_size / self.n_tilde, 1.0)

    @property
    def norm_sum_releases(self) -> int:
        r"""Number of :math:`K'` releases.

        Returns
        -------
        int
            0 when ``sigma_k`` is ``None``; else ``k_releases`` if given; else, with ``iterations_per_epoch``
            :math:`T`, one per stretch of iterations between cuts, the cuts being the epoch boundaries (multiples
            of :math:`T`) and the entry boundaries where :math:`\tilde K` or the clip bound changes (a new
            :math:`\tilde K` needs a new :math:`K'`): :math:`\lceil\text{iterations}/T\rceil` for a run that
            changes them only between epochs; else one per entry (every entry then has at most one iteration).
        """
        if self.sigma_k is None:
            return 0
        if self.k_releases is not None:
            return self.k_releases
        t = self.iterations_per_epoch
        if t is None:
            return len(self.epochs)
        cuts, pos, prev = set(range(t, self.iterations, t)), 0, None
        for e in self.epochs:
            key = (e.k_tilde, self.epoch_clip(e))
            if prev is not None and key != prev and 0 < pos < self.iterations:
                cuts.add(pos)
            pos, prev = pos + e.iterations, key
        return len(cuts) + 1 if self.iterations else len(self.epochs)


@float64
def dpis_events(run: DPISRun, *, auxiliary: bool = True) -> list:
    r"""The :class:`mcacct.pld.Event` list of a DPIS run: :math:`\tilde N` (``count_spec``), the :math:`K'`
    releases (``norm_sum_spec``), the :math:`\tilde K^*` releases (``norm_sum_star_spec``) and every
    segment's iterations (``iteration_spec``), equal events merged.

    Parameters
    ----------
    run : DPISRun
        The run.
    auxiliary : bool, default True
        Include the auxiliary releases; ``False`` gives the gradient releases only.

    Returns
    -------
    list of mcacct.pld.Event
        With :math:`\tilde K_e = \tilde NC` for all segments and ``auxiliary=False`` this is exactly
        ``[Event(PoissonGaussianSpec(b / n_tilde, sigma_g), iterations)]`` (Poisson DP-SGD).
    """
    if not isinstance(run, DPISRun):
        raise ValueError(f"run must be a DPISRun; got {type(run).__name__}")
    out = []
    if auxiliary:
        if run.sigma_n is not None:
            out.append(pld.Event(count_spec(run.sigma_n), 1))
        if run.norm_sum_releases:
            out.append(pld.Event(norm_sum_spec(run.norm_sum_rate, run.sigma_k), run.norm_sum_releases))
        if run.k_star_releases:
            out.append(pld.Event(norm_sum_star_spec(run.sigma_k), run.k_star_releases))
    for e in run.epochs:
        spec = iteration_spec(e.k_tilde, run.n_tilde, run.batch_size, run.epoch_clip(e), e.sigma_g,
                              rejection_k=run.rejection_k)
        out.append(pld.Event(spec, e.iterations))
    merged = merge_events(out)
    if not merged:
        raise ValueError("the run releases nothing (every count is 0)")
    return merged


@float64
def dpis_epsilon(run: DPISRun, delta: float, *, value_discretization_interval: float = 1e-4,
                 estimate_error: bool = True) -> pld.EventsResult:
    r"""PLD upper bound on :math:`\varepsilon(\delta)` of a DPIS run, max over add and remove.

    :func:`mcacct.pld.events_epsilon` of :func:`dpis_events`.

    Parameters
    ----------
    run : DPISRun
        The run.
    delta : float
        :math:`\delta\in(0, 1)`.
    value_discretization_interval : float, default 1e-4
        Loss grid spacing.
    estimate_error : bool, default True
        Also report the discretisation error estimate.

    Returns
    -------
    mcacct.pld.EventsResult
        The certified point of the privacy curve.

    Raises
    ------
    ValueError
        If an argument is out of range.
    """
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    return pld.events_epsilon(dpis_events(run), delta,
                              value_discretization_interval=value_discretization_interval,
                              estimate_error=estimate_error)


@float64
def dpis_delta(run: DPISRun, epsilon: float, *, value_discretization_interval: float = 1e-4,
               estimate_error: bool = True) -> pld.EventsResult:
    r"""PLD upper bound on :math:`\delta(\varepsilon)` of a DPIS run, max over add and remove.

    :func:`mcacct.pld.events_delta` of :func:`dpis_events`.

    Parameters
    ----------
    run : DPISRun
        The run.
    epsilon : float
        :math:`\varepsilon\ge0`.
    value_discretization_interval : float, default 1e-4
        Loss grid spacing.
    estimate_error : bool, default True
        Also report the discretisation error estimate.

    Returns
    -------
    mcacct.pld.EventsResult
        The certified point of the privacy curve.

    Raises
    ------
    ValueError
        If an argument is out of range.
    """
    epsilon = check_real("epsilon", epsilon, low=0.0)
    return pld.events_delta(dpis_events(run), epsilon,
                            value_discretization_interval=value_discretization_interval,
                            estimate_error=estimate_error)
