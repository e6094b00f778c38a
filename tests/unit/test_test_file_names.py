"""pytest imports test modules by their file name (no packages under tests/): two files with
the same name in different folders stop the whole run at collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_name_is_used_once() -> None:
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert names, "no test files found"
    assert [name for name, count in names.items() if count > 1] == []
