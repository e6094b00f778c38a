"""Shortcut for ``tabmem tables`` (``make paper-tables``): the papers' tables and figures.

python scripts/paper_tables.py --experiment paper --models gpt-4o,oracle-memorizer
"""

import sys

from tabmem.cli import tables

if __name__ == "__main__":
    sys.exit(tables(sys.argv[1:]))
