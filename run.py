"""Shortcut for ``tabmem run``: ``python run.py model=… dataset=… test=…`` (``-m``, ``--help``)."""

import sys

from tabmem.main import run

if __name__ == "__main__":
    sys.exit(run(sys.argv[1:], prog="run.py"))
