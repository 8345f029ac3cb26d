r"""Standard normal draws in float64 by exact inversion: the noise sampler of every mcacct kernel.

A draw is :math:`z = \pm\,\Phi^{-1}(u)` with an independent fair sign and
:math:`u = (k + \tfrac12)\, 2^{-53}`, ``k`` uniform on ``{0, ..., 2^52 - 1}``: of the top 53 bits of a
64-bit word from ``jax.random.bits`` (threefry by default), one gives the sign and 52 give ``k``. So ``u``
is uniform on the ``2^52`` midpoints of the cells of width ``2^-53`` that tile ``(0, 1/2)``; every ``u`` is
exact in float64, lies in ``[2^-54, 1/2 - 2^-54]`` and never reaches 0 or 1/2, and the law of ``z`` is
exactly symmetric about 0, with ``|z| <= 8.2924`` (the value at ``u = 2^-54``) on both sides. (An earlier
construction, ``(k + 1/2) 2^-53`` over all of ``(0, 1)``, rounded to 1.0 at the largest ``k`` and was
asymmetric: +8.13 against -8.29.)

:math:`\Phi^{-1}` is Wichura's rational approximation (Algorithm AS 241, ``PPND16``, Applied Statistics
37, 1988): a degree-7/7 rational function of :math:`0.180625 - q^2` (:math:`q = u - 1/2`) for
:math:`|q| \le 0.425`, and of :math:`r - 1.6` or :math:`r - 5` with :math:`r = \sqrt{-\ln \min(u, 1-u)}`
in the tails; its relative error is about ``1e-16`` (tested against an mpmath reference). The sampler's
tail takes :math:`\ln u` from :func:`log_f64`: XLA's float64 ``log`` is a scalar call on CPU.

How far this law is from the exact Gaussian, and why that is bounded, is in
:mod:`mcacct.engine.systematic` (a coupling with an exact uniform) and ``docs/soundness.md``.

Why not ``jax.random.normal``: it inverts through ``erfinv``, whose float64 form evaluates three
polynomials of degree ~20 plus a ``log``, which on CPU costs more than the rational functions here (the
measurement: ``benchmarks/profile_stages.py``). The law is the same up to float64 rounding.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.kernels.control import rare_cond
from mcacct.kernels.threefry import counter_bits, counters_supported, jax_block_words, key_words

__all__ = ["standard_normal", "standard_normal_lanes", "standard_normal_columns", "columns_supported",
           "normal_from_bits", "lane_major_words", "sign_and_cell", "ndtri", "ndtri_lower_numpy", "log_f64"]

# Wichura (1988), AS 241 PPND16: numerator / denominator coefficients, lowest degree first
_CENTRAL_NUM = (3.3871328727963666080e0, 1.3314166789178437745e2, 1.9715909503065514427e3,
                1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
                3.3430575583588128105e4, 2.5090809287301226727e3)
_CENTRAL_DEN = (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
                2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
                5.2264952788528545610e3)
_MID_NUM = (1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
            3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
            2.27238449892691845833e-2, 7.74545014278341407640e-4)
_MID_DEN = (1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
            1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
            1.05075007164441684324e-9)
_FAR_NUM = (6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
            2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
            2.71155556874348757815e-5, 2.01033439929228813265e-7)
_FAR_DEN = (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
            7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7,
            2.04426310338993978564e-15)


# ln 2 = _LN2_HI + _LN2_LO: _LN2_HI has 32 significant bits, so e * _LN2_HI is exact for |e| < 2^21
_LN2_HI = 0.6931471803691238
_LN2_LO = 1.9082149292705877e-10
_ATANH_COEFFS = tuple(2.0 / (2 * k + 1) for k in range(1, 12))   # 2 atanh(s) = 2s + sum_k 2 s^(2k+1)/(2k+1)


def log_f64(u: jax.Array) -> jax.Array:
    r""":math:`\ln u` for positive normal float64 ``u``, from vectorisable operations.

    XLA's float64 ``log`` on CPU is a scalar library call, several times slower per element than this function or
    XLA's (vectorised) float64 ``exp``. With :math:`u = m\,2^e`, :math:`m \in [\sqrt2/2, \sqrt2)` read from the bits,
    :math:`f = m - 1` (exact) and :math:`s = f/(2+f)`:

    .. math::

        \ln u = e \ln 2 + \ln\frac{1+s}{1-s} = e \ln 2 + 2s + \sum_{k=1}^{11} \frac{2 s^{2k+1}}{2k+1},

    the series' exact Taylor coefficients, :math:`|s| \le 3 - 2\sqrt2 < 0.1716` (the truncation is below
    :math:`10^{-17}` relative), and :math:`\ln 2` split in two so that :math:`e \ln 2` adds no rounding. Within
    1 ulp of the correctly rounded value (relative error at most 1.8e-16 against mpmath on 3,000 cells;
    ``tests/kernels/test_normal.py`` checks it on every cell kind the sampler meets).

    Parameters
    ----------
    u : jax.Array
        float64, positive and normal (the sampler's ``u`` lies in ``[2^-54, 1/2]``).

    Returns
    -------
    jax.Array
        float64 :math:`\ln u`, the shape of ``u``.
    """
    bits = jax.lax.bitcast_convert_type(u, jnp.uint64)
    e = (bits >> 52).astype(jnp.int64) - 1023
    m = jax.lax.bitcast_convert_type((bits & ((1 << 52) - 1)) | (1023 << 52), jnp.float64)   # in [1, 2)
    high = m > 1.4142135623730951
    m = jnp.where(high, 0.5 * m, m)
    e = jnp.where(high, e + 1, e).astype(jnp.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    return e * _LN2_HI + ((s * z * _horner(_ATANH_COEFFS, z) + e * _LN2_LO) + 2.0 * s)


def _horner(coeffs: tuple[float, ...], x: jax.Array) -> jax.Array:
    acc = jnp.full_like(x, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc = acc * x + c
    return acc


def ndtri(u: jax.Array) -> jax.Array:
    r""":math:`\Phi^{-1}(u)` for ``u`` in ``(0, 1)`` (float64), AS 241.

    Parameters
    ----------
    u : array_like
        Probabilities in ``(0, 1)``, converted to float64; ``u`` outside gives NaN/inf.

    Returns
    -------
    jax.Array
        float64 standard normal quantiles, the shape of ``u``.
    """
    u = jnp.asarray(u, jnp.float64)
    q = u - 0.5
    r2 = 0.180625 - q * q
    central = q * _horner(_CENTRAL_NUM, r2) / _horner(_CENTRAL_DEN, r2)
    r = jnp.sqrt(-jnp.log(jnp.minimum(u, 1.0 - u)))
    mid, far = r - 1.6, r - 5.0
    tail = jnp.where(r <= 5.0, _horner(_MID_NUM, mid) / _horner(_MID_DEN, mid),
                     _horner(_FAR_NUM, far) / _horner(_FAR_DEN, far))
    return jnp.where(jnp.abs(q) <= 0.425, central, jnp.where(q < 0, -tail, tail))


def standard_normal(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float64) -> jax.Array:
    """``N(0, 1)`` draws of ``shape`` by exact inversion.

    :func:`normal_from_bits` of 64-bit words from ``jax.random.bits``, then cast to ``dtype`` (a float32 kernel
    thus rounds float64 draws; it never draws float32 normals, whose tails are cut near 5.4 sd). Pure function of
    ``key``; the same key gives the same draws on every backend.

    Parameters
    ----------
    key : jax.Array
        A JAX PRNG key.
    shape : tuple of int
        Shape of the draws.
    dtype : dtype, optional
        Result dtype (default float64).

    Returns
    -------
    jax.Array
        Draws of ``shape`` and ``dtype``.
    """
    return normal_from_bits(jax.random.bits(key, shape, jnp.uint64), far_when_needed=True).astype(dtype)


def standard_normal_lanes(key: jax.Array, shape: tuple[int, int], dtype=jnp.float64) -> jax.Array:
    r"""``standard_normal(key, shape).T``, bit for bit, drawn in that (lane-major) layout.

    A kernel that reads the noise of ``L`` samples along time (the float32 screen's transforms,
    :func:`mcacct.kernels.block_terms.noise_block_maxima_t`) would otherwise transpose the time-major draws, a
    pass over the whole array that costs about a tenth of the §7.4 ladder on CPUs. With partitionable threefry
    (:func:`columns_supported`) the word at ``(i, l)`` of the time-major draw is that of the counter
    :math:`c = i L + l` (:func:`mcacct.kernels.threefry.counter_bits`); here the counters are laid out as
    ``(L, n)`` and hashed by JAX's own block function (:func:`mcacct.kernels.threefry.jax_block_words`), so the words,
    and the normals, are the same. Otherwise (another PRNG, or more than :math:`2^{32}` words) it transposes
    :func:`standard_normal`.

    Parameters
    ----------
    key : jax.Array
        A JAX PRNG key.
    shape : tuple of int
        ``(n, L)``: the time-major shape whose transpose is drawn.
    dtype : dtype, optional
        Result dtype (default float64).

    Returns
    -------
    jax.Array
        Shape ``(L, n)``.
    """
    n, width = int(shape[0]), int(shape[1])
    if not columns_supported(key) or n * width > 2**32:
        return standard_normal(key, (n, width), dtype).T
    return normal_from_bits(lane_major_words(key, n, width), far_when_needed=True).astype(dtype)


def lane_major_words(key: jax.Array, iterations: int, width: int) -> jax.Array:
    r"""``jax.random.bits(key, (n, L), uint64).T``, bit for bit, hashed in that layout: the word at ``(l, i)`` is that
    of the counter :math:`c = i L + l` (partitionable threefry, :func:`columns_supported`, and :math:`nL \le 2^{32}`:
    the caller checks both).

    Parameters
    ----------
    key : jax.Array
        A threefry key.
    iterations, width : int
        ``n`` and ``L``.

    Returns
    -------
    jax.Array
        uint64 ``(L, n)``.
    """
    n, width = int(iterations), int(width)
    lo = (jax.lax.broadcasted_iota(jnp.uint32, (width, n), 1) * np.uint32(width)
          + jax.lax.broadcasted_iota(jnp.uint32, (width, n), 0))
    return jax_block_words(key_words(key), jnp.zeros_like(lo), lo)


def columns_supported(key: jax.Array) -> bool:
    """Whether :func:`standard_normal_columns` can regenerate columns of ``standard_normal(key, ...)``.

    True when JAX draws ``key``'s bits by threefry with partitionable counters (``jax_threefry_partitionable``, the
    default since JAX 0.5), in which the word at row-major position ``c`` of an array depends on ``c`` alone
    (:func:`mcacct.kernels.threefry.counters_supported`).

    Parameters
    ----------
    key : jax.Array
        A typed key or a legacy ``(2,)`` uint32 key.

    Returns
    -------
    bool
        Whether columns can be regenerated bit for bit.
    """
    return counters_supported(key)


def standard_normal_columns(key: jax.Array, shape: tuple[int, int], cols: jax.Array, dtype=jnp.float64) -> jax.Array:
    r"""Columns ``cols`` of ``standard_normal(key, shape)``, bit for bit, without drawing the other columns.

    The words are the same bits everywhere; the normals are where both are compiled alike. Inside a larger program, a
    CPU with FMA instructions may have XLA contract :func:`normal_from_bits`'s multiply-adds otherwise, a few ulps
    (docs/soundness.md, "Table normals for the screen").

    With partitionable threefry (:func:`columns_supported`) the 64-bit word at ``(i, l)`` of
    ``jax.random.bits(key, (n, L), uint64)`` is the word of the counter :math:`c = i L + l`
    (:func:`mcacct.kernels.threefry.counter_bits`); the same hash of the selected counters gives the same words
    (``tests/kernels/test_normal.py`` checks it against the whole draw).

    Parameters
    ----------
    key : jax.Array
        The key of the whole draw.
    shape : tuple of int
        ``(n, L)``, the 2-D shape of the whole draw.
    cols : jax.Array
        1-D integer column indices in ``[0, L)`` (clip them first).
    dtype : dtype, optional
        Result dtype (default float64).

    Returns
    -------
    jax.Array
        Shape ``(n, len(cols))``.

    Raises
    ------
    ValueError
        Where :func:`columns_supported` is false.
    """
    if not columns_supported(key):
        raise ValueError("standard_normal_columns needs a threefry key with jax_threefry_partitionable on")
    n, width = int(shape[0]), int(shape[1])
    cols = jnp.asarray(cols).astype(jnp.uint64)
    c = jnp.arange(n, dtype=jnp.uint64)[:, None] * jnp.uint64(width) + cols[None, :]
    return normal_from_bits(counter_bits(key_words(key), c), far_when_needed=True).astype(dtype)


def normal_from_bits(bits: jax.Array, far_when_needed: bool = False) -> jax.Array:
    """float64 normals from uint64 words, by exact inversion.

    Of the top 53 bits, one is the sign and 52 pick the cell ``k`` of ``u = (k + 1/2) 2^-53`` in ``(0, 1/2)``
    (exact; ``2^-54 <= u <= 1/2 - 2^-54``); the magnitude is ``-Phi^{-1}(u)``.

    Parameters
    ----------
    bits : array_like
        uint64 words, any shape (the low 11 bits are unused).
    far_when_needed : bool, optional
        Evaluate the far tail's rational function (``r > 5``, i.e. ``u < e^{-25}``: about one draw in ``10^11``)
        only when some element of ``bits`` needs it (:func:`mcacct.kernels.control.rare_cond`), instead of for
        every element. The values are the same bit for bit (each element still takes the same operations on the
        same operands; ``tests/kernels/test_normal.py``); the XLA paths use it, the Pallas kernel keeps the plain
        select (default ``False``).

    Returns
    -------
    jax.Array
        float64, the shape of ``bits``: never NaN or infinite, never 0, exactly symmetric, ``|z| <= 8.2924``.
    """
    negative, u = sign_and_cell(bits)
    mag = -_ndtri_lower(u, far_when_needed)                      # > 0
    return jnp.where(negative, -mag, mag)


def sign_and_cell(bits: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(negative, u)`` of the sampler's words (:func:`normal_from_bits`): of the top 53 bits, one is the sign and 52
    pick the cell ``k`` of ``u = (k + 1/2) 2^-53`` (float64, exact, in ``[2^-54, 1/2 - 2^-54]``).

    Parameters
    ----------
    bits : array_like
        uint64 words, any shape.

    Returns
    -------
    tuple of jax.Array
        bool and float64, the shape of ``bits``.
    """
    top = jnp.asarray(bits, jnp.uint64) >> 11                    # 53 random bits
    k = (top & ((1 << 52) - 1)).astype(jnp.float64)              # 52 bits: the cell
    return (top >> 52) == 1, (k + 0.5) * (2.0 ** -53)            # 1 bit: the sign


