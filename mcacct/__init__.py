"""mcacct: a JAX-accelerated Monte Carlo privacy accountant for DP-BandMF with b-min-sep subsampling.

mcacct computes in float64 whatever the caller's ``jax_enable_x64``: importing it leaves JAX's global
configuration alone, and every public entry point runs in JAX's scoped x64 context (:mod:`mcacct.core.precision`;
the precision policy in the README). Float32 kernels remain available where requested (never certified).
"""

from mcacct.core import precision
from mcacct.schemes.bminsep import (BMinSep, expected_participation_rate,  # noqa: E402
                                    sample_participation, sampling_prob_from_batch_size)
from mcacct.schemes.api import privacy_loss, sample, sample_y  # noqa: E402
from mcacct.schemes.base import (AccountedScheme, Bounds, Draws, LossErrorModel, LossErrorParams, Scheme,  # noqa: E402
                                 SchemeSummary)
from mcacct.schemes.mechanism import KernelOptions, Mechanism  # noqa: E402
from mcacct.schemes.registry import SchemeInfo, register  # noqa: E402
from mcacct.strategies.banded import BandedToeplitz  # noqa: E402
from mcacct.kernels.sliding import sliding_dot  # noqa: E402
from mcacct.engine.problem import Problem  # noqa: E402
from mcacct.engine.estimate import Estimate, estimate  # noqa: E402
from mcacct.evr.calibrate import CalibrationResult, calibrate  # noqa: E402
from mcacct.noise_multiplier import NoiseMultiplier, get_noise_multiplier  # noqa: E402
from mcacct.interop.jax_privacy import (from_jax_privacy, problem_from_jax_privacy,  # noqa: E402
                                       to_jax_privacy)
from mcacct import evr  # noqa: E402
from mcacct import pld  # noqa: E402
from mcacct.composition import certified_composition, compose_mc_with_pld  # noqa: E402
from mcacct.schemes.multi_attribution import MultiAttribution  # noqa: E402
from mcacct.schemes.truncated import TruncatedBMinSep  # noqa: E402
from mcacct.schemes.cyclic_poisson import CyclicPoisson  # noqa: E402
from mcacct.schemes.balls_in_bins import BallsInBins  # noqa: E402
from mcacct.schemes.banded_inverse import BandedInverse, strategy_from_inverse  # noqa: E402
from mcacct import individual  # noqa: E402
from mcacct import dpis  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    # the front door: a certified noise multiplier in one call
    "get_noise_multiplier", "NoiseMultiplier",
    # schemes (what is accounted) and the strategy C
    "BMinSep", "TruncatedBMinSep", "MultiAttribution", "CyclicPoisson", "BallsInBins", "BandedInverse",
    "BandedToeplitz", "strategy_from_inverse",
    # adding a scheme: the contract, its base class and records, the registry
    "AccountedScheme", "Scheme", "Mechanism", "KernelOptions", "Draws", "Bounds", "LossErrorModel", "LossErrorParams",
    "SchemeSummary", "SchemeInfo", "register",
    # sampling and losses, for every scheme
    "sample", "sample_y", "privacy_loss", "sliding_dot", "sample_participation", "expected_participation_rate",
    "sampling_prob_from_batch_size",
    # Monte Carlo accounting: estimate, then Estimate-Verify-Release
    "Problem", "estimate", "Estimate", "calibrate", "CalibrationResult",
    # compositions with PLD-analysed mechanisms
    "compose_mc_with_pld", "certified_composition",
    # interoperation with jax-privacy
    "from_jax_privacy", "to_jax_privacy", "problem_from_jax_privacy",
    # the accountants' subpackages and the float64 policy
    "evr", "pld", "individual", "dpis", "precision",
]
