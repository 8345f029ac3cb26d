"""Mechanism specifications (dominating pairs of the mechanisms the PLD accountant composes), their canonical form for
the kernels, and the result container :class:`PLDResult`."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Union

import numpy as np

from mcacct.pld.checks import check_answer, check_integer, check_positive, check_probability
from mcacct.core.precision import float64


#: The most compositions one spec may describe (steps are int64 in the kernels).
MAX_COMPOSITIONS = 2**53
#: The most mixture components of one step (the discretisation holds grid x components values: at the smallest
#: grid, 1024 points, this many fill the default memory budget of :mod:`mcacct.pld.constants`).
MAX_COMPONENTS = 2**16


def _check_components(name: str, value: int, count: int) -> None:
    if count > MAX_COMPONENTS:
        raise ValueError(f"{name}={value} gives a mixture of {count} Gaussians, more than the accountant can "
                         f"discretise ({MAX_COMPONENTS}: the single-step grid holds grid points x components values)")


def _plain_fields(spec) -> None:
    """NumPy scalars among the fields of a spec become Python numbers (so messages read ``nan``, never
    ``np.float64(nan)``, and equal specs hash alike); sequences of them become tuples of Python numbers."""
    for f in dataclasses.fields(spec):
        v = getattr(spec, f.name)
        if isinstance(v, np.generic):
            object.__setattr__(spec, f.name, v.item())
        elif ((isinstance(v, (tuple, list)) or (isinstance(v, np.ndarray) and v.ndim == 1))
              and any(isinstance(x, np.generic) for x in v)):
            object.__setattr__(spec, f.name, tuple(x.item() if isinstance(x, np.generic) else x for x in v))


def _norm(col: tuple[float, ...]) -> float:
    """The L2 norm; ``math.hypot`` (no overflow or underflow of the squares) where the plain sum of squares is not
    a positive finite number."""
    n = math.sqrt(sum(v * v for v in col))
    return n if 0 < n < math.inf else math.hypot(*col)


def _log_binom(n: int, k: int) -> float:
    """``log C(n, k)`` from the exact integer (``math.lgamma`` differences lose about ``u n log n``: 1.5e-10
    relative at n = 50,000, an audit's figure, stop 75)."""
    return math.log(math.comb(n, k))


def _log_hypergeom_ratios(k: int, b: int, n: int, ms: np.ndarray) -> np.ndarray:
    r"""``log Hypergeom(m; b, n + k, k)`` up to one common constant, for consecutive ``ms``: cumulative sums of the
    logs of the term ratios :math:`p_{m+1}/p_m = \frac{(k-m)(b-m)}{(m+1)(n-b+m+1)}` (small integers, each ratio
    within 2 ulps), so every entry is within about ``3 len(ms)`` ulps of the exact relative weight; normalise after."""
    m = ms[:-1]
    ratios = [math.log((k - int(i)) * (b - int(i)) / ((int(i) + 1) * (n - b + int(i) + 1))) for i in m]
    return np.concatenate([[0.0], np.cumsum(ratios)])


@float64
@dataclasses.dataclass(frozen=True)
class GaussianSpec:
    r"""``steps``-fold composition of the Gaussian mechanism.

    Output :math:`f(D) + \mathcal N(0, \sigma^2)` with
    :math:`\|f(D)-f(D')\|_2\le` ``sensitivity``. Dominating pair
    :math:`(\mathcal N(\Delta,\sigma^2), \mathcal N(0,\sigma^2))`; the PLD is
    :math:`\mathcal N(\mu, 2\mu)`, :math:`\mu=\Delta^2/(2\sigma^2)`, in both
    directions.

    Parameters
    ----------
    sigma : float
        Noise standard deviation (> 0).
    sensitivity : float, default 1.0
        L2 sensitivity :math:`\Delta` (> 0).
    steps : int, default 1
        Number of compositions (>= 1).
    """

    sigma: float
    sensitivity: float = 1.0
    steps: int = 1

    def __post_init__(self) -> None:
        _plain_fields(self)
        check_positive("sigma", self.sigma)
        check_positive("sensitivity", self.sensitivity)
        check_integer("steps", self.steps)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)`` of the scalar MoG (noise 1 per unit sigma).

        Returns
        -------
        sensitivities : numpy.ndarray
            ``[sensitivity]``.
        probabilities : numpy.ndarray
            ``[1.0]``.
        """
        return np.array([float(self.sensitivity)]), np.array([1.0])

    @property
    def compositions(self) -> int:
        """Number of self-compositions.

        Returns
        -------
        int
            ``steps``.
        """
        return int(self.steps)


@float64
@dataclasses.dataclass(frozen=True)
class PoissonGaussianSpec:
    r"""DP-SGD: ``steps`` compositions of the Poisson-subsampled Gaussian.

    Each example is included independently with probability :math:`q`; the
    summed clipped gradients (clip norm = ``sensitivity``) receive
    :math:`\mathcal N(0, \sigma^2)` noise. Add/remove-one adjacency with the
    dominating pair (remove direction)
    :math:`P=(1-q)\mathcal N(0,\sigma^2)+q\mathcal N(\Delta,\sigma^2)`,
    :math:`Q=\mathcal N(0,\sigma^2)` and :math:`(Q,P)` for add (Koskela, Jälkö & Honkela 2020 [arXiv:1906.03049],
    Sec. 6.1).

    Parameters
    ----------
    sampling_prob : float
        :math:`q\in(0,1]`.
    sigma : float
        Noise standard deviation (> 0), in units of the clip norm when
        ``sensitivity == 1``.
    steps : int, default 1
        Number of compositions :math:`T\ge1`.
    sensitivity : float, default 1.0
        Clip norm :math:`\Delta>0`.
    """

    sampling_prob: float
    sigma: float
    steps: int = 1
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        _plain_fields(self)
        check_probability("sampling_prob", self.sampling_prob)
        check_positive("sigma", self.sigma)
        check_integer("steps", self.steps)
        check_positive("sensitivity", self.sensitivity)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)`` of the scalar MoG.

        Returns
        -------
        sensitivities : numpy.ndarray
            ``[0, sensitivity]`` (``[sensitivity]`` when ``sampling_prob == 1``).
        probabilities : numpy.ndarray
            ``[1 - q, q]`` (``[1.0]`` when ``sampling_prob == 1``).
        """
        q = float(self.sampling_prob)
        if q == 1.0:
            return np.array([float(self.sensitivity)]), np.array([1.0])
        return np.array([0.0, float(self.sensitivity)]), np.array([1.0 - q, q])

    @property
    def compositions(self) -> int:
        """Number of self-compositions.

        Returns
        -------
        int
            ``steps``.
        """
        return int(self.steps)


