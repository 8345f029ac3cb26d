r"""The privacy-loss recursions: ``L(y) = ln P(y)/Q(y)`` from the per-iteration terms ``ell``
(Dong & Ganesh 2026, arXiv:2602.09338, §5 and §6.2).

Every function takes arrays and plain numbers (``min_sep``, ``sampling_prob``, ``warm_start``) and imports
no scheme; the schemes (:mod:`mcacct.schemes`) call them with their fields.

Write :math:`\ell_i = (\langle c^{(i)}, y_{i:i+b} \rangle - \|c^{(i)}\|^2/2)/\sigma^2` for the log
likelihood ratio of one participation at iteration ``i`` (column ``i`` of ``C``, truncated at row ``n``).
With :math:`f_i` the likelihood ratio of iterations ``i..n`` given that the example is available at ``i``,
Theorem 5.1 gives

.. math::
    f_i = (1 - p)\, f_{i+1} + p\, e^{\ell_i} f_{i+b}, \qquad f_i = 1 \ (i > n),

so ``L = ln f_1`` for the cold start (Alg. 1) and, for the warm start (Alg. 2),

.. math::  L = \ln \frac{f_1 + p \sum_{i=2}^{b} f_i}{1 + (b - 1) p}.

The recursion runs by blocks of ``b`` iterations, each solved in closed form given the next block: in
linear space with a per-block log scale and an exact log-space fallback (``"linear"``, the CPU default below 64
samples per call), or in log space (``"blocked"``, the accelerator default); ``"stepwise"`` runs it as written
in linear space, one iteration at a time, with an exact power-of-two rescale per block (the CPU default from 64
samples per call, :mod:`mcacct.kernels.stepwise`); ``"scan"`` is the plain ``n``-step log-space recursion with a ring buffer of the last ``b`` values. All are ``O(n)`` per sample after the sliding dot
products, which cost ``O(n b)`` directly, ``O(n log n)`` by FFT and ``O(n)`` for constant ``c_col`` by
prefix sums. For ``b = 1`` the recursion
factorises: :math:`L = \sum_i \ln(1 - p + p e^{\ell_i})`.

The algorithms live in :mod:`mcacct.kernels.recursion_log` and :mod:`mcacct.kernels.recursion_linear` (and
:mod:`mcacct.kernels.stepwise`); this module chooses among them and composes them into losses.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from mcacct.kernels.bound import remove_loss_bound_from_sums_t
from mcacct.kernels.control import rare_cond
from mcacct.kernels.shortcuts import remove_losses_with_skip
from mcacct.kernels.sliding import column_sq_norms, sliding_dot_t
from mcacct.kernels.stepwise import STEPWISE_MIN_LANES, range_floor, stepwise_first_values
from mcacct.core.validate import RECURSIONS, check_bool, check_int, check_prob
from mcacct.core.platform import target_platform
from mcacct.kernels.recursion_log import (assoc_first_values, blocked_first_values, p_one_first_values,
                                          scan_first_values)
from mcacct.kernels.recursion_linear import (linear_applicable, linear_block_finish, linear_block_init,
                                             linear_block_step, linear_first_values, poisson_log_ratio_linear)

__all__ = ["RECURSIONS", "linear_block_init", "linear_block_step", "linear_block_finish", "start_log_ratio",
           "linear_applicable", "range_floor", "auto_recursion", "recursion_log_ratio", "recursion_log_ratio_t",
           "ladder_losses_t", "ladder_losses_from_sums_t", "shift_mixture_log_ratio",
           "scan_first_values", "blocked_first_values", "linear_first_values", "poisson_log_ratio_linear"]


def _with_fallback(fast, ok, exact, *operands):
    """``fast`` if every sample is ``ok``, else the whole batch recomputed by ``exact(*operands)`` (never mixed;
    :func:`~mcacct.kernels.control.rare_cond`, so that a vmapped batch runs ``exact`` only when needed)."""
    return rare_cond(~jnp.all(ok), lambda fast, *ops: exact(*ops), lambda fast, *ops: fast, fast, *operands)


def auto_recursion(lead: tuple[int, ...]) -> str:
    """What ``"auto"`` resolves to for a batch of shape ``lead`` (static).

    On CPU ``"stepwise"`` from :data:`mcacct.kernels.stepwise.STEPWISE_MIN_LANES` samples on, else ``"linear"``;
    ``"blocked"`` elsewhere.

    Parameters
    ----------
    lead : tuple of int
        The batch shape (the terms' shape without the time axis).

    Returns
    -------
    str
        ``"stepwise"``, ``"linear"`` or ``"blocked"``.
    """
    if target_platform() != "cpu":
        return "blocked"
    return "stepwise" if math.prod(lead) >= STEPWISE_MIN_LANES else "linear"


def recursion_log_ratio_t(ell_t: jax.Array, min_sep: int, sampling_prob, warm_start: bool,
                          recursion: str = "auto") -> jax.Array:
    r"""The kernel of Theorem 5.1: ``ln P(y)/Q(y)`` from the time-major per-iteration terms ``ell_t``.

    For b-min-sep sampling with ``min_sep`` (static) and ``sampling_prob`` ``p``. Every fast path (``"linear"``,
    ``"blocked"``) certifies its own arithmetic per sample and recomputes the whole batch with the exact log-space
    scan where it cannot, so the result is never silently wrong.

    Parameters
    ----------
    ell_t : jax.Array
        The terms :math:`\ell_i`, time-major, shape ``(n, ...)`` (float64 or float32).
    min_sep : int
        ``b``, ``>= 1`` (static).
    sampling_prob : float or jax.Array
        ``p`` in ``(0, 1]``: a Python number or a traced scalar (one compilation serves every ``p``); ``p = 1``
        is handled exactly.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).
    recursion : str, optional
        One of ``RECURSIONS``, as in :func:`recursion_log_ratio` (default ``"auto"``).

    Returns
    -------
    jax.Array
        ``ln P(y)/Q(y)``, shape ``(...)``, the dtype of ``ell_t``.

    Raises
    ------
    ValueError
        If ``recursion`` is not one of ``RECURSIONS``.
    """
    if recursion not in RECURSIONS:
        raise ValueError(f"recursion must be one of {RECURSIONS}; got {recursion!r}")
    b = int(min_sep)
    dtype = ell_t.dtype
    static_p = isinstance(sampling_prob, (int, float))
    p64 = jnp.asarray(sampling_prob, jnp.float64)
    log_p = jnp.log(p64).astype(dtype)
    log_q64 = math.log1p(-sampling_prob) if static_p and sampling_prob < 1.0 else (
        -math.inf if static_p else jnp.log1p(-p64))
    log_q = jnp.asarray(log_q64, dtype)
    lead = ell_t.shape[1:]
    if recursion == "auto":
        recursion = auto_recursion(lead)
    if b == 1:
        exact = lambda e, lp, lq: jnp.sum(jnp.logaddexp(lq, lp + e), axis=0)  # noqa: E731
        if recursion in ("linear", "stepwise") and dtype == jnp.float64:  # at b = 1 both are this product form
            fast, ok = poisson_log_ratio_linear(ell_t, log_p, p64)
            return _with_fallback(fast, ok, exact, ell_t, log_p, log_q)
        return exact(ell_t, log_p, log_q)
    exact_scan = lambda e, lp, lq: scan_first_values(e, b, lp, lq)  # noqa: E731
    scan = lambda: exact_scan(ell_t, log_p, log_q)  # noqa: E731

    def general():  # p < 1
        if recursion == "linear":
            applicable = linear_applicable(b, log_q64, dtype)
            if applicable is False:
                return scan()

            def linear():
                lq = log_q64 if static_p else jnp.where(applicable, log_q64, 0.0)
                fast, ok = linear_first_values(ell_t, b, log_p, lq)
                return _with_fallback(fast, ok, exact_scan, ell_t, log_p, log_q)
            return linear() if applicable is True else jax.lax.cond(applicable, linear, scan)
        if recursion == "stepwise":
            fast, ok = stepwise_first_values(ell_t, b, log_p, log_q)
            return _with_fallback(fast, ok, exact_scan, ell_t, log_p, log_q)
        if recursion == "blocked":
            fast, ok = blocked_first_values(ell_t, b, log_p, log_q)
            return _with_fallback(fast, ok, exact_scan, ell_t, log_p, log_q)
        if recursion == "assoc":
            return assoc_first_values(ell_t, b, log_p, log_q)
        return scan()

    if recursion == "scan" or recursion == "assoc":
        f_first = general()  # both are exact at p = 1 (log(1 - p) = -inf is handled by logaddexp)
    elif static_p:
        f_first = p_one_first_values(ell_t, b, log_p) if sampling_prob >= 1.0 else general()
    else:
        f_first = jax.lax.cond(p64 >= 1.0, lambda: p_one_first_values(ell_t, b, log_p), general)
    return start_log_ratio(f_first, sampling_prob, warm_start)


def start_log_ratio(f_first: jax.Array, sampling_prob, warm_start: bool) -> jax.Array:
    r"""``L`` from ``log f_1..log f_b`` (axis 0).

    :math:`\ln f_1` for the cold start, and for the warm start (Alg. 2)
    :math:`\ln\big((f_1 + p \sum_{i=2}^{b} f_i) / (1 + (b - 1) p)\big)`.

    Parameters
    ----------
    f_first : jax.Array
        ``(b, ...)``: :math:`\ln f_1, \dots, \ln f_b`.
    sampling_prob : float or jax.Array
        ``p`` in ``(0, 1]``.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).

    Returns
    -------
    jax.Array
        ``L``, shape ``(...)``, the dtype of ``f_first``.
    """
    if not warm_start:
        return f_first[0]
    b = f_first.shape[0]
    dtype = f_first.dtype
    p64 = jnp.asarray(sampling_prob, jnp.float64)
    shape_t = (b,) + (1,) * (f_first.ndim - 1)
    w = jnp.where(jnp.arange(b) == 0, 0.0, jnp.log(p64)).astype(dtype).reshape(shape_t)
    norm = jnp.log1p((b - 1) * p64).astype(dtype)
    return jax.scipy.special.logsumexp(f_first + w, axis=0) - norm


def recursion_log_ratio(ell: jax.Array, min_sep: int, sampling_prob, warm_start: bool,
                        recursion: str = "auto") -> jax.Array:
    r"""The recursion of Theorem 5.1 on the per-iteration terms ``ell``, batch-first.

    :func:`recursion_log_ratio_t` along the last axis.

    Parameters
    ----------
    ell : jax.Array
        The terms :math:`\ell_i`, shape ``(..., n)``.
    min_sep : int
        ``b``, ``>= 1`` (static).
    sampling_prob : float or jax.Array
        ``p`` in ``(0, 1]``, a Python number or a traced scalar.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).
    recursion : str, optional
        One of:

        - ``"linear"``: blocks of ``b`` iterations in linear space with a per-block log scale, one ``exp``
          per iteration (:func:`linear_first_values`); wherever its arithmetic could have lost precision
          (a block sum or value within ``1/eps`` of the smallest normal number, or a suffix sum that fails the
          a-posteriori consistency check) the whole batch is recomputed by ``"scan"``, so the result is never
          silently wrong. The CPU default.
        - ``"scan"``: ``n`` sequential log-space steps (``logaddexp``), no range caveat.
        - ``"blocked"``: ``ceil(n/b)`` sequential log-space block steps, two transcendentals per iteration;
          recomputed by ``"scan"`` wherever a suffix sum underflowed. The accelerator default.
        - ``"assoc"``: blocks by an associative log-space scan, ``O(b log b)`` per block.
        - ``"stepwise"``: ``n`` linear-space steps (one ``exp`` and three flops per iteration) with an exact
          power-of-two rescale per block (:func:`mcacct.kernels.stepwise.stepwise_first_values`); recomputed by
          ``"scan"`` wherever a value left the range. The CPU default from 64 samples per call.
        - At ``b = 1`` (:math:`f_1 = \prod_i (1 - p + p e^{\ell_i})`) ``"linear"`` and ``"stepwise"`` take the
          product form in float64 (:func:`poisson_log_ratio_linear`; CPU: ~2.3 against ~10 ns per term for
          ``logaddexp``).
        - ``"auto"`` (default): :func:`auto_recursion`: ``"stepwise"`` on CPU from 64 samples per call,
          ``"linear"`` below, ``"blocked"`` elsewhere.

    Returns
    -------
    jax.Array
        ``ln P(y)/Q(y)`` with the leading shape of ``ell``.

    Raises
    ------
    ValueError
        If ``recursion`` is not one of ``RECURSIONS``.
    """
    if recursion not in RECURSIONS:
        raise ValueError(f"recursion must be one of {RECURSIONS}; got {recursion!r}")
    return recursion_log_ratio_t(jnp.moveaxis(ell, -1, 0), min_sep, sampling_prob, warm_start, recursion)


def ladder_losses_t(m_t: jax.Array, z_t: jax.Array, sigmas: jax.Array, min_sep: int, sampling_prob,
                    warm_start: bool, c_col: tuple[float, ...], dot_method: str = "auto",
                    recursion: str = "auto") -> jax.Array:
    r"""Privacy losses of both directions for every noise multiplier of a ladder on one set of draws.

    :func:`ladder_losses_from_sums_t` of the sliding sums :math:`s^m = \langle c, m \rangle`,
    :math:`s^z = \langle c, z\rangle` of ``m_t`` (output mean ``C x``) and ``z_t`` (standard normal noise).

    Parameters
    ----------
    m_t : jax.Array
        The output mean ``C x``, time-major ``(n, B)``.
    z_t : jax.Array
        Standard normal noise, time-major ``(n, B)``.
    sigmas : array_like
        ``(J,)`` noise multipliers, ``> 0``.
    min_sep : int
        ``b``, ``>= 1`` (static).
    sampling_prob : float or jax.Array
        ``p`` in ``(0, 1]``.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).
    c_col : tuple of float
        The strategy's column.
    dot_method : str, optional
        How the sliding sums are computed (:func:`mcacct.kernels.sliding.sliding_dot_t`; default ``"auto"``).
    recursion : str, optional
        The recursion, as in :func:`recursion_log_ratio` (default ``"auto"``).

    Returns
    -------
    jax.Array
        ``(J, 2, B)``: ``[:, 0]`` ``ln P/Q`` of the remove outputs, ``[:, 1]`` ``ln Q/P`` of the add outputs.
    """
    return ladder_losses_from_sums_t(sliding_dot_t(m_t, c_col, dot_method), sliding_dot_t(z_t, c_col, dot_method),
                                     sigmas, min_sep, sampling_prob, warm_start, c_col, recursion)


def ladder_losses_from_sums_t(s_m: jax.Array, s_z: jax.Array, sigmas: jax.Array, min_sep: int, sampling_prob,
                              warm_start: bool, c_col: tuple[float, ...], recursion: str = "auto",
                              add_bound: float | None = None, remove_skip=None) -> jax.Array:
    r"""Both directions' losses for every noise multiplier of a ladder from the sliding sums of one set of draws.

    The sums are :math:`s^m_i = \langle c^{(i)}, m \rangle` (the output mean ``C x``) and
    :math:`s^z_i = \langle c^{(i)}, z\rangle` (standard normal noise). By linearity, for each :math:`\sigma_j`

    .. math::
        \ell^{rem}_i = (s^m_i + \sigma_j s^z_i - \|c^{(i)}\|^2/2)/\sigma_j^2, \qquad
        \ell^{add}_i = (\sigma_j s^z_i - \|c^{(i)}\|^2/2)/\sigma_j^2,

    the terms of ``y = m + sigma_j z`` (``y ~ P``) and ``y = sigma_j z`` (``y ~ Q``); only the recursion runs
    per candidate (``lax.map`` over the ladder, so each candidate keeps its exact fallback).

    The two skips of provably zero contributions (:mod:`mcacct.kernels.shortcuts`): with ``add_bound`` the add
    recursions do not run and every add loss is that bound. With ``remove_skip`` every sample's remove loss is
    first bounded, :math:`U \ge L` (:func:`mcacct.kernels.bound.remove_loss_bound_from_sums_t`); a sample whose
    ``U`` is at most every candidate's threshold keeps ``U`` (its contribution is provably 0); where any sample of
    the batch does not, the exact recursions run for the batch (the same program and bits as without the skip) and
    those samples take their exact losses.

    Parameters
    ----------
    s_m, s_z : jax.Array
        The sliding sums, time-major ``(n, B)``.
    sigmas : array_like
        ``(J,)`` noise multipliers, ``> 0``.
    min_sep : int
        ``b``, ``>= 1`` (static).
    sampling_prob : float or jax.Array
        ``p`` in ``(0, 1]``.
    warm_start : bool
        Warm start (Alg. 2) rather than cold start (Alg. 1).
    c_col : tuple of float
        The strategy's column.
    recursion : str, optional
        The recursion, as in :func:`recursion_log_ratio` (default ``"auto"``).
    add_bound : float or None, optional
        Static; :func:`~mcacct.kernels.shortcuts.add_skip_bound`. If given, every add loss is this bound.
    remove_skip : RemoveSkip or None, optional
        A :class:`~mcacct.kernels.shortcuts.RemoveSkip` of per-candidate arrays; used for float64 sums with a
        single batch axis ``B``.

    Returns
    -------
    jax.Array
        ``(J, 2, B)``: ``[:, 0]`` is ``ln P/Q`` of the remove outputs, ``[:, 1]`` is ``ln Q/P`` of the add outputs.
    """
    n = s_z.shape[0]
    dtype = s_z.dtype
    half_sq = jnp.asarray(0.5 * column_sq_norms(c_col, n), dtype).reshape((n,) + (1,) * (s_z.ndim - 1))

    def rem_one(s_m, s_z, sig, half_sq=half_sq):
        sig = sig.astype(dtype)
        return recursion_log_ratio_t((s_m + (sig * s_z - half_sq)) * (1.0 / sig**2), min_sep, sampling_prob,
                                     warm_start, recursion)

    def add_one(s_z, sig):
        sig = sig.astype(dtype)
        return -recursion_log_ratio_t((sig * s_z - half_sq) * (1.0 / sig**2), min_sep, sampling_prob, warm_start,
                                      recursion)

    sigmas = jnp.asarray(sigmas)
    if remove_skip is None or s_z.ndim != 2 or dtype != jnp.float64:
        def one(sig):
            rem = rem_one(s_m, s_z, sig)
            return jnp.stack([rem, jnp.full_like(rem, add_bound) if add_bound is not None else add_one(s_z, sig)])

        return jax.lax.map(one, sigmas)
    rem = _remove_with_skip(s_m, s_z, half_sq, sigmas, remove_skip, min_sep, float(sampling_prob), warm_start,
                            lambda sm, sz, sigs, hs: jax.lax.map(lambda sig: rem_one(sm, sz, sig, hs), sigs))
    add = (jnp.full_like(rem, add_bound) if add_bound is not None
           else jax.lax.map(lambda sig: add_one(s_z, sig), sigmas))
    return jnp.stack([rem, add], axis=1)


def _remove_with_skip(s_m, s_z, half_sq, sigmas, remove_skip, min_sep, p, warm_start, exact):
    """``(J, B)`` remove losses: ``U`` where every candidate's ``U`` is at most its threshold, else settled
    (:func:`~mcacct.kernels.shortcuts.remove_losses_with_skip`): a few samples on a narrower batch, or ``exact`` for
    the whole batch, at its full width (the same program as without the skip, so the same bits)."""
    u = remove_loss_bound_from_sums_t(s_m, s_z, half_sq, sigmas, remove_skip.term_errors, min_sep, p, warm_start)
    return remove_losses_with_skip(u, remove_skip, exact, (s_m, s_z), (sigmas, half_sq))


def shift_mixture_log_ratio(ell: jax.Array, period: int, sampling_prob: float, random_phase: bool) -> jax.Array:
    r"""``ln P/Q`` of a shift mixture from the per-iteration terms ``ell``.

    Opportunity ``t`` contributes :math:`g_t = \ln(1 - q + q e^{\ell_t})` (:math:`g_t = \ell_t` for
    ``q = 1``); class ``s`` sums :math:`g_t` over ``t = s (mod period)``; the result is the log-mean-exp over
    the classes (``random_phase``) or the class-0 sum.

    Parameters
    ----------
    ell : jax.Array
        The terms :math:`\ell_t`, shape ``(..., n)``.
    period : int
        Number of classes, ``>= 1``.
    sampling_prob : float
        ``q`` in ``(0, 1]``.
    random_phase : bool
        Mix over the classes (log-mean-exp) rather than take class 0.

    Returns
    -------
    jax.Array
        ``ln P/Q``, shape ``(...)``, the dtype of ``ell``.

    Raises
    ------
    ValueError
        If ``period``, ``sampling_prob`` or ``random_phase`` is out of range or of the wrong type, or ``ell`` is a
        scalar.
    """
    period = check_int("period", period, low=1)
    sampling_prob = check_prob("sampling_prob", sampling_prob)
    random_phase = check_bool("random_phase", random_phase)
    if getattr(ell, "ndim", 1) < 1:
        raise ValueError(f"ell must have shape (..., n); got a scalar {ell!r}")
    n = ell.shape[-1]
    dtype = ell.dtype
    q = float(sampling_prob)
    if q >= 1.0:
        g = ell
    else:
        g = jnp.logaddexp(jnp.asarray(math.log1p(-q), dtype), jnp.asarray(math.log(q), dtype) + ell)
    m = -(-n // period)
    pad = [(0, 0)] * (ell.ndim - 1) + [(0, m * period - n)]
    g = jnp.pad(g, pad).reshape(ell.shape[:-1] + (m, period))  # padded slots are "no opportunity": 0
    per_class = jnp.sum(g, axis=-2)
    if not random_phase:
        return per_class[..., 0]
    return jax.scipy.special.logsumexp(per_class, axis=-1) - jnp.asarray(math.log(period), dtype)

