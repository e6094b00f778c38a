"""``python -m tabmem.rescore``."""

import sys

from tabmem.rescore.cli import main

sys.exit(main())
