"""The candidate axis's width: a shrinking ladder recompiles only where it pays, and the width never changes a
number (mcacct.engine.widths)."""

import jax
import numpy as np
import pytest

import mcacct
import mcacct.engine.runner as runner
from mcacct.engine.problem import Problem
from mcacct.engine.widths import GroupClock, next_width, padded_width
from mcacct.statistics.accumulators import DIRECTIONS


def test_next_width_compiles_only_where_the_saving_exceeds_the_compile_time():
    # no program yet, or growing: the padded width
    assert next_width(0, 5, 10, None, None, False) == padded_width(5) == 6
    assert next_width(4, 5, 10, 1.0, 100.0, False) == 6
    # unknown times, or the smaller program already compiled: switch (the behaviour before the rule)
    assert next_width(16, 5, 10, None, 3.0, False) == 6
    assert next_width(16, 5, 10, 1.0, None, False) == 6
    assert next_width(16, 5, 1, 0.1, 100.0, True) == 6
    # 10 groups of 1 s at width 16 -> 6 save 6.25 s: worth a 6 s compile, not a 7 s one
    assert next_width(16, 5, 10, 1.0, 6.0, False) == 6
    assert next_width(16, 5, 10, 1.0, 7.0, False) == 16
    # the width never drops below what the active candidates need
    for cur in (2, 3, 4, 6, 8, 12, 16):
        for j in range(1, cur + 1):
            assert next_width(cur, j, 3, 0.5, 50.0, False) >= j


def test_group_clock_reads_steady_gaps_and_skips_the_one_after_a_switch(monkeypatch):
    t = iter([0.0, 5.0, 6.0, 7.0, 20.0, 20.5])
    monkeypatch.setattr("mcacct.engine.widths.time.perf_counter", lambda: next(t))
    c = GroupClock()
    assert c.group_seconds is None
    c.arrived()                      # t = 0: the first arrival has no gap
    c.arrived()                      # 5
    assert c.group_seconds == 5.0
    c.arrived()                      # 6
    assert c.group_seconds == 1.0
    c.switched(0.5)                  # to a program half as wide
    assert c.group_seconds == 0.5
    c.arrived()                      # 7 (the gap may hold a compilation: ignored)
    c.arrived()                      # 20
    assert c.group_seconds == 13.0
    assert c.steady_draws == 0 and c.steady_seconds == 5.0 + 1.0 + 13.0   # arrived() without draws counts none


def test_group_clock_sums_the_steady_draws_and_gaps(monkeypatch):
    t = iter([0.0, 2.0, 3.0, 10.0, 11.5])
    monkeypatch.setattr("mcacct.engine.widths.time.perf_counter", lambda: next(t))
    c = GroupClock()
    c.arrived(100)                   # the first group (compiled): no gap, its draws left out
    c.arrived(100)                   # 2
    c.arrived(100)                   # 1
    c.switched(2.0)
    c.arrived(100)                   # 7: a new program's first group, left out
    c.arrived(40)                    # 1.5: a last, partial group
    assert (c.steady_draws, c.steady_seconds) == (240, 4.5)


SIGMAS, KEY, N, CHUNK, EPS = (0.8, 0.9, 1.0, 1.1), jax.random.key(11), 5 * 128, 128, (0.5, 1.0)


def _problem(skip_zero: bool) -> Problem:
    return Problem(mcacct.BMinSep(0.3, 2, 24), mcacct.BandedToeplitz((0.6, 0.4)), skip_zero=skip_zero)


def _run_dropping(pb: Problem, policy: str, monkeypatch):
    """Candidates 0 and 1 leave after the second group; ``keep`` stays at width 4, ``shrink`` moves to 2."""
    used = []

    def chosen(cur, j, *rest):
        w = max(cur, padded_width(j)) if policy == "keep" else padded_width(j)
        used.append(w)
        return w

    monkeypatch.setattr(runner, "next_width", chosen)
    run = runner.run_ladder(pb, SIGMAS, KEY, N, EPS, CHUNK, drop=lambda r: [0, 1] if r.chunks_done >= 2 else [])
    assert run.active == [2, 3] and used[0] == 4 and used[-1] == (4 if policy == "keep" else 2)
    return run


@pytest.mark.parametrize("policy,skip_zero", [("keep", False), ("shrink", False), ("keep", True)])
def test_a_candidates_statistics_do_not_depend_on_the_width_it_ran_at(policy, skip_zero, monkeypatch):
    """Either way every candidate's statistics equal a run of it alone. With the skips of provably zero
    contributions the count and sums are equal, and the histogram is not compared: a skipped draw sits in its
    bound's bin, and which draws are skipped depends on the other candidates of the run (docs/soundness.md,
    "Provably zero contributions")."""
    pb = _problem(skip_zero)
    run = _run_dropping(pb, policy, monkeypatch)
    for j in (2, 3):
        alone = runner.run_ladder(pb, [SIGMAS[j]], KEY, N, EPS, CHUNK)
        for d in DIRECTIONS:
            a, b = run.stats[j][d], alone.stats[0][d]
            assert a.count == b.count == N and a.sums == b.sums
            if not skip_zero:
                np.testing.assert_array_equal(a.hist, b.hist)


def test_with_skips_the_kept_and_the_narrower_width_give_the_same_histograms(monkeypatch):
    """The padding repeats an active candidate, so the skipped draws are the same at either width."""
    pb = _problem(True)
    keep, shrink = _run_dropping(pb, "keep", monkeypatch), _run_dropping(pb, "shrink", monkeypatch)
    for j in range(4):
        for d in DIRECTIONS:
            a, b = keep.stats[j][d], shrink.stats[j][d]
            assert a.count == b.count and a.sums == b.sums
            np.testing.assert_array_equal(a.hist, b.hist)
