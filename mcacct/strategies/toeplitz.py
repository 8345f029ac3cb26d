r"""Error of a banded Toeplitz strategy on the prefix-sum workload, and its optimisation with optax.

DP-BandMF (Dong & Ganesh 2026, arXiv:2602.09338, §2) answers the prefix sums ``A x`` (``A`` the all-ones
lower-triangular ``n x n`` matrix) as ``A C^{-1} (C x + \sigma z)``: the noise reaching the answers is
``\sigma A C^{-1} z`` with ``C`` the lower-triangular banded Toeplitz matrix of first column
``c = (c_0, ..., c_{k-1})``. With the sensitivity of single participation, ``\|c\|`` (the largest column norm),
the error of ``C`` (per unit of ``\sigma^2``) is

.. math::
    E_{mean}(c) = \frac{\|A C^{-1}\|_F^2}{n}\, \|c\|^2, \qquad
    E_{max}(c) = \max_i \|(A C^{-1})_{i,:}\|^2\, \|c\|^2,

the objective of §7.1 of that paper (and of McKenna 2024, arXiv:2405.15913). Both are invariant to the scale
of ``c``. Lower-triangular Toeplitz matrices commute, so ``A C^{-1}`` is the lower-triangular Toeplitz matrix
with first column :math:`\beta = C^{-1} \mathbf 1`, row ``i`` has squared norm :math:`\sum_{j \le i} \beta_j^2`,
and the largest row is the last. :math:`\beta` comes from the banded recurrence :math:`C \beta = \mathbf 1`,
solved by blocks of ``L >= k`` rows (:func:`inverse_times_ones`): with :math:`T_0` the ``L x L`` diagonal block
of ``C`` and :math:`T_1` the block below it,
:math:`\beta_q = T_0^{-1} (\mathbf 1 - T_1 \beta_{q-1})`, ``ceil(n/L)`` steps of two ``L x L`` products; no
``n x n`` matrix is ever formed.

:func:`optimize_banded_toeplitz` minimises :math:`E` over ``c`` with ``k = bands`` non-zeros by optax's L-BFGS
(zoom line search) in float64, from the optimal max-error coefficients of the infinite problem,
:math:`r_j = \binom{2j}{j} 4^{-j}` (Fichtenberger, Henzinger & Upadhyay 2023, arXiv:2202.11205), and returns
``c`` with ``\|c\| = 1`` and ``c >= 0``.
"""

from __future__ import annotations

import time
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.validate import check_int
from mcacct.core.precision import float64

__all__ = ["OBJECTIVES", "OptimizedStrategy", "inverse_times_ones", "per_query_error", "strategy_error",
           "strategy_objective",
           "optimize_banded_toeplitz", "max_error_coefficients"]

OBJECTIVES = ("mean", "max")


@float64
def max_error_coefficients(bands: int) -> np.ndarray:
    r""":math:`r_j = \binom{2j}{j} 4^{-j}`, ``j < bands``: the initial point of the optimisation.

    These are the coefficients of the square root of the prefix matrix's series, :math:`(1 - x)^{-1/2}`.

    Parameters
    ----------
    bands : int
        Number of coefficients.

    Returns
    -------
    numpy.ndarray
        :math:`r_0, \dots, r_{\mathrm{bands}-1}`, starting with :math:`r_0 = 1`.
    """
    r = np.ones(int(bands))
    for j in range(1, int(bands)):
        r[j] = r[j - 1] * (2 * j - 1) / (2 * j)
    return r


def _block(c: jax.Array, length: int, offset: int) -> jax.Array:
    """``T[i, j] = c[i - j + offset]`` where ``0 <= i - j + offset < len(c)``, else 0 (``length x length``)."""
    d = jnp.arange(length)[:, None] - jnp.arange(length)[None, :] + offset
    k = c.shape[0]
    return jnp.where((d >= 0) & (d < k), c[jnp.clip(d, 0, k - 1)], 0.0)


