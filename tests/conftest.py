import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import mcacct  # noqa: E402,F401  (enables float64 before any test builds arrays)
