"""DPIS dominating pairs and run files (mcacct.dpis.events, mcacct.dpis.runfile)."""

import json

import pytest

from mcacct import pld
from mcacct.dpis import (DPISEpoch, DPISRun, count_spec, dpis_events, iteration_spec, load_run, norm_sum_spec,
                         norm_sum_star_spec, run_from_dict, run_to_dict)


def _run(k_tildes, sigmas, *, n_tilde=10_000.0, b=100.0, clip=0.5, t=50, **kw):
    return DPISRun(n_tilde, b, clip, tuple(DPISEpoch(t, k, s) for k, s in zip(k_tildes, sigmas)), **kw)


@pytest.mark.parametrize("n_tilde,b,clip", [(10_000.0, 100.0, 1.0), (60_012.37, 256.0, 0.1), (777.7, 7.0, 3.3)])
def test_worst_case_k_tilde_without_aux_is_exactly_poisson_dpsgd(n_tilde, b, clip):
    sigma, t, epochs = 1.1, 37, 4
    run = _run([n_tilde * clip] * epochs, [sigma] * epochs, n_tilde=n_tilde, b=b, clip=clip, t=t)
    assert dpis_events(run) == [pld.Event(pld.PoissonGaussianSpec(b / n_tilde, sigma), t * epochs)]
    # the auxiliary releases are separate events; dropping them gives the same DP-SGD events
    with_aux = _run([n_tilde * clip] * epochs, [sigma] * epochs, n_tilde=n_tilde, b=b, clip=clip, t=t,
                    sigma_n=50.0, sigma_k=40.0, iterations_per_epoch=t)
    assert dpis_events(with_aux, auxiliary=False) == dpis_events(run)
    assert dpis_events(with_aux)[:2] == [pld.Event(count_spec(50.0), 1),
                                         pld.Event(norm_sum_spec(b / n_tilde, 40.0), epochs)]


def test_iteration_pair_rate_and_multiplier():
    # q = b C / K~, multiplier sigma_g N~ C / K~ (sensitivity K~/N~ against noise sigma_g C)
    s = iteration_spec(k_tilde=2_500.0, n_tilde=10_000.0, batch_size=100.0, clip=0.5, sigma_g=0.8)
    assert s.sampling_prob == pytest.approx(100 * 0.5 / 2_500)
    assert s.sigma == pytest.approx(0.8 * 10_000 * 0.5 / 2_500)
    assert s.sensitivity == 1.0 and s.steps == 1


def test_auxiliary_specs_follow_eq_11_and_the_full_sum():
    # K' of eq. (11): sensitivity C/p_K, noise sigma_K C -> multiplier sigma_K p_K
    assert norm_sum_spec(0.01, 200.0) == pld.PoissonGaussianSpec(0.01, 2.0)
    # K* sums over every record: no amplification
    assert norm_sum_star_spec(200.0) == pld.GaussianSpec(200.0)
    assert count_spec(3.0) == pld.GaussianSpec(3.0)


def test_events_merge_equal_epochs_and_count_releases():
    run = _run([2_000.0, 2_000.0, 3_000.0], [0.9, 0.9, 0.7], sigma_n=10.0, sigma_k=20.0, k_star_releases=2,
               iterations_per_epoch=50)
    ev = dpis_events(run)
    assert [e.count for e in ev] == [1, 3, 2, 100, 50]
    assert ev[2].spec == pld.GaussianSpec(20.0)
    assert run.iterations == 150 and run.norm_sum_rate == 0.01


@pytest.mark.parametrize("k_tilde,kw,match", [
    (40.0, {}, "batch_size\\*clip"),                                   # K~ < b C: probabilities above 1
    (200.0, {"rejection_k": 5}, "rejection_k\\*batch_size\\*clip"),    # K~ < k b C: the filter caps at 1
])
def test_k_tilde_below_the_covered_range_is_refused(k_tilde, kw, match):
    with pytest.raises(ValueError, match=match):
        _run([k_tilde], [1.0], **kw)
    with pytest.raises(ValueError, match="k_tilde must be >="):
        iteration_spec(k_tilde, 10_000.0, 100.0, 0.5, 1.0, **kw)
    _run([250.0], [1.0], rejection_k=5)  # exactly k b C is covered


@pytest.mark.parametrize("bad,match", [
    ({"sigma_g": 0.0}, "sigma_g"), ({"k_tilde": -1.0}, "k_tilde"), ({"iterations": -1}, "iterations"),
])
def test_bad_epoch_values_name_the_parameter(bad, match):
    fields = dict(iterations=10, k_tilde=100.0, sigma_g=1.0) | bad
    with pytest.raises(ValueError, match=match):
        DPISEpoch(**fields)


def test_run_file_round_trip(tmp_path):
    run = _run([2_000.0, 3_000.0], [0.9, 0.7], sigma_n=10.0, sigma_k=20.0, rejection_k=2.0, iterations_per_epoch=50)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run_to_dict(run)))
    assert load_run(path) == run
    assert dpis_events(load_run(path)) == dpis_events(run)


@pytest.mark.parametrize("mutate,match", [
    (lambda d: d.pop("n_tilde"), "n_tilde is required"),
    (lambda d: d.update(extra=1), "unknown field"),
    (lambda d: d["epochs"][1].update(k_tilde="big"), "epochs\\[1\\].k_tilde must be a finite number"),
    (lambda d: d["epochs"][0].update(sigma_g=-1), "epochs\\[0\\].sigma_g must be in"),
    (lambda d: d["epochs"][1].update(k_tilde=5.0), "epochs\\[1\\]: k_tilde must be >="),
    (lambda d: d["epochs"][0].pop("iterations"), "epochs\\[0\\].iterations is required"),
    (lambda d: d.update(epochs=[]), "at least one entry"),
])
def test_bad_run_files_name_the_entry(mutate, match):
    data = {"n_tilde": 1000.0, "batch_size": 10, "clip": 1.0,
            "epochs": [{"iterations": 5, "k_tilde": 500.0, "sigma_g": 1.0},
                       {"iterations": 5, "k_tilde": 400.0, "sigma_g": 1.0}]}
    run_from_dict(data)
    mutate(data)
    with pytest.raises(ValueError, match=match):
        run_from_dict(data)


def test_unreadable_run_files(tmp_path):
    with pytest.raises(ValueError, match="cannot be read"):
        load_run(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_run(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ValueError, match="must be a JSON object"):
        load_run(tmp_path / "list.json")
