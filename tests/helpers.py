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
