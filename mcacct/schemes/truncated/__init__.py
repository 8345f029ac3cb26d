"""Truncated (fixed-batch-size) b-min-sep subsampling (Dong & Ganesh 2026, arXiv:2602.09338, App. D) and the
kernels only it uses:

* :mod:`~mcacct.schemes.truncated.scheme` — :class:`TruncatedBMinSep`, the scheme;
* :mod:`~mcacct.schemes.truncated.screen` — the screened count chain (which draws can be truncated at all);
* :mod:`~mcacct.schemes.truncated.counts` — exact counts of the other examples (binomial and hypergeometric
  tables);
* :mod:`~mcacct.schemes.truncated.virtual` and :mod:`~mcacct.schemes.truncated.digits` — the warm start's
  virtual history and its exact digit tables.
"""

from mcacct.schemes.truncated.scheme import TruncatedBMinSep

__all__ = ["TruncatedBMinSep"]
