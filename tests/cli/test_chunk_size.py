"""``--chunk-size auto`` (the default): 4096 on CPU, on accelerators the largest power of two the device's memory
holds (engine.problem.auto_chunk_size); the resolved number is recorded; a device running out of memory gets a
clear error naming --chunk-size."""

from __future__ import annotations

import json

import pytest

from mcacct import BMinSep, Problem
from mcacct.cli import main
from mcacct.engine.problem import (AUTO_CHUNK_BYTES_PER_ELEMENT, AUTO_CHUNK_MAX, DEFAULT_CHUNK_SIZE,
                                   auto_chunk_size)

DELTA = ["delta", "--sigma", "1", "--epsilon", "1", "--iterations", "16", "--min-sep", "2", "--batch-size", "4",
         "--dataset-size", "64", "--samples", "600", "--json", "--quiet"]


class FakeDevice:
    def __init__(self, platform: str, stats):
        self.platform, self._stats = platform, stats

    def memory_stats(self):
        if isinstance(self._stats, Exception):
            raise self._stats
        return self._stats


def _problem(n: int) -> Problem:
    return Problem(BMinSep(0.01, 4, n, True))


def test_auto_is_the_default_chunk_on_cpu():
    assert auto_chunk_size(_problem(64)) == DEFAULT_CHUNK_SIZE
    assert auto_chunk_size(_problem(64), FakeDevice("cpu", {"bytes_limit": 10**12})) == DEFAULT_CHUNK_SIZE


@pytest.mark.parametrize("limit_gib, n, expected", [
    (105, 7200, 65536),     # an H200 (its default 75% of 141 GB): 0.9 L / (n beta) = 110k -> 65536
    (60, 7200, 32768),      # an H100 80 GB: 63k -> 32768
    (105, 1024, AUTO_CHUNK_MAX),   # capped
    (0.01, 7200, 256),      # floored
])
def test_auto_on_an_accelerator_fits_its_memory(limit_gib, n, expected):
    limit = int(limit_gib * 2**30)
    got = auto_chunk_size(_problem(n), FakeDevice("gpu", {"bytes_limit": limit}))
    assert got == expected and got & (got - 1) == 0
    if 256 < got < AUTO_CHUNK_MAX:  # the largest power of two within the budget
        assert got * n * AUTO_CHUNK_BYTES_PER_ELEMENT <= 0.9 * limit < 2 * got * n * AUTO_CHUNK_BYTES_PER_ELEMENT


@pytest.mark.parametrize("stats", [None, {}, {"bytes_limit": 0}, RuntimeError("no statistics")])
def test_auto_without_memory_statistics_is_the_default(stats):
    assert auto_chunk_size(_problem(7200), FakeDevice("tpu", stats)) == DEFAULT_CHUNK_SIZE


def test_cli_records_the_resolved_chunk(capsys):
    assert main(DELTA) == 0
    assert json.loads(capsys.readouterr().out)["chunk_size"] == DEFAULT_CHUNK_SIZE
    assert main(DELTA + ["--chunk-size", "AUTO"]) == 0
    assert json.loads(capsys.readouterr().out)["chunk_size"] == DEFAULT_CHUNK_SIZE
    assert main(DELTA + ["--chunk-size", "512"]) == 0
    assert json.loads(capsys.readouterr().out)["chunk_size"] == 512


def test_out_of_device_memory_names_the_chunk_size(monkeypatch, capsys):
    import mcacct.engine.estimate as estimate_module

    def exhausted(*args, **kwargs):
        raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 72.80GiB")

    monkeypatch.setattr(estimate_module, "estimate", exhausted)
    assert main(DELTA + ["--chunk-size", "1024"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: the device ran out of memory at --chunk-size 1024") and "e.g. 256" in err
    assert "RESOURCE_EXHAUSTED" in err


def test_other_errors_are_not_taken_for_memory(monkeypatch):
    import mcacct.engine.estimate as estimate_module

    def broken(*args, **kwargs):
        raise RuntimeError("something else")

    monkeypatch.setattr(estimate_module, "estimate", broken)
    with pytest.raises(RuntimeError, match="something else"):
        main(DELTA)
