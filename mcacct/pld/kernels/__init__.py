r"""The jitted kernels of the PLD accountant, one module per step of the data flow:

- :mod:`~mcacct.pld.kernels.discretise`: a dominating pair into single-step privacy-loss pmfs (remove, add) on the
  loss grid, and the Chernoff window of their composition;
- :mod:`~mcacct.pld.kernels.compose`: FFT composition by binary powering, with the exponential tilt, the window's
  tails and the round-off bound (Koskela, Jälkö and Honkela, 2020, arXiv:1906.03049);
- :mod:`~mcacct.pld.kernels.query`: :math:`\delta(\varepsilon)` and :math:`\varepsilon(\delta)` of a discrete pmf,
  plain or certified.

Arrays and numbers in; no spec class is imported (the specs are :mod:`mcacct.pld.specs`).
"""

from mcacct.pld.kernels.compose import compose_arrays_batch, compose_query_batch, tilted_batch
from mcacct.pld.kernels.discretise import single_batch
from mcacct.pld.kernels.query import query_delta, query_epsilon, query_one, query_one_jit

__all__ = ["single_batch", "tilted_batch", "compose_query_batch", "compose_arrays_batch", "query_delta",
           "query_epsilon", "query_one", "query_one_jit"]
