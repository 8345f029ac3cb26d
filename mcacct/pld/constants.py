"""Constants of the PLD accountant: noise truncation, composition-window tail budget, the Chernoff exponents of the
window and tilt, grid and batch budgets, and the FFT round-off model (docs/pld.md, "FFT round-off")."""

from __future__ import annotations

from typing import Literal

import numpy as np


Discretization = Literal["connect_dots", "round_up"]

# Noise mass beyond this many standard deviations is truncated (pessimistically).
Z_TRUNC = 10.0
# Total tail mass allowed outside the composition window (both sides).
TAIL_TRUNCATION = 1e-15
# Chernoff exponents tried for the window/tail bounds.
# lambda > 0 (upper tails, choice of the tilt): LAMBDA_SUB interleaved doubling sequences;
# lambda < 0 (lower tails): ratio 2 (see _log_mgf). The log-MGF vector is [+LAMBDAS, -LAMBDAS_NEG].
LAMBDA_SUB = 2
LAMBDAS = 3e-3 * 2.0 ** (np.arange(21 * LAMBDA_SUB) / LAMBDA_SUB)  # 3e-3 ... 4.4e3, ratio 2**(1/2)
LAMBDAS_NEG = 3e-3 * 2.0 ** np.arange(21)  # 3e-3 ... 3.1e3, ratio 2
# Largest single-step grid (number of loss points) we accept.
MAX_GRID = 1 << 23
# Budget (sigmas x FFT size) per vmapped chunk.
CHUNK_BUDGET = 1 << 22
# Memory budget of one composition, in bytes of working memory, estimated as BYTES_PER_POINT per window point
# and direction (the FFT composition of pld_epsilon / pld_delta / calibrate / mechanism_pld: two directions of N
# points; one zero-padded convolution of two PLDs in events and certified compositions: one direction). Measured
# on CPU: ~49 bytes per point and direction (float64 window, complex128 spectrum, tilt and query arrays). The
# default 4 GiB admits N <= 2**25 points per direction (a loss window of 3355 at h = 1e-4); larger requests
# are refused *before* anything is allocated (ValueError naming the size and what to change). Overridden at
# call time by the environment variable MCACCT_PLD_MEMORY_BUDGET (bytes, e.g. 16e9 on a large GPU).
MEMORY_BUDGET_BYTES = 4 << 30
BYTES_PER_POINT = 56
ENV_MEMORY_BUDGET = "MCACCT_PLD_MEMORY_BUDGET"
DEFAULT_H = 1e-4
# Round-off model (see "FFT round-off" in the module docstring): unit round-off, normwise FFT
# error constant per radix-2 level (Higham 2002, Thm 24.2: ~6.7 for twiddles within 2u), relative
# error of one complex multiplication (sqrt(5) without FMA, 2 with FMA), and a floor covering
# underflow / flush-to-zero anywhere in the pipeline.
U = 2.0 ** -53
FFT_C = 8.0
CMUL_C = 2.5
UNDERFLOW = 1e-280
# Relative inflation of the mass at +infinity in the certified queries of pld_delta / pld_epsilon (kernels.
# query_delta / query_epsilon): that mass never passes through the tilt or the FFT, so it carries only the
# rounding of its own evaluation (log1p, product, expm1, the Chernoff exponential with its exponent rounded up,
# one addition) and of the final products and sums, a few ulp each. It used to share the FFT's (1 + rho),
# which grows with the tilt chosen for the query (up to ~1e-8 for a query near the window top), so a larger
# epsilon could report a larger delta in the flat tail, where delta(epsilon) is the mass at infinity.
INF_REL = 16 * U
# Tilted compositions whose pointwise minimum gives the curve in group_privacy_conversion_epsilon.
GROUP_TILTS = 12
