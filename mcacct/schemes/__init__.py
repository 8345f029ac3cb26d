"""What is accounted: sampling schemes as frozen dataclasses behind :class:`~mcacct.schemes.base.AccountedScheme`.

* :mod:`~mcacct.schemes.base` — the contract (:class:`AccountedScheme`: sampling, loss, the mechanism,
  the sensitivity bound and the inputs of every systematic term), the base class ``Scheme``, ``jit_method``;
* :mod:`~mcacct.strategies.banded` — the banded Toeplitz strategy ``C``;
* :mod:`~mcacct.schemes.bminsep` — b-min-sep subsampling (Dong & Ganesh 2026, arXiv:2602.09338, Alg. 1–2) and
  its samplers and privacy loss;
* :mod:`~mcacct.schemes.truncated` (App. D), :mod:`~mcacct.schemes.multi_attribution` (Alg. 3),
  :mod:`~mcacct.schemes.banded_inverse` (App. B), :mod:`~mcacct.schemes.cyclic_poisson` and
  :mod:`~mcacct.schemes.balls_in_bins` (the baselines of §3);
* :mod:`~mcacct.schemes.mechanism` — a scheme's mechanism apart from its data (``Mechanism``: the pure functions
  the engine runs, bound to a strategy and ``KernelOptions``);
* :mod:`~mcacct.schemes.records` — the contract's records (``Draws``, ``Bounds`` with the loss-error models,
  ``SchemeSummary``);
* :mod:`~mcacct.schemes.api` — one sampling/loss API for every scheme (``sample``, ``sample_y``,
  ``privacy_loss``);
* :mod:`~mcacct.schemes.entry` — one entry per scheme (:class:`~mcacct.schemes.entry.SchemeInfo`): how mcacct
  offers it (command line, ``mcacct compare`` row, jax-privacy batch selection), declared as ``INFO`` next to
  each class; :mod:`~mcacct.schemes.flags` — the command-line facet (flags, builders' parsed arguments);
* :mod:`~mcacct.schemes.registry` — the one list of entries every consumer reads, ``register(...)``.

Each scheme composes the pure kernels of :mod:`mcacct.kernels` with its fields and states its own values of
the contract. Adding a scheme is one module (its class and its ``INFO``) and one ``register(...)`` call.
"""
