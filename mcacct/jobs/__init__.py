"""Runs as resumable shard jobs: :mod:`~mcacct.jobs.shards` (one sigma: shard files, fingerprints, merge) and
:mod:`~mcacct.jobs.calibration` (a calibration plan: every candidate and direction per shard, then Alg. 5); their
files are read and written whole and atomically, on local paths or object stores, by :mod:`~mcacct.jobs.storage`."""
