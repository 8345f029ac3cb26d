"""Bridges to other privacy libraries: :mod:`~mcacct.interop.jax_privacy` maps jax-privacy's batch selection
objects to mcacct's schemes and back (field mapping and the noise-multiplier conventions in ``docs/interop.md``)."""

from mcacct.interop.jax_privacy import (supported_batch_selections, from_jax_privacy,
                                        noise_multiplier_from_jax_privacy, noise_multiplier_to_jax_privacy,
                                        problem_from_jax_privacy, to_jax_privacy)

__all__ = ["from_jax_privacy", "to_jax_privacy", "problem_from_jax_privacy", "noise_multiplier_to_jax_privacy",
           "noise_multiplier_from_jax_privacy", "supported_batch_selections"]
