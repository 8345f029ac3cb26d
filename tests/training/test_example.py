"""The DP-BandMF training example runs end to end (its --quick smoke form): C optimised, sigma calibrated,
a flax model trained on scikit-learn's digits with the BandMF noise transformation."""

import importlib.util
import os

import pytest

from helpers import ROOT


def test_train_bandmf_digits_quick():
    pytest.importorskip("flax")
    pytest.importorskip("sklearn")
    path = os.path.join(ROOT, "examples", "train_bandmf_digits.py")
    spec = importlib.util.spec_from_file_location("train_bandmf_digits", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(["--quick"])
    assert out["sigma"] > 0 and out["delta"] <= 1e-2 and 0.0 <= out["test_accuracy"] <= 1.0
    assert out["iterations"] == 20 and out["bands"] <= out["min_sep"]
