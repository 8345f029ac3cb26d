r"""Exact shortcuts: contributions that are provably zero are not computed (issue #39, shortcut 1).

The verifier reads :math:`\max(0, 1 - e^{\varepsilon - L})`, so a draw whose loss is certainly at most
:math:`\varepsilon` contributes exactly 0, and its recursion need not run.

**The add direction of b-min-sep** (Dong & Ganesh 2026, arXiv:2602.09338, Thm. 5.1). Under ``y ~ Q`` the add loss is
:math:`L_{add} = \ln Q/P = -\ln f` with :math:`f_i = (1-p) f_{i+1} + p\, e^{\ell_i} f_{i+b}`, :math:`f_i = 1` for
:math:`i > n`, and :math:`P/Q = f_1` (cold start) or :math:`(f_1 + p \sum_{i=2}^{b} f_i)/(1 + (b-1)p)` (warm
start). Every term is non-negative, so :math:`f_i \ge (1-p) f_{i+1}` and, by induction from :math:`f_{n+1} = 1`,
:math:`f_i \ge (1-p)^{\max(0, n-i+1)}` whatever ``y``. Hence, for every output,

.. math::
    \frac{P}{Q}(y) \ge \pi_0 = (1-p)^n \ \text{(cold)}, \qquad
    \pi_0 = \frac{(1-p)^n + p \sum_{i=2}^{b} (1-p)^{\max(0, n-i+1)}}{1 + (b-1)p} \ \text{(warm)},

the probability that the example never participates, and :math:`L_{add} \le B = -\ln \pi_0`. The computed loss
is within :math:`\eta` of the exact one (:func:`mcacct.engine.systematic.loss_error_bound`) and the engine adds
:math:`\eta` before the contribution, so where :math:`\varepsilon \ge B + 2\eta + m` (``m`` a margin covering the
float subtraction) the exact path's contribution of every such draw is exactly ``0.0``: skipping it leaves the
float sums bit for bit as they were, whatever the summation order (adding ``0.0`` changes no float sum). The
histogram records ``B`` for a skipped draw, an upper bound of its loss, so every :math:`\delta(\varepsilon')` read
from it at other :math:`\varepsilon'` stays an upper bound. :func:`add_loss_bound` computes ``B`` rounded up: the
exact rational :math:`\pi_0` of the float ``p``, and the logarithm of its numerator and denominator (big integers,
each within an ulp) with an absolute allowance of ``1e-9``.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp

from mcacct.kernels.control import rare_cond

__all__ = ["add_loss_bound", "add_skip_bound", "pi0_fraction", "RemoveSkip", "remove_thresholds",
           "settle_remove_losses", "remove_losses_with_skip", "SKIP_MARGIN", "REFINE_LANES"]

#: absolute margin of the skip condition (nats), beyond the float subtraction's own ulps (``1e-15 eps``)
SKIP_MARGIN = 1e-9

#: the most samples of a batch whose bound ``U`` fails that :func:`settle_remove_losses` settles on a narrower
#: batch before it recomputes the whole batch (benchmarks/results/design_choices.md)
REFINE_LANES = 4


def _log_ratio_up(num: int, den: int) -> float:
    """An upper bound of ``ln(num / den)`` for positive integers (logarithms of big integers, each within an ulp)."""
    v = math.log(num) - math.log(den)
    return v + 1e-9 + 1e-12 * abs(v)


def pi0_fraction(iterations: int, min_sep: int, sampling_prob: float, warm_start: bool) -> tuple[int, int]:
    r""":math:`\pi_0` (module docstring) exactly, as an unreduced integer ratio ``(num, den)``.

    With the float ``p = m / D`` (``D`` a power of two) and ``a = D - m``, every term has a power of ``D`` as its
    denominator, so with :math:`e_i = \max(0, n - i + 1)`

    .. math::
        \pi_0 = \frac{a^n}{D^n}\ \text{(cold)}, \qquad
        \pi_0 = \frac{a^n D + m \sum_{i=2}^{b} a^{e_i} D^{n - e_i}}{D^n (D + (b-1) m)}\ \text{(warm)}:

    integer products and shifts only, no reduction by a gcd (a ``Fraction`` sum of the same terms reduces numbers of
    about ``53 n`` bits at every step: over a minute at section 7.4's ``n`` and ``b``).

    Parameters
    ----------
    iterations, min_sep : int
        ``n`` and ``b``.
    sampling_prob : float
        ``p`` in ``(0, 1)``, used at its exact float value.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).

    Returns
    -------
    tuple of int
        ``(num, den)`` with ``pi_0 = num / den``.
    """
    n, b = int(iterations), int(min_sep)
    m, d = float(sampling_prob).as_integer_ratio()
    shift = d.bit_length() - 1                                      # d = 2**shift
    a = d - m
    if not (warm_start and b > 1):
        return a**n, d**n
    lo = max(0, n - b + 1)                                          # e_b, the smallest exponent of the sum
    power = a**lo
    total = 0
    for i in range(b, 1, -1):                                       # e_i = max(0, n - i + 1), rising as i falls
        e = max(0, n - i + 1)
        if e > lo:
            power *= a**(e - lo)
            lo = e
        total += power << (shift * (n - e))
    num = (a**n << shift) + m * total
    return num, (d + (b - 1) * m) << (shift * n)


@functools.lru_cache(maxsize=256)
def add_loss_bound(iterations: int, min_sep: int, sampling_prob: float, warm_start: bool) -> float:
    """``B >= -ln pi_0``, an upper bound of every add-direction loss ``ln Q/P`` of b-min-sep (module docstring).

    Parameters
    ----------
    iterations : int
        ``n``.
    min_sep : int
        ``b``, ``>= 1``.
    sampling_prob : float
        ``p`` in ``(0, 1]``, used at its exact float value.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).

    Returns
    -------
    float
        ``B``, rounded up; ``inf`` when ``p = 1`` (the example always participates).
    """
    if float(sampling_prob) >= 1.0:
        return math.inf
    num, den = pi0_fraction(iterations, min_sep, sampling_prob, warm_start)
    return _log_ratio_up(den, num)


def add_skip_bound(bound: float | None, epsilons: Sequence[float], etas: Sequence[float]) -> float | None:
    """The bound every add loss may be replaced by, if every add-direction contribution is provably 0.

    ``bound`` when every add-direction contribution at every ``epsilon`` is provably 0 for losses within the
    largest of ``etas`` of the exact ones, shifted by it (``min(epsilons) >= bound + 2 max(etas) + margin``), else
    ``None`` (the add losses are computed).

    Parameters
    ----------
    bound : float or None
        The add-loss bound (:func:`add_loss_bound`); ``None`` or non-finite: no skip.
    epsilons : sequence of float
        The epsilons of the verification; empty: no skip.
    etas : sequence of float
        Bounds on the float error of the computed losses (per candidate).

    Returns
    -------
    float or None
        ``bound`` as a float, or ``None``.
    """
    if bound is None or not math.isfinite(bound) or not epsilons:
        return None
    eps_min, eta = min(float(e) for e in epsilons), max([0.0, *(float(e) for e in etas)])
    if eps_min >= bound + 2.0 * eta + SKIP_MARGIN + 1e-15 * abs(eps_min):
        return float(bound)
    return None



class RemoveSkip(NamedTuple):
    """The remove direction's skip (:mod:`mcacct.kernels.bound`), per candidate of a ladder (arrays ``(J,)``, traced):
    a sample whose bound ``U`` is at most ``thresholds[j]`` for every candidate keeps ``U`` as its loss; the bound
    raises every block maximum of the terms by ``term_errors[j]``, the terms' float error; a loss computed on a
    narrower batch (:func:`settle_remove_losses`) is raised by ``loss_errors[j]``, the bound ``eta_j`` on its float
    error (:func:`mcacct.engine.systematic.loss_error_bound`)."""

    thresholds: object
    term_errors: object
    loss_errors: object


def remove_thresholds(epsilons: Sequence[float], etas: Sequence[float]) -> list[float]:
    r"""Per candidate, the largest ``U`` whose contribution is provably 0 at every ``epsilon``.

    :math:`\min\varepsilon - 2\eta_j - m - 10^{-15}|\min\varepsilon|` (the exact path's loss is within
    :math:`\eta_j` of the exact loss, itself at most ``U``, and the engine adds :math:`\eta_j` before the
    contribution; ``m`` = :data:`SKIP_MARGIN`).

    Parameters
    ----------
    epsilons : sequence of float
        The epsilons of the verification.
    etas : sequence of float
        Per candidate, the bound :math:`\eta_j` on the float error of the computed loss.

    Returns
    -------
    list of float
        One threshold per entry of ``etas``; ``-inf`` without epsilons: nothing is skipped.
    """
    if not epsilons:
        return [-math.inf for _ in etas]
    eps_min = min(float(e) for e in epsilons)
    return [eps_min - 2.0 * float(eta) - SKIP_MARGIN - 1e-15 * abs(eps_min) for eta in etas]


def settle_remove_losses(need: jax.Array, u: jax.Array, remove_skip: RemoveSkip, exact, columns: tuple,
                         extra: tuple = (), axes: tuple[int, ...] | None = None,
                         lanes: int = REFINE_LANES) -> jax.Array:
    r"""``(J, B)`` remove losses of a batch in which some sample's bound ``U`` fails (``need``): each sample's ``U``,
    a second bound at most every threshold, or the exact loss, bit for bit.

    The bound ``U`` of :mod:`mcacct.kernels.bound` is loose by several nats where a block holds a participation, so
    a batch can hold a sample that ``U`` does not let go although its exact loss is far below the threshold, and
    recomputing the whole batch for it is costly (the exact path's bits depend on the batch's width: XLA:CPU fuses
    some multiply-adds of a narrower batch otherwise; figures in benchmarks/results/design_choices.md). Here, where
    at most ``lanes`` samples need it, their losses :math:`\hat L_j` are first computed on a batch of
    ``lanes`` columns. Every loss kernel of the engine is within :math:`\eta_j` of the exact loss
    whatever the batch (``docs/soundness.md``, "Floating-point error of the loss"), so
    :math:`U'_j = \hat L_j + \eta_j`, rounded up, bounds the exact loss as ``U`` does. If every such sample's
    :math:`U'_j` is at most every candidate's threshold, their contributions are provably 0 and they keep
    :math:`U'` (in the histogram, a bound above the exact loss, as ``U``); otherwise, or with more than ``lanes``
    samples, the whole batch is computed as without the skip and every sample in ``need`` takes its
    exact loss, bit for bit. A non-finite :math:`\hat L` never passes. The whole batch's computation is a
    :func:`~mcacct.kernels.control.rare_cond` branch: batched (the engine's blocks on an accelerator), it runs
    only for the batches that need it, gathered.

    Parameters
    ----------
    need : jax.Array
        bool ``(B,)``: the samples whose ``U`` exceeds some candidate's threshold.
    u : jax.Array
        float64 ``(J, B)``: ``U``.
    remove_skip : RemoveSkip
        The thresholds and the loss-error bounds ``eta_j``.
    exact : callable
        ``exact(*columns, *extra) -> (J, B')``: the exact remove losses of the samples in ``columns`` (the computation
        without the skip), by any of the engine's loss kernels; it must not close over traced values.
    columns : tuple of jax.Array
        Per-sample arrays, samples along ``axes`` (``B`` of them); the narrower batch takes their columns.
    extra : tuple of jax.Array, optional
        Further operands of ``exact``, passed whole.
    axes : tuple of int, optional
        Per column, the axis of its samples (default 1 for every column).
    lanes : int, optional
        The narrower batch's width (default :data:`REFINE_LANES`); ``0``: always the whole batch.

    Returns
    -------
    jax.Array
        float64 ``(J, B)``.
    """
    width, k = need.shape[0], len(columns)
    axes = (1,) * k if axes is None else tuple(axes)
    thr = _thresholds(remove_skip, u)

    def full(need, u, up, target, *ops):
        return jnp.where(need, exact(*ops), u)

    if lanes <= 0 or width <= lanes:
        return full(need, u, None, None, *columns, *extra)
    count = jnp.sum(need.astype(jnp.int32))
    idx = jnp.nonzero(need, size=lanes, fill_value=0)[0]
    valid = jnp.arange(lanes) < count

    def refined():
        loss = exact(*(jnp.take(c, idx, axis=a) for c, a in zip(columns, axes)), *extra)
        eta = jnp.asarray(remove_skip.loss_errors, u.dtype)[:, None]
        up = (loss + eta) + (2.0**-50 * (jnp.abs(loss) + eta) + 2.0**-1000)   # rounded up: the sum's and its own
        up = jnp.where(jnp.isfinite(up), up, jnp.inf)
        return jnp.all(jnp.where(valid[None, :], up <= thr, True)), up

    ok, up = jax.lax.cond(count <= lanes, refined,
                          lambda: (jnp.asarray(False), jnp.full((u.shape[0], lanes), jnp.inf, u.dtype)))
    # invalid slots scatter nowhere (an index past the batch, dropped)
    target = jnp.where(valid, idx, width)
    kept = lambda need, u, up, target, *ops: u.at[:, target].set(up, mode="drop")  # noqa: E731
    return rare_cond(~ok, full, kept, need, u, up, target, *columns, *extra)


def _thresholds(remove_skip: RemoveSkip, u: jax.Array) -> jax.Array:
    return jnp.asarray(remove_skip.thresholds, u.dtype)[:, None]


def remove_losses_with_skip(u: jax.Array, remove_skip: RemoveSkip, exact, columns: tuple, extra: tuple = (),
                            axes: tuple[int, ...] | None = None) -> jax.Array:
    """``(J, B)`` remove losses of a batch from its bounds ``u``: ``U`` where every candidate's ``U`` is at most its
    threshold; if some sample's is not, the batch is settled (:func:`settle_remove_losses`), inside a
    :func:`~mcacct.kernels.control.rare_cond` that costs nothing while no sample needs it.

    Parameters
    ----------
    u : jax.Array
        float64 ``(J, B)``: each candidate's bound ``U`` per sample.
    remove_skip : RemoveSkip
        The thresholds and the loss-error bounds.
    exact : callable
        ``exact(*columns, *extra) -> (J, B')``: the exact remove losses of the samples in ``columns`` (the computation
        without the skip); it must not close over traced values (pass them in ``extra``).
    columns : tuple of jax.Array
        Per-sample arrays, samples along axis 1 (``B`` of them; ``axes``); the narrower batch takes their columns.
    extra : tuple of jax.Array, optional
        Further operands of ``exact``, passed whole.
    axes : tuple of int, optional
        Per column, the axis of its samples (default 1 for every column; 0 for lane-major noise).

    Returns
    -------
    jax.Array
        float64 ``(J, B)``.
    """
    need = jnp.any(~(u <= _thresholds(remove_skip, u)), axis=0)
    k = len(columns)

    def settle(need, u, rs, *ops):
        return settle_remove_losses(need, u, rs, exact, ops[:k], ops[k:], axes)

    return rare_cond(jnp.any(need), settle, lambda need, u, *_: u, need, u, remove_skip, *columns, *extra)
