"""Soundness fixes in mcacct.dpis and the DPIS sampler: the count of K' releases, the paper schedule's kappa range,
stale sampler states, and the direction of float rounding (each test fails on the code before its fix)."""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcacct import pld
from mcacct.cli.dpis import add_dpis_parser
from mcacct.dpis import (DPISEpoch, DPISRun, calibrate_plan, dpis_events, follows_plan, iteration_spec, norm_sum_spec,
                         paper_schedule, rdp_poisson_gaussian, run_from_dict, run_to_dict)
from mcacct.training.dpis_sampler import DPISSampler

# FMNIST-like: N~ = 60012.4, b = 256, T = 234
NT, B, C, T = 60_012.4, 256.0, 0.1, 234


def _k_events(run):
    return [e for e in dpis_events(run) if e.spec == norm_sum_spec(run.norm_sum_rate, run.sigma_k)]


# --- finding 1: one K' per epoch ------------------------------------------------------------------------------------

def test_an_entry_spanning_several_epochs_needs_k_releases_or_iterations_per_epoch():
    merged = (DPISEpoch(40 * T, 6_000.0, 0.8),)              # 40 epochs with equal K~ and sigma_g, one entry
    with pytest.raises(ValueError, match="k_releases is required .*\\(epochs\\[0\\] has 9360\\).*iterations_per_epoch"):
        DPISRun(NT, B, C, merged, sigma_k=30.0)
    by_t = DPISRun(NT, B, C, merged, sigma_k=30.0, iterations_per_epoch=T)
    explicit = DPISRun(NT, B, C, merged, sigma_k=30.0, k_releases=40)
    per_epoch = DPISRun(NT, B, C, (DPISEpoch(T, 6_000.0, 0.8),) * 40, sigma_k=30.0, iterations_per_epoch=T)
    assert by_t.norm_sum_releases == explicit.norm_sum_releases == per_epoch.norm_sum_releases == 40
    assert dpis_events(by_t) == dpis_events(explicit) == dpis_events(per_epoch)
    assert _k_events(by_t) == [pld.Event(norm_sum_spec(B / NT, 30.0), 40)]
    with pytest.raises(ValueError, match="k_releases must be >= the number of epochs .* = 40"):
        DPISRun(NT, B, C, merged, sigma_k=30.0, k_releases=1, iterations_per_epoch=T)
    # the run file refuses it too, naming the file; the new field round-trips
    data = run_to_dict(by_t)
    assert data["iterations_per_epoch"] == T
    assert run_from_dict(json.loads(json.dumps(data))) == by_t
    data.pop("iterations_per_epoch")
    with pytest.raises(ValueError, match="^r.json: k_releases is required"):
        run_from_dict(data, "r.json")


def test_k_release_count_from_the_epoch_length():
    # a K~ change inside an epoch is a new K' as well (upper bound); a last partial epoch counts
    run = DPISRun(NT, B, C, (DPISEpoch(150, 6_000.0, 0.8), DPISEpoch(84, 5_000.0, 0.8),
                             DPISEpoch(2 * T + 10, 5_000.0, 0.8)), sigma_k=30.0, iterations_per_epoch=T)
    assert run.norm_sum_releases == 5      # 712 iterations: cuts at 234, 468, 702 (epochs) and 150 (K~ changes)
    # per-iteration entries (the documented alternative) keep one K' per entry without T: an upper bound
    per_it = DPISRun(NT, B, C, (DPISEpoch(1, 6_000.0, 0.8),) * 5, sigma_k=30.0)
    assert per_it.norm_sum_releases == 5
    # without sigma_k nothing is released, whatever the entries
    assert DPISRun(NT, B, C, (DPISEpoch(40 * T, 6_000.0, 0.8),)).norm_sum_releases == 0
    with pytest.raises(ValueError, match="iterations_per_epoch must be an integer in \\[1, inf\\)"):
        DPISRun(NT, B, C, (DPISEpoch(T, 6_000.0, 0.8),), sigma_k=30.0, iterations_per_epoch=0)


# --- finding 2: the paper schedule's kappa range ------------------------------------------------------------------

def test_paper_schedule_refuses_kappa_below_b_over_n():
    with pytest.raises(ValueError, match="kappas\\[0\\] must be in \\[batch_size/dataset_size = 0.004266"):
        paper_schedule(0.5 * 256 / 60_000, 60_000, 256, 10, 4.0, 1e-5)
    with pytest.raises(ValueError, match="kappas\\[1\\] must be in \\[rejection_k\\*batch_size/dataset_size = 0.05"):
        paper_schedule((1.0, 0.02), 6_000, 60, 2, 2.0, 1e-5, iterations_per_epoch=100, rejection_k=5)
    ok = paper_schedule((1.0, 0.05), 6_000, 60, 2, 2.0, 1e-5, iterations_per_epoch=100, rejection_k=5)
    assert ok.guarantee and ok.epsilon <= 2.0 + 1e-9


# --- finding 3: a stale sampler state -----------------------------------------------------------------------------

