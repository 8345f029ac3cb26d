"""Data apart from mechanism (issue #40): a scheme is a frozen dataclass of parameters whose ``mechanism(strategy,
options)`` gives the pure functions the engine runs. A toy defined here, with no base class, gives its mechanism
and its bounds and nothing else the engine reads; the engine runs it, and its estimate brackets the Gaussian
mechanism's closed form. Cheap: about 10^4 draws of one round."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import pytest
from scipy.stats import norm

import mcacct
from mcacct import BandedToeplitz, BMinSep, Problem
from mcacct.engine.losses import direction_losses, ladder_losses
from mcacct.schemes.base import AccountedScheme, Bounds, Draws, LossErrorParams, SchemeSummary
from mcacct.schemes.mechanism import KernelOptions, Mechanism
from mcacct.schemes.registry import SchemeInfo, missing_members


@dataclasses.dataclass(frozen=True)
class GaussianOnce:
    """Toy: the example always takes part in iteration 0, the other rounds are noise (the Gaussian mechanism with
    sensitivity ``|c_0|``). Data only; its mechanism is two pure functions and their composition."""

    iterations: int = 3

    def check_strategy(self, strategy) -> None:
        if not isinstance(strategy, BandedToeplitz):
            raise ValueError("strategy must be a BandedToeplitz")

    def mechanism(self, strategy, options: KernelOptions = KernelOptions()) -> Mechanism:
        c0, n = float(strategy.c_col[0]), self.iterations

        def sample(key, sigma, num_samples, direction):
            y = jax.random.normal(key, (n, num_samples), jnp.float64) * sigma
            return Draws(y.at[0].add(c0) if direction == "remove" else y)

        def log_ratio(draws, sigma, direction):
            return (c0 * draws.y[0].astype(options.dtype) - c0 * c0 / 2) / sigma**2

        def losses(key, sigma, num_samples, direction):
            loss = log_ratio(sample(key, sigma, num_samples, direction), sigma, direction)
            return loss if direction == "remove" else -loss

        return Mechanism(sample, log_ratio, losses)

    def sample(self, key, strategy, sigma, num_samples, direction="remove", dtype=jnp.float64) -> Draws:
        return Draws(self.mechanism(strategy).sample(key, sigma, num_samples, direction).y.T.astype(dtype))

    def log_ratio(self, y, strategy, sigma, aux=None, direction="remove", dot_method="auto", recursion="auto"):
        return self.mechanism(strategy).log_ratio(Draws(jnp.moveaxis(jnp.asarray(y), -1, 0)), sigma, direction)

    def bounds(self, strategy) -> Bounds:
        c0 = abs(float(strategy.c_col[0]))
        # one participation, no discrete draw; the loss is one term: the recursion's model at p = 1, b = 1
        return Bounds(c0, c0, 0, 0.0, LossErrorParams(1, 1.0, 1, 1.0))

    def summary(self) -> SchemeSummary:
        return SchemeSummary(bands=None, sampling_prob=1.0, participation_rate=1 / self.iterations, count_sampler=None)

    def exact_pld(self, strategy):
        return None

    def pld_baselines(self, strategy, epsilon, delta) -> dict:
        return {}


STRATEGY = BandedToeplitz((0.8, 0.5))


def gaussian_delta(eps: float, sens: float, sigma: float) -> float:
    """The Gaussian mechanism's exact privacy curve (Balle & Wang 2018, arXiv:1805.06530, Thm. 8)."""
    a, b = sens / (2 * sigma), eps * sigma / sens
    return float(norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b))


def test_the_contract_is_data_and_one_mechanism():
    members = {m for m in vars(AccountedScheme) if not m.startswith("_")}
    assert "mechanism" in members
    assert not members & {"sample_t", "log_ratio_t", "losses_t", "ladder_losses", "add_loss_bound",
                          "shares_ladder_work", "bounds_remove_losses", "block_floor", "fused_ladder_args"}
    assert isinstance(GaussianOnce(), AccountedScheme) and missing_members(GaussianOnce) == []
    SchemeInfo("gaussian-once", GaussianOnce)  # accepted: nothing else is needed


def test_a_base_class_scheme_binds_its_hooks():
    """``Scheme.mechanism`` is the scheme's own engine hooks with the strategy and options fixed: the same values."""
    scheme, key = BMinSep(0.3, 2, 8), jax.random.key(3)
    mech = scheme.mechanism(STRATEGY, KernelOptions(recursion="scan"))
    assert mech.ladder is not None and mech.bounds_remove_losses and mech.add_loss_bound == scheme.add_loss_bound()
    assert mech.fused_args == scheme.fused_ladder_args(STRATEGY) and mech.block_floor == scheme.block_floor
    draws = mech.sample(key, 0.9, 16, "remove")
    want = scheme.log_ratio_t(draws.y, STRATEGY, 0.9, None, "remove", "auto", "scan")
    assert jnp.array_equal(mech.log_ratio(draws, 0.9, "remove"), want)
    ladder = ladder_losses(mech, key, jnp.asarray([0.9]), 16)
    assert jnp.array_equal(ladder, scheme.ladder_losses(key, STRATEGY, jnp.asarray([0.9]), 16, jnp.float64,
                                                        "auto", "scan"))
    assert mcacct.BallsInBins(3, 8).mechanism(STRATEGY).ladder is None


def test_the_engine_runs_a_mechanism_given_without_the_base_class():
    problem, sigma, eps = Problem(GaussianOnce(), STRATEGY), 1.0, 0.5
    mech = problem.mechanism()
    with pytest.raises(ValueError, match="add_bound"):
        ladder_losses(mech, jax.random.key(0), jnp.asarray([1.0]), 8, add_bound=1.0)
    loss = direction_losses(mech, jax.random.key(0), sigma, 8, "add")
    assert loss.shape == (8,)
    est = mcacct.estimate(problem, sigma, jax.random.key(1), 16_384, (eps,), chunk_size=4096)
    exact = gaussian_delta(eps, 0.8, sigma)
    deltas = est.delta(0)
    for direction in ("remove", "add"):  # the Gaussian mechanism's curve is the same in both directions
        d = deltas[direction]
        assert d["delta_lower"] <= exact <= d["delta_upper"], (direction, d, exact)