@float64
@dataclasses.dataclass(frozen=True)
class GroupPoissonSpec:
    r"""Group-level DP-SGD with Poisson sampling (Ganesh 2024 [arXiv:2401.10294], Thm. 3.1).

    Adjacency: add-or-remove-up-to-:math:`k` examples. With clip norm 1 and
    noise multiplier :math:`\sigma`, each step is dominated by the scalar MoG
    mechanism with random sensitivity :math:`J\sim\mathrm{Binom}(k, q)`:

    .. math::

        P=\sum_{j=0}^{k}\binom{k}{j}q^j(1-q)^{k-j}\,\mathcal N(j,\sigma^2),
        \qquad Q=\mathcal N(0,\sigma^2)

    (remove direction; the add direction is the swapped pair). The
    ``steps``-fold composition of this pair is a tight dominating pair.

    Parameters
    ----------
    group_size : int
        :math:`k\ge1` (``k = 1`` is example-level DP-SGD).
    sampling_prob : float
        :math:`q\in(0,1]`.
    sigma : float
        Noise multiplier (> 0).
    steps : int, default 1
        Number of DP-SGD steps :math:`T\ge1`.
    """

    group_size: int
    sampling_prob: float
    sigma: float
    steps: int = 1

    def __post_init__(self) -> None:
        _plain_fields(self)
        check_integer("group_size", self.group_size)
        check_probability("sampling_prob", self.sampling_prob)
        check_positive("sigma", self.sigma)
        check_integer("steps", self.steps)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)``: ``j`` w.p. ``Binom(j; k, q)``.

        Returns
        -------
        sensitivities : numpy.ndarray
            ``0, 1, ..., k`` (``[k]`` when ``sampling_prob == 1``).
        probabilities : numpy.ndarray
            The binomial probabilities, computed in log space.

        Raises
        ------
        ValueError
            If the mixture would have more than ``MAX_COMPONENTS`` components.
        """
        k, q = int(self.group_size), float(self.sampling_prob)
        if q == 1.0:
            return np.array([float(k)]), np.array([1.0])
        _check_components("group_size", k, k + 1)
        j = np.arange(k + 1)
        logp = np.array(
            [_log_binom(k, i) + i * math.log(q) + (k - i) * math.log1p(-q) for i in j]
        )
        return j.astype(float), np.exp(logp)

    @property
    def compositions(self) -> int:
        """Number of self-compositions.

        Returns
        -------
        int
            ``steps``.
        """
        return int(self.steps)


@float64
@dataclasses.dataclass(frozen=True)
class GroupFixedBatchSpec:
    r"""Group-level DP-SGD with fixed-batch-size sampling (Ganesh 2024 [arXiv:2401.10294], Thm. 3.3).

    Each step draws a uniformly random batch of exactly :math:`B` examples
    (without replacement) from the current dataset, clips gradients to norm 1
    and adds :math:`\mathcal N(0,\sigma^2)`. Adjacency: add-or-remove-up-to-
    :math:`k`, i.e. :math:`D'=D\cup G`, :math:`|G|\le k`, where the *smaller*
    dataset has :math:`|D|\ge n` (``dataset_size``). Coupling the two batches
    (draw :math:`B` from :math:`D`, then overwrite the first
    :math:`m\sim\mathrm{Hypergeom}(B, n+k, k)` slots with group members),
    each step is dominated by the scalar MoG mechanism with sensitivity
    :math:`2m` (a replaced example moves the sum by at most 2):

    .. math::

        P=\sum_{m}\frac{\binom{k}{m}\binom{n}{B-m}}{\binom{n+k}{B}}
          \mathcal N(2m,\sigma^2),\qquad Q=\mathcal N(0,\sigma^2),

    for the remove direction, and the swapped pair for the add direction.

    Parameters
    ----------
    group_size : int
        :math:`k\ge1`.
    batch_size : int
        :math:`B`, with ``1 <= B <= dataset_size``.
    dataset_size : int
        :math:`n\ge1`, a lower bound on the size of the smaller dataset.
    sigma : float
        Noise multiplier (> 0).
    steps : int, default 1
        Number of steps :math:`T\ge1`.
    """

    group_size: int
    batch_size: int
    dataset_size: int
    sigma: float
    steps: int = 1

    def __post_init__(self) -> None:
        _plain_fields(self)
        check_integer("group_size", self.group_size)
        check_integer("dataset_size", self.dataset_size)
        b = check_integer("batch_size", self.batch_size)
        if b > self.dataset_size:
            raise ValueError(
                f"batch_size must be in [1, dataset_size={self.dataset_size}], got {b}"
            )
        check_positive("sigma", self.sigma)
        check_integer("steps", self.steps)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)``: ``2m`` w.p. ``Hypergeom(m; B, n+k, k)``.

        Returns
        -------
        sensitivities : numpy.ndarray
            ``2m`` for every possible ``m``.
        probabilities : numpy.ndarray
            The hypergeometric probabilities (normalised to sum 1).

        Raises
        ------
        ValueError
            If the mixture would have more than ``MAX_COMPONENTS`` components.
        """
        k, b, n = int(self.group_size), int(self.batch_size), int(self.dataset_size)
        _check_components("group_size", k, min(k, b) - max(0, b - n) + 1)
        ms = np.arange(max(0, b - n), min(k, b) + 1)
        logp = _log_hypergeom_ratios(k, b, n, ms)
        p = np.exp(logp - logp.max())
        return 2.0 * ms.astype(float), p / p.sum()

    @property
    def compositions(self) -> int:
        """Number of self-compositions.

        Returns
        -------
        int
            ``steps``.
        """
        return int(self.steps)


