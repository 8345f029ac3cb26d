"""Reports: :mod:`~mcacct.report.compare` (sigma of every scheme at equal expected batch size) and
:mod:`~mcacct.report.plot` (delta(epsilon) curves)."""
