"""The floor every room stands on; it imports no other mcacct room.

* :mod:`~mcacct.core.validate` — the one validator module: checks that name the parameter and its allowed range;
* :mod:`~mcacct.core.precision` — the float64 policy (JAX's scoped x64 context around every entry point);
* :mod:`~mcacct.core.platform` — the target platform, CPU devices and the persistent compilation cache;
* :mod:`~mcacct.core.rates` — b-min-sep's participation rate and the sampling probability that gives it.
"""
