r"""Gaussian differential privacy (GDP) and the individual GDP filter.

Closed forms for :math:`\mu`-GDP (Dong, Roth & Su 2022, arXiv:1905.02383, Cor. 2.13): a mechanism is
:math:`\mu`-GDP iff it is :math:`(\varepsilon, \delta(\varepsilon))`-DP for every :math:`\varepsilon \ge 0` with

.. math:: \delta_\mu(\varepsilon) = \Phi\Big(-\frac{\varepsilon}{\mu} + \frac{\mu}{2}\Big)
          - e^{\varepsilon}\, \Phi\Big(-\frac{\varepsilon}{\mu} - \frac{\mu}{2}\Big),

and the individual GDP filter, Alg. 1 of Koskela, Tobaben & Honkela (2023, arXiv:2209.15596): example
:math:`i` takes part in step :math:`j` only while its applied GDP parameters satisfy
:math:`\sum_{m \le j} (\mu^{(i)}_m)^2 \le B^2`; by their Thm. 1 the whole output is then :math:`B`-GDP with
respect to removing any one example, for fully adaptive :math:`\mu^{(i)}_j` (each determined by the outputs
of steps :math:`1..j-1` and by :math:`x_i`).

**Decision: dropped examples stay dropped.** Once :math:`\sum_{m<j}(\mu^{(i)}_m)^2 + (\mu^{(i)}_j)^2 > B^2`,
example :math:`i` is inactive at step :math:`j` and every later step: the stopping time :math:`T` of the proof of
Thm. 1. Alg. 1 as printed re-tests against the sum of the *applied* (zeroed) :math:`\mu`'s, so an example
whose :math:`\mu` later shrinks could return (also covered by their Thm. 2, the applied :math:`\mu`'s being
predictable with squares summing to at most :math:`B^2`); the permanent drop is simpler, its active sets are
subsets of Alg. 1's, and the guarantee is the same.

Floating point (decision, stop 75): the float64 running sum is compared with ``budget**2`` exactly as Alg. 1
states, so a budget of :math:`\sqrt{T}/\sigma` lets :math:`T` steps of ratio 1 through. The exact sum of the applied
:math:`\mu^2` can then exceed :math:`B^2` by the round-off of the squares and the sums, and by the squares below
the smallest normal float that XLA on CPU flushes to zero: after at most :math:`k` steps the true budget is at most
:math:`B(1 + (k + 3)2^{-53})` (for :math:`B \ge` :data:`BUDGET_MIN` and :math:`k \le` :data:`STEPS_MAX`;
docs/soundness.md, "GDP filter"). :func:`gdp_filter_epsilon` therefore takes the filter's maximum number of steps
and reports the guarantee of :math:`B(1 + (k + 4)2^{-52})`, a relative 2.2e-10 in :math:`\mu` at a million steps.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtr, ndtri

from mcacct.core.validate import check_int, check_real, interval, is_traced
from mcacct.core.precision import float64

__all__ = ["gdp_delta", "gdp_epsilon", "individual_mu", "GDPFilterState", "gdp_filter_init",
           "gdp_filter_step", "gdp_filter_epsilon", "BUDGET_MIN", "STEPS_MAX"]

#: The smallest GDP budget the filter takes: ``BUDGET_MIN**2`` is a normal float64 far above the squares that XLA on
#: CPU flushes to zero, so their loss stays below the round-off that :func:`gdp_filter_epsilon` adds.
BUDGET_MIN = 1e-100
#: The largest number of filter steps :func:`gdp_filter_epsilon` covers (its round-off bound needs ``k u`` small).
STEPS_MAX = 2 ** 40


# -- argument checks ---------------------------------------------------------------------------------------
def _array(name: str, value: Any, low: float, high: float | None = None, *, low_open: bool = False,
           high_open: bool = False) -> np.ndarray:
    """``value`` as a float64 array, every entry finite and in the interval; a scalar goes through
    :func:`mcacct.core.validate.check_real` with the same interval, so its message matches the rest of mcacct."""
    rng = interval(low, high, low_open, high_open)
    raw = np.asarray(value)
    if raw.dtype.kind not in "fiu" or raw.size == 0:
        raise ValueError(f"{name} must be a finite real number (or array) in {rng}; got {value!r}")
    arr = raw.astype(np.float64)
    if arr.ndim == 0:
        check_real(name, arr[()], low=low, high=high, low_open=low_open, high_open=high_open)
    ok = np.isfinite(arr) & ((arr > low) if low_open else (arr >= low))
    if high is not None:
        ok &= (arr < high) if high_open else (arr <= high)
    if not np.all(ok):
        raise ValueError(f"{name} must be finite and in {rng}; got {arr[~ok][:3].tolist()!r} (first offending)")
    return arr


def _mu(name: str, value: Any) -> np.ndarray:
    return _array(name, value, 0.0)


def _pos(name: str, value: Any) -> np.ndarray:
    return _array(name, value, 0.0, low_open=True)


def _out(x: jax.Array) -> np.ndarray | np.float64:
    out = np.asarray(x, dtype=np.float64)
    return out[()] if out.ndim == 0 else out


# -- closed forms ------------------------------------------------------------------------------------------
def _log_phi(x: jax.Array) -> jax.Array:
    r""":math:`\log \Phi(x)` to ~1e-16 relative accuracy: ``log(ndtr)`` on ``[-37, 0]`` (``ndtr`` is an
    ``erfc``, exact to underflow), ``log1p(-ndtr(-x))`` for ``x > 0`` and JAX's asymptotic ``log_ndtr``
    below ``-37`` (where :math:`\Phi < 10^{-300}`)."""
    mid = jnp.log(ndtr(jnp.clip(x, -37.0, 0.0)))
    low = log_ndtr(jnp.minimum(x, -37.0))
    high = jnp.log1p(-ndtr(-jnp.maximum(x, 0.0)))
    return jnp.where(x > 0, high, jnp.where(x < -37.0, low, mid))


#: 8-point Gauss-Legendre rule on [-1, 1], for the mass of N(0, 1) on a short interval
_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)
#: below this mu, log Phi(b) - log Phi(a) is formed from the interval mass Phi(a) - Phi(b) (no cancellation)
_SMALL_MU = 0.02


@jax.jit
def _delta_kernel(mu: jax.Array, eps: jax.Array) -> jax.Array:
    """``Phi(a) * (-expm1(L))`` with ``L = eps + log Phi(b) - log Phi(a)``, ``a, b = -eps/mu +- mu/2``."""
    mu, eps = jnp.broadcast_arrays(mu, eps)
    safe = jnp.where(mu > 0, mu, 1.0)
    a, b = -eps / safe + safe / 2, -eps / safe - safe / 2
    la, lb = _log_phi(a), _log_phi(b)
    # small mu: log Phi(b) - log Phi(a) = log1p(-(Phi(a) - Phi(b)) / Phi(a)), the mass by quadrature
    h = jnp.minimum(safe, _SMALL_MU) / 2
    t = (a + b)[..., None] / 2 + h[..., None] * _GL_X
    log_mass = jnp.log(h) + jax.nn.logsumexp(-0.5 * t * t, b=_GL_W, axis=-1) - 0.5 * np.log(2 * np.pi)
    ell_small = eps + jnp.log1p(-jnp.exp(jnp.minimum(log_mass - la, 0.0)))
    ell = jnp.minimum(jnp.where(safe < _SMALL_MU, ell_small, eps + lb - la), 0.0)  # <= 0 as delta >= 0
    d = jnp.exp(la + jnp.log(-jnp.expm1(ell)))
    return jnp.where((mu > 0) & (la > -jnp.inf), d, 0.0)


@float64
def gdp_delta(mu: Any, epsilon: Any) -> np.ndarray | np.float64:
    r"""The tight :math:`\delta(\varepsilon)` of :math:`\mu`-GDP (Dong, Roth & Su 2022, arXiv:1905.02383, Cor. 2.13).

    .. math:: \delta_\mu(\varepsilon) = \Phi(-\varepsilon/\mu + \mu/2) - e^\varepsilon \Phi(-\varepsilon/\mu - \mu/2),
              \qquad \delta_0 \equiv 0.

    Evaluated as :math:`\Phi(a)\,(1 - e^{L})` with :math:`L = \varepsilon + \log\Phi(b) - \log\Phi(a)` in log
    space, so neither :math:`e^\varepsilon` overflows nor the difference cancels (for :math:`\mu < 0.02`,
    :math:`\log\Phi(b) - \log\Phi(a) = \log(1 - P(b < Z < a)/\Phi(a))` with the interval mass by
    Gauss-Legendre quadrature). Against 60-digit arithmetic, for :math:`\mu \in [10^{-12}, 80]`: relative
    error below 1e-11 where :math:`\delta \ge 10^{-80}` and below 1e-9 down to ~1e-300 (smaller values
    round to 0).

    Parameters
    ----------
    mu:
        GDP parameter(s) :math:`\mu \ge 0`, scalar or array.
    epsilon:
        :math:`\varepsilon \ge 0`, scalar or array (broadcast against ``mu``).

    Returns
    -------
    numpy.float64 or numpy.ndarray
        The float64 :math:`\delta`, of the broadcast shape.

    Raises
    ------
    ValueError
        If a value is not finite or outside its range.
    """
    m = _mu("mu", mu)
    e = _array("epsilon", epsilon, 0.0)
    return _out(_delta_kernel(jnp.asarray(m), jnp.asarray(e)))


#: relative margin of the bisection target below ``delta``: covers the evaluation error of ``_delta_kernel``
#: (and XLA's code-path-dependent rounding), so ``gdp_delta(mu, gdp_epsilon(mu, delta)) <= delta`` holds on
#: re-evaluation and against the exact formula
_DELTA_MARGIN = 1e-9


@jax.jit
def _epsilon_kernel(mu: jax.Array, delta: jax.Array) -> jax.Array:
    mu, delta = jnp.broadcast_arrays(mu, delta)
    target = delta * (1.0 - _DELTA_MARGIN)
    # delta_mu(eps) <= Phi(-eps/mu + mu/2) <= delta at eps = mu^2/2 + mu*Phi^{-1}(1 - delta); +1 is slack
    hi = 0.5 * mu * mu + mu * jnp.maximum(-ndtri(delta), 0.0) + 1.0

    def grow(c):
        h, n = c
        return jnp.where(_delta_kernel(mu, h) > target, 2.0 * h, h), n + 1

    hi, _ = jax.lax.while_loop(lambda c: (c[1] < 64) & jnp.any(_delta_kernel(mu, c[0]) > target), grow, (hi, 0))

    def bisect(c):  # invariant: delta(lo) > target >= delta(hi); stops when lo, hi are adjacent floats
        lo, h, mid, n = c
        over = _delta_kernel(mu, mid) > target
        lo, h = jnp.where(over, mid, lo), jnp.where(over, h, mid)
        return lo, h, lo + 0.5 * (h - lo), n + 1

    more = lambda c: (c[3] < 2200) & jnp.any((c[2] > c[0]) & (c[2] < c[1]))  # noqa: E731
    _, hi, _, _ = jax.lax.while_loop(more, bisect, (jnp.zeros_like(hi), hi, 0.5 * hi, 0))
    eps = jnp.where(_delta_kernel(mu, hi) <= delta, hi, jnp.inf)  # inf only if the bracket could not be found
    return jnp.where(_delta_kernel(mu, jnp.zeros_like(mu)) <= target, 0.0, eps)


@float64
def gdp_epsilon(mu: Any, delta: Any) -> np.ndarray | np.float64:
    r"""The smallest :math:`\varepsilon \ge 0` with :math:`\delta_\mu(\varepsilon) \le \delta`, rounded up.

    :math:`\delta_\mu` decreases in :math:`\varepsilon`; the result is the upper end of a float64 bisection
    bracket for :math:`\delta_\mu(\varepsilon) = \delta (1 - 10^{-9})`, narrowed until its ends are adjacent
    floats. The upper end always satisfies the target, and the 1e-9 relative margin exceeds the evaluation
    error of :math:`\delta_\mu`, so ``gdp_delta(mu, result) <= delta`` (a sound upper bound); the
    overestimate of :math:`\varepsilon` this margin causes is negligible (about
    :math:`10^{-9}\delta / |\delta_\mu'(\varepsilon)|`). ``0`` when
    :math:`\delta_\mu(0) = 2\Phi(\mu/2) - 1 \le \delta` (in particular for :math:`\mu = 0`).

    Parameters
    ----------
    mu:
        :math:`\mu \ge 0`, scalar or array.
    delta:
        :math:`\delta \in (0, 1)`, scalar or array (broadcast against ``mu``).

    Returns
    -------
    numpy.float64 or numpy.ndarray
        The float64 :math:`\varepsilon`, of the broadcast shape.

    Raises
    ------
    ValueError
        If a value is not finite or outside its range.
    """
    m = _mu("mu", mu)
    d = _array("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    return _out(_epsilon_kernel(jnp.asarray(m), jnp.asarray(d)))


@float64
def individual_mu(ratios: Any, sigma: Any) -> np.ndarray | np.float64:
    r"""Per-example GDP parameter of full-batch DP-GD (Koskela, Tobaben & Honkela 2023, arXiv:2209.15596,
    Sec. 3.3 and App. C.2, with Thm. 2; sampling rate :math:`q = 1`).

    With noise :math:`\mathcal{N}(0, \sigma^2 C^2)` on the summed clipped gradients, step :math:`t` is
    :math:`(r_t/\sigma_t)`-GDP for example :math:`i`, :math:`r_t = \|\mathrm{clip}_C(g_t^{(i)})\|/C \in [0, 1]`,
    and the composition is :math:`\mu`-GDP with

    .. math:: \mu^{(i)} = \sqrt{\textstyle\sum_t r_t^2 / \sigma_t^2} = \sqrt{\textstyle\sum_t r_t^2}\,/\,\sigma.

    That is a guarantee when the ratios were fixed before training. Ratios read off the run (gradient norms at the
    trajectory's parameters) make :math:`\mu^{(i)}` a realized value, not a bound fixed in advance as Thm. 2
    requires: ``gdp_epsilon(mu, delta)`` of it is then approximative (:mod:`mcacct.individual.accountant`); a
    rigorous fully adaptive guarantee comes from the filter (:func:`gdp_filter_step` with a budget chosen before
    the run).

    Parameters
    ----------
    ratios:
        Array ``(..., T)`` of sensitivity ratios :math:`r_t \ge 0` (one row per example, steps on the last axis).
    sigma:
        Noise multiplier :math:`\sigma > 0`, a scalar or an array ``(T,)`` of per-step multipliers.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        The float64 :math:`\mu^{(i)}`, of shape ``ratios.shape[:-1]``.

    Raises
    ------
    ValueError
        If ``ratios`` is not at least 1-D or has entries outside ``[0, inf)``, or ``sigma`` is not ``> 0``.
    """
    r, s = _mu("ratios", ratios), _pos("sigma", sigma)
    if r.ndim < 1:
        raise ValueError(f"ratios must be an array of shape (..., T) (steps on the last axis); got {ratios!r}")
    if s.ndim > 1 or (s.ndim == 1 and s.shape[0] != r.shape[-1]):
        raise ValueError(f"sigma must be a scalar or of shape ({r.shape[-1]},) (one per step); got shape {s.shape}")
    return _out(np.sqrt(np.sum(np.square(r / s), axis=-1)))


# -- the individual GDP filter (Alg. 1) -----------------------------------------------------------------------
class GDPFilterState(NamedTuple):
    r"""State of the individual GDP filter (a pytree: carry it through ``jax.lax.scan``).

    Attributes
    ----------
    spent_sq:
        float64 ``(N,)``: per example, the sum :math:`\sum_m (\mu^{(i)}_m)^2` of the *applied* GDP parameters.
    active:
        bool ``(N,)``: ``False`` once an example has been dropped (it never returns).
    """

    spent_sq: jax.Array
    active: jax.Array


@float64
def gdp_filter_init(num_examples: int) -> GDPFilterState:
    """Initial state for ``num_examples >= 1`` examples: nothing spent, all active.

    Parameters
    ----------
    num_examples : int
        The number of examples ``N >= 1``.

    Returns
    -------
    GDPFilterState
        ``spent_sq`` float64 zeros and ``active`` all ``True``, both of shape ``(N,)``.

    Raises
    ------
    ValueError
        If ``num_examples`` is not an integer ``>= 1``.
    """
    n = check_int("num_examples", num_examples, low=1)
    return GDPFilterState(jnp.zeros((n,), jnp.float64), jnp.ones((n,), bool))


@jax.jit
def _filter_kernel(spent_sq, active, mu_t, budget):
    # a traced budget below BUDGET_MIN (or <= 0, or NaN) drops everyone
    thr = jnp.where(budget >= BUDGET_MIN, jnp.square(budget), -jnp.inf)
    cand = spent_sq + jnp.square(mu_t)
    now = active & (cand <= thr)  # NaN or inf mu_t compares False: dropped
    return now, GDPFilterState(jnp.where(now, cand, spent_sq), now)


@float64
def gdp_filter_step(state: GDPFilterState, mu_t: Any, budget: Any) -> tuple[jax.Array, GDPFilterState]:
    r"""One step of the individual GDP filter (Koskela, Tobaben & Honkela 2023, arXiv:2209.15596, Alg. 1).

    Example :math:`i` is active at step :math:`j` iff it is still active and

    .. math:: \mathrm{spent}_i + (\mu^{(i)}_j)^2 \le B^2 \quad (\mathcal{F}_B = \mathrm{CONT}).

    Active examples add :math:`(\mu^{(i)}_j)^2` to ``spent_sq``; inactive ones get :math:`\mu^{(i)}_j = 0`
    and stay inactive for good (module notes). Run step :math:`j` on the active examples only (multiply the
    gradients / batch mask by the mask): the output is :math:`B`-GDP under remove adjacency (Thm. 1). Pure and
    jit/scan compatible; value checks run for concrete arguments only, and under tracing a NaN/inf :math:`\mu`
    or a budget below :data:`BUDGET_MIN` drops the example(s) instead.

    Parameters
    ----------
    state:
        A :class:`GDPFilterState` for ``N`` examples.
    mu_t:
        :math:`\mu^{(i)}_j \ge 0`, shape ``(N,)`` or a scalar; it must be determined by the previous outputs
        and :math:`x_i` only (e.g. :math:`r/\sigma` for full-batch DP-GD at the current parameters).
    budget:
        GDP budget :math:`B \ge` :data:`BUDGET_MIN` (1e-100), scalar or ``(N,)``.

    Returns
    -------
    (jax.Array, GDPFilterState)
        The bool active mask :math:`S_j` of this step and the new state.

    Raises
    ------
    ValueError
        If ``state`` is malformed, shapes disagree, or (concrete values) ``mu_t < 0`` / ``budget < BUDGET_MIN``.
    """
    if not isinstance(state, GDPFilterState):
        raise ValueError(f"state must be a GDPFilterState (from gdp_filter_init); got {type(state).__name__}")
    n_shape = tuple(jnp.shape(state.spent_sq))
    if len(n_shape) != 1 or tuple(jnp.shape(state.active)) != n_shape:
        raise ValueError(f"state.spent_sq and state.active must both have shape (N,); got {n_shape} "
                         f"and {tuple(jnp.shape(state.active))}")
    for name, val in (("mu_t", mu_t), ("budget", budget)):
        shp = tuple(jnp.shape(val))
        if shp not in ((), n_shape):
            raise ValueError(f"{name} must be a scalar or have shape {n_shape} (one per example); got shape {shp}")
    if not is_traced(mu_t):
        mu_t = _mu("mu_t", mu_t)
    if not is_traced(budget):
        budget = _array("budget", budget, BUDGET_MIN)
    mu_t = jnp.broadcast_to(jnp.asarray(mu_t, jnp.float64), n_shape)
    return _filter_kernel(jnp.asarray(state.spent_sq, jnp.float64), jnp.asarray(state.active, bool), mu_t,
                          jnp.asarray(budget, jnp.float64))


@float64
def gdp_filter_epsilon(budget: Any, delta: Any, steps: int) -> np.ndarray | np.float64:
    r"""The :math:`(\varepsilon, \delta)`-DP guarantee of a :math:`B`-GDP filter run for at most ``steps`` steps
    (Koskela, Tobaben & Honkela 2023, arXiv:2209.15596, Thm. 1 and Cor. 2; remove adjacency), with the filter's
    float64 round-off added: ``gdp_epsilon(B', delta)``, :math:`B' = B(1 + (k + 4)2^{-52})`, :math:`k` = ``steps``.

    The result is the smallest :math:`\varepsilon \ge 0` with :math:`\delta_{B'}(\varepsilon) \le \delta`, where

    .. math:: \delta_B(\varepsilon) = \Phi\Big(-\frac{\varepsilon}{B} + \frac{B}{2}\Big)
              - e^{\varepsilon}\, \Phi\Big(-\frac{\varepsilon}{B} - \frac{B}{2}\Big),

    rounded up as in :func:`gdp_epsilon`. The filter compares its float64 running sum of :math:`\mu^2` with
    :math:`B^2`; after at most :math:`k` steps the exact sum of the applied :math:`\mu^2` is at most
    :math:`B^2(1 + (k + 3)2^{-53})^2` (docs/soundness.md, "GDP filter"), and :math:`B'` covers it. *Changed (stop
    75):* ``steps`` is new and required; before it the round-off was only stated (a relative 2e-10 in
    :math:`\varepsilon` at a million steps).

    Parameters
    ----------
    budget : float or array_like
        The filter's GDP budget :math:`B \ge` :data:`BUDGET_MIN` (1e-100), scalar or array.
    delta : float or array_like
        :math:`\delta \in (0, 1)`, scalar or array (broadcast against ``budget``).
    steps : int
        :math:`k`, the most steps any example went through the filter (Alg. 1's maximum number of compositions),
        an integer in ``[1, STEPS_MAX]``.

    Returns
    -------
    numpy.float64 or numpy.ndarray
        The float64 :math:`\varepsilon`, of the broadcast shape.

    Raises
    ------
    ValueError
        If ``budget`` is not finite and ``>= BUDGET_MIN``, ``delta`` is not in ``(0, 1)``, or ``steps`` is not an
        integer in ``[1, STEPS_MAX]``.
    """
    b = _array("budget", budget, BUDGET_MIN)
    k = check_int("steps", steps, low=1, high=STEPS_MAX)
    return gdp_epsilon(b * (1.0 + (k + 4) * 2.0 ** -52), delta)
