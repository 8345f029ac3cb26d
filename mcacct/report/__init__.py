"""Reports: :mod:`~mcacct.report.compare` (sigma of every scheme at equal expected batch size),
:mod:`~mcacct.report.plot` (delta(epsilon) curves) and :mod:`~mcacct.report.schema` (the one JSON schema of every
``--json`` report, docs/json.md)."""
