r"""A toy scheme for mcacct, defined outside the package: the example takes part in every iteration.

Mechanism. With ``C`` the banded Toeplitz strategy and :math:`\mu = C\mathbf 1` (the output mean when the example is
in every batch), the remove direction releases :math:`y = \mu + \sigma z` (``P``) and the add direction
:math:`y = \sigma z` (``Q``), :math:`z \sim N(0, I_n)`. Both are Gaussians with covariance :math:`\sigma^2 I`, so the
privacy loss is exact and linear,

.. math::
    \ln\frac{P}{Q}(y) = \frac{\langle \mu, y\rangle}{\sigma^2} - \frac{\|\mu\|^2}{2\sigma^2},

and the pair is the Gaussian mechanism with sensitivity :math:`\|\mu\|_2`: its PLD is exactly
``mcacct.pld.GaussianSpec(sigma=1, sensitivity=||mu||)`` at ``sigma = 1``, which is what makes it a good test.

Use: ``mcacct.register(INFO)`` in the process, or install it with an entry point of group ``mcacct.schemes``
(``always-in = always_in:INFO``) so that every process -- shard jobs and merges too -- finds it. See docs/schemes.md.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

import mcacct
from mcacct.kernels.output import gaussian_output


@dataclasses.dataclass(frozen=True)
class AlwaysIn(mcacct.Scheme):
    """The example participates in each of the ``iterations`` rounds (module docstring)."""

    iterations: int

    def __post_init__(self) -> None:
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) or self.iterations < 1:
            raise ValueError(f"iterations must be an integer >= 1; got {self.iterations!r}")

    def mean(self, strategy) -> np.ndarray:
        """:math:`\\mu = C \\mathbf 1`: coordinate ``i`` sums the first ``min(i + 1, len(c))`` entries of ``c``."""
        c = np.cumsum(np.asarray(strategy.c_col, np.float64))
        return c[np.minimum(np.arange(self.iterations), len(c) - 1)]

    # -- the contract ---------------------------------------------------------------------------------------
    def check_strategy(self, strategy) -> None:
        if not isinstance(strategy, mcacct.BandedToeplitz):
            raise ValueError(f"strategy must be a mcacct.BandedToeplitz; got {type(strategy).__name__}")

    def sensitivity_bound(self, strategy) -> float:
        """:math:`\\|\\mu\\|_2`, raised by a relative ``2^-40`` for the float sum."""
        return math.sqrt(math.fsum(self.mean(strategy) ** 2)) * (1.0 + 2.0**-40)

    def output_coordinate_bound(self, strategy) -> float:
        """:math:`\\max_i |\\mu_i|`."""
        return float(np.max(np.abs(self.mean(strategy))))

    def draw(self, key, strategy, sigma, num_samples: int, direction: str, dtype) -> mcacct.Draws:
        mu = jnp.asarray(self.mean(strategy), dtype)
        shape = (num_samples, self.iterations)
        return mcacct.Draws(gaussian_output(key, shape, sigma, dtype, direction == "remove",
                                            lambda _: jnp.broadcast_to(mu, shape)))

    def loss_rows(self, y, strategy, sigma, aux, direction: str, dot_method: str, recursion: str):
        mu = jnp.asarray(self.mean(strategy), y.dtype)
        s2 = jnp.asarray(sigma, y.dtype) ** 2
        return (y @ mu) / s2 - jnp.dot(mu, mu) / (2.0 * s2)

    def participation_boundaries(self) -> int:
        return 0  # no participation is drawn

    def draw_law_tv(self) -> float:
        return 0.0  # no discrete draw at all

    def loss_error_params(self) -> mcacct.LossErrorParams:
        # the loss is the product form of b = 1, p = 1: n terms, one participation each, Q a plain Gaussian
        return mcacct.LossErrorParams(separation=1, sampling_prob=1.0, max_participations=self.iterations,
                                      mixture_factor=1.0)

    def summary(self) -> mcacct.SchemeSummary:
        return mcacct.SchemeSummary(bands=None, sampling_prob=None, participation_rate=1.0, count_sampler=None)

    def exact_pld(self, strategy):
        return mcacct.pld.GaussianSpec(sigma=1.0, sensitivity=self.sensitivity_bound(strategy))


INFO = mcacct.SchemeInfo("always-in", AlwaysIn, "toy: the example takes part in every iteration")