@float64
@partial(jax.jit, static_argnames=("iterations",))
def inverse_times_ones(c: jax.Array, iterations: int) -> jax.Array:
    r""":math:`\beta = C^{-1} \mathbf 1` for the lower-triangular banded Toeplitz ``C``.

    Blocks of ``L = max(k, 64)`` rows: :math:`\beta_q = T_0^{-1}(\mathbf 1 - T_1 \beta_{q-1})`; differentiable in
    ``c``.

    Parameters
    ----------
    c : jax.Array
        First-column non-zeros of ``C``, shape ``(k,)``, with ``c_0 != 0``.
    iterations : int
        ``n``, the size of ``C`` (static).

    Returns
    -------
    jax.Array
        :math:`\beta`, shape ``(n,)``.
    """
    c = jnp.asarray(c, jnp.float64)
    n = int(iterations)
    length = max(c.shape[0], 64)
    nblk = -(-n // length)
    t0 = _block(c, length, 0)
    t1 = _block(c, length, length)
    inv0 = jax.scipy.linalg.solve_triangular(t0, jnp.eye(length), lower=True)
    ones = jnp.ones(length)

    def step(prev, _):
        cur = inv0 @ (ones - t1 @ prev)
        return cur, cur

    _, blocks = jax.lax.scan(step, jnp.zeros(length), None, length=nblk)
    return blocks.reshape(-1)[:n]


@float64
def per_query_error(c: jax.Array, iterations: int) -> jax.Array:
    r"""Squared error of each prefix-sum query per unit noise, before the sensitivity factor.

    Parameters
    ----------
    c : jax.Array
        First-column non-zeros of ``C``.
    iterations : int
        ``n``.

    Returns
    -------
    jax.Array
        :math:`\sum_{j \le i} \beta_j^2` for every query ``i``, shape ``(n,)``.
    """
    return jnp.cumsum(inverse_times_ones(c, iterations) ** 2)


@float64
def strategy_objective(c: jax.Array, iterations: int, objective: str = "mean") -> jax.Array:
    """The error of :func:`strategy_error` as a differentiable JAX function of ``c`` (no validation).

    Parameters
    ----------
    c : jax.Array
        First-column non-zeros of ``C``.
    iterations : int
        ``n``.
    objective : {"mean", "max"}, default "mean"
        Which error.

    Returns
    -------
    jax.Array
        The error (scalar).
    """
    beta2 = inverse_times_ones(c, iterations) ** 2
    err = jnp.mean(jnp.cumsum(beta2)) if objective == "mean" else jnp.sum(beta2)
    return err * jnp.sum(c ** 2)


@float64
def strategy_error(c_col, iterations: int, objective: str = "mean") -> float:
    """The error :math:`E_{mean}` (or :math:`E_{max}`) of the strategy ``c_col`` over ``n = iterations`` steps.

    ``mean_i ||(A C^{-1})_i||^2 ||c||^2`` (or the max over ``i``). ``bands = 1`` (``c = (1,)``) gives
    ``(n + 1) / 2`` (mean) and ``n`` (max).

    Parameters
    ----------
    c_col : array_like
        First-column non-zeros of ``C``: finite, ``c_col[0] != 0``, at most ``n`` entries (``C`` is ``n x n``).
    iterations : int
        ``n >= 1``.
    objective : {"mean", "max"}, default "mean"
        Which error.

    Returns
    -------
    float
        The error.

    Raises
    ------
    ValueError
        If an argument is out of range, including ``c_col`` with more than ``n`` entries.
    """
    n = check_int("iterations", iterations, low=1)
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}")
    c = np.asarray(c_col, np.float64).reshape(-1)
    if c.size == 0 or not np.all(np.isfinite(c)) or c[0] == 0.0:
        raise ValueError(f"c_col must be finite with c_col[0] != 0; got {c_col!r}")
    if c.size > n:  # C is n x n: later entries would not enter C, yet would count in ||c||
        raise ValueError(f"c_col must have at most iterations = {n} entries; got {c.size}")
    return float(strategy_objective(jnp.asarray(c), n, objective))


