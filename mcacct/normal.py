r"""Standard normal draws in float64 by exact inversion: the noise sampler of every mcacct kernel.

A draw is :math:`z = \Phi^{-1}(u)` with :math:`u = (k + \tfrac12)\, 2^{-53}`, ``k`` the top 53 bits of
a 64-bit word from ``jax.random.bits`` (threefry by default). So ``u`` is uniform on the 2^53 midpoints
of ``(0, 1)``, symmetric about 1/2, and ``z`` reaches :math:`\pm 8.3` (the most extreme ``u`` is
:math:`2^{-54}`): the tails are those of the float64 uniform, not truncated at a float32 resolution.

:math:`\Phi^{-1}` is Wichura's rational approximation (Algorithm AS 241, ``PPND16``, Applied Statistics
37, 1988): a degree-7/7 rational function of :math:`0.180625 - q^2` (:math:`q = u - 1/2`) for
:math:`|q| \le 0.425`, and of :math:`r - 1.6` or :math:`r - 5` with :math:`r = \sqrt{-\ln \min(u, 1-u)}`
in the tails; its relative error is about ``1e-16`` (tested against ``scipy.special.ndtri``).

Why not ``jax.random.normal``: it inverts through ``erfinv``, whose float64 form evaluates three
polynomials of degree ~20 plus a ``log``; on CPU that is about 1.5x the cost of the rational functions
here (``benchmarks/profile_stages.py``). The law is the same up to float64 rounding.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["standard_normal", "ndtri"]

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


def _horner(coeffs: tuple[float, ...], x: jax.Array) -> jax.Array:
    acc = jnp.full_like(x, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc = acc * x + c
    return acc


def ndtri(u: jax.Array) -> jax.Array:
    r""":math:`\Phi^{-1}(u)` for ``u`` in ``(0, 1)`` (float64), AS 241; ``u`` outside gives NaN/inf."""
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
    """``N(0, 1)`` draws of ``shape``: float64 inversion of 53-bit uniforms (module docstring), then cast to
    ``dtype`` (a float32 kernel thus rounds float64 draws; it never draws float32 normals, whose tails are
    cut near 5.4 sd). Pure function of ``key``; the same key gives the same draws on every backend."""
    bits = jax.random.bits(key, shape, jnp.uint64)
    u = ((bits >> 11).astype(jnp.float64) + 0.5) * (2.0 ** -53)
    return ndtri(u).astype(dtype)
