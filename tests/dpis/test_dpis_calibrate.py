"""DPIS noise plans (PLD vs RDP), the runtime rule, the paper's schedule, and the benchmark table."""

import json
from pathlib import Path

import numpy as np
import pytest

from mcacct.dpis import (DPISEpoch, DPISRun, calibrate_plan, dpis_events, follows_plan, iteration_spec,
                         paper_schedule, plan_epsilon)
from mcacct.dpis import bisect_smallest

TABLE = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "dpis_table.json"
N, B, T, E, EPS, DELTA = 6_000, 60.0, 100, 2, 2.0, 1e-5
KAPPAS = (1.0, 0.5)


@pytest.fixture(scope="module")
def plans():
    kw = dict(iterations_per_epoch=T, kappas=KAPPAS, sigma_n=120.0, sigma_k=120.0, rejection_k=5.0)
    rdp = calibrate_plan(N, B, E, EPS, DELTA, accountant="rdp", **kw)
    p = calibrate_plan(N, B, E, EPS, DELTA, accountant="pld", rtol=0.1, **kw)  # few PLD evaluations
    return rdp, p


def test_pld_plan_needs_less_noise_than_the_rdp_plan(plans):
    rdp, p = plans
    assert rdp.epsilon <= EPS and p.epsilon <= EPS
    assert all(s_pld <= s_rdp for s_pld, s_rdp in zip(p.sigma_g, rdp.sigma_g))
    assert p.sigma_g[0] == p.sigma_g[1]          # constant_sigma: equal anticipated sigma_g, s_e = sigma / kappa_e
    assert p.multipliers[1] == pytest.approx(2 * p.multipliers[0])
    # the same run (the RDP plan's events): PLD epsilon <= RDP epsilon
    assert plan_epsilon(rdp.events(), DELTA, "pld")[0] < rdp.epsilon


def test_rdp_plan_is_the_smallest_noise_meeting_the_target():
    plan = calibrate_plan(N, B, 3, 1.0, DELTA, iterations_per_epoch=T, accountant="rdp",
                          rule="constant_multiplier", kappas=(1.0, 0.8, 0.6))
    assert plan.epsilon <= 1.0
    assert plan.sigma_g == pytest.approx(tuple(k * plan.multipliers[0] for k in (1.0, 0.8, 0.6)))
    lower = plan.events()[:-3] + [type(e)(type(e.spec)(e.spec.sampling_prob, e.spec.sigma * (1 - 1e-5)), e.count)
                                  for e in plan.events()[-3:]]
    assert plan_epsilon(lower, DELTA, "rdp")[0] > 1.0


def test_runtime_rule_keeps_every_realized_epoch_dominated(plans):
    rdp, _ = plans
    clip, n_tilde = 0.1, 6_037.2
    floors = [rdp.k_tilde_floor(e, clip) for e in range(E)]
    assert floors == pytest.approx([k * N * clip for k in KAPPAS])
    epochs = []
    for e, released in enumerate((700.0, 100.0)):     # epoch 0 above its floor (600), epoch 1 below (300)
        kt, sg = rdp.runtime(e, released, n_tilde, clip)
        assert kt == max(released, floors[e])
        spec = iteration_spec(kt, n_tilde, B, clip, sg, rejection_k=5.0)
        assert spec.sampling_prob <= rdp.sampling_probs[e] and spec.sigma >= rdp.multipliers[e]
        epochs.append(DPISEpoch(T, kt, sg))
    run = DPISRun(n_tilde, B, clip, tuple(epochs), sigma_n=120.0, sigma_k=120.0, p_k=B / N, rejection_k=5.0,
                  iterations_per_epoch=T)
    assert follows_plan(run, rdp)
    # its realized epsilon is at most the plan's (domination), by either accountant
    assert plan_epsilon(dpis_events(run), DELTA, "rdp")[0] <= rdp.epsilon
    cheat = DPISRun(n_tilde, B, clip, (epochs[0], DPISEpoch(T, epochs[1].k_tilde, epochs[1].sigma_g * 0.9)),
                    sigma_n=120.0, sigma_k=120.0, p_k=B / N, iterations_per_epoch=T)
    assert not follows_plan(cheat, rdp)


def test_paper_schedule_worst_case_is_constant_and_decreasing_kappas_lower_the_noise():
    worst = paper_schedule(1.0, N, B, 4, EPS, DELTA, iterations_per_epoch=T)
    dpsgd = calibrate_plan(N, B, 4, EPS, DELTA, iterations_per_epoch=T, accountant="rdp")
    assert worst.guarantee and worst.order == dpsgd.order
    np.testing.assert_allclose(worst.sigma_g, dpsgd.sigma_g, rtol=1e-5)
    sched = paper_schedule((1.0, 0.8, 0.6, 0.5), N, B, 4, EPS, DELTA, iterations_per_epoch=T, a_e=0.5)
    assert sched.phases == (1, 1, 2, 2) and sched.epsilon <= EPS + 1e-9
    assert sched.sigma_g[0] == pytest.approx(dpsgd.sigma_g[0], rel=1e-5)
    assert all(a >= b - 1e-9 for a, b in zip(sched.sigma_g, sched.sigma_g[1:]))
    post = paper_schedule((1.0, 0.8, 0.6, 0.5), N, B, 4, EPS, DELTA, iterations_per_epoch=T, fixed_order=False)
    assert not post.guarantee and post.order is None


def test_bad_calibration_input():
    with pytest.raises(ValueError, match="auxiliary releases"):
        calibrate_plan(N, B, 2, 0.01, DELTA, sigma_n=1.0, accountant="rdp")
    with pytest.raises(ValueError, match="kappas\\[1\\] must be >= rejection_k"):
        calibrate_plan(N, B, 2, 1.0, DELTA, kappas=(1.0, 0.02), rejection_k=5.0, accountant="rdp")
    with pytest.raises(ValueError, match="kappas must hold 1 or epochs"):
        calibrate_plan(N, B, 3, 1.0, DELTA, kappas=(1.0, 0.5), accountant="rdp")
    with pytest.raises(ValueError, match="rule must be one of"):
        calibrate_plan(N, B, 2, 1.0, DELTA, rule="paper", accountant="rdp")
    assert bisect_smallest(lambda x: x >= 3.0, 1.0, rtol=1e-6) == pytest.approx(3.0, rel=1e-6)


@pytest.mark.skipif(not TABLE.exists(), reason="run benchmarks/dpis_table.py")
def test_benchmark_table_pld_is_at_most_rdp():
    table = json.loads(TABLE.read_text())
    assert {r["epsilon"] for r in table["rows"]} == {0.5, 1.0, 4.0}
    for r in table["rows"]:
        assert r["epsilon_pld_of_rdp_plan"] <= r["epsilon_rdp_of_rdp_plan"] <= r["epsilon"] + 1e-9
        assert r["epsilon_pld_of_pld_plan"] <= r["epsilon"]
        assert all(p <= q for p, q in zip(r["sigma_g_pld"], r["sigma_g_rdp"]))
    for r in table["paper_rule"]:
        assert r["epsilon_pld_of_filter_run"] <= r["epsilon_rdp_filter"] <= r["epsilon"] + 1e-9
