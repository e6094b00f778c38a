"""Shortcut for ``tabmem lab`` (``make lab``): the contamination lab.

python scripts/contamination_lab.py minimal training.method=lora checkpoints=[0,8]
"""

import sys

from tabmem.cli import lab

if __name__ == "__main__":
    sys.exit(lab(sys.argv[1:]))
