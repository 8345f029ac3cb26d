"""What is accounted: sampling schemes as frozen dataclasses behind :class:`~mcacct.schemes.base.AccountedScheme`.

* :mod:`~mcacct.schemes.base` — the protocol the engine needs, the min-sep mixin, ``jit_method``;
* :mod:`~mcacct.schemes.strategy` — the banded Toeplitz strategy ``C``;
* :mod:`~mcacct.schemes.bminsep` — b-min-sep subsampling (Dong & Ganesh 2026, arXiv:2602.09338, Alg. 1–2) and
  its samplers and privacy loss;
* :mod:`~mcacct.schemes.truncated` (App. D), :mod:`~mcacct.schemes.multi_attribution` (Alg. 3),
  :mod:`~mcacct.schemes.banded_inverse` (App. B), :mod:`~mcacct.schemes.baselines` (cyclic Poisson,
  balls-in-bins, §3).

Each scheme composes the pure kernels of :mod:`mcacct.kernels` with its fields. The list of every scheme with
its command-line flags, serialisation and PLD baselines is :mod:`mcacct.registry`.
"""