@float64
@dataclasses.dataclass(frozen=True)
class CyclicPoissonBandMFSpec:
    r"""DP-BandMF with cyclic Poisson sampling (Dong & Ganesh 2026 [arXiv:2602.09338], Sec. 3).

    The data are split into ``min_sep`` = :math:`b` parts; iteration :math:`i`
    Poisson-samples (probability :math:`q`) from part :math:`i \bmod b`. With a
    :math:`b`-banded Toeplitz strategy :math:`\mathbf C`, the outputs touched by
    one example's :math:`\lceil n/b\rceil` opportunities are disjoint, so the
    mechanism is the composition of :math:`\lceil n/b\rceil` Poisson-subsampled
    Gaussian mechanisms with sensitivity :math:`\|c_{\mathrm{col}}\|_2` and noise
    :math:`\sigma` (equivalently noise multiplier
    :math:`\sigma/\|c_{\mathrm{col}}\|_2`). ``c_col`` is a (the largest) column of
    :math:`\mathbf C`, i.e. the band coefficients.

    Parameters
    ----------
    iterations : int
        :math:`n\ge1` training iterations.
    min_sep : int
        :math:`b\ge1` (number of bands / cyclic parts).
    sampling_prob : float
        Per-opportunity Poisson probability :math:`q\in(0,1]`.
    c_col : sequence of float
        Column of the strategy matrix: its ``1 <= len(c_col) <= min_sep`` band coefficients (a longer column
        would make the shifted columns of one example's participations overlap, and the analysis below would
        not hold; refused); only its L2 norm (> 0) enters the PLD.
    sigma : float
        Noise standard deviation (> 0).
    """

    iterations: int
    min_sep: int
    sampling_prob: float
    c_col: tuple[float, ...]
    sigma: float

    def __post_init__(self) -> None:
        _plain_fields(self)
        check_integer("iterations", self.iterations)
        check_integer("min_sep", self.min_sep)
        check_probability("sampling_prob", self.sampling_prob)
        try:
            col = tuple(float(v) for v in self.c_col)
        except (TypeError, ValueError):
            raise ValueError(f"c_col must be a non-empty sequence of finite numbers, got {self.c_col!r}") from None
        if not col or not all(math.isfinite(v) for v in col) or not 0 < _norm(col) < math.inf:
            raise ValueError(
                f"c_col must be a non-empty sequence of finite numbers with norm > 0, got {self.c_col!r}"
            )
        object.__setattr__(self, "c_col", col)
        if len(col) > self.min_sep:
            raise ValueError(
                f"c_col has {len(col)} entries but min_sep is {self.min_sep}: the cyclic-Poisson analysis needs "
                f"len(c_col) <= min_sep (allowed: 1 to {self.min_sep} entries), else the shifted columns of one "
                "example's participations overlap and its sensitivity exceeds "
                "sqrt(ceil(iterations / min_sep)) * ||c_col||_2")
        check_positive("sigma", self.sigma)

    @property
    def col_norm(self) -> float:
        r""":math:`\|c_{\mathrm{col}}\|_2`.

        Returns
        -------
        float
            The L2 norm of ``c_col``.
        """
        return _norm(self.c_col)

    @property
    def compositions(self) -> int:
        r""":math:`\lceil n/b\rceil`.

        Returns
        -------
        int
            ``ceil(iterations / min_sep)``.
        """
        return -(-int(self.iterations) // int(self.min_sep))

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)`` of one Poisson-subsampled step.

        Returns
        -------
        sensitivities : numpy.ndarray
            ``[0, col_norm]`` (``[col_norm]`` when ``sampling_prob == 1``).
        probabilities : numpy.ndarray
            ``[1 - q, q]`` (``[1.0]`` when ``sampling_prob == 1``).
        """
        q = float(self.sampling_prob)
        if q == 1.0:
            return np.array([self.col_norm]), np.array([1.0])
        return np.array([0.0, self.col_norm]), np.array([1.0 - q, q])


@float64
@dataclasses.dataclass(frozen=True)
class MixtureOfGaussiansSpec:
    r"""``steps`` compositions of a general mixture-of-Gaussians mechanism.

    One step releases :math:`\mathcal N(\Delta, \sigma^2)` where the (data-independent) random sensitivity
    :math:`\Delta` equals ``sensitivities[i]`` with probability ``probs[i]`` for the differing example, against
    :math:`\mathcal N(0, \sigma^2)` without it: the dominating pair (remove direction)
    :math:`P=\sum_ip_i\,\mathcal N(c_i,\sigma^2)`, :math:`Q=\mathcal N(0,\sigma^2)`, and :math:`(Q, P)` for add
    (Ganesh 2024 [arXiv:2401.10294], Def. 2.3; Poisson subsampling is ``sensitivities=(0, 1)``,
    ``probs=(1-q, q)``). Sensitivities must be non-negative (then the privacy loss is monotone, which the
    accountant's discretisation needs); probabilities must sum to 1 (within ``1e-9``; they are renormalised).

    Parameters
    ----------
    sigma : float
        Noise standard deviation (> 0).
    sensitivities : sequence of float
        :math:`c_i\ge0`, at least one positive.
    probs : sequence of float
        :math:`p_i\ge0`, :math:`\sum_ip_i=1`.
    steps : int, default 1
        Number of compositions (>= 1).
    """

    sigma: float
    sensitivities: tuple[float, ...]
    probs: tuple[float, ...]
    steps: int = 1

    def __post_init__(self) -> None:
        _plain_fields(self)
        check_positive("sigma", self.sigma)
        check_integer("steps", self.steps)
        try:
            c = tuple(float(v) for v in self.sensitivities)
            p = tuple(float(v) for v in self.probs)
        except (TypeError, ValueError):
            raise ValueError("sensitivities and probs must be sequences of numbers; got "
                             f"{self.sensitivities!r} and {self.probs!r}") from None
        if not c or len(c) != len(p):
            raise ValueError(f"sensitivities and probs must be non-empty and of equal length; got {len(c)} and "
                             f"{len(p)}")
        if not all(math.isfinite(v) and v >= 0 for v in c) or max(c) <= 0:
            raise ValueError(f"sensitivities must be finite and >= 0 with at least one > 0; got {c!r}")
        if not all(math.isfinite(v) and v >= 0 for v in p) or abs(sum(p) - 1.0) > 1e-9:
            raise ValueError(f"probs must be >= 0 and sum to 1 (within 1e-9); got {p!r} (sum {sum(p)!r})")
        object.__setattr__(self, "sensitivities", c)
        object.__setattr__(self, "probs", p)

    def mixture(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(sensitivities, probabilities)`` of the scalar MoG.

        Returns
        -------
        sensitivities : numpy.ndarray
            ``sensitivities`` as an array.
        probabilities : numpy.ndarray
            ``probs`` as an array.
        """
        return np.array(self.sensitivities), np.array(self.probs)

    @property
    def compositions(self) -> int:
        """Number of self-compositions.

        Returns
        -------
        int
            ``steps``.
        """
        return int(self.steps)


MechanismSpec = Union[
    GaussianSpec, PoissonGaussianSpec, GroupPoissonSpec, GroupFixedBatchSpec, CyclicPoissonBandMFSpec,
    MixtureOfGaussiansSpec
]
MechanismOrFactory = Union[MechanismSpec, Callable[[float], MechanismSpec]]
SPEC_TYPES = (GaussianSpec, PoissonGaussianSpec, GroupPoissonSpec, GroupFixedBatchSpec, CyclicPoissonBandMFSpec,
              MixtureOfGaussiansSpec)


@dataclasses.dataclass(frozen=True)
class Canonical:
    """Scalar MoG: sensitivities ``c`` (>= 0), probabilities ``p``, ``steps``."""

    c: np.ndarray
    p: np.ndarray
    steps: int

    @property
    def key(self) -> tuple:
        """A hashable key of the mechanism.

        Returns
        -------
        tuple
            ``(tuple(c), tuple(p), steps)``.
        """
        return (tuple(self.c.tolist()), tuple(self.p.tolist()), self.steps)


def canonical(spec: MechanismSpec) -> Canonical:
    """The canonical form of a spec: its scalar MoG and number of compositions.

    Components of probability 0 are dropped and equal sensitivities merged; sensitivities are sorted ascending and
    the probabilities normalised.

    Parameters
    ----------
    spec : MechanismSpec
        One of the ``*Spec`` dataclasses of this module.

    Returns
    -------
    Canonical
        Sensitivities ``c``, probabilities ``p`` and ``steps``.

    Raises
    ------
    ValueError
        If ``spec`` is not a ``*Spec``, has no positive sensitivity, or composes more than ``MAX_COMPOSITIONS``
        times.
    """
    if not isinstance(spec, SPEC_TYPES):
        raise ValueError(
            "mechanism must be one of GaussianSpec, PoissonGaussianSpec, GroupPoissonSpec, "
            f"GroupFixedBatchSpec, CyclicPoissonBandMFSpec, MixtureOfGaussiansSpec; got {type(spec).__name__}"
        )
    c, p = spec.mixture()
    keep = p > 0
    c, p = np.asarray(c, float)[keep], np.asarray(p, float)[keep]
    # merge duplicate sensitivities, sort ascending
    uc = np.unique(c)
    up = np.array([p[c == v].sum() for v in uc])
    if uc.max() <= 0:
        raise ValueError("mechanism must have a positive sensitivity")
    t = int(spec.compositions)
    if t > MAX_COMPOSITIONS:  # int64 step counts in the kernels; far beyond any grid budget anyway
        raise ValueError(f"the mechanism composes {t} times, more than the accountant can (at most 2^53); "
                         "give fewer steps / compositions")
    return Canonical(uc, up / up.sum(), t)


@float64
@dataclasses.dataclass(frozen=True)
class PLDResult:
    r"""Result of a PLD query.

    Attributes
    ----------
    epsilon, delta : float
        The reported pair (an upper bound on the true privacy curve at this
        point): for :func:`pld_delta` ``epsilon`` is the query and ``delta`` the
        answer, for :func:`pld_epsilon` the reverse.
    epsilon_remove, epsilon_add, delta_remove, delta_add : float
        Per-adjacency values (the reported value is the max).
    infinity_mass : float
        Mass at loss :math:`+\infty` of the composed PLD (max over directions),
        including the pessimistically added window tail bound.
    tail_mass_bound : float
        Rigorous Chernoff bound on the mass cut off by the composition window
        (above: added to ``infinity_mass``; below: aliased upwards) plus the
        truncated noise tails, max over directions.
    error_estimate : float
        Paper-004 estimate ``2|x_h - x_{h/2}|`` of the discretisation error of
        the reported quantity (``delta`` for :func:`pld_delta`, ``epsilon`` for
        :func:`pld_epsilon`); ``nan`` when not requested.
    value_discretization_interval : float
        Grid spacing :math:`h`.
    discretization : str
        ``"connect_dots"`` or ``"round_up"``.
    compositions : int
        Number of self-compositions :math:`T`.
    fft_size : int
        Length of the FFT window.
    roundoff_bound : float
        Rigorous bound on the floating-point round-off of the FFT composition, already
        included in the reported value (max over directions): added to ``delta`` by
        :func:`pld_delta`; for :func:`pld_epsilon`, added to the curve
        :math:`\delta(\cdot)` on the grid cell of the reported ``epsilon``. See "FFT
        round-off" in the module docstring.
    """

    epsilon: float
    delta: float
    epsilon_remove: float
    epsilon_add: float
    delta_remove: float
    delta_add: float
    infinity_mass: float
    tail_mass_bound: float
    error_estimate: float
    value_discretization_interval: float
    discretization: str
    compositions: int
    fft_size: int
    roundoff_bound: float = 0.0

    def __post_init__(self) -> None:
        check_answer(self)  # never a nan epsilon / delta, nor an infinite delta

    def to_dict(self) -> dict:
        """Return the fields as a JSON-serialisable ``dict``.

        Returns
        -------
        dict
            Every field; non-finite floats as strings (``"inf"``, ``"nan"``).
        """
        return {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v))
                for k, v in dataclasses.asdict(self).items()}
