"""Small helpers shared by the tests (not oracles: they call the package)."""

import os

from mcacct.engine.runner import run_ladder


def run_direction(pb, sigma, key, direction, num_samples, epsilons, chunk_size, chunk_range=None, chunk_ids=None):
    """One direction's statistics of a one-candidate run of the engine (only chunks ``chunk_range`` or
    ``chunk_ids``)."""
    ids = chunk_ids if chunk_range is None else range(*chunk_range)
    return run_ladder(pb, [sigma], key, num_samples, epsilons, chunk_size, chunk_ids=ids).stats[0][direction]


#: The repository root (``launch/``, ``benchmarks/``, ``mcacct/`` live there).
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sigkill_when(proc, ready, timeout=120.0):
    """Poll ``ready()`` while the subprocess ``proc`` runs; SIGKILL it as soon as it holds, then reap it. Fails if
    the process ended first (nothing was interrupted); returns the process's stderr tail for messages."""
    import signal
    import time
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if ready():
                break
            time.sleep(0.005)
        assert proc.poll() is None, f"process ended before it could be killed: {proc.stderr.read()[-2000:]}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


def capture_saved_figures(monkeypatch, read):
    """Patch matplotlib's ``Figure.savefig`` to record ``read(first axes)`` of every figure saved, just before it
    is written; returns the list the records go to."""
    from matplotlib.figure import Figure
    seen = []
    orig = Figure.savefig

    def savefig(self, *a, **k):
        seen.append(read(self.axes[0]))
        return orig(self, *a, **k)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return seen
