"""``python -m mcacct``: the ``mcacct`` command (:func:`mcacct.cli.main`)."""

import sys

from mcacct.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
