"""Issue #37: options that the chosen configuration would ignore, or find out about only after the work, are
refused up front, naming the flag (or parameter) and when it applies. Every case is refused before any
computation, so each runs in well under a second (after the imports)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

import mcacct
from mcacct.cli import main

RUN = {"n_tilde": 6000.0, "batch_size": 60, "clip": 1.0,
       "epochs": [{"iterations": 10, "k_tilde": 6000.0, "sigma_g": 1.0}]}
DPIS_EPS = ["dpis", "epsilon", "--run", "run.json", "--delta", "1e-5"]
DPIS_CAL = ["dpis", "calibrate", "--dataset-size", "6000", "--batch-size", "60", "--epochs", "2", "--epsilon", "2",
            "--delta", "1e-5"]
IND = ["individual", "--sigma", "1", "--sampling-prob", "0.1", "--delta", "1e-5", "--norms"]

# (argv, text the last line must contain)
CASES = [
    # (1) dpis: PLD flags with --accountant rdp, the paper's schedule with --accountant pld, K' with --sigma-k 0
    (DPIS_EPS + ["--accountant", "rdp", "--value-discretization-interval", "1e-3"],
     "--value-discretization-interval does not apply with --accountant rdp"),
    (DPIS_EPS + ["--accountant", "rdp", "--no-error-estimate"],
     "--no-error-estimate does not apply with --accountant rdp"),
    (DPIS_CAL + ["--accountant", "rdp", "--value-discretization-interval", "1e-2"],
     "--value-discretization-interval does not apply with --accountant rdp"),
    (DPIS_CAL + ["--accountant", "rdp", "--rtol", "1e-2"], "--rtol does not apply with --accountant rdp"),
    (DPIS_CAL + ["--accountant", "pld", "--a-e", "0.8"], "--a-e does not apply with --accountant pld"),
    (DPIS_CAL + ["--sigma-k", "0", "--p-k", "0.05"], "--p-k does not apply with --sigma-k 0"),
    # (2) strategy: --max-steps only optimises; c_col no longer than the horizon
    (["strategy", "--iterations", "16", "--c-col", "1,0.5", "--max-steps", "5"],
     "--max-steps does not apply with --c-col"),
    (["strategy", "--iterations", "4", "--c-col", "1,1,1,1,1,1,1,1"],
     "--c-col must have between 1 and --iterations = 4 entries; got 8"),
    # (4) individual: non-real dtypes and archives, named with the file
    (IND + ["complex.npy"],
     "--norms 'complex.npy' must hold real numbers (an integer or float dtype); got dtype complex128"),
    (IND + ["text.npy"], "--norms 'text.npy' must hold real numbers"),
    (IND + ["numeric_text.npy"], "--norms 'numeric_text.npy' must hold real numbers"),
    (IND + ["flags.npy"], "--norms 'flags.npy' must hold real numbers"),
    (IND + ["arrays.npz"], "--norms 'arrays.npz' must be a .npy file holding one array"),
    (IND + ["plain.txt"], "--norms 'plain.txt' cannot be read as a .npy array"),
    # (6) calibrate: the ladder's length is checked before the pilot, naming the flag given
    (["calibrate", "--no-baselines", "--below", "1e8"],
     "--below must be an integer in [0, 417] when --ladder-ratio = 1.01"),
    (["calibrate", "--no-baselines", "--above", "1000"], "--above must be an integer in [0, 417]"),
    (["calibrate", "--no-baselines", "--ladder-ratio", "2", "--below", "7"],
     "--below must be an integer in [0, 6] when --ladder-ratio = 2"),
    (["calibrate", "--no-baselines", "--ladder-ratio", "100"],
     "--ladder-ratio must be in (1, 64] unless above and below"),
]


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps(RUN))
    np.save("norms.npy", np.full((3, 4), 0.5))
    np.save("complex.npy", np.full((3, 4), 0.5) + 0.25j)
    np.save("text.npy", np.array([["a", "b"]]))
    np.save("numeric_text.npy", np.array([["0.5", "0.2"]]))
    np.save("flags.npy", np.array([[True, False]]))
    np.savez("arrays.npz", a=np.ones((2, 3)))
    (tmp_path / "plain.txt").write_text("hello")
    return tmp_path


def _refused(argv, capsys, where) -> str:
    before = sorted(os.listdir(where))
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse refusals
        rc = e.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, err
    assert "Traceback" not in err
    assert lines and lines[-1].startswith("error: "), err
    assert sorted(os.listdir(where)) == before, "a refused command wrote something"
    return lines[-1]


@pytest.mark.parametrize("argv,needle", CASES, ids=[" ".join(a)[:80] for a, _ in CASES])
def test_ignored_or_late_flags_are_refused_up_front(argv, needle, workdir, capsys):
    assert needle in _refused(argv, capsys, workdir)


def test_individual_plot_without_matplotlib_is_refused_before_the_work(workdir, capsys, monkeypatch):
    import mcacct.individual.accountant as acc

    def never(*a, **k):
        raise AssertionError("the computation ran before --plot was checked")

    monkeypatch.setattr(acc, "individual_epsilons", never)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    line = _refused(IND + ["norms.npy", "--plot", "hist.png"], capsys, workdir)
    assert "--plot needs matplotlib" in line


def test_individual_plot_to_an_unwritable_place_is_refused(workdir, capsys):
    os.mkdir("dir.png")  # a directory where the image would go
    assert "--plot: 'dir.png' cannot be written" in _refused(IND + ["norms.npy", "--plot", "dir.png"], capsys,
                                                             workdir)


def test_strategy_c_col_as_long_as_the_horizon_is_accepted(capsys):
    assert main(["strategy", "--iterations", "4", "--c-col", "1,0.5,0.25,0.125", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bands"] == 4


# -- the Python API --------------------------------------------------------------------------------------------
def test_strategy_error_refuses_c_col_longer_than_iterations():
    from mcacct.strategies import strategy_error
    with pytest.raises(ValueError, match=r"c_col must have at most iterations = 4 entries; got 5"):
        strategy_error((1.0, 0.5, 0.4, 0.3, 0.2), 4)


def test_individual_epsilons_refuses_non_real_ratios():
    from mcacct.individual.accountant import individual_epsilons
    for bad in (np.full((2, 3), 0.5) + 0j, np.array([["0.5"]]), np.array([[True]])):
        with pytest.raises(TypeError, match=r"ratios must be a real-valued array .*got dtype"):
            individual_epsilons(bad, 1.0, 0.1, 1e-5)


def test_from_jax_privacy_refuses_an_unused_dataset_size():
    bs = pytest.importorskip("jax_privacy.batch_selection")
    for sel in (bs.BMinSepSampling(0.3, 16, 4), bs.CyclicPoissonSampling(0.5, 16, cycle_length=4),
                bs.BallsInBinsSampling(16, 4)):
        with pytest.raises(ValueError, match=r"dataset_size does not apply to \w+"):
            mcacct.from_jax_privacy(sel, dataset_size=100)
        mcacct.from_jax_privacy(sel)  # without it: fine
    truncated = bs.BMinSepSampling(0.3, 16, 4, truncated_batch_size=10)
    assert mcacct.from_jax_privacy(truncated, dataset_size=100).dataset_size == 100


TINY = dict(sampling_prob=0.2, steps=16, min_sep=2, c_col=(0.6, 0.4))


@pytest.mark.parametrize("kwargs,match", [
    (dict(sampling_prob=0.1, steps=10, warm_start=False), "warm_start needs a b-min-sep scheme"),
    (dict(sampling_prob=0.1, steps=10, warm_start=True), "warm_start needs a b-min-sep scheme"),
    (dict(sampling_prob=0.1, steps=10, dataset_size=1000), "dataset_size does not apply with sampling_prob"),
    (dict(TINY, dataset_size=1000), "dataset_size does not apply with sampling_prob"),
    (dict(TINY, pilot_samples=0), r"pilot_samples must be an integer in \[1, inf\); got 0"),
    (dict(TINY, below=10**8), r"below must be an integer in \[0, 417\]"),
    (dict(TINY, sigmas=(1.0, 2.0), pilot_samples=100), "pilot_samples does not apply with sigmas"),
])
def test_get_noise_multiplier_refuses_unused_options(kwargs, match):
    import jax
    with pytest.raises(ValueError, match=match):
        mcacct.get_noise_multiplier(1.0, 1e-3, key=jax.random.key(0), progress=False, **kwargs)


def test_get_noise_multiplier_warm_start_applies_to_b_min_sep_only():
    import jax
    from mcacct.noise_multiplier import _problem
    assert _problem(16, 0.2, None, None, 2, (0.6, 0.4), None, False, None).scheme.warm_start is False
    assert _problem(16, 0.2, None, None, 2, (0.6, 0.4), None, None, None).scheme.warm_start is True  # default
    prob = mcacct.Problem(mcacct.BMinSep(0.2, 2, 16), mcacct.BandedToeplitz((0.6, 0.4)))
    with pytest.raises(ValueError, match="problem fixes the scheme and strategy; do not give warm_start"):
        mcacct.get_noise_multiplier(1.0, 1e-3, problem=prob, warm_start=False, key=jax.random.key(0))
    with pytest.raises(ValueError, match="do not give dataset_size"):
        mcacct.get_noise_multiplier(1.0, 1e-3, problem=prob, dataset_size=100, key=jax.random.key(0))
    bs = pytest.importorskip("jax_privacy.batch_selection")
    sel = bs.BMinSepSampling(0.2, 16, 2)
    with pytest.raises(ValueError, match="warm_start comes from batch_selection"):
        mcacct.get_noise_multiplier(1.0, 1e-3, batch_selection=sel, warm_start=False, key=jax.random.key(0))
    with pytest.raises(ValueError, match="dataset_size does not apply to BMinSepSampling"):
        mcacct.get_noise_multiplier(1.0, 1e-3, batch_selection=sel, c_col=(0.6, 0.4), dataset_size=100,
                                    key=jax.random.key(0))


@pytest.mark.parametrize("kwargs,match", [
    (dict(pilot_samples=0), r"pilot_samples must be an integer in \[1, inf\); got 0"),
    (dict(pilot_samples=-5), r"pilot_samples must be an integer in \[1, inf\)"),
    (dict(sigmas=(1.0,), pilot_samples=500), "pilot_samples does not apply with sigmas"),
    (dict(below=10**8), r"below must be an integer in \[0, 417\] when ladder_ratio = 1.01"),
    (dict(above=500, ladder_ratio=1.01), r"above must be an integer in \[0, 417\]"),
])
def test_calibrate_refuses_before_the_pilot(kwargs, match, monkeypatch):
    import jax
    import mcacct.evr.calibrate as cal

    def never(*a, **k):
        raise AssertionError("the pilot ran before the options were checked")

    monkeypatch.setattr(cal, "_pilot", never)
    monkeypatch.setattr(cal, "calibration_budget", never)
    prob = mcacct.Problem(mcacct.BMinSep(0.2, 2, 16), mcacct.BandedToeplitz((0.6, 0.4)))
    with pytest.raises(ValueError, match=match):
        mcacct.calibrate(prob, 1.0, 1e-2, jax.random.key(0), **kwargs)
