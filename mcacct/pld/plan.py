"""Host-side planning: grid and FFT sizes per mechanism and noise multiplier, batching of a sigma ladder into vmapped
calls, and the assembly of :class:`~mcacct.pld.specs.PLDResult` from kernel outputs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np

import os

from mcacct.pld.constants import (BYTES_PER_POINT, CHUNK_BUDGET, ENV_MEMORY_BUDGET, MAX_GRID, MEMORY_BUDGET_BYTES,
                                  Z_TRUNC)
from mcacct.pld.kernels import compose_query_batch, single_batch
from mcacct.pld.specs import Canonical, PLDResult
from mcacct.pld.checks import check_certifiable, check_finite, half_step


def bucket(n: int, minimum: int = 1024) -> int:
    """Smallest power of two >= n (static shapes are bucketed to limit recompilations).

    Parameters
    ----------
    n : int
        The size needed.
    minimum : int, default 1024
        Sizes below it are raised to it first.

    Returns
    -------
    int
        The smallest power of two ``>= max(n, minimum)``.
    """
    n = max(int(n), minimum)
    return 1 << (n - 1).bit_length()


def memory_budget() -> int:
    """The memory budget of one composition in bytes.

    ``$MCACCT_PLD_MEMORY_BUDGET`` if set, else :data:`~mcacct.pld.constants.MEMORY_BUDGET_BYTES` (4 GiB).

    Returns
    -------
    int
        The budget in bytes.

    Raises
    ------
    ValueError
        If the environment variable is set but is not a number of bytes ``>= 1``.
    """
    raw = os.environ.get(ENV_MEMORY_BUDGET)
    if raw is None or not raw.strip():
        return MEMORY_BUDGET_BYTES
    try:
        v = float(raw.replace("_", ""))
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v >= 1):
        raise ValueError(f"{ENV_MEMORY_BUDGET} must be a number of bytes >= 1 (e.g. 16e9); got {raw!r}")
    return int(v)


def check_grid(points: int, h: float | None, *, directions: int = 2, what: str = "the composition window",
               sigma: float | None = None) -> None:
    """Refuse, before anything is allocated, a composition that does not fit the memory budget.

    A composition on ``points`` grid points per direction (``directions`` of them) needs
    :data:`~mcacct.pld.constants.BYTES_PER_POINT` per point and direction; above :func:`memory_budget` it is
    refused, naming the size and what to change.

    Parameters
    ----------
    points : int
        Grid points per direction.
    h : float or None
        The grid spacing, named in the message (``None``: not named).
    directions : int, default 2
        Number of directions.
    what : str, default "the composition window"
        What is being allocated, for the message.
    sigma : float, optional
        Noise level, named in the message.

    Raises
    ------
    ValueError
        If the working memory is above the budget.
    """
    need = int(points) * BYTES_PER_POINT * directions
    budget = memory_budget()
    if need <= budget:
        return
    at = "" if sigma is None else f" at sigma={sigma:g}"
    src = f"${ENV_MEMORY_BUDGET}" if os.environ.get(ENV_MEMORY_BUDGET, "").strip() else \
        f"the default; ${ENV_MEMORY_BUDGET} overrides it"
    now = "" if h is None else f" (now {h:g})"
    raise ValueError(
        f"{what}{at} needs {int(points):,} grid points per direction (about {need / 2**30:.3g} GiB of working "
        f"memory for {directions} direction(s)), above the budget of {budget / 2**30:.3g} GiB ({src}); use a "
        f"larger value_discretization_interval{now}, fewer steps / compositions or a larger sigma, or raise "
        f"{ENV_MEMORY_BUDGET} (bytes)")


def _np_loss(u: float, s: np.ndarray, logp: np.ndarray) -> float:
    z = logp + s * u - 0.5 * s * s
    m = z.max()
    return float(m + math.log(np.exp(z - m).sum()))


def solver_for(c: np.ndarray) -> str:
    """The inverse-loss solver of the kernels for the sensitivities ``c``.

    Parameters
    ----------
    c : numpy.ndarray
        Sorted mixture sensitivities.

    Returns
    -------
    str
        ``"gauss"`` for one component, ``"poisson"`` for the two components ``(0, c_1)``, else ``"newton"``.
    """
    if c.size == 1:
        return "gauss"
    if c.size == 2 and c[0] == 0.0:
        return "poisson"
    return "newton"


def plan(canon: Canonical, sigma: float, h: float) -> tuple[int, int]:
    """The grid of the single-step PLD of ``canon`` at noise ``sigma``.

    Parameters
    ----------
    canon : Canonical
        The mechanism in canonical form.
    sigma : float
        Noise level.
    h : float
        Loss grid spacing.

    Returns
    -------
    n_lo : int
        Grid index of the first grid point (just below the smallest single-step loss kept).
    k : int
        Number of grid points needed.

    Raises
    ------
    ValueError
        If ``sigma`` is too small for ``h`` (a single-step loss beyond ``|loss| <= 600``, or more than
        ``MAX_GRID`` grid points), or the discretisation exceeds the memory budget.
    """
    with np.errstate(all="ignore"):  # a tiny sigma overflows here: refused below, naming sigma
        s = canon.c / sigma
        logp = np.log(canon.p)
        l_lo = _np_loss(-Z_TRUNC, s, logp)
        l_hi = _np_loss(float(s.max()) + Z_TRUNC, s, logp)
        span = (l_hi - l_lo) / h  # inf for a subnormal h: refused below, naming h
    finite = (math.isfinite(l_lo) and math.isfinite(l_hi) and max(abs(l_lo), abs(l_hi)) <= 600
              and math.isfinite(span) and span <= MAX_GRID)
    k = math.ceil(l_hi / h) - math.floor(l_lo / h) + 3 if finite else math.inf
    if k > MAX_GRID:
        raise ValueError(
            f"sigma={sigma:g} is too small for value_discretization_interval={h:g}: the "
            f"single-step privacy loss spans [{l_lo:.3g}, {l_hi:.3g}] ({k:.3g} grid points; at most "
            f"{MAX_GRID} and |loss| <= 600); increase sigma or value_discretization_interval"
        )
    # the discretisation holds grid x components arrays (the Newton inverse of a general mixture)
    check_grid(bucket(k) * max(canon.c.size, 1), h, directions=1, sigma=sigma,
               what=f"the single-step discretisation ({canon.c.size} mixture components)")
    n_lo = math.floor(l_lo / h) - 1
    return n_lo, k


def _padded_batches(n: int, size: int) -> list[np.ndarray]:
    """Index batches of constant length ``size`` covering range(n) (last one padded by repetition)."""
    out = []
    for start in range(0, n, size):
        idx = np.arange(start, min(start + size, n))
        if idx.size < size:
            idx = np.concatenate([idx, np.full(size - idx.size, idx[-1])])
        out.append(idx)
    return out


def _batch_size(n: int, budget: int) -> int:
    """Power-of-two batch size <= budget (>= 1) covering up to n items."""
    size = 1
    while size < n and 2 * size <= budget:
        size *= 2
    return size


def _reused_batch(batches: dict[tuple, set[int]] | None, key: tuple, size: int) -> int:
    """The batch size to run a group of sigmas at: the largest one already in ``batches[key]`` that is at most
    ``size``, else ``size`` (then recorded); ``size`` itself when ``batches`` is ``None``.

    A ladder search's passes meet different budget sizes (the batch follows the largest grid or window of each
    pass), and each new size was a new compilation (about 1.4 s for the discretisation on the 2-core box) of work
    that an earlier pass's program does in more calls. :func:`mcacct.pld.pld_calibrate` keeps one record per search,
    so its result depends only on its inputs. The batch size can move a value by an ulp (XLA vectorises a batch
    of one differently); every certified bound covers its arithmetic in any order, so each value is certified at
    any batch size (docs/pld.md, "Compiled shapes")."""
    if batches is None:
        return size
    done = batches.setdefault(key, set())
    fits = [s for s in done if s <= size]
    if fits:
        return max(fits)
    done.add(size)
    return size


def _two_level(sizes: Sequence[int]) -> np.ndarray:
    """Map power-of-two sizes to at most two levels: the maximum and half of it."""
    arr = np.asarray(sizes, dtype=np.int64)
    top = int(arr.max())
    return np.where(arr > top // 2, top, max(top // 2, 1024)).astype(np.int64)


def run(canon: Canonical, sigmas: np.ndarray, h: float, method: str,
         eps_q: float, delta_q: float, target: str = "delta",
         batches: dict[tuple, set[int]] | None = None) -> dict[str, np.ndarray]:
    """Evaluate delta(eps_q) and eps(delta_q) for every sigma; arrays of shape (S, 2).

    Only the ``target`` query is evaluated (``"delta"``: delta(eps_q); ``"epsilon"``:
    eps(delta_q); the other array is ``nan``), with the exponential tilt chosen for it and
    the rigorous round-off bound included. Also returns the round-off bound at the answer
    (``rb_delta`` / ``rb_epsilon``) and, for ``"epsilon"``, the smallest certifiable delta
    (``floor``).

    Sigmas are grouped by their (power-of-two) grid size ``K`` and FFT size
    ``N`` -- at most two levels each, the largest and half of it -- and are
    processed in vmapped batches of one power-of-two size, so that a ladder
    compiles few kernel shapes and small-sigma rungs do not inflate all others.

    Parameters
    ----------
    canon : Canonical
        The mechanism in canonical form.
    sigmas : numpy.ndarray
        Noise levels, shape ``(S,)``.
    h : float
        Loss grid spacing.
    method : {"connect_dots", "round_up"}
        Discretisation rule.
    eps_q, delta_q : float
        The query point.
    target : {"delta", "epsilon"}, default "delta"
        Which query to evaluate.
    batches : dict, optional
        The batch sizes compiled so far, by kernel and static shape; updated. A group runs at the largest recorded
        size that fits its budget (:func:`_reused_batch`). ``None``: each group at its budget's size.

    Returns
    -------
    dict of str to numpy.ndarray
        ``delta``, ``epsilon``, ``inf``, ``tail``, ``rb_delta``, ``rb_epsilon`` and ``floor``, each of shape
        ``(S, 2)`` (directions remove, add), and ``fft_size``, shape ``(S,)``.

    Raises
    ------
    ValueError
        If a sigma is too small for ``h``, the memory budget is exceeded, or a result is not a number
        (:func:`mcacct.pld.checks.check_finite`).
    """
    sigmas = np.asarray(sigmas, dtype=float)
    n_sig = len(sigmas)
    plans = [plan(canon, float(sg), h) for sg in sigmas]
    k_of = _two_level([bucket(k) for _, k in plans])
    logp = jnp.asarray(np.log(canon.p))
    p = jnp.asarray(canon.p)
    steps = jnp.asarray(canon.steps, dtype=jnp.int64)
    solver = solver_for(canon.c)
    s_all = canon.c[None, :] / sigmas[:, None]
    n_lo_all = np.array([pl[0] for pl in plans], dtype=np.int64)
    pmfs: list = [None] * n_sig
    infs: list = [None] * n_sig
    offs: list = [None] * n_sig
    lms: list = [None] * n_sig
    x_lo = np.zeros((n_sig, 2))
    x_hi = np.zeros((n_sig, 2))
    budget_size = _batch_size(n_sig, max(1, CHUNK_BUDGET // (4 * int(k_of.max()) * canon.c.size)))
    for k_stat in np.unique(k_of):
        members = np.flatnonzero(k_of == k_stat)
        size = _reused_batch(batches, ("single", int(k_stat), canon.c.size, method, solver), budget_size)
        for idx in _padded_batches(len(members), size):
            ids = members[idx]
            out = single_batch(jnp.asarray(s_all[ids]), logp, p, jnp.asarray(n_lo_all[ids]), steps, h,
                                K=int(k_stat), method=method, solver=solver)
            xl, xh = np.asarray(out[3]), np.asarray(out[4])
            for r, i in enumerate(ids):
                pmfs[i], infs[i], offs[i], lms[i] = out[0][r], out[1][r], out[2][r], out[5][r]
                x_lo[i], x_hi[i] = xl[r], xh[r]
    a_start = np.floor(x_lo / h).astype(np.int64) - 1
    need = np.max(np.ceil(x_hi / h).astype(np.int64) - a_start + 2, axis=1)
    n_of = _two_level([bucket(int(v)) for v in need])
    for i in np.flatnonzero(n_of == n_of.max())[:1]:
        check_grid(int(n_of[i]), h, sigma=float(sigmas[i]))  # before any composition is allocated
    res = {name: np.zeros((n_sig, 2))
           for name in ("delta", "epsilon", "inf", "tail", "rb_delta", "rb_epsilon", "floor")}
    res["fft_size"] = n_of.copy()
    budget_size = _batch_size(n_sig, max(1, CHUNK_BUDGET // (2 * int(n_of.max()))))
    for n_fft in np.unique(n_of):
        members = np.flatnonzero(n_of == n_fft)
        kmax = max(int(k_of[i]) for i in members)
        size = _reused_batch(batches, ("compose", int(n_fft), kmax, canon.steps, target == "delta"), budget_size)
        for idx in _padded_batches(len(members), size):
            ids = members[idx]
            pm = jnp.stack([jnp.pad(pmfs[i], ((0, 0), (0, kmax - pmfs[i].shape[1]))) for i in ids])
            outs = compose_query_batch(
                pm, jnp.stack([offs[i] for i in ids]), jnp.stack([infs[i] for i in ids]),
                jnp.stack([lms[i] for i in ids]), jnp.asarray(a_start[ids]), h,
                float(eps_q), float(delta_q), N=int(n_fft), steps=canon.steps, for_delta=target == "delta")
            for name, v in zip(("delta", "epsilon", "inf", "tail", "rb_delta", "rb_epsilon", "floor"), outs):
                res[name][ids] = np.asarray(v)
    check_finite(res, target, sigmas, h)
    return res


def result(canon: Canonical, sigma: float, h: float, method: str, eps_q: float,
            delta_q: float, estimate_error: bool, report: str) -> PLDResult:
    """The :class:`~mcacct.pld.specs.PLDResult` of one query at one noise level.

    Parameters
    ----------
    canon : Canonical
        The mechanism in canonical form.
    sigma : float
        Noise level.
    h : float
        Loss grid spacing.
    method : {"connect_dots", "round_up"}
        Discretisation rule.
    eps_q, delta_q : float
        The query point.
    estimate_error : bool
        Also run at ``h / 2`` and report ``2|x_h - x_{h/2}|`` of the reported quantity.
    report : {"delta", "epsilon"}
        Which quantity is queried and reported.

    Returns
    -------
    PLDResult
        The result, maxima over the two directions.

    Raises
    ------
    ValueError
        As :func:`run` and :func:`mcacct.pld.checks.check_certifiable`, and when the run at ``h / 2`` is refused
        (:func:`~mcacct.pld.checks.half_step`).
    """
    r = run(canon, np.array([sigma]), h, method, eps_q, delta_q, report)
    if report == "epsilon":
        check_certifiable(r, delta_q, np.array([sigma]))
    err = float("nan")
    if estimate_error:
        r2 = half_step(lambda: run(canon, np.array([sigma]), h / 2, method, eps_q, delta_q, report), h)
        key = "delta" if report == "delta" else "epsilon"
        x1, x2 = float(r[key][0].max()), float(r2[key][0].max())
        err = 2.0 * abs(x1 - x2) if math.isfinite(x1) and math.isfinite(x2) else float("inf")
    d, e = r["delta"][0], r["epsilon"][0]
    rb = r["rb_delta"][0] if report == "delta" else r["rb_epsilon"][0]
    if report == "delta":
        eps_out, delta_out = eps_q, float(d.max())
        e = np.array([eps_q, eps_q])
    else:
        eps_out, delta_out = float(e.max()), delta_q
        d = np.array([delta_q, delta_q])
    return PLDResult(
        epsilon=float(eps_out), delta=float(delta_out),
        epsilon_remove=float(e[0]), epsilon_add=float(e[1]),
        delta_remove=float(d[0]), delta_add=float(d[1]),
        infinity_mass=float(r["inf"][0].max()), tail_mass_bound=float(r["tail"][0].max()),
        error_estimate=err, value_discretization_interval=h, discretization=method,
        compositions=canon.steps, fft_size=int(r["fft_size"][0]),
        roundoff_bound=float(np.nanmax(rb)) if np.isfinite(rb).any() else float("nan"),
    )
