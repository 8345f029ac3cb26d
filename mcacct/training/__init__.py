"""Training-side pieces: :mod:`~mcacct.training.batching` (b-min-sep, truncated and multi-attribution batch
samplers for a training loop, with the same laws as the accounted schemes)."""
