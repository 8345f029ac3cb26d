"""A PLD calibration reuses the batch sizes its earlier passes compiled (mcacct/pld/plan.py, ``_reused_batch``;
docs/pld.md, "Compiled shapes"): later passes compile no new batch size, and the result depends only on the
inputs."""

from __future__ import annotations

from mcacct.pld import CyclicPoissonBandMFSpec, pld_calibrate
from mcacct.pld import plan

SPEC = CyclicPoissonBandMFSpec(16, 2, 0.2, (0.8, 0.6), 1.0)
H = 1e-2


def test_later_passes_reuse_the_batch_sizes_of_earlier_ones(monkeypatch):
    # a small budget, so that the first pass (windows of 2048 and 1024 points) batches its compositions by 4 and
    # the later ones (1024 only) could batch by 8: they run by 4 instead, with the first pass's programs
    monkeypatch.setattr(plan, "CHUNK_BUDGET", 2 ** 14)
    shapes, compose = [], plan.compose_query_batch

    def compose_spy(pmfs, *args, **kw):
        shapes.append((kw["N"], pmfs.shape[0]))
        return compose(pmfs, *args, **kw)

    monkeypatch.setattr(plan, "compose_query_batch", compose_spy)
    first = pld_calibrate(SPEC, 1.0, 1e-3, value_discretization_interval=H)
    assert {n for n, _ in shapes} == {1024, 2048} and len(shapes) >= 4
    assert {b for _, b in shapes} == {4}, shapes  # the budget's 8 for windows of 1024 would be a new program
    assert pld_calibrate(SPEC, 1.0, 1e-3, value_discretization_interval=H) == first  # the same sigma: it depends on the inputs only


def test_reuse_picks_the_largest_recorded_batch_that_fits():
    key, batches = ("single", 1024, 2, "connect_dots", "poisson"), {}
    assert plan._reused_batch(None, key, 8) == 8
    assert plan._reused_batch(batches, key, 8) == 8
    assert plan._reused_batch(batches, key, 4) == 4  # nothing recorded at <= 4: compiled and recorded
    assert plan._reused_batch(batches, key, 16) == 8  # the largest recorded batch that fits
    assert batches == {key: {4, 8}}

