"""Pure kernels: plain numbers and arrays in, arrays out; no scheme is imported here.

Data flow of one Monte Carlo sample (Dong & Ganesh 2026, arXiv:2602.09338):

* :mod:`~mcacct.kernels.normal` — exact-inversion standard normal draws;
* :mod:`~mcacct.kernels.participation` — b-min-sep participation as a renewal process;
* :mod:`~mcacct.kernels.sliding` — sliding sums with the banded Toeplitz column (``C x``, ``<c, y>``);
* :mod:`~mcacct.kernels.output` — outputs ``y`` under the dominating pair and the shared draws of a ladder;
* :mod:`~mcacct.kernels.recursion` — the privacy-loss recursions of §5 / §6.2;
* :mod:`~mcacct.kernels.bound`, :mod:`~mcacct.kernels.block_terms`, :mod:`~mcacct.kernels.const_column`,
  :mod:`~mcacct.kernels.fused_bound` — cheap certified upper bounds of the remove loss (the last in one Pallas pass
  that keeps the noise on chip).

Schemes (:mod:`mcacct.schemes`) compose these with their fields; the engine (:mod:`mcacct.engine`) runs the
schemes' kernels over chunks and devices. A name ending in ``_t`` takes or returns *time-major* arrays,
``(iterations, samples, ...)``, the engine's layout; docs/glossary.md fixes this and mcacct's other words.
"""
