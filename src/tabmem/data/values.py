"""Values as compared across texts: the same value however a file or a model writes it."""

from __future__ import annotations

import math
from functools import lru_cache

MISSING_SPELLINGS = frozenset({"", "nan", "none", "null", "na", "n/a", "missing"})


@lru_cache(maxsize=1 << 17)
def normalize_value(text: str) -> str:
    """A value as compared with the data: stripped, unquoted, missing as "", numbers by value.
    Memoized: tables repeat their values, and the same texts are compared again and again."""
    value = text.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1].strip()
    if value.lower() in MISSING_SPELLINGS:
        return ""
    try:
        number = float(value)
    except ValueError:
        return value
    return repr(number) if number == number else value


def finite_number(text: str) -> float | None:
    """The text's value as a finite number, or None (not a number, nan or infinite)."""
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
