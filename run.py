"""Shortcut for ``tabmem run``: ``python run.py model=… dataset=… test=…`` (``-m``, ``--help``)."""

from tabmem.main import main

if __name__ == "__main__":
    main()
