r"""The candidate axis of the runner's compiled program: its padded size, and when a shrinking ladder recompiles.

The runner's chunk program takes the ladder's candidates as one axis of static size ``W``: every ``W`` is its own
XLA program (seconds to compile on a CPU for a small problem, tens of seconds at the production shape). A
candidate's statistics do not depend on ``W`` (the padded entries repeat the last candidate and are ignored;
``tests/engine/test_runner.py`` checks a candidate of a ladder against a run of it alone), so the choice of
``W`` is a matter of cost only, never of the numbers.

When candidates leave a run (a verification that already failed), the runner can keep the program it has, with
more padding, or compile a smaller one. :func:`next_width` compiles only where the work saved is worth it:

.. math::
    R \, t_g \, (1 - W'/W) > t_c,

with ``R`` the groups of chunks left, ``t_g`` the measured seconds per group at width ``W``, ``W'`` the padded
width of the candidates left and ``t_c`` the measured time of the latest first call of a new width of the same
function in this process (its compilation, or reading it from the persistent cache). The saving counts the whole
group time as proportional to ``W``, an overestimate (the draws, counts and sliding sums are shared by the
candidates), so the rule errs towards recompiling, as the runner always did before.
"""

from __future__ import annotations

import time

__all__ = ["padded_width", "next_width", "GroupClock", "Programs"]


def padded_width(j: int) -> int:
    """The candidate-axis size a group of ``j`` active candidates runs with: the smallest of
    ``2, 3, 4, 6, 8, 12, 16, 24, ...`` (powers of two and 1.5 times them) that holds ``j``, so at most a third
    of the work is padding and a shrinking ladder compiles few programs.

    Parameters
    ----------
    j : int
        Active candidates.

    Returns
    -------
    int
        The size (2 for ``j <= 2``).
    """
    size = 2
    while size < j:
        size = size * 3 // 2 if size & (size - 1) == 0 else size * 4 // 3
    return size


def next_width(current: int, active: int, remaining_groups: int, group_seconds: float | None,
               compile_seconds: float | None, compiled: bool) -> int:
    r"""The candidate-axis size of the next group: ``padded_width(active)``, or ``current`` where compiling the
    smaller program would cost more than it saves (module docstring).

    Parameters
    ----------
    current : int
        The width of the program the run is using (0 before its first group).
    active : int
        Candidates still running (>= 1).
    remaining_groups : int
        Groups of chunks left, this one included.
    group_seconds, compile_seconds : float or None
        Measured seconds per group at ``current`` and to compile a program; ``None`` before they are known (the
        smaller program is then taken, as without this rule).
    compiled : bool
        Whether the program of width ``padded_width(active)`` already ran in this process (free to switch to).

    Returns
    -------
    int
        ``padded_width(active)`` or ``current`` (>= ``active``).
    """
    want = padded_width(active)
    if want >= current or compiled or group_seconds is None or compile_seconds is None:
        return want
    saved = remaining_groups * group_seconds * (1.0 - want / current)
    return want if saved > compile_seconds else current


class GroupClock:
    """Wall-clock seconds of a run's groups, read when each group's results arrive (the runner dispatches one
    group ahead, so in a steady run the gap between arrivals is a group's time): ``group_seconds``, the latest
    gap at the current width, ``None`` before two arrivals; ``steady_draws`` and ``steady_seconds``, the draws of
    the groups whose gaps were read and those gaps summed (a run's steady rate, without its start: the first group,
    with tracing and compiling, and a group after a switch of program are left out)."""

    def __init__(self) -> None:
        self._last: float | None = None
        self._skip = False
        self.group_seconds: float | None = None
        self.steady_draws = 0
        self.steady_seconds = 0.0

    def arrived(self, draws: int = 0) -> None:
        """Record that a group of ``draws`` draws arrived."""
        now = time.perf_counter()
        if self._last is not None and not self._skip:
            self.group_seconds = now - self._last
            self.steady_draws += int(draws)
            self.steady_seconds += self.group_seconds
        self._skip = False
        self._last = now

    def switched(self, ratio: float) -> None:
        """The run moved to a program ``ratio`` times as wide: scale the group time, and ignore the next gap
        (it may hold the new program's compilation)."""
        if self.group_seconds is not None:
            self.group_seconds *= ratio
        self._skip = True


class Programs:
    """What a process knows of one compiled group function's programs: the widths that have run (``widths``) and
    the seconds the latest new width's first call took (``compile_seconds``: tracing and compiling, or reading
    the persistent cache, plus at most one group's work; ``None`` before one)."""

    def __init__(self) -> None:
        self.widths: set[int] = set()
        self.compile_seconds: float | None = None