class OptimizedStrategy(NamedTuple):
    """Result of :func:`optimize_banded_toeplitz`: ``c_col`` (``||c|| = 1``, non-negative), its ``error``,
    the L-BFGS ``steps`` taken and the wall ``seconds`` (compilation included)."""
    c_col: tuple[float, ...]
    error: float
    iterations: int
    bands: int
    objective: str
    steps: int
    seconds: float


def _tree_norm(tree):
    import optax
    norm = getattr(optax.tree_utils, "tree_norm", None) or optax.tree_utils.tree_l2_norm  # renamed in optax 0.2.5
    return norm(tree)


@partial(jax.jit, static_argnames=("iterations", "objective", "max_steps", "squared"))
def _lbfgs(x0: jax.Array, iterations: int, objective: str, max_steps: int, tol: float, squared: bool):
    import optax

    def f(x):
        c = x ** 2 if squared else x
        return strategy_objective(c, iterations, objective)

    scale = f(x0)
    fn = lambda x: f(x) / scale  # noqa: E731  (well-scaled values for the line search)
    opt = optax.lbfgs()
    vg = optax.value_and_grad_from_state(fn)

    def body(carry):
        x, state = carry
        value, grad = vg(x, state=state)
        updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=fn)
        return optax.apply_updates(x, updates), state

    def cond(carry):
        _, state = carry
        count = optax.tree_utils.tree_get(state, "count")
        grad = optax.tree_utils.tree_get(state, "grad")
        return (count == 0) | ((count < max_steps) & (_tree_norm(grad) >= tol))

    x, state = jax.lax.while_loop(cond, body, (x0, opt.init(x0)))
    return x, optax.tree_utils.tree_get(state, "count")


@float64
def optimize_banded_toeplitz(iterations: int, bands: int, objective: str = "mean", max_steps: int = 500,
                             tol: float = 1e-12) -> OptimizedStrategy:
    """The banded Toeplitz strategy with ``bands`` non-zeros that minimises :math:`E_{mean}` (or :math:`E_{max}`).

    Over ``n = iterations`` steps: L-BFGS (optax) from :func:`max_error_coefficients` on ``c`` itself; if the
    optimum has a negative entry, again on ``c = x^2`` (non-negative by construction) from the square roots of
    ``|c|``, and the better non-negative point is returned.

    Parameters
    ----------
    iterations : int
        ``n >= 1``.
    bands : int
        Number of non-zeros, in ``[1, iterations]``.
    objective : {"mean", "max"}, default "mean"
        Which error.
    max_steps : int, default 500
        Most L-BFGS steps per run (``>= 1``).
    tol : float, default 1e-12
        Bound on the gradient norm of the objective divided by its initial value.

    Returns
    -------
    OptimizedStrategy
        ``c_col`` normalised to ``||c|| = 1``, its error and the steps taken.

    Raises
    ------
    ValueError
        If ``iterations < 1``, ``bands`` is not in ``[1, iterations]``, or ``objective`` is unknown.
    """
    n = check_int("iterations", iterations, low=1)
    k = check_int("bands", bands, low=1, high=n)
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}; got {objective!r}")
    check_int("max_steps", max_steps, low=1)
    t0 = time.perf_counter()
    if k == 1:
        c, steps = np.ones(1), 0
    else:
        x, steps = _lbfgs(jnp.asarray(max_error_coefficients(k)), n, objective, int(max_steps), float(tol), False)
        c = np.asarray(x)
        if np.any(c < 0):
            x2, steps2 = _lbfgs(jnp.sqrt(jnp.abs(x)) + 1e-8, n, objective, int(max_steps), float(tol), True)
            c = np.asarray(x2) ** 2
            steps = int(steps) + int(steps2)
    c = c / np.linalg.norm(c)
    err = strategy_error(c, n, objective)
    return OptimizedStrategy(tuple(float(v) for v in c), err, n, k, objective, int(steps), time.perf_counter() - t0)
