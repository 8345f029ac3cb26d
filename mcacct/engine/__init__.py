"""How it is run: the Monte Carlo engine.

* :mod:`~mcacct.engine.problem` — :class:`~mcacct.engine.problem.Problem` (scheme, strategy, kernel) and the
  chunk plan (chunks, blocks, keys);
* :mod:`~mcacct.statistics.accumulators` — per-chunk statistics (exact fixed-point sums, histograms) and their
  merge;
* :mod:`~mcacct.engine.systematic` — proven bounds on the sampler's and kernel's systematic errors;
* :mod:`~mcacct.engine.runner` — :func:`~mcacct.engine.runner.run_ladder`, the one runner: a ladder of noise
  multipliers x both directions on shared draws, over a device mesh and processes;
* :mod:`~mcacct.engine.distributed` — processes: chunk plans, ``jax.distributed``, the exact all-reduce;
* :mod:`~mcacct.engine.estimate` — :func:`~mcacct.engine.estimate.estimate` at one sigma with confidence
  bounds.
"""
