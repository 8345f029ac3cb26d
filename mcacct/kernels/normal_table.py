r"""float32 normals within a certified distance of the sampler's float64 ones, by table: what the remove skip's
screen reads (issue #39).

The sampler (:func:`mcacct.kernels.normal.normal_from_bits`) turns a 64-bit word into :math:`z = \pm Z(u)` with a
fair sign and :math:`u = (k + \tfrac12) 2^{-53} \in [2^{-54}, \tfrac12)`, where :math:`Z(u)` is the float64 AS 241
magnitude :math:`-\Phi^{-1}(u)` as XLA computes it. On CPUs its inversion (three rational functions, a logarithm
and a square root per element) is about a quarter of the §7.4 ladder with both skips, yet the float32 screen of
:func:`mcacct.kernels.block_terms.noise_block_maxima_t` needs the noise only to within its own error. Here the same
word gives :math:`\hat z = \pm t_K` from a table, with :math:`|\hat z - z| \le \alpha` for every word.

**Cells.** The cell of ``u`` is ``K`` = its float64 bits shifted right by :math:`52 - m` (:data:`SCREEN_TABLE_BITS`
``= m``), less the cell of :math:`2^{-54}`: the exponent and the top ``m`` bits of the significand, so
:math:`2^m` cells per octave and 53 octaves (:math:`2^{-54} \le u < 2^{-1}`). Cell ``K`` holds the ``u`` of
:math:`[a_K, b_K)`, :math:`a_K` the float with the cell's bits and the rest zero (:math:`b_K = a_{K+1}`, at most
1/2).

**Bound.** The true magnitude :math:`T(u) = -\Phi^{-1}(u)` decreases on :math:`(0, \tfrac12]`, so on the cell
:math:`T(b_K) \le T(u) \le T(a_K)`, and :math:`|Z(u) - T(u)| \le R\, T(u)` with :math:`R` =
:data:`~mcacct.engine.systematic.NDTRI_REL_ERROR`'s 1.5e-15 (tested against mpmath). The ends are evaluated in NumPy
(:func:`~mcacct.kernels.normal.ndtri_lower_numpy`, within ``1e-14`` relative of mpmath, tested) and widened by a
relative :data:`ENDPOINT_REL` ``= 1e-12``, which covers both: :math:`\ell_K = N(b_K)(1 - 10^{-12})` and
:math:`h_K = N(a_K)(1 + 10^{-12})` enclose :math:`Z(u)` for every ``u`` of the cell. The entry :math:`t_K` is the
midpoint rounded to float32, and :math:`\alpha = \max_K \max(h_K - t_K, t_K - \ell_K)`, raised by a relative
:math:`10^{-9}` for the float64 differences. At :math:`m = 13`: 434,176 entries (1.66 MiB; half the draws read
the 32 kB of :math:`[1/4, 1/2)`) and :math:`\alpha \approx 4.8 \cdot 10^{-5}`, about
:math:`2^{-15}/(2\varphi(\Phi^{-1}(1/4)))`, the half-width of the first cells of :math:`[1/4, 1/2)` (the second one's
upper end sets it, after the float32 rounding of the entries). ``m`` = 10, 12 and 13 ran the §7.4 ladder equally
fast (benchmarks/results/design_choices.md, stop 66); at 13 the allowance of §7.4's MSE c, 6.6e-4, is a thirtieth of
the transforms' (0.019).

The screen adds :math:`\|c\|_1 \alpha` to each sliding sum's allowance (:math:`|\sum_d c_d (\hat z - z)_{i+d}| \le
\|c\|_1 \alpha`), and its float32 transforms start from :math:`\hat z` exactly. A constant column's bound
(:func:`mcacct.kernels.const_column.block_term_maxima_t`, on CPUs where the fused pass is off; kernel 18) takes the
prefix sums of the same :math:`\hat z` and adds :math:`c_0 k \alpha` per window of ``k`` rows. The draws' law is
untouched: a draw the bound does not let go is recomputed from the float64 normals of the same words
(:func:`~mcacct.kernels.normal.standard_normal_columns`), as on the fused kernel's path. Numbers and arrays in; no
scheme is imported.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from mcacct.core.platform import target_platform
from mcacct.kernels.normal import lane_major_words, ndtri_lower_numpy, sign_and_cell
from mcacct.kernels.threefry import default_counters_supported

__all__ = ["SCREEN_TABLE_BITS", "TABLE_SCREEN_AUTO", "ENDPOINT_REL", "normal_table", "table_normals_from_bits",
           "table_normals_lanes", "table_screen_applies"]

#: significand bits per cell (``m``): :math:`2^m` cells per octave of ``u``
SCREEN_TABLE_BITS = 13

#: whether the ladders' remove bound reads table normals (a non-constant column's float32 screen, a constant
#: column's prefix sums), per platform (read at trace time, :func:`table_screen_applies`): on CPUs, where the
#: inversion costs about a quarter of the §7.4 ladder (benchmarks/results/design_choices.md, stops 66 and 67); off
#: on accelerators until a device measures it. Switching it for a platform changes the bounds that skipped draws
#: record in the histogram there (the same counts and sums): it needs a new
#: ``mcacct.jobs.problem_file.KERNEL_VERSION``, as kernels 17 and 18 had
TABLE_SCREEN_AUTO = {"cpu": True, "gpu": False, "tpu": False}

#: relative widening of each cell's ends: covers NumPy's and XLA's errors against the true quantile (within ``1e-14``
#: and ``1.5e-15``, both tested against mpmath)
ENDPOINT_REL = 1e-12

_OCTAVES = 53                  # u in [2^-54, 2^-1)


def _first_cell(bits: int) -> int:
    return int(np.float64(2.0**-54).view(np.uint64)) >> (52 - bits)


@functools.lru_cache(maxsize=4)
def normal_table(bits: int = SCREEN_TABLE_BITS) -> tuple[np.ndarray, float]:
    r"""``(t, alpha)``: the float32 entries :math:`t_K` and the certified distance :math:`\alpha` (module docstring).

    Parameters
    ----------
    bits : int, optional
        ``m``, significand bits per cell (default :data:`SCREEN_TABLE_BITS`), in ``[1, 20]``.

    Returns
    -------
    tuple
        float32 ``(53 * 2^m,)`` entries (read-only) and float ``alpha``.

    Raises
    ------
    ValueError
        If ``bits`` is outside ``[1, 20]``.
    """
    if not 1 <= int(bits) <= 20:
        raise ValueError(f"bits must be an integer in [1, 20]; got {bits!r}")
    m = int(bits)
    cells = np.arange(_OCTAVES << m, dtype=np.uint64) + np.uint64(_first_cell(m))
    a = (cells << np.uint64(52 - m)).view(np.float64)
    b = np.minimum(((cells + np.uint64(1)) << np.uint64(52 - m)).view(np.float64), 0.5)
    lo = -ndtri_lower_numpy(b) * (1.0 - ENDPOINT_REL)
    hi = -ndtri_lower_numpy(a) * (1.0 + ENDPOINT_REL)
    t = (0.5 * (lo + hi)).astype(np.float32)
    t64 = t.astype(np.float64)
    alpha = float(np.max(np.maximum(hi - t64, t64 - lo))) * (1.0 + 1e-9)
    t.setflags(write=False)
    return t, alpha


def table_normals_from_bits(bits: jax.Array, table_bits: int = SCREEN_TABLE_BITS) -> jax.Array:
    r"""float32 :math:`\hat z` of the sampler's words, with :math:`|\hat z - z| \le \alpha` against
    :func:`~mcacct.kernels.normal.normal_from_bits` of the same words (:func:`normal_table`'s ``alpha``).

    Parameters
    ----------
    bits : jax.Array
        uint64 words, any shape.
    table_bits : int, optional
        ``m`` (default :data:`SCREEN_TABLE_BITS`).

    Returns
    -------
    jax.Array
        float32, the shape of ``bits``.
    """
    t, _ = normal_table(table_bits)
    negative, u = sign_and_cell(bits)
    cell = (jax.lax.bitcast_convert_type(u, jnp.uint64) >> (52 - table_bits)) - np.uint64(_first_cell(table_bits))
    mag = jnp.asarray(t)[cell.astype(jnp.int32)]
    return jnp.where(negative, -mag, mag)


def table_normals_lanes(key: jax.Array, shape: tuple[int, int], table_bits: int = SCREEN_TABLE_BITS) -> jax.Array:
    r"""Lane-major ``(L, n)`` float32 :math:`\hat z` within ``alpha`` of ``standard_normal(key, shape).T`` (the
    words of :func:`~mcacct.kernels.normal.lane_major_words`).

    Parameters
    ----------
    key : jax.Array
        A threefry key with partitionable counters (:func:`~mcacct.kernels.normal.columns_supported`).
    shape : tuple of int
        ``(n, L)``, the time-major shape; :math:`nL \le 2^{32}`.
    table_bits : int, optional
        ``m`` (default :data:`SCREEN_TABLE_BITS`).

    Returns
    -------
    jax.Array
        float32 ``(L, n)``.
    """
    return table_normals_from_bits(lane_major_words(key, int(shape[0]), int(shape[1])), table_bits)


def table_screen_applies(iterations: int, width: int) -> bool:
    """Whether a ladder of ``width`` draws of ``iterations`` rounds screens table normals: switched on for the target
    platform (:data:`TABLE_SCREEN_AUTO`), threefry with partitionable counters the default, and the lane-major
    counters within 32 bits.

    Parameters
    ----------
    iterations, width : int
        ``n`` and the draws ``L`` of one call.

    Returns
    -------
    bool
    """
    return (TABLE_SCREEN_AUTO.get(target_platform(), False) and default_counters_supported()
            and int(iterations) * int(width) <= 2**32)
