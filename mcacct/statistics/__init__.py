"""What a run accumulates and what it may conclude: below the engine and the PLD accountant.

* :mod:`~mcacct.statistics.accumulators` — per-chunk statistics (exact fixed-point sums of the contributions,
  histograms of the losses), their merge, and :math:`\\varepsilon` read from a :math:`\\delta` curve;
* :mod:`~mcacct.statistics.confidence` — the confidence bounds (Chernoff–KL), the target/base delta conversion of
  Dong & Ganesh 2026 (arXiv:2602.09338, App. A, Theorem A.1) and the Gaussian mechanism's closed forms.
"""
