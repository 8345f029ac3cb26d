"""The ``mcacct`` console command, one package: :mod:`~mcacct.cli.commands` (``calibrate``, ``delta``,
``epsilon`` and the parser), :mod:`~mcacct.cli.flags` (flags and report fields shared by every subcommand and
by the launchers in ``launch/``), :mod:`~mcacct.cli.jobs` (``sample``, ``merge``, ``plot``),
:mod:`~mcacct.cli.pld` (``pld``) and :mod:`~mcacct.cli.compare` (``compare``)."""

from mcacct.cli.commands import main

__all__ = ["main"]
