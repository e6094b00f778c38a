"""Shortcut for ``tabmem calibration`` (``make calibrate``): the calibration table.

python scripts/calibration_table.py --tracking-uri sqlite:///elsewhere/mlflow.db --out cal/
"""

import sys

from tabmem.cli import calibration

if __name__ == "__main__":
    sys.exit(calibration(sys.argv[1:]))