def _far_select(r: jax.Array, tail_mid: jax.Array) -> jax.Array:
    """The tail's value: the mid-range rational function where ``r <= 5``, the far one elsewhere."""
    far = r - 5.0
    return jnp.where(r <= 5.0, tail_mid, _horner(_FAR_NUM, far) / _horner(_FAR_DEN, far))


def _ndtri_lower(u: jax.Array, far_when_needed: bool = False) -> jax.Array:
    """:func:`ndtri` for ``u`` in ``(0, 1/2)`` (skips the upper-tail branch); ``far_when_needed``: the far tail's
    function only where some element needs it (:func:`normal_from_bits`)."""
    q = u - 0.5
    r2 = 0.180625 - q * q
    central = q * _horner(_CENTRAL_NUM, r2) / _horner(_CENTRAL_DEN, r2)
    r = jnp.sqrt(-log_f64(u))
    mid = r - 1.6
    tail_mid = _horner(_MID_NUM, mid) / _horner(_MID_DEN, mid)
    if far_when_needed:
        tail = rare_cond(jnp.any(r > 5.0), _far_select, lambda r, t: t, r, tail_mid)
    else:
        tail = _far_select(r, tail_mid)
    return jnp.where(q >= -0.425, central, -tail)


def ndtri_lower_numpy(u: np.ndarray) -> np.ndarray:
    r""":func:`ndtri` for ``u`` in ``(0, 1/2]`` in NumPy (float64, NumPy's ``log``): the same rational functions, for
    tables built outside a trace (:mod:`mcacct.kernels.normal_table`); within ``1e-14`` relative of mpmath's quantile
    (``tests/kernels/test_normal_table.py``).

    Parameters
    ----------
    u : numpy.ndarray
        float64 in ``(0, 1/2]``.

    Returns
    -------
    numpy.ndarray
        float64 :math:`\Phi^{-1}(u) \le 0`.
    """
    def horner(coeffs, x):
        acc = np.full_like(x, coeffs[-1])
        for c in coeffs[-2::-1]:
            acc = acc * x + c
        return acc

    u = np.asarray(u, np.float64)
    q = u - 0.5
    r2 = 0.180625 - q * q
    central = q * horner(_CENTRAL_NUM, r2) / horner(_CENTRAL_DEN, r2)
    r = np.sqrt(-np.log(u))
    tail = np.where(r <= 5.0, horner(_MID_NUM, r - 1.6) / horner(_MID_DEN, r - 1.6),
                    horner(_FAR_NUM, r - 5.0) / horner(_FAR_DEN, r - 5.0))
    return np.where(q >= -0.425, central, -tail)