def test_stale_state_is_refused_or_clamped():
    n, b, k, small = 200, 10.0, 5.0, 0.1
    norms = np.random.default_rng(0).uniform(0.0, 2.0, n)
    stale = DPISSampler(n, b, 1.0, k=k).init(norms)                  # g_hat up to k * 1.0
    sampler = DPISSampler(n, b, small, k=k)
    k_tilde, n_tilde = k * b * small, float(n)                         # exactly k b C: covered
    with pytest.raises(ValueError, match="state.g_hat must be in \\[0, k\\*clip = 0.5\\]"):
        sampler.filter(jax.random.key(0), stale, k_tilde)
    # traced (the state is an argument of the jitted function): clamped, so the batch is the covered one
    draw = jax.jit(jax.vmap(lambda key, st: sampler.step(key, st, norms, k_tilde, n_tilde)[1], in_axes=(0, None)))
    batch = draw(jax.random.split(jax.random.key(1), 64), stale)
    mask = np.asarray(batch.mask)
    nu = np.minimum(norms, small)                                      # the clipped norms
    contribution = np.asarray(batch.weight) * nu                       # norm of w_i * g_bar_i
    assert mask.any() and bool(np.all(batch.covered))
    assert np.all(contribution[mask] <= k_tilde / n_tilde * (1 + 1e-12))  # sensitivity K~/N~, not 10x
    assert np.all(np.asarray(batch.inclusion_prob) <= b * small / k_tilde * (1 + 1e-12))
    # a state of this sampler is unchanged by the clamp
    fresh = sampler.init(norms)
    assert float(jnp.max(fresh.g_hat)) <= k * small
    sampler.filter(jax.random.key(0), fresh, k_tilde)


# --- finding 4: rounding in the safe direction --------------------------------------------------------------------

@pytest.mark.parametrize("q,s", [(1e-4, 10.0), (1e-3, 3.0), (0.004, 5.12), (1e-6, 100.0), (0.01, 1.0)])
def test_rdp_is_an_upper_bound_near_zero(q, s):
    # closed forms of orders 2 and 3, each log1p of a sum of positive terms (a few ulp)
    exact2 = math.log1p(q * q * math.expm1(1 / s ** 2))
    exact3 = math.log1p(3 * q * q * (1 - q) * math.expm1(1 / s ** 2) + q ** 3 * math.expm1(3 / s ** 2)) / 2
    got = rdp_poisson_gaussian(q, s, [2, 3])
    for g, e in zip(got, (exact2, exact3)):
        assert e <= g <= e * (1 + 3e-12)


def test_runtime_rule_gives_a_rate_at_most_the_plans_exactly():
    plan = calibrate_plan(6_000, 60.0, 2, 2.0, 1e-5, iterations_per_epoch=100, kappas=(1.0, 0.37), accountant="rdp")
    for clip in (0.1, 0.033, 0.05, 0.7):
        for n_tilde in (6_037.2, 6_100.3, 5_999.1):
            epochs = []
            for e in range(2):
                kt, sg = plan.runtime(e, 1.0, n_tilde, clip)        # the floor binds
                spec = iteration_spec(kt, n_tilde, 60.0, clip, sg)
                assert spec.sampling_prob <= plan.sampling_probs[e] and spec.sigma >= plan.multipliers[e]
                epochs.append(DPISEpoch(100, kt, sg))
            assert follows_plan(DPISRun(n_tilde, 60.0, clip, tuple(epochs)), plan)
    # the floor as exact arithmetic gives it (not rounded up) exceeds the plan's rate by an ulp here: refused
    clip, n_tilde = 0.1, 6_100.3
    raw = plan.kappas[0] * plan.dataset_size * clip
    assert iteration_spec(raw, n_tilde, 60.0, clip, 1.0).sampling_prob > plan.sampling_probs[0]
    _, sg = plan.runtime(0, 1.0, n_tilde, clip)
    kt1, sg1 = plan.runtime(1, 1.0, n_tilde, clip)
    assert not follows_plan(DPISRun(n_tilde, 60.0, clip, (DPISEpoch(100, raw, sg), DPISEpoch(100, kt1, sg1))), plan)


# --- finding 5: the CLI says the paper schedule's sigma_g must be recomputed ----------------------------------------

def test_calibrate_notes_that_paper_sigma_g_is_recomputed_from_the_realized_kappa(capsys):
    import argparse
    p = argparse.ArgumentParser()
    add_dpis_parser(p.add_subparsers(dest="command"))
    args = p.parse_args(["dpis", "calibrate", "--dataset-size", "6000", "--batch-size", "60", "--epochs", "2",
                         "--epsilon", "2", "--delta", "1e-5", "--sigma-n", "0", "--sigma-k", "0", "--accountant",
                         "rdp"])
    out = args.func(args)
    assert any("realized kappa" in n and "public constants" in n for n in out["paper_rdp"]["notes"])
    assert "realized kappa" in capsys.readouterr().out
