"""Small helpers shared by the tests (not oracles: they call the package)."""

import os

import numpy as np

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


def table_weights(packed: np.ndarray, cell_bits: int) -> np.ndarray:
    """Integer weights (units of 2^-64) of each cell value, from the packed alias entries."""
    cap = 1 << (64 - cell_bits)
    w = [0] * len(packed)
    for j, e in enumerate(int(x) for x in packed):
        t, a = e >> cell_bits, e & ((1 << cell_bits) - 1)
        w[j] += t
        w[a] += cap - t
    return np.array(w, dtype=object)


def simulate_examples(rng, others, b, p, n, warm, samples):
    """Independent simulation: every other example runs its own b-min-sep chain (Alg. 1 / Alg. 2)."""
    blocked = np.zeros((samples, others), np.int64)  # rounds still blocked
    if warm and b > 1:
        avail = rng.random((samples, others)) < 1.0 / (1.0 + (b - 1) * p)
        blocked = np.where(avail, 0, rng.integers(1, b, size=(samples, others)))
    r = np.zeros((samples, n), np.int64)
    for i in range(n):
        drawn = (blocked == 0) & (rng.random((samples, others)) < p)
        r[:, i] = drawn.sum(axis=1)
        blocked = np.where(drawn, b - 1, np.maximum(blocked - 1, 0))
    return r


def two_sample_chi2(a, b_):
    """Pearson chi-square of two samples' histograms over the cells with at least 10 expected counts; returns
    (statistic, degrees of freedom)."""
    keys = sorted(set(a) | set(b_))
    ca = np.array([a.count(k) for k in keys], float)
    cb = np.array([b_.count(k) for k in keys], float)
    tot = ca + cb
    keep = tot >= 20
    ca = np.append(ca[keep], ca[~keep].sum())
    cb = np.append(cb[keep], cb[~keep].sum())
    tot = ca + cb
    na, nb = ca.sum(), cb.sum()
    mask = tot > 0
    ea, eb = tot * na / (na + nb), tot * nb / (na + nb)
    stat = float(np.sum(((ca - ea) ** 2 / ea + (cb - eb) ** 2 / eb)[mask]))
    return stat, int(mask.sum()) - 1


def run_cli(argv, capsys):
    """``(exit status, stdout, stderr)`` of ``mcacct argv`` in-process, argparse's refusals (SystemExit) included."""
    from mcacct.cli.commands import main
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err
